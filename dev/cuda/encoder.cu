// dev/cuda/encoder.cu — token + position embedding (llmc/cuda/encoder.cuh) against cpu::encoder_*.
//
//   forward   out (B,T,C) = wte[tokens] + wpe[t]          exact (one add, one rounding)
//   backward  dwte (Vp,C) += scatter of dout by token;     bit-identical to the CPU's serial
//             dwpe (T,C)  += Σ_b dout                      chain by design; bound 1e-5 (fp32 sums)
// Bytes: forward reads tokens, B·T gathered wte rows, wpe, writes out; backward reads dout and
// tokens, reads and writes the touched dwte rows and dwpe.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/encoder.cuh"

#include <set>

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
        const int B = a.B, T = a.T, C = a.C, Vp = (a.V + 127) / 128 * 128;
        const size_t BT = (size_t)B * T, s = sizeof(H);
        Random r(a.seed);
        std::vector<int32_t> tokens = r.ints(BT, a.V);
        std::vector<H> wte = r.normal<H>((size_t)Vp * C, 0.02), wpe = r.normal<H>((size_t)T * C, 0.02);
        std::vector<H> dout = r.normal<H>(BT * C);
        std::vector<float> dwte0 = r.normal<float>((size_t)Vp * C), dwpe0 = r.normal<float>((size_t)T * C);
        DeviceBuffer<int32_t> d_tokens(tokens);
        DeviceBuffer<D> d_wte(wte), d_wpe(wpe), d_out(BT * C), d_dout(dout);
        DeviceBuffer<float> d_dwte(dwte0), d_dwpe(dwpe0);

        if (a.check) {
            std::vector<H> out(BT * C);
            cpu::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
            d_out.poison();
            gpu::encoder_forward(d_out.ptr, d_tokens.ptr, d_wte.ptr, d_wpe.ptr, B, T, C, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check_bytes("encoder_forward out", dt, d_out.template download<H>(), out);
            std::vector<float> dwte = dwte0, dwpe = dwpe0;
            cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
            gpu::encoder_backward(d_dwte.ptr, d_dwpe.ptr, d_dout.ptr, d_tokens.ptr, B, T, C, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("encoder_backward dwte", dt, d_dwte.template download<float>(), dwte, 1e-5);
            check("encoder_backward dwpe", dt, d_dwpe.template download<float>(), dwpe, 1e-5);
        }
        const size_t distinct = std::set<int32_t>(tokens.begin(), tokens.end()).size();
        float ms =
            time_ms([&] { gpu::encoder_forward(d_out.ptr, d_tokens.ptr, d_wte.ptr, d_wpe.ptr, B, T, C, stream); },
                    a.reps, stream);
        report("encoder_forward", dt, ms, 4.0 * BT + (2.0 * BT + T) * C * s, (double)BT * C, peak_flops<H>());
        ms = time_ms([&] { gpu::encoder_backward(d_dwte.ptr, d_dwpe.ptr, d_dout.ptr, d_tokens.ptr, B, T, C, stream); },
                     a.reps, stream);
        report("encoder_backward", dt, ms, 4.0 * BT + (double)BT * C * s + 8.0 * (distinct + T) * C, 2.0 * BT * C,
               peak_flops<H>());
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
