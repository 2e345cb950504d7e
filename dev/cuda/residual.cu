// dev/cuda/residual.cu — the residual add (llmc/cuda/residual.cuh) against cpu::residual_forward.
//
//   out (n) = a + b, n = B·T·C      bound: bit-identical (one FP32 add, one rounding)
// Bytes: 3n values (read a, b; write out).
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/residual.cuh"

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        using D = dev_type<H>;
        const char* dt = Dev<H>::name;
        const size_t n = (size_t)a.B * a.T * a.C;
        Random r(a.seed);
        std::vector<H> x = r.normal<H>(n), y = r.normal<H>(n, 0.01);
        DeviceBuffer<D> d_x(x), d_y(y), d_out(n);
        if (a.check) {
            std::vector<H> out(n);
            cpu::residual_forward(out.data(), x.data(), y.data(), n);
            d_out.poison();
            gpu::residual_forward(d_out.ptr, d_x.ptr, d_y.ptr, n, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check_bytes("residual_forward out", dt, d_out.template download<H>(), out);
        }
        float ms = time_ms([&] { gpu::residual_forward(d_out.ptr, d_x.ptr, d_y.ptr, n, stream); }, a.reps, stream);
        report("residual_forward", dt, ms, 3.0 * n * sizeof(H), (double)n, peak_flops<H>());
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
