// cuda/kernels.cuh — the whole CUDA kernel set, one include: every launcher of the twins of
// cpu/kernels.h and cpu/fp8_kernels.h, in namespace train_gpt::cuda.
//
// Each launcher takes its cpu:: twin's arguments in the same order (FP32 where the CPU has
// acc_t<T>) followed by a cudaStream_t, and is a template over the storage type
// T ∈ {float, __nv_bfloat16, __half}:
//   encoder.cuh      encoder_forward, encoder_backward
//   layernorm.cuh    layernorm_forward, layernorm_backward
//   matmul.cuh       matmul_forward, matmul_backward, matmul_forward_fp8, matmul_backward_fp8 (cuBLASLt)
//   attention.cuh    attention_forward, attention_backward (flash-style, lse saved)
//   gelu.cuh         gelu_forward, gelu_backward
//   residual.cuh     residual_forward
//   classifier.cuh   fused_classifier
//   fp8.cuh          amax, quantize_fp8<T, Q>
//   global_norm.cuh  sum_squares
//   adamw.cuh        adamw_update
#pragma once

#include "cuda/common.cuh"

#include "cuda/adamw.cuh"
#include "cuda/attention.cuh"
#include "cuda/classifier.cuh"
#include "cuda/encoder.cuh"
#include "cuda/fp8.cuh"
#include "cuda/fp8_fused.cuh"
#include "cuda/gelu.cuh"
#include "cuda/global_norm.cuh"
#include "cuda/layernorm.cuh"
#include "cuda/matmul.cuh"
#include "cuda/residual.cuh"
