// attention_scalar.cuh — lab version of causal self-attention: flash-style, hand-written for CUDA
// cores (FP32 arithmetic, no tensor cores). Timed against the others by dev/cuda/attention.cu.
//
//   attention_forward (out (B,T,C), lse (B,NH,T) FP32, qkv (B,T,3C))
//   attention_backward(dqkv (B,T,3C) +=, dout (B,T,C), qkv, out, lse)
//
// The CPU twin, cpu::attention_forward / cpu::attention_backward (llmc/cpu/kernels.cpp), is the
// specification: same arguments, same layouts, same roundings. qkv holds [q | k | v] per token;
// head h uses features h·hs … (h+1)·hs of each, hs = C/NH. Scores are scaled by 1/√hs. No T×T
// matrix ever reaches device memory: backward recomputes the probabilities from q, k and lse.
//
// ---- Forward: online softmax ----------------------------------------------------------------
// Naive equivalent, per (b, h, query t):
//   s_j = scale · q_t·k_j (j ≤ t);  P_j = exp(s_j − max s) / Σ exp(s_j − max s);  o_t = Σ_j P_j v_j
//   lse_t = max s + log Σ_j exp(s_j − max s)
// Here the keys arrive in tiles of 64 and each query row keeps FP32 statistics m (running max)
// and l (running sum of exp(s − m)) and an FP32 output accumulator o. For each new key tile:
//   m' = max(m, max_j s_j);  α = exp(m − m');  p_j = exp(s_j − m')
//   l  = α·l + Σ_j p_j;      o = α·o + Σ_j round_T(p_j)·v_j;  m = m'
// and at the end o_t = o / l (rounded to T once, on the store), lse_t = m + log l.
// Unrolling the recurrence gives o = Σ_j exp(s_j − m_final) v_j and l = Σ_j exp(s_j − m_final):
// the naive result. m starts at −∞ (α = 0 on the first tile); the first key tile always holds
// key 0, which every query sees, so m is finite after it and no exp(−∞ − (−∞)) = NaN arises.
//
// Rounding. For T = float nothing is rounded before the store. For 16-bit T the probability
// is rounded to T before it multiplies v, as a bf16/fp16 flash kernel feeds its PV matmul; here
// it is the not-yet-normalised p_j = exp(s_j − m') that is rounded (as FlashAttention-2 does),
// where the CPU twin rounds the normalised P_j. Both are one rounding of T per term (relative
// error ≤ 2^-9 for bf16, 2^-12 for fp16), so the two agree to the normwise tolerance of T, not
// bit for bit. l sums the unrounded p_j, as the CPU sums the unrounded exps.
//
// ---- Backward --------------------------------------------------------------------------------
// With P = softmax(S) recomputed exactly (P_tj = exp(s_tj − lse_t): normalised, no running max),
//   dV_j += P_tj dO_t;   dP_tj = dO_t·v_j;   dS_tj = P_tj (dP_tj − D_t),  D_t = dO_t·O_t
//   dq_t += scale Σ_j dS_tj k_j;             dk_j += scale Σ_t dS_tj q_t
// (D_t = Σ_j P_tj dP_tj because O_t = Σ_j P_tj v_j: the softmax Jacobian in one dot product.)
// Exactly as the CPU twin: P and dS are rounded to T before they multiply (identity for float),
// the terms are (dS·scale)·k and (dS·scale)·q, dq/dk/dv accumulate in FP32 registers, and each
// element of dqkv gets ONE rounded read-modify-write: dqkv = round_T(dqkv + acc).
// Naive equivalent: the triple loop of cpu::attention_backward.
//
// Determinism: no atomics. Two kernels, each element of dqkv owned by exactly one thread:
//   * dK/dV kernel: one block per (b, h, key tile of 64). It holds K, V of its tile and walks the
//     query tiles from the diagonal to the end in order, accumulating dK, dV in registers.
//   * dQ kernel: one block per (b, h, query tile of 64). It holds Q, dO and walks the key tiles
//     from 0 to the diagonal in order, accumulating dQ in registers.
// Both recompute S and dP (the price of determinism without a T×T buffer or atomics: backward
// does 2 QKᵀ + 2 dO·Vᵀ instead of 1 + 1). The q part and the k/v parts of dqkv are disjoint, so
// the two kernels never touch the same element. D_t is recomputed from dout and out where needed
// (an hs-long dot per query row and tile, 1/64 of the score work), so no scratch buffer is needed.
//
// ---- Tiling ----------------------------------------------------------------------------------
// Every kernel: 256 threads as a 16 × 16 grid (tx = threadIdx % 16, ty = threadIdx / 16); tiles
// of 64 queries × 64 keys; K/V/Q/dO tiles widened to FP32 in shared memory, row stride HSP + 4
// floats (HSP = hs padded to 64 or 128 with zeros, which add nothing to any dot product; the
// +4 makes the 16-byte row reads of the score products bank-conflict free).
//   score-like products (S = Q Kᵀ, dP = dO Vᵀ, inner dimension = features): a thread computes
//     rows ty + 16i, columns tx + 16j (i, j < 4); a row's 16 owners are one half-warp, so row
//     max / sum reduce with 4 shuffles.
//   output-like products (O += P V, dQ += dS K, dV += Pᵀ dO, dK += dSᵀ Q, inner dimension =
//     keys or queries): a thread owns rows ty + 16i and features 64c + 4tx + e (e < 4,
//     c < HSP/64): 4 × HSP/16 FP32 accumulators, read as float4 rows of the shared tile.
// Global loads are 16-byte vectors (4 floats or 8 bf16/fp16), converted to FP32 once in shared
// memory. Shared memory per block (floats × 4 bytes):
//   forward   3·64·(HSP+4) + 64·68            HSP=64:  68.0 KiB   HSP=128: 116.0 KiB
//   dK/dV     4·64·(HSP+4) + 2·64·68 + 128    HSP=64: 102.5 KiB   HSP=128: 166.5 KiB
//   dQ        4·64·(HSP+4) + 64·68 + 128      HSP=64:  85.5 KiB   HSP=128: 149.5 KiB
// Supported: hs a multiple of 8 and at most 128 (hs ≤ 64 runs the HSP = 64 kernels).
//
// Later optimisation (not here): the four products map onto tensor cores (mma.sync / wgmma
// with bf16 operands and FP32 accumulators, K/V tiles staged by TMA, double-buffered); the
// numerics above are already those of such a kernel (operands rounded to T, FP32 accumulate).
//
// ---- How the tests compare (tests/cuda/) -----------------------------------------------------
// Random qkv (and dout, and a non-zero dqkv to check the +=) with T not a multiple of 64 (tile
// edges), several B, NH and hs ∈ {8, 64, 96, 128}: run cpu::attention_forward/backward on the
// host copy (cpu::bf16/fp16 have the bit layout of __nv_bfloat16/__half) and this kernel set on
// the device, then compare out, lse and dqkv. FP32: relative 1e-5 (summation order and FMA
// contraction differ; expf/logf are within 2 ulp). bf16 / fp16: normwise ‖gpu − cpu‖/‖cpu‖
// ≤ ~1e-2 (bf16) / ~2e-3 (fp16) for out and dqkv (the forward rounds unnormalised rather than
// normalised probabilities, see above), lse to FP32 relative 1e-5. Determinism: two backward
// runs give bit-identical dqkv.
#pragma once

