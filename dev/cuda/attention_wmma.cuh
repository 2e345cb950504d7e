// attention_wmma.cuh — lab version of causal self-attention: flash-style, on tensor cores through
// nvcuda::wmma. Timed against the others by dev/cuda/attention.cu; tests/cuda/test_cuda_attention_wmma.cu.
//
//   attention_forward_wmma (out (B,T,C), lse (B,NH,T) FP32, qkv (B,T,3C))
//   attention_backward_wmma(dqkv (B,T,3C) +=, dout (B,T,C), qkv, out, lse)
//
// Same contract as attention_scalar.cuh (read its header first): same arguments, layouts and roundings
// as the CPU twin cpu::attention_forward / cpu::attention_backward; qkv holds [q | k | v] per
// token, head h uses features h·hs … (h+1)·hs; scale = 1/√hs; lse (B,NH,T) FP32; backward
// ACCUMULATES into dqkv with one rounding per element, dqkv = round_T(dqkv + acc_fp32). No T×T
// matrix reaches device memory. T = __nv_bfloat16 or __half only: WMMA has no FP32-operand path
// of the same shape, so T = float fails (fail(), with a message naming the flash/GEMM versions);
// the harness skips FP32.
//
// ---- Forward (FlashAttention-2 with WMMA) ----------------------------------------------------
// One block of 4 warps (128 threads) per (b, h, query tile of 64); warp w owns query rows
// 16w … 16w+15 of the tile. Query tiles are issued last-first (the diagonal's tile count grows
// with the tile index: the longest blocks start first). Q (64 × HSP) is staged once; then for each
// key tile of 64 up to and including the diagonal:
//   K, V tiles → shared memory (T; zeros beyond T and beyond hs)
//   S_w (16×64, FP32) = Q_w·Kᵀ                (wmma, K row-major [key][dim] read as a col_major B)
//   online softmax on the warp's 16 rows (2 lanes per row, 32 columns each):
//     s = scale·S, masked where key > query;  m' = max(m, max s);  α = exp(m − m');
//     p = exp(s − m');  l = α·l + Σ p;  O_w *= α (in shared memory);  P_w = round_T(p)
//   O_w (FP32, shared memory) += P_w·V        (accumulators loaded from and stored back to O)
// and at the end out = round_T(O / l), lse = m + log l. Exactly the recurrence of attention.cuh:
// the unnormalised p is rounded to T before P·V (FA2), where the CPU rounds the normalised P; l
// sums unrounded p. On the diagonal tile the 16×16 blocks above the diagonal (key block j > w)
// are skipped in both products (their p are all 0).
//
// ---- Backward ----------------------------------------------------------------------------------
// D_t = dO_t·O_t (FP32) by a small kernel into scratch (B,NH,T), then two kernels, each element
// of dqkv owned by exactly one thread, no atomics, a fixed order: deterministic.
//   dK/dV kernel: block per (b, h, key tile of 64), warp w owns keys 16w … 16w+15. K, V staged
//     once; walks the query tiles from the diagonal to the end, in order:
//       Sᵀ_w = K_w·Q_iᵀ, dPᵀ_w = V_w·dO_iᵀ (FP32, shared)
//       Pᵀ = round_T(exp(Sᵀ·scale − lse)), dSᵀ = round_T(Pᵀ∘(dPᵀ − D))  (masked: 0), as T tiles
//       dV_w += Pᵀ_w·dO_i,  dK_w += dSᵀ_w·Q_i      (FP32 accumulator fragments, live across the walk)
//     then dK *= scale and dqkv[k], dqkv[v] = round_T(dqkv + acc).
//   dQ kernel: block per (b, h, query tile of 64), warp w owns queries 16w … 16w+15. Q, dO staged
//     once; walks the key tiles 0 … diagonal: S_w = Q_w·Kᵀ, dP_w = dO_w·Vᵀ, dS as above,
//     dQ_w += dS_w·K; then dQ *= scale and dqkv[q] = round_T(dqkv + acc).
// Roundings relative to the CPU twin: P and dS are rounded to T exactly where the CPU rounds them
// (same expression: exp(dot·scale − lse), P·(dP − D)); the CPU multiplies each term by scale,
// (dS·scale)·k, here scale multiplies the FP32 sum once at the end (the same up to FP32 rounding;
// exact when hs is a power of 4). S, dP, D and the accumulators are FP32 with another summation
// order (tensor-core dot products), so results agree to the normwise tolerance, not bit for bit.
//
// ---- Shared memory (bytes; LDT = HSP + 8 T elements, LDF = 68 floats, LDP = 72 T, LDO = HSP+4) --
// Rows are padded (16 bytes for T tiles, 16 bytes for FP32 tiles) to spread banks; every
// fragment pointer is 32-byte aligned (wmma's requirement), every ld a multiple of 8 (T) / 4 (FP32).
//   forward  3·64·LDT·2 (Q,K,V) + 64·LDF·4 (S) + 64·LDP·2 (P) + 64·LDO·4 (O) + 2·64·4 (m, l)
//            HSP=64: 70.5 KiB   HSP=128: 110.5 KiB
//   dK/dV    4·64·LDT·2 (K,V,Q,dO) + 2·64·LDF·4 (Sᵀ, dPᵀ; reused to stage the results) +
//            2·64·LDP·2 (Pᵀ, dSᵀ) + 2·64·4 (lse, D)      HSP=64: 88.5 KiB   HSP=128: 120.5 KiB
//   dQ       4·64·LDT·2 + 2·64·LDF·4 + 64·LDP·2 + 2·64·4 HSP=64: 79.5 KiB   HSP=128: 111.5 KiB
// Supported: hs a multiple of 16 (the wmma k-step; padding to HSP = 64 or 128 with zeros adds
// nothing to any dot product) and at most 128.
//
// ---- Same as / different from attention.cuh ------------------------------------------------------
// Same: tiles of 64 × 64, the online-softmax recurrence and its FA2 rounding, the two-kernel
// deterministic backward, one rounded read-modify-write per dqkv element, 16-byte global loads.
// Different: products on tensor cores with T operands straight from shared memory (no FP32
// widening of tiles); 128 threads instead of 256; D_t computed once by a pre-pass into scratch
// instead of per tile; masked 16×16 blocks on the diagonal skipped; scale applied to dQ/dK once.
//
// FLOPs (causal, counted like dev/cuda/attention.cu): forward 2·B·NH·T²·hs (QKᵀ and PV over the
// lower triangle); backward here does 7 half-triangle products (S and dP twice, dV, dK, dQ) =
// 7·B·NH·T²·hs, reported as the conventional 5·B·NH·T²·hs.
#pragma once

