// dev/cuda/matmul.cu — the GEMMs (llmc/cuda/matmul.cuh, cuBLASLt) against cpu::matmul_* and
// cpu::matmul_*_fp8, on the five GEMMs of a GPT-2 block and its LM head.
//
//   forward   out (N,OC) = inp (N,C) · Wᵀ + b          bound: 2 ulps (16-bit), 1e-5 (fp32)
//   backward  dinp = dout·W; dW += doutᵀ·inp; db +=    bound: 2 ulps / 1e-5 (FP32 dW, db)
//   fp8 (bf16 only: fp8 mode keeps bf16 activations); Hopper's FP8 tensor cores accumulate in a
//   narrower register until cuBLASLt promotes to FP32 (measured 1.4e-3 / 2.1e-4, H200):
//     forward  E4M3 × E4M3, fast accumulation allowed   bound: 4e-3 + 2 ulps
//     backward E5M2 dY × E4M3, FP32 promotion            bound: 1e-3 + 2 ulps / 1e-3
// Checked on the first --check-rows rows (N = 1024 by default: the CPU twin's sgemm at full N
// takes seconds), timed at N = B·T. FLOPs: 2·N·C·OC forward, 4·N·C·OC backward; the roofline
// peak is the dtype's tensor-core rate (fp32: CUDA cores, no TF32).
//   tf32 (fp32 only: -p tf32, matmul_forward_tf32 / matmul_backward_tf32) against
//   cpu::matmul_*_tf32, which rounds the operands to nearest on the TF32 grid; cuBLASLt may
//   truncate instead: one TF32 ulp per operand, 4·2^-11 of Σ|ab|, bound 2.5e-3 normwise (with the
//   sums' orders); timed against the fp32 GEMMs above and the TF32 peak (494 TFLOP/s)
#include "harness.cuh"

#include "cpu/fp8_kernels.h"
#include "cpu/kernels.h"
#include "cuda/matmul.cuh"

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;
using train_gpt::fp8e4m3;
using train_gpt::fp8e5m2;

