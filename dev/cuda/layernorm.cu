// dev/cuda/layernorm.cu — LayerNorm (llmc/cuda/layernorm.cuh) against cpu::layernorm_*.
//
//   forward   out (N,C), mean, rstd (N) FP32      bound: 2 ulps (16-bit), 1e-5 (fp32, stats)
//   backward  dinp (N,C) +=, dweight, dbias +=    bound: 2 ulps / 1e-5
// Bytes: forward reads inp and writes out (+ weight, bias, stats); backward reads dout, inp,
// reads and writes dinp (+ weight, stats, dweight, dbias).
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/layernorm.cuh"

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
        const int N = a.B * a.T, C = a.C;
        const double s = sizeof(H), NC = (double)N * C;
        Random r(a.seed);
        std::vector<H> inp = r.normal<H>((size_t)N * C, 2.0, 0.5), w = r.normal<H>(C, 0.2, 1.0),
                       b = r.normal<H>(C, 0.2);
        std::vector<H> dout = r.normal<H>((size_t)N * C), dinp0 = r.normal<H>((size_t)N * C);
        std::vector<float> dw0 = r.normal<float>(C), db0 = r.normal<float>(C);
        std::vector<H> out((size_t)N * C);
        std::vector<float> mean(N), rstd(N);
        cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
        DeviceBuffer<D> d_inp(inp), d_w(w), d_b(b), d_out((size_t)N * C), d_dout(dout), d_dinp(dinp0);
        DeviceBuffer<float> d_mean(N), d_rstd(N), d_dw(dw0), d_db(db0);
        if (a.check) {
            d_out.poison();
            d_mean.poison();
            d_rstd.poison();
            gpu::layernorm_forward(d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, C, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("layernorm_forward out", dt, d_out.template download<H>(), out, tol<H>(1e-5, 2));
            check("layernorm_forward mean", dt, d_mean.template download<float>(), mean, 1e-5);
            check("layernorm_forward rstd", dt, d_rstd.template download<float>(), rstd, 1e-5);
            // backward from the CPU's statistics on both sides
            d_mean.upload(mean);
            d_rstd.upload(rstd);
            std::vector<H> dinp = dinp0;
            std::vector<float> dw = dw0, db = db0;
            cpu::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                                    rstd.data(), N, C, nullptr);
            gpu::layernorm_backward(d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_mean.ptr,
                                    d_rstd.ptr, N, C, nullptr, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("layernorm_backward dinp", dt, d_dinp.template download<H>(), dinp, tol<H>(1e-5, 2));
            check("layernorm_backward dweight", dt, d_dw.template download<float>(), dw, 1e-5);
            check("layernorm_backward dbias", dt, d_db.template download<float>(), db, 1e-5);
        }
        float ms = time_ms(
            [&] {
                gpu::layernorm_forward(d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, C, stream);
            },
            a.reps, stream);
        report("layernorm_forward", dt, ms, 2 * NC * s + 2.0 * C * s + 8.0 * N, 8 * NC, peak_flops<H>());
        ms = time_ms(
            [&] {
                gpu::layernorm_backward(d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_mean.ptr,
                                        d_rstd.ptr, N, C, nullptr, stream);
            },
            a.reps, stream);
        report("layernorm_backward", dt, ms, 4 * NC * s + C * s + 8.0 * N + 16.0 * C, 14 * NC, peak_flops<H>());
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
