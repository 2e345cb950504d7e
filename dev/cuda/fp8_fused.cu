// dev/cuda/fp8_fused.cu — the FP8 casts fused into their producers (llmc/cuda/fp8_fused.cuh)
// against the unfused pair they replace (the producer writing the activation dtype, then
// quantize_transpose_fp8 of it), on the shapes of a GPT-2 block:
//
//   layernorm → E4M3 (B·T, C), q and qᵀ, mean, rstd   X of qkv and fc
//   gelu → E4M3 (B·T, 4C), q only (forward) and qᵀ only (the backward's recast)   X of fcproj
//   gelu backward → dinp, E5M2 q and qᵀ (B·T, 4C)       dY of fc
//   AdamW → E4M3 W and Wᵀ (4C, C), master weights         W of fc
//
// Check: fused = unfused on the GPU, every byte (q, qᵀ, mean, rstd, dinp) and every statistic
// (bound: bit-identical; fp8_fused.cuh says why they must be). The CPU twins are checked by
// tests/cuda/test_cuda_fp8_fused.cu.
// Bytes moved (s = bytes of T, n = elements), the roofline of each row:
//   layernorm fused    x read twice (statistics, then the cast), q and qᵀ written: 2sn + 2n
//             unfused  x twice, y written and read back, q and qᵀ:                 4sn + 2n
//   gelu fused         x read, one layout written:                                  sn + n
//        unfused       x read, y written and read back, one layout:                 3sn + n
//   gelu bwd fused     x, dout, dinp read, dinp written, q and qᵀ:                  4sn + 2n
//            unfused   the same, then dinp read back by the cast:                   5sn + 2n
//   adamw fused        master, m, v, grad read, master, m, v, W written, W, Wᵀ:     28n + sn + 2n
//         unfused      the same, then W read back by the cast:                      28n + 2sn + 2n
// The fusion can buy at most the ratio of those bytes; the timing says what it buys.
#include "harness.cuh"

#include "cuda/fp8_fused.cuh"

using namespace harness;
namespace gpu = train_gpt::cuda;
using train_gpt::Fp8Counters;
using train_gpt::fp8e4m3;
using train_gpt::fp8e5m2;

namespace {
struct Counters {   // one Fp8Counters in device memory, zeroed
    DeviceBuffer<Fp8Counters> buf{1};
    Counters() { cudaCheck(cudaMemset(buf.ptr, 0, sizeof(Fp8Counters))); }
    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> b(sizeof(Fp8Counters));
        cudaCheck(cudaMemcpy(b.data(), buf.ptr, b.size(), cudaMemcpyDeviceToHost));
        return b;
    }
};
}   // namespace

