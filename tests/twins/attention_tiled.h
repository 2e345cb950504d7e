// tests/twins/attention_tiled.h — the host twin of the flash attention kernels (cuda/attention_flash.cuh):
// the same algorithm, run on the CPU warp by warp and lane by lane.
//
// Where cpu::attention_forward / attention_backward (cpu/kernels.h) are the exact maths, these
// are the kernel's way of computing them, step for step: the same tile sizes and block schedule
// (cuda/attention_flash_tiling.h), shared tiles written through the same swizzle, every operand
// moved into registers by an emulated ldmatrix.x4 at the lane addresses the kernel computes, every
// product an emulated mma.sync.m16n8k16 on those registers, the online softmax on the C fragments
// (exp2 with the scale·log2(e) folded into one FMA, quad shuffles for the row max and the final
// row sum), P (forward) and P, dS (backward) rounded to T and handed to the next product by the
// C→A register reuse, the causal mask and the skipping of fully masked (warp, tile) pairs, and
// the backward's recomputation of P from lse. All fragment indexing goes through
// cuda/mma_fragments.h, so a wrong map or a wrong tile walk shows up here as a wrong result.
//
// What cannot be twinned: the order in which an mma's tensor core adds its 16 products (not
// specified by the PTX ISA). The emulated mma adds them exactly (in double) to the accumulator and
// rounds once to FP32; the hardware differs from that by FP32 rounding only. Transcendentals are
// the host's exp2f / logf (the device's are within 2 ulp of them).
//
// Semantics as the kernels: forward overwrites out (B,T,C) and lse (B,NH,T) (natural log of the
// row sum of exp of the scaled scores, as cpu::attention_forward saves); backward OVERWRITES
// dqkv (B,T,3C) — every element written once (cpu::attention_backward accumulates; run it on a
// zeroed dqkv to compare). T = bf16 or fp16; head size 64 (flash::kHeadSize).
#pragma once

#include "cuda/attention_flash_tiling.h"   // flash::BwdKernels
#include "precision/dtypes.h"

#include <cstdint>

namespace train_gpt::cpu {

// How many (warp, tile) steps a run computed and skipped; a computed step with no unmasked
// element, or a skipped one with any, counts as a violation (the skip rules must be exact).
struct TiledStats {
    int64_t computed = 0, skipped = 0;
    int64_t computed_without_live = 0, skipped_with_live = 0;
    int64_t blocks = 0;
};

template <typename T>
void attention_forward_tiled(T* out, float* lse, const T* qkv, int B, int Tlen, int C, int NH,
                             TiledStats* stats = nullptr);

// kernels: the default kernels' warp layout (cuda/attention_flash.cuh) or the wide kernels'
// (cuda/attention_flash_bwd_wide.cuh, --flash-backward wide).
template <typename T>
void attention_backward_tiled(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int B, int Tlen,
                              int C, int NH, TiledStats* stats = nullptr,
                              flash::BwdKernels kernels = flash::BwdKernels::kDefault);

}   // namespace train_gpt::cpu
