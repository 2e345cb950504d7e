// test_cuda_attention_flash.cu — the tensor-core flash attention (llmc/cuda/attention_flash.cuh)
// against the exact op cpu::attention_forward / attention_backward and against its host twin
// cpu::attention_forward_tiled / attention_backward_tiled (the kernel's algorithm on the CPU), in
// bf16 and fp16, on shapes with T = 1, 64, 77, 203, 1024 and B·NH > 1.
//
// Method: random inputs from a fixed seed (cuda_test_util.h; TG_TEST_SEED=<n> sets another), the
// launchers called directly on a stream of the test's own; out, lse and dqkv poisoned with 0xff
// bytes (NaN) before every launch, so an element left unwritten fails. Tolerances
// (tests/attention_bounds.h): a bound per element derived from the formats — one rounding of each
// probability to T on either side plus FP32 slack, the stores, and for the backward P and dS
// propagated through dq, dk, dv. The GPU is held to that bound against the exact op and against
// the twin (any two implementations that round each term once satisfy it). The twin and the
// kernel run the same roundings at the same places (their only differences are the FP32 order
// inside an mma and the device's exp2f / logf), so most elements are bit-identical (printed), but
// a flipped rounding of any p_j may still move an output by 2u·Σ_j P_j·|v_j|: no bound tighter
// than the element-wise one follows.
// The backward must OVERWRITE dqkv: a run on a poisoned buffer and a run on a buffer of random
// values give the same bits (every element written, nothing accumulated, and deterministic).
// Without a GPU every test of the fixture reports SKIPPED with the reason; the two host-only
// tests at the end (the support predicate, the launchers' argument checks) run anywhere.
// cuDNN's fused attention (--attention cudnn, cuda/attention_cudnn.h) is held to the same bounds
// against the exact op, and to the same overwrite and determinism checks (CudaAttentionCudnnTest;
// SKIPPED where the build has no cuDNN attention, saying why). The wide backward
// (--flash-backward wide, cuda/attention_flash_bwd_wide.cuh) is held to the flash bounds and must
// equal the default kernels' values.
#include "tests/attention_bounds.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/test_stream.h"

#include "tests/twins/attention_tiled.h"
#include "cpu/kernels.h"
#include "cuda/attention_cudnn.h"
#include "cuda/attention_flash.cuh"
#include "cuda/attention_flash_bwd_wide.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;
namespace gpu = train_gpt::cuda;

namespace {

constexpr int kHs = 64;

struct Shape {
    int B, T, NH;
};
const Shape kShapes[] = {{1, 1, 2}, {2, 64, 3}, {2, 77, 2}, {1, 203, 4}, {2, 1024, 2}};

std::string shape_str(const Shape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH) + " hs=64";
}

// f(H{}, D{}): H the host storage type (dtypes.h), D the device type with the same bytes.
template <typename F>
void with_types(DType d, F f) {
    if (d == DType::BF16)
        f(bf16{}, __nv_bfloat16{});
    else
        f(fp16{}, __half{});
}

template <typename P>
struct DeviceBuffer {
    P* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) { cudaCheck(cudaMalloc(&ptr, std::max<size_t>(1, n) * sizeof(P))); }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    template <typename H>
    void upload(const std::vector<H>& h) {
        static_assert(sizeof(H) == sizeof(P), "same element size");
        cudaCheck(cudaMemcpy(ptr, h.data(), n * sizeof(P), cudaMemcpyHostToDevice));
    }
    template <typename H>
    std::vector<H> download() const {
        std::vector<H> h(n);
        cudaCheck(cudaMemcpy(h.data(), ptr, n * sizeof(P), cudaMemcpyDeviceToHost));
        return h;
    }
    void poison() { cudaCheck(cudaMemset(ptr, 0xff, n * sizeof(P))); }
};

template <typename H>
std::vector<H> random_h(Random& r, size_t n, double stddev) {
    const std::vector<float> f = r.normal(n, stddev);
    std::vector<H> h(n);
    for (size_t i = 0; i < n; i++)
        h[i] = H::from_float(f[i]);
    return h;
}
template <typename H>
std::vector<float> floats(const std::vector<H>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); i++)
        f[i] = v[i].to_float();
    return f;
}

