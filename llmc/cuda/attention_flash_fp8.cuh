// attention_flash_fp8.cuh — the flash attention (cuda/attention_flash.cuh) with the FP8 cast of
// its output in the epilogue, from the registers the output is stored from:
//   attention_forward_flash_fp8:  the forward, and q = out's E4M3 cast (attproj's X), as
//                                 quantize_fp8 casts out (OutputCast)
//   attention_backward_flash_fp8: the backward, and dqkv's E5M2 cast in both layouts (the dY of
//                                 qkv), as quantize_transpose_fp8 casts dqkv (GradCast, through a
//                                 shared tile for the transpose)
// Twins: the unfused attention then the cast (tests/cuda/test_cuda_fp8_fused.cu compares the bytes).
#pragma once

#include "cuda/attention_flash.cuh"
#include "cuda/fp8.cuh"

namespace train_gpt::cuda {

namespace attention_flash_detail {

// The forward's cast policy (see NoOutputCast): pair() casts two consecutive values of out, each
// already the rounded value stored, into q; commit() adds the block's statistics.
template <typename Q>
struct OutputCast {
    Q* q;                     // (B·T, C)
    const float* scale_ptr;   // the cast's scale (Fp8ScaleSlot::scale)
    Fp8Counters* counters;
    size_t n;   // B·T·C: the count the block 0 commits
    ThreadCastStats stats;
    __device__ __forceinline__ void pair(size_t i, float lo, float hi) {
        const float s = *scale_ptr;
        const unsigned short b = (unsigned short)(stats.cast<Q>(lo, s) | (stats.cast<Q>(hi, s) << 8));
        *reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(q) + i) = b;   // i even: aligned
    }
    __device__ __forceinline__ void commit() {
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&counters->count, (unsigned long long)n);
        stats.commit(counters);
    }
};

// The backward epilogues' cast policy (see NoGradCast).
template <typename Q>
struct GradCast {
    static constexpr bool kActive = true;
    Q* q;                     // (B·T, 3C)
    Q* qt;                    // (3C, B·T)
    const float* scale_ptr;   // the cast's scale (Fp8ScaleSlot::scale)
    Fp8Counters* counters;
    int Tlen, C3, N;   // sequence length, 3C, B·T
    ThreadCastStats stats;
    int b_, row0_, f0_;     // the current tile
    unsigned char* smem_;   // (64, grad_tile::kPitch) bytes
    __device__ __forceinline__ void tile(int b, int row0, int f0, unsigned char* smem) {
        b_ = b, row0_ = row0, f0_ = f0, smem_ = smem;
    }
    __device__ __forceinline__ void pair(int r, int c, float lo, float hi) {
        const float s = *scale_ptr;
        const unsigned char b0 = stats.cast<Q>(lo, s), b1 = stats.cast<Q>(hi, s);
        const size_t token = (size_t)b_ * Tlen + row0_ + r;
        if (q != nullptr) {   // c even, C3 and f0 even: a 2-byte aligned pair
            *reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(q) + token * C3 + f0_ + c) =
                (unsigned short)(b0 | (b1 << 8));
        }
        smem_[fl::grad_tile::smem_offset(r, c)] = b0;
        smem_[fl::grad_tile::smem_offset(r, c + 1)] = b1;
    }
    __device__ __forceinline__ void flush(int threads) {
        namespace gt = fl::grad_tile;
        __syncthreads();   // the tile is complete
        if (qt != nullptr) {
            unsigned char* out = reinterpret_cast<unsigned char*>(qt);
            const int valid = min(gt::kRows, Tlen - row0_);   // tokens of the tile inside the sequence
            const size_t col0 = (size_t)b_ * Tlen + row0_;    // qt column of the tile's first token
            for (int i = threadIdx.x; i < gt::kChunks; i += threads) {
                const mma::Coord at = gt::chunk(i);
                unsigned char* dst = out + (size_t)(f0_ + at.col) * N + col0 + at.row;
                Packed<unsigned char, gt::kChunk> v;
#pragma unroll
                for (int k = 0; k < gt::kChunk; k++)
                    v[k] = smem_[gt::smem_offset(at.row + k, at.col)];
                if (at.row + gt::kChunk <= valid && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
                    store_packed(dst, v);
                } else {
                    for (int k = 0; k < gt::kChunk && at.row + k < valid; k++)
                        dst[k] = v[k];
                }
            }
        }
        __syncthreads();   // the tile may be rewritten
    }
    __device__ __forceinline__ void commit(size_t count) {   // count: the values this kernel casts
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&counters->count, (unsigned long long)count);
        stats.commit(counters);
    }
};

}   // namespace attention_flash_detail

// The same, and q (B·T, C) = saturate(out · *scale) in Q (E4M3: attproj's X) from the epilogue's
// registers, as quantize_fp8 casts out, with its statistics accumulated into *counters.
template <typename T, typename Q>
void attention_forward_flash_fp8(T* out, float* lse, Q* q, const T* qkv, int B, int Tlen, int C, int NH,
                                 const float* scale, Fp8Counters* counters, cudaStream_t stream) {
    attention_flash_detail::OutputCast<Q> cast{q, scale, counters, (size_t)B * Tlen * C, {}};
    attention_flash_detail::launch_forward(out, lse, qkv, B, Tlen, C, NH, cast, stream);
}

// The same, and q (B·T, 3C), qt (3C, B·T) = the FP8 cast of dqkv (Q: E5M2, the dY of qkv) from the
// epilogues' registers, as quantize_transpose_fp8 casts dqkv, statistics accumulated into *counters.
// q or qt may be null.
template <typename T, typename Q>
void attention_backward_flash_fp8(T* dqkv, Q* q, Q* qt, const T* dout, const T* qkv, const T* out, const float* lse,
                                  int B, int Tlen, int C, int NH, const float* scale, Fp8Counters* counters,
                                  cudaStream_t stream) {
    attention_flash_detail::GradCast<Q> cast{q, qt, scale, counters, Tlen, 3 * C, B * Tlen, {}, 0, 0, 0, nullptr};
    attention_flash_detail::launch_backward(dqkv, dout, qkv, out, lse, B, Tlen, C, NH, cast, stream);
}

}   // namespace train_gpt::cuda
