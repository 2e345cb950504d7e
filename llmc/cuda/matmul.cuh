// cuda/matmul.cuh — the GEMMs of the CUDA kernel set, on cuBLASLt: the twins of cpu::matmul_forward,
// cpu::matmul_backward (cpu/kernels.h) and cpu::matmul_forward_fp8, cpu::matmul_backward_fp8
// (cpu/fp8_kernels.h). Same arguments, plus the stream.
//
// Invariants:
//   * every GEMM accumulates in FP32 (CUBLAS_COMPUTE_32F: no TF32, no FP16 accumulation; the
//     tf32 precision's matmul_forward_tf32 / matmul_backward_tf32 alone take
//     CUBLAS_COMPUTE_32F_FAST_TF32: FP32 operands read as TF32, FP32 accumulation) and
//     rounds into its output once: split-K algorithms must reduce their parts in FP32
//     (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE), not in a 16-bit output, unless cuBLASLt offers
//     nothing else for the problem;
//   * backward OVERWRITES dinp (beta = 0, in T) and ACCUMULATES dweight and dbias (beta = 1, in FP32);
//   * dbias is a fixed-order column sum (column_sums.cuh), so it is bit-reproducible.
//
// Layouts. Row-major buffers, as everywhere in the model; cuBLASLt is column-major, so a row-major
// (R, K) matrix is read as a column-major K×R one and every GEMM below computes Dᵀ:
//
//   GEMM                          cuBLASLt (column-major)  m, n, k     A          B          ops
//   out  (N,OC)  = inp · Wᵀ + b   Dᵀ (OC×N)                OC, N, C    W          inp        T N (+ BIAS epilogue)
//   dinp (N,C)   = dout · W       Dᵀ (C×N)                 C, N, OC    W          dout       N N
//   dW   (OC,C) += doutᵀ · inp    Dᵀ (C×OC)                C, OC, N    inp        dout       N T
//
// FP8 (Hopper): cuBLASLt runs FP8 GEMMs only as "TN" — A transposed, B not — i.e. both operands
// stored with the reduction dimension k contiguous. Row-major that means:
//   forward  out  = X · Wᵀ     A = W (OC,C), B = X (N,C): both already k-contiguous;
//   dX       dinp  = dY · W    A = Wᵀ (C,OC),  B = dY (N,OC);
//   dW       dW   += dYᵀ · X   A = Xᵀ (C,N),   B = dYᵀ (OC,N).
// The transposed copies come from the casts that make the FP8 operands (fp8.cuh,
// quantize_transpose_fp8: the weights after each update, X in the forward, dY in the backward),
// so no GEMM here transposes anything. The dequantisation factors 1/s
// reach cuBLASLt as device floats (A_SCALE_POINTER / B_SCALE_POINTER): D = 1/s_a · 1/s_b · Σ q_a q_b.
// FP8 tensor-core GEMMs need 16-byte-aligned leading dimensions and k a multiple of 16: shapes
// whose C, OC (and N, in backward, where N is the reduction dimension of dW) are not multiples of
// 16 are rejected. The forward accepts any N (sampling runs with a short context).
// Fast accumulation (FP8 partial sums not promoted to FP32 at intervals) is used in the forward
// only; the backward GEMMs use full FP32 accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM = 0).
// The bias rides on the BIAS epilogue, except in the FP8 forward for T = float (cuBLASLt wants a
// BF16 bias with an FP32 FP8 output): there a small kernel adds it.
//
// Each stream that runs GEMMs gets a GemmContext (cuBLASLt handle, 32 MiB workspace), made on
// first use; a backend releases its stream's context with
// release_gemm_context(). Temporaries (dbias partial sums, the fallback's widened operands) come
// from common.cuh's scratch buffer.
#pragma once

#include "cuda/column_sums.cuh"
#include "cuda/common.cuh"
#include "precision/dtypes.h"
#include "utils.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace train_gpt::cuda {

// FP8 GEMMs' dimensions (C, OC, and N in backward) must be multiples of this (Fp8Ops::fp8_gemm_multiple).
inline constexpr int kFp8GemmMultiple = 16;

// ---- errors ------------------------------------------------------------------------------------

inline void cublas_check(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    fail("cuBLAS error at %s:%d: %s: %s (%s)", file, line, call, cublasLtGetStatusName(status),
         cublasLtGetStatusString(status));
}
#define cublasCheck(call) ::train_gpt::cuda::cublas_check((call), #call, __FILE__, __LINE__)

// ---- per-stream context --------------------------------------------------------------------------

inline constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;   // cuBLASLt's split-K / epilogue workspace

// A cuBLASLt algorithm that launched for a problem, and whether it ran with a null C (beta = 0).
struct GemmAlgo {
    cublasLtMatmulAlgo_t algo;
    bool null_c = false;
};

// An epilogue beyond the bias (--gemm-epilogues, cuda/matmul_epilogues.cuh), applied by cuBLASLt
// to the FP32 result before it is rounded into D:
//   kGeluAux  D = gelu(result + bias), aux = result + bias (the GELU input, D's type)   GELU_AUX(_BIAS)
//   kDGelu    D = gelu'(aux) · result (aux read: the GELU input the forward kept)      DGELU
//   kBGradB   bias_grad (n) = Σ_k op(B), written (D's type), beside D = A·B            BGRADB
// aux is column-major like D (m×n, aux_ld ≥ m, a multiple of 8).
enum class GemmEpilogue : int64_t { kNone = 0, kGeluAux = 1, kDGelu = 2, kBGradB = 3 };
struct GemmEpilogueArgs {
    GemmEpilogue kind = GemmEpilogue::kNone;
    void* aux = nullptr;
    int64_t aux_ld = 0;
    void* bias_grad = nullptr;
};

