// cpu/kernels.cpp — see kernels.h for the conventions every kernel here follows.
//
// Parallelism: OpenMP over independent rows/heads/channel blocks, never over a reduction
// whose order would then depend on the thread schedule, so results are bit-identical from
// run to run for a fixed thread count. GEMMs go to the BLAS (cblas_sgemm / cblas_dgemm).
#include "cpu/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace train_gpt::cpu {

namespace {

// Row-major GEMM: c (M,N) = alpha · op(a) · op(b) + beta · c.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename Real>
Real dot(const Real* a, const Real* b, int n) {
    Real acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

// y += alpha · x
template <typename Real>
void axpy(Real* y, Real alpha, const Real* x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += alpha * x[i];
}

constexpr int kColumnBlock = 64;  // channels per task when reducing over rows
constexpr double kLayerNormEps = 1e-5;

}  // namespace

template <typename Real>
void encoder_forward(Real* out, const int32_t* tokens, const Real* wte, const Real* wpe,
                     int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            Real* out_bt = out + ((size_t)b * T + t) * C;   // (C)
            const Real* wte_ix = wte + (size_t)tokens[b * T + t] * C;
            const Real* wpe_t = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) out_bt[c] = wte_ix[c] + wpe_t[c];
        }
    }
}

template <typename Real>
void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const int32_t* tokens,
                      int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const Real* dout_bt = dout + ((size_t)b * T + t) * C;
            axpy(dwte + (size_t)tokens[b * T + t] * C, Real(1), dout_bt, C);
            axpy(dwpe + (size_t)t * C, Real(1), dout_bt, C);
        }
    }
}

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const Real* x = inp + (size_t)i * C;
        Real m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        Real var = 0;  // two-pass variance: no cancellation
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        var /= C;
        Real s = Real(1) / std::sqrt(var + Real(kLayerNormEps));
        Real* y = out + (size_t)i * C;
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, int N, int C) {
    // dinp = rstd · (dnorm − mean(dnorm) − norm · mean(dnorm · norm)), dnorm = weight · dout
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const Real* x = inp + (size_t)i * C;
        const Real* dy = dout + (size_t)i * C;
        Real dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            Real norm = (x[c] - mean[i]) * rstd[i];
            Real dnorm = weight[c] * dy[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        Real* dx = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            Real norm = (x[c] - mean[i]) * rstd[i];
            Real dnorm = weight[c] * dy[c];
            dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[i];
        }
    }
    // parameter gradients: a reduction over rows, done per channel block in row order
#pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += kColumnBlock) {
        int c1 = std::min(C, c0 + kColumnBlock);
        for (int i = 0; i < N; i++) {
            const Real* x = inp + (size_t)i * C;
            const Real* dy = dout + (size_t)i * C;
            for (int c = c0; c < c1; c++) {
                dweight[c] += (x[c] - mean[i]) * rstd[i] * dy[c];
                dbias[c] += dy[c];
            }
        }
    }
}

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, const Real* bias,
                    int N, int C, int OC) {
    gemm(false, true, N, OC, C, Real(1), inp, C, weight, C, Real(0), out, OC);
    if (bias == nullptr) return;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        Real* row = out + (size_t)i * OC;
        for (int o = 0; o < OC; o++) row[o] += bias[o];
    }
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                     const Real* weight, int N, int C, int OC) {
    gemm(false, false, N, C, OC, Real(1), dout, OC, weight, C, Real(1), dinp, C);   // (N,OC)·(OC,C)
    gemm(true, false, OC, C, N, Real(1), dout, OC, inp, C, Real(1), dweight, C);    // (OC,N)·(N,C)
    if (dbias == nullptr) return;
#pragma omp parallel for
    for (int o0 = 0; o0 < OC; o0 += kColumnBlock) {
        int o1 = std::min(OC, o0 + kColumnBlock);
        for (int i = 0; i < N; i++) {
            const Real* row = dout + (size_t)i * OC;
            for (int o = o0; o < o1; o++) dbias[o] += row[o];
        }
    }
}

