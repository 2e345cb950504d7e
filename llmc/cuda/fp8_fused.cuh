// cuda/fp8_fused.cuh — FP8 casts fused into the kernels that produce their operands (DESIGN §4;
// twins: cpu::gelu_forward_fp8, cpu::layernorm_forward_fp8, cpu::gelu_backward_fp8).
//
// An unfused FP8 GEMM input costs its producer's write in bf16 and the cast's read of it. Fused,
// the cast (cuda/fp8.cuh) computes each value from the producer's own inputs and quantises it in
// registers; the bf16 tensor never reaches memory:
//   gelu_forward_fp8       q, qt = cast(gelu(inp))                       X of fcproj, E4M3
//   layernorm_forward_fp8  q, qt = cast(layernorm(inp)); mean, rstd      X of qkv and fc, E4M3
//   gelu_backward_fp8      dinp = gelu'(inp)·dout;   q, qt = cast(dinp)  dY of fc, E5M2
//   layernorm_backward_fp8 dinp += layernorm backward; q, qt = cast(dinp)  dY of attproj, fcproj, E5M2
//   adamw_update_fp8       AdamW on a weight matrix; q, qt = cast(W)     W of every FP8 GEMM, E4M3
// Each value is rounded to the activation dtype T before it is cast, exactly as the unfused
// producer's store would round it, and computed by the same device function as that producer
// (gelu, layernorm_value, gelu_backward_value, adamw_element), whose roundings are spelled out
// (no multiply-add contraction left to the compiler): fused and unfused give the same bits,
// statistics included.
// Only the forward casts are needed with a scale not yet known (a just-in-time amax): called with
// q = qt = null they produce the statistics alone. These fused casts run the vectorised
// cast-with-transpose (cuda/fp8.cuh) wherever the shape allows, the same bytes as the scalar one.
#pragma once

#include "cuda/adamw.cuh"
#include "cuda/fp8.cuh"
#include "cuda/gelu.cuh"
#include "cuda/layernorm.cuh"

