// dev/cuda/harness.cuh — what every kernel harness in dev/cuda shares: arguments, device
// buffers, the check against the CPU twin, and timing against the H200 roofline.
//
// A harness runs one kernel of llmc/cuda on a realistic shape (GPT-2 124M: B=8, T=1024, C=768,
// NH=12, V=50257 by default), for each storage dtype asked for:
//   1. check: fresh random inputs, outputs poisoned with NaN bytes, the launcher's result against
//      its cpu:: twin (llmc/cpu) on the same input bytes, normwise error within a stated bound;
//   2. time: warm-up, then `reps` launches, each after an L2 flush (the inputs of one launch fit
//      in the H200's 60 MB L2, and training does not find them there), timed with CUDA events
//      around the launch alone; the median is reported with the bytes it must move and the
//      FLOPs it must do, as GB/s, TFLOP/s and the fraction of the roofline:
//          roofline time = max(bytes / 4.8 TB/s, FLOPs / peak),  peak = 989 TFLOP/s dense
//          bf16/fp16 tensor cores, 1979 fp8, 67 fp32 (no TF32; CUDA cores).
// Inputs are drawn from a fresh seed each run (printed; --seed replays it).
// Exit status 1 when a check fails. Usage:  dev/cuda/<kernel> [--dtype fp32|bf16|fp16|all]
//   [--reps N] [--B N] [--T N] [--C N] [--NH N] [--V N] [--no-check] [--seed N]
#pragma once

#include "cuda/common.cuh"
#include "precision/dtypes.h"
#include "rng.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace harness {

using train_gpt::bf16;
using train_gpt::fp16;

constexpr double kHbmBytesPerSec = 4.8e12;    // H200 HBM3e, datasheet
constexpr double kBf16FlopsPerSec = 989e12;   // dense bf16/fp16 tensor cores
constexpr double kFp8FlopsPerSec = 1979e12;   // dense fp8 tensor cores
constexpr double kFp32FlopsPerSec = 67e12;    // fp32 on CUDA cores (no TF32)
constexpr double kTf32FlopsPerSec = 494e12;   // dense TF32 tensor cores

struct Args {
    std::string dtype = "all";
    int reps = 50, B = 8, T = 1024, C = 768, NH = 12, V = 50257;
    bool check = true;
    uint64_t seed = std::random_device{}();   // fresh inputs every run; --seed replays one
};

inline Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", k.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (k == "--dtype")
            a.dtype = next();
        else if (k == "--reps")
            a.reps = std::atoi(next());
        else if (k == "--B")
            a.B = std::atoi(next());
        else if (k == "--T")
            a.T = std::atoi(next());
        else if (k == "--C")
            a.C = std::atoi(next());
        else if (k == "--NH")
            a.NH = std::atoi(next());
        else if (k == "--V")
            a.V = std::atoi(next());
        else if (k == "--seed")
            a.seed = std::strtoull(next(), nullptr, 10);
        else if (k == "--no-check")
            a.check = false;
        else {
            std::fprintf(stderr,
                         "usage: %s [--dtype fp32|bf16|fp16|all] [--reps N] [--B N] [--T N] [--C N] [--NH N] "
                         "[--V N] [--no-check] [--seed N]\n",
                         argv[0]);
            std::exit(2);
        }
    }
    if (a.dtype != "all" && a.dtype != "fp32" && a.dtype != "bf16" && a.dtype != "fp16") {
        std::fprintf(stderr, "--dtype must be fp32, bf16, fp16 or all\n");
        std::exit(2);
    }
    return a;
}

// Host storage type H (the CPU twin's) ↔ device storage type (the launcher's); same bytes.
template <typename H>
struct Dev;
template <>
struct Dev<float> {
    using type = float;
    static constexpr const char* name = "fp32";
};
template <>
struct Dev<bf16> {
    using type = __nv_bfloat16;
    static constexpr const char* name = "bf16";
};
template <>
struct Dev<fp16> {
    using type = __half;
    static constexpr const char* name = "fp16";
};
template <typename H>
using dev_type = typename Dev<H>::type;
static_assert(sizeof(dev_type<bf16>) == sizeof(bf16) && sizeof(dev_type<fp16>) == sizeof(fp16), "same layouts");

