// cuda/backend_cuda.cu — the CUDA kernel set behind the Backend interface: device memory, one
// stream, and the cuda:: launchers (cuda/kernels.cuh) instantiated for the backend's activation
// dtype T (float, __nv_bfloat16 or __half: the device twins of cpu/backend_cpu.cpp's float, bf16
// and fp16, bit for bit).
//
// Every op is queued on the backend's stream and returns at once, except those that hand back a
// value or host memory (copy_to_host, a copy to the device of more than 1 MiB, sum_squares): they
// return when it is ready.
// Attention runs through cuBLASLt batched GEMMs (cuda/attention_gemm.cuh), or, with --attention
// flash where it supports the head size and dtype, the flash attention (cuda/attention_flash.cuh).
// A host buffer passed to copy_to_device may be reused as soon as the call returns: a small copy
// (a micro-batch's tokens and targets) is staged in pinned memory and queued without a wait, a
// large one (weights, optimizer state) waits for its copy.
#include "cuda/cuda_backend.h"

#include "cuda/attention_cudnn.h"

#include "cuda/attention_flash_bwd_wide.cuh"
#include "cuda/attention_flash_fp8.cuh"
#include "cuda/kernels.cuh"
#include "cuda/op_profiler.cuh"
#include "utils.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <string>

namespace train_gpt {

namespace {

// dst (n) = round(src (n)) into T; src (n) = widen(T) — the storage conversions of float_to_act / act_to_float.
template <typename T>
__global__ void float_to_act_kernel(T* dst, const float* src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = cuda::from_float<T>(src[i]);
    }
}
template <typename T>
__global__ void act_to_float_kernel(float* dst, const T* src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = cuda::to_float(src[i]);
    }
}

// Grid for a grid-stride loop over n elements: enough blocks to fill the GPU, no more.
inline unsigned elementwise_blocks(size_t n, int threads) {
    return (unsigned)std::max<size_t>(1, std::min<size_t>((n + threads - 1) / threads, cuda::kGridStrideMaxBlocks));
}

// Any kernel of ours: a device without an image for it (another GENCODE) is caught up front.
__global__ void probe_kernel() {}

// The CUDA kernel set as a GPU last validated it (docs/gpu-results.md): each 16-bit op is the
// launcher of its name, no flag consulted. The ops that --fused-kernels and --attention flash
// change are overridden by CudaBackendWithOptions below, which is built only when one is given.
template <typename T>
class CudaBackend : public Backend, public Fp8Ops {
  protected:
    static T* act(void* p) { return static_cast<T*>(p); }
    static const T* act(const void* p) { return static_cast<const T*>(p); }

  public:
    Fp8Ops* fp8() override { return this; }
    CudaBackend(DType dtype, int device, const CudaOptions& options)
        : dtype_(dtype), device_(device), options_(options), profiler_(options.profile) {
        cudaCheck(cudaSetDevice(device));
        cudaFuncAttributes attributes;
        if (cudaFuncGetAttributes(&attributes, probe_kernel) != cudaSuccess) {
            cudaGetLastError();   // clear the error before reporting it
            cudaDeviceProp prop;
            cudaCheck(cudaGetDeviceProperties(&prop, device));
            fail(
                "GPU %d (%s, sm_%d%d) cannot run this build's kernels (built for the Makefile's GENCODE, sm_90a "
                "by default); rebuild with GENCODE set for it or use --device cpu",
                device, prop.name, prop.major, prop.minor);
        }
        cudaCheck(cudaStreamCreate(&stream_));
        cuda::set_gemm_autotune(stream_, options.gemm_autotune, options.log_gemm_autotune);
        staging_.open();
    }
    ~CudaBackend() override {
        // No throwing from a destructor: errors here are ignored.
        cudaSetDevice(device_);
        if (cudaStreamSynchronize(stream_) == cudaSuccess && profiler_.enabled()) {
            profiler_.drain();
            profiler_.print(stdout);
        }
        staging_.close();
        try {
            if (options_.cudnn_attention) release_cudnn_attention();
            cuda::release_gemm_context(stream_);
            cuda::release_scratch(stream_);
        } catch (...) {
        }
        cudaStreamDestroy(stream_);
    }

