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
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* a, int lda, const double* b,
          int ldb, double beta, double* c, int ldc) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                a, lda, b, ldb, beta, c, ldc);
}

// x (n) as acc_t<T>: the buffer itself when T is already the arithmetic type, else a widened
// copy in `scratch` (exact: every bf16/fp16 value is a float).
template <typename T>
const acc_t<T>* widened(const T* x, size_t n, std::vector<acc_t<T>>& scratch) {
    if constexpr (std::is_same_v<T, acc_t<T>>) {
        return x;
    } else {
        scratch.resize(n);
#pragma omp parallel for
        for (size_t i = 0; i < n; i++)
            scratch[i] = load(x[i]);
        return scratch.data();
    }
}

template <typename Acc>
Acc dot(const Acc* a, const Acc* b, int n) {
    Acc acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

// y += alpha · x
template <typename Acc>
void axpy(Acc* y, Acc alpha, const Acc* x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

constexpr int kColumnBlock = 64;   // channels per task when reducing over rows
constexpr double kLayerNormEps = 1e-5;

}   // namespace

template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tlen; t++) {
            T* out_bt = out + ((size_t)b * Tlen + t) * C;   // (C)
            const T* wte_ix = wte + (size_t)tokens[b * Tlen + t] * C;
            const T* wpe_t = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                out_bt[c] = store<T>(load(wte_ix[c]) + load(wpe_t[c]));
        }
    }
}

template <typename T>
void encoder_backward(acc_t<T>* dwte, acc_t<T>* dwpe, const T* dout, const int32_t* tokens, int B, int Tlen, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tlen; t++) {
            const T* dout_bt = dout + ((size_t)b * Tlen + t) * C;
            acc_t<T>* dwte_ix = dwte + (size_t)tokens[b * Tlen + t] * C;
            acc_t<T>* dwpe_t = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                dwte_ix[c] += load(dout_bt[c]);
                dwpe_t[c] += load(dout_bt[c]);
            }
        }
    }
}

template <typename T>
void layernorm_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* inp, const T* weight, const T* bias, int N,
                       int C) {
    using Acc = acc_t<T>;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* x = inp + (size_t)i * C;
        Acc m = 0;
        for (int c = 0; c < C; c++)
            m += load(x[c]);
        m /= C;
        Acc var = 0;   // two-pass variance: no cancellation
        for (int c = 0; c < C; c++)
            var += (load(x[c]) - m) * (load(x[c]) - m);
        var /= C;
        Acc s = Acc(1) / std::sqrt(var + Acc(kLayerNormEps));
        T* y = out + (size_t)i * C;
        for (int c = 0; c < C; c++)
            y[c] = store<T>((load(x[c]) - m) * s * load(weight[c]) + load(bias[c]));
        mean[i] = m;
        rstd[i] = s;
    }
}

template <typename T>
void add_column_sums(acc_t<T>* sums, const T* x, int rows, int cols) {
#pragma omp parallel for
    for (int c0 = 0; c0 < cols; c0 += kColumnBlock) {
        const int c1 = std::min(cols, c0 + kColumnBlock);
        for (int i = 0; i < rows; i++) {
            const T* row = x + (size_t)i * cols;
            for (int c = c0; c < c1; c++)
                sums[c] += load(row[c]);
        }
    }
}

template <typename T>
void residual_layernorm_forward(T* residual, T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* a, const T* b,
                                const T* weight, const T* bias, int N, int C) {
    residual_forward(residual, a, b, (size_t)N * C);
    layernorm_forward(out, mean, rstd, residual, weight, bias, N, C);
}