RoundingUnit rounding_of(DType d) { return d == DType::BF16 ? kBf16Rounding : kFp16Rounding; }

BoundCheck expect_within(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref,
                         const std::vector<double>& bound) {
    const BoundCheck c = check_within(got.data(), ref.data(), bound.data(), ref.size());
    print_check(what.c_str(), c);
    EXPECT_EQ(c.violations, 0u) << what << ": " << c.violations << " of " << c.checked
                                << " elements outside the bound (NaN = unwritten); first at " << c.first_violation
                                << ": " << got[c.first_violation] << " vs " << ref[c.first_violation] << " (bound "
                                << bound[c.first_violation] << ")";
    return c;
}

// The kernel under test: the hand-written flash attention, or cuDNN's (which has no tiled twin).
// kFlashWide: the flash forward with the wide backward kernels (--flash-backward wide)
enum class Impl { kFlash, kCudnn, kFlashWide };

void check_forward(DType dtype, const Shape& s, uint64_t seed, Impl impl = Impl::kFlash) {
    SCOPED_TRACE(shape_str(s));
    with_types(dtype, [&](auto htag, auto dtag) {
        using H = decltype(htag);
        using D = decltype(dtag);
        const int B = s.B, T = s.T, NH = s.NH, C = NH * kHs;
        Random r(seed);
        const std::vector<H> qkv = random_h<H>(r, (size_t)B * T * 3 * C, 1.5);   // peaked softmax rows too
        std::vector<H> out_cpu((size_t)B * T * C), out_twin(out_cpu.size());
        std::vector<float> lse_cpu((size_t)B * NH * T), lse_twin(lse_cpu.size());
        cpu::attention_forward(out_cpu.data(), lse_cpu.data(), qkv.data(), B, T, C, NH);
        cpu::attention_forward_tiled(out_twin.data(), lse_twin.data(), qkv.data(), B, T, C, NH);

        DeviceBuffer<D> d_qkv(qkv.size()), d_out(out_cpu.size());
        DeviceBuffer<float> d_lse(lse_cpu.size());
        d_qkv.upload(qkv);
        d_out.poison();
        d_lse.poison();
        TestStream stream;
        if (impl == Impl::kCudnn)
            attention_forward_cudnn(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, dtype, stream.s);
        else
            gpu::attention_forward_flash<D>(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream.s);
        cudaCheck(cudaStreamSynchronize(stream.s));
        const std::vector<float> out_gpu = floats(d_out.template download<H>()),
                                 lse_gpu = d_lse.template download<float>();

        std::vector<double> out_bound, lse_bound;
        const std::vector<float> out_ref = floats(out_cpu);
        attention_forward_bounds(out_bound, lse_bound, floats(qkv).data(), out_ref.data(), lse_cpu.data(), B, T, NH,
                                 rounding_of(dtype));
        expect_within("out: cuda vs exact op", out_gpu, out_ref, out_bound);
        expect_within("lse: cuda vs exact op", lse_gpu, lse_cpu, lse_bound);
        if (impl == Impl::kCudnn) return;
        expect_within("out: cuda vs tiled twin", out_gpu, floats(out_twin), out_bound);
        expect_within("lse: cuda vs tiled twin", lse_gpu, lse_twin, lse_bound);
    });
}

