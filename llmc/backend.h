// backend.h — the kernel-set interface the model is written against, and what every op computes.
//
// The model (model/gpt.h) never touches memory or arithmetic directly: it allocates through a
// Backend and calls its ops. Two kernel sets implement it: the CPU kernel set (cpu/backend_cpu.cpp
// over cpu/kernels.h and cpu/fp8_kernels.h, the executable specification) and the CUDA kernel set
// (cuda/backend_cuda.cu over cuda/kernels.cuh). Buffers returned by alloc() live on the backend's
// device; the model moves data across only through copy_to_device / copy_to_host.
//
// This file is where the ops are specified; both kernel sets point here. Conventions (llm.c's):
//   * destination first: `out` / `dinp` come before the inputs;
//   * forward ops OVERWRITE their outputs;
//   * backward ops ACCUMULATE (+=) into the parameter gradients (FP32; the model zeroes them
//     once per optimizer step, so micro-batches accumulate) and OVERWRITE the activation
//     gradient they produce — but layernorm_backward, which adds its input gradient into the
//     residual stream's gradient (the residual connection's backward, fused). So no activation
//     gradient buffer needs zeroing, but the residual stream's, once per backward;
//   * shapes: B batch, T time, C channels, NH heads, hs = C/NH head size, V vocabulary,
//     Vp padded vocabulary (V rounded up to a multiple of 128), N = B·T rows;
//   * numerics: arithmetic in FP32; every value stored into an activation-dtype buffer is rounded
//     to nearest even exactly once per store (cpu/kernels.h says how the CPU set emulates this,
//     and which intermediates a 16-bit kernel rounds: P in attention, for example). A CUDA op is
//     correct when it matches the CPU op within the tolerance its test states.
//
// A backend is created for one activation dtype (precision/precision.h): every `void*` below is a
// buffer of that dtype (activations, their gradients, working weights); every `float*` is FP32
// (norm statistics, log-sum-exps, losses, parameter gradients, master weights, Adam moments).
// FP8 operands are byte buffers in E4M3 / E5M2 (precision/dtypes.h) with the scale state of
// precision/fp8_scaling.h.
#pragma once

#include "precision/fp8_scaling.h"
#include "precision/precision.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace train_gpt {

