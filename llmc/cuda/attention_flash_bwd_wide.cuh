// attention_flash_bwd_wide.cuh — the flash attention's backward with two m-tiles per warp
// (--flash-backward wide; experimental: it has not run on a GPU, so the default kernels of
// cuda/attention_flash.cuh stay the default until a gpu_check run validates these).
//
//   attention_backward_flash_wide(dqkv (B,T,3C) OVERWRITTEN, dout (B,T,C), qkv, out, lse)
//
// The same maths, roundings, mask and invariants as attention_backward_flash (read that file's
// header first): D by the same kernel, then dK/dV, then dQ, every element of dqkv written once,
// no atomics. What differs is the warp layout (cuda/attention_flash_tiling.h, BwdLayout):
//   dK/dV (BwdWideDkdvLayout): one block of 4 warps per (b, h, key block of 128); warp w owns keys
//     32w … 32w+31 as two m-tiles, K_w resident as A fragments, V_w read from shared memory at each
//     k-step (both resident would spill); query stages of 64 (double-buffered as before) are
//     computed in slices of 16 queries: Sᵀ, dPᵀ (32 × 16), Pᵀ, dSᵀ, then dV_w += Pᵀ·dO and
//     dK_w += dSᵀ·Q, where every Q / dO B fragment feeds both m-tiles.
//   dQ (BwdWideDqLayout): one block of 4 warps per (b, h, query block of 128); warp w owns queries
//     32w … 32w+31, Q_w, dO_w resident; key tiles of 32: S, dP (32 × 32), dS, dQ_w += dS·K, every
//     K / V B fragment feeding both m-tiles.
// The file repeats the default kernels' structure on purpose: they stay as they were validated
// (scripts/check_ptx.sh holds their PTX), and once a gpu_check run validates these, they become
// the backward of attention_flash.cuh and the default kernels go.
// Both walk the other side in the default kernels' 16-row k-steps and order, so each accumulator
// adds the same products in the same order: the values equal the default kernels' (the host twin,
// tests/twins/attention_tiled.cpp, runs both layouts and tests exactly that). Only the skipped
// (warp, tile) pairs differ, and a skipped pair contributes zeros either way.
// Shared-memory registers loaded per mma: dQ 1 (default 2), dK/dV 1.5 on average (default 2).
// Registers (ptxas -v, sm_90a, CUDA 13): dK/dV 255 / 255, dQ 251 bf16, 249 fp16; 0 spills. 0 headroom
// in dK/dV: no FP8 cast epilogue here (the FP8 backward keeps the default kernels).
// Fewer launches do not pay on paper: folding the D kernel into the dQ kernel (which reads dO
// anyway; dK/dV would then run after it) saves one read of dO, B·T·C·2 bytes (d12 at B=16,
// T=1024: 25 MB, about 5 µs at 4.8 TB/s) and one launch per layer, about 0.1 ms of a step of
// 35–60 ms. Not done.
// Shared memory: dK/dV K, V 128×64 + 2 × (Q, dO) 64×64 + 2 × 2 × 64 FP32 = 65 KiB;
//                dQ Q, dO 128×64 + 2 × (K, V) 32×64 = 48 KiB.
#pragma once

#include "cuda/attention_flash.cuh"

