// attention_gemm.cuh — causal self-attention on tensor cores, through cuBLASLt strided-batched
// GEMMs (llm.c's non-cuDNN approach): the T×T scores are materialised in a scratch buffer.
//
//   attention_forward_gemm (out (B,T,C), lse (B,NH,T) FP32, qkv (B,T,3C))
//   attention_backward_gemm(dqkv (B,T,3C) overwritten, dout (B,T,C), qkv, out, lse)
//
// The specification: Backend::attention_forward / attention_backward (backend.h), and their CPU
// twins cpu::attention_forward / cpu::attention_backward
// (llmc/cpu/kernels.cpp): same arguments, same layouts, same roundings. qkv holds [q | k | v] per
// token; head h uses features h·hs … (h+1)·hs of each, hs = C/NH; scores are scaled by
// scale = 1/√hs (1.0f / sqrtf(float(hs)), as the CPU). out, lse and dqkv are overwritten, dqkv
// with ONE rounding per element: dqkv = round_T(acc_fp32). T ∈ {float,
// __nv_bfloat16, __half}; hs a multiple of 8 (any size: no tile limit here). No alignment is
// required of the caller's buffers (our kernels use scalar accesses; the GEMMs read only scratch).
//
// ---- Layouts ---------------------------------------------------------------------------------
// Per chunk of nb whole sequences b0 … b0+nb−1 (see Memory), G = nb·NH GEMM batches, batch
// g = (b − b0)·NH + h, each one contiguous block of scratch:
//   q, k, v, dO  (G, T, hs)  T      split from qkv / dout by split_heads_kernel
//   S, dP        (G, T, Tp)  FP32   row t of batch g at (g·T + t)·Tp; Tp = T rounded up to 8
//   P, dS        (G, T, Tp)  T      (the Tp − T padding columns are never written nor read:
//                                    they only keep every row and batch 16-byte aligned)
//   O, dQ, dK, dV (G, T, hs) FP32   merged back into out / dqkv by merge_heads*_kernel
// lse (B, NH, T) of the chunk is the contiguous (G, T) block at lse + b0·NH·T.
//
// ---- The GEMMs (cuBLASLt is column-major) ------------------------------------------------------
// A row-major (R, K) matrix with row stride ld is a column-major K×R matrix with leading
// dimension ld; every GEMM below computes the transpose of the row-major product, as in
// matmul.cuh. FP32 compute (CUBLAS_COMPUTE_32F: no TF32) in all of them; alpha = 1, beta = 0.
//
//   row-major product              D (col-major)  m   n   k    A (ld, op)   B (ld, op)   D type  strides a, b, d
//   S  (T,T)  = q · kᵀ             Sᵀ   T×T       T   T   hs   k  (hs, T)   q  (hs, N)   FP32    T·hs, T·hs, T·Tp
//   O  (T,hs) = P · v              Oᵀ   hs×T      hs  T   T    v  (hs, N)   P  (Tp, N)   FP32    T·hs, T·Tp, T·hs
//   dP (T,T)  = dO · vᵀ            dPᵀ  T×T       T   T   hs   v  (hs, T)   dO (hs, N)   FP32    T·hs, T·hs, T·Tp
//   dV (T,hs) = Pᵀ · dO            dVᵀ  hs×T      hs  T   T    dO (hs, N)   P  (Tp, T)   FP32    T·hs, T·Tp, T·hs
//   dQ (T,hs) = dS · k             dQᵀ  hs×T      hs  T   T    k  (hs, N)   dS (Tp, N)   FP32    T·hs, T·Tp, T·hs
//   dK (T,hs) = dSᵀ · q            dKᵀ  hs×T      hs  T   T    q  (hs, N)   dS (Tp, T)   FP32    T·hs, T·Tp, T·hs
// (batch count G, strides in elements; ldd = Tp for the T×T outputs, hs for the others.)
// Check of the first line: col-major k (hs×T, ld hs) has k(d, j) = k[j][d]; op T gives the m×k
// = T×hs matrix A(j, d) = k[j][d]; B(d, t) = q[t][d]; D(j, t) = Σ_d k[j][d] q[t][d] = S[t][j],
// stored at t·Tp + j: row t of row-major S. Lines 2–6 follow the same way; e.g. dV: A(d, t) =
// dO[t][d], op(B)(t, j) = P_colmajor(j, t) = P[t][j], D(d, j) = Σ_t dO[t][d] P[t][j] = dV[j][d].
//
// ---- Forward -----------------------------------------------------------------------------------
//   split_heads(q, k, v) → S = q·kᵀ (FP32) → softmax_rows → O = P·v (FP32) → merge_heads(out)
// softmax_rows, one warp per row (g, t), FP32, exactly the CPU twin's steps:
//   s_j = S_tj ·scale (rounded product, no FMA contraction: __fmul_rn), j ≤ t;  m = max_j s_j
//   e_j = expf(s_j − m);  sum = Σ_j e_j;  P_tj = round_T(e_j · (1/sum)) for j ≤ t, 0 for j > t
//   lse_t = m + logf(sum)
// Roundings: P is the NORMALISED probability rounded to T, as cpu::attention_forward rounds it
// (the flash version rounds the unnormalised one); O accumulates round_T(P)·v in FP32 inside
// the GEMM and is rounded to T once, by merge_heads (FP32 GEMM output: no split-K reduction in
// a 16-bit type can round it twice). Only the FP32 summation orders differ from the CPU.
// The zeros above the diagonal add nothing to P·v (0·v = 0 for finite v).
//
// ---- Backward ----------------------------------------------------------------------------------
//   split_heads(q, k, v, dO) → S = q·kᵀ, dP = dO·vᵀ (FP32) → backward_rows →
//   dV = Pᵀ·dO, dQ = dS·k, dK = dSᵀ·q (FP32) → merge_heads_grad(dqkv)
// backward_rows, one warp per row (g, t):
//   D_t = dO_t·O_t (FP32 dot over hs, from dout and out);  for j ≤ t:
//   P_tj = round_T(expf(S_tj·scale − lse_t))     (S_tj·scale rounded first, as the CPU: __fmul_rn)
//   dS_tj = round_T(P_tj · (dP_tj − D_t))        (P_tj the rounded value, as the CPU)
//   P_tj = dS_tj = 0 for j > t (the GEMMs sum over all T rows / columns)
// merge_heads_grad: dq = round_T(scale·dQ), dk = round_T(scale·dK), dv = round_T(dV): one
// rounding per element of dqkv. The CPU multiplies each term by
// scale before it sums (Σ_j (dS_tj·scale)·k_j); here scale multiplies the FP32 sum once
// (cuBLASLt runs with alpha = 1 in matmul.cuh's gemm()): the same value up to FP32 rounding
// (identical when scale is a power of two, hs = 64). P and dS enter the GEMMs rounded to T,
// exactly the operands of the CPU's axpy's; everything else is FP32.
//
// Determinism: no atomics. Every element of every output is written by exactly one thread, the
// warp reductions are fixed xor trees, and cuBLASLt gives bit-identical results for the same
// problem and algorithm (gemm() caches the algorithm per problem).
//
// ---- Memory --------------------------------------------------------------------------------------
// Scratch per sequence (bytes, s = sizeof(T), each sub-buffer 256-byte aligned on top):
//   forward   NH·T·Tp·(4 + s) + 3·T·C·s + 4·T·C               bf16, T=1024, C=768, NH=12:  80 MiB
//   backward  NH·T·Tp·(8 + 2s) + 4·T·C·s + 3·4·T·C            bf16, T=1024, C=768, NH=12: 159 MiB
// The batch is processed in chunks of nb whole sequences (the same kernels and GEMMs on
// sub-ranges, chunk after chunk on the stream): nb is the largest count in [1, B] whose layout
// fits the scratch budget (kScratchBudget = 512 MiB unless the caller passes another, which the
// tests do to force several chunks), at least 1 (a single sequence larger than the budget runs
// alone, over budget), and with nb·NH ≤ 65535 GEMM batches. The last chunk may be shorter.
// GPT-2 124M (T=1024, C=768, NH=12): bf16 6 sequences per forward chunk (477 MiB), 3 per
// backward chunk (477 MiB); fp32 4 (432 MiB) and 2 (426 MiB). All scratch comes from ONE scratch() call
// per launcher, laid out for nb sequences.
//
// ---- FLOPs ---------------------------------------------------------------------------------------
// The full T×T is computed (the causal mask is applied by the row kernels, not by skipping
// work): forward 2 GEMMs = 4·B·NH·T²·hs, backward 5 GEMMs = 10·B·NH·T²·hs: twice the causal work
// of the flash version, on tensor cores for 16-bit T (FP32 T runs cuBLAS's FP32 CUDA-core
// kernels). Memory traffic is dominated by the T×T buffers: forward writes S (4 B) and P (s B)
// and reads them back once or twice; backward writes S, dP, P, dS and reads them back.
#pragma once

