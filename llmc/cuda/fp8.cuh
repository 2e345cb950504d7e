// cuda/fp8.cuh — amax and the scaled FP8 cast (twins: cpu::amax, cpu::quantize_fp8).
//
//   amax(x)              = max |x|, NaN if any x is NaN (a NaN must never hide in an amax)
//   quantize_fp8(q, x, s): q = saturate(x · s) in E4M3 or E5M2, plus the cast's statistics:
//                          amax of the unscaled x, and how many values saturated
//                          (|x·s| > fp8_max, inf included), flushed to ±0 (x ≠ 0 but q = 0),
//                          or were NaN.
// The cast is CUDA's __nv_cvt_float_to_fp8(v, __NV_SATFINITE, …) (PTX cvt.rn.satfinite), which
// dtypes.h's fp8e4m3/fp8e5m2::from_float were verified bit-exact against, and x·s is the same
// single FP32 multiply as on the CPU: q is bit-identical to the CPU twin's, and so are the
// counts. amax is an exact max, so it is bit-identical too (any NaN → NaN).
//
// Reductions: the max runs on the bits of |x| as unsigned integers — for non-negative floats
// the bit patterns order like the values, and every NaN (sign cleared) sits above +inf — so one
// integer atomicMax per block combines blocks, NaN-propagating, in any order with the same
// result. Counts are integers: atomics are exact. quantize_fp8 accumulates into an Fp8Counters
// slot in device memory (fp8_scaling.h) and returns at once: the trainer reads its slots back
// once per step. amax (used only for just-in-time scales) synchronises and returns the value.
#pragma once

#include "cuda/common.cuh"
#include "cuda/fp8_cast_tile.h"
#include "precision/fp8_scaling.h"

#include <cuda_fp8.h>

#include <cmath>

namespace train_gpt::cuda {

// The FP8 format of a storage type: train_gpt's (dtypes.h) or CUDA's (same one-byte layout).
template <typename Q>
struct Fp8Traits;
template <>
struct Fp8Traits<fp8e4m3> {
    static constexpr __nv_fp8_interpretation_t kind = __NV_E4M3;
    static constexpr float max_finite = fp8e4m3::max_finite;   // 448
};
template <>
struct Fp8Traits<fp8e5m2> {
    static constexpr __nv_fp8_interpretation_t kind = __NV_E5M2;
    static constexpr float max_finite = fp8e5m2::max_finite;   // 57344
};
template <>
struct Fp8Traits<__nv_fp8_e4m3> : Fp8Traits<fp8e4m3> {};
template <>
struct Fp8Traits<__nv_fp8_e5m2> : Fp8Traits<fp8e5m2> {};

static_assert(sizeof(Fp8Counters) == 40 && sizeof(Fp8Counters::amax_bits) == sizeof(unsigned int),
              "Fp8Counters: the layout the kernels' atomics assume");

constexpr int kFp8Threads = 256;
// Grid-stride beyond this many blocks (8 per SM of an H200 at 256 threads: enough loads in flight).
// Each block ends with a handful of same-address atomics into the counters; one per warp over
// thousands of blocks would serialise, so a block reduces first and commits once
// (block_commit_stats).
constexpr int kFp8MaxBlocks = 1024;

// Bits of |v|. Naive equivalent of the max over them: amax = max(amax, fabsf(v)), NaN winning.
__device__ __forceinline__ unsigned int abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// One block's max of per-thread `bits`, then one atomicMax into *amax_bits.
// __reduce_max_sync(mask, b): the max of b over the warp's lanes, in every lane (one instruction).
__device__ __forceinline__ void block_atomic_max(unsigned int* amax_bits, unsigned int bits) {
    bits = block_reduce(
        bits, [](unsigned int b) { return __reduce_max_sync(kFullMask, b); }, 0u);
    if (threadIdx.x == 0 && bits != 0u) atomicMax(amax_bits, bits);
}

// One block's cast statistics into the counters: block reductions (a max of the |x| bits, sums of
// the counts), then four atomics from thread 0 (fewer when a count is zero).
__device__ __forceinline__ void block_commit_stats(Fp8Counters* counters, unsigned int m, unsigned int saturated,
                                                   unsigned int flushed, unsigned int nan) {
    auto max_op = [](unsigned int b) { return __reduce_max_sync(kFullMask, b); };
    auto add_op = [](unsigned int c) { return __reduce_add_sync(kFullMask, c); };   // exact for integers
    m = block_reduce(m, max_op, 0u);
    saturated = block_reduce(saturated, add_op, 0u);
    flushed = block_reduce(flushed, add_op, 0u);
    nan = block_reduce(nan, add_op, 0u);
    if (threadIdx.x == 0) {
        if (m != 0u) atomicMax(reinterpret_cast<unsigned int*>(&counters->amax_bits), m);
        if (saturated != 0u) atomicAdd(&counters->saturated, (unsigned long long)saturated);
        if (flushed != 0u) atomicAdd(&counters->flushed, (unsigned long long)flushed);
        if (nan != 0u) atomicAdd(&counters->nan, (unsigned long long)nan);
    }
}

// One thread's statistics of the values it cast.
struct ThreadCastStats {
    unsigned int m = 0u, saturated = 0u, flushed = 0u, nan = 0u;   // m: max of the |x| bits