#include "cuda/common.cuh"   // cudaCheck, to_float / from_float
#include "utils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace train_gpt::cuda {

namespace attention_detail {

constexpr int kTile = 64;             // queries per query tile = keys per key tile
constexpr int kThreads = 256;         // a 16 × 16 thread grid per block
constexpr int kPStride = kTile + 4;   // row stride (floats) of the 64 × 64 P / dS tiles
constexpr int kMaxHeadSize = 128;

// v as it reads back after a store into T (cpu::round_to): RNE, identity for float
template <typename T>
__device__ __forceinline__ float round_to(float v) {
    return to_float(from_float<T>(v));
}

// A 16-bit pair packed in a 32-bit word (element 0 in the low half) → two floats.
__device__ __forceinline__ void unpack2(float* f, uint32_t w, __nv_bfloat16) {
    f[0] = __uint_as_float(w << 16);
    f[1] = __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ void unpack2(float* f, uint32_t w, __half) {
    f[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
    f[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}
__device__ __forceinline__ uint32_t pack2(float a, float b, __nv_bfloat16) {
    return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(a))) |
           (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(b))) << 16);
}
__device__ __forceinline__ uint32_t pack2(float a, float b, __half) {
    return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(a))) |
           (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(b))) << 16);
}

// f[0 .. 16/sizeof(T)) = the 16 bytes at p (16-byte aligned), widened to FP32.
template <typename T>
__device__ __forceinline__ void load16(float* f, const T* p) {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    if constexpr (std::is_same_v<T, float>) {
        f[0] = __uint_as_float(w.x);
        f[1] = __uint_as_float(w.y);
        f[2] = __uint_as_float(w.z);
        f[3] = __uint_as_float(w.w);
    } else {
        unpack2(f + 0, w.x, T{});
        unpack2(f + 2, w.y, T{});
        unpack2(f + 4, w.z, T{});
        unpack2(f + 6, w.w, T{});
    }
}