// Everything that decides which cuBLASLt algorithms can run a GEMM: its shape, types, layouts,
// pointer alignments, epilogue, scaling and batch. Equal problems share one GemmPlan.
struct GemmProblem {
    int64_t m, n, k;
    int64_t a_type, b_type, d_type, bias_type;   // cudaDataType_t; bias_type -1: no bias
    int64_t a_transposed, b_transposed;
    int64_t lda, ldb, ldd;
    int64_t align_a, align_b, align_d, align_bias;   // bytes
    int64_t fp8;                                     // 0: 16/32-bit; 1: FP8; 2: FP8 with fast accumulation
    int64_t tf32;                                    // 1: CUBLAS_COMPUTE_32F_FAST_TF32 (FP32 operands)
    int64_t beta_nonzero, alpha_not_one;
    int64_t batch_count, stride_a, stride_b, stride_d;
    int64_t epilogue, aux_ld, align_aux;   // GemmEpilogue beyond the bias; its aux's ld and alignment
    auto fields() const {
        return std::tie(m, n, k, a_type, b_type, d_type, bias_type, a_transposed, b_transposed, lda, ldb, ldd, align_a,
                        align_b, align_d, align_bias, fp8, tf32, beta_nonzero, alpha_not_one, batch_count, stride_a,
                        stride_b, stride_d, epilogue, aux_ld, align_aux);
    }
    bool operator<(const GemmProblem& o) const { return fields() < o.fields(); }
};

// The cuBLASLt descriptors of one problem, built once, and the algorithm chosen for it. Only the
// pointers (bias, FP8 scale factors) change from call to call: gemm() sets them before each launch.
struct GemmPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;   // C is D (in place)
    cublasLtMatmulPreference_t pref = nullptr;
    bool searched = false;          // a search for the algorithm below returned (detail::run_gemm_plan)
    std::optional<GemmAlgo> algo;   // nullopt after a search: cuBLASLt cannot run the problem
    std::string unsupported_why;    // then: what the search saw (the error message's end)
    GemmPlan() = default;
    GemmPlan(const GemmPlan&) = delete;
    GemmPlan& operator=(const GemmPlan&) = delete;
    ~GemmPlan() {   // errors ignored: destructors do not throw
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

struct GemmContext {
    int device = -1;
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;                                // (kCublasWorkspaceBytes)
    std::map<GemmProblem, std::unique_ptr<GemmPlan>> plans;   // per problem (gemm())
    // --gemm-autotune: time the heuristic's candidates for each new problem and keep the fastest
    // (else the first that launches); log: print one line per problem timed
    bool autotune = false;
    bool log_autotune = false;

    explicit GemmContext(int dev) : device(dev) {
        cublasCheck(cublasLtCreate(&handle));
        cudaCheck(cudaMalloc(&workspace, kCublasWorkspaceBytes));
    }
    ~GemmContext() {   // errors ignored: destructors do not throw
        plans.clear();
        cudaFree(workspace);
        cublasLtDestroy(handle);
    }
    GemmContext(const GemmContext&) = delete;
    GemmContext& operator=(const GemmContext&) = delete;
};

namespace detail {
using GemmKey = std::pair<int, cudaStream_t>;   // (device, stream)
// Never destroyed (a static destructor would run after the CUDA runtime is torn down at exit);
// contexts are released explicitly by their owners.
inline std::map<GemmKey, std::unique_ptr<GemmContext>>& gemm_registry() {
    static auto* registry = new std::map<GemmKey, std::unique_ptr<GemmContext>>();
    return *registry;
}
inline std::mutex& gemm_registry_mutex() {
    static auto* mutex = new std::mutex();
    return *mutex;
}
}   // namespace detail

// The context of `stream` on the current device (made on first use).
inline GemmContext& gemm_context(cudaStream_t stream) {
    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(detail::gemm_registry_mutex());
    auto& slot = detail::gemm_registry()[{device, stream}];
    if (!slot) slot = std::make_unique<GemmContext>(device);
    return *slot;
}

// Frees the context of `stream` on the current device, if any (call before destroying the stream).
inline void release_gemm_context(cudaStream_t stream) {
    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(detail::gemm_registry_mutex());
    detail::gemm_registry().erase({device, stream});
}

// ---- small kernels ---------------------------------------------------------------------------------

// out (N,OC) = round(out + bias), when the bias cannot ride on the GEMM's epilogue.
template <typename T>
__global__ void add_bias_kernel(T* out, const T* bias, int N, int OC) {
    const size_t n = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = from_float<T>(to_float(out[i]) + to_float(bias[i % OC]));
    }
}

// ---- launch helpers --------------------------------------------------------------------------------