    // the cast of one value, with the CPU twin's classification (cpu::quantize_fp8)
    template <typename Q>
    __device__ __forceinline__ __nv_fp8_storage_t cast(float v, float scale) {
        const float scaled = v * scale;
        const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(scaled, __NV_SATFINITE, Fp8Traits<Q>::kind);
        m = max(m, abs_bits(v));
        if (abs_bits(v) > 0x7f800000u) {
            nan++;
        } else if (fabsf(scaled) > Fp8Traits<Q>::max_finite) {
            saturated++;
        } else if (v != 0.0f && (b & 0x7fu) == 0u) {   // q reads back as ±0 (both formats: low 7 bits zero)
            flushed++;
        }
        return b;
    }
    __device__ __forceinline__ void commit(Fp8Counters* counters) const {
        block_commit_stats(counters, m, saturated, flushed, nan);
    }
};

// What a cast quantises, per value: the value itself (a plain cast), or a producer's function of
// it rounded to the activation dtype (cuda/fp8_fused.cuh: the cast fused into GELU).
struct Unchanged {
    __device__ __forceinline__ float operator()(float v) const { return v; }
};

// ---- amax ------------------------------------------------------------------------------------

template <int P, typename T>
__global__ void __launch_bounds__(kFp8Threads) amax_kernel(unsigned int* amax_bits, const T* x, size_t n) {
    const size_t start = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    const size_t packs = n / P;
    unsigned int m = 0u;
    for (size_t p = start; p < packs; p += stride) {
        const Packed<T, P> xv = load_packed<P>(x + p * P);
#pragma unroll
        for (int k = 0; k < P; k++)
            m = max(m, abs_bits(to_float(xv[k])));
    }
    for (size_t i = packs * P + start; i < n; i += stride)
        m = max(m, abs_bits(to_float(x[i])));   // tail
    block_atomic_max(amax_bits, m);
}

// ---- quantize ----------------------------------------------------------------------------------

// q (n) = saturate(map(x) · scale), with counts and the amax of map(x); q null: statistics only.
template <int P, typename T, typename Q, typename Map>
__global__ void __launch_bounds__(kFp8Threads)
    quantize_fp8_kernel(Q* q, Fp8Counters* counters, const T* x, size_t n, const float* scale_ptr, Map map) {
    const float scale = *scale_ptr;   // the tensor's scale, in device memory (Fp8ScaleSlot::scale)
    __nv_fp8_storage_t* qb = reinterpret_cast<__nv_fp8_storage_t*>(q);
    const size_t start = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    ThreadCastStats stats;
    const size_t packs = n / P;
    for (size_t p = start; p < packs; p += stride) {
        const Packed<T, P> xv = load_packed_cs<P>(x + p * P);
        Packed<__nv_fp8_storage_t, P> out;
#pragma unroll
        for (int k = 0; k < P; k++)
            out[k] = stats.cast<Q>(map(to_float(xv[k])), scale);
        if (qb != nullptr) store_packed(qb + p * P, out);
    }
    for (size_t i = packs * P + start; i < n; i += stride) {   // tail
        const __nv_fp8_storage_t b = stats.cast<Q>(map(to_float(x[i])), scale);
        if (qb != nullptr) qb[i] = b;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&counters->count, (unsigned long long)n);
    stats.commit(counters);
}

// ---- quantize with transpose -------------------------------------------------------------------
// q (rows, cols) = saturate(v · scale) and qt (cols, rows) = qᵀ from ONE cast of each value v =
// src(r, c) (either output may be null), with the statistics of quantize_fp8_kernel: the TN-only
// FP8 GEMMs of the backward read transposed operands, and writing them here saves a transpose
// pass per operand. src(r, c) is called exactly once per element, by one thread: a plain tensor
// (TensorSource) or a producer whose cast is fused in (cuda/fp8_fused.cuh).
// Naive equivalent: for r, c: b = cast(src(r, c)); q[r·cols + c] = b; qt[c·rows + r] = b.
// Tiles of 32×32 through shared memory (block of 256 threads = 32 columns × 8 row lanes): the
// reads of x and the writes of q run along a row, the writes of qt along a column of x, each
// coalesced. Bytes are staged as 32-bit words (row stride 33) so the transposed reads of the tile
// hit 32 different banks. Tile rows beyond gridDim.y are walked in a loop (any number of rows).
constexpr int kTile = 32;

// x (rows, cols) in T, each value through map. A source gives one value (operator()), or P
// consecutive values of a row (values<P>: the vectorised kernel; c a multiple of P, one 16-byte load
// of T for P = 16 / sizeof(T)).
template <typename T, typename Map = Unchanged>
struct TensorSource {
    using Value = T;
    const T* x;
    int cols;
    Map map;
    __device__ __forceinline__ float operator()(int r, int c) const { return map(to_float(x[(size_t)r * cols + c])); }
    template <int P>
    __device__ __forceinline__ void values(int r, int c, float* v) const {
        const Packed<T, P> xv = load_packed_cs<P>(x + (size_t)r * cols + c);
#pragma unroll
        for (int k = 0; k < P; k++)
            v[k] = map(to_float(xv[k]));
    }
    bool aligned() const { return is_aligned(x, 16); }
};

template <typename Q, typename Source>
__global__ void __launch_bounds__(kFp8Threads)
    quantize_transpose_fp8_kernel(Q* q, Q* qt, Fp8Counters* counters, Source src, int rows, int cols,
                                  const float* scale_ptr) {
    const float scale = *scale_ptr;
    __shared__ unsigned int tile[kTile][kTile + 1];
    __nv_fp8_storage_t* qb = reinterpret_cast<__nv_fp8_storage_t*>(q);
    __nv_fp8_storage_t* qtb = reinterpret_cast<__nv_fp8_storage_t*>(qt);
    const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;   // ty < 8
    const int c = blockIdx.x * kTile + tx;                          // column of x this thread reads
    ThreadCastStats stats;
    const int row_tiles = (rows + kTile - 1) / kTile;
    for (int tr = blockIdx.y; tr < row_tiles; tr += gridDim.y) {
        const int r0 = tr * kTile;
        for (int j = ty; j < kTile; j += kFp8Threads / kTile) {
            const int r = r0 + j;
            if (r < rows && c < cols) {
                const __nv_fp8_storage_t b = stats.cast<Q>(src(r, c), scale);
                if (qb != nullptr) qb[(size_t)r * cols + c] = b;
                tile[j][tx] = b;
            }
        }
        if (qtb != nullptr) {
            __syncthreads();
            // thread (tx, ty) writes qt rows oc = column of x, columns r = r0 + tx: along a row of qt
            for (int j = ty; j < kTile; j += kFp8Threads / kTile) {
                const int oc = blockIdx.x * kTile + j, r = r0 + tx;
                if (oc < cols && r < rows) qtb[(size_t)oc * rows + r] = (__nv_fp8_storage_t)tile[tx][j];
            }
            __syncthreads();   // the tile is rewritten by the next row tile
        }
    }
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        atomicAdd(&counters->count, (unsigned long long)rows * (unsigned long long)cols);
    }
    stats.commit(counters);
}