template <typename Real>
void attention_forward(Real* out, Real* lse, const Real* qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const Real scale = Real(1) / std::sqrt(Real(hs));
#pragma omp parallel
    {
        std::vector<Real> scores(T);  // one softmax row, per thread
#pragma omp for collapse(3)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < T; t++) {
                    const Real* q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;   // (hs)
                    Real row_max = -INFINITY;
                    for (int j = 0; j <= t; j++) {   // causal: keys 0..t
                        const Real* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                        scores[j] = dot(q, k, hs) * scale;
                        row_max = std::max(row_max, scores[j]);
                    }
                    Real sum = 0;
                    for (int j = 0; j <= t; j++) {
                        scores[j] = std::exp(scores[j] - row_max);
                        sum += scores[j];
                    }
                    Real* o = out + ((size_t)b * T + t) * C + h * hs;   // (hs)
                    for (int d = 0; d < hs; d++) o[d] = 0;
                    Real inv_sum = Real(1) / sum;
                    for (int j = 0; j <= t; j++) {   // o = Σ_j softmax_j · v_j
                        const Real* v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * hs;
                        axpy(o, scores[j] * inv_sum, v, hs);
                    }
                    lse[((size_t)b * NH + h) * T + t] = row_max + std::log(sum);
                }
            }
        }
    }
}

template <typename Real>
void attention_backward(Real* dqkv, const Real* dout, const Real* qkv, const Real* out,
                        const Real* lse, int B, int T, int C, int NH) {
    // Per row t, with P = softmax(S), S = scale · q kᵀ, O = P V:
    //   dV_j += P_tj dO_t ;  dP_tj = dO_t · v_j ;  dS_tj = P_tj (dP_tj − D_t), D_t = dO_t · O_t
    //   dq_t += scale Σ_j dS_tj k_j ;  dk_j += scale dS_tj q_t
    // Each (b, h) writes only its own head's slice, so heads run in parallel without races.
    const int hs = C / NH;
    const Real scale = Real(1) / std::sqrt(Real(hs));
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const size_t row_t = ((size_t)b * T + t) * 3 * C;
                const Real* q = qkv + row_t + h * hs;
                Real* dq = dqkv + row_t + h * hs;
                const Real* dO = dout + ((size_t)b * T + t) * C + h * hs;
                const Real* O = out + ((size_t)b * T + t) * C + h * hs;
                const Real row_lse = lse[((size_t)b * NH + h) * T + t];
                const Real D = dot(dO, O, hs);
                for (int j = 0; j <= t; j++) {
                    const size_t row_j = ((size_t)b * T + j) * 3 * C;
                    const Real* k = qkv + row_j + C + h * hs;
                    const Real* v = qkv + row_j + 2 * C + h * hs;
                    const Real p = std::exp(dot(q, k, hs) * scale - row_lse);
                    const Real dS = p * (dot(dO, v, hs) - D);
                    axpy(dqkv + row_j + 2 * C + h * hs, p, dO, hs);          // dv_j
                    axpy(dq, dS * scale, k, hs);                             // dq_t
                    axpy(dqkv + row_j + C + h * hs, dS * scale, q, hs);      // dk_j
                }
            }
        }
    }
}

namespace {
template <typename Real>
constexpr Real kGeluScale = Real(0.7978845608028654);  // √(2/π)
}

template <typename Real>
void gelu_forward(Real* out, const Real* inp, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        Real x = inp[i];
        out[i] = Real(0.5) * x * (Real(1) + std::tanh(kGeluScale<Real> * (x + Real(0.044715) * x * x * x)));
    }
}

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n) {
    // d/dx = 0.5(1 + tanh u) + 0.5 x (1 − tanh² u) · √(2/π)(1 + 3·0.044715 x²), u = √(2/π)(x + 0.044715 x³)
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        Real x = inp[i];
        Real th = std::tanh(kGeluScale<Real> * (x + Real(0.044715) * x * x * x));
        Real du = kGeluScale<Real> * (Real(1) + Real(3 * 0.044715) * x * x);
        Real local = Real(0.5) * (Real(1) + th) + Real(0.5) * x * (Real(1) - th * th) * du;
        dinp[i] += local * dout[i];
    }
}

