// cuda/common.cuh — what every CUDA kernel of the kernel set shares: the error check, 16-byte
// vectorised loads and stores, warp and block reductions, the storage-type conversions, and the
// device scratch buffer the launchers carve temporaries from.
//
// Numerics contract (the same as cpu/kernels.h): arithmetic in FP32, statistics and reductions
// in FP32 (double where the CPU twin uses double), and every value stored into a 16-bit buffer
// rounded to nearest even exactly once, with CUDA's _rn conversions — bit-identical to
// dtypes.h's bf16::from_float / fp16::from_float (checked in tests/test_dtypes.cpp).
//
// Launchers (one per op, in the headers beside this one) take the arguments of their cpu::
// twin in the same order, FP32 where the CPU has acc_t<T>, then a cudaStream_t. Every kernel of
// a launcher runs on that stream; the scratch buffer below belongs to the stream, so launchers
// on one stream share it in stream order and two streams (two backends) never share one.
#pragma once

#include <type_traits>

#include "utils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace train_gpt::cuda {

// ---- errors --------------------------------------------------------------------------------

// Throws train_gpt::Error naming the file and line of the failing CUDA call.
inline void cuda_check(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) {
        fail("CUDA error at %s:%d: %s (%s)", file, line, cudaGetErrorString(err), cudaGetErrorName(err));
    }
}
#define cudaCheck(expr) ::train_gpt::cuda::cuda_check((expr), __FILE__, __LINE__)

// A launcher's precondition: fails with the condition, where it is, and why it must hold.
#define TG_CUDA_REQUIRE(cond, why)                                                                            \
    do {                                                                                                      \
        if (!(cond)) ::train_gpt::fail("%s:%d: requirement `%s` failed: %s", __FILE__, __LINE__, #cond, why); \
    } while (0)

// ---- small integer helpers -----------------------------------------------------------------

template <typename I>
__host__ __device__ constexpr I ceil_div(I a, I b) {
    return (a + b - 1) / b;
}
template <typename I>
__host__ __device__ constexpr I round_up(I a, I b) {
    return ceil_div(a, b) * b;
}
inline bool is_aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The largest grid y and z dimension (CUDA's limit; some cuBLASLt kernels put the GEMM batch there).
inline constexpr int kMaxGridYZ = 65535;
// The grid of a grid-stride loop: at most this many blocks, which fill an H200 (132 SMs) several
// times over; more would only add scheduling.
inline constexpr size_t kGridStrideMaxBlocks = 8192;

// Blocks of `block_size` threads covering `threads` threads: a grid's x dimension (≤ 2³¹ − 1).
inline unsigned grid_1d(size_t threads, int block_size) {
    const size_t blocks = ceil_div<size_t>(threads, size_t(block_size));
    TG_CUDA_REQUIRE(blocks <= size_t(INT32_MAX), "a 1-D grid has at most 2^31 - 1 blocks");
    return unsigned(blocks);
}

// ---- storage ↔ FP32 ------------------------------------------------------------------------
// In a kernel templated on the storage type T: float v = to_float(x[i]); y[i] = from_float<T>(v);

__host__ __device__ __forceinline__ float to_float(float x) { return x; }
__host__ __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__host__ __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__host__ __device__ T from_float(float f);
template <>
__host__ __device__ __forceinline__ float from_float<float>(float f) {
    return f;
}
template <>
__host__ __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float f) {
    return __float2bfloat16_rn(f);   // round to nearest even; NaN → 0x7fff, overflow → ±inf
}
template <>
__host__ __device__ __forceinline__ __half from_float<__half>(float f) {
    return __float2half_rn(f);   // round to nearest even; NaN → 0x7fff, ≥ 65520 → ±inf
}

// ---- vectorised memory access --------------------------------------------------------------
// Packed<T, N>: N values of T moved by one aligned access of N·sizeof(T) bytes (1 … 16).
// Packed128<T> is the 16-byte pack (4 floats, 8 bf16/fp16) — one LDG.128 / STG.128, the widest
// load a thread can issue. Pointers handed to load/store must be aligned to the pack size; the
// launchers check that and fall back to N = 1 when a buffer or a row stride is not aligned.

template <typename T, int N>
struct alignas(sizeof(T) * N) Packed {
    static constexpr int size = N;
    T v[N];
    __device__ __forceinline__ T& operator[](int i) { return v[i]; }
    __device__ __forceinline__ const T& operator[](int i) const { return v[i]; }
};
template <typename T>
using Packed128 = Packed<T, 16 / sizeof(T)>;

namespace detail {
// The machine type that moves `Bytes` bytes in one instruction.
template <int Bytes>
struct RawBits;
template <>
struct RawBits<1> {
    using type = unsigned char;
};
template <>
struct RawBits<2> {
    using type = unsigned short;
};
template <>
struct RawBits<4> {
    using type = unsigned int;
};
template <>
struct RawBits<8> {
    using type = uint2;
};
template <>
struct RawBits<16> {
    using type = uint4;
};
template <typename T, int N>
using raw_t = typename RawBits<int(sizeof(T)) * N>::type;

template <typename To, typename From>
__device__ __forceinline__ To bit_cast(const From& from) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
    To to;
    memcpy(&to, &from, sizeof(To));   // compiles to register moves
    return to;
}
}   // namespace detail

