// cuda/matmul_epilogues.cuh — the GEMMs of --gemm-epilogues (model/epilogue_block_ops.h), on
// cuBLASLt's epilogues: GELU and its gradient applied to a GEMM's FP32 result before it is rounded,
// and the bias gradient summed by the weight-gradient GEMM. Twins: cpu::matmul_forward_gelu and
// cpu::matmul_backward_dgelu (cpu/kernels.h); the bias gradient's is cpu::matmul_backward's.
//
// What each saves on the bf16 step (d12, N = B·T rows; bytes of one layer, 2 per value):
//   matmul_forward_gelu    fc's GEMM writes fch and fch_gelu      gelu_forward's read + write of
//                          (GELU_AUX_BIAS)                        (N, 4C) go: −2·N·4C·2 + N·4C·2
//   matmul_backward_dgelu  fcproj's dinp GEMM applies gelu'(fch)  gelu_backward's pass goes: its read
//                          (DGELU, reading fch as aux)            of dfch_gelu and write of dfch
//   matmul_backward_bgrad  each dW GEMM sums its dout (BGRADB)    the column-sum pass over dout goes
//
// Numerics. The GELU epilogues round once where matmul_forward + gelu_forward (matmul_backward +
// gelu_backward) round twice, so bf16 results differ from the unfused ops' by about one rounding of
// the activation; the twins compute exactly this. cuBLASLt documents neither its GELU formula nor
// its tanh: the GPU test checks them against the twin's (tanh approximation). The bias gradient of
// BGRADB is cuBLASLt's own sum over the rows (an order it does not document, reproducible for one
// algorithm on one GPU), written into a scratch vector and added to dbias (cuBLASLt overwrites
// it; the gradients accumulate over micro-batches).
//
// Where cuBLASLt cannot run an epilogue (the aux's leading dimension must be a multiple of 8, or
// a type it does not pair), the same function runs as an FP32-output GEMM into scratch followed
// by a small kernel that applies the epilogue: the twin's arithmetic, slower.
#pragma once

#include "cuda/gelu.cuh"
#include "cuda/matmul.cuh"

namespace train_gpt::cuda {

namespace detail {

// pre (n) = round(z + bias), out (n) = round(gelu(z + bias)), z (N, OC) the FP32 GEMM result
template <typename T>
__global__ void gelu_epilogue_kernel(T* out, T* pre, const float* z, const T* bias, int N, int OC) {
    const size_t n = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = bias != nullptr ? __fadd_rn(z[i], to_float(bias[i % OC])) : z[i];
        pre[i] = from_float<T>(v);
        out[i] = from_float<T>(gelu(v));
    }
}

// dinp (n) = round(gelu'(pre) · g), g the FP32 GEMM result
template <typename T>
__global__ void dgelu_epilogue_kernel(T* dinp, const float* g, const T* pre, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dinp[i] = from_float<T>(gelu_backward_value(to_float(pre[i]), g[i]));
    }
}

// sums (n) += partial (n) (static: one copy per translation unit, as for a template)
static __global__ void add_vector_kernel(float* sums, const float* partial, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) sums[i] = __fadd_rn(sums[i], partial[i]);
}

inline int epilogue_blocks(size_t n) { return (int)std::max<size_t>(1, std::min<size_t>((n + 255) / 256, 65536)); }

}   // namespace detail

