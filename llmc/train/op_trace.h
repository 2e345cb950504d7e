// train/op_trace.h — --trace-ops FILE: every kernel-set op a run calls, in order, one line each.
//
// The trace shows a reader which ops a step launches and with what shapes, on either kernel set:
//   encoder_forward B=2 T=16 C=32
//   layernorm_forward N=32 C=32
//   matmul_forward N=32 C=32 OC=96 bias
//   ...
// It wraps the run's Backend (a decorator: each op is written, then forwarded unchanged), so the
// model, its ops and their results are the same with and without it; scripts/check_docs.py
// checks docs/walkthrough.md's step against the trace of a short run. The FP8 extension
// (Backend::fp8) is forwarded without tracing: the trace is the 16-bit op set's.
//
// The file is one of the run's outputs, so it is handled like them: the path is checked with
// the run's directories before anything is written (check_trace_path), the lines are kept in
// memory until the trainer opens the file once those directories are locked, and every write,
// the flush and the close are checked: a trace that could not be written whole fails the run,
// naming the file. A trace is one process's: --resume does not take it from the checkpoint.
#pragma once

#include "backend.h"
#include "train/run_dirs.h"

#include <cstdio>
#include <memory>
#include <string>

namespace train_gpt {

class OpTraceFile {
  public:
    OpTraceFile() = default;
    ~OpTraceFile();   // closes without checking (the run failed already)
    OpTraceFile(const OpTraceFile&) = delete;
    OpTraceFile& operator=(const OpTraceFile&) = delete;
    void line(const std::string& text);   // kept until open(), then written
    void open(const std::string& path);   // creates or replaces the file; writes what was kept
    void finish();                        // flush and close; fails, naming the file, on any error

  private:
    void write(const std::string& text);
    std::string path_, pending_;
    std::FILE* out_ = nullptr;
};

// `inner`, with each op's line sent to `file` before the op runs.
std::unique_ptr<Backend> traced_kernel_set(std::unique_ptr<Backend> inner, std::shared_ptr<OpTraceFile> file);

// Refuses a --trace-ops path that is, or could become, another file of the run's: an existing
// file that is not a trace (a shard, a tokenizer, a checkpoint's weights, a log: a trace starts
// with "alloc bytes="), anything under the checkpoint directory (rotation deletes it, and a future
// checkpoint's name would be taken), and the output directory's log.jsonl, config.json and lock.
void check_trace_path(const std::string& path, const RunDirs& dirs);

}   // namespace train_gpt
