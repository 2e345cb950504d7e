// test_mma_fragments.cpp — the fragment ownership maps of cuda/mma_fragments.h (which the flash
// attention kernel and its host twin index through) against the layouts the PTX ISA documents,
// and the shared-memory swizzle against the properties the kernel relies on.
//
// The PTX ISA's formulas are spelled out here as the ISA writes them (element index i, groupID,
// threadID_in_group, the "i < 2 || 4 ≤ i < 6" conditions), independently of the header's
// (lane, register, half) spelling. ldmatrix is emulated from its documented behaviour (lanes 8j …
// 8j+7 give the row addresses of matrix j; lane L receives row L/4, elements 2(L%4), 2(L%4)+1, or
// with .trans the same column-major) on a tile stored through the swizzle, so the tests check the
// whole path the kernel uses: logical element → swizzled shared offset → lane address →
// fragment register → the mma's (row, col).
#include "cuda/attention_flash_tiling.h"
#include "cuda/mma_fragments.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

using namespace train_gpt;
using mma::Coord;

namespace {

// ---- the PTX ISA's formulas (mma.m16n8k16, .f16 / .bf16 multiplicands, .f32 accumulators) ----

int ptx_group_id(int laneid) { return laneid >> 2; }
int ptx_thread_id_in_group(int laneid) { return laneid % 4; }

// A: a0 … a7
Coord ptx_a(int laneid, int i) {
    const int g = ptx_group_id(laneid), t = ptx_thread_id_in_group(laneid);
    const int row = ((0 <= i && i < 2) || (4 <= i && i < 6)) ? g : g + 8;
    const int col = i < 4 ? (t * 2) + (i & 0x1) : (t * 2) + (i & 0x1) + 8;
    return {row, col};
}
// B: b0 … b3 (row = k, col = n)
Coord ptx_b(int laneid, int i) {
    const int g = ptx_group_id(laneid), t = ptx_thread_id_in_group(laneid);
    const int row = i < 2 ? (t * 2) + (i & 0x1) : (t * 2) + (i & 0x1) + 8;
    return {row, g};
}
// C / D: c0 … c3
Coord ptx_c(int laneid, int i) {
    const int g = ptx_group_id(laneid), t = ptx_thread_id_in_group(laneid);
    return {i < 2 ? g : g + 8, (t * 2) + (i & 0x1)};
}

bool same(Coord a, Coord b) { return a.row == b.row && a.col == b.col; }

}   // namespace

TEST(MmaFragments, AMatchesThePtxIsaLayout) {
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < mma::kARegs; r++)
            for (int e = 0; e < mma::kHalves; e++)
                EXPECT_TRUE(same(mma::a_coord(lane, r, e), ptx_a(lane, 2 * r + e)))
                    << "lane " << lane << " a" << 2 * r + e;
}

TEST(MmaFragments, BMatchesThePtxIsaLayout) {
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < mma::kBRegs; r++)
            for (int e = 0; e < mma::kHalves; e++)
                EXPECT_TRUE(same(mma::b_coord(lane, r, e), ptx_b(lane, 2 * r + e)))
                    << "lane " << lane << " b" << 2 * r + e;
}

TEST(MmaFragments, CMatchesThePtxIsaLayout) {
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < mma::kCRegs; r++)
            EXPECT_TRUE(same(mma::c_coord(lane, r), ptx_c(lane, r))) << "lane " << lane << " c" << r;
}

// Every element of each fragment is held by exactly one (lane, register, half).
TEST(MmaFragments, EachFragmentCoversItsMatrixExactlyOnce) {
    std::vector<int> a(16 * 16, 0), b(16 * 8, 0), c(16 * 8, 0);
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < mma::kARegs; r++)
            for (int e = 0; e < 2; e++) {
                const Coord x = mma::a_coord(lane, r, e);
                ASSERT_TRUE(x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 16);
                a[x.row * 16 + x.col]++;
            }
        for (int r = 0; r < mma::kBRegs; r++)
            for (int e = 0; e < 2; e++) {
                const Coord x = mma::b_coord(lane, r, e);
                ASSERT_TRUE(x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 8);
                b[x.row * 8 + x.col]++;
            }
        for (int r = 0; r < mma::kCRegs; r++) {
            const Coord x = mma::c_coord(lane, r);
            ASSERT_TRUE(x.row >= 0 && x.row < 16 && x.col >= 0 && x.col < 8);
            c[x.row * 8 + x.col]++;
        }
    }
    for (int n : a)
        EXPECT_EQ(n, 1);
    for (int n : b)
        EXPECT_EQ(n, 1);
    for (int n : c)
        EXPECT_EQ(n, 1);
}