    std::string name() const override { return "cuda"; }
    // cuBLASLt's FP8 GEMMs: leading dimensions and the reduced dimension multiples of 16
    int fp8_gemm_multiple() const override { return cuda::kFp8GemmMultiple; }
    bool emulates_fp8() const override { return false; }
    DType act_dtype() const override { return dtype_; }

    // --- memory ---
    void* alloc(size_t bytes) override {
        void* p = nullptr;
        const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
        cudaError_t err = cudaMalloc(&p, rounded);
        if (err != cudaSuccess) {
            cudaGetLastError();
            size_t free_bytes = 0, total_bytes = 0;
            cudaMemGetInfo(&free_bytes, &total_bytes);
            fail("out of GPU memory allocating %zu bytes on GPU %d (%zu MiB free of %zu MiB): %s", bytes, device_,
                 free_bytes >> 20, total_bytes >> 20, cudaGetErrorString(err));
        }
        cudaCheck(cudaMemsetAsync(p, 0, rounded, stream_));
        return p;
    }
    void release(void* ptr) override {
        if (ptr == nullptr) return;
        cudaCheck(cudaStreamSynchronize(stream_));   // no queued kernel still uses it
        cudaCheck(cudaFree(ptr));
    }
    void copy_to_device(void* dst, const void* src, size_t bytes) override {
        const cuda::OpProfiler::Scope timed(profiler(), "copy_to_device", stream_);
        if (bytes == 0) return;
        if (void* staged = staging_.stage(src, bytes)) {   // queued; the caller's buffer is free at once
            cudaCheck(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyDefault, stream_));
            staging_.queued(stream_);
            return;
        }
        cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
        cudaCheck(cudaStreamSynchronize(stream_));
    }
    void copy_to_host(void* dst, const void* src, size_t bytes) override {
        const cuda::OpProfiler::Scope timed(profiler(), "copy_to_host", stream_);
        if (bytes == 0) return;
        cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
        cudaCheck(cudaStreamSynchronize(stream_));
    }
    void zero(void* dst, size_t bytes) override {
        const cuda::OpProfiler::Scope timed(profiler(), "zero", stream_);
        if (bytes == 0) return;
        cudaCheck(cudaMemsetAsync(dst, 0, bytes, stream_));
    }
    void synchronize() override { cudaCheck(cudaStreamSynchronize(stream_)); }
    void float_to_act(void* dst, const float* src, size_t n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "float_to_act", stream_);
        if (n == 0) return;
        float_to_act_kernel<<<elementwise_blocks(n, 256), 256, 0, stream_>>>(act(dst), src, n);
        cudaCheck(cudaGetLastError());
    }
    void act_to_float(float* dst, const void* src, size_t n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "act_to_float", stream_);
        if (n == 0) return;
        act_to_float_kernel<<<elementwise_blocks(n, 256), 256, 0, stream_>>>(dst, act(src), n);
        cudaCheck(cudaGetLastError());
    }

    // --- forward / backward ops ---
    void encoder_forward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int Tlen,
                         int C) override {
        const cuda::OpProfiler::Scope timed(profiler(), "encoder_forward", stream_);
        cuda::encoder_forward(act(out), tokens, act(wte), act(wpe), B, Tlen, C, stream_);
    }
    void encoder_backward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int Tlen,
                          int C) override {
        const cuda::OpProfiler::Scope timed(profiler(), "encoder_backward", stream_);
        cuda::encoder_backward(dwte, dwpe, act(dout), tokens, B, Tlen, C, stream_);
    }
    void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                           int N, int C) override {
        const cuda::OpProfiler::Scope timed(profiler(), "layernorm_forward", stream_);
        cuda::layernorm_forward(act(out), mean, rstd, act(inp), act(weight), act(bias), N, C, stream_);
    }
    void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                            const void* weight, const float* mean, const float* rstd, int N, int C,
                            float* dinp_sums) override {
        const cuda::OpProfiler::Scope timed(profiler(), "layernorm_backward", stream_);
        // the layernorm, then the sums of its output
        cuda::layernorm_backward(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), mean, rstd, N, C, nullptr,
                                 stream_);
        if (dinp_sums != nullptr) cuda::add_column_sums(dinp_sums, column_partials(N, C), act(dinp), N, C, stream_);
    }
    void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                        int OC) override {
        const cuda::OpProfiler::Scope timed(profiler(), "matmul_forward", stream_);
        cuda::matmul_forward(act(out), act(inp), act(weight), act(bias), N, C, OC, stream_);
    }
    void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, int N, int C, int OC) override {
        const cuda::OpProfiler::Scope timed(profiler(), "matmul_backward", stream_);
        cuda::matmul_backward(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), N, C, OC, stream_);
    }
    // --gemm-epilogues' GEMMs (called only under it: model/epilogue_block_ops.h)
    void matmul_forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                             int OC) override {
        const cuda::OpProfiler::Scope timed(profiler(), "matmul_forward_gelu", stream_);
        cuda::matmul_forward_gelu(act(out), act(pre), act(inp), act(weight), act(bias), N, C, OC, stream_);
    }
    void matmul_backward_dgelu(void* dinp, const void* dout, const void* weight, const void* pre, int N, int C,
                               int OC) override {
        const cuda::OpProfiler::Scope timed(profiler(), "matmul_backward_dgelu", stream_);
        cuda::matmul_backward_dgelu(act(dinp), act(dout), act(weight), act(pre), N, C, OC, stream_);
    }
    void attention_forward(void* out, float* lse, const void* qkv, int B, int Tlen, int C, int NH) override {
        const cuda::OpProfiler::Scope timed(profiler(), "attention_forward", stream_);
        cuda::attention_forward_gemm(act(out), lse, act(qkv), B, Tlen, C, NH, stream_);
    }
    void attention_decode(void* out, const void* qkv, int pos, int n, int C, int NH) override {
        const cuda::OpProfiler::Scope timed(profiler(), "attention_decode", stream_);
        cuda::attention_decode(act(out), act(qkv), pos, n, C, NH, stream_);
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                            int Tlen, int C, int NH) override {
        const cuda::OpProfiler::Scope timed(profiler(), "attention_backward", stream_);
        cuda::attention_backward_gemm(act(dqkv), act(dout), act(qkv), act(out), lse, B, Tlen, C, NH, stream_);
    }
    void gelu_forward(void* out, const void* inp, size_t n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "gelu_forward", stream_);
        cuda::gelu_forward(act(out), act(inp), n, stream_);
    }
    void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "gelu_backward", stream_);
        cuda::gelu_backward(act(dinp), act(inp), act(dout), n, stream_);
    }
    void gelu_backward_bias(void* dinp, float* dbias, const void* inp, const void* dout, int rows, int cols) override {
        const cuda::OpProfiler::Scope timed(profiler(), "gelu_backward_bias", stream_);
        // GELU backward, then the sums of its output
        cuda::gelu_backward(act(dinp), act(inp), act(dout), (size_t)rows * cols, stream_);
        cuda::add_column_sums(dbias, column_partials(rows, cols), act(dinp), rows, cols, stream_);
    }
    void residual_layernorm_forward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                    const void* weight, const void* bias, int N, int C) override {
        const cuda::OpProfiler::Scope timed(profiler(), "residual_layernorm_forward", stream_);
        // the residual add, then the layernorm
        cuda::residual_forward(act(residual), act(a), act(b), (size_t)N * C, stream_);
        cuda::layernorm_forward(act(out), mean, rstd, act(residual), act(weight), act(bias), N, C, stream_);
    }
    void residual_forward(void* out, const void* a, const void* b, size_t n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "residual_forward", stream_);
        cuda::residual_forward(act(out), act(a), act(b), n, stream_);
    }
    void fused_classifier(void* dlogits, float* losses, const void* logits, const int32_t* targets, int N, int V,
                          int Vp, float dloss) override {
        const cuda::OpProfiler::Scope timed(profiler(), "fused_classifier", stream_);
        cuda::fused_classifier(dlogits != nullptr ? act(dlogits) : nullptr, losses, act(logits), targets, N, V, Vp,
                               dloss, stream_);
    }

    // --- FP8 ---
    void amax_into(const void* x, size_t n, Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "amax_into", stream_);
        cuda::amax_into(act(x), n, counters, stream_);
    }
    void fp8_scale_from_counters(Fp8ScaleSlot* slot, const Fp8Counters* counters, float fp8_max, int margin) override {
        const cuda::OpProfiler::Scope timed(profiler(), "fp8_scale_from_counters", stream_);
        cuda::fp8_scale_from_counters(slot, counters, fp8_max, margin, stream_);
    }
    void fp8_end_step(Fp8ScaleSlot* slots, float* history, const Fp8Counters* counters, const float* amaxes, int n,
                      int n_e4m3, int H, bool most_recent, int margin, bool delayed) override {
        const cuda::OpProfiler::Scope timed(profiler(), "fp8_end_step", stream_);
        cuda::fp8_end_step(slots, history, counters, amaxes, n, n_e4m3, H, most_recent, margin, delayed, stream_);
    }
    void fp8_amaxes(float* amaxes, const Fp8Counters* counters, int n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "fp8_amaxes", stream_);
        cuda::fp8_amaxes(amaxes, counters, n, stream_);
    }
    void quantize_transpose_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* x, int rows, int cols, const Fp8ScaleSlot* scale,
                                 Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "quantize_transpose_e4m3", stream_);
        cuda::quantize_transpose_fp8<T, fp8e4m3>(q, qt, act(x), rows, cols, &scale->scale, counters, stream_,
                                                 cuda::Unchanged{}, options_.fused_kernels);
    }
    void quantize_transpose_e5m2(fp8e5m2* q, fp8e5m2* qt, const void* x, int rows, int cols, const Fp8ScaleSlot* scale,
                                 Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "quantize_transpose_e5m2", stream_);
        cuda::quantize_transpose_fp8<T, fp8e5m2>(q, qt, act(x), rows, cols, &scale->scale, counters, stream_,
                                                 cuda::Unchanged{}, options_.fused_kernels);
    }
    void gelu_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, const void* inp, int rows, int cols, const Fp8ScaleSlot* scale,
                           Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "gelu_forward_e4m3", stream_);
        if (!options_.fused_kernels) {   // the producer into scratch, then the cast (the same bits, more traffic)
            T* y = unfused_scratch((size_t)rows * cols);
            cuda::gelu_forward(y, act(inp), (size_t)rows * cols, stream_);
            cuda::quantize_transpose_fp8<T, fp8e4m3>(q, qt, y, rows, cols, &scale->scale, counters, stream_);
            return;
        }
        cuda::gelu_forward_fp8<T, fp8e4m3>(q, qt, act(inp), rows, cols, &scale->scale, counters, stream_);
    }
    void layernorm_forward_e4m3(fp8e4m3* q, fp8e4m3* qt, float* mean, float* rstd, const void* inp, const void* weight,
                                const void* bias, int N, int C, const Fp8ScaleSlot* scale, Fp8Counters* counters,
                                bool stats_ready) override {
        const cuda::OpProfiler::Scope timed(profiler(), "layernorm_forward_e4m3", stream_);
        if (!options_.fused_kernels) {
            T* y = unfused_scratch((size_t)N * C);
            cuda::layernorm_forward(y, mean, rstd, act(inp), act(weight), act(bias), N, C, stream_);
            cuda::quantize_transpose_fp8<T, fp8e4m3>(q, qt, y, N, C, &scale->scale, counters, stream_);
            return;
        }
        cuda::layernorm_forward_fp8<T, fp8e4m3>(q, qt, mean, rstd, act(inp), act(weight), act(bias), N, C,
                                                &scale->scale, counters, stream_, stats_ready);
    }
    void gelu_backward_e5m2(void* dinp, fp8e5m2* q, fp8e5m2* qt, const void* inp, const void* dout, int rows, int cols,
                            const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "gelu_backward_e5m2", stream_);
        if (!options_.fused_kernels) {
            cuda::gelu_backward(act(dinp), act(inp), act(dout), (size_t)rows * cols, stream_);
            cuda::quantize_transpose_fp8<T, fp8e5m2>(q, qt, act(dinp), rows, cols, &scale->scale, counters, stream_);
            return;
        }
        cuda::gelu_backward_fp8<T, fp8e5m2>(act(dinp), q, qt, act(inp), act(dout), rows, cols, &scale->scale, counters,
                                            stream_);
    }
    void attention_forward_e4m3(void* out, float* lse, fp8e4m3* q, const void* qkv, int B, int Tlen, int C, int NH,
                                const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "attention_forward_e4m3", stream_);
        if constexpr (!std::is_same_v<T, float>) {
            if (options_.fused_kernels && flash_attention(C / NH)) {   // the cast in the flash epilogue
                cuda::attention_forward_flash_fp8(act(out), lse, q, act(qkv), B, Tlen, C, NH, &scale->scale, counters,
                                                  stream_);
                return;
            }
        }
        attention_forward(out, lse, qkv, B, Tlen, C, NH);
        cuda::quantize_fp8<T, fp8e4m3>(q, act(out), (size_t)B * Tlen * C, &scale->scale, counters, stream_);
    }
    void attention_backward_e5m2(void* dqkv, fp8e5m2* q, fp8e5m2* qt, const void* dout, const void* qkv,
                                 const void* out, const float* lse, int B, int Tlen, int C, int NH,
                                 const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "attention_backward_e5m2", stream_);
        if constexpr (!std::is_same_v<T, float>) {
            if (options_.fused_kernels && flash_attention(C / NH)) {   // the cast in the flash epilogues
                cuda::attention_backward_flash_fp8(act(dqkv), q, qt, act(dout), act(qkv), act(out), lse, B, Tlen, C, NH,
                                                   &scale->scale, counters, stream_);
                return;
            }
        }
        attention_backward(dqkv, dout, qkv, out, lse, B, Tlen, C, NH);
        cuda::quantize_transpose_fp8<T, fp8e5m2>(q, qt, act(dqkv), B * Tlen, 3 * C, &scale->scale, counters, stream_,
                                                 cuda::Unchanged{}, options_.fused_kernels);
    }
    void layernorm_backward_e5m2(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                 const void* weight, const float* mean, const float* rstd, int N, int C,
                                 float* dinp_sums, fp8e5m2* q, fp8e5m2* qt, const Fp8ScaleSlot* scale,
                                 Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "layernorm_backward_e5m2", stream_);
        if (options_.fused_kernels &&
            cuda::layernorm_backward_fp8_fuses(act(dinp), act(dout), act(inp), act(weight), q, qt, N, C)) {
            cuda::layernorm_backward_fp8(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), mean, rstd, N, C,
                                         dinp_sums, q, qt, &scale->scale, counters, stream_);
            return;
        }
        layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dinp_sums);
        cuda::quantize_transpose_fp8<T, fp8e5m2>(q, qt, act(dinp), N, C, &scale->scale, counters, stream_,
                                                 cuda::Unchanged{}, options_.fused_kernels);
    }
    void adamw_update_e4m3(float* master, void* working, float* m, float* v, const float* grads, int rows, int cols,
                           float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                           fp8e4m3* q, fp8e4m3* qt, const Fp8ScaleSlot* scale, Fp8Counters* counters) override {
        const cuda::OpProfiler::Scope timed(profiler(), "adamw_update_e4m3", stream_);
        if (!options_.fused_kernels) {
            cuda::adamw_update(master, act(working), m, v, grads, (size_t)rows * cols, lr, beta1, beta2, eps,
                               weight_decay, grad_scale, t, stream_);
            cuda::quantize_transpose_fp8<T, fp8e4m3>(q, qt, act(working), rows, cols, &scale->scale, counters, stream_);
            return;
        }
        cuda::adamw_update_fp8(master, act(working), m, v, grads, rows, cols, lr, beta1, beta2, eps, weight_decay,
                               grad_scale, t, q, qt, &scale->scale, counters, stream_);
    }
    void matmul_forward_fp8(void* out, const fp8e4m3* inp, const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight,
                            const Fp8ScaleSlot* weight_scale, const void* bias, int N, int C, int OC) override {
        const cuda::OpProfiler::Scope timed(profiler(), "matmul_forward_fp8", stream_);
        cuda::matmul_forward_fp8(act(out), inp, &inp_scale->inv_scale, weight, &weight_scale->inv_scale, act(bias), N,
                                 C, OC, stream_);
    }
    void matmul_backward_fp8(void* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q, const fp8e5m2* dout_qt,
                             const Fp8ScaleSlot* dout_scale, const void* dout, const fp8e4m3* inp_qt,
                             const Fp8ScaleSlot* inp_scale, const fp8e4m3* weight_qt, const Fp8ScaleSlot* weight_scale,
                             int N, int C, int OC) override {
        const cuda::OpProfiler::Scope timed(profiler(), "matmul_backward_fp8", stream_);
        cuda::matmul_backward_fp8(act(dinp), dweight, dbias, dout_q, dout_qt, &dout_scale->inv_scale, act(dout), inp_qt,
                                  &inp_scale->inv_scale, weight_qt, &weight_scale->inv_scale, N, C, OC, stream_);
    }

    // --- optimizer ---
    double sum_squares(const float* g, size_t n) override {
        const cuda::OpProfiler::Scope timed(profiler(), "sum_squares", stream_);
        return cuda::sum_squares(g, n, stream_);
    }
    void adamw_update(float* master, void* working, float* m, float* v, const float* grads, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) override {
        const cuda::OpProfiler::Scope timed(profiler(), "adamw_update", stream_);
        cuda::adamw_update(master, act(working), m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t,
                           stream_);
    }

  protected:
    // Pinned slots for small host-to-device copies, used in turn: a slot is refilled only once
    // the copy queued from it last has run (its event), kSlots copies later, so queued copies
    // never wait for the GPU unless it is kSlots copies behind. Without pinned memory (cudaHostAlloc
    // failed) every copy waits, as a large one does.
    struct StagingSlots {
        static constexpr int kSlots = 4;
        static constexpr size_t kSlotBytes = size_t(1) << 20;   // B·T·4 bytes of tokens: B·T ≤ 262144
        unsigned char* host = nullptr;                          // (kSlots, kSlotBytes), pinned
        cudaEvent_t done[kSlots] = {};
        int next = 0, current = -1;
        void open() {
            if (cudaHostAlloc(reinterpret_cast<void**>(&host), kSlots * kSlotBytes, cudaHostAllocDefault) !=
                cudaSuccess) {
                cudaGetLastError();
                host = nullptr;
                return;
            }
            for (cudaEvent_t& e : done)
                cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
        void close() {   // errors ignored: the backend's destructor
            if (host == nullptr) return;
            for (cudaEvent_t e : done)
                if (e != nullptr) cudaEventDestroy(e);
            cudaFreeHost(host);
            host = nullptr;
        }
        // src's bytes in the next slot (after the copy last queued from it has run), or null: too
        // large, or no pinned memory
        void* stage(const void* src, size_t bytes) {
            if (host == nullptr || bytes > kSlotBytes) return nullptr;
            current = next;
            next = (next + 1) % kSlots;
            cudaCheck(cudaEventSynchronize(done[current]));   // an unrecorded event is complete
            unsigned char* slot = host + (size_t)current * kSlotBytes;
            std::memcpy(slot, src, bytes);
            return slot;
        }
        void queued(cudaStream_t stream) { cudaCheck(cudaEventRecord(done[current], stream)); }
    } staging_;
    DType dtype_;
    int device_;
    CudaOptions options_;
    bool flash_attention(int head_size) const {
        return options_.flash_attention && cuda::attention_flash_supports(head_size, dtype_);
    }
    cuda::OpProfiler profiler_;   // enabled by --profile
    cudaStream_t stream_ = nullptr;
    T* unfused_scratch(size_t n) { return static_cast<T*>(cuda::scratch(n * sizeof(T), stream_)); }
    // the partial sums of add_column_sums over (rows, cols), in the scratch buffer
    float* column_partials(int rows, int cols) {
        return static_cast<float*>(
            cuda::scratch((size_t)cuda::column_sum_chunks(rows) * cols * sizeof(float), stream_));
    }
    cuda::OpProfiler* profiler() { return profiler_.enabled() ? &profiler_ : nullptr; }
};

