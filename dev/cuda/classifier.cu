// dev/cuda/classifier.cu — fused softmax + cross-entropy + dlogits (llmc/cuda/classifier.cuh)
// against cpu::fused_classifier, in place as the model calls it.
//
//   losses (N) FP32, dlogits (N,Vp) over logits     bound: losses 1e-5; dlogits 2 ulps / 1e-5
// N = B·T rows of Vp = V rounded up to 128. Bytes: read the logits once, write dlogits once.
#include "harness.cuh"

#include "cpu/kernels.h"
#include "cuda/classifier.cuh"

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
        const int N = a.B * a.T, V = a.V, Vp = (V + 127) / 128 * 128;
        const double NV = (double)N * Vp;
        const float dloss = 1.0f / N;
        Random r(a.seed);
        std::vector<H> logits = r.normal<H>((size_t)N * Vp, 3.0);
        std::vector<int32_t> targets = r.ints(N, V);
        DeviceBuffer<D> d_logits(logits);
        DeviceBuffer<int32_t> d_targets(targets);
        DeviceBuffer<float> d_losses(N);
        if (a.check) {
            std::vector<H> dlogits = logits;
            std::vector<float> losses(N);
            cpu::fused_classifier(dlogits.data(), losses.data(), dlogits.data(), targets.data(), N, V, Vp, dloss);
            d_losses.poison();
            gpu::fused_classifier(d_logits.ptr, d_losses.ptr, d_logits.ptr, d_targets.ptr, N, V, Vp, dloss, stream);
            cudaCheck(cudaStreamSynchronize(stream));
            check("fused_classifier losses", dt, d_losses.template download<float>(), losses, 1e-5);
            check("fused_classifier dlogits", dt, d_logits.template download<H>(), dlogits, tol<H>(1e-5, 2));
        }
        // timed on fresh logits each time is not needed: the kernel's cost does not depend on them
        d_logits.upload(logits);
        float ms = time_ms(
            [&] {
                gpu::fused_classifier(d_logits.ptr, d_losses.ptr, d_logits.ptr, d_targets.ptr, N, V, Vp, dloss, stream);
            },
            a.reps, stream);
        report("fused_classifier (in place)", dt, ms, 2 * NV * sizeof(H) + 8.0 * N, 6 * NV, peak_flops<H>());
        ms = time_ms(
            [&] {
                gpu::fused_classifier((D*)nullptr, d_losses.ptr, d_logits.ptr, d_targets.ptr, N, V, Vp, dloss, stream);
            },
            a.reps, stream);
        report("fused_classifier (loss only)", dt, ms, NV * sizeof(H) + 8.0 * N, 4 * NV, peak_flops<H>());
    });
}

int main(int argc, char** argv) { return harness_main(argc, argv, run); }