#include "cuda/common.cuh"   // cudaCheck, to_float / from_float, scratch
#include "utils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace train_gpt::cuda {

namespace attention_wmma_detail {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;   // queries per query tile = keys per key tile
constexpr int kWarps = 4;   // warp w owns rows 16w … 16w+15 of the block's tile
constexpr int kThreads = 32 * kWarps;
constexpr int kLDF = kTile + 4;   // FP32 score tiles (64 columns), floats
constexpr int kLDP = kTile + 8;   // T probability tiles (64 columns), elements
constexpr int kMaxHeadSize = 128;

template <int HSP>
__host__ __device__ constexpr int ldt() {
    return HSP + 8;
}   // T tiles of HSP features
template <int HSP>
__host__ __device__ constexpr int ldo() {
    return HSP + 4;
}   // FP32 tiles of HSP features

constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }

// Byte offsets of the shared arrays (each 128-byte aligned).
template <int HSP>
struct FwdSmem {
    static constexpr size_t tileT = align128(size_t(kTile) * ldt<HSP>() * 2);
    static constexpr size_t q = 0, k = q + tileT, v = k + tileT;
    static constexpr size_t s = v + tileT;
    static constexpr size_t p = s + align128(size_t(kTile) * kLDF * 4);
    static constexpr size_t o = p + align128(size_t(kTile) * kLDP * 2);
    static constexpr size_t m = o + align128(size_t(kTile) * ldo<HSP>() * 4);
    static constexpr size_t l = m + kTile * 4;
    static constexpr size_t bytes = l + kTile * 4;
};
// dK/dV (two_T_tiles = true) and dQ (false) kernels: a, b = the persistent tiles (K, V / Q, dO),
// c, d = the walked tiles (Q, dO / K, V); s, dp = FP32 scores; p, ds = T tiles; r0, r1 = per-row stats.
template <int HSP, bool two_T_tiles>
struct BwdSmem {
    static constexpr size_t tileT = align128(size_t(kTile) * ldt<HSP>() * 2);
    static constexpr size_t tileF = align128(size_t(kTile) * kLDF * 4);
    static constexpr size_t tileP = align128(size_t(kTile) * kLDP * 2);
    static constexpr size_t a = 0, b = a + tileT, c = b + tileT, d = c + tileT;
    static constexpr size_t s = d + tileT, dp = s + tileF;   // contiguous: also the result stage
    static constexpr size_t p = dp + tileF;
    static constexpr size_t ds = p + (two_T_tiles ? tileP : 0);
    static constexpr size_t r0 = ds + tileP, r1 = r0 + kTile * 4;
    static constexpr size_t bytes = r1 + kTile * 4;
    // the result stage (64 × ldo FP32) fits in s + dp
    static_assert(size_t(kTile) * ldo<HSP>() * 4 <= 2 * tileF, "result stage must fit in the score tiles");
};

template <typename T>
__device__ __forceinline__ float round_to(float v) {
    return to_float(from_float<T>(v));
}

