// dev/cuda/attention_flash.cu — the tensor-core flash attention (llmc/cuda/attention_flash.cuh)
// checked against cpu::attention_forward / attention_backward, then timed beside the cuBLASLt
// GEMM attention (attention_gemm.cuh) on the shapes of the SDPA comparison (dev/cuda/attention_sdpa.py):
// B·NH = 16·12 and 8·25, T = 1024, hs = 64 (or the one shape given by --B/--T/--C/--NH, C = 64·NH).
// bf16 and fp16 only (the kernel has no fp32 path; --dtype fp32 reports that and skips).
//
//   forward   out (B,T,C), lse (B,NH,T) FP32 from qkv (B,T,3C)     bound: 4 ulps normwise (out), 1e-5 (lse)
//   backward  dqkv (B,T,3C) OVERWRITTEN, from dout, qkv, out, lse  bound: 4 ulps normwise; compared with the
//             CPU twin run on a zeroed dqkv; run twice (second time into random values): bit-identical
// (ulps as harness.cuh counts them; tests/attention_bounds.h has the per-element derivation, and
// tests/cuda/test_cuda_attention_flash.cu holds the kernel to it.)
//
// FLOPs, counted as every causal attention benchmark counts them (FlashAttention's, PyTorch's):
//   forward   4·B·NH·T²·hs / 2   (QKᵀ and PV, 2 FLOPs per multiply-add, half the T×T for causality)
//   backward  2.5 × forward      (5 products: QKᵀ recomputed, dV, dP, dQ, dK)
// This kernel's backward really does 7 half-triangle products (S and dP in both the dK/dV and the
// dQ kernels, for a deterministic dQ without atomics), and the diagonal tiles' masked halves are
// computed too; the GEMM attention does the full T×T (twice the causal work). All are reported
// with the same counts, so the TFLOP/s columns compare as times.
//
// Output: the harness's check and time lines, then one line per (implementation, dtype, shape)
//   attn impl=<flash|flash-wide|gemm|cudnn> dtype=<bf16|fp16> B=… NH=… T=… hs=64 fwd_ms=… fwd_tflops=… bwd_ms=…
//        bwd_tflops=… fwdbwd_ms=… fwdbwd_tflops=…
// in the format attention_sdpa.py prints for PyTorch, so the two can be joined on (dtype, B, NH, T).
// flash-wide: the flash forward with the wide backward (--flash-backward wide,
// cuda/attention_flash_bwd_wide.cuh), checked to give the default backward's bytes.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/attention_cudnn.h"
#include "cuda/attention_flash.cuh"
#include "cuda/attention_flash_bwd_wide.cuh"
#include "cuda/attention_gemm.cuh"

#include <cstdio>
#include <type_traits>
#include <vector>

using namespace harness;
namespace cpu = train_gpt::cpu;
namespace gpu = train_gpt::cuda;