template <typename T>
constexpr cudaDataType_t cuda_data_type() {
    if constexpr (std::is_same_v<T, float>)
        return CUDA_R_32F;
    else if constexpr (std::is_same_v<T, __nv_bfloat16>)
        return CUDA_R_16BF;
    else if constexpr (std::is_same_v<T, __half>)
        return CUDA_R_16F;
    else if constexpr (std::is_same_v<T, fp8e4m3>)
        return CUDA_R_8F_E4M3;
    else if constexpr (std::is_same_v<T, fp8e5m2>)
        return CUDA_R_8F_E5M2;
    else
        static_assert(sizeof(T) == 0, "no cuBLASLt data type for T");
}

inline size_t data_type_size(cudaDataType_t t) {
    switch (t) {
        case CUDA_R_32F: return 4;
        case CUDA_R_16BF:
        case CUDA_R_16F: return 2;
        default: return 1;   // FP8
    }
}

inline bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

// Largest power of two ≤ 256 that divides the address (cuBLASLt's alignment preferences).
inline uint32_t pointer_alignment(const void* p) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    uint32_t alignment = 256;
    while (alignment > 1 && address % alignment != 0)
        alignment /= 2;
    return alignment;
}

// One GEMM operand as stored: column-major, `ld` elements between columns; `transposed` is its op.
struct GemmOperand {
    const void* ptr;
    cudaDataType_t type;
    int ld;
    bool transposed;
    const float* scale = nullptr;   // FP8 only: device pointer to its dequantisation factor
};

// A strided batch: `count` independent GEMMs, operand i at ptr + i·stride (elements).
struct GemmBatch {
    int count = 1;
    int64_t stride_a = 0, stride_b = 0, stride_d = 0;
};

// What gemm() does when cuBLASLt cannot run the problem at all.
enum class IfUnsupported { Fail, ReturnFalse };

// Sets the GEMMs of `stream` to time the heuristic's candidates for each new problem (--gemm-autotune)
// and, with log, to print one line per problem timed.
inline void set_gemm_autotune(cudaStream_t stream, bool autotune, bool log) {
    GemmContext& ctx = gemm_context(stream);
    ctx.autotune = autotune;
    ctx.log_autotune = log;
}

namespace detail {

// The descriptors of a problem (everything but the pointers, which gemm() sets per call).
inline std::unique_ptr<GemmPlan> make_gemm_plan(const GemmProblem& p, bool transposed_a, bool transposed_b,
                                                bool has_bias, bool fast_accum, const GemmBatch& batch) {
    auto plan = std::make_unique<GemmPlan>();
    const cudaDataType_t a_type = (cudaDataType_t)p.a_type, b_type = (cudaDataType_t)p.b_type;
    const cudaDataType_t d_type = (cudaDataType_t)p.d_type;
    const cublasComputeType_t compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasCheck(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F));
    const cublasOperation_t op_a = transposed_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = transposed_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    cublasCheck(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    const GemmEpilogue extra = (GemmEpilogue)p.epilogue;
    if (has_bias || extra != GemmEpilogue::kNone) {
        cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        switch (extra) {
            case GemmEpilogue::kNone: break;
            case GemmEpilogue::kGeluAux:
                epilogue = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
                break;
            case GemmEpilogue::kDGelu: epilogue = CUBLASLT_EPILOGUE_DGELU; break;
            case GemmEpilogue::kBGradB: epilogue = CUBLASLT_EPILOGUE_BGRADB; break;
        }
        cublasCheck(
            cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
        if (has_bias) {
            const int32_t type = (int32_t)p.bias_type;
            cublasCheck(
                cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
        }
        if (extra == GemmEpilogue::kGeluAux || extra == GemmEpilogue::kDGelu) {
            const int64_t ld = p.aux_ld;
            cublasCheck(
                cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
        }
    }
    if (p.fp8) {
        const int8_t fast = fast_accum ? 1 : 0;
        cublasCheck(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    }
    // stored shapes: op(A) is m×k, op(B) is k×n
    const int64_t m = p.m, n = p.n, k = p.k;
    cublasCheck(cublasLtMatrixLayoutCreate(&plan->a, a_type, transposed_a ? k : m, transposed_a ? m : k, p.lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan->b, b_type, transposed_b ? n : k, transposed_b ? k : n, p.ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&plan->d, d_type, m, n, p.ldd));
    if (batch.count > 1) {
        const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
            {plan->a, batch.stride_a}, {plan->b, batch.stride_b}, {plan->d, batch.stride_d}};
        for (const auto& [layout, stride] : layouts) {
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch.count,
                                                         sizeof(batch.count)));
            cublasCheck(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof(stride)));
        }
    }
    cublasCheck(cublasLtMatmulPreferenceCreate(&plan->pref));
    const uint64_t workspace = kCublasWorkspaceBytes;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                     sizeof(workspace)));
    const uint32_t align_a = (uint32_t)p.align_a, align_b = (uint32_t)p.align_b, align_d = (uint32_t)p.align_d;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                     sizeof(align_a)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                     sizeof(align_b)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                     sizeof(align_d)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                     sizeof(align_d)));
    return plan;
}

// Bytes the output D of problem p spans (every batch).
inline size_t gemm_output_bytes(const GemmProblem& p) {
    const size_t one = (size_t)p.ldd * (size_t)p.n;
    const size_t elements = p.batch_count > 1 ? (size_t)(p.batch_count - 1) * (size_t)p.stride_d + one : one;
    return elements * data_type_size((cudaDataType_t)p.d_type);
}

}   // namespace detail