// Unit roundoff of the storage type (the unit of 16-bit tolerances: one ulp = 2u).
template <typename H>
constexpr double unit_roundoff() {
    return std::is_same_v<H, float> ? 0x1p-24 : std::is_same_v<H, bf16> ? 0x1p-9 : 0x1p-12;
}
template <typename H>
double tol(double fp32, double ulps) {
    return std::is_same_v<H, float> ? fp32 : 2 * ulps * unit_roundoff<H>();
}
template <typename H>
double peak_flops() {
    return std::is_same_v<H, float> ? kFp32FlopsPerSec : kBf16FlopsPerSec;
}

template <typename H>
inline H to_h(float x) {
    if constexpr (std::is_same_v<H, float>)
        return x;
    else
        return H::from_float(x);
}
template <typename H>
inline float from_h(H x) {
    if constexpr (std::is_same_v<H, float>)
        return x;
    else
        return x.to_float();
}

// ---- random inputs ---------------------------------------------------------------------------

struct Random {
    train_gpt::Rng rng;
    explicit Random(uint64_t seed) : rng(seed) {}
    template <typename H>
    std::vector<H> normal(size_t n, double stddev = 1.0, double mean = 0.0) {
        std::vector<H> v(n);
        for (H& x : v)
            x = to_h<H>((float)(mean + stddev * rng.normal()));
        return v;
    }
    std::vector<int32_t> ints(size_t n, int below) {
        std::vector<int32_t> v(n);
        for (int32_t& x : v)
            x = (int32_t)rng.below((uint64_t)below);
        return v;
    }
};

// ---- device buffers --------------------------------------------------------------------------

template <typename P>
struct DeviceBuffer {
    P* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) { cudaCheck(cudaMalloc(&ptr, std::max<size_t>(1, n) * sizeof(P))); }
    template <typename H>
    explicit DeviceBuffer(const std::vector<H>& host) : DeviceBuffer(host.size()) {
        upload(host);
    }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    template <typename H>
    void upload(const std::vector<H>& host) {
        static_assert(sizeof(H) == sizeof(P), "host and device element sizes must match");
        // the first min(n, host.size()) elements (a check may upload a prefix)
        cudaCheck(cudaMemcpy(ptr, host.data(), std::min(n, host.size()) * sizeof(P), cudaMemcpyHostToDevice));
    }
    template <typename H>
    std::vector<H> download() const {
        static_assert(sizeof(H) == sizeof(P), "host and device element sizes must match");
        std::vector<H> host(n);
        cudaCheck(cudaMemcpy(host.data(), ptr, n * sizeof(P), cudaMemcpyDeviceToHost));
        return host;
    }
    void poison() { cudaCheck(cudaMemset(ptr, 0xff, n * sizeof(P))); }   // NaN in every float format here
    size_t bytes() const { return n * sizeof(P); }
    template <typename Q>
    Q* as() const {
        return reinterpret_cast<Q*>(ptr);
    }
};

// ---- checking --------------------------------------------------------------------------------

inline bool g_failed = false;

// Normwise error max|got − ref| / max|ref|; a NaN in one of them only is a failure.
template <typename A, typename R>
bool check(const char* what, const char* dtype, const std::vector<A>& got, const std::vector<R>& ref, double bound) {
    if (got.size() != ref.size()) {
        std::printf("  check %-28s %-4s sizes differ: %zu vs %zu  FAIL\n", what, dtype, got.size(), ref.size());
        g_failed = true;
        return false;
    }
    size_t nan_mismatch = 0, worst = 0;
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        const double g = from_h(got[i]), r = from_h(ref[i]);
        if (std::isnan(g) || std::isnan(r)) {
            nan_mismatch += std::isnan(g) != std::isnan(r);
            continue;
        }
        const double d = std::fabs(g - r);
        if (d > max_diff) {
            max_diff = d;
            worst = i;
        }
        max_ref = std::max(max_ref, std::fabs(r));
    }
    const double err = max_ref > 0 ? max_diff / max_ref : max_diff;
    const bool ok = nan_mismatch == 0 && err <= bound;
    std::printf("  check %-28s %-4s normwise error %.2e (bound %.1e)%s%s\n", what, dtype, err, bound,
                nan_mismatch ? " NaN MISMATCHES" : "", ok ? "" : "  FAIL");
    if (!ok && !ref.empty()) {
        std::printf("    worst element %zu: got %g vs ref %g; %zu NaN mismatches\n", worst, (double)from_h(got[worst]),
                    (double)from_h(ref[worst]), nan_mismatch);
    }
    g_failed |= !ok;
    return ok;
}

