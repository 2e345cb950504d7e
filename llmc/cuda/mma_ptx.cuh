// cuda/mma_ptx.cuh — the warp-level PTX the flash attention is written in, one inline-asm
// wrapper per instruction: mma.sync.m16n8k16 (bf16 / f16 in, FP32 accumulate), ldmatrix.x4
// (with and without .trans), cp.async (16-byte and 4-byte, zero-filling past the source) with its
// commit / wait, and the packing of two FP32 values into one register of two 16-bit values.
// Which lane holds which element of each register is in mma_fragments.h (host-testable).
// Requires sm_80 or later (sm_90a here).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace train_gpt::cuda::ptx {

// The 32-bit shared-state-space address of a pointer into shared memory.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// d (16×8 FP32, 4 regs) = a (16×16, 4 regs) · b (16×8, 2 regs) + d. T: __nv_bfloat16 or __half.
// Naive: d[m][n] += Σ_k a[m][k]·b[k][n], element ownership as mma_fragments.h a/b/c_coord.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        static_assert(std::is_same_v<T, __half>, "mma_16816: T must be __nv_bfloat16 or __half");
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// r[j] = matrix j's fragment; this lane supplies the address of one row (mma_fragments.h
// x4_lane_address). The "memory" clobber keeps every ldmatrix after the cp.async wait and the
// barrier that publish its tile, and before the barrier that lets the tile be overwritten. Naive: r[j] = two 16-bit elements of matrix j at ldmatrix_coord(lane, e, false).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
// The same, each matrix read column-major. Naive: r[j] = elements at ldmatrix_coord(lane, e, true).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// 16 bytes global → shared, asynchronously; zeros instead when !valid (nothing is read then, but
// src must still be a valid address). Naive: *(uint4*)dst = valid ? *(uint4*)src : 0.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 4 bytes, the same way. Naive: *(float*)dst = valid ? *(float*)src : 0.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
    const int src_bytes = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// Closes the group of this thread's cp.async issued since the previous commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are pending (groups complete in
// commit order). Other threads' copies are visible only after a following __syncthreads().
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Two FP32 values rounded (nearest even) to T, lo in bits 0-15 (the lower-indexed element of an
// mma fragment register), hi in bits 16-31. Naive: bits(round_T(lo)) | bits(round_T(hi)) << 16.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);   // .x = lo (low half), .y = hi
        uint32_t u;
        memcpy(&u, &v, sizeof(u));   // a register move
        return u;
    } else {
        static_assert(std::is_same_v<T, __half>, "pack2: T must be __nv_bfloat16 or __half");
        const __half2 v = __floats2half2_rn(lo, hi);   // .x = lo (low half), .y = hi
        uint32_t u;
        memcpy(&u, &v, sizeof(u));
        return u;
    }
}
// The value round_T(x) as FP32 (what an mma reads for x packed by pack2).
template <typename T>
__device__ __forceinline__ float round_to(float x) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
        return __bfloat162float(__float2bfloat16_rn(x));
    else
        return __half2float(__float2half_rn(x));
}
// The two 16-bit values of a register as FP32: lo (bits 0-15), hi (bits 16-31).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t w) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        __nv_bfloat162 v;
        memcpy(&v, &w, sizeof(w));
        return __bfloat1622float2(v);
    } else {
        __half2 v;
        memcpy(&v, &w, sizeof(w));
        return __half22float2(v);
    }
}

}   // namespace train_gpt::cuda::ptx