// p[0..4) = round_T(v[0..4) + (accumulate ? p[0..4) : 0)); p aligned to 4 elements.
template <typename T, bool accumulate>
__device__ __forceinline__ void store4(T* p, float v0, float v1, float v2, float v3) {
    if constexpr (std::is_same_v<T, float>) {
        float4* q = reinterpret_cast<float4*>(p);
        if constexpr (accumulate) {
            const float4 old = *q;
            v0 += old.x;
            v1 += old.y;
            v2 += old.z;
            v3 += old.w;
        }
        *q = make_float4(v0, v1, v2, v3);
    } else {
        uint2* q = reinterpret_cast<uint2*>(p);
        if constexpr (accumulate) {
            const uint2 old = *q;
            float f[4];
            unpack2(f + 0, old.x, T{});
            unpack2(f + 2, old.y, T{});
            v0 += f[0];
            v1 += f[1];
            v2 += f[2];
            v3 += f[3];
        }
        *q = make_uint2(pack2(v0, v1, T{}), pack2(v2, v3, T{}));
    }
}

__device__ __forceinline__ float component(const float4& v, int k) {   // k is a constant after unrolling
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// tile (kTile, HSP + 4) FP32 ← rows row0 … row0+63 of a head's slice, hs features each:
// tile[r][d] = base[(row0 + r)·ld + d] for row0 + r < Tlen and d < hs, else 0.
// base points at (b, token 0, this head's first feature) of a (B, T, ld) tensor.
template <typename T, int HSP>
__device__ __forceinline__ void load_tile(float* tile, const T* __restrict__ base, size_t ld, int row0, int Tlen,
                                          int hs) {
    constexpr int S = HSP + 4;
    constexpr int VEC = 16 / sizeof(T);   // elements per 16-byte load
    constexpr int VPR = HSP / VEC;        // 16-byte vectors per padded row
    for (int idx = threadIdx.x; idx < kTile * VPR; idx += kThreads) {
        const int r = idx / VPR;
        const int d0 = (idx % VPR) * VEC;
        float f[VEC];
        if (row0 + r < Tlen && d0 < hs) {   // hs % 8 == 0: a vector is wholly inside or outside
            load16<T>(f, base + (size_t)(row0 + r) * ld + d0);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++)
                f[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < VEC; e += 4)
            *reinterpret_cast<float4*>(tile + r * S + d0 + e) = make_float4(f[e], f[e + 1], f[e + 2], f[e + 3]);
    }
}

// Per query row r of the tile starting at q0: D_s[r] = dO_r · O_r, lse_s[r] = lse[q0 + r]
// (both 0 for rows ≥ Tlen, which are masked anyway). One warp per row, lanes over features.
// dout_bh / out_bh point at (b, token 0, head h's first feature) of (B, T, C); lse_bh at (b, h, 0).
template <typename T>
__device__ __forceinline__ void load_row_stats(float* D_s, float* lse_s, const T* __restrict__ dout_bh,
                                               const T* __restrict__ out_bh, const float* __restrict__ lse_bh, int C,
                                               int q0, int Tlen, int hs) {
    constexpr int VEC = 16 / sizeof(T);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < kTile; r += kThreads / 32) {
        const int q = q0 + r;
        float acc = 0.0f;
        if (q < Tlen) {   // warp-uniform
            for (int d0 = lane * VEC; d0 < hs; d0 += 32 * VEC) {
                float g[VEC], o[VEC];
                load16<T>(g, dout_bh + (size_t)q * C + d0);
                load16<T>(o, out_bh + (size_t)q * C + d0);
#pragma unroll
                for (int e = 0; e < VEC; e++)
                    acc = fmaf(g[e], o[e], acc);
            }
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0) {
            D_s[r] = acc;
            lse_s[r] = q < Tlen ? lse_bh[q] : 0.0f;
        }
    }
}

