// dev/cuda/adamw.cu — the AdamW update (llmc/cuda/adamw.cuh) against cpu::adamw_update, over
// GPT-2 124M's parameter count, FP32 master weights and the working copy in the dtype.
//
//   master, m, v FP32       bound: 1e-6 normwise (FP32 formula; FMA contraction may differ)
//   working = round(p)      bound: 1 ulp (16-bit), 1e-6 (fp32)
// Bytes: read master, m, v, grads (16 B), write master, m, v (12 B) and the working copy.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/adamw.cuh"

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    const size_t L = 12, C = a.C, Vp = (a.V + 127) / 128 * 128, maxT = a.T;
    const size_t n = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C;
    const float lr = 6e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, grad_scale = 0.7f;
    const int t = 10;
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        using D = dev_type<H>;
        const char* dt = Dev<H>::name;
        Random r(a.seed);
        std::vector<float> master = r.normal<float>(n, 0.02), m = r.normal<float>(n, 1e-3),
                           v = r.normal<float>(n, 1e-3);
        for (float& x : v)
            x *= x;
        std::vector<float> grads = r.normal<float>(n, 1e-2);
        std::vector<H> working(n);
        for (size_t i = 0; i < n; i++)
            working[i] = to_h<H>(master[i]);
        DeviceBuffer<float> d_master(master), d_m(m), d_v(v), d_grads(grads);
        DeviceBuffer<D> d_working(working);
        if (a.check) {
            cpu::adamw_update(master.data(), working.data(), m.data(), v.data(), grads.data(), n, lr, b1, b2, eps, wd,
                              grad_scale, t);
            gpu::adamw_update(d_master.ptr, d_working.ptr, d_m.ptr, d_v.ptr, d_grads.ptr, n, lr, b1, b2, eps, wd,
                              grad_scale, t, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("adamw master", dt, d_master.template download<float>(), master, 1e-6);
            check("adamw m", dt, d_m.template download<float>(), m, 1e-6);
            check("adamw v", dt, d_v.template download<float>(), v, 1e-6);
            check("adamw working", dt, d_working.template download<H>(), working, tol<H>(1e-6, 1));
        }
        float ms = time_ms(
            [&] {
                gpu::adamw_update(d_master.ptr, d_working.ptr, d_m.ptr, d_v.ptr, d_grads.ptr, n, lr, b1, b2, eps, wd,
                                  grad_scale, t, stream);
            },
            a.reps, stream);
        report("adamw_update", dt, ms, (28.0 + sizeof(H)) * n, 20.0 * n, peak_flops<H>());
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
