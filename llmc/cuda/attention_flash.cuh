// attention_flash.cuh — causal self-attention on tensor cores, FlashAttention-2 style, written in
// mma.sync.m16n8k16 and ldmatrix (cuda/mma_ptx.cuh), for head size 64 and bf16 / fp16 storage.
//
//   attention_forward_flash (out (B,T,C), lse (B,NH,T) FP32, qkv (B,T,3C))
//   attention_backward_flash(dqkv (B,T,3C) OVERWRITTEN, dout (B,T,C), qkv, out, lse)
// Each kernel's epilogue takes a cast policy, a no-op here (NoOutputCast, NoGradCast); the FP8
// launchers that cast out or dqkv from the epilogue's registers, and their policies, are in
// cuda/attention_flash_fp8.cuh.
//
// Naive loop (per b, h, query t; scale = 1/√64, keys j ≤ t):
//   s_j = scale·q_t·k_j;  P_j = exp(s_j − max s) / Σ exp(s_j − max s);  out_t = Σ_j P_j v_j
//   lse_t = max s + ln Σ_j exp(s_j − max s)                     (natural log, as the CPU twin saves)
//   backward: dv_j = Σ_t P_tj dO_t;  dS_tj = P_tj (dO_t·v_j − D_t), D_t = dO_t·O_t;
//             dq_t = scale Σ_j dS_tj k_j;  dk_j = scale Σ_t dS_tj q_t
// The CPU twins: cpu::attention_forward / attention_backward (cpu/kernels.cpp) are the exact op;
// cpu::attention_forward_tiled / attention_backward_tiled (tests/twins/attention_tiled.cpp) are this
// file's algorithm step for step (tiles, fragments, roundings), tested against the exact op on
// the CPU. Layouts as the other attention ops: qkv holds [q | k | v] per token, head h uses
// features 64h … 64h+63 of each; lse (B, NH, T).
//
// Invariants. Forward overwrites out and lse. Backward OVERWRITES dqkv: every element of it is
// written exactly once (q part by the dQ kernel, k and v parts by the dK/dV kernel), so no
// zero-fill is needed (the CPU twin accumulates: it equals this on a zeroed dqkv). Nothing T×T
// reaches device memory; the backward needs B·NH·T floats of scratch (D).
// Determinism: no atomics; every output element is produced by one thread, in an order fixed by
// the code (key tiles ascending in the forward and dQ, query tiles ascending in dK/dV; each mma's
// k-steps ascending), so results are bit-identical from run to run.
//
// Numerics (what the tiled twin reproduces, and the rounding bound the tests derive from it):
// scores, max, row sums, lse and every accumulator FP32. Forward: online softmax per query row
// with m (running max of raw scores) and l (running sum): for each key tile
//   m' = max(m, max_j s_j);  α = exp2((m − m')·c);  p_j = exp2(s_j·c − m'·c)   (c = scale·log2 e,
//   one FMA per element);  l = l·α + Σ_j p_j;  O = O·α + Σ_j round_T(p_j)·v_j
// and at the end out = round_T(O·(1/l)), lse = m·scale + ln l. The unnormalised p is rounded to T
// (the CPU rounds the normalised P: one rounding per term either way). Backward recomputes
// P_tj = round_T(exp2(s_tj·c − lse_t·log2 e)) — the normalised probability, as the CPU — and
// dS_tj = round_T(P_tj·(dP_tj − D_t)); dQ and dK are multiplied by scale once, at the end.
//
// ---- Kernels, tiles, warps (constants: cuda/attention_flash_tiling.h) ---------------------------
// Forward: one block of 4 warps per (b, h, query block of 128 rows); warp w owns rows 32w … 32w+31
// as two 16-row m-tiles, so every K / V fragment read from shared memory feeds two mma's. The Q
// tile is loaded once (cp.async → shared → ldmatrix) into registers and stays there; key tiles of
// 64 stream through. Per key tile and warp: S (2 × 16×64, FP32) = Q·Kᵀ in C fragments, the mask
// on tiles that cross the diagonal, the online softmax on those registers (row max and, at the
// end, row sum reduced over the 4 lanes of a quad by shuffles), then P = round_T(p) packed from
// the C fragments straight into A fragments (mma_fragments.h c_to_a: no shuffle, no shared memory)
// and O (2 × 16×64, FP32 registers) += P·V.
// Backward: D = rowsum(dO ∘ O) by a small kernel (one warp per row), then
//   dK/dV: one block of 4 warps per (b, h, key block of 64); warp w owns keys 16w … 16w+15, with
//     K_w, V_w resident as A fragments; it walks query tiles of 64 from the diagonal to the end:
//     Sᵀ = K_w·Qᵀ, dPᵀ = V_w·dOᵀ, Pᵀ and dSᵀ on the registers, then dV_w += Pᵀ·dO and
//     dK_w += dSᵀ·Q with Pᵀ, dSᵀ reused as A fragments.
//   dQ: one block of 4 warps per (b, h, query block of 64); warp w owns queries 16w … 16w+15 with
//     Q_w, dO_w resident; it walks key tiles 0 … the diagonal: S = Q_w·Kᵀ, dP = dO_w·Vᵀ, dS, then
//     dQ_w += dS·K.
//   S and dP are computed in both kernels (7 tile products instead of the 5 of an atomic dQ): the
//   price of a deterministic dQ without T×T scratch.
//   --flash-backward wide runs the same maths with two m-tiles per warp instead
//   (cuda/attention_flash_bwd_wide.cuh), for the same values in fewer shared-memory reads.
// Every grid is ordered longest first across all (b, h): blocks 0 … B·NH−1 are the last query
// block of every head (forward, dQ) or the first key block (dK/dV), and so on.
// Fully masked (warp, tile) pairs are skipped (warp-uniform branch; the warp still takes part in
// the block's barriers and copies); the mask is applied only on tiles that cross the warp's
// diagonal (forward) and on every tile in the backward (which also masks padded query rows).
// Tail tiles: rows at or past T are zero-filled on load (cp.async with source size 0) and never
// stored; a padded key can only meet padded queries (j ≤ t < T fails), so it is always masked.
//
// ---- Shared memory and the pipeline -------------------------------------------------------------
// Tiles are 64 bf16/fp16 features (128 bytes) per row, XOR-swizzled: 16-byte chunk c of row r at
// chunk c ^ (r % 8) (mma_fragments.h swizzled_offset). Each ldmatrix phase reads one chunk from 8
// consecutive rows, which then fall in 8 different 4-bank groups: conflict-free without padding
// (tests/test_mma_fragments.cpp checks every phase the kernels issue, and the cp.async writes).
// K/V (forward, dQ) and Q/dO/lse/D (dK/dV) are double-buffered: at iteration i the block issues
// the copies of tile i+1 into the other stage, then waits for tile i (cp.async.wait_group 1: all
// but the newest group complete; 0 on the last tile), then __syncthreads makes every thread's
// copies visible; a second __syncthreads at the end of the iteration guarantees no warp still
// reads a stage when the next iteration's copies overwrite it.
//   forward  Q 128×64 + 2 × (K, V) 64×64:                 16 + 32       = 48 KiB
//   dK/dV    K, V 64×64 + 2 × (Q, dO) 64×64 + 2 × 2 × 64 FP32 (lse, D):  16 + 32 + 1 = 49 KiB
//   dQ       Q, dO 64×64 + 2 × (K, V) 64×64:               16 + 32       = 48 KiB
// Registers (ptxas -v, sm_90a, CUDA 13; every kernel 128 threads per block, launch bound 2 blocks
// per SM, so at most 255 registers; 0 spills, 0 stack):
//   forward 251 (bf16 and fp16)   dK/dV 242 bf16, 239 fp16   dQ 219 bf16, 228 fp16   D 16 / 15
// Occupancy on an H100/H200 SM (64 K registers, 228 KiB shared memory): 2 blocks of 4 warps for
// each of the three (2 × 128 × ≤ 256 registers = all 64 K; 3 blocks would need ≤ 168 registers,
// which spills), i.e. 8 warps per SM, using 96 / 98 / 96 KiB of shared memory: registers, not
// shared memory, are the limit. The D kernel: 256 threads, up to 8 blocks per SM.
// (scripts/check_spills.sh checks the 0 spills; rerun `nvcc -Xptxas -v` after changing a kernel.)
//
// ---- FLOPs ----------------------------------------------------------------------------------------
// Causal: forward 2 products over the lower triangle = 4·B·NH·T²·hs/2; backward 7 products
// (S and dP twice) = 3.5 × forward, conventionally reported as 2.5 × forward (5 products).
#pragma once