// Score-like product (inner dimension = features):
//   acc[i][j] += Σ_d A[ty + 16i][d] · Bm[tx + 16j][d]      A, Bm: (kTile, HSP + 4) tiles
// Naive: for r, c: acc[r][c] += dot(A[r], Bm[c], HSP)
template <int HSP>
__device__ __forceinline__ void product_nt(float (&acc)[4][4], const float* A, const float* Bm, int tx, int ty) {
    constexpr int S = HSP + 4;
#pragma unroll 2
    for (int d = 0; d < HSP; d += 4) {
        float4 a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            a[i] = *reinterpret_cast<const float4*>(A + (ty + 16 * i) * S + d);
#pragma unroll
        for (int j = 0; j < 4; j++)
            b[j] = *reinterpret_cast<const float4*>(Bm + (tx + 16 * j) * S + d);
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
                acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
                acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
                acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
            }
        }
    }
}

// Output-like product (inner dimension = the 64 keys or queries of a tile):
//   acc[i][4c + e] += Σ_k P[ty + 16i][k] · M[k][64c + 4tx + e]
//   P: (kTile, kPStride) tile; M: (kTile, HSP + 4) tile; c < HSP/64, e < 4
// Naive: for r, d: acc[r][d] += Σ_k P[r][k] M[k][d]
template <int HSP>
__device__ __forceinline__ void product_nn(float (&acc)[4][HSP / 16], const float* P, const float* M, int tx, int ty) {
    constexpr int S = HSP + 4;
    constexpr int DC = HSP / 64;   // 4-feature chunks per thread
#pragma unroll 2
    for (int k = 0; k < kTile; k += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            p[i] = *reinterpret_cast<const float4*>(P + (ty + 16 * i) * kPStride + k);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float4 m[DC];
#pragma unroll
            for (int c = 0; c < DC; c++)
                m[c] = *reinterpret_cast<const float4*>(M + (k + kk) * S + 64 * c + 4 * tx);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float pk = component(p[i], kk);
#pragma unroll
                for (int c = 0; c < DC; c++) {
                    acc[i][4 * c + 0] = fmaf(pk, m[c].x, acc[i][4 * c + 0]);
                    acc[i][4 * c + 1] = fmaf(pk, m[c].y, acc[i][4 * c + 1]);
                    acc[i][4 * c + 2] = fmaf(pk, m[c].z, acc[i][4 * c + 2]);
                    acc[i][4 * c + 3] = fmaf(pk, m[c].w, acc[i][4 * c + 3]);
                }
            }
        }
    }
}

// Row accumulators acc[i][·] (rows ty + 16i of a tile at row0, features 64c + 4tx + e) → rows of
// a (·, T, ld) tensor at base (b, token 0, head feature 0): dst = round_T(acc·mul (+ dst)).
template <typename T, int HSP, bool accumulate>
__device__ __forceinline__ void store_rows(T* base, size_t ld, const float (&acc)[4][HSP / 16], const float (&mul)[4],
                                           int row0, int Tlen, int hs, int tx, int ty) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int row = row0 + ty + 16 * i;
        if (row >= Tlen) continue;
#pragma unroll
        for (int c = 0; c < HSP / 64; c++) {
            const int d0 = 64 * c + 4 * tx;
            if (d0 >= hs) continue;   // hs % 8 == 0: 4-feature chunks are wholly in or out
            store4<T, accumulate>(base + (size_t)row * ld + d0, acc[i][4 * c] * mul[i], acc[i][4 * c + 1] * mul[i],
                                  acc[i][4 * c + 2] * mul[i], acc[i][4 * c + 3] * mul[i]);
        }
    }
}

template <int HSP>
constexpr size_t forward_smem_bytes() {
    return sizeof(float) * (3 * kTile * (HSP + 4) + kTile * kPStride);
}
template <int HSP>
constexpr size_t dkdv_smem_bytes() {
    return sizeof(float) * (4 * kTile * (HSP + 4) + 2 * kTile * kPStride + 2 * kTile);
}
template <int HSP>
constexpr size_t dq_smem_bytes() {
    return sizeof(float) * (4 * kTile * (HSP + 4) + kTile * kPStride + 2 * kTile);
}