namespace detail {

// What the first call of a problem found: an algorithm or none, and whether its launch of the
// algorithm was already the call's GEMM (the heuristic's first candidate that launches, launched
// on D; the auto-tuner launches on a scratch output instead).
struct GemmSearchResult {
    std::optional<GemmAlgo> algo;
    bool wrote_d = false;
    std::string unsupported_why;   // with no algorithm: what the search saw
};

// One call of a planned GEMM: the first call of a problem searches, later calls launch what the
// search found. The plan records a search only once it has returned: a search that throws (a
// cuBLAS error, no memory for the auto-tuner's scratch) leaves the plan to be searched again by
// the next call, never taken for "cuBLASLt cannot run this". A problem known to be unsupported
// returns false to a ReturnFalse caller and fails for any other: no GEMM is skipped silently.
// search() → GemmSearchResult; launch(algo) runs the GEMM on D; unsupported(why) does not return.
template <typename Search, typename Launch, typename Unsupported>
bool run_gemm_plan(GemmPlan& plan, IfUnsupported if_unsupported, Search&& search, Launch&& launch,
                   Unsupported&& unsupported) {
    if (!plan.searched) {
        GemmSearchResult found = search();
        plan.algo = found.algo;
        plan.unsupported_why = std::move(found.unsupported_why);
        plan.searched = true;
        if (plan.algo && found.wrote_d) return true;
    }
    if (!plan.algo) {
        if (if_unsupported == IfUnsupported::ReturnFalse) return false;
        unsupported(plan.unsupported_why);
        return false;   // not reached: unsupported() does not return
    }
    launch(*plan.algo);
    return true;
}

// The heuristic's candidates for a plan that launch, in cuBLASLt's order: first with split-K
// partial sums in FP32 only (`preferred`: an in-place or output-type reduction would round a
// 16-bit output more than once), then, if none qualifies, with any reduction (a correct result
// that may round twice beats no result); with beta = 0 each mask is tried with C = D, then, if
// nothing launched, with a null C (some FP8 kernels of CUDA 13 refuse C = D, XLA reports).
// try_launch(choice) → its cublasStatus_t; a refusal (CUBLAS_STATUS_NOT_SUPPORTED, which writes
// nothing) moves on, any other error fails. first_only: stop at the first that launches.
struct GemmCandidates {
    std::vector<GemmAlgo> runnable;
    int offered = 0;                                     // candidates tried
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;   // the last launch's status
};
template <typename TryLaunch>
GemmCandidates runnable_candidates(GemmContext& ctx, GemmPlan& plan, cudaDataType_t d_type, bool beta_zero,
                                   bool first_only, TryLaunch&& try_launch) {
    GemmCandidates out;
    const uint32_t any = CUBLASLT_REDUCTION_SCHEME_MASK;
    const uint32_t preferred = data_type_size(d_type) < 4 ? uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) : any;
    for (uint32_t schemes : {preferred, any}) {
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(plan.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                         &schemes, sizeof(schemes)));
        std::array<cublasLtMatmulHeuristicResult_t, 8> candidates{};
        int found = 0;
        // no qualifying algorithm comes back as CUBLAS_STATUS_NOT_SUPPORTED (found = 0): try the next mask
        const cublasStatus_t status =
            cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan.op, plan.a, plan.b, plan.d, plan.d, plan.pref,
                                           (int)candidates.size(), candidates.data(), &found);
        if (status == CUBLAS_STATUS_NOT_SUPPORTED)
            found = 0;
        else
            cublasCheck(status);
        for (bool null_c : {false, true}) {
            if (null_c && !beta_zero) break;
            for (int i = 0; i < found; i++) {
                if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
                out.offered++;
                const GemmAlgo choice{candidates[i].algo, null_c};
                out.last = try_launch(choice);
                if (out.last == CUBLAS_STATUS_SUCCESS) {
                    out.runnable.push_back(choice);
                    if (first_only) return out;
                    continue;
                }
                if (out.last != CUBLAS_STATUS_NOT_SUPPORTED) cublasCheck(out.last);
            }
            if (!out.runnable.empty()) return out;
        }
    }
    return out;
}

// The fastest of `runnable` on `stream`: each launched once to warm up, then timed over 3
// launches (launch(choice) runs it on a scratch output). Returns its index; *best_ms, *first_ms:
// its time and the first candidate's.
template <typename Launch>
size_t fastest_candidate(const std::vector<GemmAlgo>& runnable, cudaStream_t stream, Launch&& launch, float* best_ms,
                         float* first_ms) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    size_t best = 0;
    for (size_t i = 0; i < runnable.size(); i++) {
        cublasCheck(launch(runnable[i]));   // warm-up
        cudaCheck(cudaEventRecord(start, stream));
        for (int rep = 0; rep < 3; rep++)
            cublasCheck(launch(runnable[i]));
        cudaCheck(cudaEventRecord(stop, stream));
        cudaCheck(cudaEventSynchronize(stop));
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, start, stop));
        ms /= 3.0f;
        if (i == 0) *first_ms = ms;
        if (i == 0 || ms < *best_ms) *best_ms = ms, best = i;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return best;
}

}   // namespace detail

