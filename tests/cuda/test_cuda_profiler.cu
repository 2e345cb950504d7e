// test_cuda_profiler.cu — --profile's per-op GPU timing (cuda/op_profiler.cuh): scopes
// around work on a stream are summed per op after a synchronisation, and printed with their
// calls, times and categories; a disabled profiler records nothing.
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/test_stream.h"

#include "cuda/op_profiler.cuh"

#include <cstdio>
#include <string>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {
std::string printed(const cuda::OpProfiler& p) {
    std::FILE* f = std::tmpfile();
    p.print(f);
    std::rewind(f);
    std::string text;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), f) != nullptr)
        text += buf;
    std::fclose(f);
    return text;
}
}   // namespace

TEST_F(CudaTest, ProfilerSumsGpuTimePerOp) {
    TestStream stream;
    void* buf = nullptr;
    const size_t bytes = 256u << 20;   // 256 MiB fills: long enough to time
    cudaCheck(cudaMalloc(&buf, bytes));
    cuda::OpProfiler prof(true);
    for (int i = 0; i < 3; i++) {
        const cuda::OpProfiler::Scope timed(&prof, "zero", stream.s);
        cudaCheck(cudaMemsetAsync(buf, i, bytes, stream.s));
    }
    {
        const cuda::OpProfiler::Scope timed(&prof, "matmul_forward", stream.s);
        cudaCheck(cudaMemsetAsync(buf, 7, bytes / 2, stream.s));
    }
    cudaCheck(cudaStreamSynchronize(stream.s));
    prof.drain();
    const std::string text = printed(prof);
    cudaCheck(cudaFree(buf));
    EXPECT_NE(text.find("profile: GPU time in Backend ops"), std::string::npos) << text;
    EXPECT_NE(text.find("profile: zero"), std::string::npos) << text;
    EXPECT_NE(text.find("profile: matmul_forward"), std::string::npos) << text;
    EXPECT_NE(text.find("categories: fill"), std::string::npos) << text;   // alphabetical: fill, gemm
    EXPECT_NE(text.find(" gemm "), std::string::npos) << text;
    // zero: 3 calls, listed first (1.5 fills' worth of time against matmul_forward's half fill)
    const size_t zero_line = text.find("profile: zero"), mm_line = text.find("profile: matmul_forward");
    EXPECT_LT(zero_line, mm_line) << text;
    int calls = 0;
    EXPECT_EQ(std::sscanf(text.c_str() + zero_line, "profile: zero %d", &calls), 1);
    EXPECT_EQ(calls, 3);

    cuda::OpProfiler off(false);   // disabled: the backend passes no profiler to its scopes
    { const cuda::OpProfiler::Scope timed(off.enabled() ? &off : nullptr, "zero", stream.s); }
    off.drain();
    EXPECT_EQ(printed(off), "");
}