namespace {
struct Gemm {
    const char* name;
    int C, OC;
};
}   // namespace

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    const int C = a.C, Vp = (a.V + 127) / 128 * 128;
    const Gemm gemms[] = {
        {"qkv", C, 3 * C}, {"attproj", C, C}, {"fc", C, 4 * C}, {"fcproj", 4 * C, C}, {"lm_head", C, Vp}};
    const int N = a.B * a.T, Ncheck = std::min(N, 1024);
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        using D = dev_type<H>;
        const char* dt = Dev<H>::name;
        const double s = sizeof(H);
        for (const Gemm& g : gemms) {
            const bool lm = std::string(g.name) == "lm_head";   // no bias on the tied LM head
            Random r(a.seed);
            std::vector<H> inp = r.normal<H>((size_t)N * g.C), w = r.normal<H>((size_t)g.OC * g.C, 0.02);
            std::vector<H> b = r.normal<H>(g.OC, 0.1), dout = r.normal<H>((size_t)N * g.OC, 0.01);
            std::vector<H> dinp0 = r.normal<H>((size_t)N * g.C, 0.01);
            std::vector<float> dw0 = r.normal<float>((size_t)g.OC * g.C, 0.01), db0 = r.normal<float>(g.OC, 0.01);
            DeviceBuffer<D> d_inp(inp), d_w(w), d_b(b), d_out((size_t)N * g.OC), d_dout(dout), d_dinp(dinp0);
            DeviceBuffer<float> d_dw(dw0), d_db(db0);
            const D* bias = lm ? nullptr : d_b.ptr;
            float* dbias = lm ? nullptr : d_db.ptr;
            std::string what = std::string(g.name) + " ";
            if (a.check) {
                const int n = Ncheck;
                std::vector<H> out((size_t)n * g.OC), dinp(dinp0.begin(), dinp0.begin() + (size_t)n * g.C);
                std::vector<float> dw = dw0, db = db0;
                cpu::matmul_forward(out.data(), inp.data(), w.data(), lm ? nullptr : b.data(), n, g.C, g.OC);
                cpu::matmul_backward(dinp.data(), dw.data(), lm ? nullptr : db.data(), dout.data(), inp.data(),
                                     w.data(), n, g.C, g.OC);
                d_out.poison();
                gpu::matmul_forward(d_out.ptr, d_inp.ptr, d_w.ptr, bias, n, g.C, g.OC, stream);
                gpu::matmul_backward(d_dinp.ptr, d_dw.ptr, dbias, d_dout.ptr, d_inp.ptr, d_w.ptr, n, g.C, g.OC, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                std::vector<H> got_out = d_out.template download<H>(), got_dinp = d_dinp.template download<H>();
                got_out.resize(out.size());
                got_dinp.resize(dinp.size());
                check((what + "forward out").c_str(), dt, got_out, out, tol<H>(1e-5, 2));
                check((what + "backward dinp").c_str(), dt, got_dinp, dinp, tol<H>(1e-5, 2));
                check((what + "backward dweight").c_str(), dt, d_dw.template download<float>(), dw, 1e-5);
                if (!lm) check((what + "backward dbias").c_str(), dt, d_db.template download<float>(), db, 1e-5);
            }
            const double flops = 2.0 * N * g.C * g.OC;
            float ms = time_ms([&] { gpu::matmul_forward(d_out.ptr, d_inp.ptr, d_w.ptr, bias, N, g.C, g.OC, stream); },
                               a.reps, stream);
            report((what + "forward").c_str(), dt, ms, ((double)N * g.C + (double)g.OC * g.C + (double)N * g.OC) * s,
                   flops, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::matmul_backward(d_dinp.ptr, d_dw.ptr, dbias, d_dout.ptr, d_inp.ptr, d_w.ptr, N, g.C, g.OC,
                                         stream);
                },
                a.reps, stream);
            report((what + "backward").c_str(), dt, ms,
                   ((double)N * g.OC + 3.0 * N * g.C + (double)g.OC * g.C) * s + 8.0 * g.OC * g.C, 2 * flops,
                   peak_flops<H>());

            if constexpr (std::is_same_v<H, float>) {   // ---- tf32: the same GEMMs on TF32 tensor cores ----
                if (a.check) {
                    const int n = Ncheck;
                    std::vector<float> out((size_t)n * g.OC), dinp(dinp0.begin(), dinp0.begin() + (size_t)n * g.C);
                    std::vector<float> dw = dw0, db = db0;
                    cpu::matmul_forward_tf32(out.data(), inp.data(), w.data(), lm ? nullptr : b.data(), n, g.C, g.OC);
                    cpu::matmul_backward_tf32(dinp.data(), dw.data(), lm ? nullptr : db.data(), dout.data(), inp.data(),
                                              w.data(), n, g.C, g.OC);
                    d_out.poison();
                    d_dinp.upload(dinp0);
                    d_dw.upload(dw0);
                    d_db.upload(db0);
                    gpu::matmul_forward_tf32(d_out.ptr, d_inp.ptr, d_w.ptr, bias, n, g.C, g.OC, stream);
                    gpu::matmul_backward_tf32(d_dinp.ptr, d_dw.ptr, dbias, d_dout.ptr, d_inp.ptr, d_w.ptr, n, g.C, g.OC,
                                              stream);
                    cudaCheck(cudaStreamSynchronize(stream));
                    std::vector<float> got_out = d_out.template download<float>(),
                                       got_dinp = d_dinp.template download<float>();
                    got_out.resize(out.size());
                    got_dinp.resize(dinp.size());
                    check((what + "tf32 forward out").c_str(), "tf32", got_out, out, 2.5e-3);
                    check((what + "tf32 backward dinp").c_str(), "tf32", got_dinp, dinp, 2.5e-3);
                    check((what + "tf32 backward dweight").c_str(), "tf32", d_dw.template download<float>(), dw,
                          2.5e-3);
                    if (!lm)
                        check((what + "tf32 backward dbias").c_str(), "tf32", d_db.template download<float>(), db,
                              1e-5);
                }
                ms = time_ms(
                    [&] { gpu::matmul_forward_tf32(d_out.ptr, d_inp.ptr, d_w.ptr, bias, N, g.C, g.OC, stream); },
                    a.reps, stream);
                report((what + "tf32 forward").c_str(), "tf32", ms,
                       ((double)N * g.C + (double)g.OC * g.C + (double)N * g.OC) * s, flops, kTf32FlopsPerSec);
                ms = time_ms(
                    [&] {
                        gpu::matmul_backward_tf32(d_dinp.ptr, d_dw.ptr, dbias, d_dout.ptr, d_inp.ptr, d_w.ptr, N, g.C,
                                                  g.OC, stream);
                    },
                    a.reps, stream);
                report((what + "tf32 backward").c_str(), "tf32", ms,
                       ((double)N * g.OC + 3.0 * N * g.C + (double)g.OC * g.C) * s + 8.0 * g.OC * g.C, 2 * flops,
                       kTf32FlopsPerSec);
            }
            if (!std::is_same_v<H, bf16> || lm) continue;
            // ---- FP8: operands cast on the host (the CPU twin's cast), power-of-two scales ----
            const float sx = 64.0f, sw = 4096.0f, sdy = 8192.0f;
            // the GEMMs read 1/s from device memory (separate allocations: 16-byte aligned)
            DeviceBuffer<float> d_isx(std::vector<float>{1 / sx}), d_isw(std::vector<float>{1 / sw}),
                d_isdy(std::vector<float>{1 / sdy});
            std::vector<fp8e4m3> xq((size_t)N * g.C), wq((size_t)g.OC * g.C);
            std::vector<fp8e5m2> dyq((size_t)N * g.OC);
            for (size_t i = 0; i < xq.size(); i++)
                xq[i] = fp8e4m3::from_float(from_h(inp[i]) * sx);
            for (size_t i = 0; i < wq.size(); i++)
                wq[i] = fp8e4m3::from_float(from_h(w[i]) * sw);
            for (size_t i = 0; i < dyq.size(); i++)
                dyq[i] = fp8e5m2::from_float(from_h(dout[i]) * sdy);
            // the backward's layouts, as the casts write them (quantize_transpose_fp8)
            std::vector<fp8e4m3> xqt(xq.size()), wqt(wq.size());
            std::vector<fp8e5m2> dyqt(dyq.size());
            for (int i = 0; i < N; i++) {
                for (int c = 0; c < g.C; c++)
                    xqt[(size_t)c * N + i] = xq[(size_t)i * g.C + c];
                for (int o = 0; o < g.OC; o++)
                    dyqt[(size_t)o * N + i] = dyq[(size_t)i * g.OC + o];
            }
            for (int o = 0; o < g.OC; o++) {
                for (int c = 0; c < g.C; c++)
                    wqt[(size_t)c * g.OC + o] = wq[(size_t)o * g.C + c];
            }
            DeviceBuffer<uint8_t> d_xq(xq), d_wq(wq), d_dyq(dyq), d_xqt(xqt), d_wqt(wqt), d_dyqt(dyqt);
            d_dinp.upload(dinp0);
            d_dw.upload(dw0);
            d_db.upload(db0);
            if (a.check) {
                const int n = Ncheck;   // a multiple of 16, as FP8 backward needs
                std::vector<H> out((size_t)n * g.OC), dinp(dinp0.begin(), dinp0.begin() + (size_t)n * g.C);
                std::vector<float> dw = dw0, db = db0;
                cpu::matmul_forward_fp8(out.data(), xq.data(), 1 / sx, wq.data(), 1 / sw, b.data(), n, g.C, g.OC);
                // the first n rows: dYᵀ and Xᵀ restricted to their first n columns
                std::vector<fp8e4m3> xqt_n((size_t)g.C * n);
                std::vector<fp8e5m2> dyqt_n((size_t)g.OC * n);
                for (int c = 0; c < g.C; c++) {
                    for (int i = 0; i < n; i++)
                        xqt_n[(size_t)c * n + i] = xq[(size_t)i * g.C + c];
                }
                for (int o = 0; o < g.OC; o++) {
                    for (int i = 0; i < n; i++)
                        dyqt_n[(size_t)o * n + i] = dyq[(size_t)i * g.OC + o];
                }
                cpu::matmul_backward_fp8(dinp.data(), dw.data(), db.data(), dyq.data(), dyqt_n.data(), 1 / sdy,
                                         dout.data(), xqt_n.data(), 1 / sx, wqt.data(), 1 / sw, n, g.C, g.OC);
                d_xqt.upload(xqt_n);
                d_dyqt.upload(dyqt_n);
                d_out.poison();
                gpu::matmul_forward_fp8(d_out.ptr, d_xq.as<fp8e4m3>(), d_isx.ptr, d_wq.as<fp8e4m3>(), d_isw.ptr,
                                        d_b.ptr, n, g.C, g.OC, stream);
                gpu::matmul_backward_fp8(d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dyq.as<fp8e5m2>(), d_dyqt.as<fp8e5m2>(),
                                         d_isdy.ptr, d_dout.ptr, d_xqt.as<fp8e4m3>(), d_isx.ptr, d_wqt.as<fp8e4m3>(),
                                         d_isw.ptr, n, g.C, g.OC, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                std::vector<H> got_out = d_out.template download<H>(), got_dinp = d_dinp.template download<H>();
                got_out.resize(out.size());
                got_dinp.resize(dinp.size());
                // Hopper FP8 accumulation (tests/cuda/test_cuda_kernels.cu: kFp8FastAccum, kFp8Accum)
                check((what + "fp8 forward out").c_str(), dt, got_out, out, 4e-3 + tol<H>(0, 2));
                check((what + "fp8 backward dinp").c_str(), dt, got_dinp, dinp, tol<H>(1e-3, 2));
                check((what + "fp8 backward dweight").c_str(), dt, d_dw.template download<float>(), dw, 1e-3);
                check((what + "fp8 backward dbias").c_str(), dt, d_db.template download<float>(), db, 1e-5);
            }
            ms = time_ms(
                [&] {
                    gpu::matmul_forward_fp8(d_out.ptr, d_xq.as<fp8e4m3>(), d_isx.ptr, d_wq.as<fp8e4m3>(), d_isw.ptr,
                                            d_b.ptr, N, g.C, g.OC, stream);
                },
                a.reps, stream);
            report((what + "fp8 forward").c_str(), "fp8", ms,
                   (double)N * g.C + (double)g.OC * g.C + (double)N * g.OC * s, flops, kFp8FlopsPerSec);
            if (a.check) {   // the full-N transposed copies again (the check used the first n rows)
                d_xqt.upload(xqt);
                d_dyqt.upload(dyqt);
            }
            ms = time_ms(
                [&] {
                    gpu::matmul_backward_fp8(d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dyq.as<fp8e5m2>(), d_dyqt.as<fp8e5m2>(),
                                             d_isdy.ptr, d_dout.ptr, d_xqt.as<fp8e4m3>(), d_isx.ptr,
                                             d_wqt.as<fp8e4m3>(), d_isw.ptr, N, g.C, g.OC, stream);
                },
                a.reps, stream);
            report((what + "fp8 backward").c_str(), "fp8", ms,
                   (double)N * g.OC * (1 + s) + N * g.C * (1 + 2 * s) + (double)g.OC * g.C * 9, 2 * flops,
                   kFp8FlopsPerSec);
        }
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