#include "cuda/common.cuh"   // cudaCheck, scratch, ScratchLayout, to_float / from_float, reductions
#include "cuda/matmul.cuh"   // gemm, GemmOperand, GemmBatch, cuda_data_type
#include "utils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace train_gpt::cuda {

namespace attention_gemm_detail {

inline constexpr size_t kScratchBudget = size_t(512) << 20;   // default scratch budget per launcher
constexpr int kRowWarps = 8;                                  // row kernels: 8 warps (rows) per block
constexpr int kBlock = 32 * kRowWarps;                        // 256 threads, every kernel here

// T rounded up to a multiple of 8: the row stride of the T×T buffers (16-byte rows for 16-bit T).
inline int padded_len(int Tlen) { return (Tlen + 7) / 8 * 8; }

// Offsets (bytes) of the sub-buffers of one launcher's scratch, laid out for nb sequences.
struct Layout {
    size_t q = 0, k = 0, v = 0, dO = 0;     // (G, T, hs) T
    size_t S = 0, dP = 0;                   // (G, T, Tp) FP32
    size_t P = 0, dS = 0;                   // (G, T, Tp) T
    size_t O = 0, dQ = 0, dK = 0, dV = 0;   // (G, T, hs) FP32 (O: forward; dQ, dK, dV: backward)
    size_t bytes = 0;
};

inline Layout make_layout(int nb, int Tlen, int C, int NH, size_t elem, bool backward) {
    const size_t heads = (size_t)nb * Tlen * C;                        // G·T·hs elements
    const size_t scores = (size_t)nb * NH * Tlen * padded_len(Tlen);   // G·T·Tp elements
    ScratchLayout l;
    Layout x;
    x.q = l.add(heads * elem);
    x.k = l.add(heads * elem);
    x.v = l.add(heads * elem);
    x.S = l.add(scores * sizeof(float));
    x.P = l.add(scores * elem);
    if (!backward) {
        x.O = l.add(heads * sizeof(float));
    } else {
        x.dO = l.add(heads * elem);
        x.dP = l.add(scores * sizeof(float));
        x.dS = l.add(scores * elem);
        x.dQ = l.add(heads * sizeof(float));
        x.dK = l.add(heads * sizeof(float));
        x.dV = l.add(heads * sizeof(float));
    }
    x.bytes = l.bytes;
    return x;
}

// Scratch bytes for a chunk of nb sequences (exposed for the tests, which size budgets with it).
inline size_t scratch_bytes(int nb, int Tlen, int C, int NH, size_t elem, bool backward) {
    return make_layout(nb, Tlen, C, NH, elem, backward).bytes;
}

// Sequences per chunk: the largest nb in [1, B] with scratch_bytes(nb) ≤ budget, and small
// enough that the chunk's rows (nb·NH·T) and token rows (nb·T) fit an int (grid and GEMM sizes)
// and its GEMM batch count nb·NH stays ≤ 65535 (a grid dimension in some cuBLASLt kernels; only
// tiny-T shapes come near it); 1 when even one sequence is over budget. Requires B ≥ 1 and
// NH·T ≤ INT_MAX (checked by the launchers). scratch_bytes is increasing in nb: binary search.
inline int chunk_sequences(int B, int Tlen, int C, int NH, size_t elem, bool backward, size_t budget) {
    const int64_t row_cap = (int64_t)INT_MAX / ((int64_t)NH * (Tlen > 0 ? Tlen : 1));   // ≥ 1
    const int64_t batch_cap = NH < kMaxGridYZ ? kMaxGridYZ / NH : 1;                    // ≥ 1
    int64_t cap = B;
    if (row_cap < cap) cap = row_cap;
    if (batch_cap < cap) cap = batch_cap;
    int hi = (int)cap;
    int lo = 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (scratch_bytes(mid, Tlen, C, NH, elem, backward) <= budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Shape preconditions of both launchers; returns hs.
inline int check_args(const char* who, int B, int Tlen, int C, int NH) {
    if (B < 0 || Tlen < 0 || C <= 0 || NH <= 0 || C % NH != 0)
        ::train_gpt::fail("%s: bad shape B=%d T=%d C=%d NH=%d (need C divisible by NH)", who, B, Tlen, C, NH);
    const int hs = C / NH;
    // hs % 8: the (G, T, hs) operands' rows and batch strides are 16-byte multiples (cuBLASLt's
    // tensor-core alignment)
    if (hs % 8 != 0) ::train_gpt::fail("%s: head size hs = C/NH = %d/%d = %d must be a multiple of 8", who, C, NH, hs);
    // one sequence's score rows (NH·T) and a token row's features (3C) are int-indexed
    if ((int64_t)NH * Tlen > INT_MAX || (int64_t)3 * C > INT_MAX)
        ::train_gpt::fail("%s: NH·T = %lld or 3·C = %lld exceeds the int range the kernels index with", who,
                          (long long)NH * Tlen, (long long)3 * C);
    return hs;
}

// dst (nb·NH, T, hs) ← the C columns of each row of src (nb·T rows, row stride ld elements):
// dst[(b·NH + h)·T + t][d] = src[(b·T + t)·ld + h·hs + d]. One block per token row (b, t).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    split_heads_kernel(T* __restrict__ dst, const T* __restrict__ src, size_t ld, int Tlen, int C, int NH) {
    const int row = blockIdx.x;   // b·T + t
    const int b = row / Tlen, t = row - b * Tlen;
    const int hs = C / NH;
    const T* in = src + (size_t)row * ld;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int h = c / hs, d = c - h * hs;
        dst[(((size_t)b * NH + h) * Tlen + t) * hs + d] = in[c];
    }
}

// out (nb, T, C) ← round_T(O (nb·NH, T, hs) FP32): out[(b·T + t)·C + h·hs + d] = round_T(O[(b·NH + h)·T + t][d]).
// One block per token row (b, t).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    merge_heads_kernel(T* __restrict__ out, const float* __restrict__ O, int Tlen, int C, int NH) {
    const int row = blockIdx.x;
    const int b = row / Tlen, t = row - b * Tlen;
    const int hs = C / NH;
    T* dst = out + (size_t)row * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int h = c / hs, d = c - h * hs;
        dst[c] = from_float<T>(O[(((size_t)b * NH + h) * Tlen + t) * hs + d]);
    }
}