// p[0..N) in one access. Naive equivalent: for (k) out[k] = p[k];
template <int N, typename T>
__device__ __forceinline__ Packed<T, N> load_packed(const T* p) {
    using Raw = detail::raw_t<T, N>;
    return detail::bit_cast<Packed<T, N>>(*reinterpret_cast<const Raw*>(p));
}
// Same, with the cache-streaming hint (ld.global.cs): for data read once, so it does not evict
// data that will be reused from L1/L2.
template <int N, typename T>
__device__ __forceinline__ Packed<T, N> load_packed_cs(const T* p) {
    using Raw = detail::raw_t<T, N>;
    return detail::bit_cast<Packed<T, N>>(__ldcs(reinterpret_cast<const Raw*>(p)));
}
// p[0..N) = value in one access. Naive equivalent: for (k) p[k] = value[k];
template <int N, typename T>
__device__ __forceinline__ void store_packed(T* p, const Packed<T, N>& value) {
    using Raw = detail::raw_t<T, N>;
    *reinterpret_cast<Raw*>(p) = detail::bit_cast<Raw>(value);
}
template <int N, typename T>
__device__ __forceinline__ void store_packed_cs(T* p, const Packed<T, N>& value) {
    using Raw = detail::raw_t<T, N>;
    __stcs(reinterpret_cast<Raw*>(p), detail::bit_cast<Raw>(value));
}

// The pack width a launcher uses for buffers of T: 16 bytes when every pointer is 16-byte
// aligned (and, for row-wise kernels, the row length a multiple of it), else 1.
template <typename T>
constexpr int kPack = 16 / int(sizeof(T));

// A launcher's choice between a kernel's 16-byte-pack and scalar instantiations:
// launch(std::integral_constant<int, P>) with P = kPack<T> where `vectorised`, else P = 1.
//     launch_packed<T>(vec, [&](auto pack) { kernel<decltype(pack)::value><<<grid, block>>>(...); });
template <typename T, typename Launch>
void launch_packed(bool vectorised, Launch&& launch) {
    if (vectorised) {
        launch(std::integral_constant<int, kPack<T>>{});
    } else {
        launch(std::integral_constant<int, 1>{});
    }
}

// ---- reductions ----------------------------------------------------------------------------
// Butterfly (xor) shuffles: after log2(32) steps every lane holds the full result, and the same
// bits in every lane (at each step lane i adds v_i + v_(i^m), lane i^m adds v_(i^m) + v_i, equal
// because FP addition is commutative). Fixed order → deterministic from run to run.
// Naive equivalent: v = Σ_{lane} v_lane (in a fixed tree order).