__device__ __forceinline__ uint16_t bits(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ uint16_t bits(__half x) { return __half_as_ushort(x); }
__device__ __forceinline__ float widen(uint16_t u, __nv_bfloat16) { return __uint_as_float(uint32_t(u) << 16); }
__device__ __forceinline__ float widen(uint16_t u, __half) { return __half2float(__ushort_as_half(u)); }

// two floats → two T (RNE) in one 32-bit word, element 0 in the low half; and back
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
    return uint32_t(bits(from_float<T>(a))) | (uint32_t(bits(from_float<T>(b))) << 16);
}
template <typename T>
__device__ __forceinline__ void unpack2(float* f, uint32_t w) {
    f[0] = widen(uint16_t(w & 0xffffu), T{});
    f[1] = widen(uint16_t(w >> 16), T{});
}

// dst (64 × HSP, row stride ldt) = rows row0 … row0+63 of src (row stride ld, features 0 … hs):
// zeros for rows ≥ Tlen and features ≥ hs. 16-byte loads and stores; all threads of the block.
template <typename T, int HSP>
__device__ __forceinline__ void load_tile(T* dst, const T* src, size_t ld, int row0, int Tlen, int hs) {
    constexpr int chunks = HSP / 8;   // 8 elements = 16 bytes
    for (int idx = threadIdx.x; idx < kTile * chunks; idx += kThreads) {
        const int r = idx / chunks, c = (idx % chunks) * 8;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < Tlen && c < hs) v = *reinterpret_cast<const uint4*>(src + (size_t)(row0 + r) * ld + c);
        *reinterpret_cast<uint4*>(dst + r * ldt<HSP>() + c) = v;
    }
}

// The warp's rows of a 64 × HSP FP32 stage (row stride ldo) into dst rows row0 … row0+15 (row
// stride ld), features < hs, rows < Tlen: dst = round_T(stage·mul + (accumulate ? dst : 0)).
template <typename T, int HSP, bool accumulate>
__device__ __forceinline__ void store_rows(T* dst, size_t ld, const float* stage, int row0, int Tlen, int hs,
                                           const float* row_mul, int lane) {
    const int chunks = hs / 8;
    for (int idx = lane; idx < 16 * chunks; idx += 32) {
        const int r = idx / chunks, c = (idx % chunks) * 8;
        if (row0 + r >= Tlen) continue;
        const float mul = row_mul != nullptr ? row_mul[r] : 1.0f;
        const float* src = stage + r * ldo<HSP>() + c;
        const float4 a = *reinterpret_cast<const float4*>(src);
        const float4 b = *reinterpret_cast<const float4*>(src + 4);
        float v[8] = {a.x * mul, a.y * mul, a.z * mul, a.w * mul, b.x * mul, b.y * mul, b.z * mul, b.w * mul};
        T* p = dst + (size_t)(row0 + r) * ld + c;
        if constexpr (accumulate) {
            const uint4 old = *reinterpret_cast<const uint4*>(p);
            float o[8];
            unpack2<T>(o + 0, old.x);
            unpack2<T>(o + 2, old.y);
            unpack2<T>(o + 4, old.z);
            unpack2<T>(o + 6, old.w);
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] += o[e];
        }
        uint4 w;
        w.x = pack2<T>(v[0], v[1]);
        w.y = pack2<T>(v[2], v[3]);
        w.z = pack2<T>(v[4], v[5]);
        w.w = pack2<T>(v[6], v[7]);
        *reinterpret_cast<uint4*>(p) = w;
    }
}

template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// out (16 × 64 FP32, stride kLDF) = A (16 × HSP, rows of a T tile, stride ldt) · Bᵀ where B is a
// 64 × HSP T tile (stride ldt) read as a col_major operand. Column blocks j with skip(j) are not
// computed (their values are left as they were and must be masked by the caller).
template <typename T, int HSP>
__device__ __forceinline__ void scores_16x64(float* out, const T* A, const T* B, int jmin, int jmax) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (j < jmin || j > jmax) continue;
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int k = 0; k < HSP / 16; k++) {
            FragA<T> a;
            FragBCol<T> b;
            wmma::load_matrix_sync(a, A + 16 * k, ldt<HSP>());
            wmma::load_matrix_sync(b, B + 16 * j * ldt<HSP>() + 16 * k, ldt<HSP>());
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(out + 16 * j, acc, kLDF, wmma::mem_row_major);
    }
}

// ---- forward -------------------------------------------------------------------------------------

template <typename T, int HSP>
__global__ void __launch_bounds__(kThreads)
    attention_forward_wmma_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int Tlen,
                                  int C, int NH, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();   // bf16/fp16 wmma needs sm_80+
