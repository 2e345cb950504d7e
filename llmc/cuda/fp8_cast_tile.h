// fp8_cast_tile.h — the geometry of the vectorised FP8 cast-with-transpose (cuda/fp8.cuh,
// quantize_transpose_vec_kernel): which thread reads, casts and writes which values of a tile, and
// where they sit in shared memory. Host and device functions, so tests/test_fp8_cast_tile.cpp checks
// on the CPU what the kernel relies on: every value of a tile is cast exactly once, every byte of
// both outputs written exactly once, and no shared-memory access of a warp meets a bank conflict.
//
// A tile is kRows × kCols values of x (rows, cols); a block of kThreads threads casts it:
//   load   pass p, thread t: the kVec consecutive values (row, col … col + kVec − 1) — one 16-byte
//          load of bf16/fp16 — cast into kVec bytes: one 8-byte store into q's row (8 threads
//          cover a 64-byte row segment), and the same 8 bytes into the shared tile at (row, col);
//   store  thread t: kTBytes consecutive rows of one column of the tile, gathered from shared memory
//          byte by byte, one 16-byte store into qt's row (that column of x).
// The shared tile is row-major, kCols bytes per row, no padding: a warp's 8-byte writes cover four
// whole rows (distinct words), and its gathers read, per byte, one row's 32 consecutive bytes (8
// words, each shared by 4 lanes: a broadcast), so neither conflicts.
#pragma once

#include "precision/dtypes.h"   // TG_HD

namespace train_gpt::cuda::cast_tile {

constexpr int kRows = 64;
constexpr int kCols = 64;
constexpr int kThreads = 256;
constexpr int kVec = 8;                                  // values per load: 16 bytes of bf16 / fp16
constexpr int kChunksPerRow = kCols / kVec;              // 8 threads per tile row in the load phase
constexpr int kRowsPerPass = kThreads / kChunksPerRow;   // 32
constexpr int kPasses = kRows / kRowsPerPass;            // 2
constexpr int kTBytes = 16;                              // bytes per transposed store: one 16-byte store
constexpr int kTileBytes = kRows * kCols;                // the shared tile, one byte per value

static_assert(kCols % kVec == 0 && kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0,
              "the load phase covers the tile in whole passes");
static_assert(kCols * (kRows / kTBytes) == kThreads, "the store phase: one 16-byte store per thread");

struct Coord {
    int row, col;
};

// Load phase, pass p: the first of thread t's kVec values.
TG_HD inline Coord load_coord(int t, int p) {
    return {p * kRowsPerPass + t / kChunksPerRow, (t % kChunksPerRow) * kVec};
}

// Store phase: thread t's column of the tile and the first of its kTBytes rows.
TG_HD inline Coord store_t_coord(int t) { return {(t / kCols) * kTBytes, t % kCols}; }

// Byte offset of tile value (row, col) in shared memory.
TG_HD inline int smem_offset(int row, int col) { return row * kCols + col; }

// Whether a (rows, cols) tensor takes the vectorised kernel: whole tiles only (qt's 16-byte stores
// need rows a multiple of 16, q's 8-byte ones cols a multiple of 8; whole tiles need more).
TG_HD inline bool fits(int rows, int cols) { return rows > 0 && cols > 0 && rows % kRows == 0 && cols % kCols == 0; }

}   // namespace train_gpt::cuda::cast_tile