// ---- forward: one block per (query tile, h, b) ----
template <typename T, int HSP>
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int Tlen, int C,
                             int NH, float scale) {
    constexpr int S = HSP + 4;
    constexpr int DPT = HSP / 16;   // output features per thread
    extern __shared__ float4 smem_f4[];
    float* Qs = reinterpret_cast<float*>(smem_f4);   // (64, S)   this block's queries
    float* Ks = Qs + kTile * S;                      // (64, S)   current key tile
    float* Vs = Ks + kTile * S;                      // (64, S)   current value tile
    float* Ps = Vs + kTile * S;                      // (64, 68)  round_T(p) [query][key]

    const int hs = C / NH;
    const int qt = gridDim.x - 1 - blockIdx.x;   // the longest rows (last tiles) start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int q0 = qt * kTile;
    const size_t ld = 3 * (size_t)C;
    const T* q_bh = qkv + (size_t)b * Tlen * ld + (size_t)h * hs;   // (T, 3C) rows, head h's q
    const T* k_bh = q_bh + C;
    const T* v_bh = q_bh + 2 * (size_t)C;

    load_tile<T, HSP>(Qs, q_bh, ld, q0, Tlen, hs);

    float o[4][DPT];    // rows ty + 16i, features 64c + 4tx + e
    float m[4], l[4];   // running max (reduced over the row), this thread's share of the running sum
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int d = 0; d < DPT; d++)
            o[i][d] = 0.0f;
    }

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * kTile;
        __syncthreads();   // every warp is done with the previous K, V
        load_tile<T, HSP>(Ks, k_bh, ld, k0, Tlen, hs);
        load_tile<T, HSP>(Vs, v_bh, ld, k0, Tlen, hs);
        __syncthreads();

        float s[4][4] = {};   // s[i][j] = q_(ty+16i) · k_(tx+16j)
        product_nt<HSP>(s, Qs, Ks, tx, ty);

#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = ty + 16 * i;
            float tile_max = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int key = k0 + tx + 16 * j;
                s[i][j] = key <= q0 + r ? __fmul_rn(s[i][j], scale) : -INFINITY;   // causal mask; no FMA contraction
                tile_max = fmaxf(tile_max, s[i][j]);
            }
#pragma unroll
            for (int off = 8; off > 0; off >>= 1)   // over the 16 lanes (one half-warp) sharing row r
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
            const float m_new = fmaxf(m[i], tile_max);   // finite: key 0 is in tile 0 for every row
            const float alpha = expf(m[i] - m_new);      // 0 on the first tile (m = −∞)
            m[i] = m_new;
            l[i] *= alpha;
#pragma unroll
            for (int d = 0; d < DPT; d++)
                o[i][d] *= alpha;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float p = expf(s[i][j] - m_new);   // masked: exp(−∞) = 0
                l[i] += p;
                Ps[r * kPStride + tx + 16 * j] = round_to<T>(p);
            }
        }
        // Row r of Ps is written and read only by the half-warp that owns row r.
        __syncwarp();
        product_nn<HSP>(o, Ps, Vs, tx, ty);   // o += round_T(p) · V
    }

    float inv_l[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float sum = l[i];
#pragma unroll
        for (int off = 8; off > 0; off >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, off);
        inv_l[i] = 1.0f / sum;
        const int q = q0 + ty + 16 * i;
        if (tx == 0 && q < Tlen) lse[((size_t)b * NH + h) * Tlen + q] = m[i] + logf(sum);
    }
    store_rows<T, HSP, false>(out + (size_t)b * Tlen * C + (size_t)h * hs, C, o, inv_l, q0, Tlen, hs, tx, ty);
}

