// cuda/layernorm.cuh — LayerNorm forward and backward (twin: cpu::layernorm_*).
//
// Forward overwrites out and saves the FP32 row statistics mean, rstd (N) for backward; it
// computes them like the CPU: mean first, then the variance as the mean of (x − mean)² (two
// passes, no E[x²] − mean² cancellation), biased, eps = 1e-5, rstd = 1 / sqrt(var + eps) with an
// IEEE sqrt and divide. Backward ACCUMULATES: dinp += (one rounding per element),
// dweight += and dbias += (FP32), and, if asked, dinp_sums += Σ_rows of the new dinp (FP32).
// residual_layernorm_forward fuses the residual add before it: residual = round(a + b) in the
// forward's first pass, then the layernorm of the rounded residual (residual.cuh's add, bit for
// bit), in one kernel.
//
// Determinism of dweight / dbias (sums over all N rows): no atomics. Block k of the backward
// kernel owns rows [16k, 16k + 16) and writes its per-channel partial sums (rows in order) to a
// scratch buffer (nchunks, 2, C); a second kernel adds the partials of each channel in a fixed
// tree and adds the total into dweight / dbias once. The partition depends only on N, so the
// result is identical from run to run and from GPU to GPU. (The CPU adds row by row into
// dweight; the order differs, so the two agree to FP32 reordering, not bit for bit.)
#pragma once

#include "cuda/common.cuh"

#include <type_traits>

namespace train_gpt::cuda {

constexpr float kLayerNormEps = 1e-5f;

// One output value, (x − mean) · rstd · w + b, with its roundings spelled out (the multiply-add
// nvcc would contract anyway): the forward kernel and the FP8 cast fused into it
// (cuda/fp8_fused.cuh) compute the same bits whatever the compiler does with either.
__device__ __forceinline__ float layernorm_value(float x, float mean, float rstd, float w, float b) {
    return __fmaf_rn(__fmul_rn(__fsub_rn(x, mean), rstd), w, b);
}

// ---- forward: one warp per row -------------------------------------------------------------
// Lane l handles packs l, l+32, … of the row; x is re-read (from L1/L2) for each of the three
// passes instead of being held in registers, so any C works. out null: the statistics only.
// kResidual: x = inp is first written as round(a + b) by the first pass (each lane then re-reads
// only the packs it wrote itself: no synchronisation needed).
template <int P, bool kResidual, typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, T* inp, const T* a, const T* b,
                                         const T* weight, const T* bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;           // the whole warp leaves together: the shuffles below stay full-warp
    T* x = inp + size_t(row) * C;   // (C)

    float sum = 0.0f;
    for (int c = lane * P; c < C; c += 32 * P) {
        Packed<T, P> xv;
        if constexpr (kResidual) {   // x = a + b, rounded once (residual_forward's value)
            const Packed<T, P> av = load_packed_cs<P>(a + size_t(row) * C + c);
            const Packed<T, P> bv = load_packed_cs<P>(b + size_t(row) * C + c);
#pragma unroll
            for (int k = 0; k < P; k++)
                xv[k] = from_float<T>(to_float(av[k]) + to_float(bv[k]));
            store_packed(x + c, xv);
        } else {
            xv = load_packed<P>(x + c);
        }
#pragma unroll
        for (int k = 0; k < P; k++)
            sum += to_float(xv[k]);
    }
    const float m = warp_reduce_sum(sum) / float(C);

    float sq = 0.0f;
    for (int c = lane * P; c < C; c += 32 * P) {
        const Packed<T, P> xv = load_packed<P>(x + c);
#pragma unroll
        for (int k = 0; k < P; k++) {
            const float d = to_float(xv[k]) - m;
            sq += d * d;
        }
    }
    const float var = warp_reduce_sum(sq) / float(C);
    const float s = 1.0f / sqrtf(var + kLayerNormEps);   // IEEE sqrt and divide, as the CPU (not rsqrtf)
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
    if (out == nullptr) return;

    T* y = out + size_t(row) * C;   // (C)
    for (int c = lane * P; c < C; c += 32 * P) {
        const Packed<T, P> xv = load_packed_cs<P>(x + c);   // last read of x
        const Packed<T, P> wv = load_packed<P>(weight + c);
        const Packed<T, P> bv = load_packed<P>(bias + c);
        Packed<T, P> yv;
#pragma unroll
        for (int k = 0; k < P; k++) {
            yv[k] = from_float<T>(layernorm_value(to_float(xv[k]), m, s, to_float(wv[k]), to_float(bv[k])));
        }
        store_packed(y + c, yv);
    }
}

