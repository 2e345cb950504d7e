// test_cuda_profiler.cu — --profile's per-op GPU timing (cuda/op_profiler.cuh): scopes
// around work on a stream are summed per op after a synchronisation, and printed with their
// calls, times and categories; a disabled profiler records nothing; a scope inside another is
// part of the outer op (before: the inner scope overwrote the outer's open pair, the outer's
// events leaked and the inner op was counted twice).
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

TEST(OpProfilerNesting, OnlyTheOutermostScopeTimes) {   // host-side: the rule the profiler follows
    cuda::ScopeNesting n;
    EXPECT_TRUE(n.enter());    // attention_forward_e4m3
    EXPECT_FALSE(n.enter());   // its attention_forward: part of it
    EXPECT_FALSE(n.leave());
    EXPECT_FALSE(n.enter());   // its quantize: part of it
    EXPECT_FALSE(n.leave());
    EXPECT_TRUE(n.leave());   // the outer op ends: timed once
    EXPECT_TRUE(n.enter());   // the next op
    EXPECT_TRUE(n.leave());
}

TEST_F(CudaTest, ProfilerCountsANestedScopeOnceAsTheOuterOp) {
    TestStream stream;
    void* buf = nullptr;
    const size_t bytes = 64u << 20;
    cudaCheck(cudaMalloc(&buf, bytes));
    cuda::OpProfiler prof(true);
    for (int i = 0; i < 4; i++) {
        const cuda::OpProfiler::Scope outer(&prof, "attention_forward_e4m3", stream.s);
        cudaCheck(cudaMemsetAsync(buf, i, bytes, stream.s));
        {
            const cuda::OpProfiler::Scope inner(&prof, "attention_forward", stream.s);
            cudaCheck(cudaMemsetAsync(buf, i + 1, bytes, stream.s));
        }
    }
    cudaCheck(cudaStreamSynchronize(stream.s));
    prof.drain();
    const std::string text = printed(prof);
    cudaCheck(cudaFree(buf));
    int calls = 0;
    const size_t line = text.find("profile: attention_forward_e4m3");
    ASSERT_NE(line, std::string::npos) << text;
    EXPECT_EQ(std::sscanf(text.c_str() + line, "profile: attention_forward_e4m3 %d", &calls), 1);
    EXPECT_EQ(calls, 4) << text;
    EXPECT_EQ(text.find("profile: attention_forward "), std::string::npos) << "the inner op is part of the outer\n"
                                                                           << text;
    // one pair per outer call (none drained in between: 4 pending); the old order made two per call
    EXPECT_EQ(prof.events_created(), 2u * 4) << "a nested scope must not leak the outer's events";
}
