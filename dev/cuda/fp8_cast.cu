// dev/cuda/fp8_cast.cu — amax and the scaled FP8 casts (llmc/cuda/fp8.cuh) against cpu::amax
// and cpu::quantize_fp8, on the activations an FP8 GEMM casts: the block input (B·T·C) and the
// fc-proj input (B·T·4C).
//
//   amax           bound: bit-identical (an exact max; NaN if any NaN)
//   quantize e4m3  q bit-identical, and the statistics (amax, saturated, flushed, NaN) equal
//   quantize e5m2  the same
//   quantize_transpose (E4M3, both layouts of (B·T, width·C)): q and qᵀ bit-identical, statistics equal,
//                  for the scalar kernel and the vectorised one (16-bit inputs), timed beside a
//                  plain device copy of the input (the bandwidth ceiling, measured in the same run)
// The inputs span every FP8 regime at the chosen scale (normal, subnormal, flushed, saturated).
// Bytes: amax reads n values; a cast reads n values and writes n bytes (2n with the transpose).
// amax returns its result to the host, so its time includes that synchronisation; the casts
// accumulate their statistics in device memory and return at once.
#include "harness.cuh"

#include "cpu/fp8_kernels.h"
#include "cuda/fp8.cuh"

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;
using train_gpt::Fp8CastStats;
using train_gpt::Fp8Counters;
using train_gpt::fp8e4m3;
using train_gpt::fp8e5m2;
using train_gpt::to_cast_stats;