#include "cuda/attention_flash_tiling.h"
#include "cuda/common.cuh"
#include "cuda/mma_fragments.h"
#include "cuda/mma_ptx.cuh"
#include "precision/precision.h"
#include "utils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace train_gpt::cuda {

// Whether the flash kernels run this configuration: head size 64, bf16 or fp16 storage. Other
// head sizes and FP32 take the GEMM attention (attention_gemm.cuh).
inline bool attention_flash_supports(int head_size, DType dtype) {
    return head_size == flash::kHeadSize && (dtype == DType::BF16 || dtype == DType::F16);
}

namespace attention_flash_detail {

namespace fl = ::train_gpt::flash;
using mma::X4;

constexpr int kHs = fl::kHeadSize;
constexpr int kKSteps = kHs / mma::kK;                        // mma k-steps over the head dimension: 4
constexpr int kHsNTiles = kHs / mma::kN;                      // 8-wide n-tiles over the head dimension: 8
constexpr int kFwdThreads = fl::kFwdWarps * mma::kWarpSize;   // 128
constexpr int kBwdThreads = fl::kBwdWarps * mma::kWarpSize;   // 128
constexpr int kDRowsPerBlock = 8;                             // D kernel: one warp per row
constexpr int kDThreads = kDRowsPerBlock * mma::kWarpSize;

static_assert(kHs == 2 * mma::kWarpSize, "the D kernel gives each lane two features of a row");
static_assert(kHs % 64 == 0, "shared tiles are whole 128-byte rows (the swizzle permutes 8 chunks of a row)");
static_assert(fl::kFwdWarpRows % mma::kM == 0 && fl::kBwdWarpRows == mma::kM, "warps own whole 16-row m-tiles");
static_assert(fl::kFwdKeyTile % 16 == 0 && fl::kBwdTile % 16 == 0 && fl::kBwdBlockRows % 16 == 0,
              "tiles are read as 16×16 ldmatrix.x4 regions");
static_assert(fl::kBwdTile == fl::kBwdBlockRows,
              "both backward kernels hold a 16 × kBwdTile S (and dP) per warp in registers and were budgeted "
              "(ptxas: ≤ 255 registers, 0 spills) for square 64 × 64 tiles; other sizes need a new budget");

constexpr size_t tile_bytes(int rows) { return size_t(rows) * kHs * 2; }
static_assert(tile_bytes(1) == 128 && tile_bytes(fl::kBwdTile) % 128 == 0 && tile_bytes(fl::kFwdQueryRows) % 128 == 0,
              "every shared tile starts on a 128-byte boundary (all 32 banks): the swizzle's conflict-freedom "
              "(tests/test_mma_fragments.cpp) is computed for tiles that do");
constexpr size_t kFwdSmemBytes = tile_bytes(fl::kFwdQueryRows) + 4 * tile_bytes(fl::kFwdKeyTile);
constexpr size_t kDkdvSmemBytes =
    2 * tile_bytes(fl::kBwdBlockRows) + 4 * tile_bytes(fl::kBwdTile) + 4 * fl::kBwdTile * sizeof(float);
constexpr size_t kDqSmemBytes = 2 * tile_bytes(fl::kBwdBlockRows) + 4 * tile_bytes(fl::kBwdTile);
static_assert(kFwdSmemBytes <= 227 * 1024 && kDkdvSmemBytes <= 227 * 1024 && kDqSmemBytes <= 227 * 1024,
              "a block's shared memory must fit Hopper's 227 KiB");

// rows row0 … row0+ROWS−1 of src (row stride ld elements, kHs features) → the swizzled shared
// tile dst, as 16-byte cp.async by all THREADS threads (tile_chunk); rows ≥ T become zeros (no
// read; the address handed over is row 0's, always valid for T ≥ 1). Naive: dst[r][c] = r0+r < T ? src[r0+r][c] : 0.
template <int ROWS, int THREADS, typename T>
__device__ __forceinline__ void load_tile_async(T* dst, const T* src, size_t ld, int row0, int Tlen) {
    constexpr int kChunks = ROWS * fl::kTileChunksPerRow;
    static_assert(kChunks % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < kChunks / THREADS; i++) {
        const mma::Coord c = fl::tile_chunk(int(threadIdx.x) + i * THREADS);
        const bool valid = row0 + c.row < Tlen;
        const T* from = src + (size_t)(valid ? row0 + c.row : 0) * ld + c.col;
        ptx::cp_async_16(ptx::smem_addr(dst + mma::swizzled_offset(c.row, c.col, kHs)), from, valid);
    }
}

// n FP32 values src[i0 …] → dst[0 … n), zeros at or past T; threads first … first+n−1 copy one each.
__device__ __forceinline__ void load_row_stats_async(float* dst, const float* src, int i0, int Tlen, int first, int n) {
    const int i = int(threadIdx.x) - first;
    if (i >= 0 && i < n) {
        const bool valid = i0 + i < Tlen;
        ptx::cp_async_4(ptx::smem_addr(dst + i), src + (valid ? i0 + i : 0), valid);
    }
}

// This lane's ldmatrix.x4 row address for the 16×16 region at (row0, col0) of a swizzled tile.
template <typename T>
__device__ __forceinline__ uint32_t x4_addr(const T* tile, X4 x, int row0, int col0, int lane) {
    const mma::Coord a = mma::x4_lane_address(x, lane);
    return ptx::smem_addr(tile + mma::swizzled_offset(row0 + a.row, col0 + a.col, kHs));
}

// Two B fragments (n-tiles 0, 1 of the region) by one ldmatrix.x4 (kBnk) or .x4.trans (kBkn).
template <X4 kX, typename T>
__device__ __forceinline__ void load_b_pair(uint32_t (&b)[2][2], const T* tile, int row0, int col0, int lane) {
    uint32_t r[4];
    if constexpr (mma::x4_trans(kX))
        ptx::ldmatrix_x4_trans(r, x4_addr(tile, kX, row0, col0, lane));
    else
        ptx::ldmatrix_x4(r, x4_addr(tile, kX, row0, col0, lane));
#pragma unroll
    for (int j = 0; j < 4; j++)
        b[mma::x4_ntile(j)][mma::x4_breg(j)] = r[j];
}

// The A fragment of k-step s from C fragments c[2s], c[2s+1] (values rounded to T by the pack).
// Naive: a[m][k] = round_T(C[m][16s + k]).
template <typename T, int NT>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c)[NT][4], int s) {
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const float(&src)[4] = c[2 * s + mma::c_to_a_ntile(r)];
        a[r] = ptx::pack2<T>(src[mma::c_to_a_creg(r, 0)], src[mma::c_to_a_creg(r, 1)]);
    }
}