template <typename T>
void layernorm_backward(T* dinp, acc_t<T>* dweight, acc_t<T>* dbias, const T* dout, const T* inp, const T* weight,
                        const acc_t<T>* mean, const acc_t<T>* rstd, int N, int C, acc_t<T>* dinp_sums) {
    using Acc = acc_t<T>;
    // dinp = rstd · (dnorm − mean(dnorm) − norm · mean(dnorm · norm)), dnorm = weight · dout
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* x = inp + (size_t)i * C;
        const T* dy = dout + (size_t)i * C;
        Acc dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            Acc norm = (load(x[c]) - mean[i]) * rstd[i];
            Acc dnorm = load(weight[c]) * load(dy[c]);
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        T* dx = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            Acc norm = (load(x[c]) - mean[i]) * rstd[i];
            Acc dnorm = load(weight[c]) * load(dy[c]);
            dx[c] = store<T>(load(dx[c]) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[i]);
        }
    }
    // parameter gradients: a reduction over rows, done per channel block in row order
#pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += kColumnBlock) {
        int c1 = std::min(C, c0 + kColumnBlock);
        for (int i = 0; i < N; i++) {
            const T* x = inp + (size_t)i * C;
            const T* dy = dout + (size_t)i * C;
            for (int c = c0; c < c1; c++) {
                dweight[c] += (load(x[c]) - mean[i]) * rstd[i] * load(dy[c]);
                dbias[c] += load(dy[c]);
            }
        }
    }
    if (dinp_sums != nullptr) add_column_sums(dinp_sums, dinp, N, C);
}

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC) {
    using Acc = acc_t<T>;
    std::vector<Acc> inp_wide, weight_wide, out_wide;
    const Acc* a = widened(inp, (size_t)N * C, inp_wide);
    const Acc* w = widened(weight, (size_t)OC * C, weight_wide);
    Acc* o;
    if constexpr (std::is_same_v<T, Acc>) {
        o = out;
    } else {
        out_wide.resize((size_t)N * OC);
        o = out_wide.data();
    }
    gemm(false, true, N, OC, C, Acc(1), a, C, w, C, Acc(0), o, OC);   // (N,C)·(OC,C)ᵀ
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < OC; j++) {
            Acc v = o[(size_t)i * OC + j] + (bias != nullptr ? load(bias[j]) : Acc(0));
            out[(size_t)i * OC + j] = store<T>(v);
        }
    }
}

template <typename T>
void matmul_backward(T* dinp, acc_t<T>* dweight, acc_t<T>* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC) {
    using Acc = acc_t<T>;
    std::vector<Acc> dout_wide, inp_wide, weight_wide, dinp_wide;
    const Acc* dy = widened(dout, (size_t)N * OC, dout_wide);
    const Acc* x = widened(inp, (size_t)N * C, inp_wide);
    const Acc* w = widened(weight, (size_t)OC * C, weight_wide);
    if (dinp == nullptr) {
    } else if constexpr (std::is_same_v<T, Acc>) {
        gemm(false, false, N, C, OC, Acc(1), dy, OC, w, C, Acc(0), dinp, C);   // dinp = (N,OC)·(OC,C)
    } else {
        // dinp = dout·W, accumulated in FP32 and rounded into T once
        dinp_wide.resize((size_t)N * C);
        gemm(false, false, N, C, OC, Acc(1), dy, OC, w, C, Acc(0), dinp_wide.data(), C);
#pragma omp parallel for
        for (size_t i = 0; i < (size_t)N * C; i++)
            dinp[i] = store<T>(dinp_wide[i]);
    }
    gemm(true, false, OC, C, N, Acc(1), dy, OC, x, C, Acc(1), dweight, C);   // dweight += (OC,N)·(N,C)
    if (dbias != nullptr) add_column_sums(dbias, dout, N, OC);
}

namespace {
std::vector<float> tf32_rounded(const float* x, size_t n) {
    std::vector<float> r(n);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++)
        r[i] = tf32_round(x[i]);
    return r;
}
}   // namespace

void matmul_forward_tf32(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
    const std::vector<float> x = tf32_rounded(inp, (size_t)N * C), w = tf32_rounded(weight, (size_t)OC * C);
    matmul_forward(out, x.data(), w.data(), bias, N, C, OC);
}