// ---- backward ------------------------------------------------------------------------------
// dinp = rstd · (dnorm − mean_c(dnorm) − norm · mean_c(dnorm · norm)), norm = (x − mean)·rstd,
// dnorm = weight · dout;  dweight += Σ_rows norm · dout;  dbias += Σ_rows dout.
//
// Block k owns rows [k·R, k·R + R) (R = kLnBwdRows) and all channels, in two phases:
//   1. one warp per row: the row's two channel means (row reductions), into shared memory;
//   2. one thread per channel pack, looping over the block's rows in order: dinp for (row, c)
//      from the phase-1 means, and the pack's dweight / dbias partial sums in registers,
//      written to partials[k] at the end. Accesses are coalesced along the row in both phases.
// R = 16: 512 blocks at B·T = 8192, several per SM (a larger R leaves one block of 96 threads per
// SM at C = 768: too few loads in flight). The cost of a smaller R is the partials, 8·C bytes per
// block, written once and read once (~12% of the kernel's traffic at R = 16).
constexpr int kLnBwdRows = 16;
constexpr int kLnBwdMaxThreads = 256;

// What else the backward does with each new dinp value: nothing (NoSink), or cast it to FP8
// (cuda/fp8_fused.cuh, LayerNormBackwardCast: the dY of the projection whose output gradient dinp
// is). A sink is copied into each thread: row() sees the pack (row i, channels c … c+P−1) of the
// block's local row r, end_pack() ends a channel pack's kLnBwdRows rows, commit() ends the block
// (every thread calls it: it may reduce across the block).
struct NoSink {
    template <int P, typename T>
    __device__ __forceinline__ void row(size_t, int, int, const Packed<T, P>&) {}
    __device__ __forceinline__ void end_pack(int, int) {}
    __device__ __forceinline__ void commit() {}
};

// kSums: a third partial, the pack's sums of the new dinp (partials (nchunks, 3, C), else 2).
template <int P, bool kSums, typename T, typename Sink = NoSink>
__global__ void __launch_bounds__(kLnBwdMaxThreads)
    layernorm_backward_kernel(T* dinp, float* partials, const T* dout, const T* inp, const T* weight, const float* mean,
                              const float* rstd, int N, int C, Sink sink = {}) {
    __shared__ float s_mean[kLnBwdRows], s_rstd[kLnBwdRows];
    __shared__ float s_dnorm_mean[kLnBwdRows], s_dnorm_norm_mean[kLnBwdRows];
    const int row0 = blockIdx.x * kLnBwdRows;
    const int rows = min(kLnBwdRows, N - row0);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;

    // phase 1: per-row means of dnorm and dnorm·norm
    for (int r = warp; r < rows; r += num_warps) {
        const size_t i = size_t(row0) + r;
        const T* x = inp + i * C;     // (C)
        const T* dy = dout + i * C;   // (C)
        const float m = mean[i], s = rstd[i];
        float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
        for (int c = lane * P; c < C; c += 32 * P) {
            const Packed<T, P> xv = load_packed<P>(x + c);
            const Packed<T, P> dv = load_packed<P>(dy + c);
            const Packed<T, P> wv = load_packed<P>(weight + c);
#pragma unroll
            for (int k = 0; k < P; k++) {
                const float norm = (to_float(xv[k]) - m) * s;
                const float dnorm = to_float(wv[k]) * to_float(dv[k]);
                dnorm_sum += dnorm;
                dnorm_norm_sum += dnorm * norm;
            }
        }
        dnorm_sum = warp_reduce_sum(dnorm_sum);
        dnorm_norm_sum = warp_reduce_sum(dnorm_norm_sum);
        if (lane == 0) {
            s_mean[r] = m;
            s_rstd[r] = s;
            s_dnorm_mean[r] = dnorm_sum / float(C);
            s_dnorm_norm_mean[r] = dnorm_norm_sum / float(C);
        }
    }
    __syncthreads();

    // phase 2: dinp, and this block's dweight / dbias (/ dinp sums) partials, channel pack per thread
    constexpr int kParts = kSums ? 3 : 2;
    float* part_w = partials + size_t(blockIdx.x) * kParts * C;   // (C)
    float* part_b = part_w + C;                                   // (C)
    for (int c = threadIdx.x * P; c < C; c += blockDim.x * P) {
        const Packed<T, P> wv = load_packed<P>(weight + c);
        float dw[P], db[P], dx_sum[P];
#pragma unroll
        for (int k = 0; k < P; k++)
            dw[k] = db[k] = dx_sum[k] = 0.0f;
#pragma unroll
        for (int r = 0; r < kLnBwdRows; r++) {   // unrolled: a sink may keep a register per row
            if (r >= rows) break;
            const size_t off = (size_t(row0) + r) * C + c;
            const Packed<T, P> xv = load_packed<P>(inp + off);
            const Packed<T, P> dv = load_packed<P>(dout + off);
            Packed<T, P> dxv = load_packed<P>(dinp + off);
            const float m = s_mean[r], s = s_rstd[r];
            const float a = s_dnorm_mean[r], b = s_dnorm_norm_mean[r];
#pragma unroll
            for (int k = 0; k < P; k++) {
                const float dyk = to_float(dv[k]);
                const float norm = (to_float(xv[k]) - m) * s;
                const float dnorm = to_float(wv[k]) * dyk;
                dxv[k] = from_float<T>(to_float(dxv[k]) + (dnorm - a - norm * b) * s);
                dw[k] += norm * dyk;
                db[k] += dyk;
                if constexpr (kSums) dx_sum[k] += to_float(dxv[k]);
            }
            store_packed(dinp + off, dxv);
            sink.template row<P>(size_t(row0) + r, r, c, dxv);
        }
        sink.end_pack(row0, c);
#pragma unroll
        for (int k = 0; k < P; k++) {
            part_w[c + k] = dw[k];
            part_b[c + k] = db[k];
            if constexpr (kSums) part_b[C + c + k] = dx_sum[k];
        }
    }
    sink.commit();
}

