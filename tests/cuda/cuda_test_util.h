// cuda_test_util.h — comparing the CUDA kernel set with its CPU twin.
//
// Every test here runs the same op on two backends of the same activation dtype — the CPU kernel
// set (the specification) and the CUDA kernel set — on identical input bytes, and compares the
// outputs within a stated tolerance. Method (see also tests/cuda/test_cuda_kernels.cu):
//   * inputs are random values from a fixed seed (kDefaultTestSeed: every run checks the same
//     inputs; the seed is printed on failure, and TG_TEST_SEED=<n> runs the tests on another),
//     never zeros, which would hide unwritten outputs and wrong indexing;
//   * outputs that an op overwrites are poisoned with 0xff bytes first (NaN in fp32, bf16, fp16,
//     E4M3 and E5M2), so an element the kernel forgot to write fails the comparison;
//   * outputs that an op accumulates into (+=: parameter gradients, and layernorm_backward's
//     dinp, the residual stream's gradient) start from random values, so a kernel that
//     overwrites instead of accumulating fails too;
//   * errors are normwise, max|gpu − cpu| / max|cpu| (test_util.h's max_rel_error), against a
//     bound derived per op from the formats and the operation (twin_bounds.h), and a NaN the CPU
//     twin does not produce is always a failure.
//
// Without a GPU, the fixture skips every test with the reason (never a vacuous pass).
#pragma once

#include "backend.h"
#include "cuda/cuda_backend.h"
#include "precision/dtypes.h"
#include "precision/precision.h"
#include "rng.h"
#include "tests/cuda/twin_bounds.h"
#include "tests/test_util.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace train_gpt::test {

// Unit roundoff u of the activation dtype (tests/tolerances.h): a format of p significant bits
// rounds to nearest within a relative 2^-p, p = 24 fp32, 8 bf16, 11 fp16; one ulp of a value is
// at most 2u of it.
inline double unit_roundoff(DType d) {
    switch (d) {
        case DType::F32: return std::ldexp(1.0, -24);
        case DType::BF16: return std::ldexp(1.0, -8);
        case DType::F16: return std::ldexp(1.0, -11);
    }
    return 0;
}

// The normwise tolerance of an output stored in the activation dtype: `fp32`, the bound on the
// FP32 values before the store (twin_bounds.h), plus, in bf16 and fp16, `ulps` flips of the
// store: two roundings of FP32 values a, b differ by at most |a − b| + one ulp, and one ulp is at
// most 2u of the largest output (fp32 stores nothing: no flip).
inline double act_tol(DType d, double fp32, double ulps) {
    return d == DType::F32 ? fp32 : fp32 + ulps * 2.0 * unit_roundoff(d);
}

// The seed of every test's inputs: a constant, so each run checks the same inputs; TG_TEST_SEED=<n>
// runs the tests on other inputs (and replays a failure seen there).
constexpr uint64_t kDefaultTestSeed = 20240520;
inline uint64_t test_seed() {
    if (const char* s = std::getenv("TG_TEST_SEED")) return std::strtoull(s, nullptr, 10);
    return kDefaultTestSeed;
}

// Host encoding of FP32 values into the activation dtype's bytes (round to nearest even, the
// CPU twin's rounding), and back.
inline std::vector<uint8_t> encode_act(DType d, const std::vector<float>& x) {
    std::vector<uint8_t> out(x.size() * dtype_size(d));
    for (size_t i = 0; i < x.size(); i++) {
        if (d == DType::F32) {
            std::memcpy(out.data() + 4 * i, &x[i], 4);
        } else {
            uint16_t b = d == DType::BF16 ? bf16::from_float(x[i]).bits : fp16::from_float(x[i]).bits;
            std::memcpy(out.data() + 2 * i, &b, 2);
        }
    }
    return out;
}
inline std::vector<float> decode_act(DType d, const std::vector<uint8_t>& bytes) {
    const size_t n = bytes.size() / dtype_size(d);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i++) {
        if (d == DType::F32) {
            std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        } else {
            uint16_t b;
            std::memcpy(&b, bytes.data() + 2 * i, 2);
            out[i] = d == DType::BF16 ? bf16{b}.to_float() : fp16{b}.to_float();
        }
    }
    return out;
}
// x as it reads back after a store into dtype d
inline std::vector<float> round_act(DType d, const std::vector<float>& x) { return decode_act(d, encode_act(d, x)); }

