// test_stream.h — a CUDA stream of a test's own, for tests that call the cuda:: launchers
// directly: its cuBLASLt context and scratch buffer are released before it is destroyed.
#pragma once

#include "cuda/matmul.cuh"   // release_gemm_context; cuda/common.cuh: release_scratch, cudaCheck

#include <cuda_runtime.h>

namespace train_gpt::test {

struct TestStream {
    cudaStream_t s = nullptr;
    TestStream() { cudaCheck(cudaStreamCreate(&s)); }
    ~TestStream() {
        try {
            cuda::release_gemm_context(s);
            cuda::release_scratch(s);
        } catch (...) {
        }
        cudaStreamDestroy(s);
    }
    TestStream(const TestStream&) = delete;
    TestStream& operator=(const TestStream&) = delete;
};

}   // namespace train_gpt::test
