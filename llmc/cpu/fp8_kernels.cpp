// cpu/fp8_kernels.cpp — see fp8_kernels.h.
#include "cpu/fp8_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace train_gpt::cpu {

namespace {

// The FP8 values of q as floats, without their scale (exact).
template <typename Q>
std::vector<float> unscaled(const Q* q, size_t n) {
    std::vector<float> out(n);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++)
        out[i] = q[i].to_float();
    return out;
}

}   // namespace

template <typename T>
float amax(const T* x, size_t n) {
    float result = 0.0f;
    bool any_nan = false;
#pragma omp parallel for reduction(max : result) reduction(|| : any_nan)
    for (size_t i = 0; i < n; i++) {
        float v = std::fabs((float)load(x[i]));
        if (std::isnan(v))
            any_nan = true;
        else
            result = std::max(result, v);
    }
    return any_nan ? NAN : result;
}

template <typename T, typename Q>
Fp8CastStats quantize_fp8(Q* q, const T* x, size_t n, float scale) {
    const float max_q = Q::max_finite;
    size_t saturated = 0, flushed = 0, nan = 0;
#pragma omp parallel for reduction(+ : saturated, flushed, nan)
    for (size_t i = 0; i < n; i++) {
        const float v = (float)load(x[i]);
        const float scaled = v * scale;
        q[i] = Q::from_float(scaled);
        if (std::isnan(v)) {
            nan++;
        } else if (std::fabs(scaled) > max_q) {
            saturated++;
        } else if (v != 0.0f && q[i].to_float() == 0.0f) {
            flushed++;
        }
    }
    Fp8CastStats stats;
    stats.amax = amax(x, n);
    stats.count = n;
    stats.saturated = saturated;
    stats.flushed = flushed;
    stats.nan = nan;
    return stats;
}

template <typename T>
void matmul_forward_fp8(T* out, const fp8e4m3* inp, float inp_inv_scale, const fp8e4m3* weight, float weight_inv_scale,
                        const T* bias, int N, int C, int OC) {
    std::vector<float> x = unscaled(inp, (size_t)N * C), w = unscaled(weight, (size_t)OC * C);
    std::vector<float> acc((size_t)N * OC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, x.data(), C, w.data(), C, 0.0f, acc.data(),
                OC);   // Σ q_x q_w, FP32 accumulate
    const float dequant = inp_inv_scale * weight_inv_scale;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < OC; j++) {
            float v = acc[(size_t)i * OC + j] * dequant + (bias != nullptr ? (float)load(bias[j]) : 0.0f);
            out[(size_t)i * OC + j] = store<T>(v);
        }
    }
}

template <typename T, typename Q>
Fp8CastStats quantize_transpose_fp8(Q* q, Q* qt, const T* x, int rows, int cols, float scale) {
    const size_t n = (size_t)rows * cols;
    std::vector<Q> own;
    Q* rowmajor = q;
    if (rowmajor == nullptr) {   // only the transposed layout is wanted: cast into a temporary
        own.resize(n);
        rowmajor = own.data();
    }
    const Fp8CastStats stats = quantize_fp8(rowmajor, x, n, scale);
    if (qt != nullptr) {
#pragma omp parallel for
        for (int c = 0; c < cols; c++) {
            for (int r = 0; r < rows; r++)
                qt[(size_t)c * rows + r] = rowmajor[(size_t)r * cols + c];
        }
    }
    return stats;
}

template <typename T, typename Q>
Fp8CastStats gelu_forward_fp8(Q* q, Q* qt, const T* inp, int rows, int cols, float scale) {
    std::vector<T> y((size_t)rows * cols);   // what the unfused forward would write
    gelu_forward(y.data(), inp, y.size());
    return quantize_transpose_fp8(q, qt, y.data(), rows, cols, scale);
}

template <typename T, typename Q>
Fp8CastStats layernorm_forward_fp8(Q* q, Q* qt, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                                   int N, int C, float scale) {
    std::vector<T> y((size_t)N * C);
    layernorm_forward(y.data(), mean, rstd, inp, weight, bias, N, C);
    return quantize_transpose_fp8(q, qt, y.data(), N, C, scale);
}

template <typename T, typename Q>
Fp8CastStats gelu_backward_fp8(T* dinp, Q* q, Q* qt, const T* inp, const T* dout, int rows, int cols, float scale) {
    gelu_backward(dinp, inp, dout, (size_t)rows * cols);
    return quantize_transpose_fp8(q, qt, dinp, rows, cols, scale);
}

template <typename T, typename Q>
Fp8CastStats layernorm_backward_fp8(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                                    const float* mean, const float* rstd, int N, int C, float* dinp_sums, Q* q, Q* qt,
                                    float scale) {
    layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dinp_sums);
    return quantize_transpose_fp8(q, qt, dinp, N, C, scale);
}