namespace train_gpt::cuda {

namespace attention_flash_detail {

using WideDkdv = fl::BwdWideDkdvLayout;
using WideDq = fl::BwdWideDqLayout;
static_assert(2 * WideDkdv::kStage <= kBwdThreads, "one thread per lse and per D value of a query stage");

constexpr size_t kWideDkdvSmemBytes =
    2 * tile_bytes(WideDkdv::kBlockRows) + 4 * tile_bytes(WideDkdv::kStage) + 4 * WideDkdv::kStage * sizeof(float);
constexpr size_t kWideDqSmemBytes = 2 * tile_bytes(WideDq::kBlockRows) + 4 * tile_bytes(WideDq::kStage);
static_assert(kWideDkdvSmemBytes <= 227 * 1024 / 2 && kWideDqSmemBytes <= 227 * 1024 / 2,
              "two blocks per SM (the launch bound) must fit Hopper's 227 KiB");

// grid: B·NH·ceil(T/128) blocks (longest_first_key_block), kBwdThreads threads, kWideDkdvSmemBytes.
template <typename T>
__global__ void __launch_bounds__(kBwdThreads, 2)
    attention_backward_dkdv_wide_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                        const float* __restrict__ lse, const float* __restrict__ D, int Tlen, int C,
                                        int NH, int BH, float scale, float scale_log2) {
    constexpr int MT = WideDkdv::kWarpMTiles;
    constexpr int kQStage = WideDkdv::kStage;   // queries per shared stage
    constexpr int kSlice = WideDkdv::kSlice;    // queries per warp step
    constexpr int kNT = kSlice / mma::kN;       // 8-wide n-tiles of a slice
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* Ks = reinterpret_cast<T*>(smem_raw);                             // (128, 64)
    T* Vs = Ks + WideDkdv::kBlockRows * kHs;                            // (128, 64)
    T* Qs = Vs + WideDkdv::kBlockRows * kHs;                            // 2 stages of (64, 64)
    T* dOs = Qs + 2 * kQStage * kHs;                                    // 2 stages of (64, 64)
    float* lse_s = reinterpret_cast<float*>(dOs + 2 * kQStage * kHs);   // 2 stages of (64)
    float* D_s = lse_s + 2 * kQStage;                                   // 2 stages of (64)
    constexpr int kStage = kQStage * kHs;

    const fl::TileIndex ti = fl::longest_first_key_block(int(blockIdx.x), BH);
    const int b = ti.bh / NH, h = ti.bh % NH;
    const size_t ld = 3 * (size_t)C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;   // (T, 64), row stride 3C
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const T* do_base = dout + (size_t)b * Tlen * C + (size_t)h * kHs;   // (T, 64), row stride C
    const float* lse_bh = lse + (size_t)ti.bh * Tlen;
    const float* D_bh = D + (size_t)ti.bh * Tlen;
    const int k0 = ti.tile * WideDkdv::kBlockRows;
    const int nq = fl::ceil_div_int(Tlen, kQStage);
    const int qt_first = fl::first_query_tile_for_key(k0, kQStage);
    const int warp = int(threadIdx.x) / mma::kWarpSize, lane = int(threadIdx.x) % mma::kWarpSize;
    const int wrow = warp * WideDkdv::kWarpRows;
    const int j0 = k0 + wrow;   // the warp's first key

    auto load_query_stage = [&](int qt, int stage) {
        const int t0 = qt * kQStage;
        load_tile_async<kQStage, kBwdThreads>(Qs + stage * kStage, q_base, ld, t0, Tlen);
        load_tile_async<kQStage, kBwdThreads>(dOs + stage * kStage, do_base, (size_t)C, t0, Tlen);
        load_row_stats_async(lse_s + stage * kQStage, lse_bh, t0, Tlen, 0, kQStage);
        load_row_stats_async(D_s + stage * kQStage, D_bh, t0, Tlen, kQStage, kQStage);
    };

    // prologue: group 0 = K, V of this key block, group 1 = query stage qt_first (stage 0)
    load_tile_async<WideDkdv::kBlockRows, kBwdThreads>(Ks, k_base, ld, k0, Tlen);
    load_tile_async<WideDkdv::kBlockRows, kBwdThreads>(Vs, v_base, ld, k0, Tlen);
    ptx::cp_async_commit();
    load_query_stage(qt_first, 0);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();

    uint32_t kf[MT][kKSteps][4];   // the warp's K rows as A fragments, resident (V stays in shared memory)
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < kKSteps; kk++)
            ptx::ldmatrix_x4(kf[mt][kk], x4_addr(Ks, X4::kA, wrow + mma::kM * mt, 16 * kk, lane));
    float dk[MT][kHsNTiles][4], dv[MT][kHsNTiles][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < kHsNTiles; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                dk[mt][nt][i] = dv[mt][nt][i] = 0.0f;

    for (int qt = qt_first; qt < nq; qt++) {
        const int stage = (qt - qt_first) & 1;
        if (qt + 1 < nq) {
            load_query_stage(qt + 1, stage ^ 1);   // the other stage's readers passed the previous final barrier
            ptx::cp_async_commit();
            ptx::cp_async_wait<1>();
        } else {
            ptx::cp_async_wait<0>();
        }
        __syncthreads();
        const T* Qt = Qs + stage * kStage;
        const T* dOt = dOs + stage * kStage;
        const float* lse_t = lse_s + stage * kQStage;
        const float* D_t = D_s + stage * kQStage;
#pragma unroll 1   // one slice's registers at a time (unrolled, the four slices' would spill)
        for (int sl = 0; sl < kQStage / kSlice; sl++) {
            const int c0 = sl * kSlice;   // the slice's first query within the stage
            const int t0 = qt * kQStage + c0;
            if (fl::key_rows_fully_masked(j0, t0, kSlice, Tlen)) continue;   // warp-uniform
            // Sᵀ = K_w·Qᵀ, dPᵀ = V_w·dOᵀ (32 keys × 16 queries); Q, dO stored [query][feature] = [n][k]
            float st[MT][kNT][4], dpt[MT][kNT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        st[mt][nt][i] = dpt[mt][nt][i] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < kKSteps; kk++)
#pragma unroll
                for (int np = 0; np < kNT / 2; np++) {
                    uint32_t bq[2][2], bo[2][2];
                    load_b_pair<X4::kBnk>(bq, Qt, c0 + 16 * np, 16 * kk, lane);
                    load_b_pair<X4::kBnk>(bo, dOt, c0 + 16 * np, 16 * kk, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        uint32_t va[4];
                        ptx::ldmatrix_x4(va, x4_addr(Vs, X4::kA, wrow + mma::kM * mt, 16 * kk, lane));
#pragma unroll
                        for (int t = 0; t < 2; t++) {
                            ptx::mma_16816<T>(st[mt][2 * np + t], kf[mt][kk], bq[t][0], bq[t][1]);
                            ptx::mma_16816<T>(dpt[mt][2 * np + t], va, bo[t][0], bo[t][1]);
                        }
                    }
                }
                // Pᵀ = round_T(exp(scale·s − lse)), dSᵀ = round_T(Pᵀ·(dPᵀ − D)), 0 where masked
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const mma::Coord c = mma::c_coord(lane, i);
                        const int col = c0 + mma::kN * nt + c.col;   // query within the stage
                        const bool keep = fl::causal_keep_bwd(qt * kQStage + col, j0 + mma::kM * mt + c.row, Tlen);
                        const float lse2 = lse_t[col] * fl::kLog2e;
                        const float p = ptx::round_to<T>(exp2f(fmaf(st[mt][nt][i], scale_log2, -lse2)));
                        const float ds = ptx::round_to<T>(p * (dpt[mt][nt][i] - D_t[col]));
                        st[mt][nt][i] = keep ? p : 0.0f;
                        dpt[mt][nt][i] = keep ? ds : 0.0f;
                    }
                    // dV_w += Pᵀ·dO, dK_w += dSᵀ·Q (A from the registers; dO, Q stored [query][feature] = [k][n])
#pragma unroll
            for (int kk = 0; kk < kNT / 2; kk++) {
                uint32_t pa[MT][4], dsa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    c_to_a<T>(pa[mt], st[mt], kk);
                    c_to_a<T>(dsa[mt], dpt[mt], kk);
                }
#pragma unroll
                for (int np = 0; np < kHsNTiles / 2; np++) {
                    uint32_t bo[2][2], bq[2][2];
                    load_b_pair<X4::kBkn>(bo, dOt, c0 + 16 * kk, 16 * np, lane);
                    load_b_pair<X4::kBkn>(bq, Qt, c0 + 16 * kk, 16 * np, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int t = 0; t < 2; t++) {
                            ptx::mma_16816<T>(dv[mt][2 * np + t], pa[mt], bo[t][0], bo[t][1]);
                            ptx::mma_16816<T>(dk[mt][2 * np + t], dsa[mt], bq[t][0], bq[t][1]);
                        }
                }
            }
        }
        __syncthreads();   // no warp reads this stage any more
    }

    // epilogue: dk = round_T(scale·dK), dv = round_T(dV), keys < T (each element written once)
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int j = j0 + mma::kM * mt + mma::c_coord(lane, 2 * hh).row;
            if (j >= Tlen) continue;
            T* dst = dqkv + ((size_t)b * Tlen + j) * ld + (size_t)h * kHs;   // row j of (B, T, 3C), head h
