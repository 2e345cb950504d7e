// dev/cuda/global_norm.cu — Σ g² of the FP32 gradients (llmc/cuda/global_norm.cuh) against
// cpu::sum_squares, over GPT-2 124M's parameter count (or --n).
//
//   Σ g² in double on both sides       bound: 1e-12 relative (double reordering only)
// Bytes: one read of n FP32 gradients. The result stays on the device in the timed launch
// (sum_squares_async); the checked one comes back to the host.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/global_norm.cuh"

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    // GPT-2 124M with its padded vocabulary: 124,475,904 parameters
    const size_t L = 12, C = a.C, Vp = (a.V + 127) / 128 * 128, maxT = a.T;
    const size_t n = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C;
    Random r(a.seed);
    std::vector<float> g = r.normal<float>(n, 1e-3);
    DeviceBuffer<float> d_g(g);
    DeviceBuffer<double> d_out(1);
    if (a.check) {
        const double ref = cpu::sum_squares(g.data(), n);
        const double got = gpu::sum_squares(d_g.ptr, n, stream);
        check_scalar("sum_squares", "fp32", got, ref, 1e-12);
    }
    float ms = time_ms([&] { gpu::sum_squares_async(d_out.ptr, d_g.ptr, n, stream); }, a.reps, stream);
    report("sum_squares", "fp32", ms, 4.0 * n, 2.0 * n, kFp32FlopsPerSec);
    return finish();
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