// A row of C (or of A) lives in the 4 lanes of one quad: the softmax row max / sum reduce with
// shuffles xor 1 and xor 2 only.
TEST(MmaFragments, ARowOfCLivesInOneQuad) {
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < mma::kCRegs; r++) {
            const int row = mma::c_coord(lane, r).row;
            for (int other = 0; other < 32; other++)
                for (int r2 = 0; r2 < mma::kCRegs; r2++)
                    if (mma::c_coord(other, r2).row == row) {
                        EXPECT_EQ(other >> 2, lane >> 2);
                    }
        }
}

// The C → A register reuse: the A fragment of k-step s of P·V is C n-tiles 2s, 2s+1 of S, element
// for element, in the same lane.
TEST(MmaFragments, CFragmentsOfTwoNTilesAreTheAFragmentOfOneKStep) {
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < mma::kARegs; r++)
            for (int e = 0; e < 2; e++) {
                const Coord c = mma::c_coord(lane, mma::c_to_a_creg(r, e));
                const Coord from_c = {c.row, 8 * mma::c_to_a_ntile(r) + c.col};
                EXPECT_TRUE(same(mma::a_coord(lane, r, e), from_c)) << "lane " << lane << " reg " << r << " half " << e;
            }
}

// ---- ldmatrix ---------------------------------------------------------------------------------

namespace {

constexpr int kRowElems = flash::kHeadSize;   // the kernel's tiles: 64 16-bit elements per row

// A tile of `rows` × kRowElems, element (r, c) = the id r·kRowElems + c, stored swizzled.
std::vector<int> swizzled_tile(int rows) {
    std::vector<int> smem((size_t)rows * kRowElems, -1);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < kRowElems; c++)
            smem[mma::swizzled_offset(r, c, kRowElems)] = r * kRowElems + c;
    return smem;
}

// ldmatrix.x4 as the PTX ISA describes it, on element offsets: addr[L] is lane L's row address
// (an element offset of 8 contiguous elements); out[L][j][e] the element ids lane L receives.
void emulate_ldmatrix_x4(int out[32][4][2], const std::vector<int>& smem, const int addr[32], bool trans) {
    for (int lane = 0; lane < 32; lane++)
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 2; e++) {
                // the documented per-matrix layout: row L/4, elements 2(L%4)+e (or column-major)
                const int g = lane >> 2, t = lane % 4;
                const int stored_row = trans ? 2 * t + e : g;
                const int stored_col = trans ? g : 2 * t + e;
                out[lane][j][e] = smem[addr[8 * j + stored_row] + stored_col];
            }
}

// The lane addresses the kernel computes for a 16×16 region at (row0, col0) of a swizzled tile.
void kernel_addresses(int addr[32], mma::X4 x, int row0, int col0) {
    for (int lane = 0; lane < 32; lane++) {
        const Coord a = mma::x4_lane_address(x, lane);
        addr[lane] = mma::swizzled_offset(row0 + a.row, col0 + a.col, kRowElems);
    }
}

}   // namespace

// One 8×8 matrix: the per-lane layout the PTX ISA documents for ldmatrix .m8n8 .b16 ("each thread
// in a warp loads fragments of a row, with thread 0 receiving the first fragment …; a group of four
// threads loads an entire row"; .trans: "the matrix is loaded in column-major format").
TEST(MmaFragments, LdmatrixElementMapMatchesThePtxIsa) {
    for (int lane = 0; lane < 32; lane++)
        for (int e = 0; e < 2; e++) {
            const int row = lane / 4, fragment = lane % 4;   // which row, and which 4-byte fragment of it
            EXPECT_TRUE(same(mma::ldmatrix_coord(lane, e, false), Coord{row, 2 * fragment + e}));
            EXPECT_TRUE(same(mma::ldmatrix_coord(lane, e, true), Coord{2 * fragment + e, row}));
        }
}

// Each lane's address points at 16 contiguous, 16-byte aligned bytes holding the 8 logical
// columns it stands for (the swizzle moves whole chunks).
TEST(MmaFragments, LdmatrixRowAddressesAreAlignedWholeChunks) {
    const std::vector<int> smem = swizzled_tile(128);
    for (mma::X4 x : {mma::X4::kA, mma::X4::kBnk, mma::X4::kBkn})
        for (int row0 = 0; row0 < 128; row0 += 16)
            for (int col0 = 0; col0 < kRowElems; col0 += 16) {
                int addr[32];
                kernel_addresses(addr, x, row0, col0);
                for (int lane = 0; lane < 32; lane++) {
                    EXPECT_EQ(addr[lane] % mma::kChunkElems, 0);
                    const Coord a = mma::x4_lane_address(x, lane);
                    for (int c = 0; c < 8; c++)
                        EXPECT_EQ(smem[addr[lane] + c], (row0 + a.row) * kRowElems + col0 + a.col + c);
                }
            }
}