#else
    using L = FwdSmem<HSP>;
    constexpr int LDT = ldt<HSP>(), LDO = ldo<HSP>();
    extern __shared__ __align__(128) unsigned char smem[];
    T* Qs = reinterpret_cast<T*>(smem + L::q);
    T* Ks = reinterpret_cast<T*>(smem + L::k);
    T* Vs = reinterpret_cast<T*>(smem + L::v);
    float* Ss = reinterpret_cast<float*>(smem + L::s);
    T* Ps = reinterpret_cast<T*>(smem + L::p);
    float* Os = reinterpret_cast<float*>(smem + L::o);
    float* Ms = reinterpret_cast<float*>(smem + L::m);
    float* Ls = reinterpret_cast<float*>(smem + L::l);

    const int nq = (Tlen + kTile - 1) / kTile;
    const int qt = nq - 1 - (int)blockIdx.x;   // longest tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int hs = C / NH;
    const int q0 = qt * kTile;
    const size_t ld = (size_t)3 * C;
    const T* base = qkv + (size_t)b * Tlen * ld + (size_t)h * hs;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    load_tile<T, HSP>(Qs, base, ld, q0, Tlen, hs);
    for (int i = threadIdx.x; i < kTile * LDO; i += kThreads)
        Os[i] = 0.0f;
    if (threadIdx.x < kTile) {
        Ms[threadIdx.x] = -INFINITY;
        Ls[threadIdx.x] = 0.0f;
    }

    // this lane's row (of the warp's 16) and column parity in the softmax step
    const int r = lane >> 1, half = lane & 1;
    const int row = 16 * warp + r;   // row within the tile
    const int qrow = q0 + row;
    float* Sw = Ss + 16 * warp * kLDF;
    T* Pw = Ps + 16 * warp * kLDP;
    float* Ow = Os + 16 * warp * LDO;

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * kTile;
        const bool diag = kt == qt;
        __syncthreads();   // every warp is done with the previous K, V (and Q, O, m, l are initialised)
        load_tile<T, HSP>(Ks, base + C, ld, k0, Tlen, hs);
        load_tile<T, HSP>(Vs, base + 2 * C, ld, k0, Tlen, hs);
        __syncthreads();

        const int jmax = diag ? warp : 3;   // key blocks above the diagonal are fully masked
        scores_16x64<T, HSP>(Sw, Qs + 16 * warp * LDT, Ks, 0, jmax);
        __syncwarp();

        // online softmax on row `row`: this lane takes columns 2c + half (two passes over S_w in
        // shared memory: max, then exp and sum; masked entries never enter either)
        float mx = -INFINITY;