template <typename Real>
void residual_forward(Real* out, const Real* a, const Real* b, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

template <typename Real>
void fused_classifier(Real* dlogits, Real* losses, const Real* logits, const int32_t* targets,
                      int N, int V, int Vp, Real dloss) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const Real* x = logits + (size_t)i * Vp;   // (Vp), only the first V are real
        Real row_max = -INFINITY;
        for (int c = 0; c < V; c++) row_max = std::max(row_max, x[c]);
        Real sum = 0;
        for (int c = 0; c < V; c++) sum += std::exp(x[c] - row_max);
        const int target = targets[i];
        losses[i] = (row_max - x[target]) + std::log(sum);   // −log softmax[target]; difference first, no cancellation
        if (dlogits == nullptr) continue;
        Real* dx = dlogits + (size_t)i * Vp;
        const Real inv_sum = Real(1) / sum;
        for (int c = 0; c < V; c++) {
            Real p = std::exp(x[c] - row_max) * inv_sum;
            dx[c] = (p - (c == target ? Real(1) : Real(0))) * dloss;
        }
        for (int c = V; c < Vp; c++) dx[c] = 0;
    }
}

template <typename Real>
double sum_squares(const Real* g, size_t n) {
    double acc = 0;
#pragma omp parallel for reduction(+ : acc) schedule(static)
    for (size_t i = 0; i < n; i++) acc += (double)g[i] * (double)g[i];
    return acc;
}

template <typename Real>
void adamw_update(Real* params, Real* m, Real* v, const Real* grads, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    // Scalars as PyTorch forms them: in double, then used in the tensor's precision.
    const double bias_correction1 = 1.0 - std::pow((double)beta1, t);
    const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow((double)beta2, t));
    const Real step_size = Real(lr / bias_correction1);
    const Real decay = Real(1.0 - (double)lr * weight_decay);
    const Real b1 = beta1, b2 = beta2, e = eps, bc2_sqrt = Real(bias_correction2_sqrt);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        Real g = grads[i] * Real(grad_scale);
        m[i] = b1 * m[i] + (Real(1) - b1) * g;
        v[i] = b2 * v[i] + (Real(1) - b2) * g * g;
        Real p = params[i] * decay;
        params[i] = p - step_size * (m[i] / (std::sqrt(v[i]) / bc2_sqrt + e));
    }
}

#define TRAIN_GPT_INSTANTIATE(Real)                                                               \
    template void encoder_forward<Real>(Real*, const int32_t*, const Real*, const Real*, int, int, int); \
    template void encoder_backward<Real>(Real*, Real*, const Real*, const int32_t*, int, int, int);      \
    template void layernorm_forward<Real>(Real*, Real*, Real*, const Real*, const Real*, const Real*, int, int); \
    template void layernorm_backward<Real>(Real*, Real*, Real*, const Real*, const Real*, const Real*,   \
                                           const Real*, const Real*, int, int);                         \
    template void matmul_forward<Real>(Real*, const Real*, const Real*, const Real*, int, int, int);     \
    template void matmul_backward<Real>(Real*, Real*, Real*, const Real*, const Real*, const Real*, int, int, int); \
    template void attention_forward<Real>(Real*, Real*, const Real*, int, int, int, int);                \
    template void attention_backward<Real>(Real*, const Real*, const Real*, const Real*, const Real*,    \
                                           int, int, int, int);                                         \
    template void gelu_forward<Real>(Real*, const Real*, size_t);                                        \
    template void gelu_backward<Real>(Real*, const Real*, const Real*, size_t);                          \
    template void residual_forward<Real>(Real*, const Real*, const Real*, size_t);                       \
    template void fused_classifier<Real>(Real*, Real*, const Real*, const int32_t*, int, int, int, Real);\
    template double sum_squares<Real>(const Real*, size_t);                                              \
    template void adamw_update<Real>(Real*, Real*, Real*, const Real*, size_t, float, float, float, float, \
                                     float, float, int);

TRAIN_GPT_INSTANTIATE(float)
TRAIN_GPT_INSTANTIATE(double)

}  // namespace train_gpt::cpu