// ---- quantize with transpose, vectorised ---------------------------------------------------------
// The same outputs and statistics as quantize_transpose_fp8_kernel, for tensors of whole 64×64
// tiles of a 16-bit source (cast_tile::fits): 16-byte loads, 8-byte stores into q, 16-byte stores
// into qt through a shared tile without bank conflicts; the geometry (which thread handles which
// bytes) is cuda/fp8_cast_tile.h's, tested on the CPU. Each block walks tiles blockIdx.x,
// blockIdx.x + gridDim.x, … and commits its statistics once.
// Naive equivalent: for r, c: b = cast(src(r, c)); q[r·cols + c] = b; qt[c·rows + r] = b.
template <typename Q, typename Source>
__global__ void __launch_bounds__(cast_tile::kThreads)
    quantize_transpose_vec_kernel(Q* q, Q* qt, Fp8Counters* counters, Source src, int rows, int cols,
                                  const float* scale_ptr) {
    namespace ct = cast_tile;
    static_assert(sizeof(typename Source::Value) == 2, "one 16-byte load is kVec values of a 16-bit type");
    const float scale = *scale_ptr;
    __shared__ alignas(16) unsigned char tile[ct::kTileBytes];
    unsigned char* qb = reinterpret_cast<unsigned char*>(q);
    unsigned char* qtb = reinterpret_cast<unsigned char*>(qt);
    const int t = threadIdx.x;
    const int tiles_c = cols / ct::kCols, tiles = (rows / ct::kRows) * tiles_c;
    ThreadCastStats stats;
    for (int tile_id = blockIdx.x; tile_id < tiles; tile_id += gridDim.x) {
        const int r0 = (tile_id / tiles_c) * ct::kRows, c0 = (tile_id % tiles_c) * ct::kCols;
#pragma unroll
        for (int p = 0; p < ct::kPasses; p++) {
            const ct::Coord at = ct::load_coord(t, p);
            float v[ct::kVec];
            src.template values<ct::kVec>(r0 + at.row, c0 + at.col, v);
            Packed<unsigned char, ct::kVec> b;
#pragma unroll
            for (int k = 0; k < ct::kVec; k++)
                b[k] = stats.cast<Q>(v[k], scale);
            if (qb != nullptr) store_packed(qb + (size_t)(r0 + at.row) * cols + c0 + at.col, b);
            store_packed(tile + ct::smem_offset(at.row, at.col), b);
        }
        if (qtb != nullptr) {
            __syncthreads();
            const ct::Coord at = ct::store_t_coord(t);   // column at.col, rows at.row … at.row + 15
            Packed<unsigned char, ct::kTBytes> column;
#pragma unroll
            for (int j = 0; j < ct::kTBytes; j++)
                column[j] = tile[ct::smem_offset(at.row + j, at.col)];
            store_packed(qtb + (size_t)(c0 + at.col) * rows + r0 + at.row, column);
            __syncthreads();   // the tile is rewritten by the next one
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        atomicAdd(&counters->count, (unsigned long long)rows * (unsigned long long)cols);
    }
    stats.commit(counters);
}

// ---- launchers -------------------------------------------------------------------------------

namespace detail {
inline unsigned fp8_blocks(size_t n, int P) {
    return unsigned(
        std::min<size_t>(kFp8MaxBlocks, std::max<size_t>(1, ceil_div<size_t>(ceil_div<size_t>(n, P), kFp8Threads))));
}
// The float whose |bits| the kernels maxed; any NaN as the canonical NaN, like the CPU twin.
inline float amax_from_bits(unsigned int bits) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return std::isnan(f) ? NAN : f;
}
}   // namespace detail

