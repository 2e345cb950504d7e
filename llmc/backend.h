// backend.h — the kernel-set interface the model is written against.
//
// The model (gpt.h) never touches memory or arithmetic directly: it allocates through a
// Backend and calls its ops. Two kernel sets implement it: the CPU kernel set (cpu/backend_cpu.cpp,
// the executable specification) and the CUDA kernel set. Buffers returned by alloc() live on the
// backend's device; the model moves data across only through copy_to_device / copy_to_host.
//
// A backend is created for one activation dtype (precision.h): every `void*` below is a buffer of
// that dtype (activations, their gradients, working weights); every `float*` is FP32 (norm
// statistics, log-sum-exps, losses, parameter gradients, master weights, Adam moments).
// FP8 operands are byte buffers in E4M3 / E5M2 (dtypes.h) with their FP32 scale factors.
//
// Op semantics, shapes and the "+= in backward" rule are documented once, in cpu/kernels.h and
// cpu/fp8_kernels.h.
#pragma once

#include "precision/fp8_scaling.h"
#include "precision/precision.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace train_gpt {

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;   // for messages ("cpu", "cuda")
    virtual DType act_dtype() const = 0;

    // --- what the kernel set can do (the model asks these, never the name) ---
    // FP8 GEMMs need their reduced dimensions (C, 4C, and the B·T of a training pass's weight
    // gradients) to be multiples of this: 16 for Hopper's FP8 tensor cores, 1 for the CPU twin.
    virtual int fp8_gemm_multiple() const = 0;
    // FP8 is emulated (the CPU twin, the specification): timing FP8 against 16-bit GEMMs says
    // nothing about a GPU (--fp8-gemms auto takes every GEMM then).
    virtual bool emulates_fp8() const = 0;

    // --- memory (device buffers, zero-initialised) ---
    virtual void* alloc(size_t bytes) = 0;
    virtual void release(void* ptr) = 0;
    virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
    virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
    virtual void zero(void* dst, size_t bytes) = 0;
    // returns when every op issued so far has finished (the CPU kernel set: at once)
    virtual void synchronize() {}
    // dst (n, act dtype) = round(src (n, FP32)), and back (exact)
    virtual void float_to_act(void* dst, const float* src, size_t n) = 0;
    virtual void act_to_float(float* dst, const void* src, size_t n) = 0;

    // --- forward / backward ops (see cpu/kernels.h) ---
    virtual void encoder_forward(void* out, const int32_t* tokens, const void* wte, const void* wpe,
                                 int B, int T, int C) = 0;
    virtual void encoder_backward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens,
                                  int B, int T, int C) = 0;
    virtual void layernorm_forward(void* out, float* mean, float* rstd, const void* inp,
                                   const void* weight, const void* bias, int N, int C) = 0;
    virtual void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout,
                                    const void* inp, const void* weight, const float* mean,
                                    const float* rstd, int N, int C) = 0;
    virtual void matmul_forward(void* out, const void* inp, const void* weight, const void* bias,
                                int N, int C, int OC) = 0;
    virtual void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout,
                                 const void* inp, const void* weight, int N, int C, int OC) = 0;
    virtual void attention_forward(void* out, float* lse, const void* qkv, int B, int T, int C, int NH) = 0;
    virtual void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                                    const float* lse, int B, int T, int C, int NH) = 0;
    virtual void gelu_forward(void* out, const void* inp, size_t n) = 0;
    virtual void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) = 0;
    virtual void residual_forward(void* out, const void* a, const void* b, size_t n) = 0;
    virtual void fused_classifier(void* dlogits, float* losses, const void* logits, const int32_t* targets,
                                  int N, int V, int Vp, float dloss) = 0;

    // --- FP8 (see cpu/fp8_kernels.h) ---
    // The scale state lives in backend memory (Fp8ScaleSlot, fp8_scaling.h): casts read a slot's
    // scale, FP8 GEMMs its inv_scale, and fp8_end_step rolls every history and computes every next
    // scale in one op, so no FP8 step waits for the host.
    virtual float amax(const void* x, size_t n) = 0;   // max |x|, NaN if any x is NaN (waits for the result)
    // counters->amax_bits = max(counters->amax_bits, bits of |x|): an amax without a cast
    virtual void amax_into(const void* x, size_t n, Fp8Counters* counters) = 0;
    // just in time: slot.scale = fp8_scale_rule(amax of *counters, fp8_max, margin, slot.scale),
    // slot.inv_scale = 1 / slot.scale
    virtual void fp8_scale_from_counters(Fp8ScaleSlot* slot, const Fp8Counters* counters, float fp8_max,
                                         int margin) = 0;
    // End of step for n slots: slot i's amax (amaxes[i] if amaxes is non-null, e.g. MAX-reduced
    // across ranks, else counters[i]'s) enters history i (H floats per slot, newest first, the
    // oldest falls out past H); under delayed scaling the next scale follows from the history
    // (fp8_select_rule, fp8_scale_rule). Slots [0, n_e4m3) are E4M3 tensors, the rest E5M2.
    virtual void fp8_end_step(Fp8ScaleSlot* slots, float* history, const Fp8Counters* counters, const float* amaxes,
                              int n, int n_e4m3, int H, bool most_recent, int margin, bool delayed) = 0;
    // amaxes (n) = the amax of each counters slot (any NaN as the canonical NaN)
    virtual void fp8_amaxes(float* amaxes, const Fp8Counters* counters, int n) = 0;
    // q = saturate(x · scale->scale); the cast's statistics are ACCUMULATED into *counters (backend
    // memory, zero bytes = empty): no cast waits for the host (fp8_scaling.h, Fp8Counters).
    virtual void quantize_e4m3(fp8e4m3* q, const void* x, size_t n, const Fp8ScaleSlot* scale,
                               Fp8Counters* counters) = 0;
    virtual void quantize_e5m2(fp8e5m2* q, const void* x, size_t n, const Fp8ScaleSlot* scale,
                               Fp8Counters* counters) = 0;
    // q (rows, cols) and/or qt (cols, rows) = qᵀ from one cast (cpu/fp8_kernels.h); statistics
    // accumulated into *counters as above.
    virtual void quantize_transpose_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* x, int rows, int cols,
                                         const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    virtual void quantize_transpose_e5m2(fp8e5m2* q, fp8e5m2* qt, const void* x, int rows, int cols,
                                         const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // Casts fused into the producer of the operand (cpu/fp8_kernels.h): the producer's output,
    // rounded to the activation dtype, cast as quantize_transpose_* casts it, without being written
    // in the activation dtype (gelu_backward_e5m2 does write its dinp: the bias gradient reads it).
    // q and qt may both be null: statistics only, for a just-in-time scale.
    virtual void gelu_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* inp, int rows, int cols,
                                   const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    virtual void layernorm_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, float* mean, float* rstd, const void* inp,
                                        const void* weight, const void* bias, int N, int C,
                                        const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    virtual void gelu_backward_e5m2(void* dinp, fp8e5m2* q, fp8e5m2* qt, const void* inp, const void* dout,
                                    int rows, int cols, const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // adamw_update of one weight matrix (rows, cols), then its E4M3 copies q (rows, cols) and qt
    // (cols, rows) cast from the new working weights (the optimizer's half of delayed scaling)
    virtual void adamw_update_e4m3(float* master, void* working, float* m, float* v, const float* grads, int rows,
                                   int cols, float lr, float beta1, float beta2, float eps, float weight_decay,
                                   float grad_scale, int t, fp8e4m3* q, fp8e4m3* qt, const Fp8ScaleSlot* scale,
                                   Fp8Counters* counters) = 0;
    // the GEMMs dequantise with each operand slot's inv_scale
    virtual void matmul_forward_fp8(void* out, const fp8e4m3* inp, const Fp8ScaleSlot* inp_scale,
                                    const fp8e4m3* weight, const Fp8ScaleSlot* weight_scale, const void* bias, int N,
                                    int C, int OC) = 0;
    // the backward reads the transposed copies: dout_qt (OC,N), inp_qt (C,N), weight_qt (C,OC)
    virtual void matmul_backward_fp8(void* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q,
                                     const fp8e5m2* dout_qt, const Fp8ScaleSlot* dout_scale, const void* dout,
                                     const fp8e4m3* inp_qt, const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight_qt,
                                     const Fp8ScaleSlot* weight_scale, int N, int C, int OC) = 0;

    // --- optimizer ---
    // Σ g² (FP32 gradients), double accumulation; inf/NaN propagate.
    virtual double sum_squares(const float* g, size_t n) = 0;
    // master may be null (no FP32 master copy: the update is rounded into the working weights).
    virtual void adamw_update(float* master, void* working, float* m, float* v, const float* grads, size_t n,
                              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                              int t) = 0;
};

// The CPU kernel set for activations of `dtype` (always available).
std::unique_ptr<Backend> make_cpu_backend(DType dtype = DType::F32);

// Threads of the CPU kernel set (OpenMP and the BLAS).
void set_cpu_threads(int n);

}  // namespace train_gpt
