// tests/twins/attention_tiled.cpp — see attention_tiled.h. Each function below mirrors one piece of
// cuda/attention_flash.cuh; the comments name the kernel step they twin. Registers are arrays
// indexed [lane][register] (a warp's 32 lanes side by side); a "shared tile" is a vector of 16-bit
// words in the kernel's swizzled layout.
//
// Parallelism: OpenMP over blocks of the schedule (each block writes disjoint outputs), so results
// do not depend on the thread count.
#include "tests/twins/attention_tiled.h"

#include "cuda/attention_flash_tiling.h"
#include "cuda/mma_fragments.h"
#include "utils.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace train_gpt::cpu {

namespace {

using mma::Coord;
using mma::X4;
namespace fl = flash;

constexpr int kLanes = mma::kWarpSize;
constexpr int kHs = fl::kHeadSize;
constexpr int kKSteps = kHs / mma::kK;     // k-steps over the head dimension (QKᵀ, dO·Vᵀ)
constexpr int kHsNTiles = kHs / mma::kN;   // n-tiles over the head dimension (P·V, dS·K, …)

// ---- registers -----------------------------------------------------------------------------------

struct AFrag {
    uint32_t r[kLanes][mma::kARegs];
};
struct CFrag {
    float r[kLanes][mma::kCRegs];
};
struct X4Regs {
    uint32_t r[kLanes][4];
};

template <typename T>
float half_value(uint32_t w, int e) {
    return T{uint16_t(w >> (16 * e))}.to_float();
}
// pack2 (mma_ptx.cuh): lo in bits 0-15, hi in bits 16-31, each rounded to T (RNE)
template <typename T>
uint32_t pack2(float lo, float hi) {
    return uint32_t(T::from_float(lo).bits) | (uint32_t(T::from_float(hi).bits) << 16);
}
template <typename T>
float round_to_t(float x) {
    return T::from_float(x).to_float();
}

void zero(CFrag& c) { std::memset(&c, 0, sizeof(c)); }

// mma.sync.m16n8k16: d += a · (b0, b1) where b0/b1 are each lane's two B registers. The 16
// products of each output are summed exactly (double) with the accumulator and rounded once.
template <typename T>
void mma_16816(CFrag& d, const AFrag& a, const uint32_t b[kLanes][2]) {
    float A[16][16], B[16][8];
    for (int lane = 0; lane < kLanes; lane++) {
        for (int r = 0; r < mma::kARegs; r++)
            for (int e = 0; e < 2; e++) {
                const Coord x = mma::a_coord(lane, r, e);
                A[x.row][x.col] = half_value<T>(a.r[lane][r], e);
            }
        for (int r = 0; r < mma::kBRegs; r++)
            for (int e = 0; e < 2; e++) {
                const Coord x = mma::b_coord(lane, r, e);
                B[x.row][x.col] = half_value<T>(b[lane][r], e);
            }
    }
    for (int lane = 0; lane < kLanes; lane++)
        for (int r = 0; r < mma::kCRegs; r++) {
            const Coord x = mma::c_coord(lane, r);
            double s = d.r[lane][r];
            for (int k = 0; k < 16; k++)
                s += (double)A[x.row][k] * (double)B[k][x.col];
            d.r[lane][r] = (float)s;
        }
}

// The two B fragments of an x4 (kBnk / kBkn), as mma_16816's b arguments for n-tiles 0 and 1.
struct BPair {
    uint32_t b[2][kLanes][2];
};
BPair split_pair(const X4Regs& x) {
    BPair p;
    for (int lane = 0; lane < kLanes; lane++)
        for (int j = 0; j < 4; j++)
            p.b[mma::x4_ntile(j)][lane][mma::x4_breg(j)] = x.r[lane][j];
    return p;
}
AFrag as_a(const X4Regs& x) {
    AFrag a;
    std::memcpy(a.r, x.r, sizeof(a.r));
    return a;
}

// ---- shared tiles ----------------------------------------------------------------------------------

// rows × kHs 16-bit words, swizzled (mma::swizzled_offset).
struct Tile {
    std::vector<uint16_t> w;
    explicit Tile(int rows) : w((size_t)rows * kHs, 0) {}
};

// load_tile (kernel): rows row0 … row0+rows−1 of src (row stride ld elements), 16-byte chunks by
// tile_chunk, zero-filled past T (cp.async with src-size 0).
template <typename T>
void load_tile(Tile& dst, const T* src, size_t ld, int row0, int rows, int Tlen) {
    for (int idx = 0; idx < rows * fl::kTileChunksPerRow; idx++) {
        const Coord c = fl::tile_chunk(idx);
        const bool valid = row0 + c.row < Tlen;
        uint16_t* d = dst.w.data() + mma::swizzled_offset(c.row, c.col, kHs);
        for (int e = 0; e < mma::kChunkElems; e++)
            d[e] = valid ? src[(size_t)(row0 + c.row) * ld + c.col + e].bits : uint16_t(0);
    }
}

// ldmatrix.x4{.trans} at the kernel's lane addresses for the 16×16 region at (row0, col0).
X4Regs ldmatrix_x4(const Tile& t, X4 x, int row0, int col0) {
    int addr[kLanes];
    for (int lane = 0; lane < kLanes; lane++) {
        const Coord a = mma::x4_lane_address(x, lane);
        addr[lane] = mma::swizzled_offset(row0 + a.row, col0 + a.col, kHs);
    }
    X4Regs out;
    for (int lane = 0; lane < kLanes; lane++)
        for (int j = 0; j < 4; j++) {
            uint32_t w = 0;
            for (int e = 0; e < 2; e++) {
                const Coord s = mma::ldmatrix_coord(lane, e, mma::x4_trans(x));   // (row address, element)
                w |= uint32_t(t.w[addr[8 * j + s.row] + s.col]) << (16 * e);
            }
            out.r[lane][j] = w;
        }
    return out;
}

// The C → A reuse: the A fragment of k-step s from C n-tiles 2s, 2s+1, each value rounded to T.
template <typename T>
AFrag c_to_a(const CFrag* c, int s) {
    AFrag a;
    for (int lane = 0; lane < kLanes; lane++)
        for (int r = 0; r < mma::kARegs; r++) {
            const CFrag& src = c[2 * s + mma::c_to_a_ntile(r)];
            a.r[lane][r] = pack2<T>(src.r[lane][mma::c_to_a_creg(r, 0)], src.r[lane][mma::c_to_a_creg(r, 1)]);
        }
    return a;
}

// __shfl_xor_sync over a per-lane value array
template <typename F, typename Op>
void quad_butterfly(F v[kLanes], Op op) {
    for (int off : {1, 2}) {
        F next[kLanes];
        for (int lane = 0; lane < kLanes; lane++)
            next[lane] = op(v[lane], v[lane ^ off]);
        std::copy(next, next + kLanes, v);
    }
}

// Does any (row, key) of rows r0 … r0+rows−1 × keys k0 … k0+keys−1 survive the mask?
bool any_live(int r0, int rows, int k0, int keys, bool rows_are_queries, bool bwd, int Tlen) {
    for (int a = r0; a < r0 + rows; a++)
        for (int b = k0; b < k0 + keys; b++) {
            const int t = rows_are_queries ? a : b, j = rows_are_queries ? b : a;
            if (bwd ? fl::causal_keep_bwd(t, j, Tlen) : (fl::causal_keep(t, j) && t < Tlen && j < Tlen)) return true;
        }
    return false;
}

void count(TiledStats& s, bool computed, bool live) {
    if (computed) {
        s.computed++;
        s.computed_without_live += !live;
    } else {
        s.skipped++;
        s.skipped_with_live += live;
    }
}

void merge(TiledStats* into, const TiledStats& s) {
    if (into == nullptr) return;
#pragma omp critical(attention_tiled_stats)
    {
        into->computed += s.computed;
        into->skipped += s.skipped;
        into->computed_without_live += s.computed_without_live;
        into->skipped_with_live += s.skipped_with_live;
        into->blocks += s.blocks;
    }
}

void check_shape(const char* who, int B, int Tlen, int C, int NH) {
    if (B < 0 || Tlen < 0 || NH <= 0 || C != NH * fl::kHeadSize)
        fail("%s: needs head size %d (C = %d, NH = %d)", who, fl::kHeadSize, C, NH);
}

// ---- forward: attention_forward_flash_kernel -----------------------------------------------------

struct FwdWarp {
    AFrag q[fl::kFwdWarpMTiles][kKSteps];                                       // Q fragments, resident
    CFrag o[fl::kFwdWarpMTiles][kHsNTiles];                                     // O accumulators
    float m[fl::kFwdWarpMTiles][2][kLanes], l[fl::kFwdWarpMTiles][2][kLanes];   // per row half (g, g+8)
};

template <typename T>
void forward_warp_tile(FwdWarp& w, const Tile& ks, const Tile& vs, int r0, int k0, float scale_log2, TiledStats& stats,
                       int Tlen) {
    constexpr int MT = fl::kFwdWarpMTiles, NT = fl::kFwdKeyTile / mma::kN;
    const bool skip = fl::query_rows_fully_masked(r0, fl::kFwdWarpRows, k0, Tlen);
    count(stats, !skip, any_live(r0, fl::kFwdWarpRows, k0, fl::kFwdKeyTile, true, false, Tlen));
    if (skip) return;

    // S = Q·Kᵀ: B pairs from K stored [key][dim] (kBnk), each used by every m-tile
    CFrag s[MT][NT];
    for (auto& row : s)
        for (CFrag& c : row)
            zero(c);
    for (int kk = 0; kk < kKSteps; kk++)
        for (int np = 0; np < NT / 2; np++) {
            const BPair b = split_pair(ldmatrix_x4(ks, X4::kBnk, 16 * np, 16 * kk));
            for (int mt = 0; mt < MT; mt++)
                for (int t = 0; t < 2; t++)
                    mma_16816<T>(s[mt][2 * np + t], w.q[mt][kk], b.b[t]);
        }

    // the causal mask (only on tiles that reach past the warp's first row)
    if (fl::query_rows_need_mask(r0, k0, fl::kFwdKeyTile)) {
        for (int mt = 0; mt < MT; mt++)
            for (int nt = 0; nt < NT; nt++)
                for (int lane = 0; lane < kLanes; lane++)
                    for (int i = 0; i < 4; i++) {
                        const Coord c = mma::c_coord(lane, i);
                        if (!fl::causal_keep(r0 + mma::kM * mt + c.row, k0 + 8 * nt + c.col))
                            s[mt][nt].r[lane][i] = -INFINITY;
                    }
    }

    // online softmax per row half hh (C registers 2hh, 2hh+1 = row g + 8hh)
    for (int mt = 0; mt < MT; mt++)
        for (int hh = 0; hh < 2; hh++) {
            float mx[kLanes];
            for (int lane = 0; lane < kLanes; lane++) {
                float v = -INFINITY;
                for (int nt = 0; nt < NT; nt++)
                    for (int e = 0; e < 2; e++)
                        v = std::fmax(v, s[mt][nt].r[lane][2 * hh + e]);
                mx[lane] = v;
            }
            quad_butterfly(mx, [](float a, float b) { return std::fmax(a, b); });
            for (int lane = 0; lane < kLanes; lane++) {
                const float m_old = w.m[mt][hh][lane];
                const float m_new = std::fmax(m_old, mx[lane]);
                const float alpha = std::exp2((m_old - m_new) * scale_log2);
                const float ms = m_new * scale_log2;
                float sum = 0.0f;
                for (int nt = 0; nt < NT; nt++)
                    for (int e = 0; e < 2; e++) {
                        float& x = s[mt][nt].r[lane][2 * hh + e];
                        x = std::exp2(std::fma(x, scale_log2, -ms));
                        sum += x;
                    }
                w.l[mt][hh][lane] = std::fma(w.l[mt][hh][lane], alpha, sum);
                w.m[mt][hh][lane] = m_new;
                for (int nt = 0; nt < kHsNTiles; nt++)
                    for (int e = 0; e < 2; e++)
                        w.o[mt][nt].r[lane][2 * hh + e] *= alpha;
            }
        }

    // O += P·V: P from the S registers (rounded to T), B pairs from V stored [key][dim] (kBkn)
    AFrag p[MT][NT / 2];
    for (int mt = 0; mt < MT; mt++)
        for (int kk = 0; kk < NT / 2; kk++)
            p[mt][kk] = c_to_a<T>(s[mt], kk);
    for (int kk = 0; kk < NT / 2; kk++)
        for (int np = 0; np < kHsNTiles / 2; np++) {
            const BPair b = split_pair(ldmatrix_x4(vs, X4::kBkn, 16 * kk, 16 * np));
            for (int mt = 0; mt < MT; mt++)
                for (int t = 0; t < 2; t++)
                    mma_16816<T>(w.o[mt][2 * np + t], p[mt][kk], b.b[t]);
        }
}

template <typename T>
void forward_block(T* out, float* lse, const T* qkv, int Tlen, int C, int NH, int bh, int qb, float scale,
                   float scale_log2, TiledStats& stats) {
    constexpr int MT = fl::kFwdWarpMTiles;
    const int b = bh / NH, h = bh % NH;
    const size_t ld = (size_t)3 * C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;   // (T, hs) rows of stride 3C
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const int q0 = qb * fl::kFwdQueryRows;
    const int n_kt = fl::key_tiles_for_query_block(q0, fl::kFwdQueryRows, Tlen, fl::kFwdKeyTile);

    Tile qs(fl::kFwdQueryRows), ks(fl::kFwdKeyTile), vs(fl::kFwdKeyTile);
    load_tile(qs, q_base, ld, q0, fl::kFwdQueryRows, Tlen);
    std::vector<FwdWarp> warps(fl::kFwdWarps);
    for (int wi = 0; wi < fl::kFwdWarps; wi++) {
        FwdWarp& w = warps[wi];
        for (int mt = 0; mt < MT; mt++) {
            for (int kk = 0; kk < kKSteps; kk++)
                w.q[mt][kk] = as_a(ldmatrix_x4(qs, X4::kA, wi * fl::kFwdWarpRows + mma::kM * mt, 16 * kk));
            for (CFrag& c : w.o[mt])
                zero(c);
            for (int hh = 0; hh < 2; hh++)
                for (int lane = 0; lane < kLanes; lane++) {
                    w.m[mt][hh][lane] = -INFINITY;
                    w.l[mt][hh][lane] = 0.0f;
                }
        }
    }
    for (int kt = 0; kt < n_kt; kt++) {
        const int k0 = kt * fl::kFwdKeyTile;
        load_tile(ks, k_base, ld, k0, fl::kFwdKeyTile, Tlen);
        load_tile(vs, v_base, ld, k0, fl::kFwdKeyTile, Tlen);
        for (int wi = 0; wi < fl::kFwdWarps; wi++)
            forward_warp_tile<T>(warps[wi], ks, vs, q0 + wi * fl::kFwdWarpRows, k0, scale_log2, stats, Tlen);
    }
    // epilogue: the row sum over the quad, out = O / l, lse = m·scale + ln l
    for (int wi = 0; wi < fl::kFwdWarps; wi++) {
        FwdWarp& w = warps[wi];
        for (int mt = 0; mt < MT; mt++)
            for (int hh = 0; hh < 2; hh++) {
                float l[kLanes];
                std::copy(w.l[mt][hh], w.l[mt][hh] + kLanes, l);
                quad_butterfly(l, [](float a, float c) { return a + c; });
                for (int lane = 0; lane < kLanes; lane++) {
                    const int row = q0 + wi * fl::kFwdWarpRows + mma::kM * mt + mma::c_coord(lane, 2 * hh).row;
                    if (row >= Tlen) continue;
                    const float inv = 1.0f / l[lane];
                    T* dst = out + ((size_t)b * Tlen + row) * C + (size_t)h * kHs;
                    for (int nt = 0; nt < kHsNTiles; nt++)
                        for (int e = 0; e < 2; e++)
                            dst[8 * nt + mma::c_coord(lane, 2 * hh + e).col] =
                                T::from_float(w.o[mt][nt].r[lane][2 * hh + e] * inv);
                    if (mma::thread_in_group(lane) == 0)
                        lse[(size_t)bh * Tlen + row] = std::fma(w.m[mt][hh][lane], scale, std::log(l[lane]));
                }
            }
    }
}

// ---- backward: attention_backward_d_kernel --------------------------------------------------------

// D (B,NH,T) = rowsum(dO ∘ O) in FP32: lane L multiplies features 2L, 2L+1, then the warp's
// butterfly sum (xor 16, 8, 4, 2, 1) as warp_reduce_sum.
template <typename T>
float d_row(const T* dO, const T* O) {
    float v[kLanes];
    for (int lane = 0; lane < kLanes; lane++)
        v[lane] = std::fma(dO[2 * lane + 1].to_float(), O[2 * lane + 1].to_float(),
                           dO[2 * lane].to_float() * O[2 * lane].to_float());
    for (int off = 16; off > 0; off >>= 1) {
        float next[kLanes];
        for (int lane = 0; lane < kLanes; lane++)
            next[lane] = v[lane] + v[lane ^ off];
        std::copy(next, next + kLanes, v);
    }
    return v[0];
}

// ---- backward: the two score-sized products of each backward kernel (score_products) ------------

// c1 = A1·B1ᵀ, c2 = A2·B2ᵀ (16 rows × 8·NT columns, zeroed first): A1, A2 the warp's A fragments
// over the head dimension (one m-tile), B1, B2 tiles stored [column][dim] (kBnk), from column col0.
// The dK/dV kernels' Sᵀ = K_w·Qᵀ and dPᵀ = V_w·dOᵀ, the dQ kernels' S = Q_w·Kᵀ and dP = dO_w·Vᵀ.
template <typename T, int NT>
void score_products(CFrag (&c1)[NT], CFrag (&c2)[NT], const AFrag (&a1)[kKSteps], const AFrag (&a2)[kKSteps],
                    const Tile& b1, const Tile& b2, int col0) {
    for (int nt = 0; nt < NT; nt++) {
        zero(c1[nt]);
        zero(c2[nt]);
    }
    for (int kk = 0; kk < kKSteps; kk++)
        for (int np = 0; np < NT / 2; np++) {
            const BPair f1 = split_pair(ldmatrix_x4(b1, X4::kBnk, col0 + 16 * np, 16 * kk));
            const BPair f2 = split_pair(ldmatrix_x4(b2, X4::kBnk, col0 + 16 * np, 16 * kk));
            for (int t = 0; t < 2; t++) {
                mma_16816<T>(c1[2 * np + t], a1[kk], f1.b[t]);
                mma_16816<T>(c2[2 * np + t], a2[kk], f2.b[t]);
            }
        }
}

// The backward blocks below take the warp layout L (cuda/attention_flash_tiling.h, BwdLayout):
// BwdDefaultLayout for attention_flash.cuh's kernels, BwdWideDkdvLayout / BwdWideDqLayout for
// attention_flash_bwd_wide.cuh's. A warp of L owns L::kWarpMTiles m-tiles; each m-tile's products
// are the ones the kernel computes for it (the wide dK/dV kernel reads V's A fragments from shared
// memory at every k-step instead of keeping them: the same registers, so the twin keeps them).

// ---- backward: attention_backward_dkdv_kernel, attention_backward_dkdv_wide_kernel --------------

template <typename T, class L>
void dkdv_block(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* D, int Tlen, int C, int NH, int bh,
                int kb, float scale, float scale_log2, TiledStats& stats) {
    constexpr int MT = L::kWarpMTiles, WR = L::kWarpRows, QS = L::kStage, SL = L::kSlice;
    constexpr int NT = SL / mma::kN;   // n-tiles of queries in Sᵀ (one slice)
    constexpr int W = fl::kBwdWarps;
    const int b = bh / NH, h = bh % NH;
    const size_t ld = (size_t)3 * C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const T* do_base = dout + (size_t)b * Tlen * C + (size_t)h * kHs;
    const float* lse_bh = lse + (size_t)bh * Tlen;
    const float* D_bh = D + (size_t)bh * Tlen;
    const int k0 = kb * L::kBlockRows;
    const int nq = fl::ceil_div_int(Tlen, QS);

    Tile ks(L::kBlockRows), vs(L::kBlockRows), qs(QS), dos(QS);
    load_tile(ks, k_base, ld, k0, L::kBlockRows, Tlen);
    load_tile(vs, v_base, ld, k0, L::kBlockRows, Tlen);
    AFrag kf[W][MT][kKSteps], vf[W][MT][kKSteps];
    CFrag dk[W][MT][kHsNTiles], dv[W][MT][kHsNTiles];
    for (int wi = 0; wi < W; wi++)
        for (int mt = 0; mt < MT; mt++) {
            for (int kk = 0; kk < kKSteps; kk++) {
                kf[wi][mt][kk] = as_a(ldmatrix_x4(ks, X4::kA, wi * WR + mma::kM * mt, 16 * kk));
                vf[wi][mt][kk] = as_a(ldmatrix_x4(vs, X4::kA, wi * WR + mma::kM * mt, 16 * kk));
            }
            for (int nt = 0; nt < kHsNTiles; nt++) {
                zero(dk[wi][mt][nt]);
                zero(dv[wi][mt][nt]);
            }
        }
    float lse_s[QS], D_s[QS];
    for (int qt = fl::first_query_tile_for_key(k0, QS); qt < nq; qt++) {
        load_tile(qs, q_base, ld, qt * QS, QS, Tlen);
        load_tile(dos, do_base, (size_t)C, qt * QS, QS, Tlen);
        for (int i = 0; i < QS; i++) {
            lse_s[i] = qt * QS + i < Tlen ? lse_bh[qt * QS + i] : 0.0f;
            D_s[i] = qt * QS + i < Tlen ? D_bh[qt * QS + i] : 0.0f;
        }
        for (int wi = 0; wi < W; wi++)
            for (int c0 = 0; c0 < QS; c0 += SL) {   // the stage's slices
                const int j0 = k0 + wi * WR, t0 = qt * QS + c0;
                const bool skip = fl::key_rows_fully_masked(j0, t0, SL, Tlen);
                count(stats, !skip, any_live(j0, WR, t0, SL, false, true, Tlen));
                if (skip) continue;
                for (int mt = 0; mt < MT; mt++) {
                    const int jm = j0 + mma::kM * mt;   // the m-tile's first key
                    // Sᵀ = K_w·Qᵀ, dPᵀ = V_w·dOᵀ: B pairs from Q, dO stored [query][dim] (kBnk)
                    CFrag st[NT], dpt[NT];
                    score_products<T, NT>(st, dpt, kf[wi][mt], vf[wi][mt], qs, dos, c0);
                    // Pᵀ = round(exp2(Sᵀ·scale·log2e − lse·log2e)), dSᵀ = round(Pᵀ·(dPᵀ − D)); 0 where masked
                    for (int nt = 0; nt < NT; nt++)
                        for (int lane = 0; lane < kLanes; lane++)
                            for (int i = 0; i < 4; i++) {
                                const Coord c = mma::c_coord(lane, i);
                                const int col = c0 + 8 * nt + c.col;   // query within the stage
                                const bool keep = fl::causal_keep_bwd(qt * QS + col, jm + c.row, Tlen);
                                const float lse2 = lse_s[col] * fl::kLog2e;
                                const float p =
                                    round_to_t<T>(std::exp2(std::fma(st[nt].r[lane][i], scale_log2, -lse2)));
                                const float ds = round_to_t<T>(p * (dpt[nt].r[lane][i] - D_s[col]));
                                st[nt].r[lane][i] = keep ? p : 0.0f;
                                dpt[nt].r[lane][i] = keep ? ds : 0.0f;
                            }
                    // dV_w += Pᵀ·dO, dK_w += dSᵀ·Q: A from the registers, B pairs from dO, Q stored [query][dim] (kBkn)
                    for (int kk = 0; kk < NT / 2; kk++) {
                        const AFrag pa = c_to_a<T>(st, kk), dsa = c_to_a<T>(dpt, kk);
                        for (int np = 0; np < kHsNTiles / 2; np++) {
                            const BPair bo = split_pair(ldmatrix_x4(dos, X4::kBkn, c0 + 16 * kk, 16 * np));
                            const BPair bq = split_pair(ldmatrix_x4(qs, X4::kBkn, c0 + 16 * kk, 16 * np));
                            for (int t = 0; t < 2; t++) {
                                mma_16816<T>(dv[wi][mt][2 * np + t], pa, bo.b[t]);
                                mma_16816<T>(dk[wi][mt][2 * np + t], dsa, bq.b[t]);
                            }
                        }
                    }
                }
            }
    }
    // epilogue: dk = round(scale · dK), dv = round(dV), rows < T
    for (int wi = 0; wi < W; wi++)
        for (int mt = 0; mt < MT; mt++)
            for (int nt = 0; nt < kHsNTiles; nt++)
                for (int lane = 0; lane < kLanes; lane++)
                    for (int i = 0; i < 4; i++) {
                        const Coord c = mma::c_coord(lane, i);
                        const int j = k0 + wi * WR + mma::kM * mt + c.row;
                        if (j >= Tlen) continue;
                        T* row = dqkv + ((size_t)b * Tlen + j) * ld + (size_t)h * kHs + 8 * nt + c.col;
                        row[C] = T::from_float(dk[wi][mt][nt].r[lane][i] * scale);
                        row[2 * (size_t)C] = T::from_float(dv[wi][mt][nt].r[lane][i]);
                    }
}

// ---- backward: attention_backward_dq_kernel, attention_backward_dq_wide_kernel ------------------

template <typename T, class L>
void dq_block(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* D, int Tlen, int C, int NH, int bh,
              int qb, float scale, float scale_log2, TiledStats& stats) {
    constexpr int MT = L::kWarpMTiles, WR = L::kWarpRows, KT = L::kStage;
    constexpr int NT = KT / mma::kN;   // n-tiles of keys in S
    constexpr int W = fl::kBwdWarps;
    static_assert(L::kSlice == L::kStage, "the dQ kernels compute a whole key tile per warp step");
    const int b = bh / NH, h = bh % NH;
    const size_t ld = (size_t)3 * C;
    const T* q_base = qkv + (size_t)b * Tlen * ld + (size_t)h * kHs;
    const T* k_base = q_base + C;
    const T* v_base = q_base + 2 * (size_t)C;
    const T* do_base = dout + (size_t)b * Tlen * C + (size_t)h * kHs;
    const float* lse_bh = lse + (size_t)bh * Tlen;
    const float* D_bh = D + (size_t)bh * Tlen;
    const int q0 = qb * L::kBlockRows;
    const int n_kt = fl::key_tiles_for_query_block(q0, L::kBlockRows, Tlen, KT);

    Tile qs(L::kBlockRows), dos(L::kBlockRows), ks(KT), vs(KT);
    load_tile(qs, q_base, ld, q0, L::kBlockRows, Tlen);
    load_tile(dos, do_base, (size_t)C, q0, L::kBlockRows, Tlen);
    AFrag qf[W][MT][kKSteps], dof[W][MT][kKSteps];
    CFrag dq[W][MT][kHsNTiles];
    float lse2[W][MT][2][kLanes], Dr[W][MT][2][kLanes];   // per row half
    for (int wi = 0; wi < W; wi++)
        for (int mt = 0; mt < MT; mt++) {
            for (int kk = 0; kk < kKSteps; kk++) {
                qf[wi][mt][kk] = as_a(ldmatrix_x4(qs, X4::kA, wi * WR + mma::kM * mt, 16 * kk));
                dof[wi][mt][kk] = as_a(ldmatrix_x4(dos, X4::kA, wi * WR + mma::kM * mt, 16 * kk));
            }
            for (CFrag& c : dq[wi][mt])
                zero(c);
            for (int hh = 0; hh < 2; hh++)
                for (int lane = 0; lane < kLanes; lane++) {
                    const int t = q0 + wi * WR + mma::kM * mt + mma::c_coord(lane, 2 * hh).row;
                    lse2[wi][mt][hh][lane] = t < Tlen ? lse_bh[t] * fl::kLog2e : 0.0f;
                    Dr[wi][mt][hh][lane] = t < Tlen ? D_bh[t] : 0.0f;
                }
        }
    for (int kt = 0; kt < n_kt; kt++) {
        const int k0 = kt * KT;
        load_tile(ks, k_base, ld, k0, KT, Tlen);
        load_tile(vs, v_base, ld, k0, KT, Tlen);
        for (int wi = 0; wi < W; wi++) {
            const int r0 = q0 + wi * WR;
            const bool skip = fl::query_rows_fully_masked(r0, WR, k0, Tlen);
            count(stats, !skip, any_live(r0, WR, k0, KT, true, true, Tlen));
            if (skip) continue;
            for (int mt = 0; mt < MT; mt++) {
                const int rm = r0 + mma::kM * mt;   // the m-tile's first query
                // S = Q_w·Kᵀ, dP = dO_w·Vᵀ: B pairs from K, V stored [key][dim] (kBnk)
                CFrag s[NT], dp[NT];
                score_products<T, NT>(s, dp, qf[wi][mt], dof[wi][mt], ks, vs, 0);
                for (int nt = 0; nt < NT; nt++)
                    for (int lane = 0; lane < kLanes; lane++)
                        for (int i = 0; i < 4; i++) {
                            const Coord c = mma::c_coord(lane, i);
                            const int hh = i >> 1;
                            const bool keep = fl::causal_keep_bwd(rm + c.row, k0 + 8 * nt + c.col, Tlen);
                            const float p = round_to_t<T>(
                                std::exp2(std::fma(s[nt].r[lane][i], scale_log2, -lse2[wi][mt][hh][lane])));
                            const float ds = round_to_t<T>(p * (dp[nt].r[lane][i] - Dr[wi][mt][hh][lane]));
                            dp[nt].r[lane][i] = keep ? ds : 0.0f;
                        }
                // dQ_w += dS·K: A from the registers, B pairs from K stored [key][dim] (kBkn)
                for (int kk = 0; kk < NT / 2; kk++) {
                    const AFrag dsa = c_to_a<T>(dp, kk);
                    for (int np = 0; np < kHsNTiles / 2; np++) {
                        const BPair bk = split_pair(ldmatrix_x4(ks, X4::kBkn, 16 * kk, 16 * np));
                        for (int t = 0; t < 2; t++)
                            mma_16816<T>(dq[wi][mt][2 * np + t], dsa, bk.b[t]);
                    }
                }
            }
        }
    }
    for (int wi = 0; wi < W; wi++)
        for (int mt = 0; mt < MT; mt++)
            for (int nt = 0; nt < kHsNTiles; nt++)
                for (int lane = 0; lane < kLanes; lane++)
                    for (int i = 0; i < 4; i++) {
                        const Coord c = mma::c_coord(lane, i);
                        const int t = q0 + wi * WR + mma::kM * mt + c.row;
                        if (t >= Tlen) continue;
                        dqkv[((size_t)b * Tlen + t) * ld + (size_t)h * kHs + 8 * nt + c.col] =
                            T::from_float(dq[wi][mt][nt].r[lane][i] * scale);
                    }
}

// The dK/dV blocks, then the dQ blocks, of layouts LK, LQ, in the kernels' launch order (D given).
template <typename T, class LK, class LQ>
void backward_blocks(T* dqkv, const T* dout, const T* qkv, const float* lse, const float* D, int B, int Tlen, int C,
                     int NH, TiledStats* stats) {
    const float scale = 1.0f / std::sqrt((float)fl::kHeadSize);
    const float scale_log2 = scale * fl::kLog2e;
    const int BH = B * NH;
    const int nk = fl::ceil_div_int(Tlen, LK::kBlockRows), nq = fl::ceil_div_int(Tlen, LQ::kBlockRows);
#pragma omp parallel
    {
        TiledStats local;
#pragma omp for schedule(dynamic)
        for (int block = 0; block < BH * nk; block++) {
            const fl::TileIndex ti = fl::longest_first_key_block(block, BH);
            local.blocks++;
            dkdv_block<T, LK>(dqkv, dout, qkv, lse, D, Tlen, C, NH, ti.bh, ti.tile, scale, scale_log2, local);
        }
#pragma omp for schedule(dynamic)
        for (int block = 0; block < BH * nq; block++) {
            const fl::TileIndex ti = fl::longest_first_query_block(block, BH, nq);
            local.blocks++;
            dq_block<T, LQ>(dqkv, dout, qkv, lse, D, Tlen, C, NH, ti.bh, ti.tile, scale, scale_log2, local);
        }
        merge(stats, local);
    }
}

}   // namespace