// dqkv (nb, T, 3C) = round_T([scale·dQ | scale·dK | dV]), each (nb·NH, T, hs) FP32:
// part p ∈ {q, k, v}, feature c = h·hs + d of row (b, t) takes grad_p[(b·NH + h)·T + t][d].
// One block per token row; one rounded store per element.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    merge_heads_grad_kernel(T* __restrict__ dqkv, const float* __restrict__ dQ, const float* __restrict__ dK,
                            const float* __restrict__ dV, int Tlen, int C, int NH, float scale) {
    const int row = blockIdx.x;
    const int b = row / Tlen, t = row - b * Tlen;
    const int hs = C / NH;
    T* dst = dqkv + (size_t)row * 3 * C;
    for (int c3 = threadIdx.x; c3 < 3 * C; c3 += blockDim.x) {
        const int part = c3 / C, c = c3 - part * C;
        const int h = c / hs, d = c - h * hs;
        const float* grad = part == 0 ? dQ : part == 1 ? dK : dV;
        const float mul = part == 2 ? 1.0f : scale;
        const float g = grad[(((size_t)b * NH + h) * Tlen + t) * hs + d];
        dst[c3] = from_float<T>(__fmul_rn(g, mul));
    }
}

// Forward softmax, one warp per row r = g·T + t (rows = G·T): reads S[r][0..t] (FP32, row
// stride Tp), writes P[r][0..T) (T: normalised probabilities rounded to T, 0 for j > t) and
// lse[r]. Naive: the inner loops of cpu::attention_forward.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmax_rows_kernel(T* __restrict__ P, float* __restrict__ lse, const float* __restrict__ S, int rows, int Tlen,
                        int Tp, float scale) {
    const int row = blockIdx.x * kRowWarps + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;   // warp-uniform: the whole warp leaves
    const int t = row % Tlen;
    const float* s = S + (size_t)row * Tp;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32)
        m = fmaxf(m, __fmul_rn(s[j], scale));
    m = warp_reduce_max(m);   // finite: key 0 ≤ t is in every row (finite inputs)
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32)
        sum += expf(__fmul_rn(s[j], scale) - m);
    sum = warp_reduce_sum(sum);
    const float inv_sum = 1.0f / sum;
    T* p = P + (size_t)row * Tp;
    for (int j = lane; j < Tlen; j += 32)
        p[j] = from_float<T>(j <= t ? expf(__fmul_rn(s[j], scale) - m) * inv_sum : 0.0f);
    if (lane == 0) lse[row] = m + logf(sum);
}

