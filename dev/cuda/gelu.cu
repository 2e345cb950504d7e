// dev/cuda/gelu.cu — GELU, tanh approximation (llmc/cuda/gelu.cuh) against cpu::gelu_*.
//
//   forward   out (n) = gelu(inp)            bound: 2 ulps (16-bit), 1e-5 (fp32)
//   backward  dinp (n) = gelu'(inp)·dout     bound: 2 ulps / 1e-5
// n = B·T·4C (the MLP's hidden activations). Bytes: forward 2n, backward 4n values.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/gelu.cuh"

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
        const size_t n = (size_t)a.B * a.T * 4 * a.C;
        const double s = sizeof(H);
        Random r(a.seed);
        std::vector<H> inp = r.normal<H>(n, 3.0), dout = r.normal<H>(n), dinp0 = r.normal<H>(n);
        DeviceBuffer<D> d_inp(inp), d_out(n), d_dout(dout), d_dinp(dinp0);
        if (a.check) {
            std::vector<H> out(n), dinp = dinp0;
            cpu::gelu_forward(out.data(), inp.data(), n);
            cpu::gelu_backward(dinp.data(), inp.data(), dout.data(), n);
            d_out.poison();
            gpu::gelu_forward(d_out.ptr, d_inp.ptr, n, stream);
            gpu::gelu_backward(d_dinp.ptr, d_inp.ptr, d_dout.ptr, n, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("gelu_forward out", dt, d_out.template download<H>(), out, tol<H>(1e-5, 2));
            check("gelu_backward dinp", dt, d_dinp.template download<H>(), dinp, tol<H>(1e-5, 2));
        }
        float ms = time_ms([&] { gpu::gelu_forward(d_out.ptr, d_inp.ptr, n, stream); }, a.reps, stream);
        report("gelu_forward", dt, ms, 2.0 * n * s, 10.0 * n, peak_flops<H>());
        ms = time_ms([&] { gpu::gelu_backward(d_dinp.ptr, d_inp.ptr, d_dout.ptr, n, stream); }, a.reps, stream);
        report("gelu_backward", dt, ms, 4.0 * n * s, 20.0 * n, peak_flops<H>());
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