// out (N,OC) = round(gelu(z)), pre (N,OC) = round(z), z = inp (N,C) · weight (OC,C)ᵀ + bias (OC) in
// FP32: one GEMM with the GELU_AUX_BIAS epilogue (D = out, aux = pre).
template <typename T>
void matmul_forward_gelu(T* out, T* pre, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                         cudaStream_t stream) {
    if (N <= 0 || OC <= 0) return;
    const cudaDataType_t t = cuda_data_type<T>();
    const GemmEpilogueArgs gelu_aux{GemmEpilogue::kGeluAux, pre, OC, nullptr};
    const bool ran = OC % 8 == 0 && gemm("matmul_forward_gelu", stream, OC, N, C, GemmOperand{weight, t, C, true},
                                         GemmOperand{inp, t, C, false}, out, t, OC, 0.0f, bias, t, false, {},
                                         IfUnsupported::ReturnFalse, 1.0f, false, gelu_aux);
    if (ran) return;
    float* z = static_cast<float*>(scratch((size_t)N * OC * sizeof(float), stream));
    gemm("matmul_forward_gelu (FP32 result)", stream, OC, N, C, GemmOperand{weight, t, C, true},
         GemmOperand{inp, t, C, false}, z, CUDA_R_32F, OC, 0.0f, nullptr, t, false);
    detail::gelu_epilogue_kernel<<<detail::epilogue_blocks((size_t)N * OC), 256, 0, stream>>>(out, pre, z, bias, N, OC);
    cudaCheck(cudaGetLastError());
}

// dinp (N,C) = round(gelu'(pre) · g), g = dout (N,OC) · weight (OC,C) in FP32, pre (N,C) the GELU
// input the forward kept: one GEMM with the DGELU epilogue (aux = pre).
template <typename T>
void matmul_backward_dgelu(T* dinp, const T* dout, const T* weight, const T* pre, int N, int C, int OC,
                           cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    const cudaDataType_t t = cuda_data_type<T>();
    const GemmEpilogueArgs dgelu{GemmEpilogue::kDGelu, const_cast<T*>(pre), C, nullptr};   // read, not written
    const bool ran = C % 8 == 0 && gemm("matmul_backward_dgelu", stream, C, N, OC, GemmOperand{weight, t, C, false},
                                        GemmOperand{dout, t, OC, false}, dinp, t, C, 0.0f, nullptr, t, false, {},
                                        IfUnsupported::ReturnFalse, 1.0f, false, dgelu);
    if (ran) return;
    float* g = static_cast<float*>(scratch((size_t)N * C * sizeof(float), stream));
    gemm("matmul_backward_dgelu (FP32 result)", stream, C, N, OC, GemmOperand{weight, t, C, false},
         GemmOperand{dout, t, OC, false}, g, CUDA_R_32F, C, 0.0f, nullptr, t, false);
    detail::dgelu_epilogue_kernel<<<detail::epilogue_blocks((size_t)N * C), 256, 0, stream>>>(dinp, g, pre,
                                                                                              (size_t)N * C);
    cudaCheck(cudaGetLastError());
}

// matmul_backward with the bias gradient summed by the weight-gradient GEMM (BGRADB: Σ over its
// reduction dimension N of its operand dout) instead of a column-sum pass over dout. The same
// arguments and results as matmul_backward; where cuBLASLt refuses BGRADB, matmul_backward's way.
template <typename T>
void matmul_backward_bgrad(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int N,
                           int C, int OC, cudaStream_t stream) {
    if (dbias == nullptr || dweight == nullptr || N <= 0 || OC <= 0 || C <= 0) {
        return matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, stream);
    }
    const cudaDataType_t t = cuda_data_type<T>();
    detail::matmul_backward_gemms(dinp, (float*)nullptr, (float*)nullptr, dout, inp, weight, N, C, OC, false, stream);
    float* partial = static_cast<float*>(scratch((size_t)OC * sizeof(float), stream));
    const GemmEpilogueArgs bgrad{GemmEpilogue::kBGradB, nullptr, 0, partial};
    const bool ran = gemm("matmul_backward_bgrad (dweight, dbias)", stream, C, OC, N, GemmOperand{inp, t, C, false},
                          GemmOperand{dout, t, OC, true}, dweight, CUDA_R_32F, C, 1.0f, nullptr, t, false, {},
                          IfUnsupported::ReturnFalse, 1.0f, false, bgrad);
    if (!ran) return matmul_backward((T*)nullptr, dweight, dbias, dout, inp, weight, N, C, OC, stream);
    detail::add_vector_kernel<<<ceil_div(OC, 256), 256, 0, stream>>>(dbias, partial, OC);
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