namespace {
template <typename H>
std::vector<H> fp8_inputs(Random& r, size_t n) {
    std::vector<H> x(n);
    for (size_t i = 0; i < n; i++) {
        const double e = std::floor(-20 + 28 * r.rng.uniform());   // 2^-20 … 2^8
        x[i] = to_h<H>((float)(std::ldexp(1.0 + r.rng.uniform(), (int)e) * (r.rng.uniform() < 0.5 ? -1 : 1)));
    }
    return x;
}
bool same_stats(const Fp8CastStats& a, const Fp8CastStats& b) {
    uint32_t ab, bb;
    std::memcpy(&ab, &a.amax, 4);
    std::memcpy(&bb, &b.amax, 4);
    return ab == bb && a.count == b.count && a.saturated == b.saturated && a.flushed == b.flushed && a.nan == b.nan;
}
}   // namespace

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        using D = dev_type<H>;
        const char* dt = Dev<H>::name;
        for (int width : {1, 4}) {
            const size_t n = (size_t)a.B * a.T * width * a.C;
            const std::string what = width == 1 ? "(B,T,C) " : "(B,T,4C) ";
            Random r(a.seed + width);
            std::vector<H> x = fp8_inputs<H>(r, n);
            DeviceBuffer<D> d_x(x);
            DeviceBuffer<uint8_t> d_q4(n), d_q5(n);
            const float scale = 448.0f / 64.0f;                       // saturates above 64, flushes below ~2^-12
            DeviceBuffer<float> d_scale(std::vector<float>{scale});   // the casts read it from device memory
            if (a.check) {
                const float ref_amax = cpu::amax(x.data(), n), got_amax = gpu::amax(d_x.ptr, n, stream);
                check_bytes((what + "amax").c_str(), dt, std::vector<float>{got_amax}, std::vector<float>{ref_amax});
                std::vector<fp8e4m3> q4(n);
                std::vector<fp8e5m2> q5(n);
                const Fp8CastStats c4 = cpu::quantize_fp8(q4.data(), x.data(), n, scale);
                const Fp8CastStats c5 = cpu::quantize_fp8(q5.data(), x.data(), n, scale);
                d_q4.poison();
                d_q5.poison();
                DeviceBuffer<Fp8Counters> k4(1), k5(1);
                cudaCheck(cudaMemset(k4.ptr, 0, sizeof(Fp8Counters)));
                cudaCheck(cudaMemset(k5.ptr, 0, sizeof(Fp8Counters)));
                gpu::quantize_fp8(d_q4.as<fp8e4m3>(), d_x.ptr, n, d_scale.ptr, k4.ptr, stream);
                gpu::quantize_fp8(d_q5.as<fp8e5m2>(), d_x.ptr, n, d_scale.ptr, k5.ptr, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                const Fp8CastStats g4 = to_cast_stats(k4.template download<Fp8Counters>()[0]);
                const Fp8CastStats g5 = to_cast_stats(k5.template download<Fp8Counters>()[0]);
                check_bytes((what + "quantize_e4m3 q").c_str(), dt, d_q4.template download<fp8e4m3>(), q4);
                check_bytes((what + "quantize_e5m2 q").c_str(), dt, d_q5.template download<fp8e5m2>(), q5);
                const bool ok4 = same_stats(g4, c4), ok5 = same_stats(g5, c5);
                std::printf("  check %-28s %-4s statistics %s (cpu: amax %g, %zu saturated, %zu flushed)%s\n",
                            (what + "quantize stats").c_str(), dt, ok4 && ok5 ? "equal" : "DIFFER", c4.amax,
                            c4.saturated, c4.flushed, ok4 && ok5 ? "" : "  FAIL");
                g_failed |= !(ok4 && ok5);
                // one cast, both layouts: (rows, cols) = (B·T, width·C)
                const int rows = a.B * a.T, cols = width * a.C;
                std::vector<fp8e4m3> qt(n);
                const Fp8CastStats ct = cpu::quantize_transpose_fp8(q4.data(), qt.data(), x.data(), rows, cols, scale);
                DeviceBuffer<uint8_t> d_qt(n);
                d_q4.poison();
                d_qt.poison();
                DeviceBuffer<Fp8Counters> kt(1);
                cudaCheck(cudaMemset(kt.ptr, 0, sizeof(Fp8Counters)));
                gpu::quantize_transpose_fp8(d_q4.as<fp8e4m3>(), d_qt.as<fp8e4m3>(), d_x.ptr, rows, cols, d_scale.ptr,
                                            kt.ptr, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check_bytes((what + "quantize_transpose q").c_str(), dt, d_q4.template download<fp8e4m3>(), q4);
                check_bytes((what + "quantize_transpose qt").c_str(), dt, d_qt.template download<fp8e4m3>(), qt);
                const bool okt = same_stats(to_cast_stats(kt.template download<Fp8Counters>()[0]), ct);
                std::printf("  check %-28s %-4s statistics %s%s\n", (what + "quantize_transpose stats").c_str(), dt,
                            okt ? "equal" : "DIFFER", okt ? "" : "  FAIL");
                g_failed |= !okt;
                // the vectorised kernel (--fused-kernels): the same bytes and statistics
                if constexpr (sizeof(H) == 2) {
                    d_q4.poison();
                    d_qt.poison();
                    cudaCheck(cudaMemset(kt.ptr, 0, sizeof(Fp8Counters)));
                    gpu::quantize_transpose_fp8(d_q4.as<fp8e4m3>(), d_qt.as<fp8e4m3>(), d_x.ptr, rows, cols,
                                                d_scale.ptr, kt.ptr, stream, gpu::Unchanged{}, /*vectorised=*/true);
                    cudaCheck(cudaStreamSynchronize(stream));
                    check_bytes((what + "quantize_transpose_vec q").c_str(), dt, d_q4.template download<fp8e4m3>(), q4);
                    check_bytes((what + "quantize_transpose_vec qt").c_str(), dt, d_qt.template download<fp8e4m3>(),
                                qt);
                    const bool okv = same_stats(to_cast_stats(kt.template download<Fp8Counters>()[0]), ct);
                    std::printf("  check %-28s %-4s statistics %s%s\n", (what + "quantize_transpose_vec stats").c_str(),
                                dt, okv ? "equal" : "DIFFER", okv ? "" : "  FAIL");
                    g_failed |= !okv;
                }
            }
            const double s = sizeof(H);
            float ms = time_ms([&] { gpu::amax(d_x.ptr, n, stream); }, a.reps, stream);
            DeviceBuffer<Fp8Counters> counters(1);   // the timed casts accumulate into it
            cudaCheck(cudaMemset(counters.ptr, 0, sizeof(Fp8Counters)));
            report((what + "amax").c_str(), dt, ms, n * s, (double)n, peak_flops<H>());
            ms = time_ms([&] { gpu::quantize_fp8(d_q4.as<fp8e4m3>(), d_x.ptr, n, d_scale.ptr, counters.ptr, stream); },
                         a.reps, stream);
            report((what + "quantize_e4m3").c_str(), dt, ms, n * (s + 1), 2.0 * n, peak_flops<H>());
            ms = time_ms([&] { gpu::quantize_fp8(d_q5.as<fp8e5m2>(), d_x.ptr, n, d_scale.ptr, counters.ptr, stream); },
                         a.reps, stream);
            report((what + "quantize_e5m2").c_str(), dt, ms, n * (s + 1), 2.0 * n, peak_flops<H>());
            DeviceBuffer<uint8_t> d_qt(n);
            ms = time_ms(
                [&] {
                    gpu::quantize_transpose_fp8(d_q4.as<fp8e4m3>(), d_qt.as<fp8e4m3>(), d_x.ptr, a.B * a.T, width * a.C,
                                                d_scale.ptr, counters.ptr, stream);
                },
                a.reps, stream);
            report((what + "quantize_transpose_e4m3").c_str(), dt, ms, n * (s + 2), 2.0 * n, peak_flops<H>());
            if constexpr (sizeof(H) == 2) {
                ms = time_ms(
                    [&] {
                        gpu::quantize_transpose_fp8(d_q4.as<fp8e4m3>(), d_qt.as<fp8e4m3>(), d_x.ptr, a.B * a.T,
                                                    width * a.C, d_scale.ptr, counters.ptr, stream, gpu::Unchanged{},
                                                    /*vectorised=*/true);
                    },
                    a.reps, stream);
                report((what + "quantize_transpose_vec_e4m3").c_str(), dt, ms, n * (s + 2), 2.0 * n, peak_flops<H>());
            }
            // the ceiling: a plain device copy of the same input bytes (read n·s, write n·s)
            DeviceBuffer<D> d_copy(n);
            ms = time_ms(
                [&] {
                    cudaCheck(cudaMemcpyAsync(d_copy.ptr, d_x.ptr, n * sizeof(D), cudaMemcpyDeviceToDevice, stream));
                },
                a.reps, stream);
            report((what + "copy (ceiling)").c_str(), dt, ms, 2 * n * s, 0.0, peak_flops<H>());
        }
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