// Normwise comparison of a CUDA output with the CPU twin's. Elements that are NaN in both count
// as equal (the specification leaves them so); a NaN or inf in one only is reported and fails.
// Returns the error so tests can print it.
inline double expect_close(const std::string& what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                           double tol) {
    EXPECT_EQ(gpu.size(), cpu.size()) << what;
    size_t bad = 0, first_bad = 0, worst = 0;
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < cpu.size() && i < gpu.size(); i++) {
        const bool gn = std::isnan(gpu[i]), cn = std::isnan(cpu[i]);
        if (gn && cn) continue;
        if (gn || cn || std::isinf(gpu[i]) != std::isinf(cpu[i]) || (std::isinf(cpu[i]) && gpu[i] != cpu[i])) {
            if (bad++ == 0) first_bad = i;
            continue;
        }
        if (std::isinf(cpu[i])) continue;   // the same inf
        const double d = std::fabs((double)gpu[i] - (double)cpu[i]);
        if (d > max_diff) {
            max_diff = d;
            worst = i;
        }
        max_ref = std::max(max_ref, std::fabs((double)cpu[i]));
    }
    const double err = max_ref == 0 ? max_diff : max_diff / max_ref;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << cpu.size()
                       << " elements non-finite in one backend only (unwritten by the CUDA kernel?); first at "
                       << first_bad << ": cuda " << (bad ? gpu[first_bad] : 0.f) << " vs cpu "
                       << (bad ? cpu[first_bad] : 0.f);
    EXPECT_LE(err, tol) << what << ": normwise error " << err << " > tolerance " << tol << "; worst element " << worst
                        << ": cuda " << (gpu.empty() ? 0.f : gpu[worst]) << " vs cpu "
                        << (cpu.empty() ? 0.f : cpu[worst]);
    return err;
}

// Bytes must be identical (FP8 casts, exact ops). Reports the count and the first mismatch.
inline void expect_bytes_equal(const std::string& what, const std::vector<uint8_t>& gpu,
                               const std::vector<uint8_t>& cpu, size_t elem_size = 1) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < cpu.size(); i += elem_size) {
        if (std::memcmp(gpu.data() + i, cpu.data() + i, elem_size) != 0) {
            if (bad++ == 0) first = i / elem_size;
        }
    }
    auto hex = [&](const std::vector<uint8_t>& v) {
        std::string s;
        char buf[4];
        for (size_t b = elem_size; b-- > 0;) {
            std::snprintf(buf, sizeof(buf), "%02x", v[first * elem_size + b]);
            s += buf;
        }
        return s;
    };
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << cpu.size() / elem_size << " elements differ; first at "
                       << first << ": cuda 0x" << (bad ? hex(gpu) : "") << " vs cpu 0x" << (bad ? hex(cpu) : "");
}

// f(C{}, G{}) with C and G the CPU and CUDA storage types of activation dtype d (float, bf16 /
// __nv_bfloat16, fp16 / __half): for tests that call the launchers (cpu::, cuda::) directly, the
// ops no Backend member reaches by itself (the plain FP8 cast, the amax).
template <typename F>
void with_storage_types(DType d, F&& f) {
    switch (d) {
        case DType::F32: f(float{}, float{}); return;
        case DType::BF16: f(bf16{}, __nv_bfloat16{}); return;
        case DType::F16: f(fp16{}, __half{}); return;
    }
}

// The two kernel sets of one activation dtype, and buffers that live on both.
class Twin {
  public:
    // options: the CUDA kernel set's (fused kernels or not, ...); tf32_gemms applies to both
    explicit Twin(DType dtype, const CudaOptions& options = {})
        : dtype_(dtype),
          cpu_(make_cpu_backend(dtype, options.tf32_gemms)),
          gpu_(make_cuda_backend(dtype, 0, options)) {}
    DType dtype() const { return dtype_; }
    size_t act_size() const { return dtype_size(dtype_); }
    Backend& cpu() { return *cpu_; }
    Backend& gpu() { return *gpu_; }

    // One buffer of `bytes` on each backend, released with the Twin.
    struct Buf {
        void* c = nullptr;
        void* g = nullptr;
        size_t bytes = 0;
        template <typename P = void>
        P* cp() const {
            return static_cast<P*>(c);
        }
        template <typename P = void>
        P* gp() const {
            return static_cast<P*>(g);
        }
    };
    Buf alloc(size_t bytes) {
        Buf b;
        b.bytes = bytes;
        b.c = cpu_->alloc(bytes);
        b.g = gpu_->alloc(bytes);
        gpu_->synchronize();   // its zero-fill is queued on the backend's stream (see upload)
        bufs_.push_back(b);
        return b;
    }
    ~Twin() {
        for (Buf& b : bufs_) {
            cpu_->release(b.c);
            gpu_->release(b.g);
        }
    }
    Twin(const Twin&) = delete;
    Twin& operator=(const Twin&) = delete;