#pragma unroll 8
        for (int c = 0; c < 32; c++) {
            const int col = 2 * c + half;
            if (k0 + col <= qrow) mx = fmaxf(mx, Sw[r * kLDF + col] * scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
        const float m_old = Ms[row];
        const float m_new = fmaxf(m_old, mx);      // finite: key k0 ≤ q0 ≤ qrow is never masked
        const float alpha = expf(m_old - m_new);   // 0 on the first tile (m_old = −∞)
        float sum = 0.0f;
#pragma unroll 8
        for (int c = 0; c < 32; c++) {
            const int col = 2 * c + half;
            const bool masked = k0 + col > qrow;
            const float p = masked ? 0.0f : expf(Sw[r * kLDF + col] * scale - m_new);
            sum += p;
            Pw[r * kLDP + col] = from_float<T>(p);
        }
        sum += __shfl_xor_sync(kFullMask, sum, 1);
#pragma unroll 4
        for (int d = half; d < HSP; d += 2)
            Ow[r * LDO + d] *= alpha;
        __syncwarp();   // both lanes of the row have read m_old
        if (half == 0) {
            Ms[row] = m_new;
            Ls[row] = alpha * Ls[row] + sum;
        }
        __syncwarp();   // P_w and the rescaled O_w are visible to the whole warp

        // O_w += P_w · V
#pragma unroll
        for (int n = 0; n < HSP / 16; n++) {
            FragC acc;
            wmma::load_matrix_sync(acc, Ow + 16 * n, LDO, wmma::mem_row_major);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (j > jmax) continue;
                FragA<T> a;
                FragBRow<T> bv;
                wmma::load_matrix_sync(a, Pw + 16 * j, kLDP);
                wmma::load_matrix_sync(bv, Vs + 16 * j * LDT + 16 * n, LDT);
                wmma::mma_sync(acc, a, bv, acc);
            }
            wmma::store_matrix_sync(Ow + 16 * n, acc, LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }

    // out = O / l, lse = m + log l, for the warp's rows < Tlen
    float* inv = Sw;   // 16 floats of the warp's own score rows, no longer needed
    if (half == 0) inv[r] = 1.0f / Ls[row];
    __syncwarp();
    store_rows<T, HSP, false>(out + (size_t)b * Tlen * C + (size_t)h * hs, (size_t)C, Ow, q0 + 16 * warp, Tlen, hs, inv,
                              lane);
    if (half == 0 && qrow < Tlen) lse[((size_t)b * NH + h) * Tlen + qrow] = Ms[row] + logf(Ls[row]);
#endif
}

// ---- backward ----------------------------------------------------------------------------------

// D (B,NH,T) FP32: D_t = dO_t · O_t, one warp per (b, t, h).
template <typename T>
__global__ void __launch_bounds__(256)
    attention_wmma_d_kernel(float* __restrict__ D, const T* __restrict__ dout, const T* __restrict__ out, int B,
                            int Tlen, int C, int NH) {
    const size_t rowid = (size_t)blockIdx.x * 8 + threadIdx.x / 32;   // (b·T + t)·NH + h
    const int lane = threadIdx.x % 32;
    if (rowid >= (size_t)B * Tlen * NH) return;
    const int h = int(rowid % NH);
    const size_t bt = rowid / NH;
    const int t = int(bt % Tlen), b = int(bt / Tlen);
    const int hs = C / NH;
    const T* o = out + bt * C + (size_t)h * hs;
    const T* g = dout + bt * C + (size_t)h * hs;
    float acc = 0.0f;
    for (int d = lane; d < hs; d += 32)
        acc += to_float(g[d]) * to_float(o[d]);
    acc = warp_reduce_sum(acc);
    if (lane == 0) D[((size_t)b * NH + h) * Tlen + t] = acc;
}

// P and dS for one 16 × 64 block of a warp, from FP32 S and dP in shared memory (stride kLDF):
// P = round_T(exp(S·scale − lse)), dS = round_T(P·(dP − D)), 0 where masked. Lane: row lane/2,
// columns 2c + lane%2. `transposed`: rows are keys and columns queries (the dK/dV kernel);
// otherwise rows are queries and columns keys. Writes P (if Pw) and dS as T tiles (stride kLDP).
template <typename T, bool transposed>
__device__ __forceinline__ void probs_and_dscores(T* Pw, T* dSw, const float* Sw, const float* dPw, const float* lse_s,
                                                  const float* D_s, int row_base, int col_base, int row_off, int Tlen,
                                                  float scale, int lane) {
    const int r = lane >> 1, half = lane & 1;
#pragma unroll 8
    for (int c = 0; c < 32; c++) {
        const int col = 2 * c + half;
        const int rowi = row_base + r, coli = col_base + col;   // absolute token indices
        const int qi = transposed ? coli : rowi, ki = transposed ? rowi : coli;
        const int qlocal = transposed ? col : row_off + r;   // index into lse_s / D_s
        const bool masked = ki > qi || qi >= Tlen;
        const float s = Sw[r * kLDF + col], dp = dPw[r * kLDF + col];
        const float p = masked ? 0.0f : round_to<T>(expf(s * scale - lse_s[qlocal]));
        const float ds = masked ? 0.0f : p * (dp - D_s[qlocal]);
        if (Pw != nullptr) Pw[r * kLDP + col] = from_float<T>(p);
        dSw[r * kLDP + col] = from_float<T>(ds);
    }
}

// dK, dV: block per (key tile, h, b).
template <typename T, int HSP>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_wmma_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                        const float* __restrict__ lse, const float* __restrict__ Dg, int Tlen, int C,
                                        int NH, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();
#else
    using L = BwdSmem<HSP, true>;
    constexpr int LDT = ldt<HSP>(), LDO = ldo<HSP>(), NF = HSP / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    T* Ks = reinterpret_cast<T*>(smem + L::a);
    T* Vs = reinterpret_cast<T*>(smem + L::b);
    T* Qs = reinterpret_cast<T*>(smem + L::c);
    T* dOs = reinterpret_cast<T*>(smem + L::d);
    float* Ss = reinterpret_cast<float*>(smem + L::s);
    float* dPs = reinterpret_cast<float*>(smem + L::dp);
    T* Ps = reinterpret_cast<T*>(smem + L::p);
    T* dSs = reinterpret_cast<T*>(smem + L::ds);
    float* lse_s = reinterpret_cast<float*>(smem + L::r0);
    float* D_s = reinterpret_cast<float*>(smem + L::r1);

    const int nt = (Tlen + kTile - 1) / kTile;
    const int kt = blockIdx.x;   // tile 0 walks the most query tiles: it starts first
    const int h = blockIdx.y, b = blockIdx.z;
    const int hs = C / NH;
    const int k0 = kt * kTile;
    const size_t ld = (size_t)3 * C;
    const T* base = qkv + (size_t)b * Tlen * ld + (size_t)h * hs;
    const T* dbase = dout + (size_t)b * Tlen * C + (size_t)h * hs;
    const float* lse_bh = lse + ((size_t)b * NH + h) * Tlen;
    const float* D_bh = Dg + ((size_t)b * NH + h) * Tlen;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    load_tile<T, HSP>(Ks, base + C, ld, k0, Tlen, hs);
    load_tile<T, HSP>(Vs, base + 2 * C, ld, k0, Tlen, hs);

    FragC dk[NF], dv[NF];
#pragma unroll
    for (int n = 0; n < NF; n++) {
        wmma::fill_fragment(dk[n], 0.0f);
        wmma::fill_fragment(dv[n], 0.0f);
    }
    float* Sw = Ss + 16 * warp * kLDF;
    float* dPw = dPs + 16 * warp * kLDF;
    T* Pw = Ps + 16 * warp * kLDP;
    T* dSw = dSs + 16 * warp * kLDP;
    const T* Kw = Ks + 16 * warp * LDT;
    const T* Vw = Vs + 16 * warp * LDT;

    for (int qt = kt; qt < nt; qt++) {
        const int q0 = qt * kTile;
        __syncthreads();   // every warp is done with the previous Q, dO, lse, D
        load_tile<T, HSP>(Qs, base, ld, q0, Tlen, hs);
        load_tile<T, HSP>(dOs, dbase, (size_t)C, q0, Tlen, hs);
        if (threadIdx.x < kTile) {
            const int q = q0 + threadIdx.x;
            lse_s[threadIdx.x] = q < Tlen ? lse_bh[q] : 0.0f;
            D_s[threadIdx.x] = q < Tlen ? D_bh[q] : 0.0f;
        }
        __syncthreads();

        // query blocks j < warp of the diagonal tile lie before every key of this warp: all masked
        const int jmin = qt == kt ? warp : 0;
        scores_16x64<T, HSP>(Sw, Kw, Qs, jmin, 3);     // Sᵀ_w  = K_w · Qᵀ
        scores_16x64<T, HSP>(dPw, Vw, dOs, jmin, 3);   // dPᵀ_w = V_w · dOᵀ
        __syncwarp();
        probs_and_dscores<T, true>(Pw, dSw, Sw, dPw, lse_s, D_s, k0 + 16 * warp, q0, 0, Tlen, scale, lane);
        __syncwarp();
        // j outer: each A fragment is loaded once and used for every n (each accumulator still
        // sums its j in ascending order)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (j < jmin) continue;
            FragA<T> ap, as;
            wmma::load_matrix_sync(ap, Pw + 16 * j, kLDP);
            wmma::load_matrix_sync(as, dSw + 16 * j, kLDP);
#pragma unroll
            for (int n = 0; n < NF; n++) {
                FragBRow<T> bm;
                wmma::load_matrix_sync(bm, dOs + 16 * j * LDT + 16 * n, LDT);   // dV_w += Pᵀ_w · dO
                wmma::mma_sync(dv[n], ap, bm, dv[n]);
                wmma::load_matrix_sync(bm, Qs + 16 * j * LDT + 16 * n, LDT);   // dK_w += dSᵀ_w · Q
                wmma::mma_sync(dk[n], as, bm, dk[n]);
            }
        }
    }

    // dqkv[k] += scale · dK, dqkv[v] += dV, through the stage (the score tiles, now free)
    __syncthreads();
    float* stage = Ss + 16 * warp * LDO;   // this warp's 16 rows of a 64 × LDO stage over Ss, dPs
    T* dbase_out = dqkv + (size_t)b * Tlen * ld + (size_t)h * hs;