constexpr unsigned kFullMask = 0xffffffffu;

template <typename F>
__device__ __forceinline__ F warp_reduce_sum(F v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
// max; a NaN is dropped unless every value is NaN (fmaxf), like std::max(acc, x) on the CPU.
__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

// Reduction over a 1-D block (blockDim.x a multiple of 32, ≤ 1024); every thread gets the
// result. Warps reduce, lane 0 of each writes its warp's value to shared memory, then every warp
// reduces the per-warp values (so no second broadcast is needed). The leading __syncthreads
// makes back-to-back calls safe (the previous call's readers are done with `shared`).
template <typename F, typename WarpReduce>
__device__ __forceinline__ F block_reduce(F v, WarpReduce warp_reduce, F identity) {
    __shared__ F shared[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    v = warp_reduce(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < num_warps ? shared[lane] : identity;
    return warp_reduce(v);
}
template <typename F>
__device__ __forceinline__ F block_reduce_sum(F v) {
    return block_reduce(
        v, [](F x) { return warp_reduce_sum(x); }, F(0));
}
__device__ __forceinline__ float block_reduce_max(float v) {
    return block_reduce(
        v, [](float x) { return warp_reduce_max(x); }, -INFINITY);
}

// ---- scratch memory ------------------------------------------------------------------------
// One grow-only device buffer per (device, stream) for launchers' temporaries (partial sums, sort
// buffers, counters, attention's score matrices). A launcher asks for all it needs at once
// (ScratchLayout) and uses it only for the kernels it launches on that stream; the next
// launcher's kernels are ordered after them by the stream. Growing synchronises the device
// before freeing the old buffer, so no kernel still reads it. Whoever owns a stream releases its
// buffer with release_scratch(stream) before destroying the stream (the CUDA backend does).
namespace detail {
struct ScratchBuffer {
    void* buffer = nullptr;
    size_t capacity = 0;
};
// Never destroyed (a static destructor would run after the CUDA runtime is torn down at exit).
inline std::map<std::pair<int, cudaStream_t>, ScratchBuffer>& scratch_registry() {
    static auto* registry = new std::map<std::pair<int, cudaStream_t>, ScratchBuffer>();
    return *registry;
}
inline std::mutex& scratch_mutex() {
    static auto* mutex = new std::mutex();
    return *mutex;
}
}   // namespace detail

inline void* scratch(size_t bytes, cudaStream_t stream) {
    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(detail::scratch_mutex());
    detail::ScratchBuffer& s = detail::scratch_registry()[{device, stream}];
    if (bytes > s.capacity) {
        if (s.buffer != nullptr) {
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaFree(s.buffer));
            s.buffer = nullptr;
        }
        const size_t grown = s.capacity + s.capacity / 2;
        const size_t wanted = round_up<size_t>(bytes > grown ? bytes : grown, size_t(1) << 20);
        s.capacity = 0;   // until the allocation succeeds: a failed cudaMalloc leaves no buffer
        cudaCheck(cudaMalloc(&s.buffer, wanted));
        s.capacity = wanted;
    }
    return s.buffer;
}

// Frees the scratch buffer of `stream` on the current device, if any (call before destroying the
// stream; waits for the stream first).
inline void release_scratch(cudaStream_t stream) {
    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(detail::scratch_mutex());
    auto it = detail::scratch_registry().find({device, stream});
    if (it == detail::scratch_registry().end()) return;
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaFree(it->second.buffer));
    detail::scratch_registry().erase(it);
}

// Offsets of the sub-buffers a launcher carves from the scratch buffer, each 256-byte aligned.
struct ScratchLayout {
    size_t bytes = 0;
    size_t add(size_t n) {
        const size_t offset = round_up<size_t>(bytes, 256);
        bytes = offset + n;
        return offset;
    }
};
template <typename P>
inline P* at_offset(void* base, size_t offset) {
    return reinterpret_cast<P*>(static_cast<char*>(base) + offset);
}

}   // namespace train_gpt::cuda