void matmul_backward_tf32(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, int N, int C, int OC) {
    const std::vector<float> dy = tf32_rounded(dout, (size_t)N * OC), x = tf32_rounded(inp, (size_t)N * C),
                             w = tf32_rounded(weight, (size_t)OC * C);
    matmul_backward(dinp, dweight, (float*)nullptr, dy.data(), x.data(), w.data(), N, C, OC);
    if (dbias != nullptr) add_column_sums(dbias, dout, N, OC);   // of dout as it is
}

// One row of causal attention, the one place attention_forward and attention_decode compute it:
// query t of head h against keys and values 0..t of one sequence's widened qkv rows `seq`
// (≥ t+1, 3C). Writes out_row (hs) and returns the row's log-sum-exp; scores (≥ t+1) and o (hs)
// are the caller's scratch.
template <typename T>
acc_t<T> attention_row(T* out_row, const acc_t<T>* seq, int t, int h, int C, int hs, std::vector<acc_t<T>>& scores,
                       std::vector<acc_t<T>>& o) {
    using Acc = acc_t<T>;
    const Acc scale = Acc(1) / std::sqrt(Acc(hs));
    const Acc* q = seq + (size_t)t * 3 * C + h * hs;   // (hs)
    Acc row_max = -INFINITY;
    for (int j = 0; j <= t; j++) {   // causal: keys 0..t
        const Acc* k = seq + (size_t)j * 3 * C + C + h * hs;
        scores[j] = dot(q, k, hs) * scale;
        row_max = std::max(row_max, scores[j]);
    }
    Acc sum = 0;
    for (int j = 0; j <= t; j++) {
        scores[j] = std::exp(scores[j] - row_max);
        sum += scores[j];
    }
    std::fill(o.begin(), o.end(), Acc(0));
    const Acc inv_sum = Acc(1) / sum;
    for (int j = 0; j <= t; j++) {   // o = Σ_j softmax_j · v_j
        const Acc* v = seq + (size_t)j * 3 * C + 2 * C + h * hs;
        axpy(o.data(), round_to<T>(scores[j] * inv_sum), v, hs);
    }
    for (int d = 0; d < hs; d++)
        out_row[d] = store<T>(o[d]);
    return row_max + std::log(sum);
}

template <typename T>
void attention_forward(T* out, acc_t<T>* lse, const T* qkv, int B, int Tlen, int C, int NH) {
    using Acc = acc_t<T>;
    const int hs = C / NH;
    std::vector<Acc> qkv_wide;
    const Acc* in = widened(qkv, (size_t)B * Tlen * 3 * C, qkv_wide);   // (B,T,3C)
#pragma omp parallel
    {
        std::vector<Acc> scores(Tlen), o(hs);   // one softmax row and one output row, per thread
#pragma omp for collapse(3)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int t = 0; t < Tlen; t++) {
                    T* out_row = out + ((size_t)b * Tlen + t) * C + h * hs;
                    lse[((size_t)b * NH + h) * Tlen + t] =
                        attention_row<T>(out_row, in + (size_t)b * Tlen * 3 * C, t, h, C, hs, scores, o);
                }
            }
        }
    }
}