namespace {

struct Shape {
    int B, T, NH;
};

void print_line(const char* impl, const char* dtype, const Shape& s, double fwd_flops, float fwd_ms, float bwd_ms,
                float fwdbwd_ms) {
    const double bwd_flops = 2.5 * fwd_flops;
    std::printf(
        "attn impl=%s dtype=%s B=%d NH=%d T=%d hs=64 fwd_ms=%.4f fwd_tflops=%.1f bwd_ms=%.4f bwd_tflops=%.1f "
        "fwdbwd_ms=%.4f fwdbwd_tflops=%.1f\n",
        impl, dtype, s.B, s.NH, s.T, fwd_ms, fwd_flops / (fwd_ms * 1e-3) / 1e12, bwd_ms,
        bwd_flops / (bwd_ms * 1e-3) / 1e12, fwdbwd_ms, (fwd_flops + bwd_flops) / (fwdbwd_ms * 1e-3) / 1e12);
}

template <typename H>
void run_shape(const Args& a, const Shape& s, cudaStream_t stream) {
    using D = dev_type<H>;
    const char* dt = Dev<H>::name;
    const int B = s.B, T = s.T, NH = s.NH, C = 64 * NH;
    std::printf("-- %s B=%d NH=%d T=%d hs=64\n", dt, B, NH, T);
    const double s_bytes = sizeof(H), BTC = (double)B * T * C;
    Random r(a.seed);
    std::vector<H> qkv = r.normal<H>((size_t)B * T * 3 * C, 1.5), dout = r.normal<H>((size_t)B * T * C);
    std::vector<H> out((size_t)B * T * C);
    std::vector<float> lse((size_t)B * NH * T);
    DeviceBuffer<D> d_qkv(qkv), d_out(out.size()), d_dout(dout), d_dqkv(qkv.size());
    DeviceBuffer<float> d_lse(lse.size());
    if (a.check) {
        cpu::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
        d_out.poison();
        d_lse.poison();
        gpu::attention_forward_flash(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream);
        cudaCheck(cudaStreamSynchronize(stream));
        check("attention_forward_flash out", dt, d_out.template download<H>(), out, tol<H>(0, 4));
        check("attention_forward_flash lse", dt, d_lse.template download<float>(), lse, 1e-5);
        // backward from the CPU forward's out and lse on both sides; the CPU accumulates into zeros
        d_out.upload(out);
        d_lse.upload(lse);
        std::vector<H> dqkv(qkv.size(), to_h<H>(0.0f));
        cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
        d_dqkv.poison();
        gpu::attention_backward_flash(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
        cudaCheck(cudaStreamSynchronize(stream));
        const std::vector<H> first = d_dqkv.template download<H>();
        check("attention_backward_flash dqkv", dt, first, dqkv, tol<H>(0, 4));
        d_dqkv.upload(r.normal<H>(qkv.size(), 0.1));   // overwritten, not accumulated into
        gpu::attention_backward_flash(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
        cudaCheck(cudaStreamSynchronize(stream));
        check_bytes("attention_backward_flash rerun", dt, d_dqkv.template download<H>(), first);
        // the wide backward (--flash-backward wide): the same values as the default kernels
        d_dqkv.poison();
        gpu::attention_backward_flash_wide(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                           stream);
        cudaCheck(cudaStreamSynchronize(stream));
        check_bytes("attention_backward_flash_wide vs default", dt, d_dqkv.template download<H>(), first);
    }
    const double fwd_flops = 4.0 * B * NH * (double)T * T * 64 / 2;
    const double fwd_bytes = 4 * BTC * s_bytes + 4.0 * B * NH * T;   // qkv read, out written, lse
    const double bwd_bytes =
        3 * BTC * s_bytes + 2 * BTC * s_bytes + 3 * BTC * s_bytes + 4.0 * B * NH * T;   // qkv, dout + out, dqkv
    auto fwd = [&] { gpu::attention_forward_flash(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream); };
    auto bwd = [&] {
        gpu::attention_backward_flash(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
    };
    const float f_ms = time_ms(fwd, a.reps, stream);
    report("attention_forward_flash", dt, f_ms, fwd_bytes, fwd_flops, peak_flops<H>());
    const float b_ms = time_ms(bwd, a.reps, stream);
    report("attention_backward_flash", dt, b_ms, bwd_bytes, 2.5 * fwd_flops, peak_flops<H>());
    const float fb_ms = time_ms(
        [&] {
            fwd();
            bwd();
        },
        a.reps, stream);
    // the GEMM attention on the same buffers (its backward accumulates into dqkv: same cost for timing)
    auto gfwd = [&] { gpu::attention_forward_gemm(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, stream); };
    auto gbwd = [&] {
        gpu::attention_backward_gemm(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, stream);
    };
    const float gf_ms = time_ms(gfwd, a.reps, stream);
    report("attention_forward_gemm", dt, gf_ms, fwd_bytes, fwd_flops, peak_flops<H>());
    const float gb_ms = time_ms(gbwd, a.reps, stream);
    report("attention_backward_gemm", dt, gb_ms, bwd_bytes, 2.5 * fwd_flops, peak_flops<H>());
    const float gfb_ms = time_ms(
        [&] {
            gfwd();
            gbwd();
        },
        a.reps, stream);
    auto wbwd = [&] {
        gpu::attention_backward_flash_wide(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH,
                                           stream);
    };
    const float wb_ms = time_ms(wbwd, a.reps, stream);
    report("attention_backward_flash_wide", dt, wb_ms, bwd_bytes, 2.5 * fwd_flops, peak_flops<H>());
    const float wfb_ms = time_ms(
        [&] {
            fwd();
            wbwd();
        },
        a.reps, stream);
    print_line("flash", dt, s, fwd_flops, f_ms, b_ms, fb_ms);
    print_line("flash-wide", dt, s, fwd_flops, f_ms, wb_ms, wfb_ms);
    print_line("gemm", dt, s, fwd_flops, gf_ms, gb_ms, gfb_ms);
    // cuDNN's fused attention (--attention cudnn), where the build has it: the in-run peer
    std::string why;
    if (!train_gpt::cudnn_attention_available(&why)) {
        std::printf("  skip  cudnn attention: %s\n", why.c_str());
        return;
    }
    const train_gpt::DType dtype = std::is_same_v<H, bf16> ? train_gpt::DType::BF16 : train_gpt::DType::F16;
    auto cfwd = [&] {
        train_gpt::attention_forward_cudnn(d_out.ptr, d_lse.ptr, d_qkv.ptr, B, T, C, NH, dtype, stream);
    };
    auto cbwd = [&] {
        train_gpt::attention_backward_cudnn(d_dqkv.ptr, d_dout.ptr, d_qkv.ptr, d_out.ptr, d_lse.ptr, B, T, C, NH, dtype,
                                            stream);
    };
    if (a.check) {
        d_out.poison();
        cfwd();
        cudaCheck(cudaStreamSynchronize(stream));
        check("attention_forward_cudnn out", dt, d_out.template download<H>(), out, tol<H>(0, 4));
        check("attention_forward_cudnn lse", dt, d_lse.template download<float>(), lse, 1e-5);
    }
    const float cf_ms = time_ms(cfwd, a.reps, stream);
    report("attention_forward_cudnn", dt, cf_ms, fwd_bytes, fwd_flops, peak_flops<H>());
    const float cb_ms = time_ms(cbwd, a.reps, stream);
    report("attention_backward_cudnn", dt, cb_ms, bwd_bytes, 2.5 * fwd_flops, peak_flops<H>());
    const float cfb_ms = time_ms(
        [&] {
            cfwd();
            cbwd();
        },
        a.reps, stream);
    print_line("cudnn", dt, s, fwd_flops, cf_ms, cb_ms, cfb_ms);
}

int run(const Args& a) {
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    // the SDPA comparison's shapes, unless a shape was given (the harness default is GPT-2 124M's)
    std::vector<Shape> shapes = {{16, 1024, 12}, {8, 1024, 25}};
    const Args defaults;
    if (a.B != defaults.B || a.T != defaults.T || a.C != defaults.C || a.NH != defaults.NH) {
        if (a.C != 64 * a.NH) {
            std::fprintf(stderr, "attention_flash: needs head size 64 (C = 64·NH), got C=%d NH=%d\n", a.C, a.NH);
            return 2;
        }
        shapes = {{a.B, a.T, a.NH}};
    }
    return for_each_dtype(a, [&](auto tag) {
        using H = decltype(tag);
        if constexpr (std::is_same_v<H, float>) {
            std::printf(
                "-- fp32: no flash kernel (mma.sync takes bf16 / fp16 operands); the GEMM attention serves fp32\n");
        } else {
            for (const Shape& s : shapes)
                run_shape<H>(a, s, stream);
        }
    });
}

}   // namespace

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