// p = round_T(exp(s·scale − lse)) and dS·scale = round_T(p·(dP − D))·scale for the score-layout
// micro-tile (query rows ty + 16i of the tile at q0, keys tx + 16j of the tile at k0); 0 where
// the key is in the future or the query row is past the end. Naive: cpu::attention_backward.
template <typename T>
__device__ __forceinline__ void probabilities_and_dscores(float (&s)[4][4], float (&dp)[4][4], const float* lse_s,
                                                          const float* D_s, int q0, int k0, int Tlen, float scale,
                                                          int tx, int ty) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = ty + 16 * i;
        const int q = q0 + r;
        const float row_lse = lse_s[r], D = D_s[r];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int key = k0 + tx + 16 * j;
            // __fmul_rn: no FMA contraction of s·scale − lse, as the CPU rounds s·scale first
            const float p = (key <= q && q < Tlen) ? round_to<T>(expf(__fmul_rn(s[i][j], scale) - row_lse)) : 0.0f;
            s[i][j] = p;
            dp[i][j] = round_to<T>(p * (dp[i][j] - D)) * scale;
        }
    }
}

// ---- backward, dK and dV: one block per (key tile, h, b), query tiles walked in order ----
template <typename T, int HSP>
__global__ void __launch_bounds__(kThreads, 1)
    attention_backward_dkdv_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                   const T* __restrict__ out, const float* __restrict__ lse, int Tlen, int C, int NH,
                                   float scale) {
    constexpr int S = HSP + 4;
    constexpr int DPT = HSP / 16;
    extern __shared__ float4 smem_f4[];
    float* Ks = reinterpret_cast<float*>(smem_f4);   // (64, S)   this block's keys
    float* Vs = Ks + kTile * S;                      // (64, S)   this block's values
    float* Qs = Vs + kTile * S;                      // (64, S)   current query tile
    float* dOs = Qs + kTile * S;                     // (64, S)   its output gradients
    float* PsT = dOs + kTile * S;                    // (64, 68)  round_T(P)          [key][query]
    float* dSsT = PsT + kTile * kPStride;            // (64, 68)  round_T(dS)·scale   [key][query]
    float* lse_s = dSsT + kTile * kPStride;          // (64)
    float* D_s = lse_s + kTile;                      // (64)

    const int hs = C / NH;
    const int kt = blockIdx.x;   // the first key tiles see the most queries and start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int k0 = kt * kTile;
    const int n_tiles = (Tlen + kTile - 1) / kTile;
    const size_t ld = 3 * (size_t)C;
    const T* q_bh = qkv + (size_t)b * Tlen * ld + (size_t)h * hs;      // (T, 3C) rows, head h's q
    const T* dout_bh = dout + (size_t)b * Tlen * C + (size_t)h * hs;   // (T, C) rows
    const T* out_bh = out + (size_t)b * Tlen * C + (size_t)h * hs;
    const float* lse_bh = lse + ((size_t)b * NH + h) * Tlen;

    load_tile<T, HSP>(Ks, q_bh + C, ld, k0, Tlen, hs);
    load_tile<T, HSP>(Vs, q_bh + 2 * (size_t)C, ld, k0, Tlen, hs);

    float dk[4][DPT], dv[4][DPT];   // keys ty + 16i, features 64c + 4tx + e
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int d = 0; d < DPT; d++)
            dk[i][d] = dv[i][d] = 0.0f;
    }

    for (int qt = kt; qt < n_tiles; qt++) {   // causal: query tiles at or after the diagonal
        const int q0 = qt * kTile;
        __syncthreads();   // every warp is done with the previous Q, dO, P, dS
        load_tile<T, HSP>(Qs, q_bh, ld, q0, Tlen, hs);
        load_tile<T, HSP>(dOs, dout_bh, C, q0, Tlen, hs);
        load_row_stats<T>(D_s, lse_s, dout_bh, out_bh, lse_bh, C, q0, Tlen, hs);
        __syncthreads();

        float s[4][4] = {}, dp[4][4] = {};      // [query ty+16i][key tx+16j]
        product_nt<HSP>(s, Qs, Ks, tx, ty);     // S  = Q Kᵀ
        product_nt<HSP>(dp, dOs, Vs, tx, ty);   // dP = dO Vᵀ
        probabilities_and_dscores<T>(s, dp, lse_s, D_s, q0, k0, Tlen, scale, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                PsT[(tx + 16 * j) * kPStride + ty + 16 * i] = s[i][j];
                dSsT[(tx + 16 * j) * kPStride + ty + 16 * i] = dp[i][j];
            }
        }
        __syncthreads();                         // the transposed tiles cross warps
        product_nn<HSP>(dv, PsT, dOs, tx, ty);   // dV += Pᵀ dO
        product_nn<HSP>(dk, dSsT, Qs, tx, ty);   // dK += (dS·scale)ᵀ Q
    }

    const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    T* dk_bh = dqkv + (size_t)b * Tlen * ld + C + (size_t)h * hs;
    store_rows<T, HSP, true>(dk_bh, ld, dk, one, k0, Tlen, hs, tx, ty);
    store_rows<T, HSP, true>(dk_bh + C, ld, dv, one, k0, Tlen, hs, tx, ty);
}