// out_j[c] += Σ_k partials[k, j, c] for the kParts outputs j (k over row chunks): dweight, dbias
// and, with three parts, the dinp sums. Block (32, 32): x picks the channel, y sums chunks y,
// y+32, … in order; then thread y = 0 adds the 32 sums in order. A fixed tree: deterministic.
// Naive equivalent:
//   for (c) { float s = 0; for (k) s += partials[k][0][c]; dweight[c] += s; }
template <int kRowsY, int kParts>
__global__ void __launch_bounds__(32 * kRowsY)
    layernorm_param_reduce_kernel(float* dweight, float* dbias, float* dinp_sums, const float* partials, int nchunks,
                                  int C) {
    __shared__ float s_sum[kParts][kRowsY][33];   // +1 column: no bank conflicts
    const int c = blockIdx.x * 32 + threadIdx.x;
    float sum[kParts] = {};
    if (c < C) {
        for (int k = threadIdx.y; k < nchunks; k += kRowsY) {
#pragma unroll
            for (int j = 0; j < kParts; j++)
                sum[j] += partials[(size_t(k) * kParts + j) * C + c];
        }
    }
#pragma unroll
    for (int j = 0; j < kParts; j++)
        s_sum[j][threadIdx.y][threadIdx.x] = sum[j];
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float total[kParts] = {};
#pragma unroll
        for (int y = 0; y < kRowsY; y++) {
#pragma unroll
            for (int j = 0; j < kParts; j++)
                total[j] += s_sum[j][y][threadIdx.x];
        }
        dweight[c] += total[0];
        dbias[c] += total[1];
        if constexpr (kParts == 3) dinp_sums[c] += total[2];
    }
}

// ---- launchers -----------------------------------------------------------------------------

// Whether layernorm_backward runs in 16-byte packs: C a multiple of the pack, every base aligned.
template <typename T>
inline bool layernorm_backward_vectorised(const T* dinp, const T* dout, const T* inp, const T* weight, int C) {
    return C % kPack<T> == 0 && is_aligned(dinp, 16) && is_aligned(dout, 16) && is_aligned(inp, 16) &&
           is_aligned(weight, 16);
}