// max |x| over n values; NaN if any value is NaN. Synchronises the stream.
template <typename T>
float amax(const T* x, size_t n, cudaStream_t stream) {
    if (n == 0) return 0.0f;
    unsigned int* bits = static_cast<unsigned int*>(scratch(sizeof(unsigned int), stream));
    cudaCheck(cudaMemsetAsync(bits, 0, sizeof(unsigned int), stream));
    const bool vec = is_aligned(x, 16);   // 16-byte packs need an aligned base
    if (vec) {
        amax_kernel<kPack<T>><<<detail::fp8_blocks(n, kPack<T>), kFp8Threads, 0, stream>>>(bits, x, n);
    } else {
        amax_kernel<1><<<detail::fp8_blocks(n, 1), kFp8Threads, 0, stream>>>(bits, x, n);
    }
    cudaCheck(cudaGetLastError());
    unsigned int host = 0;
    cudaCheck(cudaMemcpyAsync(&host, bits, sizeof(host), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return detail::amax_from_bits(host);
}

// q (n) = saturate(map(x) · *scale) in Q (fp8e4m3 / fp8e5m2, or CUDA's __nv_fp8_e4m3 /
// __nv_fp8_e5m2); scale in device memory (&Fp8ScaleSlot::scale); the cast's statistics are
// accumulated into *counters (device memory); q null: statistics only. Returns at once.
template <typename T, typename Q, typename Map = Unchanged>
void quantize_fp8(Q* q, const T* x, size_t n, const float* scale, Fp8Counters* counters, cudaStream_t stream,
                  Map map = {}) {
    static_assert(sizeof(Q) == 1, "FP8 storage is one byte");
    if (n == 0) return;
    // a pack of P inputs (16 bytes) writes P bytes of q: both must be aligned to their pack
    const bool vec = is_aligned(x, 16) && is_aligned(q, kPack<T>);
    if (vec) {
        quantize_fp8_kernel<kPack<T>>
            <<<detail::fp8_blocks(n, kPack<T>), kFp8Threads, 0, stream>>>(q, counters, x, n, scale, map);
    } else {
        quantize_fp8_kernel<1><<<detail::fp8_blocks(n, 1), kFp8Threads, 0, stream>>>(q, counters, x, n, scale, map);
    }
    cudaCheck(cudaGetLastError());
}

// q (rows, cols) and/or qt (cols, rows) = qᵀ of the cast of src(r, c): quantize_transpose_fp8_kernel,
// or, with vectorised and where the shape, the source and the outputs allow it,
// quantize_transpose_vec_kernel (the same bytes and statistics).
template <typename Q, typename Source>
void quantize_transpose_source(Q* q, Q* qt, Source src, int rows, int cols, const float* scale, Fp8Counters* counters,
                               cudaStream_t stream, bool vectorised = false) {
    static_assert(sizeof(Q) == 1, "FP8 storage is one byte");
    if (rows <= 0 || cols <= 0) return;
    if constexpr (sizeof(typename Source::Value) == 2) {
        if (vectorised && cast_tile::fits(rows, cols) && src.aligned() && is_aligned(q, 16) && is_aligned(qt, 16)) {
            const int tiles = (rows / cast_tile::kRows) * (cols / cast_tile::kCols);
            quantize_transpose_vec_kernel<<<std::min(tiles, kFp8MaxBlocks), cast_tile::kThreads, 0, stream>>>(
                q, qt, counters, src, rows, cols, scale);
            cudaCheck(cudaGetLastError());
            return;
        }
    }
    // every column tile gets a block column; the row tiles are shared out so that the grid stays
    // near kFp8MaxBlocks blocks (each block walks its row tiles; see block_commit_stats)
    const int col_tiles = (cols + kTile - 1) / kTile, row_tiles = (rows + kTile - 1) / kTile;
    const int row_blocks = std::max(1, std::min({row_tiles, kFp8MaxBlocks / col_tiles, kMaxGridYZ}));
    const dim3 grid(col_tiles, row_blocks);
    quantize_transpose_fp8_kernel<<<grid, kFp8Threads, 0, stream>>>(q, qt, counters, src, rows, cols, scale);
    cudaCheck(cudaGetLastError());
}

// q (rows, cols) and/or qt (cols, rows) = qᵀ of the cast of map(x) (cpu::quantize_transpose_fp8);
// statistics accumulated into *counters (device memory); both null: statistics only. Returns at once.
// vectorised: the vectorised kernel where it applies (--fused-kernels; the same bytes).
template <typename T, typename Q, typename Map = Unchanged>
void quantize_transpose_fp8(Q* q, Q* qt, const T* x, int rows, int cols, const float* scale, Fp8Counters* counters,
                            cudaStream_t stream, Map map = {}, bool vectorised = false) {
    if (rows <= 0 || cols <= 0) return;
    if (qt == nullptr) {   // one layout (or none): the vectorised flat cast
        quantize_fp8(q, x, (size_t)rows * cols, scale, counters, stream, map);
        return;
    }
    quantize_transpose_source(q, qt, TensorSource<T, Map>{x, cols, map}, rows, cols, scale, counters, stream,
                              vectorised);
}

// ---- the scale state (fp8_scaling.h: Fp8ScaleSlot and the rules shared with the CPU) -----------

// counters->amax_bits = max(…, bits of max|x|): an amax without a cast, in device memory. Returns at once.
template <typename T>
void amax_into(const T* x, size_t n, Fp8Counters* counters, cudaStream_t stream) {
    if (n == 0) return;
    unsigned int* bits = reinterpret_cast<unsigned int*>(&counters->amax_bits);
    if (is_aligned(x, 16)) {
        amax_kernel<kPack<T>><<<detail::fp8_blocks(n, kPack<T>), kFp8Threads, 0, stream>>>(bits, x, n);
    } else {
        amax_kernel<1><<<detail::fp8_blocks(n, 1), kFp8Threads, 0, stream>>>(bits, x, n);
    }
    cudaCheck(cudaGetLastError());
}

// The amax a counters slot holds, any NaN as the canonical NaN (as to_cast_stats).
__device__ __forceinline__ float counters_amax(const Fp8Counters& c) {
    const float a = __uint_as_float(c.amax_bits);
    return is_nan_f32(a) ? __uint_as_float(0x7fc00000u) : a;
}

// (static: kernels defined in a header, one copy per translation unit)
static __global__ void fp8_scale_from_counters_kernel(Fp8ScaleSlot* slot, const Fp8Counters* counters, float fp8_max,
                                                      int margin) {
    slot->scale = fp8_scale_rule(counters_amax(*counters), fp8_max, margin, slot->scale);
    slot->inv_scale = 1.0f / slot->scale;
}

// One thread per slot: fp8_end_step_rule, as the CPU kernel set runs it.
static __global__ void fp8_end_step_kernel(Fp8ScaleSlot* slots, float* history, const Fp8Counters* counters,
                                           const float* amaxes, int n, int n_e4m3, int H, bool most_recent, int margin,
                                           bool delayed) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float amax = amaxes != nullptr ? amaxes[i] : counters_amax(counters[i]);
    fp8_end_step_rule(slots[i], history + (size_t)i * H, amax, i < n_e4m3 ? fp8e4m3::max_finite : fp8e5m2::max_finite,
                      H, most_recent, margin, delayed);
}

static __global__ void fp8_amaxes_kernel(float* amaxes, const Fp8Counters* counters, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) amaxes[i] = counters_amax(counters[i]);
}