template <typename T>
void attention_decode(T* out, const T* qkv, int pos, int n, int C, int NH) {
    using Acc = acc_t<T>;
    const int hs = C / NH, len = pos + n;
    std::vector<Acc> qkv_wide;
    const Acc* in = widened(qkv, (size_t)len * 3 * C, qkv_wide);   // (pos+n, 3C)
#pragma omp parallel
    {
        std::vector<Acc> scores(len), o(hs);
#pragma omp for collapse(2)
        for (int i = 0; i < n; i++) {
            for (int h = 0; h < NH; h++)
                attention_row<T>(out + (size_t)i * C + h * hs, in, pos + i, h, C, hs, scores, o);
        }
    }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const acc_t<T>* lse, int B, int Tlen, int C,
                        int NH) {
    // Per row t, with P = softmax(S), S = scale · q kᵀ, O = P V:
    //   dV_j = Σ_t P_tj dO_t ;  dP_tj = dO_t · v_j ;  dS_tj = P_tj (dP_tj − D_t), D_t = dO_t · O_t
    //   dq_t = scale Σ_j dS_tj k_j ;  dk_j = scale Σ_t dS_tj q_t
    // Each (b, h) writes only its own head's slice, so heads run in parallel without races.
    using Acc = acc_t<T>;
    const int hs = C / NH;
    const Acc scale = Acc(1) / std::sqrt(Acc(hs));
    std::vector<Acc> qkv_wide, dout_wide, out_wide;
    const Acc* in = widened(qkv, (size_t)B * Tlen * 3 * C, qkv_wide);     // (B,T,3C)
    const Acc* dO_all = widened(dout, (size_t)B * Tlen * C, dout_wide);   // (B,T,C)
    const Acc* O_all = widened(out, (size_t)B * Tlen * C, out_wide);      // (B,T,C)
#pragma omp parallel
    {
        std::vector<Acc> grad((size_t)Tlen * 3 * hs);   // this head's dq, dk, dv rows, FP32: (T, 3, hs)
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                std::fill(grad.begin(), grad.end(), Acc(0));
                for (int t = 0; t < Tlen; t++) {
                    const Acc* q = in + ((size_t)b * Tlen + t) * 3 * C + h * hs;
                    const Acc* dO = dO_all + ((size_t)b * Tlen + t) * C + h * hs;
                    const Acc* O = O_all + ((size_t)b * Tlen + t) * C + h * hs;
                    Acc* dq = grad.data() + (size_t)t * 3 * hs;
                    const Acc row_lse = lse[((size_t)b * NH + h) * Tlen + t];
                    const Acc D = dot(dO, O, hs);
                    for (int j = 0; j <= t; j++) {
                        const Acc* k = in + ((size_t)b * Tlen + j) * 3 * C + C + h * hs;
                        const Acc* v = in + ((size_t)b * Tlen + j) * 3 * C + 2 * C + h * hs;
                        const Acc p = round_to<T>(std::exp(dot(q, k, hs) * scale - row_lse));
                        const Acc dS = round_to<T>(p * (dot(dO, v, hs) - D));
                        Acc* dk = grad.data() + (size_t)j * 3 * hs + hs;
                        Acc* dv = dk + hs;
                        axpy(dv, p, dO, hs);
                        axpy(dq, dS * scale, k, hs);
                        axpy(dk, dS * scale, q, hs);
                    }
                }
                for (int t = 0; t < Tlen; t++) {   // one rounded store into dqkv per value
                    for (int part = 0; part < 3; part++) {
                        T* dst = dqkv + ((size_t)b * Tlen + t) * 3 * C + part * C + h * hs;
                        const Acc* src = grad.data() + (size_t)t * 3 * hs + part * hs;
                        for (int d = 0; d < hs; d++)
                            dst[d] = store<T>(src[d]);
                    }
                }
            }
        }
    }
}

namespace {
template <typename Acc>
constexpr Acc kGeluScale = Acc(0.7978845608028654);   // √(2/π)

// gelu(x) = 0.5·x·(1 + tanh u), u = √(2/π)(x + 0.044715 x³)
template <typename Acc>
Acc gelu_value(Acc x) {
    return Acc(0.5) * x * (Acc(1) + std::tanh(kGeluScale<Acc> * (x + Acc(0.044715) * x * x * x)));
}
// d/dx = 0.5(1 + tanh u) + 0.5 x (1 − tanh² u) · √(2/π)(1 + 3·0.044715 x²)
template <typename Acc>
Acc gelu_grad_value(Acc x) {
    Acc th = std::tanh(kGeluScale<Acc> * (x + Acc(0.044715) * x * x * x));
    Acc du = kGeluScale<Acc> * (Acc(1) + Acc(3 * 0.044715) * x * x);
    return Acc(0.5) * (Acc(1) + th) + Acc(0.5) * x * (Acc(1) - th * th) * du;
}
}   // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++)
        out[i] = store<T>(gelu_value(load(inp[i])));
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++)
        dinp[i] = store<T>(gelu_grad_value(load(inp[i])) * load(dout[i]));
}

