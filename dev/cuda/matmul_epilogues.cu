// dev/cuda/matmul_epilogues.cu — the GEMMs of --gemm-epilogues (llmc/cuda/matmul_epilogues.cuh)
// against their CPU twins and, timed, against the separate launches they replace:
//
//   fc forward      matmul_forward_gelu (GELU_AUX_BIAS)   vs  matmul_forward + gelu_forward
//   fcproj dinp     matmul_backward_dgelu (DGELU)         vs  matmul_backward (dinp) + gelu_backward
//   bias gradients  matmul_backward_bgrad (BGRADB)        vs  matmul_backward (dW + column sums)
//                   for qkv, attproj, fc, fcproj
//
// Checked on the first --check-rows rows (N = 1024 at most) against cpu::matmul_forward_gelu,
// cpu::matmul_backward_dgelu and cpu::matmul_backward: 2 ulps + 1e-5 (the GEMM's FP32 sums in
// another order, through gelu' ≤ 1.13, then the store) and 1e-5 for the FP32 dW and db. An erf
// GELU in cuBLASLt would show in fp32: erf and tanh GELU differ by up to 2e-4 of |x| ~ 2.
// Each line prints the separate launches' time over the epilogue's: the speed-up of the fusion.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/matmul_epilogues.cuh"

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;