#pragma unroll
    for (int n = 0; n < NF; n++) {
#pragma unroll
        for (int e = 0; e < dk[n].num_elements; e++)
            dk[n].x[e] *= scale;   // uniform: no layout assumed
        wmma::store_matrix_sync(stage + 16 * n, dk[n], LDO, wmma::mem_row_major);
    }
    __syncwarp();
    store_rows<T, HSP, true>(dbase_out + C, ld, stage, k0 + 16 * warp, Tlen, hs, nullptr, lane);
    __syncwarp();
#pragma unroll
    for (int n = 0; n < NF; n++)
        wmma::store_matrix_sync(stage + 16 * n, dv[n], LDO, wmma::mem_row_major);
    __syncwarp();
    store_rows<T, HSP, true>(dbase_out + 2 * C, ld, stage, k0 + 16 * warp, Tlen, hs, nullptr, lane);
#endif
}

// dQ: block per (query tile, h, b).
template <typename T, int HSP>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_wmma_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                      const float* __restrict__ lse, const float* __restrict__ Dg, int Tlen, int C,
                                      int NH, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();
#else
    using L = BwdSmem<HSP, false>;
    constexpr int LDT = ldt<HSP>(), LDO = ldo<HSP>(), NF = HSP / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    T* Qs = reinterpret_cast<T*>(smem + L::a);
    T* dOs = reinterpret_cast<T*>(smem + L::b);
    T* Ks = reinterpret_cast<T*>(smem + L::c);
    T* Vs = reinterpret_cast<T*>(smem + L::d);
    float* Ss = reinterpret_cast<float*>(smem + L::s);
    float* dPs = reinterpret_cast<float*>(smem + L::dp);
    T* dSs = reinterpret_cast<T*>(smem + L::ds);
    float* lse_s = reinterpret_cast<float*>(smem + L::r0);
    float* D_s = reinterpret_cast<float*>(smem + L::r1);

    const int nt = (Tlen + kTile - 1) / kTile;
    const int qt = nt - 1 - (int)blockIdx.x;   // longest tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int hs = C / NH;
    const int q0 = qt * kTile;
    const size_t ld = (size_t)3 * C;
    const T* base = qkv + (size_t)b * Tlen * ld + (size_t)h * hs;
    const T* dbase = dout + (size_t)b * Tlen * C + (size_t)h * hs;
    const float* lse_bh = lse + ((size_t)b * NH + h) * Tlen;
    const float* D_bh = Dg + ((size_t)b * NH + h) * Tlen;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    load_tile<T, HSP>(Qs, base, ld, q0, Tlen, hs);
    load_tile<T, HSP>(dOs, dbase, (size_t)C, q0, Tlen, hs);
    if (threadIdx.x < kTile) {
        const int q = q0 + threadIdx.x;
        lse_s[threadIdx.x] = q < Tlen ? lse_bh[q] : 0.0f;
        D_s[threadIdx.x] = q < Tlen ? D_bh[q] : 0.0f;
    }

    FragC dq[NF];