// kA: the x4 gives exactly the mma A fragment of the 16×16 region (rows = m, columns = k).
TEST(MmaFragments, LdmatrixX4LoadsTheAFragment) {
    const std::vector<int> smem = swizzled_tile(128);
    for (int row0 = 0; row0 < 128; row0 += 16)
        for (int col0 = 0; col0 < kRowElems; col0 += 16) {
            int addr[32], got[32][4][2];
            kernel_addresses(addr, mma::X4::kA, row0, col0);
            emulate_ldmatrix_x4(got, smem, addr, mma::x4_trans(mma::X4::kA));
            for (int lane = 0; lane < 32; lane++)
                for (int r = 0; r < 4; r++)
                    for (int e = 0; e < 2; e++) {
                        const Coord a = mma::a_coord(lane, r, e);
                        EXPECT_EQ(got[lane][r][e], (row0 + a.row) * kRowElems + col0 + a.col);
                    }
        }
}

// kBnk: from a tile stored [n][k] (K for S = Q·Kᵀ), register j is register j%2 of the B fragment
// of n-tile j/2: element (k, n) of B = stored (n, k).
TEST(MmaFragments, LdmatrixX4LoadsTwoBFragmentsFromNMajorStorage) {
    const std::vector<int> smem = swizzled_tile(128);
    for (int row0 = 0; row0 < 128; row0 += 16)
        for (int col0 = 0; col0 < kRowElems; col0 += 16) {
            int addr[32], got[32][4][2];
            kernel_addresses(addr, mma::X4::kBnk, row0, col0);
            emulate_ldmatrix_x4(got, smem, addr, mma::x4_trans(mma::X4::kBnk));
            for (int lane = 0; lane < 32; lane++)
                for (int j = 0; j < 4; j++)
                    for (int e = 0; e < 2; e++) {
                        const Coord b = mma::b_coord(lane, mma::x4_breg(j), e);   // (k, n)
                        const int n = 8 * mma::x4_ntile(j) + b.col, k = b.row;
                        EXPECT_EQ(got[lane][j][e], (row0 + n) * kRowElems + col0 + k);
                    }
        }
}

// kBkn: from a tile stored [k][n] (V for P·V), with .trans: element (k, n) of B = stored (k, n).
TEST(MmaFragments, LdmatrixX4TransLoadsTwoBFragmentsFromKMajorStorage) {
    const std::vector<int> smem = swizzled_tile(128);
    for (int row0 = 0; row0 < 128; row0 += 16)
        for (int col0 = 0; col0 < kRowElems; col0 += 16) {
            int addr[32], got[32][4][2];
            kernel_addresses(addr, mma::X4::kBkn, row0, col0);
            emulate_ldmatrix_x4(got, smem, addr, mma::x4_trans(mma::X4::kBkn));
            for (int lane = 0; lane < 32; lane++)
                for (int j = 0; j < 4; j++)
                    for (int e = 0; e < 2; e++) {
                        const Coord b = mma::b_coord(lane, mma::x4_breg(j), e);
                        const int n = 8 * mma::x4_ntile(j) + b.col, k = b.row;
                        EXPECT_EQ(got[lane][j][e], (row0 + k) * kRowElems + col0 + n);
                    }
        }
}

// ---- the swizzle --------------------------------------------------------------------------------

TEST(MmaFragments, SwizzleIsABijectionWithinEachRow) {
    for (int row_elems : {64, 128}) {
        const int rows = 128;
        std::vector<int> hits((size_t)rows * row_elems, 0);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < row_elems; c++) {
                const int o = mma::swizzled_offset(r, c, row_elems);
                ASSERT_GE(o, r * row_elems);
                ASSERT_LT(o, (r + 1) * row_elems);
                hits[o]++;
                // chunks move whole: the 8 elements of a chunk stay contiguous and in order
                EXPECT_EQ(o % 8, c % 8);
            }
        for (int h : hits)
            EXPECT_EQ(h, 1);
    }
}

namespace {
// The 4-bank group (of 8 per 128 bytes) of a 16-byte chunk at element offset o (16-bit elements).
int bank_group(int o) { return (o * 2 / 16) % 8; }
}   // namespace

// Every ldmatrix phase the kernel issues (8 row addresses of one matrix) hits 8 different bank
// groups: the 128 bytes come in one shared-memory wavefront, for all three arrangements and every
// region the kernel reads (row origins multiples of 16 in tiles of up to 128 rows).
TEST(MmaFragments, LdmatrixPhasesAreBankConflictFree) {
    for (mma::X4 x : {mma::X4::kA, mma::X4::kBnk, mma::X4::kBkn})
        for (int row0 = 0; row0 < 128; row0 += 16)
            for (int col0 = 0; col0 < kRowElems; col0 += 16) {
                int addr[32];
                kernel_addresses(addr, x, row0, col0);
                for (int j = 0; j < 4; j++) {
                    std::set<int> groups;
                    for (int l = 8 * j; l < 8 * j + 8; l++)
                        groups.insert(bank_group(addr[l]));
                    EXPECT_EQ(groups.size(), 8u)
                        << "arrangement " << int(x) << " region (" << row0 << ", " << col0 << ") matrix " << j;
                }
            }
}