// slot: the just-in-time scale from the amax in *counters. Returns at once.
inline void fp8_scale_from_counters(Fp8ScaleSlot* slot, const Fp8Counters* counters, float fp8_max, int margin,
                                    cudaStream_t stream) {
    fp8_scale_from_counters_kernel<<<1, 1, 0, stream>>>(slot, counters, fp8_max, margin);
    cudaCheck(cudaGetLastError());
}

// Every slot's end of step in one launch (Fp8Ops::fp8_end_step). Returns at once.
inline void fp8_end_step(Fp8ScaleSlot* slots, float* history, const Fp8Counters* counters, const float* amaxes, int n,
                         int n_e4m3, int H, bool most_recent, int margin, bool delayed, cudaStream_t stream) {
    if (n <= 0) return;
    fp8_end_step_kernel<<<(n + 127) / 128, 128, 0, stream>>>(slots, history, counters, amaxes, n, n_e4m3, H,
                                                             most_recent, margin, delayed);
    cudaCheck(cudaGetLastError());
}

inline void fp8_amaxes(float* amaxes, const Fp8Counters* counters, int n, cudaStream_t stream) {
    if (n <= 0) return;
    fp8_amaxes_kernel<<<(n + 127) / 128, 128, 0, stream>>>(amaxes, counters, n);
    cudaCheck(cudaGetLastError());
}

}   // namespace train_gpt::cuda