// One value, relative error in double.
inline bool check_scalar(const char* what, const char* dtype, double got, double ref, double bound) {
    const double err = ref != 0 ? std::fabs(got - ref) / std::fabs(ref) : std::fabs(got);
    const bool ok = err <= bound;   // false for NaN
    std::printf("  check %-28s %-4s relative error %.2e (bound %.1e): %.17g vs %.17g%s\n", what, dtype, err, bound, got,
                ref, ok ? "" : "  FAIL");
    g_failed |= !ok;
    return ok;
}

template <typename B>
bool check_bytes(const char* what, const char* dtype, const std::vector<B>& got, const std::vector<B>& ref) {
    size_t bad = 0;
    for (size_t i = 0; i < ref.size(); i++)
        bad += std::memcmp(&got[i], &ref[i], sizeof(B)) != 0;
    std::printf("  check %-28s %-4s %zu of %zu elements differ (bound: bit-identical)%s\n", what, dtype, bad,
                ref.size(), bad ? "  FAIL" : "");
    g_failed |= bad != 0;
    return bad == 0;
}

// ---- timing ----------------------------------------------------------------------------------

// Median time (ms) of `reps` launches of `launch` on `stream`, each after the L2 is flushed by a
// write of twice its size, timed with events around the launch alone. Warms up first (module
// load, cuBLASLt heuristics, scratch growth).
inline float time_ms(const std::function<void()>& launch, int reps, cudaStream_t stream) {
    int device = 0, l2 = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const size_t flush_bytes = std::max<size_t>(2 * (size_t)l2, 64 << 20);
    void* flush = nullptr;
    cudaCheck(cudaMalloc(&flush, flush_bytes));
    for (int i = 0; i < 3; i++)
        launch();
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaGetLastError());
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    std::vector<float> times;
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream));
        cudaCheck(cudaEventRecord(start, stream));
        launch();
        cudaCheck(cudaEventRecord(stop, stream));
        cudaCheck(cudaEventSynchronize(stop));
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    cudaCheck(cudaFree(flush));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// One line of the timing table: the measured median against the roofline of `bytes` moved and
// `flops` done at `peak` FLOP/s.
inline void report(const char* what, const char* dtype, float ms, double bytes, double flops, double peak) {
    const double s = ms * 1e-3;
    const double t_mem = bytes / kHbmBytesPerSec, t_math = flops / peak;
    const double roof = std::max(t_mem, t_math);
    std::printf("  time  %-28s %-4s %9.3f ms | %7.0f GB/s | %7.1f TFLOP/s | %5.1f%% of roofline (%s-bound, %.3f ms)\n",
                what, dtype, ms, bytes / s / 1e9, flops / s / 1e12, 100.0 * roof / s,
                t_mem >= t_math ? "memory" : "compute", roof * 1e3);
}

// The device and the shape, first; exits when there is no GPU.
inline void print_header(const Args& a) {
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        std::fprintf(stderr, "no usable CUDA device\n");
        std::exit(1);
    }
    std::printf("%s (%d SMs, %.0f MB L2) | B=%d T=%d C=%d NH=%d V=%d | median of %d | --seed %llu\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize / 1e6, a.B, a.T, a.C, a.NH, a.V, a.reps,
                (unsigned long long)a.seed);
}
// The verdict, last; the exit status.
inline int finish() {
    std::printf("%s\n", g_failed ? "FAILED" : "OK");
    return g_failed ? 1 : 0;
}

// Runs body(H{}) for each storage dtype asked for; returns the exit status.
template <typename Body>
int for_each_dtype(const Args& a, Body body) {
    if (a.dtype == "all" || a.dtype == "fp32") body(float{});
    if (a.dtype == "all" || a.dtype == "bf16") body(bf16{});
    if (a.dtype == "all" || a.dtype == "fp16") body(fp16{});
    return finish();
}

// main() of a harness: the arguments, the device (exits 1 without one), then run(args) with
// any train_gpt::Error (a failed CUDA call, a launcher's precondition) reported, exit 1.
inline int harness_main(int argc, char** argv, int (*run)(const Args&)) {
    const Args a = parse_args(argc, argv);
    print_header(a);
    try {
        return run(a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}

}   // namespace harness
