// cpu/backend_cpu.cpp — the CPU kernel set behind the Backend interface: host memory, and the
// cpu:: kernels instantiated for the backend's activation dtype T (float, bf16 or fp16).
#include "backend.h"
#include "cpu/fp8_kernels.h"
#include "cpu/kernels.h"
#include "utils.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

namespace train_gpt {
namespace {

template <typename T>
class CpuBackend : public Backend, public Fp8Ops {
  protected:
    static T* act(void* p) { return static_cast<T*>(p); }
    static const T* act(const void* p) { return static_cast<const T*>(p); }

  public:
    Fp8Ops* fp8() override { return this; }
    explicit CpuBackend(DType dtype) : dtype_(dtype) {}
    std::string name() const override { return "cpu"; }
    int fp8_gemm_multiple() const override { return 1; }   // the emulation takes any shape
    bool emulates_fp8() const override { return true; }
    DType act_dtype() const override { return dtype_; }

    void* alloc(size_t bytes) override {
        size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);   // aligned_alloc wants a multiple
        void* p = std::aligned_alloc(64, rounded);
        if (p == nullptr) fail("out of host memory allocating %zu bytes", bytes);
        std::memset(p, 0, rounded);
        return p;
    }
    void release(void* ptr) override { std::free(ptr); }
    void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
    void float_to_act(void* dst, const float* src, size_t n) override {
#pragma omp parallel for
        for (size_t i = 0; i < n; i++)
            act(dst)[i] = cpu::store<T>(src[i]);
    }
    void act_to_float(float* dst, const void* src, size_t n) override {
#pragma omp parallel for
        for (size_t i = 0; i < n; i++)
            dst[i] = cpu::load(act(src)[i]);
    }