// ---- backward, dQ: one block per (query tile, h, b), key tiles walked in order ----
template <typename T, int HSP>
__global__ void __launch_bounds__(kThreads, 1)
    attention_backward_dq_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                 const T* __restrict__ out, const float* __restrict__ lse, int Tlen, int C, int NH,
                                 float scale) {
    constexpr int S = HSP + 4;
    constexpr int DPT = HSP / 16;
    extern __shared__ float4 smem_f4[];
    float* Qs = reinterpret_cast<float*>(smem_f4);   // (64, S)   this block's queries
    float* dOs = Qs + kTile * S;                     // (64, S)   their output gradients
    float* Ks = dOs + kTile * S;                     // (64, S)   current key tile
    float* Vs = Ks + kTile * S;                      // (64, S)   current value tile
    float* dSs = Vs + kTile * S;                     // (64, 68)  round_T(dS)·scale [query][key]
    float* lse_s = dSs + kTile * kPStride;           // (64)
    float* D_s = lse_s + kTile;                      // (64)

    const int hs = C / NH;
    const int qt = gridDim.x - 1 - blockIdx.x;   // the longest rows (last tiles) start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int q0 = qt * kTile;
    const size_t ld = 3 * (size_t)C;
    const T* q_bh = qkv + (size_t)b * Tlen * ld + (size_t)h * hs;
    const T* dout_bh = dout + (size_t)b * Tlen * C + (size_t)h * hs;
    const T* out_bh = out + (size_t)b * Tlen * C + (size_t)h * hs;
    const float* lse_bh = lse + ((size_t)b * NH + h) * Tlen;

    load_tile<T, HSP>(Qs, q_bh, ld, q0, Tlen, hs);
    load_tile<T, HSP>(dOs, dout_bh, C, q0, Tlen, hs);
    load_row_stats<T>(D_s, lse_s, dout_bh, out_bh, lse_bh, C, q0, Tlen, hs);

    float dq[4][DPT];   // queries ty + 16i, features 64c + 4tx + e
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int d = 0; d < DPT; d++)
            dq[i][d] = 0.0f;
    }

    for (int kt = 0; kt <= qt; kt++) {   // causal: key tiles up to the diagonal
        const int k0 = kt * kTile;
        __syncthreads();   // every warp is done with the previous K, V (and the row stats are in)
        load_tile<T, HSP>(Ks, q_bh + C, ld, k0, Tlen, hs);
        load_tile<T, HSP>(Vs, q_bh + 2 * (size_t)C, ld, k0, Tlen, hs);
        __syncthreads();

        float s[4][4] = {}, dp[4][4] = {};   // [query ty+16i][key tx+16j]
        product_nt<HSP>(s, Qs, Ks, tx, ty);
        product_nt<HSP>(dp, dOs, Vs, tx, ty);
        probabilities_and_dscores<T>(s, dp, lse_s, D_s, q0, k0, Tlen, scale, tx, ty);
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                dSs[(ty + 16 * i) * kPStride + tx + 16 * j] = dp[i][j];
        }
        // Row r of dSs is written and read only by the half-warp that owns row r.
        __syncwarp();
        product_nn<HSP>(dq, dSs, Ks, tx, ty);   // dQ += (dS·scale) K
    }

    const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    store_rows<T, HSP, true>(dqkv + (size_t)b * Tlen * ld + (size_t)h * hs, ld, dq, one, q0, Tlen, hs, tx, ty);
}

