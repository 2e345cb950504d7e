// cuda_unavailable.cpp — the CUDA kernel set's and the NCCL Comm's entry points in a build without
// the CUDA toolkit (the Makefile compiles this file instead of llmc/**/*.cu when there is no nvcc):
// there is no GPU to find, and asking for the CUDA kernel set stops with that reason.
#include "cuda/cuda_backend.h"
#include "distributed/comm_nccl.h"
#include "utils.h"

namespace train_gpt {

namespace {
constexpr const char* kReason = "this train_gpt was built without CUDA (no nvcc at build time)";
}

std::unique_ptr<Backend> make_cuda_backend(DType, int, const CudaOptions&) { fail("%s", kReason); }

bool cuda_flash_attention_supports(int, DType) { return false; }

int cuda_device_count(std::string* reason) {
    if (reason != nullptr) *reason = kReason;
    return 0;
}

std::string cuda_device_name(int) { return ""; }

std::unique_ptr<Comm> make_nccl_comm(Comm&) { fail("NCCL: %s", kReason); }

}   // namespace train_gpt
