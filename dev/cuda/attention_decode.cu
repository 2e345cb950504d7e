// dev/cuda/attention_decode.cu — attention against a KV cache (llmc/cuda/attention_decode.cuh)
// against cpu::attention_decode, for one sequence of a T-position cache (--T; C, NH as given):
//
//   decode    one new query at position T−1 against all T cached positions (one sampled token)
//   prefill   all T queries at once (a prompt of T tokens)
//   bound: 4 ulps (16-bit: P is rounded before P·V), 1e-5 (fp32) — as attention_forward's.
// FLOPs: 4·hs per (query, key, head) pair, causal: decode 4·T·C, prefill 2·T²·C. Bytes: the K and
// V rows read (decode 2·T·C values; prefill counted once, 2·T·C, as a lower bound) and out.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/attention_decode.cuh"

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
        const int T = a.T, C = a.C, NH = a.NH;
        const double s = sizeof(H);
        Random r(a.seed);
        std::vector<H> qkv = r.normal<H>((size_t)T * 3 * C, 1.5);
        DeviceBuffer<D> d_qkv(qkv), d_out((size_t)T * C);
        struct Case {
            const char* name;
            int pos, n;
            double flops, bytes;
        };
        const Case cases[] = {{"attention_decode (1 query)", T - 1, 1, 4.0 * T * C, (2.0 * T * C + C) * s},
                              {"attention_decode (prefill)", 0, T, 2.0 * T * (double)T * C, (3.0 * T * C) * s}};
        for (const Case& c : cases) {
            if (a.check) {
                std::vector<H> out((size_t)c.n * C);
                cpu::attention_decode(out.data(), qkv.data(), c.pos, c.n, C, NH);
                d_out.poison();
                gpu::attention_decode(d_out.ptr, d_qkv.ptr, c.pos, c.n, C, NH, stream);
                cudaCheck(cudaStreamSynchronize(stream));
                std::vector<H> got = d_out.template download<H>();
                got.resize(out.size());
                check(c.name, dt, got, out, tol<H>(1e-5, 4));
            }
            float ms = time_ms([&] { gpu::attention_decode(d_out.ptr, d_qkv.ptr, c.pos, c.n, C, NH, stream); }, a.reps,
                               stream);
            report(c.name, dt, ms, c.bytes, c.flops, peak_flops<H>());
        }
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
