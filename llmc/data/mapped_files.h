// mapped_files.h — which file a memory-mapped address belongs to, for the one message a bus error
// can give.
//
// The data loader maps its shards (data/dataloader.h). A shard truncated or replaced while the run
// reads it turns the next read of a page past its new end into SIGBUS, which would end the process
// with "Bus error" and nothing else. The loader registers every mapping here; the handler
// (install_bus_error_handler, at start) looks the faulting address up, writes one line naming the
// file to stderr, and ends the process with exit code 1. The registry grows with the shards (a chain
// of blocks, none ever freed) and an entry is written whole before its mapping is read, so the
// handler only reads it (async-signal-safe).
#pragma once

#include <cstddef>
#include <string>

namespace train_gpt {

// [base, base + bytes) maps `path` (any number of mappings); returns the slot to unregister it by.
size_t register_mapped_file(const void* base, size_t bytes, const std::string& path);
void unregister_mapped_file(size_t slot);
// SIGBUS in a registered mapping: "error: <path> was truncated or changed while the run read it
// (...)" and _exit(1); elsewhere: the signal's default action.
void install_bus_error_handler();

}   // namespace train_gpt
