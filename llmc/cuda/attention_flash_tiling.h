// cuda/attention_flash_tiling.h — the tiling of the flash attention, shared by the CUDA kernels
// (cuda/attention_flash.cuh) and their host twin (tests/twins/attention_tiled.cpp): tile sizes, the
// block schedule (longest tiles first), which key tiles a query block visits, the causal mask,
// and which (warp, tile) pairs are skipped as fully masked. Host and device code (TG_HD); g++
// compiles it too. tests/test_attention_tiled.cpp checks the schedule and the skipping rules.
//
// Indices: t (query) and j (key) are positions in the sequence, 0 … T−1. The causal mask keeps
// (t, j) iff j ≤ t. Query rows past T (the tail of the last tile) are computed on zero-filled
// inputs and never stored; the backward also masks them (a padded query row must not add to a
// key's gradient).
#pragma once

#include "cuda/mma_fragments.h"   // Coord, kChunkElems
#include "precision/dtypes.h"     // TG_HD

namespace train_gpt::flash {

// The one head size the kernels are built for (GPT-2's at every model size).
constexpr int kHeadSize = 64;
constexpr int kMmaRows = 16;   // rows of one mma m-tile (mma_fragments.h: kM)

// ---- forward ---------------------------------------------------------------------------------
// A block of kFwdWarps warps owns kFwdQueryRows query rows; warp w owns rows
// 16·kFwdWarpMTiles·w … of the block, as kFwdWarpMTiles m-tiles of 16 (each K/V fragment loaded
// from shared memory feeds kFwdWarpMTiles mma's). Keys arrive in tiles of kFwdKeyTile.
constexpr int kFwdWarps = 4;
constexpr int kFwdWarpMTiles = 2;
constexpr int kFwdWarpRows = kMmaRows * kFwdWarpMTiles;   // 32
constexpr int kFwdQueryRows = kFwdWarps * kFwdWarpRows;   // 128
constexpr int kFwdKeyTile = 64;
// 64 keys: a warp's registers (2 m-tiles: S 64, O 64 and the resident Q 32 per lane) take 251 of
// 255. 128-key tiles were tried (2026-12-03, ptxas of nvcc 13.0 for sm_90a): a 16 × 128 S per
// m-tile spills 364 bytes per thread; 128-key shared stages computed as two 64-key tiles, with Q
// read from shared memory at each k-step, still spill 12. A wider tile needs another warp layout
// (one m-tile per warp and 8 warps, or the softmax over S in two halves).

// ---- backward --------------------------------------------------------------------------------
// Both backward kernels: kBwdWarps warps of one 16-row m-tile each, so a block owns
// kBwdBlockRows rows (keys in the dK/dV kernel, queries in the dQ kernel) and walks the other
// side in tiles of kBwdTile.
constexpr int kBwdWarps = 4;
constexpr int kBwdWarpRows = kMmaRows;                    // 16
constexpr int kBwdBlockRows = kBwdWarps * kBwdWarpRows;   // 64
constexpr int kBwdTile = 64;

// The wide backward (--flash-backward wide; cuda/attention_flash_bwd_wide.cuh, experimental): each
// warp owns two m-tiles (32 rows), so every B fragment read from shared memory feeds two mma's.
// A layout names the warp's m-tiles, the rows of the walked side per shared stage, and the slice
// of a stage one warp computes at a time (its S and dP registers: 16·kWarpMTiles × kSlice FP32).
// Both wide layouts walk the other side in the same 16-row k-steps, in the same order, as the
// default kernels, so they add the same products in the same order: the same values.
// ptxas (nvcc 13.0, sm_90a; 2026-12-03), 0 spills: dQ 251 (bf16) / 249 (fp16) registers, dK/dV 255 / 255.
template <int WarpMTiles, int Stage, int Slice>
struct BwdLayout {
    static constexpr int kWarpMTiles = WarpMTiles;
    static constexpr int kWarpRows = kMmaRows * WarpMTiles;
    static constexpr int kBlockRows = kBwdWarps * kWarpRows;
    static constexpr int kStage = Stage;
    static constexpr int kSlice = Slice;
    static_assert(Stage % Slice == 0 && Slice % 16 == 0, "a stage is walked in whole slices of mma k-steps");
};
// The default kernels' layout (attention_flash.cuh: 16 rows per warp, 64 × 64 tiles), which the
// host twin also runs.
using BwdDefaultLayout = BwdLayout<1, kBwdTile, kBwdTile>;
static_assert(BwdDefaultLayout::kWarpRows == kBwdWarpRows && BwdDefaultLayout::kBlockRows == kBwdBlockRows);
// dK/dV wide: 32 keys per warp (K resident as A fragments, V read from shared memory: resident
// both would spill), query stages of 64 computed in slices of 16 (S, dPᵀ: 32 × 16 per warp).
// Shared-memory registers loaded per mma: Sᵀ 1, dPᵀ 3, dV 1, dK 1 (the default: 2 each), a
// quarter fewer.
using BwdWideDkdvLayout = BwdLayout<2, 64, 16>;
// dQ wide: 32 queries per warp (Q and dO resident), key tiles of 32 (S, dP: 32 × 32 per warp).
// Shared-memory registers loaded per mma: 1 for each of S, dP, dQ (the default: 2), half.
using BwdWideDqLayout = BwdLayout<2, 32, 32>;
// Which backward kernels run (--flash-backward).
enum class BwdKernels { kDefault, kWide };

static_assert(kFwdKeyTile % 16 == 0 && kBwdTile % 16 == 0,
              "tiles are walked in mma k-steps of 16 and ldmatrix.x4 pairs of 8-wide n-tiles");
static_assert(kHeadSize % 16 == 0, "the head dimension is an mma k-step multiple (QKᵀ) and n-tile-pair multiple (PV)");

// log2(e) as FP32: scores are exponentiated as exp2(s·scale·log2(e) − m) = exp(s·scale − m·ln 2);
// the launchers pass scale_log2 = scale · kLog2e (one FP32 product), scale = 1/√hs as the CPU twin.
constexpr float kLog2e = 1.44269504088896340736f;

TG_HD constexpr int ceil_div_int(int a, int b) { return (a + b - 1) / b; }

// ---- tile loads ----------------------------------------------------------------------------------
// A tile of `rows` rows × kHeadSize features moves global → shared as 16-byte chunks (8 elements):
// copy number idx (0 … rows·kTileChunksPerRow − 1, handed out to threads as idx = thread + i ·
// threads) is chunk idx % kTileChunksPerRow of row idx / kTileChunksPerRow, so 8 consecutive
// threads copy one 128-byte row (coalesced reads; conflict-free swizzled writes).
constexpr int kTileChunksPerRow = kHeadSize / mma::kChunkElems;   // 8
TG_HD constexpr mma::Coord tile_chunk(int idx) {
    return {idx / kTileChunksPerRow, (idx % kTileChunksPerRow) * mma::kChunkElems};
}

// ---- the causal mask -------------------------------------------------------------------------
TG_HD constexpr bool causal_keep(int t, int j) { return j <= t; }
// Backward: also drop query rows past the sequence (tail padding).
TG_HD constexpr bool causal_keep_bwd(int t, int j, int T) { return j <= t && t < T; }

// ---- schedule: longest tiles first -------------------------------------------------------------
// bh = b·NH + h; `tile` is a query block (forward, dQ) or a key block (dK/dV).
struct TileIndex {
    int bh, tile;
};
// Forward and dQ: the cost of query block qb grows with qb (it visits keys 0 … its last row), so
// blocks 0 … BH−1 are the last query block of every (b, h), the next BH the one before, and so on.
TG_HD constexpr TileIndex longest_first_query_block(int block, int BH, int n_query_blocks) {
    return {block % BH, n_query_blocks - 1 - block / BH};
}
// dK/dV: key block kb visits query tiles from the diagonal to the end, so its cost falls with kb:
// key block 0 of every (b, h) first.
TG_HD constexpr TileIndex longest_first_key_block(int block, int BH) { return {block % BH, block / BH}; }

// ---- which tiles a block visits -------------------------------------------------------------------
// Key tiles of size key_tile that query rows q0 … q0+rows−1 (clipped to T) can see: keys 0 … the
// last row, so tiles 0 … key_tiles−1. Requires q0 < T.
TG_HD constexpr int key_tiles_for_query_block(int q0, int rows, int T, int key_tile) {
    return ((q0 + rows < T ? q0 + rows : T) - 1) / key_tile + 1;
}
// The first query tile (of size query_tile) holding a query that can see key k0: the tile of k0.
TG_HD constexpr int first_query_tile_for_key(int k0, int query_tile) { return k0 / query_tile; }

// ---- skipping and masking per warp -----------------------------------------------------------------
// A warp's query rows r0 … r0+rows−1 against keys k0 … (forward, dQ): fully masked iff no row
// below T reaches k0 (rows past the sequence are never stored, and the backward masks them).
// It needs the mask iff some key of the tile exceeds the first row.
TG_HD constexpr int min_int(int a, int b) { return a < b ? a : b; }
TG_HD constexpr bool query_rows_fully_masked(int r0, int rows, int k0, int T) {
    return r0 >= T || min_int(r0 + rows, T) - 1 < k0;
}
TG_HD constexpr bool query_rows_need_mask(int r0, int k0, int keys) { return k0 + keys - 1 > r0; }
// dK/dV: a warp's keys j0 … j0+keys−1 against queries t0 … t0+queries−1: fully masked iff no query
// below T reaches j0 (a key past the sequence is reached by none).
TG_HD constexpr bool key_rows_fully_masked(int j0, int t0, int queries, int T) {
    return t0 >= T || min_int(t0 + queries, T) - 1 < j0;
}

// ---- the E5M2 cast of the backward's output (dqkv: the dY of qkv) ----------------------------------
// A backward block's output tile is kBwdBlockRows tokens × 64 features of one head (dq in the dQ
// kernel; dk, then dv in the dK/dV kernel). With the cast fused in, the epilogue writes each cast
// byte into q (row-major, beside dqkv) and into a shared tile, then the block writes the tile's
// transpose into qt (3C, B·T): for each feature, its tokens as 16-byte chunks.
namespace grad_tile {
constexpr int kRows = 64;                         // tokens of a block (kBwdBlockRows)
constexpr int kCols = 64;                         // features (kHeadSize)
constexpr int kPitch = kCols + 4;                 // bytes per shared row: a quad's rows fall in distinct banks
constexpr int kChunk = 16;                        // tokens per transposed store
constexpr int kChunks = kRows / kChunk * kCols;   // 256 stores per tile
TG_HD constexpr int smem_offset(int row, int col) { return row * kPitch + col; }
// Store chunk i: feature col, tokens row … row + kChunk − 1 of the tile. Consecutive i walk the
// features, so a warp's 32 gathers of one byte read 32 consecutive bytes of one shared row.
TG_HD constexpr mma::Coord chunk(int i) { return {(i / kCols) * kChunk, i % kCols}; }
}   // namespace grad_tile

}   // namespace train_gpt::flash