// D (m×n, column-major, leading dimension ldd) = alpha · op(A) · op(B) [· scales] + beta · D [+ bias (m)],
// `batch.count` times. FP32 compute and scale type; FP8 factors come through the scale pointers.
// Returns false only with IfUnsupported::ReturnFalse, when no algorithm cuBLASLt offers for the
// problem accepts it at launch (nothing was written).
//
// Each problem (GemmProblem: shape, types, layouts, alignments, epilogue, batch) gets its
// descriptors once (GemmPlan); a call only sets the pointers and launches. The algorithm is chosen
// once per problem among cuBLASLt's heuristic candidates (up to 8): the first that launches, or,
// with --gemm-autotune (set_gemm_autotune), the fastest of those that launch, each timed on a
// scratch output (3 launches after a warm-up) so the caller's D is written exactly once. The
// heuristic can offer an algorithm that cublasLtMatmul then refuses with
// CUBLAS_STATUS_NOT_SUPPORTED (seen for FP8 on CUDA 13 / H200): the next candidate is tried. A
// refused launch writes nothing, so trying is safe even when D accumulates (beta = 1).
inline bool gemm(const char* what, cudaStream_t stream, int m, int n, int k, const GemmOperand& a, const GemmOperand& b,
                 void* d, cudaDataType_t d_type, int ldd, float beta, const void* bias, cudaDataType_t bias_type,
                 bool fast_accum, const GemmBatch& batch = {}, IfUnsupported if_unsupported = IfUnsupported::Fail,
                 float alpha = 1.0f, bool tf32 = false, const GemmEpilogueArgs& epilogue = {}) {
    GemmContext& ctx = gemm_context(stream);
    const bool fp8 = is_fp8(a.type) || is_fp8(b.type);
    GemmProblem key{};
    key.m = m, key.n = n, key.k = k;
    key.a_type = a.type, key.b_type = b.type, key.d_type = d_type, key.bias_type = bias != nullptr ? bias_type : -1;
    key.a_transposed = a.transposed, key.b_transposed = b.transposed;
    key.lda = a.ld, key.ldb = b.ld, key.ldd = ldd;
    key.align_a = pointer_alignment(a.ptr), key.align_b = pointer_alignment(b.ptr), key.align_d = pointer_alignment(d);
    key.align_bias = bias != nullptr ? pointer_alignment(bias) : 0;
    key.fp8 = fp8 ? 1 + fast_accum : 0;
    key.tf32 = tf32;
    key.beta_nonzero = beta != 0.0f, key.alpha_not_one = alpha != 1.0f;
    key.batch_count = batch.count, key.stride_a = batch.stride_a, key.stride_b = batch.stride_b;
    key.stride_d = batch.stride_d;
    key.epilogue = (int64_t)epilogue.kind, key.aux_ld = epilogue.aux_ld;
    key.align_aux = epilogue.aux != nullptr ? pointer_alignment(epilogue.aux) : 0;
    std::unique_ptr<GemmPlan>& slot = ctx.plans[key];
    if (!slot) slot = detail::make_gemm_plan(key, a.transposed, b.transposed, bias != nullptr, fast_accum, batch);
    GemmPlan& plan = *slot;

    // this call's pointers
    if (bias != nullptr) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (epilogue.aux != nullptr) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &epilogue.aux,
                                                   sizeof(epilogue.aux)));
    }
    if (epilogue.bias_grad != nullptr) {
        cublasCheck(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epilogue.bias_grad,
                                                   sizeof(epilogue.bias_grad)));
    }
    if (a.scale != nullptr) {
        cublasCheck(
            cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a.scale, sizeof(a.scale)));
    }
    if (b.scale != nullptr) {
        cublasCheck(
            cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b.scale, sizeof(b.scale)));
    }
    // C is D (in place) when beta ≠ 0; with beta = 0 cuBLASLt reads no C, and a null C is also tried
    auto launch_on = [&](const GemmAlgo& choice, void* out) {
        return cublasLtMatmul(ctx.handle, plan.op, &alpha, a.ptr, plan.a, b.ptr, plan.b, &beta,
                              choice.null_c ? nullptr : out, plan.d, out, plan.d, &choice.algo, ctx.workspace,
                              kCublasWorkspaceBytes, stream);
    };
    auto why_unsupported = [&](const detail::GemmCandidates& c) {
        return std::to_string(c.offered) + " algorithm(s) offered, the last launch said " +
               cublasLtGetStatusName(c.last);
    };
    // the first candidate that launches, launched on D: that launch is this call's GEMM
    auto first_that_launches = [&]() {
        detail::GemmCandidates c = detail::runnable_candidates(ctx, plan, d_type, beta == 0.0f, /*first_only=*/true,
                                                               [&](const GemmAlgo& g) { return launch_on(g, d); });
        if (c.runnable.empty()) return detail::GemmSearchResult{std::nullopt, false, why_unsupported(c)};
        return detail::GemmSearchResult{c.runnable.front(), true, ""};
    };
    // --gemm-autotune: every candidate that launches, timed on a scratch output; D not written
    auto fastest = [&]() {
        void* probe = nullptr;
        cudaCheck(cudaMalloc(&probe, detail::gemm_output_bytes(key)));
        const std::unique_ptr<void, cudaError_t (*)(void*)> probe_guard(probe, cudaFree);
        auto launch_probe = [&](const GemmAlgo& g) { return launch_on(g, probe); };
        detail::GemmCandidates c =
            detail::runnable_candidates(ctx, plan, d_type, beta == 0.0f, /*first_only=*/false, launch_probe);
        if (c.runnable.empty()) return detail::GemmSearchResult{std::nullopt, false, why_unsupported(c)};
        float best_ms = 0.0f, first_ms = 0.0f;
        const size_t best = detail::fastest_candidate(c.runnable, stream, launch_probe, &best_ms, &first_ms);
        if (ctx.log_autotune) {
            std::printf(
                "gemm autotune: %s m=%d n=%d k=%d batch %d: %zu candidates, #%zu fastest %.4f ms (first %.4f ms)\n",
                what, m, n, k, batch.count, c.runnable.size(), best, best_ms, first_ms);
        }
        return detail::GemmSearchResult{c.runnable[best], false, ""};
    };
    return detail::run_gemm_plan(
        plan, if_unsupported, [&]() { return ctx.autotune ? fastest() : first_that_launches(); },
        [&](const GemmAlgo& g) { cublasCheck(launch_on(g, d)); },
        [&](const std::string& why) {
            fail(
                "%s: cuBLASLt cannot run m=%d n=%d k=%d (A %s type %d, B %s type %d, D type %d, bias %s, epilogue %d, "
                "batch %d): %s",
                what, m, n, k, a.transposed ? "T" : "N", (int)a.type, b.transposed ? "T" : "N", (int)b.type,
                (int)d_type, bias != nullptr ? "yes" : "no", (int)epilogue.kind, batch.count, why.c_str());
        });
}