namespace train_gpt::cuda {

// v → gelu(v) as gelu_forward stores it in T
template <typename T>
struct GeluRounded {
    __device__ __forceinline__ float operator()(float v) const { return to_float(from_float<T>(gelu(v))); }
};

// (r, c) → layernorm(inp)[r, c] as layernorm_forward stores it in T, from the row statistics
template <typename T>
struct LayerNormSource {
    using Value = T;
    const T* inp;   // (N, C)
    const float* mean;
    const float* rstd;
    const T* weight;
    const T* bias;
    int C;
    __device__ __forceinline__ float operator()(int r, int c) const {
        const float y =
            layernorm_value(to_float(inp[(size_t)r * C + c]), mean[r], rstd[r], to_float(weight[c]), to_float(bias[c]));
        return to_float(from_float<T>(y));
    }
    template <int P>
    __device__ __forceinline__ void values(int r, int c, float* v) const {
        const Packed<T, P> xv = load_packed_cs<P>(inp + (size_t)r * C + c);
        const Packed<T, P> wv = load_packed<P>(weight + c);
        const Packed<T, P> bv = load_packed<P>(bias + c);
        const float m = mean[r], s = rstd[r];
#pragma unroll
        for (int k = 0; k < P; k++) {
            v[k] = to_float(from_float<T>(layernorm_value(to_float(xv[k]), m, s, to_float(wv[k]), to_float(bv[k]))));
        }
    }
    bool aligned() const { return is_aligned(inp, 16) && is_aligned(weight, 16) && is_aligned(bias, 16); }
};

// (r, c) → dinp[r, c] = gelu'(inp)·dout, stored in T and returned (gelu_backward's value): the
// cast's single visit of each element writes it too
template <typename T>
struct GeluBackwardSource {
    using Value = T;
    T* dinp;   // (rows, cols)
    const T* inp;
    const T* dout;
    int cols;
    __device__ __forceinline__ float operator()(int r, int c) const {
        const size_t i = (size_t)r * cols + c;
        const T v = from_float<T>(gelu_backward_value(to_float(inp[i]), to_float(dout[i])));
        dinp[i] = v;
        return to_float(v);
    }
    template <int P>
    __device__ __forceinline__ void values(int r, int c, float* v) const {
        const size_t i = (size_t)r * cols + c;
        const Packed<T, P> xv = load_packed_cs<P>(inp + i);
        const Packed<T, P> dv = load_packed_cs<P>(dout + i);
        Packed<T, P> out;
#pragma unroll
        for (int k = 0; k < P; k++) {
            out[k] = from_float<T>(gelu_backward_value(to_float(xv[k]), to_float(dv[k])));
            v[k] = to_float(out[k]);
        }
        store_packed(dinp + i, out);
    }
    bool aligned() const { return is_aligned(dinp, 16) && is_aligned(inp, 16) && is_aligned(dout, 16); }
};

// (r, c) → the AdamW update of W[r, c], returning the new working weight (the optimizer's half of
// delayed scaling: the weight's next scale is known before the update, so the cast rides along)
template <typename T>
struct AdamWSource {
    float* master;   // (rows, cols) each, master may be null
    T* working;
    float* m;
    float* v;
    const float* grads;
    int cols;
    AdamWScalars s;
    using Value = T;
    __device__ __forceinline__ float operator()(int r, int c) const {
        return to_float(adamw_element((size_t)r * cols + c, master, working, m, v, grads, s));
    }
    template <int P>
    __device__ __forceinline__ void values(int r, int c, float* out) const {   // FP32 state: element by element
#pragma unroll
        for (int k = 0; k < P; k++)
            out[k] = (*this)(r, c + k);
    }
    bool aligned() const { return true; }
};

// q (rows, cols) and/or qt (cols, rows) from gelu(inp (rows, cols)). Returns at once.
template <typename T, typename Q>
void gelu_forward_fp8(Q* q, Q* qt, const T* inp, int rows, int cols, const float* scale, Fp8Counters* counters,
                      cudaStream_t stream) {
    quantize_transpose_fp8(q, qt, inp, rows, cols, scale, counters, stream, GeluRounded<T>{}, /*vectorised=*/true);
}

// mean, rstd (N) of inp (N, C) (unless stats_ready: they hold them already), then q (N, C) and/or
// qt (C, N) from layernorm(inp). Returns at once.
template <typename T, typename Q>
void layernorm_forward_fp8(Q* q, Q* qt, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                           int C, const float* scale, Fp8Counters* counters, cudaStream_t stream,
                           bool stats_ready = false) {
    if (!stats_ready)
        layernorm_forward<T>(nullptr, mean, rstd, inp, weight, bias, N, C, stream);   // the statistics only
    quantize_transpose_source(q, qt, LayerNormSource<T>{inp, mean, rstd, weight, bias, C}, N, C, scale, counters,
                              stream, /*vectorised=*/true);
}

// dinp (rows, cols) = gelu'(inp) · dout, then q (rows, cols) and qt (cols, rows) from dinp, in
// one pass. Returns at once.
template <typename T, typename Q>
void gelu_backward_fp8(T* dinp, Q* q, Q* qt, const T* inp, const T* dout, int rows, int cols, const float* scale,
                       Fp8Counters* counters, cudaStream_t stream) {
    quantize_transpose_source(q, qt, GeluBackwardSource<T>{dinp, inp, dout, cols}, rows, cols, scale, counters, stream,
                              /*vectorised=*/true);
}

// adamw_update of one weight matrix (rows, cols), then q (rows, cols) and qt (cols, rows) of the
// new working weights, in one pass. Returns at once.
template <typename T, typename Q>
void adamw_update_fp8(float* master, T* working, float* m, float* v, const float* grads, int rows, int cols, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t, Q* q, Q* qt,
                      const float* scale, Fp8Counters* counters, cudaStream_t stream) {
    const AdamWScalars s = adamw_scalars(lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    quantize_transpose_source(q, qt, AdamWSource<T>{master, working, m, v, grads, cols, s}, rows, cols, scale, counters,
                              stream, /*vectorised=*/true);
}

// The sink of layernorm_backward_kernel (cuda/layernorm.cuh) that casts each new dinp value — the
// residual stream's gradient, which is the output gradient (dY) of the projection below — to FP8:
// q (N, C) row by row, and qt (C, N): a thread owns a channel pack for the block's kLnBwdRows = 16
// rows, so it holds each channel's 16 consecutive rows of qt in registers and writes them as one
// 16-byte store (N a multiple of 16, every block's 16 rows whole).
template <typename Q, int P>
struct LayerNormBackwardCast {
    Q* q;
    Q* qt;
    const float* scale_ptr;
    Fp8Counters* counters;
    int N, C;
    ThreadCastStats stats;
    Packed<unsigned char, kLnBwdRows> column[P];   // qt bytes of the pack's channels, this block's rows

    template <int PP, typename T>
    __device__ __forceinline__ void row(size_t i, int r, int c, const Packed<T, PP>& dx) {
        static_assert(PP == P, "the sink's pack is the kernel's");
        const float scale = *scale_ptr;
        Packed<unsigned char, P> b;
#pragma unroll
        for (int k = 0; k < P; k++) {
            b[k] = stats.cast<Q>(to_float(dx[k]), scale);
            column[k][r] = b[k];
        }
        if (q != nullptr) store_packed(reinterpret_cast<unsigned char*>(q) + i * C + c, b);
    }
    __device__ __forceinline__ void end_pack(int row0, int c) {
        if (qt == nullptr) return;
#pragma unroll
        for (int k = 0; k < P; k++)
            store_packed(reinterpret_cast<unsigned char*>(qt) + (size_t)(c + k) * N + row0, column[k]);
    }
    __device__ __forceinline__ void commit() {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            atomicAdd(&counters->count, (unsigned long long)N * (unsigned long long)C);
        stats.commit(counters);
    }
};

// Whether layernorm_backward_fp8 runs fused for these buffers: the vectorised layernorm backward,
// whole 16-row blocks, outputs aligned for their 8- and 16-byte stores.
template <typename T, typename Q>
bool layernorm_backward_fp8_fuses(const T* dinp, const T* dout, const T* inp, const T* weight, const Q* q, const Q* qt,
                                  int N, int C) {
    return sizeof(T) == 2 && layernorm_backward_vectorised(dinp, dout, inp, weight, C) && N % kLnBwdRows == 0 &&
           is_aligned(q, 16) && is_aligned(qt, 16);
}

// layernorm_backward (dinp +=, dweight +=, dbias +=, dinp_sums +=), then q (N, C) and qt (C, N) of the
// new dinp, in one pass (layernorm_backward_fp8_fuses must hold). Returns at once.
template <typename T, typename Q>
void layernorm_backward_fp8(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                            const float* mean, const float* rstd, int N, int C, float* dinp_sums, Q* q, Q* qt,
                            const float* scale, Fp8Counters* counters, cudaStream_t stream) {
    TG_CUDA_REQUIRE(
        layernorm_backward_vectorised(dinp, dout, inp, weight, C),
        "the FP8 cast of the layernorm backward needs its vectorised kernel (layernorm_backward_fp8_fuses)");
    LayerNormBackwardCast<Q, kPack<T>> sink{q, qt, scale, counters, N, C, {}, {}};
    launch_layernorm_backward<kPack<T>>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dinp_sums, stream,
                                        sink);
}

}   // namespace train_gpt::cuda