void check_backward(DType dtype, const Shape& s, uint64_t seed, Impl impl = Impl::kFlash) {
    SCOPED_TRACE(shape_str(s));
    with_types(dtype, [&](auto htag, auto dtag) {
        using H = decltype(htag);
        using D = decltype(dtag);
        const int B = s.B, T = s.T, NH = s.NH, C = NH * kHs;
        Random r(seed);
        const std::vector<H> qkv = random_h<H>(r, (size_t)B * T * 3 * C, 1.5);
        const std::vector<H> dout = random_h<H>(r, (size_t)B * T * C, 1.0);
        const std::vector<H> dqkv_random = random_h<H>(r, qkv.size(), 0.1);
        // every backward reads the exact forward's out and lse
        std::vector<H> out((size_t)B * T * C);
        std::vector<float> lse((size_t)B * NH * T);
        cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        std::vector<H> dqkv_cpu(qkv.size(), H::from_float(0.0f)), dqkv_twin(qkv.size());
        cpu::attention_backward(dqkv_cpu.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
        cpu::attention_backward_tiled(dqkv_twin.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);

        DeviceBuffer<D> d_qkv(qkv.size()), d_dout(dout.size()), d_out(out.size()), d_dqkv(qkv.size()),
            d_dqkv2(qkv.size());
        DeviceBuffer<float> d_lse(lse.size());
        d_qkv.upload(qkv);
        d_dout.upload(dout);
        d_out.upload(out);
        d_lse.upload(lse);
        d_dqkv.poison();               // run 1: every element must be written
        d_dqkv2.upload(dqkv_random);   // run 2: must be overwritten, not accumulated into
        TestStream stream;
        D* const targets[2] = {d_dqkv.ptr, d_dqkv2.ptr};
        for (D* dst : targets) {
            if (impl == Impl::kCudnn)
                attention_backward_cudnn(dst, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, dtype,
                                         stream.s);
            else if (impl == Impl::kFlashWide)
                gpu::attention_backward_flash_wide<D>(dst, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                                      stream.s);
            else
                gpu::attention_backward_flash<D>(dst, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                                 stream.s);
        }
        cudaCheck(cudaStreamSynchronize(stream.s));
        const std::vector<H> got = d_dqkv.template download<H>(), got2 = d_dqkv2.template download<H>();

        std::vector<double> bound;
        const std::vector<float> ref = floats(dqkv_cpu), gpu_f = floats(got);
        attention_backward_bounds(bound, floats(qkv).data(), floats(dout).data(), floats(out).data(), lse.data(),
                                  ref.data(), B, T, NH, rounding_of(dtype));
        expect_within("dqkv: cuda vs exact op", gpu_f, ref, bound);
        if (impl != Impl::kCudnn) expect_within("dqkv: cuda vs tiled twin", gpu_f, floats(dqkv_twin), bound);
        EXPECT_EQ(0, std::memcmp(got.data(), got2.data(), got.size() * sizeof(H)))
            << "attention_backward_flash: a run into a buffer of random values differs from a run into a poisoned "
               "one (not deterministic, or accumulating instead of overwriting)";
        if (impl == Impl::kFlashWide) {
            // the same values as the default kernels: both add the same products in the same order
            // (attention_flash_bwd_wide.cuh; the host twin shows it for its emulated mma, this for the
            // tensor cores). == takes −0 for +0.
            d_dqkv2.poison();
            gpu::attention_backward_flash<D>(d_dqkv2.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                             stream.s);
            cudaCheck(cudaStreamSynchronize(stream.s));
            const std::vector<float> by_default = floats(d_dqkv2.template download<H>());
            size_t differ = 0;
            for (size_t i = 0; i < gpu_f.size(); i++)
                differ += !(gpu_f[i] == by_default[i]);
            EXPECT_EQ(differ, 0u) << "of " << gpu_f.size() << " elements of dqkv differ from the default kernels'";
        }
    });
}

}   // namespace

class CudaAttentionFlashTest : public CudaTest, public ::testing::WithParamInterface<DType> {};

TEST_P(CudaAttentionFlashTest, ForwardMatchesExactOpAndTwin) {
    for (const Shape& s : kShapes)
        check_forward(GetParam(), s, seed_);
}

TEST_P(CudaAttentionFlashTest, BackwardMatchesExactOpAndTwinOverwritesAndIsDeterministic) {
    for (const Shape& s : kShapes)
        check_backward(GetParam(), s, seed_ + 1);
}

// The wide backward (cuda/attention_flash_bwd_wide.cuh): the same bounds, overwrite and determinism,
// and the default kernels' values (check_backward).
TEST_P(CudaAttentionFlashTest, WideBackwardMatchesExactOpTwinAndDefaultKernels) {
    for (const Shape& s : kShapes)
        check_backward(GetParam(), s, seed_ + 1, Impl::kFlashWide);
}

