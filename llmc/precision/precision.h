// precision.h — the run-time precision modes (DESIGN §3) and the dtype of each buffer class.
//
//   mode  | working weights, activations | GEMM operands           | master weights, grads, Adam
//   fp32  | fp32                         | fp32                    | fp32
//   tf32  | fp32                         | fp32, rounded to TF32   | fp32
//         |   (the matmul ops' GEMMs on TF32 tensor cores: a 10-bit fraction, FP32 accumulation;
//         |    attention's products and everything else stay fp32)
//   bf16  | bf16                         | bf16                    | fp32
//   fp16  | fp16 (+ dynamic loss scale)  | fp16                    | fp32
//   fp8   | bf16                         | X, W: E4M3 · dY: E5M2   | fp32
// Norm statistics, softmax, cross-entropy and the gradient norm are FP32 in every mode.
#pragma once

#include <cstddef>
#include <string>

namespace train_gpt {

enum class Precision { FP32, BF16, FP16, FP8, TF32 };
enum class DType { F32, BF16, F16 };   // storage of activations and working weights

Precision parse_precision(const std::string& name);   // fp32|tf32|bf16|fp16|fp8, else fails
const char* precision_name(Precision p);
DType activation_dtype(Precision p);   // fp8 keeps bf16 activations, tf32 fp32 ones
size_t dtype_size(DType d);
const char* dtype_name(DType d);

}   // namespace train_gpt
