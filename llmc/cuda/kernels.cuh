// cuda/kernels.cuh — the whole CUDA kernel set, one include: every launcher of the twins of
// cpu/kernels.h and cpu/fp8_kernels.h, in namespace train_gpt::cuda.
//
// Each launcher takes its cpu:: twin's arguments in the same order (FP32 where the CPU has
// acc_t<T>) followed by a cudaStream_t, and is a template over the storage type
// T ∈ {float, __nv_bfloat16, __half}. What each op computes, its shapes and what it overwrites or
// accumulates: llmc/backend.h. The headers:
//   common.cuh          cudaCheck, storage conversions, warp/block reductions, the per-stream scratch
//   encoder.cuh         encoder_forward, encoder_backward
//   layernorm.cuh       layernorm_forward, residual_layernorm_forward, layernorm_backward
//   column_sums.cuh     add_column_sums (the bias gradients: fixed-order sums over rows)
//   matmul.cuh          matmul_forward, matmul_backward, matmul_forward_fp8, matmul_backward_fp8 (cuBLASLt)
//   attention_gemm.cuh  attention_forward_gemm, attention_backward_gemm (cuBLASLt batched GEMMs, T×T in scratch)
//   attention_decode.cuh attention_decode (new queries against a KV cache: sampling)
//   gelu.cuh            gelu_forward, gelu_backward, gelu_backward_bias
//   residual.cuh        residual_forward
//   classifier.cuh      fused_classifier
//   fp8.cuh             amax, amax_into, quantize_fp8, quantize_transpose_fp8, the FP8 scale state ops
//   fp8_fused.cuh       casts fused into their producers: layernorm, GELU, GELU backward, AdamW → FP8
//   global_norm.cuh     sum_squares
//   adamw.cuh           adamw_update
// (op_profiler.cuh, the --profile timer, is the backend's, not a kernel.)
#pragma once

#include "cuda/common.cuh"

#include "cuda/adamw.cuh"
#include "cuda/attention_decode.cuh"
#include "cuda/attention_gemm.cuh"
#include "cuda/classifier.cuh"
#include "cuda/column_sums.cuh"
#include "cuda/encoder.cuh"
#include "cuda/fp8.cuh"
#include "cuda/fp8_fused.cuh"
#include "cuda/gelu.cuh"
#include "cuda/global_norm.cuh"
#include "cuda/layernorm.cuh"
#include "cuda/matmul.cuh"
#include "cuda/matmul_epilogues.cuh"
#include "cuda/residual.cuh"
