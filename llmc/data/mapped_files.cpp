// mapped_files.cpp — see mapped_files.h.
#include "data/mapped_files.h"

#include "utils.h"

#include <atomic>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>

namespace train_gpt {

namespace {

// The registry is a chain of blocks: a block is filled slot by slot, and when every slot of every
// block is taken a new block is allocated and linked at the end (never freed). Registering runs in
// ordinary code; the handler only walks the chain, reading pointers published with release stores,
// so it can run at any moment (async-signal-safe), whatever the number of shards.
constexpr int kMappingsPerBlock = 4096;

struct Mapping {
    std::atomic<const char*> begin{nullptr};
    const char* end = nullptr;
    const char* path = nullptr;   // strdup'ed at registration, never freed while registered
};
struct MappingBlock {
    Mapping slots[kMappingsPerBlock];
    std::atomic<MappingBlock*> next{nullptr};
};
MappingBlock g_first_block;
std::mutex g_registering;          // registrations and removals, one at a time (the handler takes no lock)
size_t g_no_free_slot_below = 0;   // every slot before this global index is taken: where a search starts

// Global slot i is slot i % kMappingsPerBlock of the chain's block i / kMappingsPerBlock; the
// blocks up to it are made if the chain is shorter (registration, under g_registering).
Mapping& slot_at(size_t i) {
    MappingBlock* block = &g_first_block;
    for (size_t b = 0; b < i / kMappingsPerBlock; b++) {
        if (block->next.load() == nullptr) block->next.store(new MappingBlock);   // linked once whole
        block = block->next.load();
    }
    return block->slots[i % kMappingsPerBlock];
}

void write_str(const char* s) {
    for (size_t n = std::strlen(s); n > 0;) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

void on_bus_error(int sig, siginfo_t* info, void*) {
    const char* at = static_cast<const char*>(info->si_addr);
    for (const MappingBlock* block = &g_first_block; block != nullptr; block = block->next.load()) {
        for (const Mapping& m : block->slots) {
            const char* begin = m.begin.load();
            if (begin == nullptr || at < begin || at >= m.end) continue;
            write_str("error: ");
            write_str(m.path);
            write_str(
                " was truncated or changed while the run read it (a bus error reading its mapped pages); its data "
                "cannot be trusted: restore the file, then --resume\n");
            _exit(1);
        }
    }
    ::signal(sig, SIG_DFL);   // not a mapped shard: the default action, once the handler returns
    ::raise(sig);
}

}   // namespace

size_t register_mapped_file(const void* base, size_t bytes, const std::string& path) {
    std::lock_guard<std::mutex> lock(g_registering);
    for (size_t i = g_no_free_slot_below;; i++) {
        Mapping& m = slot_at(i);
        if (m.begin.load() != nullptr) continue;
        m.end = static_cast<const char*>(base) + bytes;
        m.path = ::strdup(path.c_str());
        if (m.path == nullptr) fail("out of host memory registering the mapping of %s", path.c_str());
        m.begin.store(static_cast<const char*>(base));   // the slot is whole before it is seen
        g_no_free_slot_below = i + 1;
        return i;
    }
}

void unregister_mapped_file(size_t slot) {
    std::lock_guard<std::mutex> lock(g_registering);
    Mapping& m = slot_at(slot);
    m.begin.store(nullptr);
    std::free(const_cast<char*>(m.path));
    m.path = nullptr;
    g_no_free_slot_below = std::min(g_no_free_slot_below, slot);
}

void install_bus_error_handler() {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus_error;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO;
    if (::sigaction(SIGBUS, &action, nullptr) != 0)
        fail("cannot install a handler for SIGBUS: %s", std::strerror(errno));
}

}   // namespace train_gpt