// Naive: v = max over the 4 lanes of this quad (lanes sharing a C-fragment row).
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
    return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
// Naive: v = (v_0 + v_1) + (v_2 + v_3) over the quad (the same bits in all 4 lanes).
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(kFullMask, v, 1);
    return v + __shfl_xor_sync(kFullMask, v, 2);
}

// ---- forward ------------------------------------------------------------------------------------

constexpr int kFwdMT = fl::kFwdWarpMTiles;
constexpr int kFwdNT = fl::kFwdKeyTile / mma::kN;   // 8-key n-tiles per key tile

// One key tile for one warp: S = Q·Kᵀ, mask, online softmax, O += P·V. Ks, Vs: this tile's stage.
template <typename T>
__device__ __forceinline__ void forward_tile(float (&o)[kFwdMT][kHsNTiles][4], float (&m)[kFwdMT][2],
                                             float (&l)[kFwdMT][2], const uint32_t (&qf)[kFwdMT][kKSteps][4],
                                             const T* Ks, const T* Vs, int r0, int k0, float scale_log2, int lane) {
    // S (per m-tile 16 × 64) = Q · Kᵀ; K stored [key][feature] = [n][k]. Naive: s[t][j] = Σ_d q[t][d]·k[j][d]
    float s[kFwdMT][kFwdNT][4];
#pragma unroll
    for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
        for (int nt = 0; nt < kFwdNT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                s[mt][nt][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; kk++)
#pragma unroll
        for (int np = 0; np < kFwdNT / 2; np++) {
            uint32_t b[2][2];
            load_b_pair<X4::kBnk>(b, Ks, 16 * np, 16 * kk, lane);
#pragma unroll
            for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
                for (int t = 0; t < 2; t++)
                    ptx::mma_16816<T>(s[mt][2 * np + t], qf[mt][kk], b[t][0], b[t][1]);
        }

    // the causal mask, on tiles that reach past the warp's first row (warp-uniform branch)
    if (fl::query_rows_need_mask(r0, k0, fl::kFwdKeyTile)) {
#pragma unroll
        for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
            for (int nt = 0; nt < kFwdNT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const mma::Coord c = mma::c_coord(lane, i);
                    if (!fl::causal_keep(r0 + mma::kM * mt + c.row, k0 + mma::kN * nt + c.col))
                        s[mt][nt][i] = -INFINITY;
                }
    }

    // online softmax; row half hh = C registers 2hh, 2hh+1 (row g + 8hh of the m-tile)
#pragma unroll
    for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < kFwdNT; nt++)
                mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
            // m is finite from the first tile on (key 0 is visible to every row), so α and p are never NaN
            const float m_new = fmaxf(m[mt][hh], quad_max(mx));
            const float alpha = exp2f((m[mt][hh] - m_new) * scale_log2);   // 0 on the first tile (m = −∞)
            const float ms = m_new * scale_log2;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < kFwdNT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    // p = exp(scale·(s − m')); masked s = −∞ gives 0
                    const float p = exp2f(fmaf(s[mt][nt][2 * hh + e], scale_log2, -ms));
                    s[mt][nt][2 * hh + e] = p;
                    sum += p;
                }
            l[mt][hh] = fmaf(l[mt][hh], alpha, sum);   // this lane's partial row sum (quad-reduced at the end)
            m[mt][hh] = m_new;
#pragma unroll
            for (int nt = 0; nt < kHsNTiles; nt++) {
                o[mt][nt][2 * hh] *= alpha;
                o[mt][nt][2 * hh + 1] *= alpha;
            }
        }

        // O += P · V; P from the S registers (C → A), V stored [key][feature] = [k][n] (.trans).
        // Naive: o[t][d] += Σ_j round_T(p[t][j])·v[j][d]