    void encoder_forward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int Tlen,
                         int C) override {
        cpu::encoder_forward(act(out), tokens, act(wte), act(wpe), B, Tlen, C);
    }
    void encoder_backward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int Tlen,
                          int C) override {
        cpu::encoder_backward(dwte, dwpe, act(dout), tokens, B, Tlen, C);
    }
    void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                           int N, int C) override {
        cpu::layernorm_forward(act(out), mean, rstd, act(inp), act(weight), act(bias), N, C);
    }
    void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                            const void* weight, const float* mean, const float* rstd, int N, int C,
                            float* dinp_sums) override {
        cpu::layernorm_backward(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), mean, rstd, N, C,
                                dinp_sums);
    }
    void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                        int OC) override {
        cpu::matmul_forward(act(out), act(inp), act(weight), act(bias), N, C, OC);
    }
    void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, int N, int C, int OC) override {
        cpu::matmul_backward(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), N, C, OC);
    }
    void matmul_forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                             int OC) override {
        cpu::matmul_forward_gelu(act(out), act(pre), act(inp), act(weight), act(bias), N, C, OC);
    }
    void matmul_backward_dgelu(void* dinp, const void* dout, const void* weight, const void* pre, int N, int C,
                               int OC) override {
        cpu::matmul_backward_dgelu(act(dinp), act(dout), act(weight), act(pre), N, C, OC);
    }
    void attention_forward(void* out, float* lse, const void* qkv, int B, int Tlen, int C, int NH) override {
        cpu::attention_forward(act(out), lse, act(qkv), B, Tlen, C, NH);
    }
    void attention_decode(void* out, const void* qkv, int pos, int n, int C, int NH) override {
        cpu::attention_decode(act(out), act(qkv), pos, n, C, NH);
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                            int Tlen, int C, int NH) override {
        cpu::attention_backward(act(dqkv), act(dout), act(qkv), act(out), lse, B, Tlen, C, NH);
    }
    void gelu_forward(void* out, const void* inp, size_t n) override { cpu::gelu_forward(act(out), act(inp), n); }
    void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) override {
        cpu::gelu_backward(act(dinp), act(inp), act(dout), n);
    }
    void gelu_backward_bias(void* dinp, float* dbias, const void* inp, const void* dout, int rows, int cols) override {
        cpu::gelu_backward_bias(act(dinp), dbias, act(inp), act(dout), rows, cols);
    }
    void residual_layernorm_forward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                    const void* weight, const void* bias, int N, int C) override {
        cpu::residual_layernorm_forward(act(residual), act(out), mean, rstd, act(a), act(b), act(weight), act(bias), N,
                                        C);
    }
    void residual_forward(void* out, const void* a, const void* b, size_t n) override {
        cpu::residual_forward(act(out), act(a), act(b), n);
    }
    void fused_classifier(void* dlogits, float* losses, const void* logits, const int32_t* targets, int N, int V,
                          int Vp, float dloss) override {
        cpu::fused_classifier(dlogits != nullptr ? act(dlogits) : nullptr, losses, act(logits), targets, N, V, Vp,
                              dloss);
    }

    void amax_into(const void* x, size_t n, Fp8Counters* counters) override {
        Fp8CastStats s;
        s.amax = cpu::amax(act(x), n);
        accumulate(*counters, s);
    }
    void fp8_scale_from_counters(Fp8ScaleSlot* slot, const Fp8Counters* counters, float fp8_max, int margin) override {
        slot->scale = fp8_scale_rule(to_cast_stats(*counters).amax, fp8_max, margin, slot->scale);
        slot->inv_scale = 1.0f / slot->scale;
    }
    void fp8_end_step(Fp8ScaleSlot* slots, float* history, const Fp8Counters* counters, const float* amaxes, int n,
                      int n_e4m3, int H, bool most_recent, int margin, bool delayed) override {
        for (int i = 0; i < n; i++) {
            fp8_end_step_rule(slots[i], history + (size_t)i * H,
                              amaxes != nullptr ? amaxes[i] : to_cast_stats(counters[i]).amax,
                              i < n_e4m3 ? fp8e4m3::max_finite : fp8e5m2::max_finite, H, most_recent, margin, delayed);
        }
    }
    void fp8_amaxes(float* amaxes, const Fp8Counters* counters, int n) override {
        for (int i = 0; i < n; i++)
            amaxes[i] = to_cast_stats(counters[i]).amax;
    }
    void quantize_transpose_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* x, int rows, int cols, const Fp8ScaleSlot* scale,
                                 Fp8Counters* counters) override {
        accumulate(*counters, cpu::quantize_transpose_fp8(q, qt, act(x), rows, cols, scale->scale));
    }
    void quantize_transpose_e5m2(fp8e5m2* q, fp8e5m2* qt, const void* x, int rows, int cols, const Fp8ScaleSlot* scale,
                                 Fp8Counters* counters) override {
        accumulate(*counters, cpu::quantize_transpose_fp8(q, qt, act(x), rows, cols, scale->scale));
    }
    void gelu_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* inp, int rows, int cols, const Fp8ScaleSlot* scale,
                           Fp8Counters* counters) override {
        accumulate(*counters, cpu::gelu_forward_fp8(q, qt, act(inp), rows, cols, scale->scale));
    }
    // stats_ready: the twin computes the statistics again, into the same arrays: the same values
    void layernorm_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, float* mean, float* rstd, const void* inp, const void* weight,
                                const void* bias, int N, int C, const Fp8ScaleSlot* scale, Fp8Counters* counters,
                                bool /*stats_ready*/) override {
        accumulate(*counters,
                   cpu::layernorm_forward_fp8(q, qt, mean, rstd, act(inp), act(weight), act(bias), N, C, scale->scale));
    }
    void gelu_backward_e5m2(void* dinp, fp8e5m2* q, fp8e5m2* qt, const void* inp, const void* dout, int rows, int cols,
                            const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        accumulate(*counters, cpu::gelu_backward_fp8(act(dinp), q, qt, act(inp), act(dout), rows, cols, scale->scale));
    }
    void attention_forward_e4m3(void* out, float* lse, fp8e4m3* q, const void* qkv, int B, int Tlen, int C, int NH,
                                const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        cpu::attention_forward(act(out), lse, act(qkv), B, Tlen, C, NH);
        accumulate(*counters, cpu::quantize_fp8(q, act(out), (size_t)B * Tlen * C, scale->scale));
    }
    void attention_backward_e5m2(void* dqkv, fp8e5m2* q, fp8e5m2* qt, const void* dout, const void* qkv,
                                 const void* out, const float* lse, int B, int Tlen, int C, int NH,
                                 const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        cpu::attention_backward(act(dqkv), act(dout), act(qkv), act(out), lse, B, Tlen, C, NH);
        accumulate(*counters, cpu::quantize_transpose_fp8(q, qt, act(dqkv), B * Tlen, 3 * C, scale->scale));
    }
    void layernorm_backward_e5m2(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                 const void* weight, const float* mean, const float* rstd, int N, int C,
                                 float* dinp_sums, fp8e5m2* q, fp8e5m2* qt, const Fp8ScaleSlot* scale,
                                 Fp8Counters* counters) override {
        accumulate(*counters, cpu::layernorm_backward_fp8(act(dinp), dweight, dbias, act(dout), act(inp), act(weight),
                                                          mean, rstd, N, C, dinp_sums, q, qt, scale->scale));
    }
    void adamw_update_e4m3(float* master, void* working, float* m, float* v, const float* grads, int rows, int cols,
                           float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                           fp8e4m3* q, fp8e4m3* qt, const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        accumulate(*counters, cpu::adamw_update_fp8(master, act(working), m, v, grads, rows, cols, lr, beta1, beta2,
                                                    eps, weight_decay, grad_scale, t, q, qt, scale->scale));
    }
    void matmul_forward_fp8(void* out, const fp8e4m3* inp, const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight,
                            const Fp8ScaleSlot* weight_scale, const void* bias, int N, int C, int OC) override {
        cpu::matmul_forward_fp8(act(out), inp, inp_scale->inv_scale, weight, weight_scale->inv_scale, act(bias), N, C,
                                OC);
    }
    void matmul_backward_fp8(void* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q, const fp8e5m2* dout_qt,
                             const Fp8ScaleSlot* dout_scale, const void* dout, const fp8e4m3* inp_qt,
                             const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight_qt, const Fp8ScaleSlot* weight_scale,
                             int N, int C, int OC) override {
        cpu::matmul_backward_fp8(act(dinp), dweight, dbias, dout_q, dout_qt, dout_scale->inv_scale, act(dout), inp_qt,
                                 inp_scale->inv_scale, weight_qt, weight_scale->inv_scale, N, C, OC);
    }

    double sum_squares(const float* g, size_t n) override { return cpu::sum_squares(g, n); }
    void adamw_update(float* master, void* working, float* m, float* v, const float* grads, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) override {
        cpu::adamw_update(master, act(working), m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    }

  private:
    DType dtype_;
};

// The tf32 precision: fp32 with the matmul ops' GEMM operands rounded to TF32.
class CpuTf32Backend final : public CpuBackend<float> {
  public:
    CpuTf32Backend() : CpuBackend<float>(DType::F32) {}
    void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                        int OC) override {
        cpu::matmul_forward_tf32(act(out), act(inp), act(weight), act(bias), N, C, OC);
    }
    void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, int N, int C, int OC) override {
        cpu::matmul_backward_tf32(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), N, C, OC);
    }
};

}   // namespace

std::unique_ptr<Backend> make_cpu_backend(DType dtype, bool tf32_gemms) {
    if (tf32_gemms) {
        if (dtype != DType::F32) fail("TF32 GEMMs need fp32 storage (precision tf32), not %s", dtype_name(dtype));
        return std::make_unique<CpuTf32Backend>();
    }
    switch (dtype) {
        case DType::F32: return std::make_unique<CpuBackend<float>>(dtype);
        case DType::BF16: return std::make_unique<CpuBackend<bf16>>(dtype);
        case DType::F16: return std::make_unique<CpuBackend<fp16>>(dtype);
    }
    fail("no CPU kernel set for dtype %d", (int)dtype);
}

void set_cpu_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

}   // namespace train_gpt