#pragma unroll
    for (int n = 0; n < NF; n++)
        wmma::fill_fragment(dq[n], 0.0f);
    float* Sw = Ss + 16 * warp * kLDF;
    float* dPw = dPs + 16 * warp * kLDF;
    T* dSw = dSs + 16 * warp * kLDP;
    const T* Qw = Qs + 16 * warp * LDT;
    const T* dOw = dOs + 16 * warp * LDT;

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * kTile;
        __syncthreads();   // every warp is done with the previous K, V
        load_tile<T, HSP>(Ks, base + C, ld, k0, Tlen, hs);
        load_tile<T, HSP>(Vs, base + 2 * C, ld, k0, Tlen, hs);
        __syncthreads();

        const int jmax = kt == qt ? warp : 3;          // key blocks above the diagonal: all masked
        scores_16x64<T, HSP>(Sw, Qw, Ks, 0, jmax);     // S_w  = Q_w · Kᵀ
        scores_16x64<T, HSP>(dPw, dOw, Vs, 0, jmax);   // dP_w = dO_w · Vᵀ
        __syncwarp();
        probs_and_dscores<T, false>(nullptr, dSw, Sw, dPw, lse_s, D_s, q0 + 16 * warp, k0, 16 * warp, Tlen, scale,
                                    lane);
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 4; j++) {   // j outer: one load of each A fragment, as in dK/dV
            if (j > jmax) continue;
            FragA<T> a;
            wmma::load_matrix_sync(a, dSw + 16 * j, kLDP);   // dQ_w += dS_w · K
#pragma unroll
            for (int n = 0; n < NF; n++) {
                FragBRow<T> bm;
                wmma::load_matrix_sync(bm, Ks + 16 * j * LDT + 16 * n, LDT);
                wmma::mma_sync(dq[n], a, bm, dq[n]);
            }
        }
    }

    __syncthreads();
    float* stage = Ss + 16 * warp * LDO;
#pragma unroll
    for (int n = 0; n < NF; n++) {
#pragma unroll
        for (int e = 0; e < dq[n].num_elements; e++)
            dq[n].x[e] *= scale;
        wmma::store_matrix_sync(stage + 16 * n, dq[n], LDO, wmma::mem_row_major);
    }
    __syncwarp();
    store_rows<T, HSP, true>(dqkv + (size_t)b * Tlen * ld + (size_t)h * hs, ld, stage, q0 + 16 * warp, Tlen, hs,
                             nullptr, lane);
#endif
}

// Shape and alignment preconditions; returns hs.
inline int check_wmma_args(const char* who, int B, int Tlen, int C, int NH, std::initializer_list<const void*> ptrs) {
    if (B < 0 || Tlen < 0 || C <= 0 || NH <= 0 || C % NH != 0 || B > 65535 || NH > 65535)
        ::train_gpt::fail("%s: bad shape B=%d T=%d C=%d NH=%d (need C divisible by NH, B and NH ≤ 65535)", who, B, Tlen,
                          C, NH);
    const int hs = C / NH;
    if (hs % 16 != 0 || hs > kMaxHeadSize)
        ::train_gpt::fail(
            "%s: head size hs = C/NH = %d/%d = %d is not supported: the tensor-core attention needs "
            "hs to be a multiple of 16 and at most %d",
            who, C, NH, hs, kMaxHeadSize);
    for (const void* p : ptrs) {
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
            ::train_gpt::fail("%s: buffer %p is not 16-byte aligned (the kernels use 16-byte loads)", who, p);
    }
    return hs;
}