#pragma unroll
    for (int kk = 0; kk < kFwdNT / 2; kk++) {
        uint32_t pf[kFwdMT][4];
#pragma unroll
        for (int mt = 0; mt < kFwdMT; mt++)
            c_to_a<T>(pf[mt], s[mt], kk);
#pragma unroll
        for (int np = 0; np < kHsNTiles / 2; np++) {
            uint32_t b[2][2];
            load_b_pair<X4::kBkn>(b, Vs, 16 * kk, 16 * np, lane);
#pragma unroll
            for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
                for (int t = 0; t < 2; t++)
                    ptx::mma_16816<T>(o[mt][2 * np + t], pf[mt], b[t][0], b[t][1]);
        }
    }
}

// What the forward's epilogue does besides storing out: nothing (NoOutputCast), or cast out to
// FP8 as it is stored (OutputCast, cuda/attention_flash_fp8.cuh). pair() sees two consecutive values of out (element i of (B·T, C) and i + 1), each
// already the rounded value stored; commit() ends the block (every thread calls it).
struct NoOutputCast {
    __device__ __forceinline__ void pair(size_t, float, float) {}
    __device__ __forceinline__ void commit() {}
};

// grid: B·NH·ceil(T/128) blocks (longest_first_query_block), kFwdThreads threads, kFwdSmemBytes shared.
template <typename T, typename Cast = NoOutputCast>
__global__ void __launch_bounds__(kFwdThreads, 2)
    attention_forward_flash_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int Tlen,
                                   int C, int NH, int BH, float scale, float scale_log2, Cast cast = {}) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* Qs = reinterpret_cast<T*>(smem_raw);   // (128, 64)
    T* Ks = Qs + fl::kFwdQueryRows * kHs;     // 2 stages of (64, 64)
    T* Vs = Ks + 2 * fl::kFwdKeyTile * kHs;   // 2 stages of (64, 64)
    constexpr int kStage = fl::kFwdKeyTile * kHs;

    const int nq = fl::ceil_div_int(Tlen, fl::kFwdQueryRows);
    const fl::TileIndex ti = fl::longest_first_query_block(int(blockIdx.x), BH, nq);
    const int b = ti.bh / NH, h = ti.bh % NH;
    const size_t ld = 3 * (size_t)C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;   // (T, 64), row stride 3C
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const int q0 = ti.tile * fl::kFwdQueryRows;
    const int n_kt = fl::key_tiles_for_query_block(q0, fl::kFwdQueryRows, Tlen, fl::kFwdKeyTile);
    const int warp = int(threadIdx.x) / mma::kWarpSize, lane = int(threadIdx.x) % mma::kWarpSize;
    const int wrow = warp * fl::kFwdWarpRows;   // the warp's first row within the block
    const int r0 = q0 + wrow;                   // … and within the sequence

    // prologue: group 0 = the Q tile, group 1 = K, V tile 0 (stage 0)
    load_tile_async<fl::kFwdQueryRows, kFwdThreads>(Qs, q_base, ld, q0, Tlen);
    ptx::cp_async_commit();
    load_tile_async<fl::kFwdKeyTile, kFwdThreads>(Ks, k_base, ld, 0, Tlen);
    load_tile_async<fl::kFwdKeyTile, kFwdThreads>(Vs, v_base, ld, 0, Tlen);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();   // this thread's Q copies have landed …
    __syncthreads();           // … and everyone's are visible

    uint32_t qf[kFwdMT][kKSteps][4];   // the warp's Q rows as A fragments, resident for the whole walk
#pragma unroll
    for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
        for (int kk = 0; kk < kKSteps; kk++)
            ptx::ldmatrix_x4(qf[mt][kk], x4_addr(Qs, X4::kA, wrow + mma::kM * mt, 16 * kk, lane));
    float o[kFwdMT][kHsNTiles][4], m[kFwdMT][2], l[kFwdMT][2];
#pragma unroll
    for (int mt = 0; mt < kFwdMT; mt++) {
#pragma unroll
        for (int nt = 0; nt < kHsNTiles; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                o[mt][nt][i] = 0.0f;
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            m[mt][hh] = -INFINITY;
            l[mt][hh] = 0.0f;
        }
    }

    for (int kt = 0; kt < n_kt; kt++) {
        const int stage = kt & 1;
        if (kt + 1 < n_kt) {
            // tile kt+1 into the other stage: its readers (iteration kt−1) passed that iteration's final barrier
            const int k1 = (kt + 1) * fl::kFwdKeyTile;
            load_tile_async<fl::kFwdKeyTile, kFwdThreads>(Ks + (stage ^ 1) * kStage, k_base, ld, k1, Tlen);
            load_tile_async<fl::kFwdKeyTile, kFwdThreads>(Vs + (stage ^ 1) * kStage, v_base, ld, k1, Tlen);
            ptx::cp_async_commit();
            ptx::cp_async_wait<1>();   // all but the newest group: tile kt has landed
        } else {
            ptx::cp_async_wait<0>();
        }
        __syncthreads();   // tile kt visible to every warp
        const int k0 = kt * fl::kFwdKeyTile;
        if (!fl::query_rows_fully_masked(r0, fl::kFwdWarpRows, k0, Tlen))   // warp-uniform
            forward_tile<T>(o, m, l, qf, Ks + stage * kStage, Vs + stage * kStage, r0, k0, scale_log2, lane);
        __syncthreads();   // no warp reads this stage any more: iteration kt+1 may refill it
    }

    // epilogue: out = round_T(O / l), lse = m·scale + ln l, rows < T
#pragma unroll
    for (int mt = 0; mt < kFwdMT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const float row_sum = quad_sum(l[mt][hh]);
            const int t = r0 + mma::kM * mt + mma::c_coord(lane, 2 * hh).row;
            if (t >= Tlen) continue;
            const float inv = 1.0f / row_sum;
            const size_t row = ((size_t)b * Tlen + t) * C + (size_t)h * kHs;   // row t of (B, T, C), head h
            T* dst = out + row;
#pragma unroll
            for (int nt = 0; nt < kHsNTiles; nt++) {
                const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;   // even: 4-byte aligned pair
                const float lo = o[mt][nt][2 * hh] * inv, hi = o[mt][nt][2 * hh + 1] * inv;
                *reinterpret_cast<uint32_t*>(dst + col) = ptx::pack2<T>(lo, hi);
                cast.pair(row + col, ptx::round_to<T>(lo), ptx::round_to<T>(hi));
            }
            if (mma::thread_in_group(lane) == 0) lse[(size_t)ti.bh * Tlen + t] = fmaf(m[mt][hh], scale, logf(row_sum));
        }
    cast.commit();
}

// ---- backward ----------------------------------------------------------------------------------