// Backward scores, one warp per row r = g·T + t, g = b·NH + h (rows = G·T):
//   D = dout_t·out_t (head h's hs features of token (b, t) of the (nb, T, C) tensors)
//   P[r][j] = round_T(expf(S[r][j]·scale − lse[r])), dS[r][j] = round_T(P[r][j]·(dP[r][j] − D)), j ≤ t
//   P[r][j] = dS[r][j] = 0, t < j < T
// Naive: the inner loop of cpu::attention_backward.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    backward_rows_kernel(T* __restrict__ P, T* __restrict__ dS, const float* __restrict__ S,
                         const float* __restrict__ dP, const T* __restrict__ dout, const T* __restrict__ out,
                         const float* __restrict__ lse, int rows, int Tlen, int Tp, int C, int NH, float scale) {
    const int row = blockIdx.x * kRowWarps + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;   // warp-uniform
    const int g = row / Tlen, t = row - g * Tlen;
    const int b = g / NH, h = g - b * NH;
    const int hs = C / NH;
    const size_t o = ((size_t)b * Tlen + t) * C + (size_t)h * hs;
    float D = 0.0f;
    for (int d = lane; d < hs; d += 32)
        D += to_float(dout[o + d]) * to_float(out[o + d]);
    D = warp_reduce_sum(D);
    const float row_lse = lse[row];
    const size_t r = (size_t)row * Tp;
    for (int j = lane; j < Tlen; j += 32) {
        T p = from_float<T>(0.0f), ds = from_float<T>(0.0f);
        if (j <= t) {
            p = from_float<T>(expf(__fmul_rn(S[r + j], scale) - row_lse));
            ds = from_float<T>(to_float(p) * (dP[r + j] - D));
        }
        P[r + j] = p;
        dS[r + j] = ds;
    }
}

