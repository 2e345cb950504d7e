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
#pragma once

#include "backend.h"

#include <memory>
#include <string>

namespace train_gpt {

// `inner`, with each op written to `path` (created or replaced; a path that cannot be opened fails,
// naming it) before it runs.
std::unique_ptr<Backend> traced_kernel_set(std::unique_ptr<Backend> inner, const std::string& path);

}   // namespace train_gpt