// D (B, NH, T) = rowsum(dO ∘ O) in FP32; one warp per row (b, t, h), lane L takes features 2L, 2L+1.
// Naive: D[b][h][t] = Σ_d dout[b][t][h·64 + d]·out[b][t][h·64 + d]
template <typename T>
__global__ void __launch_bounds__(kDThreads)
    attention_backward_d_kernel(float* __restrict__ D, const T* __restrict__ dout, const T* __restrict__ out, int rows,
                                int Tlen, int C, int NH) {
    const int row = int(blockIdx.x) * kDRowsPerBlock + int(threadIdx.x) / mma::kWarpSize;   // (b·T + t)·NH + h
    const int lane = int(threadIdx.x) % mma::kWarpSize;
    if (row >= rows) return;   // warp-uniform
    const int bt = row / NH, h = row % NH;
    const int b = bt / Tlen, t = bt % Tlen;
    const size_t off = (size_t)bt * C + (size_t)h * kHs + 2 * lane;
    const float2 g = ptx::unpack2<T>(*reinterpret_cast<const uint32_t*>(dout + off));
    const float2 o = ptx::unpack2<T>(*reinterpret_cast<const uint32_t*>(out + off));
    const float v = warp_reduce_sum(fmaf(g.y, o.y, __fmul_rn(g.x, o.x)));
    if (lane == 0) D[((size_t)b * NH + h) * Tlen + t] = v;
}

constexpr int kBwdNT = fl::kBwdTile / mma::kN;   // 8-wide n-tiles of the walked tile

// The backward's two score-sized products for one warp, side by side so that each k-step's B
// fragments load together: c1 = A1·B1ᵀ and c2 = A2·B2ᵀ (16 rows × kBwdTile columns each, zeroed
// first). A1, A2: the warp's resident A fragments over the head dimension; B1, B2: tiles stored
// [column][feature] = [n][k]. The dK/dV kernel computes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ with it, the
// dQ kernel S = Q·Kᵀ and dP = dO·Vᵀ.
template <typename T>
__device__ __forceinline__ void score_products(float (&c1)[kBwdNT][4], float (&c2)[kBwdNT][4],
                                               const uint32_t (&a1)[kKSteps][4], const uint32_t (&a2)[kKSteps][4],
                                               const T* b1, const T* b2, int lane) {
#pragma unroll
    for (int nt = 0; nt < kBwdNT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            c1[nt][i] = c2[nt][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; kk++)
#pragma unroll
        for (int np = 0; np < kBwdNT / 2; np++) {
            uint32_t f1[2][2], f2[2][2];
            load_b_pair<X4::kBnk>(f1, b1, 16 * np, 16 * kk, lane);
            load_b_pair<X4::kBnk>(f2, b2, 16 * np, 16 * kk, lane);
#pragma unroll
            for (int t = 0; t < 2; t++) {
                ptx::mma_16816<T>(c1[2 * np + t], a1[kk], f1[t][0], f1[t][1]);
                ptx::mma_16816<T>(c2[2 * np + t], a2[kk], f2[t][0], f2[t][1]);
            }
        }
}

// What a backward epilogue does besides storing its part of dqkv: nothing (NoGradCast), or cast it
// to FP8 as it is stored (GradCast, cuda/attention_flash_fp8.cuh: the dY of qkv, q (B·T, 3C) and
// qt (3C, B·T)). tile() starts one output tile of the
// block (64 tokens from `row0` of sequence b, 64 features from `f0` of 3C); pair() casts two
// consecutive values of it (tile row r, column c even; the values already rounded to T) into q
// and the shared tile; flush() writes the tile's transpose into qt (a block-wide step: every
// thread calls it, between barriers); commit() ends the block.
struct NoGradCast {
    static constexpr bool kActive = false;
    __device__ __forceinline__ void tile(int, int, int, unsigned char*) {}
    __device__ __forceinline__ void pair(int, int, float, float) {}
    __device__ __forceinline__ void flush(int) {}
    __device__ __forceinline__ void commit(size_t) {}
};

// grid: B·NH·ceil(T/64) blocks (longest_first_key_block), kBwdThreads threads, kDkdvSmemBytes shared.
template <typename T, typename Cast = NoGradCast>
__global__ void __launch_bounds__(kBwdThreads, 2)
    attention_backward_dkdv_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                   const float* __restrict__ lse, const float* __restrict__ D, int Tlen, int C, int NH,
                                   int BH, float scale, float scale_log2, Cast cast = {}) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* Ks = reinterpret_cast<T*>(smem_raw);                                  // (64, 64)
    T* Vs = Ks + fl::kBwdBlockRows * kHs;                                    // (64, 64)
    T* Qs = Vs + fl::kBwdBlockRows * kHs;                                    // 2 stages of (64, 64)
    T* dOs = Qs + 2 * fl::kBwdTile * kHs;                                    // 2 stages of (64, 64)
    float* lse_s = reinterpret_cast<float*>(dOs + 2 * fl::kBwdTile * kHs);   // 2 stages of (64)
    float* D_s = lse_s + 2 * fl::kBwdTile;                                   // 2 stages of (64)
    constexpr int kStage = fl::kBwdTile * kHs;

    const fl::TileIndex ti = fl::longest_first_key_block(int(blockIdx.x), BH);
    const int b = ti.bh / NH, h = ti.bh % NH;
    const size_t ld = 3 * (size_t)C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;   // (T, 64), row stride 3C
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const T* do_base = dout + (size_t)b * Tlen * C + (size_t)h * kHs;   // (T, 64), row stride C
    const float* lse_bh = lse + (size_t)ti.bh * Tlen;                   // (T)
    const float* D_bh = D + (size_t)ti.bh * Tlen;                       // (T)
    const int k0 = ti.tile * fl::kBwdBlockRows;
    const int nq = fl::ceil_div_int(Tlen, fl::kBwdTile);
    const int qt_first = fl::first_query_tile_for_key(k0, fl::kBwdTile);
    const int warp = int(threadIdx.x) / mma::kWarpSize, lane = int(threadIdx.x) % mma::kWarpSize;
    const int wrow = warp * fl::kBwdWarpRows;
    const int j0 = k0 + wrow;   // the warp's first key

    auto load_query_tile = [&](int qt, int stage) {
        const int t0 = qt * fl::kBwdTile;
        load_tile_async<fl::kBwdTile, kBwdThreads>(Qs + stage * kStage, q_base, ld, t0, Tlen);
        load_tile_async<fl::kBwdTile, kBwdThreads>(dOs + stage * kStage, do_base, (size_t)C, t0, Tlen);
        load_row_stats_async(lse_s + stage * fl::kBwdTile, lse_bh, t0, Tlen, 0, fl::kBwdTile);
        load_row_stats_async(D_s + stage * fl::kBwdTile, D_bh, t0, Tlen, fl::kBwdTile, fl::kBwdTile);
    };
    static_assert(2 * fl::kBwdTile <= kBwdThreads, "one thread per lse and per D value of a tile");

    // prologue: group 0 = K, V of this key block, group 1 = query tile qt_first (stage 0)
    load_tile_async<fl::kBwdBlockRows, kBwdThreads>(Ks, k_base, ld, k0, Tlen);
    load_tile_async<fl::kBwdBlockRows, kBwdThreads>(Vs, v_base, ld, k0, Tlen);
    ptx::cp_async_commit();
    load_query_tile(qt_first, 0);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();

    uint32_t kf[kKSteps][4], vf[kKSteps][4];   // the warp's K, V rows as A fragments, resident