template <typename T>
void launch_split_heads(T* dst, const T* src, size_t ld, int nb, int Tlen, int C, int NH, cudaStream_t stream) {
    split_heads_kernel<T><<<nb * Tlen, kBlock, 0, stream>>>(dst, src, ld, Tlen, C, NH);
    cudaCheck(cudaGetLastError());
}

}   // namespace attention_gemm_detail

// out (B,T,C), lse (B,NH,T) FP32 ← causal attention of qkv (B,T,3C). Overwrites out and lse.
// scratch_budget: the most scratch bytes a chunk may use (at least one sequence per chunk).
template <typename T>
void attention_forward_gemm(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, cudaStream_t stream,
                            size_t scratch_budget = attention_gemm_detail::kScratchBudget) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                  "attention_forward_gemm: T must be float, __nv_bfloat16 or __half");
    using namespace attention_gemm_detail;
    const int hs = check_args("attention_forward_gemm", B, Tlen, C, NH);
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)hs);   // as the CPU twin: 1 / std::sqrt(float(hs))
    const int Tp = padded_len(Tlen);
    const int nb_max = chunk_sequences(B, Tlen, C, NH, sizeof(T), false, scratch_budget);
    const Layout x = make_layout(nb_max, Tlen, C, NH, sizeof(T), false);
    void* base = scratch(x.bytes, stream);
    T* q = at_offset<T>(base, x.q);
    T* k = at_offset<T>(base, x.k);
    T* v = at_offset<T>(base, x.v);
    float* S = at_offset<float>(base, x.S);
    T* P = at_offset<T>(base, x.P);
    float* O = at_offset<float>(base, x.O);
    const cudaDataType_t t = cuda_data_type<T>();
    const int64_t heads = (int64_t)Tlen * hs, scores = (int64_t)Tlen * Tp;   // per-batch strides (elements)
    const size_t ld = 3 * (size_t)C;

    for (int b0 = 0; b0 < B; b0 += nb_max) {
        const int nb = B - b0 < nb_max ? B - b0 : nb_max;
        const int G = nb * NH, rows = G * Tlen;
        const T* qkv_c = qkv + (size_t)b0 * Tlen * ld;
        launch_split_heads(q, qkv_c, ld, nb, Tlen, C, NH, stream);
        launch_split_heads(k, qkv_c + C, ld, nb, Tlen, C, NH, stream);
        launch_split_heads(v, qkv_c + 2 * (size_t)C, ld, nb, Tlen, C, NH, stream);
        // S (T,T) = q · kᵀ: D = Sᵀ (T×T, ldd Tp), m = n = T, k = hs, A = k (T), B = q (N)
        gemm("attention_forward_gemm (S = q kT)", stream, Tlen, Tlen, hs, GemmOperand{k, t, hs, true},
             GemmOperand{q, t, hs, false}, S, CUDA_R_32F, Tp, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, heads, scores});
        softmax_rows_kernel<T><<<grid_1d((size_t)rows * 32, kBlock), kBlock, 0, stream>>>(
            P, lse + (size_t)b0 * NH * Tlen, S, rows, Tlen, Tp, scale);
        cudaCheck(cudaGetLastError());
        // O (T,hs) = P · v: D = Oᵀ (hs×T, ldd hs), m = hs, n = T, k = T, A = v (N), B = P (N, ld Tp)
        gemm("attention_forward_gemm (O = P v)", stream, hs, Tlen, Tlen, GemmOperand{v, t, hs, false},
             GemmOperand{P, t, Tp, false}, O, CUDA_R_32F, hs, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, scores, heads});
        merge_heads_kernel<T><<<nb * Tlen, kBlock, 0, stream>>>(out + (size_t)b0 * Tlen * C, O, Tlen, C, NH);
        cudaCheck(cudaGetLastError());
    }
}

