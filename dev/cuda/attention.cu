// dev/cuda/attention.cu — causal attention against cpu::attention_*, in three versions: flash
// (llmc/cuda/attention.cuh, CUDA cores), GEMM (llmc/cuda/attention_gemm.cuh, cuBLASLt with
// the T×T scores in scratch) and WMMA (llmc/cuda/attention_wmma.cuh, flash on tensor cores;
// bf16/fp16 only, skipped for fp32), checked with the same bounds and timed side by side.
//
//   forward   out (B,T,C), lse (B,NH,T) FP32 from qkv (B,T,3C)   bound: 4 ulps (16-bit: P is
//             rounded before P·V), 1e-5 (fp32, lse)
//   backward  dqkv (B,T,3C) from dout, qkv, out, lse (from zeros)  bound: 4 ulps / 5e-5
// FLOPs (causal: half of the T×T scores): forward 2 matmuls = 2·B·NH·T²·hs, backward 5 (S and
// P recomputed, dV, dP, dQ, dK) = 5·B·NH·T²·hs. Bytes: qkv read, out written (+ lse); backward
// reads qkv, out, dout, lse and reads + writes dqkv.
// The GEMM version is reported with the same (causal) FLOPs and bytes, so the two lines compare
// as times; it really does the full T×T (2× the FLOPs) and moves the T×T scratch as well.
// The WMMA backward is reported with the same 5·B·NH·T²·hs; it really does 7 (S and dP are
// recomputed in both of its kernels) and skips the masked 16×16 blocks of the diagonal tiles.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "attention_scalar.cuh"
#include "cuda/attention_gemm.cuh"
#include "attention_wmma.cuh"

#include <type_traits>

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
        const int B = a.B, T = a.T, C = a.C, NH = a.NH, hs = C / NH;
        const double s = sizeof(H), BTC = (double)B * T * C;
        Random r(a.seed);
        std::vector<H> qkv = r.normal<H>((size_t)B * T * 3 * C, 1.5), dout = r.normal<H>((size_t)B * T * C);
        // dqkv starts from zeros: the GEMM version overwrites it, the lab versions add into it
        const std::vector<H> dqkv0 = r.normal<H>((size_t)B * T * 3 * C, 0.0);
        std::vector<H> out((size_t)B * T * C);
        std::vector<float> lse((size_t)B * NH * T);
        if (a.check) cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        DeviceBuffer<D> d_qkv(qkv), d_out(out.size()), d_dout(dout), d_dqkv(dqkv0);
        DeviceBuffer<float> d_lse(lse.size());
        if (a.check) {
            d_out.poison();
            d_lse.poison();
            gpu::attention_forward(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("attention_forward out", dt, d_out.template download<H>(), out, tol<H>(1e-5, 4));
            check("attention_forward lse", dt, d_lse.template download<float>(), lse, 1e-5);
            // backward from the CPU forward's out and lse on both sides
            d_out.upload(out);
            d_lse.upload(lse);
            std::vector<H> dqkv = dqkv0;
            cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
            gpu::attention_backward(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("attention_backward dqkv", dt, d_dqkv.template download<H>(), dqkv, tol<H>(5e-5, 4));
            // the GEMM version: same inputs, same CPU results
            d_out.poison();
            d_lse.poison();
            gpu::attention_forward_gemm(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("attention_forward_gemm out", dt, d_out.template download<H>(), out, tol<H>(1e-5, 4));
            check("attention_forward_gemm lse", dt, d_lse.template download<float>(), lse, 1e-5);
            d_out.upload(out);
            d_lse.upload(lse);
            d_dqkv.upload(dqkv0);
            gpu::attention_backward_gemm(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("attention_backward_gemm dqkv", dt, d_dqkv.template download<H>(), dqkv, tol<H>(5e-5, 4));
            // the WMMA version (16-bit types only): same inputs, same CPU results
            if constexpr (!std::is_same_v<D, float>) {
                d_out.poison();
                d_lse.poison();
                gpu::attention_forward_wmma(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check("attention_forward_wmma out", dt, d_out.template download<H>(), out, tol<H>(1e-5, 4));
                check("attention_forward_wmma lse", dt, d_lse.template download<float>(), lse, 1e-5);
                d_out.upload(out);
                d_lse.upload(lse);
                d_dqkv.upload(dqkv0);
                gpu::attention_backward_wmma(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                             stream);
                cudaCheck(cudaStreamSynchronize(stream));
                const std::vector<H> first = d_dqkv.template download<H>();
                check("attention_backward_wmma dqkv", dt, first, dqkv, tol<H>(5e-5, 4));
                d_dqkv.upload(dqkv0);
                gpu::attention_backward_wmma(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                             stream);
                cudaCheck(cudaStreamSynchronize(stream));
                check_bytes("attention_backward_wmma determinism", dt, d_dqkv.template download<H>(), first);
            }
        }
        const double fwd_flops = 2.0 * B * NH * (double)T * T * hs;
        float ms = time_ms([&] { gpu::attention_forward(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream); },
                           a.reps, stream);
        report("attention_forward", dt, ms, 4 * BTC * s + 4.0 * B * NH * T, fwd_flops, peak_flops<H>());
        ms = time_ms(
            [&] {
                gpu::attention_backward(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
            },
            a.reps, stream);
        report("attention_backward", dt, ms, 11 * BTC * s + 4.0 * B * NH * T, 2.5 * fwd_flops, peak_flops<H>());
        ms = time_ms([&] { gpu::attention_forward_gemm(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream); }, a.reps,
                     stream);
        report("attention_forward_gemm", dt, ms, 4 * BTC * s + 4.0 * B * NH * T, fwd_flops, peak_flops<H>());
        ms = time_ms(
            [&] {
                gpu::attention_backward_gemm(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                             stream);
            },
            a.reps, stream);
        report("attention_backward_gemm", dt, ms, 11 * BTC * s + 4.0 * B * NH * T, 2.5 * fwd_flops, peak_flops<H>());
        if constexpr (!std::is_same_v<D, float>) {
            ms = time_ms([&] { gpu::attention_forward_wmma(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream); },
                         a.reps, stream);
            report("attention_forward_wmma", dt, ms, 4 * BTC * s + 4.0 * B * NH * T, fwd_flops, peak_flops<H>());
            ms = time_ms(
                [&] {
                    gpu::attention_backward_wmma(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                                 stream);
                },
                a.reps, stream);
            report("attention_backward_wmma", dt, ms, 11 * BTC * s + 4.0 * B * NH * T, 2.5 * fwd_flops,
                   peak_flops<H>());
        }
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