#pragma unroll
    for (int kk = 0; kk < kKSteps; kk++) {
        ptx::ldmatrix_x4(kf[kk], x4_addr(Ks, X4::kA, wrow, 16 * kk, lane));
        ptx::ldmatrix_x4(vf[kk], x4_addr(Vs, X4::kA, wrow, 16 * kk, lane));
    }
    float dk[kHsNTiles][4], dv[kHsNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kHsNTiles; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            dk[nt][i] = dv[nt][i] = 0.0f;

    for (int qt = qt_first; qt < nq; qt++) {
        const int stage = (qt - qt_first) & 1;
        if (qt + 1 < nq) {
            load_query_tile(qt + 1, stage ^ 1);   // the other stage's readers passed the previous final barrier
            ptx::cp_async_commit();
            ptx::cp_async_wait<1>();
        } else {
            ptx::cp_async_wait<0>();
        }
        __syncthreads();
        const int t0 = qt * fl::kBwdTile;
        if (!fl::key_rows_fully_masked(j0, t0, fl::kBwdTile, Tlen)) {   // warp-uniform
            const T* Qt = Qs + stage * kStage;
            const T* dOt = dOs + stage * kStage;
            const float* lse_t = lse_s + stage * fl::kBwdTile;
            const float* D_t = D_s + stage * fl::kBwdTile;
            // Sᵀ = K_w·Qᵀ, dPᵀ = V_w·dOᵀ (16 keys × 64 queries); Q, dO stored [query][feature] = [n][k]
            float st[kBwdNT][4], dpt[kBwdNT][4];
            score_products<T>(st, dpt, kf, vf, Qt, dOt, lane);
            // Pᵀ = round_T(exp(scale·s − lse)), dSᵀ = round_T(Pᵀ·(dPᵀ − D)), 0 where masked
#pragma unroll
            for (int nt = 0; nt < kBwdNT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const mma::Coord c = mma::c_coord(lane, i);
                    const int col = mma::kN * nt + c.col;   // query within the tile
                    const bool keep = fl::causal_keep_bwd(t0 + col, j0 + c.row, Tlen);
                    const float lse2 = lse_t[col] * fl::kLog2e;
                    const float p = ptx::round_to<T>(exp2f(fmaf(st[nt][i], scale_log2, -lse2)));
                    const float ds = ptx::round_to<T>(p * (dpt[nt][i] - D_t[col]));
                    st[nt][i] = keep ? p : 0.0f;
                    dpt[nt][i] = keep ? ds : 0.0f;
                }
                // dV_w += Pᵀ·dO, dK_w += dSᵀ·Q (A from the registers; dO, Q stored [query][feature] = [k][n])
#pragma unroll
            for (int kk = 0; kk < kBwdNT / 2; kk++) {
                uint32_t pa[4], dsa[4];
                c_to_a<T>(pa, st, kk);
                c_to_a<T>(dsa, dpt, kk);
#pragma unroll
                for (int np = 0; np < kHsNTiles / 2; np++) {
                    uint32_t bo[2][2], bq[2][2];
                    load_b_pair<X4::kBkn>(bo, dOt, 16 * kk, 16 * np, lane);
                    load_b_pair<X4::kBkn>(bq, Qt, 16 * kk, 16 * np, lane);
#pragma unroll
                    for (int t = 0; t < 2; t++) {
                        ptx::mma_16816<T>(dv[2 * np + t], pa, bo[t][0], bo[t][1]);
                        ptx::mma_16816<T>(dk[2 * np + t], dsa, bq[t][0], bq[t][1]);
                    }
                }
            }
        }
        __syncthreads();   // no warp reads this stage any more
    }

    // epilogue: dk = round_T(scale·dK), dv = round_T(dV), keys < T (each element written once)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int j = j0 + mma::c_coord(lane, 2 * hh).row;
        if (j >= Tlen) continue;
        T* dst = dqkv + ((size_t)b * Tlen + j) * ld + (size_t)h * kHs;   // row j of (B, T, 3C), head h
#pragma unroll
        for (int nt = 0; nt < kHsNTiles; nt++) {
            const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;
            *reinterpret_cast<uint32_t*>(dst + C + col) =
                ptx::pack2<T>(dk[nt][2 * hh] * scale, dk[nt][2 * hh + 1] * scale);
            *reinterpret_cast<uint32_t*>(dst + 2 * (size_t)C + col) = ptx::pack2<T>(dv[nt][2 * hh], dv[nt][2 * hh + 1]);
        }
    }
    if constexpr (Cast::kActive) {   // the cast policy's tiles: dk, then dv
#pragma unroll
        for (int part = 1; part <= 2; part++) {   // 3C's parts: 1 = k, 2 = v
            cast.tile(b, k0, part * C + h * kHs, smem_raw);
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int r = wrow + mma::c_coord(lane, 2 * hh).row;   // row of the block's tile
                if (k0 + r >= Tlen) continue;
#pragma unroll
                for (int nt = 0; nt < kHsNTiles; nt++) {
                    const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;
                    const float lo = part == 1 ? dk[nt][2 * hh] * scale : dv[nt][2 * hh];
                    const float hi = part == 1 ? dk[nt][2 * hh + 1] * scale : dv[nt][2 * hh + 1];
                    cast.pair(r, col, ptx::round_to<T>(lo), ptx::round_to<T>(hi));
                }
            }
            cast.flush(kBwdThreads);
        }
    }
    cast.commit(2 * (size_t)C * (size_t)(BH / NH) * Tlen);
}