namespace {
struct Gemm {
    const char* name;
    int C, OC;
};
void speedup(const char* what, const char* dtype, float separate_ms, float fused_ms) {
    std::printf("  ratio %-28s %-4s separate %.3f ms / epilogue %.3f ms = %.2fx\n", what, dtype, separate_ms, fused_ms,
                separate_ms / fused_ms);
}
}   // namespace

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    const int C = a.C, N = a.B * a.T, Ncheck = std::min(N, 1024);
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        using D = dev_type<H>;
        const char* dt = Dev<H>::name;
        const double s = sizeof(H);
        const double gemm_tol = tol<H>(1e-5, 2);
        Random r(a.seed);
        // ---- fc forward: (N, C) · (4C, C)ᵀ + b, then GELU ----
        {
            const int K = C, OC = 4 * C;
            std::vector<H> inp = r.normal<H>((size_t)N * K), w = r.normal<H>((size_t)OC * K, 0.05);
            std::vector<H> b = r.normal<H>(OC, 0.5);
            DeviceBuffer<D> d_inp(inp), d_w(w), d_b(b), d_out((size_t)N * OC), d_pre((size_t)N * OC);
            if (a.check) {
                const int n = Ncheck;
                std::vector<H> out((size_t)n * OC), pre((size_t)n * OC);
                cpu::matmul_forward_gelu(out.data(), pre.data(), inp.data(), w.data(), b.data(), n, K, OC);
                d_out.poison();
                d_pre.poison();
                gpu::matmul_forward_gelu(d_out.ptr, d_pre.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, n, K, OC, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                std::vector<H> got_out = d_out.template download<H>(), got_pre = d_pre.template download<H>();
                got_out.resize(out.size());
                got_pre.resize(pre.size());
                check("fc forward_gelu pre", dt, got_pre, pre, gemm_tol);
                check("fc forward_gelu out", dt, got_out, out, gemm_tol);
            }
            const double flops = 2.0 * N * K * OC;
            const float fused = time_ms(
                [&] { gpu::matmul_forward_gelu(d_out.ptr, d_pre.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, K, OC, stream); },
                a.reps, stream);
            report("fc forward_gelu", dt, fused, ((double)N * K + (double)OC * K + 2.0 * N * OC) * s, flops,
                   peak_flops<H>());
            const float separate = time_ms(
                [&] {
                    gpu::matmul_forward(d_pre.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, K, OC, stream);
                    gpu::gelu_forward(d_out.ptr, d_pre.ptr, (size_t)N * OC, stream);
                },
                a.reps, stream);
            speedup("fc forward + gelu", dt, separate, fused);
        }
        // ---- fcproj's dinp: (N, C) · (C, 4C), then gelu' of fch ----
        {
            const int K = 4 * C, OC = C;   // fcproj maps 4C to C: its dinp is (N, 4C)
            std::vector<H> dout = r.normal<H>((size_t)N * OC), w = r.normal<H>((size_t)OC * K, 0.05);
            std::vector<H> pre = r.normal<H>((size_t)N * K, 2.0);
            DeviceBuffer<D> d_dout(dout), d_w(w), d_pre(pre), d_dinp((size_t)N * K), d_g((size_t)N * K);
            DeviceBuffer<float> d_dw((size_t)OC * K);
            if (a.check) {
                const int n = Ncheck;
                std::vector<H> dinp((size_t)n * K);
                cpu::matmul_backward_dgelu(dinp.data(), dout.data(), w.data(), pre.data(), n, K, OC);
                d_dinp.poison();
                gpu::matmul_backward_dgelu(d_dinp.ptr, d_dout.ptr, d_w.ptr, d_pre.ptr, n, K, OC, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                std::vector<H> got = d_dinp.template download<H>();
                got.resize(dinp.size());
                check("fcproj backward_dgelu dinp", dt, got, dinp, gemm_tol);
            }
            const double flops = 2.0 * N * K * OC;
            const float fused = time_ms(
                [&] { gpu::matmul_backward_dgelu(d_dinp.ptr, d_dout.ptr, d_w.ptr, d_pre.ptr, N, K, OC, stream); },
                a.reps, stream);
            report("fcproj backward_dgelu", dt, fused, ((double)N * OC + (double)OC * K + 2.0 * N * K) * s, flops,
                   peak_flops<H>());
            const float separate = time_ms(
                [&] {
                    gpu::matmul_backward(d_g.ptr, (float*)nullptr, (float*)nullptr, d_dout.ptr, d_dout.ptr, d_w.ptr, N,
                                         K, OC, stream);
                    gpu::gelu_backward(d_dinp.ptr, d_pre.ptr, d_g.ptr, (size_t)N * K, stream);
                },
                a.reps, stream);
            speedup("fcproj dinp + gelu_backward", dt, separate, fused);
        }
        // ---- bias gradients in the dW GEMM ----
        const Gemm gemms[] = {{"qkv", C, 3 * C}, {"attproj", C, C}, {"fc", C, 4 * C}, {"fcproj", 4 * C, C}};
        for (const Gemm& g : gemms) {
            const std::string what = std::string(g.name) + " dW+db (bgrad)";
            std::vector<H> inp = r.normal<H>((size_t)N * g.C), w = r.normal<H>((size_t)g.OC * g.C, 0.05);
            std::vector<H> dout = r.normal<H>((size_t)N * g.OC, 0.1);
            std::vector<float> dw0 = r.normal<float>((size_t)g.OC * g.C, 0.01), db0 = r.normal<float>(g.OC, 0.01);
            DeviceBuffer<D> d_inp(inp), d_w(w), d_dout(dout);
            DeviceBuffer<float> d_dw(dw0), d_db(db0);
            if (a.check) {
                const int n = Ncheck;
                std::vector<float> dw = dw0, db = db0;
                cpu::matmul_backward((H*)nullptr, dw.data(), db.data(), dout.data(), inp.data(), w.data(), n, g.C,
                                     g.OC);
                gpu::matmul_backward_bgrad((D*)nullptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, n, g.C,
                                           g.OC, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check((what + " dweight").c_str(), dt, d_dw.template download<float>(), dw, 1e-5);
                check((what + " dbias").c_str(), dt, d_db.template download<float>(), db, 1e-5);
            }
            const float fused = time_ms(
                [&] {
                    gpu::matmul_backward_bgrad((D*)nullptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, g.C,
                                               g.OC, stream);
                },
                a.reps, stream);
            report(what.c_str(), dt, fused, ((double)N * g.OC + (double)N * g.C) * s + 8.0 * g.OC * g.C,
                   2.0 * N * g.C * g.OC, peak_flops<H>());
            const float separate = time_ms(
                [&] {
                    gpu::matmul_backward((D*)nullptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, N, g.C, g.OC,
                                         stream);
                },
                a.reps, stream);
            speedup((std::string(g.name) + " dW + column sums").c_str(), dt, separate, fused);
        }
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