template <typename T, typename Q>
Fp8CastStats adamw_update_fp8(float* master, T* working, float* m, float* v, const float* grads, int rows, int cols,
                              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                              int t, Q* q, Q* qt, float scale) {
    adamw_update(master, working, m, v, grads, (size_t)rows * cols, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    return quantize_transpose_fp8(q, qt, working, rows, cols, scale);
}

template <typename T>
void matmul_backward_fp8(T* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q, const fp8e5m2* dout_qt,
                         float dout_inv_scale, const T* dout, const fp8e4m3* inp_qt, float inp_inv_scale,
                         const fp8e4m3* weight_qt, float weight_inv_scale, int N, int C, int OC) {
    // dX = (q_dy · q_w) / (s_dy s_w), with W read from its transposed copy Wᵀ (C,OC)
    if (dinp != nullptr) {
        std::vector<float> dy = unscaled(dout_q, (size_t)N * OC), wt = unscaled(weight_qt, (size_t)C * OC);
        std::vector<float> dx((size_t)N * C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC, 1.0f, dy.data(), OC, wt.data(), OC, 0.0f,
                    dx.data(), C);
        const float dx_dequant = dout_inv_scale * weight_inv_scale;
#pragma omp parallel for
        for (size_t i = 0; i < (size_t)N * C; i++)
            dinp[i] = store<T>(dx[i] * dx_dequant);
    }
    // dW += (q_dyᵀ · q_x) / (s_dy s_x) = dYᵀ (OC,N) · (Xᵀ (C,N))ᵀ into the FP32 gradient: alpha
    // applies the factors
    if (dweight != nullptr) {
        std::vector<float> dyt = unscaled(dout_qt, (size_t)OC * N), xt = unscaled(inp_qt, (size_t)C * N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, OC, C, N, dout_inv_scale * inp_inv_scale, dyt.data(), N,
                    xt.data(), N, 1.0f, dweight, C);
    }
    if (dbias != nullptr) add_column_sums(dbias, dout, N, OC);   // as matmul_backward's
}

#define TRAIN_GPT_INSTANTIATE_FP8(T)                                                                                \
    template float amax<T>(const T*, size_t);                                                                       \
    template Fp8CastStats quantize_fp8<T, fp8e4m3>(fp8e4m3*, const T*, size_t, float);                              \
    template Fp8CastStats quantize_fp8<T, fp8e5m2>(fp8e5m2*, const T*, size_t, float);                              \
    template void matmul_forward_fp8<T>(T*, const fp8e4m3*, float, const fp8e4m3*, float, const T*, int, int, int); \
    template Fp8CastStats quantize_transpose_fp8<T, fp8e4m3>(fp8e4m3*, fp8e4m3*, const T*, int, int, float);        \
    template Fp8CastStats quantize_transpose_fp8<T, fp8e5m2>(fp8e5m2*, fp8e5m2*, const T*, int, int, float);        \
    template void matmul_backward_fp8<T>(T*, float*, float*, const fp8e5m2*, const fp8e5m2*, float, const T*,       \
                                         const fp8e4m3*, float, const fp8e4m3*, float, int, int, int);

// the fused casts where the model uses them: E4M3 forward operands, E5M2 gradients (float: tests)
#define TRAIN_GPT_INSTANTIATE_FP8_FUSED(T)                                                                            \
    template Fp8CastStats gelu_forward_fp8<T, fp8e4m3>(fp8e4m3*, fp8e4m3*, const T*, int, int, float);                \
    template Fp8CastStats layernorm_forward_fp8<T, fp8e4m3>(fp8e4m3*, fp8e4m3*, float*, float*, const T*, const T*,   \
                                                            const T*, int, int, float);                               \
    template Fp8CastStats gelu_backward_fp8<T, fp8e5m2>(T*, fp8e5m2*, fp8e5m2*, const T*, const T*, int, int, float); \
    template Fp8CastStats layernorm_backward_fp8<T, fp8e5m2>(T*, float*, float*, const T*, const T*, const T*,        \
                                                             const float*, const float*, int, int, float*, fp8e5m2*,  \
                                                             fp8e5m2*, float);                                        \
    template Fp8CastStats adamw_update_fp8<T, fp8e4m3>(float*, T*, float*, float*, const float*, int, int, float,     \
                                                       float, float, float, float, float, int, fp8e4m3*, fp8e4m3*,    \
                                                       float);

TRAIN_GPT_INSTANTIATE_FP8(float)
TRAIN_GPT_INSTANTIATE_FP8(bf16)
TRAIN_GPT_INSTANTIATE_FP8(fp16)
TRAIN_GPT_INSTANTIATE_FP8_FUSED(float)
TRAIN_GPT_INSTANTIATE_FP8_FUSED(bf16)
TRAIN_GPT_INSTANTIATE_FP8_FUSED(fp16)

}   // namespace train_gpt::cpu