// ---- the GEMMs ---------------------------------------------------------------------------------------

namespace detail {
// The matmul ops' GEMMs; tf32: on TF32 tensor cores (T = float only)
template <typename T>
void matmul_forward_gemms(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, bool tf32,
                          cudaStream_t stream) {
    if (N <= 0 || OC <= 0) return;
    const cudaDataType_t t = cuda_data_type<T>();
    gemm("matmul_forward", stream, OC, N, C, GemmOperand{weight, t, C, true}, GemmOperand{inp, t, C, false}, out, t, OC,
         0.0f, bias, t, false, {}, IfUnsupported::Fail, 1.0f, tf32);
}
template <typename T>
void matmul_backward_gemms(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int N,
                           int C, int OC, bool tf32, cudaStream_t stream) {
    if (N <= 0 || OC <= 0 || C <= 0) return;
    const cudaDataType_t t = cuda_data_type<T>();
    if (dinp != nullptr) {
        gemm("matmul_backward (dinp)", stream, C, N, OC, GemmOperand{weight, t, C, false},
             GemmOperand{dout, t, OC, false}, dinp, t, C, 0.0f, nullptr, t, false, {}, IfUnsupported::Fail, 1.0f, tf32);
    }
    if (dweight != nullptr) {
        gemm("matmul_backward (dweight)", stream, C, OC, N, GemmOperand{inp, t, C, false},
             GemmOperand{dout, t, OC, true}, dweight, CUDA_R_32F, C, 1.0f, nullptr, t, false, {}, IfUnsupported::Fail,
             1.0f, tf32);
    }
    if (dbias != nullptr) {
        float* partial = static_cast<float*>(scratch((size_t)column_sum_chunks(N) * OC * sizeof(float), stream));
        add_column_sums(dbias, partial, dout, N, OC, stream);
    }
}
}   // namespace detail

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC); bias may be null.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, cudaStream_t stream) {
    detail::matmul_forward_gemms(out, inp, weight, bias, N, C, OC, /*tf32=*/false, stream);
}

// dinp (N,C) = dout (N,OC) · weight (OC,C); dweight (OC,C) += doutᵀ · inp (N,C) in FP32;
// dbias (OC) += Σ_rows dout in FP32 (if non-null).
template <typename T>
void matmul_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int N, int C,
                     int OC, cudaStream_t stream) {
    detail::matmul_backward_gemms(dinp, dweight, dbias, dout, inp, weight, N, C, OC, /*tf32=*/false, stream);
}

// The tf32 precision's: the same on FP32 buffers, each GEMM on TF32 tensor cores
// (CUBLAS_COMPUTE_32F_FAST_TF32: the operands read with a 10-bit fraction, FP32 accumulation);
// the twins are cpu::matmul_forward_tf32 / matmul_backward_tf32, which round the operands to
// nearest (cuBLASLt does not document its conversion: the tests allow truncation too).
inline void matmul_forward_tf32(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                                int OC, cudaStream_t stream) {
    detail::matmul_forward_gemms(out, inp, weight, bias, N, C, OC, /*tf32=*/true, stream);
}
inline void matmul_backward_tf32(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* weight, int N, int C, int OC, cudaStream_t stream) {
    detail::matmul_backward_gemms(dinp, dweight, dbias, dout, inp, weight, N, C, OC, /*tf32=*/true, stream);
}