template <typename T>
void attention_forward_tiled(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH, TiledStats* stats) {
    check_shape("attention_forward_tiled", B, Tlen, C, NH);
    if (B == 0 || Tlen == 0) return;
    const float scale = 1.0f / std::sqrt((float)fl::kHeadSize);   // as cpu::attention_forward
    const float scale_log2 = scale * fl::kLog2e;
    const int BH = B * NH, nq = fl::ceil_div_int(Tlen, fl::kFwdQueryRows);
#pragma omp parallel
    {
        TiledStats local;
#pragma omp for schedule(dynamic)
        for (int block = 0; block < BH * nq; block++) {
            const fl::TileIndex ti = fl::longest_first_query_block(block, BH, nq);
            local.blocks++;
            forward_block(out, lse, qkv, Tlen, C, NH, ti.bh, ti.tile, scale, scale_log2, local);
        }
        merge(stats, local);
    }
}

template <typename T>
void attention_backward_tiled(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen,
                              int C, int NH, TiledStats* stats, fl::BwdKernels kernels) {
    check_shape("attention_backward_tiled", B, Tlen, C, NH);
    if (B == 0 || Tlen == 0) return;
    const int BH = B * NH;
    // D (B, NH, T): attention_backward_d_kernel
    std::vector<float> D((size_t)BH * Tlen);
#pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        const int b = bh / NH, h = bh % NH;
        for (int t = 0; t < Tlen; t++) {
            const size_t o = ((size_t)b * Tlen + t) * C + (size_t)h * kHs;
            D[(size_t)bh * Tlen + t] = d_row(dout + o, out + o);
        }
    }
    if (kernels == fl::BwdKernels::kWide)
        backward_blocks<T, fl::BwdWideDkdvLayout, fl::BwdWideDqLayout>(dqkv, dout, qkv, lse, D.data(), B, Tlen, C, NH,
                                                                       stats);
    else
        backward_blocks<T, fl::BwdDefaultLayout, fl::BwdDefaultLayout>(dqkv, dout, qkv, lse, D.data(), B, Tlen, C, NH,
                                                                       stats);
}

template void attention_forward_tiled<bf16>(bf16*, float*, const bf16*, int, int, int, int, TiledStats*);
template void attention_forward_tiled<fp16>(fp16*, float*, const fp16*, int, int, int, int, TiledStats*);
template void attention_backward_tiled<bf16>(bf16*, const bf16*, const bf16*, const bf16*, const float*, int, int, int,
                                             int, TiledStats*, fl::BwdKernels);
template void attention_backward_tiled<fp16>(fp16*, const fp16*, const fp16*, const fp16*, const float*, int, int, int,
                                             int, TiledStats*, fl::BwdKernels);

}   // namespace train_gpt::cpu
