// cuda/mma_fragments.h — which lane holds which matrix element: the register layouts of the
// tensor-core instructions the flash attention uses (mma.sync.m16n8k16 with bf16/f16 operands and
// FP32 accumulators, ldmatrix.m8n8.x4 with and without .trans), and the XOR swizzle of its
// shared-memory tiles.
//
// Every index the kernel (cuda/attention_flash.cuh) computes for a fragment element or an
// ldmatrix address comes from a function here, and so does every index of its host twin
// (tests/twins/attention_tiled.cpp). tests/test_mma_fragments.cpp checks these functions on the CPU
// against the layouts the PTX ISA documents (section "Matrix Fragments for mma.m16n8k16 with
// floating point type" and "ldmatrix"), so testing them tests the kernel's index arithmetic.
// Host and device code (TG_HD); nothing CUDA-only, so g++ compiles it too.
//
// ---- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32  D = A·B + C ---------------
// A is 16×16 (m × k), B is 16×8 (k × n), C and D are 16×8 FP32. With groupID g = lane >> 2 and
// threadID_in_group t = lane % 4, the PTX ISA lists each lane's elements "low to high":
//   A: a0..a7 in four .b32 registers, two 16-bit elements each (a_{2r} in bits 0-15 of register r,
//      a_{2r+1} in bits 16-31);  row = g for a0, a1, a4, a5 and g + 8 for the others;
//      col = 2t + (i & 1), plus 8 for i ≥ 4.
//   B: b0..b3 in two .b32 registers;  row (k) = 2t + (i & 1), plus 8 for i ≥ 2;  col (n) = g.
//   C, D: c0..c3, one FP32 per register;  row = g for c0, c1 and g + 8 for c2, c3;  col = 2t + (i & 1).
// Below, an element is named by (lane, register r, half e), i = 2r + e for A and B, i = r for C.
//
// ---- ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 ----------------------------------------------
// Loads four 8×8 matrices of 16-bit elements; matrix j goes to destination register j. Lanes
// 8j … 8j+7 supply the shared addresses of rows 0 … 7 of matrix j (16 contiguous bytes each).
// Without .trans, lane L's register j holds row L/4, columns 2(L%4) and 2(L%4)+1 of matrix j
// (low half first) — the row of the address lane 8j + L/4 supplied. With .trans the matrix is
// read column-major: lane L holds column L/4, rows 2(L%4) and 2(L%4)+1 (as stored).
//
// The kernel uses .x4 in three arrangements over a 16×16 region of a row-major shared tile:
//   kA    A fragment of rows (m) × cols (k), no .trans:       matrix j = block (j%2, j/2)
//   kBnk  two B fragments from a tile stored [n][k], no .trans: matrix j = block (j/2, j%2)
//   kBkn  two B fragments from a tile stored [k][n], .trans:    matrix j = block (j%2, j/2)
// (block (br, bc) = rows 8br … 8br+7, columns 8bc … 8bc+7 of the region.) For kBnk and kBkn
// register j is register j%2 of the B fragment of n-tile j/2 (columns 8(j/2) … of n).
//
// ---- shared-memory swizzle -------------------------------------------------------------------------
// Tiles are row-major, 64 16-bit elements (128 bytes = all 32 banks) per row. An ldmatrix phase
// reads one 16-byte chunk from each of 8 consecutive rows; unswizzled, those 8 chunks sit in the
// same 4 banks (rows are 128 bytes apart): an 8-way conflict. XOR swizzle: chunk c of row r is
// stored at chunk c ^ (r % 8). For 8 consecutive rows r % 8 takes all 8 values, so the 8 chunks
// land in 8 different 4-bank groups — conflict-free, with no padding (the tile stays 128-byte
// rows, cp.async's 16-byte writes stay aligned, and a warp's 32 chunk writes, 4 rows × 8 chunks,
// are conflict-free as well: 8 consecutive threads write one row's 8 chunks).
#pragma once

#include "precision/dtypes.h"   // TG_HD