// ---- FP8 through BF16 tensor cores: the fallback when cuBLASLt refuses an FP8 GEMM ------------
// Every E4M3 and E5M2 value is exactly a BF16 value and exactly an FP16 value (3 or 2 mantissa
// bits; E4M3 spans 2^-9 … 448, E5M2 2^-16 … 57344, inside both formats), so widening the FP8
// operands and running a 16-bit GEMM with FP32 accumulation and alpha = 1/s_a · 1/s_b computes
// the same function as the FP8 GEMM, as the CPU twin does (it widens to FP32). It costs the FP8
// speed, not its numerics; the trainer says once when it runs. The 16-bit type W is FP16 for an
// FP16 output (cuBLASLt pairs BF16 inputs with BF16 or FP32 outputs only), else BF16.
template <typename T>
using Fp8Widened = std::conditional_t<std::is_same_v<T, __half>, __half, __nv_bfloat16>;

// out (n) = q (n) widened to W (exact).
template <typename W, typename Q>
__global__ void fp8_widen_kernel(W* out, const Q* q, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = from_float<W>(to_float(q[i]));
    }
}

template <typename W, typename Q>
void fp8_widen(W* out, const Q* q, size_t n, cudaStream_t stream) {
    const int blocks = (int)std::min<size_t>((n + 255) / 256, kGridStrideMaxBlocks);
    fp8_widen_kernel<<<std::max(blocks, 1), 256, 0, stream>>>(out, q, n);
    cudaCheck(cudaGetLastError());
}