    // Waits for the copy: a small copy to the device is queued on the backend's stream, and the
    // tests that call cuda:: launchers on a stream of their own (TestStream) read these buffers.
    void upload(const Buf& b, const void* host, size_t bytes) {
        cpu_->copy_to_device(b.c, host, bytes);
        gpu_->copy_to_device(b.g, host, bytes);
        gpu_->synchronize();
    }
    template <typename P>
    void upload(const Buf& b, const std::vector<P>& host) {
        upload(b, host.data(), host.size() * sizeof(P));
    }
    // act-dtype buffer from FP32 values (rounded on the host: identical bytes on both sides)
    Buf act(const std::vector<float>& values) {
        Buf b = alloc(values.size() * act_size());
        upload(b, encode_act(dtype_, values));
        return b;
    }
    Buf f32(const std::vector<float>& values) {
        Buf b = alloc(values.size() * sizeof(float));
        upload(b, values);
        return b;
    }
    template <typename P>
    Buf raw(const std::vector<P>& values) {
        Buf b = alloc(values.size() * sizeof(P));
        upload(b, values);
        return b;
    }
    // A buffer of n elements of `elem` bytes, every byte 0xff (NaN in every float format here).
    Buf poisoned(size_t bytes) {
        Buf b = alloc(bytes);
        std::vector<uint8_t> ff(bytes, 0xff);
        upload(b, ff);
        return b;
    }
    Buf poisoned_act(size_t n) { return poisoned(n * act_size()); }
    Buf poisoned_f32(size_t n) { return poisoned(n * sizeof(float)); }

    std::vector<uint8_t> bytes(Backend& k, const void* p, size_t bytes) {
        std::vector<uint8_t> out(bytes);
        k.copy_to_host(out.data(), p, bytes);
        return out;
    }
    // Host copies of a buffer's contents on each side.
    std::vector<float> act_c(const Buf& b) { return decode_act(dtype_, bytes(*cpu_, b.c, b.bytes)); }
    std::vector<float> act_g(const Buf& b) { return decode_act(dtype_, bytes(*gpu_, b.g, b.bytes)); }
    std::vector<float> f32_c(const Buf& b) { return as_f32(bytes(*cpu_, b.c, b.bytes)); }
    std::vector<float> f32_g(const Buf& b) { return as_f32(bytes(*gpu_, b.g, b.bytes)); }
    std::vector<uint8_t> bytes_c(const Buf& b) { return bytes(*cpu_, b.c, b.bytes); }
    std::vector<uint8_t> bytes_g(const Buf& b) { return bytes(*gpu_, b.g, b.bytes); }

    // Compare an act-dtype / FP32 buffer between the two sides.
    double check_act(const std::string& what, const Buf& b, double tol) {
        return expect_close(what + " (" + dtype_name(dtype_) + ")", act_g(b), act_c(b), tol);
    }
    double check_f32(const std::string& what, const Buf& b, double tol) {
        return expect_close(what + " (" + dtype_name(dtype_) + ")", f32_g(b), f32_c(b), tol);
    }
    void check_bytes(const std::string& what, const Buf& b, size_t elem_size) {
        expect_bytes_equal(what + " (" + dtype_name(dtype_) + ")", bytes_g(b), bytes_c(b), elem_size);
    }

  private:
    static std::vector<float> as_f32(const std::vector<uint8_t>& bytes) {
        std::vector<float> out(bytes.size() / 4);
        std::memcpy(out.data(), bytes.data(), out.size() * 4);
        return out;
    }
    DType dtype_;
    std::unique_ptr<Backend> cpu_, gpu_;
    std::vector<Buf> bufs_;
};

// Random inputs.
struct Random {
    Rng rng;
    explicit Random(uint64_t seed) : rng(seed) {}
    std::vector<float> normal(size_t n, double stddev = 1.0, double mean = 0.0) {
        std::vector<float> v(n);
        for (float& x : v)
            x = (float)(mean + stddev * rng.normal());
        return v;
    }
    std::vector<float> uniform(size_t n, double lo, double hi) {
        std::vector<float> v(n);
        for (float& x : v)
            x = (float)(lo + (hi - lo) * rng.uniform());
        return v;
    }
    std::vector<int32_t> ints(size_t n, int below) {
        std::vector<int32_t> v(n);
        for (int32_t& x : v)
            x = (int32_t)rng.below((uint64_t)below);
        return v;
    }
};

// Skips when there is no GPU, with the reason; otherwise hands each test the seed (test_seed()).
class CudaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string reason;
        if (cuda_device_count(&reason) == 0) GTEST_SKIP() << "no CUDA device: " << reason;
        seed_ = test_seed();
        trace_ = std::make_unique<::testing::ScopedTrace>(
            __FILE__, __LINE__, "seed " + std::to_string(seed_) + " (TG_TEST_SEED=<n> sets it)");
    }
    uint64_t seed_ = 0;
    std::unique_ptr<::testing::ScopedTrace> trace_;
};

// The same, parameterised on the activation dtype (fp32, bf16, fp16).
class CudaDTypeTest : public CudaTest, public ::testing::WithParamInterface<DType> {};

inline std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

}   // namespace train_gpt::test