#pragma unroll
            for (int nt = 0; nt < kHsNTiles; nt++) {
                const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;
                *reinterpret_cast<uint32_t*>(dst + C + col) =
                    ptx::pack2<T>(dk[mt][nt][2 * hh] * scale, dk[mt][nt][2 * hh + 1] * scale);
                *reinterpret_cast<uint32_t*>(dst + 2 * (size_t)C + col) =
                    ptx::pack2<T>(dv[mt][nt][2 * hh], dv[mt][nt][2 * hh + 1]);
            }
        }
}

// grid: B·NH·ceil(T/128) blocks (longest_first_query_block), kBwdThreads threads, kWideDqSmemBytes.
template <typename T>
__global__ void __launch_bounds__(kBwdThreads, 2)
    attention_backward_dq_wide_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                                      const float* __restrict__ lse, const float* __restrict__ D, int Tlen, int C,
                                      int NH, int BH, float scale, float scale_log2) {
    constexpr int MT = WideDq::kWarpMTiles;
    constexpr int kKeyTile = WideDq::kStage;
    constexpr int kNT = kKeyTile / mma::kN;   // 8-wide n-tiles of a key tile
    static_assert(WideDq::kSlice == WideDq::kStage, "the dQ kernel computes a whole key tile per warp step");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* Qs = reinterpret_cast<T*>(smem_raw);   // (128, 64)
    T* dOs = Qs + WideDq::kBlockRows * kHs;   // (128, 64)
    T* Ks = dOs + WideDq::kBlockRows * kHs;   // 2 stages of (32, 64)
    T* Vs = Ks + 2 * kKeyTile * kHs;          // 2 stages of (32, 64)
    constexpr int kStage = kKeyTile * kHs;

    const int nqb = fl::ceil_div_int(Tlen, WideDq::kBlockRows);
    const fl::TileIndex ti = fl::longest_first_query_block(int(blockIdx.x), BH, nqb);
    const int b = ti.bh / NH, h = ti.bh % NH;
    const size_t ld = 3 * (size_t)C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const T* do_base = dout + (size_t)b * Tlen * C + (size_t)h * kHs;
    const int q0 = ti.tile * WideDq::kBlockRows;
    const int n_kt = fl::key_tiles_for_query_block(q0, WideDq::kBlockRows, Tlen, kKeyTile);
    const int warp = int(threadIdx.x) / mma::kWarpSize, lane = int(threadIdx.x) % mma::kWarpSize;
    const int wrow = warp * WideDq::kWarpRows;
    const int r0 = q0 + wrow;   // the warp's first query

    // prologue: group 0 = Q, dO of this query block, group 1 = K, V tile 0 (stage 0)
    load_tile_async<WideDq::kBlockRows, kBwdThreads>(Qs, q_base, ld, q0, Tlen);
    load_tile_async<WideDq::kBlockRows, kBwdThreads>(dOs, do_base, (size_t)C, q0, Tlen);
    ptx::cp_async_commit();
    load_tile_async<kKeyTile, kBwdThreads>(Ks, k_base, ld, 0, Tlen);
    load_tile_async<kKeyTile, kBwdThreads>(Vs, v_base, ld, 0, Tlen);
    ptx::cp_async_commit();
    // this lane's four rows' lse (in log2 units) and D, read while the copies fly
    float lse2[MT][2], Dr[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int t = r0 + mma::kM * mt + mma::c_coord(lane, 2 * hh).row;
            lse2[mt][hh] = t < Tlen ? lse[(size_t)ti.bh * Tlen + t] * fl::kLog2e : 0.0f;
            Dr[mt][hh] = t < Tlen ? D[(size_t)ti.bh * Tlen + t] : 0.0f;
        }
    ptx::cp_async_wait<1>();
    __syncthreads();

    uint32_t qf[MT][kKSteps][4], dof[MT][kKSteps][4];   // the warp's Q, dO rows as A fragments, resident
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < kKSteps; kk++) {
            ptx::ldmatrix_x4(qf[mt][kk], x4_addr(Qs, X4::kA, wrow + mma::kM * mt, 16 * kk, lane));
            ptx::ldmatrix_x4(dof[mt][kk], x4_addr(dOs, X4::kA, wrow + mma::kM * mt, 16 * kk, lane));
        }
    float dq[MT][kHsNTiles][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < kHsNTiles; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                dq[mt][nt][i] = 0.0f;

    for (int kt = 0; kt < n_kt; kt++) {
        const int stage = kt & 1;
        if (kt + 1 < n_kt) {
            const int k1 = (kt + 1) * kKeyTile;
            load_tile_async<kKeyTile, kBwdThreads>(Ks + (stage ^ 1) * kStage, k_base, ld, k1, Tlen);
            load_tile_async<kKeyTile, kBwdThreads>(Vs + (stage ^ 1) * kStage, v_base, ld, k1, Tlen);
            ptx::cp_async_commit();
            ptx::cp_async_wait<1>();
        } else {
            ptx::cp_async_wait<0>();
        }
        __syncthreads();
        const int k0 = kt * kKeyTile;
        if (!fl::query_rows_fully_masked(r0, WideDq::kWarpRows, k0, Tlen)) {   // warp-uniform
            const T* Kt = Ks + stage * kStage;
            const T* Vt = Vs + stage * kStage;
            // S = Q_w·Kᵀ, dP = dO_w·Vᵀ (32 queries × 32 keys); K, V stored [key][feature] = [n][k]
            float s[MT][kNT][4], dp[MT][kNT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        s[mt][nt][i] = dp[mt][nt][i] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < kKSteps; kk++)
#pragma unroll
                for (int np = 0; np < kNT / 2; np++) {
                    uint32_t bk[2][2], bv[2][2];
                    load_b_pair<X4::kBnk>(bk, Kt, 16 * np, 16 * kk, lane);
                    load_b_pair<X4::kBnk>(bv, Vt, 16 * np, 16 * kk, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int t = 0; t < 2; t++) {
                            ptx::mma_16816<T>(s[mt][2 * np + t], qf[mt][kk], bk[t][0], bk[t][1]);
                            ptx::mma_16816<T>(dp[mt][2 * np + t], dof[mt][kk], bv[t][0], bv[t][1]);
                        }
                }
                // dS = round_T(P·(dP − D)), P = round_T(exp(scale·s − lse)); 0 where masked
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const mma::Coord c = mma::c_coord(lane, i);
                        const int hh = i >> 1;   // c.row = g + 8·hh
                        const bool keep =
                            fl::causal_keep_bwd(r0 + mma::kM * mt + c.row, k0 + mma::kN * nt + c.col, Tlen);
                        const float p = ptx::round_to<T>(exp2f(fmaf(s[mt][nt][i], scale_log2, -lse2[mt][hh])));
                        const float ds = ptx::round_to<T>(p * (dp[mt][nt][i] - Dr[mt][hh]));
                        dp[mt][nt][i] = keep ? ds : 0.0f;
                    }
                    // dQ_w += dS·K (A from the registers; K stored [key][feature] = [k][n])
#pragma unroll
            for (int kk = 0; kk < kNT / 2; kk++) {
                uint32_t dsa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    c_to_a<T>(dsa[mt], dp[mt], kk);
#pragma unroll
                for (int np = 0; np < kHsNTiles / 2; np++) {
                    uint32_t bk[2][2];
                    load_b_pair<X4::kBkn>(bk, Kt, 16 * kk, 16 * np, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int t = 0; t < 2; t++)
                            ptx::mma_16816<T>(dq[mt][2 * np + t], dsa[mt], bk[t][0], bk[t][1]);
                }
            }
        }
        __syncthreads();
    }

    // epilogue: dq = round_T(scale·dQ), queries < T (each element written once)
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int t = r0 + mma::kM * mt + mma::c_coord(lane, 2 * hh).row;
            if (t >= Tlen) continue;
            T* dst = dqkv + ((size_t)b * Tlen + t) * ld + (size_t)h * kHs;
