// backend.h — the kernel-set interface the model is written against.
//
// The model (gpt.h) never touches memory or arithmetic directly: it allocates through a
// Backend and calls its ops. Two kernel sets implement it: the CPU kernel set (cpu/backend_cpu.cpp,
// the executable specification) and the CUDA kernel set. Buffers returned by alloc() live on the
// backend's device; the model moves data across only through copy_to_device / copy_to_host.
//
// Op semantics, shapes and the "+= in backward" rule are documented once, in cpu/kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace train_gpt {

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    // --- memory (device buffers, zero-initialised) ---
    virtual void* alloc(size_t bytes) = 0;
    virtual void release(void* ptr) = 0;
    virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
    virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
    virtual void zero(void* dst, size_t bytes) = 0;

    // --- forward / backward ops (see cpu/kernels.h) ---
    virtual void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                                 int B, int T, int C) = 0;
    virtual void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                                  int B, int T, int C) = 0;
    virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int N, int C) = 0;
    virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int N, int C) = 0;
    virtual void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                                int N, int C, int OC) = 0;
    virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* weight, int N, int C, int OC) = 0;
    virtual void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) = 0;
    virtual void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                                    const float* lse, int B, int T, int C, int NH) = 0;
    virtual void gelu_forward(float* out, const float* inp, size_t n) = 0;
    virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) = 0;
    virtual void residual_forward(float* out, const float* a, const float* b, size_t n) = 0;
    // d += s (element-wise accumulate; the backward of a residual branch)
    virtual void accumulate(float* dst, const float* src, size_t n) = 0;
    virtual void fused_classifier(float* dlogits, float* losses, const float* logits, const int32_t* targets,
                                  int N, int V, int Vp, float dloss) = 0;

    // --- optimizer ---
    virtual double sum_squares(const float* g, size_t n) = 0;
    virtual void adamw_update(float* params, float* m, float* v, const float* grads, size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                              int t) = 0;
};

// The CPU kernel set (always available).
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace train_gpt

namespace train_gpt {
// Threads of the CPU kernel set (OpenMP and the BLAS).
void set_cpu_threads(int n);
}  // namespace train_gpt
