// cuda_backend.h — the CUDA kernel set behind the Backend interface (cuda/backend_cuda.cu).
//
// Host-compiled code may include this header: it names no CUDA type. The backend keeps every
// buffer in device memory (cudaMalloc, zero-initialised) and runs every op on one stream of its
// own; the ops that hand a value back to the host (sum_squares, copy_to_host) and copies of
// more than 1 MiB to the device return when it is ready, every other op (the FP8 casts and the
// small copies included) is queued and returns at once. The kernels are compiled for the
// GENCODE of the Makefile (sm_90a by default); a device without a matching image is rejected
// when the backend is made.
#pragma once

#include "backend.h"

#include <memory>
#include <string>

namespace train_gpt {

// Choices of the CUDA kernel set, from the trainer's flags (each is in --help and config.json).
struct CudaOptions {
    // --attention: the GEMM attention (cuda/attention_gemm.cuh: cuBLASLt, T×T scores in scratch), or
    // the flash attention (cuda/attention_flash.cuh: mma.sync tensor cores, nothing T×T), which
    // runs where cuda_flash_attention_supports() says so; elsewhere the GEMM attention runs
    bool flash_attention = false;
    // --flash-backward wide (with flash_attention): the backward's kernels with two m-tiles per warp
    // (cuda/attention_flash_bwd_wide.cuh), the same values in fewer shared-memory reads; the FP8
    // backward with its fused cast keeps the default kernels
    bool flash_backward_wide = false;
    // --attention cudnn: cuDNN's fused attention (cuda/attention_cudnn.h) on bf16/fp16; fp32 takes
    // the GEMM attention
    bool cudnn_attention = false;
    // --fused-kernels: the ops that fuse two steps run as one kernel — the FP8 casts fused into their
    // producers (cuda/fp8_fused.cuh), the residual add fused into the next layernorm, the bias
    // gradients summed by the layernorm and GELU backward that write their input — and the FP8
    // casts with transpose run the vectorised kernel (cuda/fp8.cuh). false: the two steps as the
    // separate kernels validated on a GPU, the scalar cast (the same bits), the default until the
    // new ones are
    bool fused_kernels = false;
    // --gemm-autotune: each new GEMM problem times cuBLASLt's candidate algorithms and keeps the
    // fastest (cuda/matmul.cuh gemm()); else the heuristic's first that launches. Runs are then
    // bit-reproducible only as far as the timing picks the same algorithms. log: one line per
    // problem timed (rank 0's).
    bool gemm_autotune = false;
    bool log_gemm_autotune = false;
    // --profile: GPU time per op from CUDA events around every op (cuda/op_profiler.cuh), printed
    // when the backend is destroyed; no synchronisation is added
    bool profile = false;
    // -p tf32 (fp32 storage only): the matmul ops' GEMMs on TF32 tensor cores (cuda/matmul.cuh,
    // matmul_forward_tf32), the other ops fp32's
    bool tf32_gemms = false;
    // --gemm-epilogues: matmul_backward's bias gradients summed by the dW GEMM (cuBLASLt's BGRADB
    // epilogue, cuda/matmul_epilogues.cuh) instead of a column-sum pass; the GELU epilogues are
    // ops of their own (matmul_forward_gelu, matmul_backward_dgelu), which the model calls under it
    bool gemm_epilogues = false;
};

// The CUDA kernel set for activations of `dtype` on GPU `device` (made current for this thread).
std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device, const CudaOptions& options = {});

// Whether the flash attention takes this head size and activation dtype (64; bf16 or fp16).
bool cuda_flash_attention_supports(int head_size, DType dtype);

// Number of CUDA devices; 0 (with the reason) when there is no GPU or no usable driver.
int cuda_device_count(std::string* reason);

// The name of CUDA device `device` ("NVIDIA H200"), or "" when it cannot be asked.
std::string cuda_device_name(int device);

}   // namespace train_gpt
