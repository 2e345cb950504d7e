// cuda/encoder.cuh — token + position embedding, forward and backward (twin: cpu::encoder_*).
//
// Forward overwrites out; backward ACCUMULATES into the FP32 parameter gradients dwte, dwpe.
//
// Determinism. Many positions share a token, so dwte[tok] is a sum with a data-dependent number
// of terms; atomicAdd would make its order (and so its rounding) vary from run to run. Instead:
//   1. stable-sort the row indices 0..B·T−1 by token on the device (CUB radix sort: stable, so
//      the rows of each token stay in ascending order — the CPU's (b, t) order);
//   2. one warp per run of equal tokens (its first sorted position) and 32·pack channels adds
//      dout[row, c] for the run's rows in that order, starting from the old dwte value.
// Each dwte element is then the same chain of FP32 additions as the CPU's serial loop:
// bit-identical to cpu::encoder_backward, no host round trip (the tokens stay on the device, no
// stream sync). The cost is one small sort (B·T keys) per call; a very frequent token serialises
// its run in one warp, which issues kEncoderBatch row loads at a time to hide latency.
// dwpe needs no sort: the thread that owns (t, c) adds dout[b, t, c] for b = 0..B−1 in order.
#pragma once

#include "cuda/common.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace train_gpt::cuda {

// ---- forward -------------------------------------------------------------------------------

// out (B,T,C) = wte[tokens[b,t]] + wpe[t]; one thread per pack of P channels of one (b, t).
template <int P, typename T>
__global__ void encoder_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen,
                                       int C) {
    const size_t packs_per_row = C / P;
    const size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (idx >= size_t(B) * Tlen * packs_per_row) return;
    const size_t bt = idx / packs_per_row;        // row of (B·T)
    const int c = int(idx % packs_per_row) * P;   // first channel of the pack
    const int t = int(bt % Tlen);
    const Packed<T, P> w = load_packed<P>(wte + size_t(tokens[bt]) * C + c);   // (C) row of the token
    const Packed<T, P> p = load_packed<P>(wpe + size_t(t) * C + c);            // (C) row of the position
    Packed<T, P> o;
#pragma unroll
    for (int k = 0; k < P; k++)
        o[k] = from_float<T>(to_float(w[k]) + to_float(p[k]));
    store_packed(out + bt * C + c, o);
}

// ---- backward ------------------------------------------------------------------------------

// dwpe (maxT,C) += Σ_b dout[b, t, :]; one thread per (t, pack of P channels), b in order.
template <int P, typename T>
__global__ void encoder_backward_wpe_kernel(float* dwpe, const T* dout, int B, int Tlen, int C) {
    const size_t packs_per_row = C / P;
    const size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (idx >= size_t(Tlen) * packs_per_row) return;
    const size_t t = idx / packs_per_row;
    const int c = int(idx % packs_per_row) * P;
    float acc[P];
#pragma unroll
    for (int k = 0; k < P; k++)
        acc[k] = dwpe[t * C + c + k];
    for (int b = 0; b < B; b++) {
        const Packed<T, P> d = load_packed_cs<P>(dout + (size_t(b) * Tlen + t) * C + c);
#pragma unroll
        for (int k = 0; k < P; k++)
            acc[k] += to_float(d[k]);
    }
#pragma unroll
    for (int k = 0; k < P; k++)
        dwpe[t * C + c + k] = acc[k];
}

// rows[i] = i
template <typename I>
__global__ void iota_kernel(I* rows, I n) {
    const I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);
    if (i < n) rows[i] = i;
}

constexpr int kEncoderBatch = 8;   // dout rows in flight per thread in the dwte kernel