static int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        using D = dev_type<H>;
        const char* dt = Dev<H>::name;
        const double s = sizeof(H);
        const int N = a.B * a.T, C = a.C;
        Random r(a.seed);

        // ---- layernorm → E4M3 --------------------------------------------------------------
        {
            const size_t n = (size_t)N * C;
            DeviceBuffer<D> x(r.template normal<H>(n, 2.0, 0.5)), w(r.template normal<H>(C, 0.3, 1.0)),
                b(r.template normal<H>(C, 0.2)), y(n);
            DeviceBuffer<float> mean_f(N), rstd_f(N), mean_u(N), rstd_u(N), scale(std::vector<float>{448.0f / 8.0f});
            DeviceBuffer<uint8_t> qf(n), qtf(n), qu(n), qtu(n);
            if (a.check) {
                Counters kf, ku;
                for (auto* p : {&qf, &qtf, &qu, &qtu})
                    p->poison();
                gpu::layernorm_forward_fp8(qf.as<fp8e4m3>(), qtf.as<fp8e4m3>(), mean_f.ptr, rstd_f.ptr, x.ptr, w.ptr,
                                           b.ptr, N, C, scale.ptr, kf.buf.ptr, stream);
                gpu::layernorm_forward(y.ptr, mean_u.ptr, rstd_u.ptr, x.ptr, w.ptr, b.ptr, N, C, stream);
                gpu::quantize_transpose_fp8(qu.as<fp8e4m3>(), qtu.as<fp8e4m3>(), y.ptr, N, C, scale.ptr, ku.buf.ptr,
                                            stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check_bytes("layernorm e4m3 q", dt, qf.template download<uint8_t>(), qu.template download<uint8_t>());
                check_bytes("layernorm e4m3 qt", dt, qtf.template download<uint8_t>(),
                            qtu.template download<uint8_t>());
                check_bytes("layernorm mean", dt, mean_f.template download<float>(), mean_u.template download<float>());
                check_bytes("layernorm rstd", dt, rstd_f.template download<float>(), rstd_u.template download<float>());
                check_bytes("layernorm e4m3 statistics", dt, kf.bytes(), ku.bytes());
            }
            Counters k;
            float ms = time_ms(
                [&] {
                    gpu::layernorm_forward_fp8(qf.as<fp8e4m3>(), qtf.as<fp8e4m3>(), mean_f.ptr, rstd_f.ptr, x.ptr,
                                               w.ptr, b.ptr, N, C, scale.ptr, k.buf.ptr, stream);
                },
                a.reps, stream);
            report("layernorm→e4m3 q+qt fused", dt, ms, 2 * s * n + 2.0 * n, 0, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::layernorm_forward(y.ptr, mean_u.ptr, rstd_u.ptr, x.ptr, w.ptr, b.ptr, N, C, stream);
                    gpu::quantize_transpose_fp8(qu.as<fp8e4m3>(), qtu.as<fp8e4m3>(), y.ptr, N, C, scale.ptr, k.buf.ptr,
                                                stream);
                },
                a.reps, stream);
            report("layernorm, then cast (unfused)", dt, ms, 4 * s * n + 2.0 * n, 0, peak_flops<H>());
        }

        // ---- gelu → E4M3 and gelu backward → E5M2, on (B·T, 4C) -----------------------------
        {
            const int cols = 4 * C;
            const size_t n = (size_t)N * cols;
            DeviceBuffer<D> x(r.template normal<H>(n, 2.0)), dout(r.template normal<H>(n, 1e-3)), y(n);
            const std::vector<H> start = r.template normal<H>(n, 1e-3);
            DeviceBuffer<D> dinp_f(start), dinp_u(start);
            DeviceBuffer<float> scale4(std::vector<float>{448.0f / 16.0f}),
                scale5(std::vector<float>{57344.0f / 0.02f});
            DeviceBuffer<uint8_t> qf(n), qtf(n), qu(n), qtu(n);
            if (a.check) {
                for (int layout = 0; layout < 2; layout++) {   // 0: q only (forward), 1: qt only (backward recast)
                    Counters kf, ku;
                    for (auto* p : {&qf, &qtf, &qu, &qtu})
                        p->poison();
                    fp8e4m3* f = layout == 0 ? qf.as<fp8e4m3>() : nullptr;
                    fp8e4m3* ft = layout == 1 ? qtf.as<fp8e4m3>() : nullptr;
                    fp8e4m3* u = layout == 0 ? qu.as<fp8e4m3>() : nullptr;
                    fp8e4m3* ut = layout == 1 ? qtu.as<fp8e4m3>() : nullptr;
                    gpu::gelu_forward_fp8(f, ft, x.ptr, N, cols, scale4.ptr, kf.buf.ptr, stream);
                    gpu::gelu_forward(y.ptr, x.ptr, n, stream);
                    gpu::quantize_transpose_fp8(u, ut, y.ptr, N, cols, scale4.ptr, ku.buf.ptr, stream);
                    cudaCheck(cudaStreamSynchronize(stream));
                    const DeviceBuffer<uint8_t>& fb = layout == 0 ? qf : qtf;
                    const DeviceBuffer<uint8_t>& ub = layout == 0 ? qu : qtu;
                    check_bytes(layout == 0 ? "gelu e4m3 q" : "gelu e4m3 qt", dt, fb.template download<uint8_t>(),
                                ub.template download<uint8_t>());
                    check_bytes("gelu e4m3 statistics", dt, kf.bytes(), ku.bytes());
                }
                Counters kf, ku;
                gpu::gelu_backward_fp8(dinp_f.ptr, qf.as<fp8e5m2>(), qtf.as<fp8e5m2>(), x.ptr, dout.ptr, N, cols,
                                       scale5.ptr, kf.buf.ptr, stream);
                gpu::gelu_backward(dinp_u.ptr, x.ptr, dout.ptr, n, stream);
                gpu::quantize_transpose_fp8(qu.as<fp8e5m2>(), qtu.as<fp8e5m2>(), dinp_u.ptr, N, cols, scale5.ptr,
                                            ku.buf.ptr, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check_bytes("gelu backward dinp", dt, dinp_f.template download<H>(), dinp_u.template download<H>());
                check_bytes("gelu backward e5m2 q", dt, qf.template download<uint8_t>(),
                            qu.template download<uint8_t>());
                check_bytes("gelu backward e5m2 qt", dt, qtf.template download<uint8_t>(),
                            qtu.template download<uint8_t>());
                check_bytes("gelu backward statistics", dt, kf.bytes(), ku.bytes());
            }
            Counters k;
            float ms = time_ms(
                [&] {
                    gpu::gelu_forward_fp8(qf.as<fp8e4m3>(), (fp8e4m3*)nullptr, x.ptr, N, cols, scale4.ptr, k.buf.ptr,
                                          stream);
                },
                a.reps, stream);
            report("gelu→e4m3 q fused (4C)", dt, ms, s * n + n, 0, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::gelu_forward(y.ptr, x.ptr, n, stream);
                    gpu::quantize_transpose_fp8(qu.as<fp8e4m3>(), (fp8e4m3*)nullptr, y.ptr, N, cols, scale4.ptr,
                                                k.buf.ptr, stream);
                },
                a.reps, stream);
            report("gelu, then cast q (unfused)", dt, ms, 3 * s * n + n, 0, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::gelu_forward_fp8((fp8e4m3*)nullptr, qtf.as<fp8e4m3>(), x.ptr, N, cols, scale4.ptr, k.buf.ptr,
                                          stream);
                },
                a.reps, stream);
            report("gelu→e4m3 qt fused (recast)", dt, ms, s * n + n, 0, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::gelu_backward_fp8(dinp_f.ptr, qf.as<fp8e5m2>(), qtf.as<fp8e5m2>(), x.ptr, dout.ptr, N, cols,
                                           scale5.ptr, k.buf.ptr, stream);
                },
                a.reps, stream);
            report("gelu bwd→e5m2 q+qt fused", dt, ms, 4 * s * n + 2.0 * n, 0, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::gelu_backward(dinp_u.ptr, x.ptr, dout.ptr, n, stream);
                    gpu::quantize_transpose_fp8(qu.as<fp8e5m2>(), qtu.as<fp8e5m2>(), dinp_u.ptr, N, cols, scale5.ptr,
                                                k.buf.ptr, stream);
                },
                a.reps, stream);
            report("gelu bwd, then cast (unfused)", dt, ms, 5 * s * n + 2.0 * n, 0, peak_flops<H>());
        }

        // ---- AdamW → E4M3, on fc's weight (4C, C) --------------------------------------------
        {
            const int rows = 4 * C, cols = C;
            const size_t n = (size_t)rows * cols;
            const std::vector<float> w0 = r.template normal<float>(n, 0.02), g0 = r.template normal<float>(n, 1e-2);
            std::vector<H> wh(n);
            for (size_t i = 0; i < n; i++)
                wh[i] = to_h<H>(w0[i]);
            DeviceBuffer<float> mf(w0), mu(w0), m_f(n), m_u(n), v_f(n), v_u(n), g(g0);
            DeviceBuffer<D> wf(wh), wu(wh);
            DeviceBuffer<float> scale(std::vector<float>{448.0f / 0.1f});
            DeviceBuffer<uint8_t> qf(n), qtf(n), qu(n), qtu(n);
            for (auto* p : {&m_f, &m_u, &v_f, &v_u})
                cudaCheck(cudaMemset(p->ptr, 0, p->bytes()));
            if (a.check) {
                Counters kf, ku;
                gpu::adamw_update_fp8(mf.ptr, wf.ptr, m_f.ptr, v_f.ptr, g.ptr, rows, cols, 1e-3f, 0.9f, 0.95f, 1e-8f,
                                      0.1f, 1.0f, 1, qf.as<fp8e4m3>(), qtf.as<fp8e4m3>(), scale.ptr, kf.buf.ptr,
                                      stream);
                gpu::adamw_update(mu.ptr, wu.ptr, m_u.ptr, v_u.ptr, g.ptr, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1,
                                  stream);
                gpu::quantize_transpose_fp8(qu.as<fp8e4m3>(), qtu.as<fp8e4m3>(), wu.ptr, rows, cols, scale.ptr,
                                            ku.buf.ptr, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check_bytes("adamw master", dt, mf.template download<float>(), mu.template download<float>());
                check_bytes("adamw working", dt, wf.template download<H>(), wu.template download<H>());
                check_bytes("adamw e4m3 q", dt, qf.template download<uint8_t>(), qu.template download<uint8_t>());
                check_bytes("adamw e4m3 qt", dt, qtf.template download<uint8_t>(), qtu.template download<uint8_t>());
                check_bytes("adamw e4m3 statistics", dt, kf.bytes(), ku.bytes());
            }
            Counters k;
            float ms = time_ms(
                [&] {
                    gpu::adamw_update_fp8(mf.ptr, wf.ptr, m_f.ptr, v_f.ptr, g.ptr, rows, cols, 1e-3f, 0.9f, 0.95f,
                                          1e-8f, 0.1f, 1.0f, 1, qf.as<fp8e4m3>(), qtf.as<fp8e4m3>(), scale.ptr,
                                          k.buf.ptr, stream);
                },
                a.reps, stream);
            report("adamw→e4m3 W+Wt fused (4C,C)", dt, ms, 28.0 * n + s * n + 2.0 * n, 0, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::adamw_update(mu.ptr, wu.ptr, m_u.ptr, v_u.ptr, g.ptr, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f,
                                      1, stream);
                    gpu::quantize_transpose_fp8(qu.as<fp8e4m3>(), qtu.as<fp8e4m3>(), wu.ptr, rows, cols, scale.ptr,
                                                k.buf.ptr, stream);
                },
                a.reps, stream);
            report("adamw, then cast (unfused)", dt, ms, 28.0 * n + 2 * s * n + 2.0 * n, 0, peak_flops<H>());
        }
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