namespace train_gpt::mma {

struct Coord {
    int row, col;
};

constexpr int kWarpSize = 32;
constexpr int kM = 16, kN = 8, kK = 16;             // the mma shape
constexpr int kARegs = 4, kBRegs = 2, kCRegs = 4;   // .b32 registers per lane
constexpr int kHalves = 2;                          // 16-bit elements per .b32 register (half e at bits 16e … 16e+15)

TG_HD constexpr int group_id(int lane) { return lane >> 2; }
TG_HD constexpr int thread_in_group(int lane) { return lane & 3; }

// A (16 m × 16 k): element a_{2r+e} of lane `lane`.
TG_HD constexpr Coord a_coord(int lane, int r, int e) {
    return {group_id(lane) + 8 * (r & 1), 2 * thread_in_group(lane) + e + 8 * (r >> 1)};
}
// B (16 k × 8 n): element b_{2r+e}; row = k, col = n.
TG_HD constexpr Coord b_coord(int lane, int r, int e) {
    return {2 * thread_in_group(lane) + e + 8 * r, group_id(lane)};
}
// C / D (16 m × 8 n, FP32): element c_r.
TG_HD constexpr Coord c_coord(int lane, int r) {
    return {group_id(lane) + 8 * (r >> 1), 2 * thread_in_group(lane) + (r & 1)};
}

// A product's C fragments reused as the next product's A fragment (the flash-attention trick: S
// = Q·Kᵀ comes out in C layout, P = softmax(S) goes into P·V as A): the A fragment of k-step s
// (columns 16s … 16s+15 of C) takes register r, half e from C n-tile 2s + c_to_a_ntile(r),
// register c_to_a_creg(r, e). Both hold the same (row, col): no shuffle is needed.
TG_HD constexpr int c_to_a_ntile(int r) { return r >> 1; }
TG_HD constexpr int c_to_a_creg(int r, int e) { return 2 * (r & 1) + e; }

// ---- ldmatrix ----------------------------------------------------------------------------------

// One 8×8 matrix: where half e of lane `lane`'s register comes from, as (row, col) of the matrix
// as stored (row = which of the 8 row addresses, col = 16-bit element within the 16 bytes).
TG_HD constexpr Coord ldmatrix_coord(int lane, int e, bool trans) {
    return trans ? Coord{2 * thread_in_group(lane) + e, group_id(lane)}
                 : Coord{group_id(lane), 2 * thread_in_group(lane) + e};
}

enum class X4 { kA, kBnk, kBkn };

TG_HD constexpr bool x4_trans(X4 x) { return x == X4::kBkn; }
// The 8×8 block of the 16×16 region that matrix j (register j) covers, in units of 8.
TG_HD constexpr Coord x4_block(X4 x, int j) { return x == X4::kBnk ? Coord{j >> 1, j & 1} : Coord{j & 1, j >> 1}; }
// The region element (row, col) at which lane `lane`'s row address points: row lane%8 of matrix lane/8.
TG_HD constexpr Coord x4_lane_address(X4 x, int lane) {
    return {8 * x4_block(x, lane >> 3).row + (lane & 7), 8 * x4_block(x, lane >> 3).col};
}
// For kBnk / kBkn: register j of the x4 is register x4_breg(j) of the B fragment of n-tile x4_ntile(j).
TG_HD constexpr int x4_ntile(int j) { return j >> 1; }
TG_HD constexpr int x4_breg(int j) { return j & 1; }

// ---- shared-memory tiles -------------------------------------------------------------------------

constexpr int kChunkElems = 8;    // 16-bit elements per 16-byte chunk
constexpr int kSwizzleRows = 8;   // the XOR pattern repeats every 8 rows (8 chunks = 128 bytes)

// Element offset of (row, col) in a swizzled row-major tile of `row_elems` 16-bit elements per
// row (a multiple of 64, so the XOR stays inside the row). Naive equivalent: row·row_elems + col.
TG_HD constexpr int swizzled_offset(int row, int col, int row_elems) {
    return row * row_elems + ((((col / kChunkElems) ^ (row % kSwizzleRows))) * kChunkElems) + col % kChunkElems;
}

}   // namespace train_gpt::mma