// dwte (Vp,C) += Σ_{rows r with tokens[r] = tok} dout[r, :], rows in ascending order.
// Grid (B·T, ceil(C / (32·P))), one warp per block. Block x = a position i of the sorted token
// list; only the first position of each run of equal tokens does work (the others return), over
// the channels of block y.
template <int P, typename T>
__global__ void __launch_bounds__(32)
    encoder_backward_wte_kernel(float* dwte, const T* dout, const int32_t* sorted_tokens, const int32_t* sorted_rows,
                                int BT, int C) {
    const int i = blockIdx.x;
    const int lane = threadIdx.x;
    const int32_t tok = sorted_tokens[i];
    if (i > 0 && sorted_tokens[i - 1] == tok) return;   // not a run head: the head's warp adds this row
    // End of the run: the warp tests 32 positions per step; the list is sorted, so the run ends
    // at the first mismatch. Naive equivalent: int end = i + 1; while (end < BT && sorted_tokens[end] == tok) end++;
    int end = i + 1;
    for (;;) {
        const int j = end + lane;
        const unsigned same = __ballot_sync(kFullMask, j < BT && sorted_tokens[j] == tok);
        if (same != kFullMask) {
            end += __ffs(~same) - 1;   // leading run of set bits = positions still in the run
            break;
        }
        end += 32;
    }
    const int c = (blockIdx.y * 32 + lane) * P;
    if (c >= C) return;
    float* dst = dwte + size_t(tok) * C + c;   // (P) of the token's row
    float acc[P];
#pragma unroll
    for (int k = 0; k < P; k++)
        acc[k] = dst[k];
    // Naive equivalent: for (j = i; j < end; j++) acc += dout[sorted_rows[j], c..c+P).
    // Loads of a batch are issued together, the additions stay in row order.
    for (int j0 = i; j0 < end; j0 += kEncoderBatch) {
        Packed<T, P> rows[kEncoderBatch];
#pragma unroll
        for (int u = 0; u < kEncoderBatch; u++) {
            if (j0 + u < end) rows[u] = load_packed_cs<P>(dout + size_t(sorted_rows[j0 + u]) * C + c);
        }
#pragma unroll
        for (int u = 0; u < kEncoderBatch; u++) {
            if (j0 + u < end) {
#pragma unroll
                for (int k = 0; k < P; k++)
                    acc[k] += to_float(rows[u][k]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < P; k++)
        dst[k] = acc[k];
}

// ---- launchers -----------------------------------------------------------------------------

template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen, int C,
                     cudaStream_t stream) {
    TG_CUDA_REQUIRE(B >= 0 && Tlen >= 0 && C > 0, "shapes must be non-negative and rows non-empty");
    if (B == 0 || Tlen == 0) return;
    constexpr int kThreads = 256;
    // 16-byte packs need every row start aligned: C a multiple of the pack and aligned bases
    const bool vec = C % kPack<T> == 0 && is_aligned(out, 16) && is_aligned(wte, 16) && is_aligned(wpe, 16);
    const int P = vec ? kPack<T> : 1;
    const unsigned blocks = grid_1d(size_t(B) * Tlen * (C / P), kThreads);
    launch_packed<T>(vec, [&](auto pack) {
        encoder_forward_kernel<decltype(pack)::value>
            <<<blocks, kThreads, 0, stream>>>(out, tokens, wte, wpe, B, Tlen, C);
    });
    cudaCheck(cudaGetLastError());
}

template <typename T>
void encoder_backward(float* dwte, float* dwpe, const T* dout, const int32_t* tokens, int B, int Tlen, int C,
                      cudaStream_t stream) {
    TG_CUDA_REQUIRE(B >= 0 && Tlen >= 0 && C > 0, "shapes must be non-negative and rows non-empty");
    // CUB's item count, the grid's x dimension and the row indices are int
    TG_CUDA_REQUIRE(size_t(B) * Tlen <= size_t(INT32_MAX), "B*T must fit in int32");
    // the dwte grid's y dimension covers C in chunks of 32 channels (at least)
    TG_CUDA_REQUIRE(ceil_div(C, 32) <= kMaxGridYZ, "C must be at most 65535 * 32");
    const int BT = B * Tlen;
    if (BT == 0) return;
    const bool vec = C % kPack<T> == 0 && is_aligned(dout, 16);   // dout rows start 16-byte aligned
    constexpr int kThreads = 256;

    // dwpe: (t, pack) per thread
    {
        const int P = vec ? kPack<T> : 1;
        const unsigned blocks = grid_1d(size_t(Tlen) * (C / P), kThreads);
        launch_packed<T>(vec, [&](auto pack) {
            encoder_backward_wpe_kernel<decltype(pack)::value><<<blocks, kThreads, 0, stream>>>(dwpe, dout, B, Tlen, C);
        });
        cudaCheck(cudaGetLastError());
    }

    // dwte: stable sort of (token, row) pairs, then one warp per run of equal tokens
    size_t sort_bytes = 0;
    cudaCheck(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, tokens, (int32_t*)nullptr, (const int32_t*)nullptr,
                                              (int32_t*)nullptr, BT, 0, 32, stream));
    ScratchLayout layout;
    const size_t off_keys = layout.add(sizeof(int32_t) * BT);      // sorted tokens (BT)
    const size_t off_rows_in = layout.add(sizeof(int32_t) * BT);   // 0..BT-1 (BT)
    const size_t off_rows = layout.add(sizeof(int32_t) * BT);      // rows in token order (BT)
    const size_t off_sort = layout.add(sort_bytes);                // CUB's temporary storage
    void* base = scratch(layout.bytes, stream);
    int32_t* sorted_tokens = at_offset<int32_t>(base, off_keys);
    int32_t* rows_in = at_offset<int32_t>(base, off_rows_in);
    int32_t* sorted_rows = at_offset<int32_t>(base, off_rows);
    iota_kernel<int32_t><<<grid_1d(BT, kThreads), kThreads, 0, stream>>>(rows_in, BT);
    cudaCheck(cudaGetLastError());
    cudaCheck(cub::DeviceRadixSort::SortPairs(at_offset<void>(base, off_sort), sort_bytes, tokens, sorted_tokens,
                                              rows_in, sorted_rows, BT, 0, 32, stream));
    const int P = vec ? kPack<T> : 1;
    const dim3 grid(unsigned(BT), unsigned(ceil_div(C, 32 * P)));
    launch_packed<T>(vec, [&](auto pack) {
        encoder_backward_wte_kernel<decltype(pack)::value>
            <<<grid, 32, 0, stream>>>(dwte, dout, sorted_tokens, sorted_rows, BT, C);
    });
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