#pragma unroll
            for (int nt = 0; nt < kHsNTiles; nt++) {
                const int col = mma::kN * nt + mma::c_coord(lane, 2 * hh).col;
                *reinterpret_cast<uint32_t*>(dst + col) =
                    ptx::pack2<T>(dq[mt][nt][2 * hh] * scale, dq[mt][nt][2 * hh + 1] * scale);
            }
        }
}

}   // namespace attention_flash_detail

// dqkv (B,T,3C) ← gradient of attention_forward_flash, as attention_backward_flash (the same values)
// by the wide kernels. OVERWRITES dqkv (every element once). Uses scratch(B·NH·T·4 bytes, stream) for D.
template <typename T>
void attention_backward_flash_wide(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                                   int Tlen, int C, int NH, cudaStream_t stream) {
    using namespace attention_flash_detail;
    check_type<T>();
    check_args("attention_backward_flash_wide", B, Tlen, C, NH, {qkv, dout}, {dqkv, out, lse});
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / sqrtf((float)kHs);
    const float scale_log2 = scale * fl::kLog2e;
    const int BH = B * NH;
    float* D = static_cast<float*>(scratch((size_t)BH * Tlen * sizeof(float), stream));   // (B, NH, T)
    const int rows = BH * Tlen;
    attention_backward_d_kernel<T>
        <<<grid_1d((size_t)rows * mma::kWarpSize, kDThreads), kDThreads, 0, stream>>>(D, dout, out, rows, Tlen, C, NH);
    cudaCheck(cudaGetLastError());
    auto dkdv = attention_backward_dkdv_wide_kernel<T>;
    cudaCheck(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kWideDkdvSmemBytes));
    dkdv<<<BH * fl::ceil_div_int(Tlen, WideDkdv::kBlockRows), kBwdThreads, kWideDkdvSmemBytes, stream>>>(
        dqkv, dout, qkv, lse, D, Tlen, C, NH, BH, scale, scale_log2);
    cudaCheck(cudaGetLastError());
    auto dq = attention_backward_dq_wide_kernel<T>;
    cudaCheck(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kWideDqSmemBytes));
    dq<<<BH * fl::ceil_div_int(Tlen, WideDq::kBlockRows), kBwdThreads, kWideDqSmemBytes, stream>>>(
        dqkv, dout, qkv, lse, D, Tlen, C, NH, BH, scale, scale_log2);
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