// --fused-kernels, --attention flash, -p tf32 and --gemm-epilogues (not yet validated on a GPU):
// the ops they change. Fused: the residual add in the layernorm, the bias gradients in the
// layernorm and GELU backward, one kernel each; flash: the tensor-core attention where it supports
// the head size (bf16, fp16); tf32: the matmul ops' GEMMs on TF32 tensor cores (fp32 storage);
// epilogues: a matmul_backward with a bias gradient sums it in the dW GEMM (BGRADB); cudnn:
// cuDNN's fused attention (bf16, fp16); --flash-backward wide: the flash backward's wide kernels
// (cuda/attention_flash_bwd_wide.cuh).
template <typename T>
class CudaBackendWithOptions final : public CudaBackend<T> {
    using Base = CudaBackend<T>;
    using Base::act;
    using Base::flash_attention;
    using Base::options_;
    using Base::profiler;
    using Base::stream_;

  public:
    using Base::Base;

    void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                            const void* weight, const float* mean, const float* rstd, int N, int C,
                            float* dinp_sums) override {
        if (!options_.fused_kernels || dinp_sums == nullptr) {
            return Base::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dinp_sums);
        }
        const cuda::OpProfiler::Scope timed(profiler(), "layernorm_backward", stream_);
        cuda::layernorm_backward(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), mean, rstd, N, C,
                                 dinp_sums, stream_);
    }
    void gelu_backward_bias(void* dinp, float* dbias, const void* inp, const void* dout, int rows, int cols) override {
        if (!options_.fused_kernels) return Base::gelu_backward_bias(dinp, dbias, inp, dout, rows, cols);
        const cuda::OpProfiler::Scope timed(profiler(), "gelu_backward_bias", stream_);
        cuda::gelu_backward_bias(act(dinp), dbias, act(inp), act(dout), rows, cols, stream_);
    }
    void residual_layernorm_forward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                    const void* weight, const void* bias, int N, int C) override {
        if (!options_.fused_kernels) {
            return Base::residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
        }
        const cuda::OpProfiler::Scope timed(profiler(), "residual_layernorm_forward", stream_);
        cuda::residual_layernorm_forward(act(residual), act(out), mean, rstd, act(a), act(b), act(weight), act(bias), N,
                                         C, stream_);
    }
    void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                        int OC) override {
        if constexpr (std::is_same_v<T, float>) {
            if (options_.tf32_gemms) {
                const cuda::OpProfiler::Scope timed(profiler(), "matmul_forward", stream_);
                cuda::matmul_forward_tf32(act(out), act(inp), act(weight), act(bias), N, C, OC, stream_);
                return;
            }
        }
        Base::matmul_forward(out, inp, weight, bias, N, C, OC);
    }
    void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, int N, int C, int OC) override {
        if constexpr (std::is_same_v<T, float>) {
            if (options_.tf32_gemms) {
                const cuda::OpProfiler::Scope timed(profiler(), "matmul_backward", stream_);
                cuda::matmul_backward_tf32(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), N, C, OC,
                                           stream_);
                return;
            }
        }
        if (options_.gemm_epilogues && dbias != nullptr) {   // the bias gradient from the dW GEMM's epilogue
            const cuda::OpProfiler::Scope timed(profiler(), "matmul_backward", stream_);
            cuda::matmul_backward_bgrad(act(dinp), dweight, dbias, act(dout), act(inp), act(weight), N, C, OC, stream_);
            return;
        }
        Base::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    }
    void attention_forward(void* out, float* lse, const void* qkv, int B, int Tlen, int C, int NH) override {
        if constexpr (!std::is_same_v<T, float>) {
            if (options_.cudnn_attention) {
                const cuda::OpProfiler::Scope timed(profiler(), "attention_forward", stream_);
                attention_forward_cudnn(out, lse, qkv, B, Tlen, C, NH, Base::act_dtype(), stream_);
                return;
            }
            if (flash_attention(C / NH)) {
                const cuda::OpProfiler::Scope timed(profiler(), "attention_forward", stream_);
                cuda::attention_forward_flash(act(out), lse, act(qkv), B, Tlen, C, NH, stream_);
                return;
            }
        }
        Base::attention_forward(out, lse, qkv, B, Tlen, C, NH);
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                            int Tlen, int C, int NH) override {
        if constexpr (!std::is_same_v<T, float>) {
            if (options_.cudnn_attention) {
                const cuda::OpProfiler::Scope timed(profiler(), "attention_backward", stream_);
                attention_backward_cudnn(dqkv, dout, qkv, out, lse, B, Tlen, C, NH, Base::act_dtype(), stream_);
                return;
            }
            if (flash_attention(C / NH)) {
                const cuda::OpProfiler::Scope timed(profiler(), "attention_backward", stream_);
                if (options_.flash_backward_wide)
                    cuda::attention_backward_flash_wide(act(dqkv), act(dout), act(qkv), act(out), lse, B, Tlen, C, NH,
                                                        stream_);
                else
                    cuda::attention_backward_flash(act(dqkv), act(dout), act(qkv), act(out), lse, B, Tlen, C, NH,
                                                   stream_);
                return;
            }
        }
        Base::attention_backward(dqkv, dout, qkv, out, lse, B, Tlen, C, NH);
    }
};