class Fp8Ops;

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;   // for messages ("cpu", "cuda")
    virtual DType act_dtype() const = 0;

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

    // --- forward / backward ops ---
    // out (B,T,C) = wte[tokens[b,t]] + wpe[t]
    virtual void encoder_forward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int T,
                                 int C) = 0;
    // dwte (Vp,C) += dout scattered by token; dwpe (maxT,C) += dout summed over b. Deterministic:
    // a fixed summation order whatever the token collisions.
    virtual void encoder_backward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int T,
                                  int C) = 0;
    // out (N,C) = (inp − mean)·rstd·weight + bias per row, with the row's mean and rstd (N) saved
    // for backward; biased variance, eps = 1e-5 (GPT-2 / PyTorch).
    virtual void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight,
                                   const void* bias, int N, int C) = 0;
    // dinp (N,C) += the input gradient (dinp is the residual stream's gradient: the residual
    // connection adds it); dweight, dbias (C) += their gradients (summed over rows); dinp_sums (C)
    // += Σ_rows of the new dinp, if non-null — the bias gradient of the projection whose output
    // gradient dinp is (attproj, fcproj: the residual stream's), folded into this pass
    virtual void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                    const void* weight, const float* mean, const float* rstd, int N, int C,
                                    float* dinp_sums) = 0;
    // residual (N,C) = a + b, then out, mean, rstd = layernorm_forward of the residual: the
    // residual add fused into the next layernorm (one pass instead of two over the residual)
    virtual void residual_layernorm_forward(void* residual, void* out, float* mean, float* rstd, const void* a,
                                            const void* b, const void* weight, const void* bias, int N, int C) = 0;
    // out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC); bias may be null. FP32 accumulation
    // (a 16-bit GEMM on tensor cores), the output rounded once.
    virtual void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                                int OC) = 0;
    // dinp (N,C) = dout · weight; dweight (OC,C) += doutᵀ · inp; dbias (OC) += Σ_rows dout (if
    // non-null). dinp may be null (not computed).
    virtual void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                 const void* weight, int N, int C, int OC) = 0;
    // The GEMM epilogues of --gemm-epilogues (model/epilogue_block_ops.h): GELU and its gradient
    // applied to a GEMM's FP32 result before it is rounded, as cuBLASLt's GELU_AUX_BIAS and DGELU
    // epilogues apply them — so they round once where matmul_forward + gelu_forward round twice.
    // z = inp (N,C) · weight (OC,C)ᵀ + bias (OC) in FP32; pre (N,OC) = round(z), the GELU input
    // kept for backward; out (N,OC) = round(gelu(z)), gelu as gelu_forward's.
    virtual void matmul_forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N,
                                     int C, int OC) = 0;
    // g = dout (N,OC) · weight (OC,C) in FP32; dinp (N,C) = round(gelu'(pre) · g), pre (N,C) the
    // GELU input matmul_forward_gelu kept, gelu' as gelu_backward's: the output gradient of the
    // GEMM that produced pre. No weight gradient (matmul_backward with dinp null computes it).
    virtual void matmul_backward_dgelu(void* dinp, const void* dout, const void* weight, const void* pre, int N, int C,
                                       int OC) = 0;
    // Causal self-attention: out (B,T,C) from qkv (B,T,3C) = [q | k | v] per token, head h using
    // features h·hs … (h+1)·hs of each; scores scaled by 1/√hs; softmax in FP32; lse (B,NH,T) the
    // log-sum-exp of each softmax row, all backward keeps (it recomputes the probabilities). In
    // 16 bits the probabilities are rounded to the storage type before they multiply V.
    virtual void attention_forward(void* out, float* lse, const void* qkv, int B, int T, int C, int NH) = 0;
    // Attention of n new queries of one sequence against its KV cache (decoding): qkv (≥ pos+n, 3C)
    // holds the [q | k | v] rows of the sequence's positions 0 .. pos+n−1 (rows past them are not
    // read); out (n, C) row i is row pos+i of attention_forward over qkv[0, pos+n) with B = 1:
    // query pos+i against keys and values 0 .. pos+i, the same scaling, FP32 softmax and (in 16
    // bits) rounded probabilities. No lse (nothing runs backward through it).
    virtual void attention_decode(void* out, const void* qkv, int pos, int n, int C, int NH) = 0;
    // dqkv (B,T,3C) = the gradient of attention_forward, from dout (B,T,C) and the forward's qkv,
    // out and lse. Deterministic (a fixed summation order).
    virtual void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                                    int B, int T, int C, int NH) = 0;
    // GELU, tanh approximation: out (n) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    virtual void gelu_forward(void* out, const void* inp, size_t n) = 0;
    // dinp (n) = gelu'(inp) · dout
    virtual void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) = 0;
    // gelu_backward over (rows, cols), then dbias (cols) += Σ_rows dinp: the bias gradient of the GEMM
    // whose output gradient dinp is (fc), folded into this pass
    virtual void gelu_backward_bias(void* dinp, float* dbias, const void* inp, const void* dout, int rows,
                                    int cols) = 0;
    // out (n) = a + b
    virtual void residual_forward(void* out, const void* a, const void* b, size_t n) = 0;
    // Softmax + cross-entropy over the first V of Vp logits per row, in FP32, without a
    // materialised probability matrix: losses (N) = logsumexp(logits[i, :V]) − logits[i, target_i].
    // If dlogits is non-null: dlogits (N,Vp) = (softmax − onehot(target)) · dloss for columns < V,
    // 0 in the padding. dlogits may alias logits (in place).
    virtual void fused_classifier(void* dlogits, float* losses, const void* logits, const int32_t* targets, int N,
                                  int V, int Vp, float dloss) = 0;

    // --- optimizer ---
    // Σ g² (FP32 gradients), double accumulation; inf/NaN propagate.
    virtual double sum_squares(const float* g, size_t n) = 0;
    // AdamW with PyTorch's semantics on n values (FP32 moments m, v):
    //   g ← grads · grad_scale                      (grad_scale = clipping factor / loss scale / ranks)
    //   m ← β1·m + (1−β1)·g ;  v ← β2·v + (1−β2)·g²
    //   p ← p·(1 − lr·wd)                           (decoupled weight decay)
    //   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
    // p is the FP32 master copy and working = round(p); master may be null (no FP32 master copy:
    // p is read from and rounded back into the working weights, so updates below half an ulp of
    // the storage type are lost).
    virtual void adamw_update(float* master, void* working, float* m, float* v, const float* grads, size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) = 0;

    // --- the FP8 extension (fp8 mode): the kernel set's FP8 ops, or null where it has none ---
    virtual Fp8Ops* fp8() { return nullptr; }
};

// The FP8 ops of a kernel set (fp8 mode; precision/fp8_state.h calls them): the casts with their
// statistics, the scale state's updates, the casts fused into producers, and the FP8 GEMMs. A
// bf16, fp16 or fp32 step calls none of them.
class Fp8Ops {
  public:
    virtual ~Fp8Ops() = default;
    // --- what the FP8 ops can do (the model asks these, never the name) ---
    // FP8 GEMMs need their reduced dimensions (C, 4C, and the B·T of a training pass's weight
    // gradients) to be multiples of this: 16 for Hopper's FP8 tensor cores, 1 for the CPU twin.
    virtual int fp8_gemm_multiple() const = 0;
    // FP8 is emulated (the CPU twin, the specification): timing FP8 against 16-bit GEMMs says
    // nothing about a GPU (--fp8-gemms auto takes every GEMM then).
    virtual bool emulates_fp8() const = 0;

