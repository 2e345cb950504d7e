// cpu/backend_cpu.cpp — the CPU kernel set behind the Backend interface: host memory, cpu::kernels.
#include "backend.h"
#include "cpu/kernels.h"
#include "utils.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

namespace train_gpt {
namespace {

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    void* alloc(size_t bytes) override {
        size_t rounded = (bytes + 63) / 64 * 64;   // aligned_alloc needs a multiple of the alignment
        void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
        if (p == nullptr) fail("out of host memory allocating %zu bytes", bytes);
        std::memset(p, 0, rounded == 0 ? 64 : rounded);
        return p;
    }
    void release(void* ptr) override { std::free(ptr); }
    void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }

    void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         int B, int T, int C) override {
        cpu::encoder_forward(out, tokens, wte, wpe, B, T, C);
    }
    void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          int B, int T, int C) override {
        cpu::encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
    }
    void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                           const float* bias, int N, int C) override {
        cpu::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    }
    void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const float* weight, const float* mean, const float* rstd, int N, int C) override {
        cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    }
    void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                        int N, int C, int OC) override {
        cpu::matmul_forward(out, inp, weight, bias, N, C, OC);
    }
    void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                         const float* weight, int N, int C, int OC) override {
        cpu::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    }
    void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) override {
        cpu::attention_forward(out, lse, qkv, B, T, C, NH);
    }
    void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                            const float* lse, int B, int T, int C, int NH) override {
        cpu::attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
    }
    void gelu_forward(float* out, const float* inp, size_t n) override { cpu::gelu_forward(out, inp, n); }
    void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
        cpu::gelu_backward(dinp, inp, dout, n);
    }
    void residual_forward(float* out, const float* a, const float* b, size_t n) override {
        cpu::residual_forward(out, a, b, n);
    }
    void accumulate(float* dst, const float* src, size_t n) override {
#pragma omp parallel for
        for (size_t i = 0; i < n; i++) dst[i] += src[i];
    }
    void fused_classifier(float* dlogits, float* losses, const float* logits, const int32_t* targets,
                          int N, int V, int Vp, float dloss) override {
        cpu::fused_classifier(dlogits, losses, logits, targets, N, V, Vp, dloss);
    }
    double sum_squares(const float* g, size_t n) override { return cpu::sum_squares(g, n); }
    void adamw_update(float* params, float* m, float* v, const float* grads, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, float grad_scale, int t) override {
        cpu::adamw_update(params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

void set_cpu_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

}  // namespace train_gpt