// Without the swizzle the same phases would be 8-way conflicts (what the swizzle is for).
TEST(MmaFragments, UnswizzledLdmatrixPhasesWouldConflict) {
    for (int lane0 = 0; lane0 < 32; lane0 += 8) {
        std::set<int> groups;
        for (int l = lane0; l < lane0 + 8; l++) {
            const Coord a = mma::x4_lane_address(mma::X4::kA, l);
            groups.insert(bank_group(a.row * kRowElems + a.col));
        }
        EXPECT_EQ(groups.size(), 1u);
    }
}

// The tile loads' 16-byte shared writes (tile_chunk): each group of 8 consecutive copies (one
// phase of a warp's 128-bit stores) writes 8 different bank groups, and the copies of a tile
// cover every chunk of it exactly once.
TEST(MmaFragments, TileLoadWritesAreBankConflictFreeAndCoverTheTile) {
    const int rows = flash::kFwdQueryRows;
    std::vector<int> hits((size_t)rows * flash::kTileChunksPerRow, 0);
    for (int idx0 = 0; idx0 < rows * flash::kTileChunksPerRow; idx0 += 8) {
        std::set<int> groups;
        for (int idx = idx0; idx < idx0 + 8; idx++) {
            const Coord c = flash::tile_chunk(idx);
            ASSERT_LT(c.row, rows);
            const int o = mma::swizzled_offset(c.row, c.col, kRowElems);
            groups.insert(bank_group(o));
            hits[o / 8]++;
        }
        EXPECT_EQ(groups.size(), 8u);
    }
    for (int h : hits)
        EXPECT_EQ(h, 1);
}

// The E5M2 cast of the flash backward's output tile (attention_flash_tiling.h, grad_tile): the
// transposed stores cover the 64 × 64 tile once; a warp's gathers of one byte read 32 consecutive
// bytes of one shared row (no bank conflict); the epilogue's pair writes (the C-fragment layout:
// lane → row groupID (+8), columns 2·(lane % 4), 2·(lane % 4) + 1 of each 8-wide n-tile) put a
// warp's eight rows in distinct banks thanks to the 68-byte pitch.
TEST(GradTile, TransposedChunksCoverTheTileOnceWithoutBankConflicts) {
    namespace gt = train_gpt::flash::grad_tile;
    std::vector<int> seen(gt::kRows * gt::kCols, 0);
    for (int i = 0; i < gt::kChunks; i++) {
        const auto at = gt::chunk(i);
        ASSERT_EQ(at.row % gt::kChunk, 0);
        for (int k = 0; k < gt::kChunk; k++)
            seen[(at.row + k) * gt::kCols + at.col]++;
    }
    for (int count : seen)
        EXPECT_EQ(count, 1);
    for (int warp = 0; warp < gt::kChunks / 32; warp++) {
        for (int k = 0; k < gt::kChunk; k++) {
            std::set<int> words;
            std::map<int, std::set<int>> words_of_bank;
            for (int lane = 0; lane < 32; lane++) {
                const auto at = gt::chunk(warp * 32 + lane);
                const int byte = gt::smem_offset(at.row + k, at.col);
                words_of_bank[(byte / 4) % 32].insert(byte / 4);
            }
            for (const auto& [bank, w] : words_of_bank)
                EXPECT_EQ(w.size(), 1u) << "warp " << warp << " byte " << k;
        }
    }
    // the pair writes of one (n-tile, half): lane's row = lane / 4 (+8 for the second half),
    // column = 8·nt + 2·(lane % 4): two bytes, one 2-byte word-half each
    for (int nt = 0; nt < gt::kCols / 8; nt++) {
        for (int half = 0; half < 2; half++) {
            std::map<int, std::set<int>> words_of_bank;
            for (int lane = 0; lane < 32; lane++) {
                const int row = lane / 4 + 8 * half, col = 8 * nt + 2 * (lane % 4);
                for (int b = 0; b < 2; b++) {
                    const int byte = gt::smem_offset(row, col + b);
                    words_of_bank[(byte / 4) % 32].insert(byte / 4);
                }
            }
            for (const auto& [bank, w] : words_of_bank)
                EXPECT_EQ(w.size(), 1u) << "n-tile " << nt << " half " << half;
        }
    }
}