    // --- FP8 (the recipe: precision/fp8_scaling.h; the GEMMs' operands: cpu/fp8_kernels.h) ---
    // The scale state lives in backend memory (Fp8ScaleSlot, fp8_scaling.h): casts read a slot's
    // scale, FP8 GEMMs its inv_scale, and fp8_end_step rolls every history and computes every next
    // scale in one op, so no FP8 step waits for the host.
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
    // q (rows, cols) and/or qt (cols, rows) = qᵀ = saturate(x · scale->scale) from one cast
    // (either may be null); the cast's statistics are ACCUMULATED into *counters (backend memory,
    // zero bytes = empty), each value counted once: no cast waits for the host (fp8_scaling.h,
    // Fp8Counters).
    virtual void quantize_transpose_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* x, int rows, int cols,
                                         const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    virtual void quantize_transpose_e5m2(fp8e5m2* q, fp8e5m2* qt, const void* x, int rows, int cols,
                                         const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // Casts fused into the producer of the operand: the producer's output (gelu_forward,
    // layernorm_forward, gelu_backward, adamw_update above), rounded to the activation dtype, cast
    // as quantize_transpose_* casts it, bit for bit, without being written in the activation dtype
    // (gelu_backward_e5m2 does write its dinp: the bias gradient reads it; adamw_update_e4m3
    // writes the weights). q and qt may both be null: statistics only, for a just-in-time scale.
    virtual void gelu_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* inp, int rows, int cols,
                                   const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // stats_ready: mean and rstd already hold inp's row statistics (a statistics-only call of this op
    // on the same inp wrote them): they are read, not computed again — the layernorm's one
    // statistics pass when a just-in-time scale needs a cast before the cast
    virtual void layernorm_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, float* mean, float* rstd, const void* inp,
                                        const void* weight, const void* bias, int N, int C, const Fp8ScaleSlot* scale,
                                        Fp8Counters* counters, bool stats_ready) = 0;
    virtual void gelu_backward_e5m2(void* dinp, fp8e5m2* q, fp8e5m2* qt, const void* inp, const void* dout, int rows,
                                    int cols, const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // attention_forward, then q (B·T, C) = the E4M3 cast of out, as quantize_transpose_e4m3 casts it (q only): attproj's
    // X, cast where it is produced
    virtual void attention_forward_e4m3(void* out, float* lse, fp8e4m3* q, const void* qkv, int B, int T, int C, int NH,
                                        const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // attention_backward, then q (B·T, 3C) and/or qt (3C, B·T) = the E5M2 cast of dqkv, as
    // quantize_transpose_e5m2 casts it: qkv's dY, cast where it is produced
    virtual void attention_backward_e5m2(void* dqkv, fp8e5m2* q, fp8e5m2* qt, const void* dout, const void* qkv,
                                         const void* out, const float* lse, int B, int T, int C, int NH,
                                         const Fp8ScaleSlot* scale, Fp8Counters* counters) = 0;
    // layernorm_backward, then q (N, C) and/or qt (C, N) = the E5M2 cast of the new dinp: the output
    // gradient of the projection (attproj, fcproj) below, cast where it is produced
    virtual void layernorm_backward_e5m2(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                         const void* weight, const float* mean, const float* rstd, int N, int C,
                                         float* dinp_sums, fp8e5m2* q, fp8e5m2* qt, const Fp8ScaleSlot* scale,
                                         Fp8Counters* counters) = 0;
    // adamw_update of one weight matrix (rows, cols), then its E4M3 copies q (rows, cols) and qt
    // (cols, rows) cast from the new working weights (the optimizer's half of delayed scaling)
    virtual void adamw_update_e4m3(float* master, void* working, float* m, float* v, const float* grads, int rows,
                                   int cols, float lr, float beta1, float beta2, float eps, float weight_decay,
                                   float grad_scale, int t, fp8e4m3* q, fp8e4m3* qt, const Fp8ScaleSlot* scale,
                                   Fp8Counters* counters) = 0;
    // FP8 GEMMs: FP8 operands, exact products, FP32 accumulation, the sum multiplied by each
    // operand slot's inv_scale. out (N,OC) = X (N,C) · Wᵀ + bias, X and W in E4M3.
    virtual void matmul_forward_fp8(void* out, const fp8e4m3* inp, const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight,
                                    const Fp8ScaleSlot* weight_scale, const void* bias, int N, int C, int OC) = 0;
    // dinp (N,C) = dY · W from dout_q (N,OC, E5M2) and weight_qt = Wᵀ (C,OC); dweight (OC,C) +=
    // dYᵀ · X from dout_qt (OC,N) and inp_qt = Xᵀ (C,N); dbias (OC) += Σ_rows dout (the 16-bit dY).
    // (Hopper's FP8 GEMMs take the reduced dimension contiguous only: hence the transposed copies.)
    virtual void matmul_backward_fp8(void* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q,
                                     const fp8e5m2* dout_qt, const Fp8ScaleSlot* dout_scale, const void* dout,
                                     const fp8e4m3* inp_qt, const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight_qt,
                                     const Fp8ScaleSlot* weight_scale, int N, int C, int OC) = 0;
};

// The CPU kernel set for activations of `dtype` (always available); tf32_gemms (fp32 only): the
// tf32 precision's matmul ops (cpu::matmul_forward_tf32).
std::unique_ptr<Backend> make_cpu_backend(DType dtype = DType::F32, bool tf32_gemms = false);

// Threads of the CPU kernel set (OpenMP and the BLAS).
void set_cpu_threads(int n);

}   // namespace train_gpt