template <typename T>
void matmul_forward_gelu(T* out, T* pre, const T* inp, const T* weight, const T* bias, int N, int C, int OC) {
    using Acc = acc_t<T>;
    std::vector<Acc> inp_wide, weight_wide, z((size_t)N * OC);
    const Acc* a = widened(inp, (size_t)N * C, inp_wide);
    const Acc* w = widened(weight, (size_t)OC * C, weight_wide);
    gemm(false, true, N, OC, C, Acc(1), a, C, w, C, Acc(0), z.data(), OC);   // (N,C)·(OC,C)ᵀ
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < OC; j++) {
            const size_t at = (size_t)i * OC + j;
            const Acc v = z[at] + (bias != nullptr ? load(bias[j]) : Acc(0));   // the FP32 GELU input
            pre[at] = store<T>(v);
            out[at] = store<T>(gelu_value(v));
        }
    }
}

template <typename T>
void matmul_backward_dgelu(T* dinp, const T* dout, const T* weight, const T* pre, int N, int C, int OC) {
    using Acc = acc_t<T>;
    std::vector<Acc> dout_wide, weight_wide, g((size_t)N * C);
    const Acc* dy = widened(dout, (size_t)N * OC, dout_wide);
    const Acc* w = widened(weight, (size_t)OC * C, weight_wide);
    gemm(false, false, N, C, OC, Acc(1), dy, OC, w, C, Acc(0), g.data(), C);   // (N,OC)·(OC,C), not rounded
#pragma omp parallel for
    for (size_t i = 0; i < (size_t)N * C; i++)
        dinp[i] = store<T>(gelu_grad_value(load(pre[i])) * g[i]);
}

template <typename T>
void gelu_backward_bias(T* dinp, acc_t<T>* dbias, const T* inp, const T* dout, int rows, int cols) {
    gelu_backward(dinp, inp, dout, (size_t)rows * cols);
    add_column_sums(dbias, dinp, rows, cols);
}

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++)
        out[i] = store<T>(load(a[i]) + load(b[i]));
}

template <typename T>
void fused_classifier(T* dlogits, acc_t<T>* losses, const T* logits, const int32_t* targets, int N, int V, int Vp,
                      acc_t<T> dloss) {
    using Acc = acc_t<T>;
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const T* x = logits + (size_t)i * Vp;   // (Vp), only the first V are real
        Acc row_max = -INFINITY;
        for (int c = 0; c < V; c++)
            row_max = std::max(row_max, load(x[c]));
        Acc sum = 0;
        for (int c = 0; c < V; c++)
            sum += std::exp(load(x[c]) - row_max);
        const int target = targets[i];
        // −log softmax[target]; the difference first, so large logits do not cancel
        losses[i] = (row_max - load(x[target])) + std::log(sum);
        if (dlogits == nullptr) continue;
        T* dx = dlogits + (size_t)i * Vp;   // may alias x: each element is read before it is written
        const Acc inv_sum = Acc(1) / sum;
        for (int c = 0; c < V; c++) {
            Acc p = std::exp(load(x[c]) - row_max) * inv_sum;
            dx[c] = store<T>((p - (c == target ? Acc(1) : Acc(0))) * dloss);
        }
        for (int c = V; c < Vp; c++)
            dx[c] = store<T>(Acc(0));
    }
}

template <typename G>
double sum_squares(const G* g, size_t n) {
    double acc = 0;
#pragma omp parallel for reduction(+ : acc) schedule(static)
    for (size_t i = 0; i < n; i++)
        acc += (double)g[i] * (double)g[i];
    return acc;
}