// grid: B·NH·ceil(T/64) blocks (longest_first_query_block), kBwdThreads threads, kDqSmemBytes shared.
template <typename T, typename Cast = NoGradCast>
__global__ void __launch_bounds__(kBwdThreads, 2)
    attention_backward_dq_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                 const float* __restrict__ lse, const float* __restrict__ D, int Tlen, int C, int NH,
                                 int BH, float scale, float scale_log2, Cast cast = {}) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* Qs = reinterpret_cast<T*>(smem_raw);   // (64, 64)
    T* dOs = Qs + fl::kBwdBlockRows * kHs;    // (64, 64)
    T* Ks = dOs + fl::kBwdBlockRows * kHs;    // 2 stages of (64, 64)
    T* Vs = Ks + 2 * fl::kBwdTile * kHs;      // 2 stages of (64, 64)
    constexpr int kStage = fl::kBwdTile * kHs;

    const int nqb = fl::ceil_div_int(Tlen, fl::kBwdBlockRows);
    const fl::TileIndex ti = fl::longest_first_query_block(int(blockIdx.x), BH, nqb);
    const int b = ti.bh / NH, h = ti.bh % NH;
    const size_t ld = 3 * (size_t)C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const T* do_base = dout + (size_t)b * Tlen * C + (size_t)h * kHs;
    const int q0 = ti.tile * fl::kBwdBlockRows;
    const int n_kt = fl::key_tiles_for_query_block(q0, fl::kBwdBlockRows, Tlen, fl::kBwdTile);
    const int warp = int(threadIdx.x) / mma::kWarpSize, lane = int(threadIdx.x) % mma::kWarpSize;
    const int wrow = warp * fl::kBwdWarpRows;
    const int r0 = q0 + wrow;   // the warp's first query

    // prologue: group 0 = Q, dO of this query block, group 1 = K, V tile 0 (stage 0)
    load_tile_async<fl::kBwdBlockRows, kBwdThreads>(Qs, q_base, ld, q0, Tlen);
    load_tile_async<fl::kBwdBlockRows, kBwdThreads>(dOs, do_base, (size_t)C, q0, Tlen);
    ptx::cp_async_commit();
    load_tile_async<fl::kBwdTile, kBwdThreads>(Ks, k_base, ld, 0, Tlen);
    load_tile_async<fl::kBwdTile, kBwdThreads>(Vs, v_base, ld, 0, Tlen);
    ptx::cp_async_commit();
    // this lane's two rows' lse (in log2 units) and D, read while the copies fly
    float lse2[2], Dr[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int t = r0 + mma::c_coord(lane, 2 * hh).row;
        lse2[hh] = t < Tlen ? lse[(size_t)ti.bh * Tlen + t] * fl::kLog2e : 0.0f;
        Dr[hh] = t < Tlen ? D[(size_t)ti.bh * Tlen + t] : 0.0f;
    }
    ptx::cp_async_wait<1>();
    __syncthreads();

    uint32_t qf[kKSteps][4], dof[kKSteps][4];   // the warp's Q, dO rows as A fragments, resident
#pragma unroll
    for (int kk = 0; kk < kKSteps; kk++) {
        ptx::ldmatrix_x4(qf[kk], x4_addr(Qs, X4::kA, wrow, 16 * kk, lane));
        ptx::ldmatrix_x4(dof[kk], x4_addr(dOs, X4::kA, wrow, 16 * kk, lane));
    }
    float dq[kHsNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kHsNTiles; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            dq[nt][i] = 0.0f;

    for (int kt = 0; kt < n_kt; kt++) {
        const int stage = kt & 1;
        if (kt + 1 < n_kt) {
            const int k1 = (kt + 1) * fl::kBwdTile;
            load_tile_async<fl::kBwdTile, kBwdThreads>(Ks + (stage ^ 1) * kStage, k_base, ld, k1, Tlen);
            load_tile_async<fl::kBwdTile, kBwdThreads>(Vs + (stage ^ 1) * kStage, v_base, ld, k1, Tlen);
            ptx::cp_async_commit();
            ptx::cp_async_wait<1>();
        } else {
            ptx::cp_async_wait<0>();
        }
        __syncthreads();
        const int k0 = kt * fl::kBwdTile;
        if (!fl::query_rows_fully_masked(r0, fl::kBwdWarpRows, k0, Tlen)) {   // warp-uniform
            const T* Kt = Ks + stage * kStage;
            const T* Vt = Vs + stage * kStage;
            // S = Q_w·Kᵀ, dP = dO_w·Vᵀ (16 queries × 64 keys); K, V stored [key][feature] = [n][k]
            float s[kBwdNT][4], dp[kBwdNT][4];
            score_products<T>(s, dp, qf, dof, Kt, Vt, lane);
            // dS = round_T(P·(dP − D)), P = round_T(exp(scale·s − lse)); 0 where masked
#pragma unroll
            for (int nt = 0; nt < kBwdNT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const mma::Coord c = mma::c_coord(lane, i);
                    const int hh = i >> 1;   // c.row = g + 8·hh
                    const bool keep = fl::causal_keep_bwd(r0 + c.row, k0 + mma::kN * nt + c.col, Tlen);
                    const float p = ptx::round_to<T>(exp2f(fmaf(s[nt][i], scale_log2, -lse2[hh])));
                    const float ds = ptx::round_to<T>(p * (dp[nt][i] - Dr[hh]));
                    dp[nt][i] = keep ? ds : 0.0f;
                }
                // dQ_w += dS·K (A from the registers; K stored [key][feature] = [k][n])
#pragma unroll
            for (int kk = 0; kk < kBwdNT / 2; kk++) {
                uint32_t dsa[4];
                c_to_a<T>(dsa, dp, kk);
#pragma unroll
                for (int np = 0; np < kHsNTiles / 2; np++) {
                    uint32_t bk[2][2];
                    load_b_pair<X4::kBkn>(bk, Kt, 16 * kk, 16 * np, lane);
#pragma unroll
                    for (int t = 0; t < 2; t++)
                        ptx::mma_16816<T>(dq[2 * np + t], dsa, bk[t][0], bk[t][1]);
                }
            }
        }
        __syncthreads();
    }

    // epilogue: dq = round_T(scale·dQ), queries < T (each element written once)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int t = r0 + mma::c_coord(lane, 2 * hh).row;
        if (t >= Tlen) continue;
        T* dst = dqkv + ((size_t)b * Tlen + t) * ld + (size_t)h * kHs;
#pragma unroll
        for (int nt = 0; nt < kHsNTiles; nt++) {
            const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;
            *reinterpret_cast<uint32_t*>(dst + col) = ptx::pack2<T>(dq[nt][2 * hh] * scale, dq[nt][2 * hh + 1] * scale);
        }
    }
    if constexpr (Cast::kActive) {   // the cast policy's tile: dq
        cast.tile(b, q0, h * kHs, smem_raw);
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int r = wrow + mma::c_coord(lane, 2 * hh).row;   // row of the block's tile
            if (q0 + r >= Tlen) continue;
#pragma unroll
            for (int nt = 0; nt < kHsNTiles; nt++) {
                const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;
                cast.pair(r, col, ptx::round_to<T>(dq[nt][2 * hh] * scale),
                          ptx::round_to<T>(dq[nt][2 * hh + 1] * scale));
            }
        }
        cast.flush(kBwdThreads);
    }
    cast.commit((size_t)C * (size_t)(BH / NH) * Tlen);
}