static_assert(FwdSmem<128>::bytes <= 227 * 1024 && BwdSmem<128, true>::bytes <= 227 * 1024 &&
                  BwdSmem<128, false>::bytes <= 227 * 1024,
              "tile sets must fit Hopper's 227 KiB per block");

template <typename T, int HSP>
void launch_forward(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, float scale,
                    cudaStream_t stream) {
    constexpr size_t smem = FwdSmem<HSP>::bytes;
    auto kernel = attention_forward_wmma_kernel<T, HSP>;
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const dim3 grid((Tlen + kTile - 1) / kTile, NH, B);
    kernel<<<grid, kThreads, smem, stream>>>(out, lse, qkv, Tlen, C, NH, scale);
    cudaCheck(cudaGetLastError());
}

template <typename T, int HSP>
void launch_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen, int C,
                     int NH, float scale, cudaStream_t stream) {
    float* D = static_cast<float*>(scratch((size_t)B * NH * Tlen * sizeof(float), stream));
    const size_t rows = (size_t)B * Tlen * NH;
    attention_wmma_d_kernel<T><<<grid_1d(rows, 8), 256, 0, stream>>>(D, dout, out, B, Tlen, C, NH);
    cudaCheck(cudaGetLastError());
    const dim3 grid((Tlen + kTile - 1) / kTile, NH, B);
    constexpr size_t smem_kv = BwdSmem<HSP, true>::bytes;
    auto kernel_kv = attention_backward_dkdv_wmma_kernel<T, HSP>;
    cudaCheck(cudaFuncSetAttribute(kernel_kv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv));
    kernel_kv<<<grid, kThreads, smem_kv, stream>>>(dqkv, dout, qkv, lse, D, Tlen, C, NH, scale);
    cudaCheck(cudaGetLastError());
    constexpr size_t smem_q = BwdSmem<HSP, false>::bytes;
    auto kernel_q = attention_backward_dq_wmma_kernel<T, HSP>;
    cudaCheck(cudaFuncSetAttribute(kernel_q, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q));
    kernel_q<<<grid, kThreads, smem_q, stream>>>(dqkv, dout, qkv, lse, D, Tlen, C, NH, scale);
    cudaCheck(cudaGetLastError());
}

}   // namespace attention_wmma_detail

// out (B,T,C), lse (B,NH,T) FP32 ← causal attention of qkv (B,T,3C), on tensor cores. Overwrites
// out and lse. T = __nv_bfloat16 or __half; T = float fails (use attention_forward or _gemm).
template <typename T>
void attention_forward_wmma(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, cudaStream_t stream) {
    using namespace attention_wmma_detail;
    if constexpr (std::is_same_v<T, float>) {
        ::train_gpt::fail(
            "attention_forward_wmma: no FP32 tensor-core path (wmma takes bf16/fp16 operands); use "
            "attention_forward (flash) or attention_forward_gemm for FP32");
    } else {
        static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                      "attention_forward_wmma: T must be __nv_bfloat16 or __half");
        const int hs = check_wmma_args("attention_forward_wmma", B, Tlen, C, NH, {out, qkv});
        if (B == 0 || Tlen == 0) return;
        const float scale = 1.0f / sqrtf((float)hs);   // as the CPU twin
        if (hs <= 64)
            launch_forward<T, 64>(out, lse, qkv, B, Tlen, C, NH, scale, stream);
        else
            launch_forward<T, 128>(out, lse, qkv, B, Tlen, C, NH, scale, stream);
    }
}

// dqkv (B,T,3C) += gradient of attention_forward, from dout (B,T,C) and the forward's qkv, out,
// lse, on tensor cores. Uses scratch(B·NH·T·4 bytes, stream) for D. T = float fails.
template <typename T>
void attention_backward_wmma(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen,
                             int C, int NH, cudaStream_t stream) {
    using namespace attention_wmma_detail;
    if constexpr (std::is_same_v<T, float>) {
        ::train_gpt::fail(
            "attention_backward_wmma: no FP32 tensor-core path (wmma takes bf16/fp16 operands); use "
            "attention_backward (flash) or attention_backward_gemm for FP32");
    } else {
        static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                      "attention_backward_wmma: T must be __nv_bfloat16 or __half");
        const int hs = check_wmma_args("attention_backward_wmma", B, Tlen, C, NH, {dqkv, dout, qkv, out});
        if (B == 0 || Tlen == 0) return;
        const float scale = 1.0f / sqrtf((float)hs);
        if (hs <= 64)
            launch_backward<T, 64>(dqkv, dout, qkv, out, lse, B, Tlen, C, NH, scale, stream);
        else
            launch_backward<T, 128>(dqkv, dout, qkv, out, lse, B, Tlen, C, NH, scale, stream);
    }
}

}   // namespace train_gpt::cuda