// dqkv (B,T,3C) = gradient of attention_forward_gemm (= of attention_forward), from dout (B,T,C)
// and the forward's qkv, out, lse. scratch_budget as for the forward.
template <typename T>
void attention_backward_gemm(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen,
                             int C, int NH, cudaStream_t stream,
                             size_t scratch_budget = attention_gemm_detail::kScratchBudget) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                  "attention_backward_gemm: T must be float, __nv_bfloat16 or __half");
    using namespace attention_gemm_detail;
    const int hs = check_args("attention_backward_gemm", B, Tlen, C, NH);
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)hs);
    const int Tp = padded_len(Tlen);
    const int nb_max = chunk_sequences(B, Tlen, C, NH, sizeof(T), true, scratch_budget);
    const Layout x = make_layout(nb_max, Tlen, C, NH, sizeof(T), true);
    void* base = scratch(x.bytes, stream);
    T* q = at_offset<T>(base, x.q);
    T* k = at_offset<T>(base, x.k);
    T* v = at_offset<T>(base, x.v);
    T* dO = at_offset<T>(base, x.dO);
    float* S = at_offset<float>(base, x.S);
    float* dP = at_offset<float>(base, x.dP);
    T* P = at_offset<T>(base, x.P);
    T* dS = at_offset<T>(base, x.dS);
    float* dQ = at_offset<float>(base, x.dQ);
    float* dK = at_offset<float>(base, x.dK);
    float* dV = at_offset<float>(base, x.dV);
    const cudaDataType_t t = cuda_data_type<T>();
    const int64_t heads = (int64_t)Tlen * hs, scores = (int64_t)Tlen * Tp;   // per-batch strides (elements)
    const size_t ld = 3 * (size_t)C;

    for (int b0 = 0; b0 < B; b0 += nb_max) {
        const int nb = B - b0 < nb_max ? B - b0 : nb_max;
        const int G = nb * NH, rows = G * Tlen;
        const T* qkv_c = qkv + (size_t)b0 * Tlen * ld;
        const T* dout_c = dout + (size_t)b0 * Tlen * C;
        const T* out_c = out + (size_t)b0 * Tlen * C;
        launch_split_heads(q, qkv_c, ld, nb, Tlen, C, NH, stream);
        launch_split_heads(k, qkv_c + C, ld, nb, Tlen, C, NH, stream);
        launch_split_heads(v, qkv_c + 2 * (size_t)C, ld, nb, Tlen, C, NH, stream);
        launch_split_heads(dO, dout_c, (size_t)C, nb, Tlen, C, NH, stream);
        // S (T,T) = q · kᵀ: m = n = T, k = hs, A = k (T), B = q (N), D FP32 ldd Tp
        gemm("attention_backward_gemm (S = q kT)", stream, Tlen, Tlen, hs, GemmOperand{k, t, hs, true},
             GemmOperand{q, t, hs, false}, S, CUDA_R_32F, Tp, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, heads, scores});
        // dP (T,T) = dO · vᵀ: m = n = T, k = hs, A = v (T), B = dO (N), D FP32 ldd Tp
        gemm("attention_backward_gemm (dP = dO vT)", stream, Tlen, Tlen, hs, GemmOperand{v, t, hs, true},
             GemmOperand{dO, t, hs, false}, dP, CUDA_R_32F, Tp, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, heads, scores});
        backward_rows_kernel<T><<<grid_1d((size_t)rows * 32, kBlock), kBlock, 0, stream>>>(
            P, dS, S, dP, dout_c, out_c, lse + (size_t)b0 * NH * Tlen, rows, Tlen, Tp, C, NH, scale);
        cudaCheck(cudaGetLastError());
        // dV (T,hs) = Pᵀ · dO: m = hs, n = T, k = T, A = dO (N), B = P (T, ld Tp), D FP32 ldd hs
        gemm("attention_backward_gemm (dV = PT dO)", stream, hs, Tlen, Tlen, GemmOperand{dO, t, hs, false},
             GemmOperand{P, t, Tp, true}, dV, CUDA_R_32F, hs, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, scores, heads});
        // dQ (T,hs) = dS · k: m = hs, n = T, k = T, A = k (N), B = dS (N, ld Tp), D FP32 ldd hs
        gemm("attention_backward_gemm (dQ = dS k)", stream, hs, Tlen, Tlen, GemmOperand{k, t, hs, false},
             GemmOperand{dS, t, Tp, false}, dQ, CUDA_R_32F, hs, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, scores, heads});
        // dK (T,hs) = dSᵀ · q: m = hs, n = T, k = T, A = q (N), B = dS (T, ld Tp), D FP32 ldd hs
        gemm("attention_backward_gemm (dK = dST q)", stream, hs, Tlen, Tlen, GemmOperand{q, t, hs, false},
             GemmOperand{dS, t, Tp, true}, dK, CUDA_R_32F, hs, 0.0f, nullptr, CUDA_R_32F, false,
             GemmBatch{G, heads, scores, heads});
        merge_heads_grad_kernel<T>
            <<<nb * Tlen, kBlock, 0, stream>>>(dqkv + (size_t)b0 * Tlen * ld, dQ, dK, dV, Tlen, C, NH, scale);
        cudaCheck(cudaGetLastError());
    }
}

}   // namespace train_gpt::cuda