// The kernel set for T: the validated one, or, with a flag that changes an op, the one with options.
template <typename T>
std::unique_ptr<Backend> make_for(DType dtype, int device, const CudaOptions& options) {
    if (options.tf32_gemms && !std::is_same_v<T, float>) {
        fail("TF32 GEMMs need fp32 storage (precision tf32), not %s", dtype_name(dtype));
    }
    if (options.fused_kernels || options.flash_attention || options.tf32_gemms || options.gemm_epilogues ||
        options.cudnn_attention) {
        return std::make_unique<CudaBackendWithOptions<T>>(dtype, device, options);
    }
    return std::make_unique<CudaBackend<T>>(dtype, device, options);
}

}   // namespace

std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device, const CudaOptions& options) {
    std::string reason;
    const int count = cuda_device_count(&reason);
    if (count == 0) fail("CUDA kernel set: no usable GPU (%s)", reason.c_str());
    if (device < 0 || device >= count) fail("CUDA kernel set: GPU %d does not exist (%d found)", device, count);
    switch (dtype) {
        case DType::F32: return make_for<float>(dtype, device, options);
        case DType::BF16: return make_for<__nv_bfloat16>(dtype, device, options);
        case DType::F16: return make_for<__half>(dtype, device, options);
    }
    fail("no CUDA kernel set for dtype %d", (int)dtype);
}

bool cuda_flash_attention_supports(int head_size, DType dtype) {
    return cuda::attention_flash_supports(head_size, dtype);
}

int cuda_device_count(std::string* reason) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError();   // not sticky; clear it so later calls start clean
        if (reason != nullptr) *reason = cudaGetErrorString(err);
        return 0;
    }
    if (count == 0 && reason != nullptr) *reason = "no CUDA device";
    return count;
}

std::string cuda_device_name(int device) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return "";
    }
    return prop.name;
}

}   // namespace train_gpt