// Shape and alignment preconditions shared by both launchers; returns hs.
inline int check_attention_args(const char* who, int B, int Tlen, int C, int NH,
                                std::initializer_list<const void*> ptrs) {
    // grid = (T/64, NH, B): NH and B are grid dimensions y and z, at most 65535 each
    if (B < 0 || Tlen < 0 || C <= 0 || NH <= 0 || C % NH != 0 || B > 65535 || NH > 65535)
        ::train_gpt::fail("%s: bad shape B=%d T=%d C=%d NH=%d (need C divisible by NH, B and NH ≤ 65535)", who, B, Tlen,
                          C, NH);
    const int hs = C / NH;
    // hs % 8: every 16-byte vector (4 floats, 8 bf16/fp16) of a head row lies in that head and is
    // 16-byte aligned (lse is read by scalar loads and may sit anywhere); hs ≤ 128: the largest padded tile (HSP = 128) the kernels are built for.
    if (hs % 8 != 0 || hs > kMaxHeadSize)
        ::train_gpt::fail(
            "%s: head size hs = C/NH = %d/%d = %d is not supported: the CUDA attention kernels "
            "need hs to be a multiple of 8 and at most %d",
            who, C, NH, hs, kMaxHeadSize);
    for (const void* p : ptrs) {
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
            ::train_gpt::fail("%s: buffer %p is not 16-byte aligned (the kernels use 16-byte loads)", who, p);
    }
    return hs;
}

template <typename T, int HSP>
void launch_attention_forward(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, float scale,
                              cudaStream_t stream) {
    constexpr size_t smem = forward_smem_bytes<HSP>();
    auto kernel = attention_forward_kernel<T, HSP>;
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const dim3 grid((Tlen + kTile - 1) / kTile, NH, B);
    kernel<<<grid, kThreads, smem, stream>>>(out, lse, qkv, Tlen, C, NH, scale);
    cudaCheck(cudaGetLastError());
}

template <typename T, int HSP>
void launch_attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen,
                               int C, int NH, float scale, cudaStream_t stream) {
    const dim3 grid((Tlen + kTile - 1) / kTile, NH, B);
    constexpr size_t smem_kv = dkdv_smem_bytes<HSP>();
    auto kernel_kv = attention_backward_dkdv_kernel<T, HSP>;
    cudaCheck(cudaFuncSetAttribute(kernel_kv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv));
    kernel_kv<<<grid, kThreads, smem_kv, stream>>>(dqkv, dout, qkv, out, lse, Tlen, C, NH, scale);
    cudaCheck(cudaGetLastError());
    constexpr size_t smem_q = dq_smem_bytes<HSP>();
    auto kernel_q = attention_backward_dq_kernel<T, HSP>;
    cudaCheck(cudaFuncSetAttribute(kernel_q, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q));
    kernel_q<<<grid, kThreads, smem_q, stream>>>(dqkv, dout, qkv, out, lse, Tlen, C, NH, scale);
    cudaCheck(cudaGetLastError());
}

static_assert(dkdv_smem_bytes<128>() <= 227 * 1024, "largest tile set must fit Hopper's 227 KiB per block");

}   // namespace attention_detail

// out (B,T,C), lse (B,NH,T) FP32 ← causal attention of qkv (B,T,3C). Overwrites out and lse.
template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, cudaStream_t stream) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                  "attention_forward: T must be float, __nv_bfloat16 or __half");
    using namespace attention_detail;
    const int hs = check_attention_args("attention_forward", B, Tlen, C, NH, {out, qkv});
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)hs);   // as the CPU twin: 1 / std::sqrt(float(hs))
    if (hs <= 64)
        launch_attention_forward<T, 64>(out, lse, qkv, B, Tlen, C, NH, scale, stream);
    else
        launch_attention_forward<T, 128>(out, lse, qkv, B, Tlen, C, NH, scale, stream);
}

// dqkv (B,T,3C) += gradient of attention_forward, from dout (B,T,C) and the forward's qkv, out, lse.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen, int C,
                        int NH, cudaStream_t stream) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                  "attention_backward: T must be float, __nv_bfloat16 or __half");
    using namespace attention_detail;
    const int hs = check_attention_args("attention_backward", B, Tlen, C, NH, {dqkv, dout, qkv, out});
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)hs);
    if (hs <= 64)
        launch_attention_backward<T, 64>(dqkv, dout, qkv, out, lse, B, Tlen, C, NH, scale, stream);
    else
        launch_attention_backward<T, 128>(dqkv, dout, qkv, out, lse, B, Tlen, C, NH, scale, stream);
}

}   // namespace train_gpt::cuda