template <typename T>
void adamw_update(acc_t<T>* master, T* working, acc_t<T>* m, acc_t<T>* v, const acc_t<T>* grads, size_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    using Acc = acc_t<T>;
    // Scalars as PyTorch forms them: in double, then used in the tensor's precision.
    const double bias_correction1 = 1.0 - std::pow((double)beta1, t);
    const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow((double)beta2, t));
    const Acc step_size = Acc(lr / bias_correction1);
    const Acc decay = Acc(1.0 - (double)lr * weight_decay);
    const Acc b1 = beta1, b2 = beta2, e = eps, bc2_sqrt = Acc(bias_correction2_sqrt);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        Acc g = grads[i] * Acc(grad_scale);
        m[i] = b1 * m[i] + (Acc(1) - b1) * g;
        v[i] = b2 * v[i] + (Acc(1) - b2) * g * g;
        Acc p = (master != nullptr ? master[i] : load(working[i])) * decay;
        p = p - step_size * (m[i] / (std::sqrt(v[i]) / bc2_sqrt + e));
        if (master != nullptr) master[i] = p;
        working[i] = store<T>(p);
    }
}

#define TRAIN_GPT_INSTANTIATE(T)                                                                                      \
    template void encoder_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int);                          \
    template void encoder_backward<T>(acc_t<T>*, acc_t<T>*, const T*, const int32_t*, int, int, int);                 \
    template void layernorm_forward<T>(T*, acc_t<T>*, acc_t<T>*, const T*, const T*, const T*, int, int);             \
    template void add_column_sums<T>(acc_t<T>*, const T*, int, int);                                                  \
    template void residual_layernorm_forward<T>(T*, T*, acc_t<T>*, acc_t<T>*, const T*, const T*, const T*, const T*, \
                                                int, int);                                                            \
    template void gelu_backward_bias<T>(T*, acc_t<T>*, const T*, const T*, int, int);                                 \
    template void layernorm_backward<T>(T*, acc_t<T>*, acc_t<T>*, const T*, const T*, const T*, const acc_t<T>*,      \
                                        const acc_t<T>*, int, int, acc_t<T>*);                                        \
    template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int);                                 \
    template void matmul_backward<T>(T*, acc_t<T>*, acc_t<T>*, const T*, const T*, const T*, int, int, int);          \
    template void attention_forward<T>(T*, acc_t<T>*, const T*, int, int, int, int);                                  \
    template void attention_decode<T>(T*, const T*, int, int, int, int);                                              \
    template void attention_backward<T>(T*, const T*, const T*, const T*, const acc_t<T>*, int, int, int, int);       \
    template void gelu_forward<T>(T*, const T*, size_t);                                                              \
    template void matmul_forward_gelu<T>(T*, T*, const T*, const T*, const T*, int, int, int);                        \
    template void matmul_backward_dgelu<T>(T*, const T*, const T*, const T*, int, int, int);                          \
    template void gelu_backward<T>(T*, const T*, const T*, size_t);                                                   \
    template void residual_forward<T>(T*, const T*, const T*, size_t);                                                \
    template void fused_classifier<T>(T*, acc_t<T>*, const T*, const int32_t*, int, int, int, acc_t<T>);              \
    template void adamw_update<T>(acc_t<T>*, T*, acc_t<T>*, acc_t<T>*, const acc_t<T>*, size_t, float, float, float,  \
                                  float, float, float, int);

TRAIN_GPT_INSTANTIATE(float)
TRAIN_GPT_INSTANTIATE(double)
TRAIN_GPT_INSTANTIATE(bf16)
TRAIN_GPT_INSTANTIATE(fp16)
template double sum_squares<float>(const float*, size_t);
template double sum_squares<double>(const double*, size_t);

}   // namespace train_gpt::cpu