// out null: mean and rstd only
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                       cudaStream_t stream) {
    TG_CUDA_REQUIRE(N >= 0 && C > 0, "rows must be non-empty (the mean divides by C)");
    if (N == 0) return;
    constexpr int kThreads = 256;   // 8 warps = 8 rows per block
    // 16-byte packs need every row start aligned: C a multiple of the pack and aligned bases
    const bool vec = C % kPack<T> == 0 && is_aligned(out, 16) && is_aligned(inp, 16) && is_aligned(weight, 16) &&
                     is_aligned(bias, 16);
    const unsigned blocks = unsigned(ceil_div(N, kThreads / 32));
    T* x = const_cast<T*>(inp);   // read only (kResidual = false)
    launch_packed<T>(vec, [&](auto pack) {
        layernorm_forward_kernel<decltype(pack)::value, false><<<blocks, kThreads, 0, stream>>>(
            out, mean, rstd, x, (const T*)nullptr, (const T*)nullptr, weight, bias, N, C);
    });
    cudaCheck(cudaGetLastError());
}

// residual (N,C) = a + b, then out, mean, rstd = the layernorm of residual, in one kernel
template <typename T>
void residual_layernorm_forward(T* residual, T* out, float* mean, float* rstd, const T* a, const T* b, const T* weight,
                                const T* bias, int N, int C, cudaStream_t stream) {
    TG_CUDA_REQUIRE(N >= 0 && C > 0, "rows must be non-empty (the mean divides by C)");
    if (N == 0) return;
    constexpr int kThreads = 256;   // 8 warps = 8 rows per block
    const bool vec = C % kPack<T> == 0 && is_aligned(out, 16) && is_aligned(residual, 16) && is_aligned(a, 16) &&
                     is_aligned(b, 16) && is_aligned(weight, 16) && is_aligned(bias, 16);
    const unsigned blocks = unsigned(ceil_div(N, kThreads / 32));
    launch_packed<T>(vec, [&](auto pack) {
        layernorm_forward_kernel<decltype(pack)::value, true>
            <<<blocks, kThreads, 0, stream>>>(out, mean, rstd, residual, a, b, weight, bias, N, C);
    });
    cudaCheck(cudaGetLastError());
}

// The backward's two launches for pack width P: layernorm_backward_kernel with `sink`, then the
// fixed-order reduction of its partials. The plain backward below passes NoSink; the FP8 cast of
// dinp (cuda/fp8_fused.cuh, layernorm_backward_fp8) passes its own.
template <int P, typename T, typename Sink>
void launch_layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                               const float* mean, const float* rstd, int N, int C, float* dinp_sums,
                               cudaStream_t stream, Sink sink) {
    TG_CUDA_REQUIRE(N >= 0 && C > 0, "rows must be non-empty (the means divide by C)");
    if (N == 0) return;
    // Phase 2 has one thread per channel pack: a block no wider than the row's packs (whole
    // warps), at most kLnBwdMaxThreads; phase 1 then has blockDim/32 warps for kLnBwdRows rows.
    const int threads = std::min(kLnBwdMaxThreads, round_up(ceil_div(C, P), 32));
    const int nchunks = ceil_div(N, kLnBwdRows);
    const int parts = dinp_sums != nullptr ? 3 : 2;
    float* partials =
        static_cast<float*>(scratch(sizeof(float) * parts * size_t(nchunks) * C, stream));   // (nchunks, parts, C)
    auto launch = [&](auto sums) {
        constexpr bool kSums = decltype(sums)::value;
        layernorm_backward_kernel<P, kSums>
            <<<nchunks, threads, 0, stream>>>(dinp, partials, dout, inp, weight, mean, rstd, N, C, sink);
        cudaCheck(cudaGetLastError());
        constexpr int kRowsY = 32;
        layernorm_param_reduce_kernel<kRowsY, kSums ? 3 : 2>
            <<<unsigned(ceil_div(C, 32)), dim3(32, kRowsY), 0, stream>>>(dweight, dbias, dinp_sums, partials, nchunks,
                                                                         C);
        cudaCheck(cudaGetLastError());
    };
    if (dinp_sums != nullptr)
        launch(std::true_type{});
    else
        launch(std::false_type{});
}

// dinp (N,C) += the layernorm's input gradient; dweight, dbias (C) += its parameter gradients;
// dinp_sums (C) += the column sums of the new dinp (null: not computed).
template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, float* dinp_sums, cudaStream_t stream) {
    const bool vec = layernorm_backward_vectorised(dinp, dout, inp, weight, C);
    launch_packed<T>(vec, [&](auto pack) {
        launch_layernorm_backward<decltype(pack)::value>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                                         dinp_sums, stream, NoSink{});
    });
}

}   // namespace train_gpt::cuda