INSTANTIATE_TEST_SUITE_P(Bf16Fp16, CudaAttentionFlashTest, ::testing::Values(DType::BF16, DType::F16),
                         dtype_param_name);

class CudaAttentionCudnnTest : public CudaAttentionFlashTest {
  protected:
    void SetUp() override {
        CudaAttentionFlashTest::SetUp();
        if (IsSkipped()) return;
        std::string why;
        if (!cudnn_attention_available(&why)) GTEST_SKIP() << why;
    }
};

TEST_P(CudaAttentionCudnnTest, ForwardMatchesExactOp) {
    for (const Shape& s : kShapes)
        check_forward(GetParam(), s, seed_, Impl::kCudnn);
}

TEST_P(CudaAttentionCudnnTest, BackwardMatchesExactOpOverwritesAndIsDeterministic) {
    for (const Shape& s : kShapes)
        check_backward(GetParam(), s, seed_ + 1, Impl::kCudnn);
}

INSTANTIATE_TEST_SUITE_P(Bf16Fp16, CudaAttentionCudnnTest, ::testing::Values(DType::BF16, DType::F16),
                         dtype_param_name);

// ---- host-only: no device needed ------------------------------------------------------------

TEST(AttentionFlashHost, SupportsHeadSize64InBf16AndFp16Only) {
    EXPECT_TRUE(gpu::attention_flash_supports(64, DType::BF16));
    EXPECT_TRUE(gpu::attention_flash_supports(64, DType::F16));
    EXPECT_FALSE(gpu::attention_flash_supports(64, DType::F32));
    for (int hs : {32, 96, 128})
        EXPECT_FALSE(gpu::attention_flash_supports(hs, DType::BF16)) << hs;
}

// The launchers check their arguments before any CUDA call.
TEST(AttentionFlashHost, LaunchersRejectOtherHeadSizesAndMisalignedBuffers) {
    using E = __nv_bfloat16;
    EXPECT_CONTAINS(error_of([] { gpu::attention_forward_flash<E>(nullptr, nullptr, nullptr, 1, 8, 192, 2, nullptr); }),
                    "head size");
    EXPECT_CONTAINS(error_of([] {
                        gpu::attention_backward_flash<E>(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 128, 1,
                                                         nullptr);
                    }),
                    "head size");
    EXPECT_CONTAINS(error_of([] {
                        gpu::attention_backward_flash_wide<E>(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 128, 1,
                                                              nullptr);
                    }),
                    "head size");
    const E* misaligned = reinterpret_cast<const E*>(uintptr_t(8));
    EXPECT_CONTAINS(
        error_of([&] { gpu::attention_forward_flash<E>(nullptr, nullptr, misaligned, 1, 8, 128, 2, nullptr); }),
        "16-byte aligned");
}

// cuDNN's attention is in the build exactly where the Makefile can build it (cudnn.h beside the
// CUDA headers and cudnn-frontend's headers in third_party/, which scripts/setup.sh fetches), and
// says why not elsewhere; its launchers refuse the head sizes cuDNN's fused attention lacks before
// any CUDA call.
TEST(AttentionCudnnHost, TheBuildHasItWhereCudnnAndItsFrontendAre) {
    const std::string cuda_home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
    const bool buildable = file_exists(cuda_home + "/include/cudnn.h") &&
                           file_exists(repo_root() + "/third_party/cudnn_frontend/include/cudnn_frontend.h");
    std::string why;
    EXPECT_EQ(cudnn_attention_available(&why), buildable) << why;
    if (!buildable) EXPECT_CONTAINS(why, "no cuDNN attention");
    if (!buildable) return;
    EXPECT_CONTAINS(
        error_of([] { attention_forward_cudnn(nullptr, nullptr, nullptr, 1, 8, 100, 2, DType::BF16, nullptr); }),
        "head size 50");
    EXPECT_CONTAINS(error_of([] {
                        attention_backward_cudnn(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 1024, 4, DType::F16,
                                                 nullptr);
                    }),
                    "head size 256");
}