// Shape and alignment preconditions of both launchers: buffers read by cp.async (qkv, dout) are
// 16-byte aligned (with C = 64·NH every row and head offset is a multiple of 128 bytes); the others
// are accessed as 4-byte words (two 16-bit values, or one float).
inline void check_args(const char* who, int B, int Tlen, int C, int NH, std::initializer_list<const void*> aligned16,
                       std::initializer_list<const void*> aligned4) {
    if (B < 0 || Tlen < 0 || NH <= 0 || C != NH * kHs)
        ::train_gpt::fail(
            "%s: B=%d T=%d C=%d NH=%d: the flash attention needs head size C/NH = %d "
            "(attention_flash_supports); use attention_*_gemm for other head sizes",
            who, B, Tlen, C, NH, kHs);
    // 1-D grids of one block per (b, h, tile of 64), and the D kernel's rows (b, t, h), are int-indexed
    if ((int64_t)B * NH * Tlen > INT_MAX)
        ::train_gpt::fail("%s: B·NH·T = %lld exceeds the int range the kernels index rows with", who,
                          (long long)B * NH * Tlen);
    for (const void* p : aligned16)
        if (!is_aligned(p, 16))
            ::train_gpt::fail("%s: buffer %p is not 16-byte aligned (cp.async moves 16-byte chunks)", who, p);
    for (const void* p : aligned4)
        if (!is_aligned(p, 4)) ::train_gpt::fail("%s: buffer %p is not 4-byte aligned", who, p);
}

template <typename T>
constexpr void check_type() {
    static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                  "the flash attention runs on bf16 / fp16 (mma.sync operands); FP32 takes attention_*_gemm");
}

}   // namespace attention_flash_detail

namespace attention_flash_detail {
template <typename T, typename Cast>
void launch_forward(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, Cast cast, cudaStream_t stream) {
    check_type<T>();
    check_args("attention_forward_flash", B, Tlen, C, NH, {qkv}, {out, lse});
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)kHs);   // as the CPU twin: 1 / √hs
    const float scale_log2 = scale * fl::kLog2e;
    const int BH = B * NH;
    const int blocks = BH * fl::ceil_div_int(Tlen, fl::kFwdQueryRows);
    auto kernel = attention_forward_flash_kernel<T, Cast>;
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kFwdSmemBytes));
    kernel<<<blocks, kFwdThreads, kFwdSmemBytes, stream>>>(out, lse, qkv, Tlen, C, NH, BH, scale, scale_log2, cast);
    cudaCheck(cudaGetLastError());
}
}   // namespace attention_flash_detail

// out (B,T,C), lse (B,NH,T) FP32 ← causal attention of qkv (B,T,3C); overwrites out and lse.
// T = __nv_bfloat16 or __half; C = 64·NH; buffers 16-byte aligned.
template <typename T>
void attention_forward_flash(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, cudaStream_t stream) {
    attention_flash_detail::launch_forward(out, lse, qkv, B, Tlen, C, NH, attention_flash_detail::NoOutputCast{},
                                           stream);
}

namespace attention_flash_detail {
template <typename T, typename Cast>
void launch_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen, int C,
                     int NH, Cast cast, cudaStream_t stream) {
    check_type<T>();
    check_args("attention_backward_flash", B, Tlen, C, NH, {qkv, dout}, {dqkv, out, lse});
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)kHs);
    const float scale_log2 = scale * fl::kLog2e;
    const int BH = B * NH;
    float* D = static_cast<float*>(scratch((size_t)BH * Tlen * sizeof(float), stream));   // (B, NH, T)
    const int rows = BH * Tlen;
    attention_backward_d_kernel<T>
        <<<grid_1d((size_t)rows * mma::kWarpSize, kDThreads), kDThreads, 0, stream>>>(D, dout, out, rows, Tlen, C, NH);
    cudaCheck(cudaGetLastError());
    const int blocks = BH * fl::ceil_div_int(Tlen, fl::kBwdBlockRows);
    auto dkdv = attention_backward_dkdv_kernel<T, Cast>;
    cudaCheck(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kDkdvSmemBytes));
    dkdv<<<blocks, kBwdThreads, kDkdvSmemBytes, stream>>>(dqkv, dout, qkv, lse, D, Tlen, C, NH, BH, scale, scale_log2,
                                                          cast);
    cudaCheck(cudaGetLastError());
    auto dq = attention_backward_dq_kernel<T, Cast>;
    cudaCheck(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kDqSmemBytes));
    dq<<<blocks, kBwdThreads, kDqSmemBytes, stream>>>(dqkv, dout, qkv, lse, D, Tlen, C, NH, BH, scale, scale_log2,
                                                      cast);
    cudaCheck(cudaGetLastError());
}
}   // namespace attention_flash_detail

// dqkv (B,T,3C) ← gradient of attention_forward_flash from dout (B,T,C) and the forward's qkv,
// out, lse. OVERWRITES dqkv (every element once). Uses scratch(B·NH·T·4 bytes, stream) for D.
template <typename T>
void attention_backward_flash(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen,
                              int C, int NH, cudaStream_t stream) {
    attention_flash_detail::launch_backward(dqkv, dout, qkv, out, lse, B, Tlen, C, NH,
                                            attention_flash_detail::NoGradCast{}, stream);
}

}   // namespace train_gpt::cuda