// The float at device address p, on the host (waits for the stream): the fallback's alpha.
inline float host_value(const float* p, cudaStream_t stream) {
    float v = 0.0f;
    cudaCheck(cudaMemcpyAsync(&v, p, sizeof(v), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return v;
}

// Prints once per process that FP8 GEMMs run through the BF16 fallback (and why).
inline void note_fp8_fallback(const char* what) {
    static std::once_flag once;
    std::call_once(once, [what] {
        std::fprintf(stderr,
                     "warning: cuBLASLt refused the FP8 GEMM (%s) on this GPU/library: FP8 GEMMs run as 16-bit "
                     "GEMMs on the widened FP8 operands (same results, not FP8 speed)\n",
                     what);
    });
}

// FP8 forward: out (N,OC) = (q_inp · q_weightᵀ) · *inp_inv_scale · *weight_inv_scale + bias, both
// E4M3. The dequantisation factors are device pointers (&Fp8ScaleSlot::inv_scale, 16-byte aligned:
// cuBLASLt refuses FP8 GEMMs whose scale pointers are not).
template <typename T>
void matmul_forward_fp8(T* out, const fp8e4m3* inp, const float* inp_inv_scale, const fp8e4m3* weight,
                        const float* weight_inv_scale, const T* bias, int N, int C, int OC, cudaStream_t stream) {
    // k (= C) and the output's leading dimension (OC) must be 16-element multiples for FP8 tensor cores
    if (C % kFp8GemmMultiple != 0 || OC % kFp8GemmMultiple != 0) {
        fail("matmul_forward_fp8: C = %d and OC = %d must be multiples of %d (Hopper FP8 GEMM alignment)", C, OC,
             kFp8GemmMultiple);
    }
    if (N <= 0) return;
    // cuBLASLt's FP8 bias for an FP32 output must be BF16: for T = float the bias is a separate add
    constexpr bool epilogue_bias = !std::is_same_v<T, float>;
    const cudaDataType_t t = cuda_data_type<T>();
    const bool ran =
        gemm("matmul_forward_fp8", stream, OC, N, C, GemmOperand{weight, CUDA_R_8F_E4M3, C, true, weight_inv_scale},
             GemmOperand{inp, CUDA_R_8F_E4M3, C, false, inp_inv_scale}, out, t, OC, 0.0f,
             epilogue_bias ? bias : nullptr, t, /*fast_accum=*/true, {}, IfUnsupported::ReturnFalse);
    if (!ran) {   // 16 bits on the widened operands; the bias rides on the epilogue for every T
        note_fp8_fallback("forward");
        using W = Fp8Widened<T>;
        const cudaDataType_t w_type = cuda_data_type<W>();
        ScratchLayout layout;
        const size_t w_at = layout.add((size_t)OC * C * 2), x_at = layout.add((size_t)N * C * 2);
        void* base = scratch(layout.bytes, stream);
        W* w16 = at_offset<W>(base, w_at);
        W* x16 = at_offset<W>(base, x_at);
        fp8_widen(w16, weight, (size_t)OC * C, stream);
        fp8_widen(x16, inp, (size_t)N * C, stream);
        gemm("matmul_forward_fp8 (16-bit fallback)", stream, OC, N, C, GemmOperand{w16, w_type, C, true},
             GemmOperand{x16, w_type, C, false}, out, t, OC, 0.0f, bias, t, false, {}, IfUnsupported::Fail,
             host_value(inp_inv_scale, stream) * host_value(weight_inv_scale, stream));
        return;
    }
    if (!epilogue_bias && bias != nullptr) {
        const size_t n = (size_t)N * OC;
        const int blocks = (int)std::min<size_t>((n + 255) / 256, 65536);
        add_bias_kernel<<<blocks, 256, 0, stream>>>(out, bias, N, OC);
        cudaCheck(cudaGetLastError());
    }
}

// FP8 backward: dinp (N,C) = (q_dout · q_weight) / (s_dout s_weight)    (E5M2 × E4M3)
//               dweight (OC,C) += (q_doutᵀ · q_inp) / (s_dout s_inp)    (E5M2 × E4M3, FP32)
//               dbias (OC) += Σ_rows dout                                (from the unquantised dout)
// from the layouts the TN-only GEMMs take, written by the casts (quantize_transpose_fp8):
// dout_q (N,OC) and weight_qt = Wᵀ (C,OC) for dinp, dout_qt (OC,N) and inp_qt = Xᵀ (C,N) for dweight.
template <typename T>
void matmul_backward_fp8(T* dinp, float* dweight, float* dbias, const fp8e5m2* dout_q, const fp8e5m2* dout_qt,
                         const float* dout_inv_scale, const T* dout, const fp8e4m3* inp_qt, const float* inp_inv_scale,
                         const fp8e4m3* weight_qt, const float* weight_inv_scale, int N, int C, int OC,
                         cudaStream_t stream) {
    // every dimension is a reduction dimension (k) of one of the two GEMMs
    if (N % kFp8GemmMultiple != 0 || C % kFp8GemmMultiple != 0 || OC % kFp8GemmMultiple != 0) {
        fail("matmul_backward_fp8: N = %d, C = %d and OC = %d must be multiples of %d (Hopper FP8 GEMM alignment)", N,
             C, OC, kFp8GemmMultiple);
    }
    if (N <= 0) return;
    const float* s_dout = dout_inv_scale;
    const float* s_weight = weight_inv_scale;
    const float* s_inp = inp_inv_scale;
    const cudaDataType_t t = cuda_data_type<T>();
    bool fallback = false;
    if (dinp != nullptr) {
        fallback = !gemm("matmul_backward_fp8 (dinp)", stream, C, N, OC,
                         GemmOperand{weight_qt, CUDA_R_8F_E4M3, OC, true, s_weight},
                         GemmOperand{dout_q, CUDA_R_8F_E5M2, OC, false, s_dout}, dinp, t, C, 0.0f, nullptr, t,
                         /*fast_accum=*/false, {}, IfUnsupported::ReturnFalse);
    }
    if (dweight != nullptr && !fallback) {
        fallback = !gemm("matmul_backward_fp8 (dweight)", stream, C, OC, N,
                         GemmOperand{inp_qt, CUDA_R_8F_E4M3, N, true, s_inp},
                         GemmOperand{dout_qt, CUDA_R_8F_E5M2, N, false, s_dout}, dweight, CUDA_R_32F, C, 1.0f, nullptr,
                         CUDA_R_32F, /*fast_accum=*/false, {}, IfUnsupported::ReturnFalse);
        if (fallback && dinp != nullptr) {
            fail("matmul_backward_fp8: cuBLASLt ran the FP8 dinp GEMM but refuses the dweight one");
        }
    }
    // scratch: the widened operands of the fallback | dbias partial sums (column_sum_chunks(N), OC)
    using W = Fp8Widened<T>;
    const cudaDataType_t w_type = cuda_data_type<W>();
    ScratchLayout layout;
    const size_t wt_at = layout.add(fallback ? (size_t)C * OC * sizeof(W) : 0),
                 dy_at = layout.add(fallback ? (size_t)N * OC * sizeof(W) : 0),
                 dyt_at = layout.add(fallback ? (size_t)OC * N * sizeof(W) : 0),
                 xt_at = layout.add(fallback ? (size_t)C * N * sizeof(W) : 0),
                 partial_at = layout.add((size_t)column_sum_chunks(N) * OC * sizeof(float));
    void* base = scratch(layout.bytes, stream);
    if (fallback) {   // both GEMMs in 16 bits on the widened operands (nothing was written yet)
        note_fp8_fallback("backward");
        W* wt16 = at_offset<W>(base, wt_at);
        W* dy16 = at_offset<W>(base, dy_at);
        W* dyt16 = at_offset<W>(base, dyt_at);
        W* xt16 = at_offset<W>(base, xt_at);
        if (dinp != nullptr) {   // the TN shapes above, alpha = 1/s_dy · 1/s_w
            fp8_widen(wt16, weight_qt, (size_t)C * OC, stream);
            fp8_widen(dy16, dout_q, (size_t)N * OC, stream);
            gemm("matmul_backward_fp8 (dinp, 16-bit fallback)", stream, C, N, OC, GemmOperand{wt16, w_type, OC, true},
                 GemmOperand{dy16, w_type, OC, false}, dinp, t, C, 0.0f, nullptr, t, false, {}, IfUnsupported::Fail,
                 host_value(dout_inv_scale, stream) * host_value(weight_inv_scale, stream));
        }
        if (dweight != nullptr) {   // alpha = 1/s_dy · 1/s_x
            fp8_widen(xt16, inp_qt, (size_t)C * N, stream);
            fp8_widen(dyt16, dout_qt, (size_t)OC * N, stream);
            gemm("matmul_backward_fp8 (dweight, 16-bit fallback)", stream, C, OC, N, GemmOperand{xt16, w_type, N, true},
                 GemmOperand{dyt16, w_type, N, false}, dweight, CUDA_R_32F, C, 1.0f, nullptr, CUDA_R_32F, false, {},
                 IfUnsupported::Fail, host_value(dout_inv_scale, stream) * host_value(inp_inv_scale, stream));
        }
    }
    if (dbias != nullptr) add_column_sums(dbias, at_offset<float>(base, partial_at), dout, N, OC, stream);
}

}   // namespace train_gpt::cuda
