// gpt.cpp — the model's forward, backward and update, as calls into the Backend.
#include "model/gpt.h"

#include "model/epilogue_block_ops.h"

#include "precision/fp8_block_ops.h"
#include "rng.h"
#include "utils.h"

#include <cmath>
#include <cstring>

namespace train_gpt {

// Activations of one forward pass, sized for (max_B, max_T); per-layer tensors are (L, B, T, ·)
// with the B, T of the current call, so layer l of tensor x starts at x + l·B·T·width.
// `void*` buffers hold the activation dtype, `float*` ones FP32. kActivationTensors below gives
// every member's shape; sizes and pointers follow from it.
struct GPT::Activations {
    void* encoded;     // (B, T, C)
    void* ln1;         // (L, B, T, C)   none when qkv runs in FP8 (its layernorm writes E4M3 only)
    float* ln1_mean;   // (L, B, T)
    float* ln1_rstd;   // (L, B, T)
    void* qkv;         // (L, B, T, 3C)
    void* atty;        // (L, B, T, C)   attention output, before the projection
    float* att_lse;    // (L, B, NH, T)  softmax log-sum-exp per query row
    void* attproj;     // (B, T, C)      one layer's: the residual add consumes it at once
    void* residual2;   // (L, B, T, C)   after the attention branch
    void* ln2;         // (L, B, T, C)   none when fc runs in FP8
    float* ln2_mean;   // (L, B, T)
    float* ln2_rstd;   // (L, B, T)
    void* fch;         // (L, B, T, 4C)
    void* fch_gelu;    // (L, B, T, 4C)  none when fcproj runs in FP8 (GELU writes E4M3 only)
    void* fcproj;      // (B, T, C)      one layer's, as attproj
    void* residual3;   // (L, B, T, C)   after the MLP branch: the block's output
    void* lnf;         // (B, T, C)
    float* lnf_mean;   // (B, T)
    float* lnf_rstd;   // (B, T)
    void* logits;      // (⌈B·T / lm_head_chunks⌉, Vp)  overwritten by dlogits when training
    float* losses;     // (B, T)
    // backward scratch, reused by every layer
    void* dresidual;   // (B, T, C)   gradient of the residual stream, flows down through the layers
    void* dln;         // (B, T, C)   gradient of a layernorm output
    void* dqkv;        // (B, T, 3C)
    void* datty;       // (B, T, C)
    void* dfch;        // (B, T, 4C)
    void* dfch_gelu;   // (B, T, 4C)
    void* base;        // the one allocation everything above points into
};

namespace {

using A = GPT::Activations;

// One activation tensor: its member (in the activation dtype, or FP32), how many layers keep it,
// and its width per token.
struct ActivationTensor {
    void* A::*act;     // set for a tensor in the activation dtype
    float* A::*fp32;   // set for an FP32 one
    enum Layers { kOne, kEvery } layers;
    enum Width { kOneValue, kC, k3C, k4C, kNH, kVp } width;
    int unless_fp8 = -1;       // kEvery, but none at all when this block GEMM runs in FP8 (its input)
    int recomputed_from = 0;   // kEvery, but one layer's only from this --recompute level on (> 0)
};
constexpr ActivationTensor kActivationTensors[] = {
    {&A::encoded, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {&A::ln1, nullptr, ActivationTensor::kEvery, ActivationTensor::kC, kQkv, 2},
    {nullptr, &A::ln1_mean, ActivationTensor::kEvery, ActivationTensor::kOneValue},
    {nullptr, &A::ln1_rstd, ActivationTensor::kEvery, ActivationTensor::kOneValue},
    {&A::qkv, nullptr, ActivationTensor::kEvery, ActivationTensor::k3C},
    {&A::atty, nullptr, ActivationTensor::kEvery, ActivationTensor::kC},
    {nullptr, &A::att_lse, ActivationTensor::kEvery, ActivationTensor::kNH},
    {&A::attproj, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {&A::residual2, nullptr, ActivationTensor::kEvery, ActivationTensor::kC},
    {&A::ln2, nullptr, ActivationTensor::kEvery, ActivationTensor::kC, kFc, 2},
    {nullptr, &A::ln2_mean, ActivationTensor::kEvery, ActivationTensor::kOneValue},
    {nullptr, &A::ln2_rstd, ActivationTensor::kEvery, ActivationTensor::kOneValue},
    {&A::fch, nullptr, ActivationTensor::kEvery, ActivationTensor::k4C},
    {&A::fch_gelu, nullptr, ActivationTensor::kEvery, ActivationTensor::k4C, kFcproj, 1},
    {&A::fcproj, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {&A::residual3, nullptr, ActivationTensor::kEvery, ActivationTensor::kC},
    {&A::lnf, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {nullptr, &A::lnf_mean, ActivationTensor::kOne, ActivationTensor::kOneValue},
    {nullptr, &A::lnf_rstd, ActivationTensor::kOne, ActivationTensor::kOneValue},
    {&A::logits, nullptr, ActivationTensor::kOne, ActivationTensor::kVp},
    {nullptr, &A::losses, ActivationTensor::kOne, ActivationTensor::kOneValue},
    {&A::dresidual, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {&A::dln, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {&A::dqkv, nullptr, ActivationTensor::kOne, ActivationTensor::k3C},
    {&A::datty, nullptr, ActivationTensor::kOne, ActivationTensor::kC},
    {&A::dfch, nullptr, ActivationTensor::kOne, ActivationTensor::k4C},
    {&A::dfch_gelu, nullptr, ActivationTensor::kOne, ActivationTensor::k4C},
};

size_t aligned64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Rows of the logits buffer: one chunk's tokens.
size_t logits_rows(size_t tokens, int lm_head_chunks) { return (tokens + lm_head_chunks - 1) / lm_head_chunks; }

// Bytes of tensor t for `tokens` tokens (64-byte aligned).
size_t activation_tensor_bytes(const ActivationTensor& t, const GPTConfig& cfg, size_t tokens,
                               const PrecisionConfig& prec, int recompute, int lm_head_chunks) {
    size_t width = 1;
    switch (t.width) {
        case ActivationTensor::kOneValue: width = 1; break;
        case ActivationTensor::kC: width = cfg.n_embd; break;
        case ActivationTensor::k3C: width = 3 * (size_t)cfg.n_embd; break;
        case ActivationTensor::k4C: width = 4 * (size_t)cfg.n_embd; break;
        case ActivationTensor::kNH: width = cfg.n_head; break;
        case ActivationTensor::kVp: width = cfg.padded_vocab_size; break;
    }
    if (t.act == &A::logits) tokens = logits_rows(tokens, lm_head_chunks);
    size_t layers = t.layers == ActivationTensor::kOne ? 1 : cfg.n_layer;
    if (t.recomputed_from > 0 && recompute >= t.recomputed_from) layers = 1;
    if (t.unless_fp8 >= 0 && gemm_runs_in_fp8(prec, t.unless_fp8)) layers = 0;
    const size_t value_bytes = t.act != nullptr ? dtype_size(activation_dtype(prec.precision)) : sizeof(float);
    return aligned64(layers * tokens * width * value_bytes);
}

size_t activations_bytes(const GPTConfig& cfg, size_t tokens, const PrecisionConfig& prec, int recompute,
                         int lm_head_chunks) {
    size_t total = 0;
    for (const ActivationTensor& t : kActivationTensors) {
        total += activation_tensor_bytes(t, cfg, tokens, prec, recompute, lm_head_chunks);
    }
    return total;
}

}   // namespace

size_t GPT::activation_bytes_for(const GPTConfig& cfg, int B, int T, const PrecisionConfig& precision, int recompute,
                                 int lm_head_chunks) {
    const size_t tokens = (size_t)B * T;
    size_t total = activations_bytes(cfg, tokens, precision, recompute, lm_head_chunks);
    if (precision.precision == Precision::FP8) {
        total += Fp8State::activation_bytes_for(cfg, tokens, precision.fp8.gemms, recompute);
    }
    return total;
}

GPT::GPT(const GPTConfig& cfg, Backend& backend, int max_B, int max_T, const PrecisionConfig& precision, Comm* comm,
         int zero, int recompute, int lm_head_chunks, bool gemm_epilogues)
    : cfg_(cfg),
      k_(backend),
      max_B_(max_B),
      max_T_(max_T),
      prec_(precision),
      act_size_(dtype_size(backend.act_dtype())),
      param_offsets_(param_tensor_offsets(cfg)),
      comm_(comm),
      recompute_(recompute),
      lm_head_chunks_(lm_head_chunks) {
    if (recompute < 0 || recompute > 2) fail("--recompute %d: expected 0, 1 or 2", recompute);
    if (lm_head_chunks < 1) fail("--lm-head-chunks %d: expected at least 1", lm_head_chunks);
    if (gemm_epilogues && (precision.precision == Precision::FP8 || precision.precision == Precision::TF32)) {
        fail("--gemm-epilogues: for fp32, bf16 and fp16 (%s has GEMMs of its own)",
             precision_name(precision.precision));
    }
    if (gemm_epilogues && recompute != 0) {
        fail(
            "--gemm-epilogues with --recompute %d: the GELU output computed again from the kept fch would differ "
            "from the epilogue's by a rounding; use --recompute 0",
            recompute);
    }
    if (max_T > cfg.max_seq_len) {
        fail("sequence length %d exceeds the model's position table (%d)", max_T, cfg.max_seq_len);
    }
    if (backend.act_dtype() != activation_dtype(precision.precision)) {
        fail("precision %s needs a %s kernel set, got %s", precision_name(precision.precision),
             dtype_name(activation_dtype(precision.precision)), dtype_name(backend.act_dtype()));
    }
    num_params_ = param_offsets_[kNumParamTensors];
    if (zero != 0 && zero != 1) fail("--zero %d: expected 0 or 1", zero);
    // FP8 GEMMs reduce over C (and 4C); the kernel set says which multiple its FP8 GEMMs need.
    // (Checked before anything is allocated.)
    const int fp8_multiple = precision.precision == Precision::FP8 ? fp8_ops_of(backend).fp8_gemm_multiple() : 1;
    if (precision.precision == Precision::FP8 && prec_.fp8.gemms != 0 && cfg.n_embd % fp8_multiple != 0) {
        fail("fp8 on %s: n_embd %d must be a multiple of %d (FP8 tensor-core GEMMs); use bf16 for this width",
             backend.name().c_str(), cfg.n_embd, fp8_multiple);
    }
    world_ = comm != nullptr ? comm->world_size() : 1;
    rank_ = comm != nullptr ? comm->rank() : 0;
    sharded_ = zero == 1 && world_ > 1;
    padded_params_ = (num_params_ + world_ - 1) / world_ * world_;   // every rank's slice equally long
    const size_t slice = padded_params_ / world_;
    state_begin_ = sharded_ ? rank_ * slice : 0;
    state_len_ = sharded_ ? std::min(slice, num_params_ - std::min(num_params_, state_begin_)) : num_params_;
    const size_t state_alloc = sharded_ ? slice : num_params_;
    params_ = k_.alloc(padded_params_ * act_size_);
    if (activation_dtype(precision.precision) != DType::F32 && precision.master_weights) {   // 16-bit weights
        master_ = static_cast<float*>(k_.alloc(state_alloc * sizeof(float)));
    }
    grads_ = static_cast<float*>(k_.alloc(padded_params_ * sizeof(float)));
    if (sharded_) grad_shard_ = static_cast<float*>(k_.alloc(slice * sizeof(float)));
    adam_m_ = static_cast<float*>(k_.alloc(state_alloc * sizeof(float)));
    adam_v_ = static_cast<float*>(k_.alloc(state_alloc * sizeof(float)));

    // the activations: one allocation, carved in the order of kActivationTensors
    const size_t tokens = (size_t)max_B * max_T;
    acts_ = std::make_unique<Activations>();
    activation_bytes_ = activations_bytes(cfg, tokens, precision, recompute, lm_head_chunks);
    acts_->base = k_.alloc(activation_bytes_);
    char* p = static_cast<char*>(acts_->base);
    for (const ActivationTensor& t : kActivationTensors) {
        if (t.act != nullptr)
            (*acts_).*t.act = p;
        else
            (*acts_).*t.fp32 = reinterpret_cast<float*>(p);
        p += activation_tensor_bytes(t, cfg, tokens, precision, recompute, lm_head_chunks);
    }
    inputs_ = static_cast<int32_t*>(k_.alloc(tokens * sizeof(int32_t)));
    targets_ = static_cast<int32_t*>(k_.alloc(tokens * sizeof(int32_t)));

    tensors_ = ModelTensors{cfg, params_, grads_, param_offsets_, act_size_};
    if (precision.precision == Precision::FP8) {
        fp8_ = std::make_unique<Fp8State>(cfg, backend, precision.fp8, params_, max_B, max_T, comm, recompute);
        activation_bytes_ += fp8_->activation_bytes();
        ops_ = std::make_unique<Fp8BlockOps>(backend, tensors_, recompute, *fp8_);
    } else if (gemm_epilogues) {
        ops_ = std::make_unique<EpilogueBlockOps>(backend, tensors_);
    } else {
        ops_ = std::make_unique<BlockOps>(backend, tensors_, recompute);
    }
}

GPT::~GPT() {
    ops_.reset();
    fp8_.reset();
    k_.release(params_);
    if (master_ != nullptr) k_.release(master_);
    k_.release(grads_);
    k_.release(adam_m_);
    k_.release(adam_v_);
    if (grad_shard_ != nullptr) k_.release(grad_shard_);
    k_.release(acts_->base);
    k_.release(inputs_);
    k_.release(targets_);
}

void GPT::init_weights(uint64_t seed) {
    // GPT-2's init. Each tensor is filled in chunks of 2^20 values, chunk c of tensor i from its own
    // generator seeded by splitmix64(seed, i, c): the same weights for any number of threads, and
    // a 1.5B-parameter model initialises in seconds rather than a minute and a half serially.
    std::vector<float> host(num_params_, 0.0f);
    const size_t C = cfg_.n_embd;
    const double std_default = 0.02;
    const double std_residual = 0.02 / std::sqrt(2.0 * cfg_.n_layer);   // GPT-2: scale residual projections
    auto sizes = param_tensor_sizes(cfg_);
    constexpr size_t kChunk = size_t(1) << 20;
    struct Job {
        int tensor;
        size_t begin, end;
        double std;
    };
    std::vector<Job> jobs;
    for (int i = 0; i < kNumParamTensors; i++) {
        size_t n = sizes[i];
        double std = 0.0;
        switch (i) {
            case kWte:
                n = (size_t)cfg_.vocab_size * C;
                std = std_default;
                break;   // padding rows stay 0
            case kWpe:
            case kQkvw:
            case kFcw: std = std_default; break;
            case kAttprojw:
            case kFcprojw: std = std_residual; break;
            case kLn1w:
            case kLn2w:
            case kLnfw: std::fill_n(host.data() + param_offsets_[i], n, 1.0f); continue;
            default: continue;   // biases: 0
        }
        for (size_t b = 0; b < n; b += kChunk)
            jobs.push_back({i, b, std::min(n, b + kChunk), std});
    }
    auto splitmix64 = [](uint64_t x) {
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
    };
#pragma omp parallel for schedule(dynamic)
    for (size_t j = 0; j < jobs.size(); j++) {
        const Job& job = jobs[j];
        Rng rng(splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t)job.tensor) ^ (job.begin / kChunk)));
        float* t = host.data() + param_offsets_[job.tensor];
        for (size_t k = job.begin; k < job.end; k++)
            t[k] = (float)(job.std * rng.normal());
    }
    set_weights(host);
}

void GPT::set_weights(const std::vector<float>& host) {
    if (host.size() != num_params_) {
        fail("weights have %zu values, the model has %zu", host.size(), num_params_);
    }
    float* staging = static_cast<float*>(k_.alloc(num_params_ * sizeof(float)));
    k_.copy_to_device(staging, host.data(), num_params_ * sizeof(float));
    k_.float_to_act(params_, staging, num_params_);   // working weights: round(master)
    k_.release(staging);
    if (master_ != nullptr) {
        k_.copy_to_device(master_, host.data() + state_begin_, state_len_ * sizeof(float));
    }
    k_.zero(adam_m_, state_len_ * sizeof(float));
    k_.zero(adam_v_, state_len_ * sizeof(float));
    ops_->weights_changed();
}

std::vector<float> GPT::weights() const {
    // the FP32 masters when there are any (gathered from every rank under ZeRO-1), else the
    // working weights widened
    std::vector<float> host(num_params_);
    if (master_ != nullptr && !sharded_) {
        k_.copy_to_host(host.data(), master_, num_params_ * sizeof(float));
        return host;
    }
    float* full = static_cast<float*>(k_.alloc(padded_params_ * sizeof(float)));
    if (master_ == nullptr) {
        k_.act_to_float(full, params_, num_params_);
    } else {
        const size_t slice = padded_params_ / world_;
        std::vector<float> mine(slice, 0.0f);
        k_.copy_to_host(mine.data(), master_, state_len_ * sizeof(float));
        k_.copy_to_device(full + state_begin_, mine.data(), slice * sizeof(float));
        comm_->all_gather(full, full + state_begin_, slice * sizeof(float));
    }
    k_.copy_to_host(host.data(), full, num_params_ * sizeof(float));
    k_.release(full);
    return host;
}

std::vector<float> GPT::gradients() const {
    std::vector<float> host(num_params_);
    k_.copy_to_host(host.data(), grads_, num_params_ * sizeof(float));
    return host;
}

// Layer l's activations, for N = B·T rows (shapes for (B, T)). A tensor that --recompute keeps for
// one layer only (the layernorm outputs from level 2, GELU's from level 1) is every layer's in the
// one slot; one that only an FP8 GEMM would read (fp8 mode) has no bytes.
struct GPT::LayerActivations {
    const void* residual;   // (B,T,C)   the block's input: the embeddings, or the block before's output
    LayernormInput ln1;     // (B,T,C)   ln1(residual), qkv's input
    void* qkv;              // (B,T,3C)
    void* atty;             // (B,T,C)   attention output, before the projection
    float* lse;             // (B,NH,T)  softmax log-sum-exp per query row
    void* residual2;        // (B,T,C)   after the attention branch
    LayernormInput ln2;     // (B,T,C)   ln2(residual2), fc's input
    void* fch;              // (B,T,4C)
    void* fch_gelu;         // (B,T,4C)  gelu(fch), fcproj's input
    void* residual3;        // (B,T,C)   after the MLP branch: the block's output
};

GPT::LayerActivations GPT::layer(int l, int N) const {
    const Activations& a = *acts_;
    const size_t C = cfg_.n_embd, NC = (size_t)N * C, rows = (size_t)l * N;
    auto kept = [&](int recomputed_from) { return (size_t)(recompute_ >= recomputed_from ? 0 : l); };
    LayerActivations x;
    x.residual = l == 0 ? a.encoded : act_at(a.residual3, (l - 1) * NC);
    x.ln1 = {x.residual,          act_at(a.ln1, kept(2) * NC), a.ln1_mean + rows,   a.ln1_rstd + rows,
             param(kLn1w, l * C), param(kLn1b, l * C),         grad(kLn1w) + l * C, grad(kLn1b) + l * C};
    x.qkv = act_at(a.qkv, l * NC * 3);
    x.atty = act_at(a.atty, l * NC);
    x.lse = a.att_lse + rows * cfg_.n_head;
    x.residual2 = act_at(a.residual2, l * NC);
    x.ln2 = {x.residual2,         act_at(a.ln2, kept(2) * NC), a.ln2_mean + rows,   a.ln2_rstd + rows,
             param(kLn2w, l * C), param(kLn2b, l * C),         grad(kLn2w) + l * C, grad(kLn2b) + l * C};
    x.fch = act_at(a.fch, l * NC * 4);
    x.fch_gelu = act_at(a.fch_gelu, kept(1) * NC * 4);
    x.residual3 = act_at(a.residual3, l * NC);
    return x;
}

// lnf(the last block's output), the LM head's input
LayernormInput GPT::lnf_input(int N) const {
    const Activations& a = *acts_;
    return {act_at(a.residual3, (size_t)(cfg_.n_layer - 1) * N * cfg_.n_embd),
            a.lnf,
            a.lnf_mean,
            a.lnf_rstd,
            param(kLnfw),
            param(kLnfb),
            grad(kLnfw),
            grad(kLnfb)};
}

float GPT::forward(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss) {
    if (B < 1 || B > max_B_ || T < 1 || T > max_T_) {
        fail("forward(B=%d, T=%d) outside the allocated (%d, %d)", B, T, max_B_, max_T_);
    }
    const int L = cfg_.n_layer, C = cfg_.n_embd;
    const int Vp = cfg_.padded_vocab_size;
    const int N = B * T;
    Activations& a = *acts_;
    // the micro-batch's tokens and targets, up front (on a GPU: queued, no wait)
    k_.copy_to_device(inputs_, inputs, (size_t)N * sizeof(int32_t));
    if (targets != nullptr) k_.copy_to_device(targets_, targets, (size_t)N * sizeof(int32_t));
    ops_->begin_forward(B, T, /*training=*/targets != nullptr && dloss != 0.0f);   // backward() follows training

    k_.encoder_forward(a.encoded, inputs_, param(kWte), param(kWpe), B, T, C);
    // a block's first layernorm (ln1) is done by the residual add that ends the block before it; the
    // first block's here
    ops_->layernorm_forward(kQkv, layer(0, N).ln1, N);
    for (int l = 0; l < L; l++) {
        const LayerActivations x = layer(l, N);
        // attention branch: residual2 = residual + attproj(attention(qkv(ln1(residual))))
        ops_->layernorm_matmul_forward(l, kQkv, x.qkv, x.ln1, N);
        ops_->attention_forward(l, x.atty, x.lse, x.qkv, B, T);
        ops_->matmul_forward(l, kAttproj, a.attproj, x.atty, N);
        ops_->residual_layernorm_forward(kFc, x.residual2, x.residual, a.attproj, x.ln2, N);
        // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        ops_->layernorm_matmul_forward(l, kFc, x.fch, x.ln2, N);
        ops_->gelu_matmul_forward(l, kFcproj, a.fcproj, x.fch_gelu, x.fch, N);
        // the block's output, and the next layernorm of it: the next block's ln1, or lnf (the head's input)
        if (l + 1 < L) {
            ops_->residual_layernorm_forward(kQkv, x.residual3, x.residual2, a.fcproj, layer(l + 1, N).ln1, N);
        } else {
            ops_->residual_layernorm_forward(kNoBlockGemm, x.residual3, x.residual2, a.fcproj, lnf_input(N), N);
        }
    }
    last_B_ = B;
    last_T_ = T;
    have_dlogits_ = false;
    if (targets == nullptr) {   // the logits alone (sampling, logits_at); none are kept in chunks
        if (lm_head_chunks_ == 1) k_.matmul_forward(a.logits, a.lnf, param(kWte), nullptr, N, C, Vp);
        return 0.0f;
    }
    lm_head(N, dloss);
    have_dlogits_ = dloss != 0.0f;
    token_losses_.resize(N);
    k_.copy_to_host(token_losses_.data(), a.losses, (size_t)N * sizeof(float));
    double sum = 0;
    for (float x : token_losses_)
        sum += x;
    return (float)(sum / N);
}

// The tied LM head and the cross-entropy over N tokens, in lm_head_chunks_ chunks of at most R rows
// (one chunk of N rows by default) through the one (R, Vp) logits buffer: per chunk, logits =
// lnf · wteᵀ, the fused classifier (losses; dlogits in place when dloss != 0), and then at once the
// head's backward, which needs this chunk's dlogits: dln (rows of the chunk) = dlogits · wte, wte's
// gradient += dlogitsᵀ · lnf.
void GPT::lm_head(int N, float dloss) {
    Activations& a = *acts_;
    const int C = cfg_.n_embd, V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
    const int R = (int)((N + lm_head_chunks_ - 1) / lm_head_chunks_);
    for (int r0 = 0; r0 < N; r0 += R) {
        const int rows = std::min(R, N - r0);
        const void* lnf = act_at(a.lnf, (size_t)r0 * C);                       // (rows, C)
        k_.matmul_forward(a.logits, lnf, param(kWte), nullptr, rows, C, Vp);   // (rows, Vp)
        k_.fused_classifier(dloss != 0.0f ? a.logits : nullptr, a.losses + r0, a.logits, targets_ + r0, rows, V, Vp,
                            dloss);
        if (dloss != 0.0f) {
            k_.matmul_backward(act_at(a.dln, (size_t)r0 * C), grad(kWte), nullptr, a.logits, lnf, param(kWte), rows, C,
                               Vp);
        }
    }
}

void GPT::backward() {
    if (!have_dlogits_) fail("backward() needs a forward() with targets and a non-zero dloss first");
    have_dlogits_ = false;
    const int B = last_B_, T = last_T_;
    const int L = cfg_.n_layer, C = cfg_.n_embd;
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    Activations& a = *acts_;

    // dresidual is the gradient of the residual stream: lnf's backward adds into it, then each
    // block (top to bottom) adds its two branches' input gradients through its layernorms'
    // backward, and the embeddings read it. The other gradient buffers are overwritten by the op
    // that produces them (backend.h), so this is the one zero fill of a backward.
    // Each layernorm's backward also sums its output gradient — the residual stream's — over the
    // rows: that is the bias gradient of the projection (fcproj, attproj) whose output gradient it
    // is, so those two GEMMs' backward computes no bias gradient of its own.
    k_.zero(a.dresidual, NC * act_size_);
    // (the head's backward ran in forward: dln = dlogits · wte, wte's gradient += dlogitsᵀ · lnf)
    ops_->layernorm_backward(L - 1, kFcproj, a.dresidual, a.dln, lnf_input(N), N);

    for (int l = L - 1; l >= 0; l--) {
        const LayerActivations x = layer(l, N);
        // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        ops_->gelu_matmul_backward(l, kFcproj, a.dfch_gelu, a.dresidual, x.fch_gelu, x.fch, N);
        ops_->gelu_backward_layernorm_matmul_backward(l, kFc, a.dln, a.dfch, a.dfch_gelu, x.fch, x.ln2, N);
        ops_->layernorm_backward(l, kAttproj, a.dresidual, a.dln, x.ln2, N);
        // attention branch: residual2 = residual + attproj(attention(qkv(ln1(residual))))
        ops_->matmul_backward(l, kAttproj, a.datty, a.dresidual, x.atty, N);
        ops_->attention_backward(l, a.dqkv, a.datty, x.qkv, x.atty, x.lse, B, T);
        ops_->layernorm_matmul_backward(l, kQkv, a.dln, a.dqkv, x.ln1, N);
        ops_->layernorm_backward(l - 1, kFcproj, a.dresidual, a.dln, x.ln1, N);
    }
    k_.encoder_backward(grad(kWte), grad(kWpe), a.dresidual, inputs_, B, T, C);
}

void GPT::zero_grad() { k_.zero(grads_, padded_params_ * sizeof(float)); }

void GPT::reduce_gradients() {
    if (world_ == 1) return;
    if (sharded_) {
        comm_->reduce_scatter_sum(grad_shard_, grads_, padded_params_ / world_);
    } else {
        comm_->all_reduce_sum(grads_, padded_params_);
    }
}

double GPT::gradient_norm() {
    // the summed gradient's norm over ranks; the mean's is 1/W of it
    double sum =
        sharded_ ? comm_->all_reduce_sum(k_.sum_squares(grad_shard_, state_len_)) : k_.sum_squares(grads_, num_params_);
    return std::sqrt(sum) / world_;
}

void GPT::update(float lr, const AdamWConfig& opt, float grad_scale, int t) {
    grad_scale /= world_;   // the gradients are sums over ranks: apply their mean
    ops_->begin_update();
    const float* g = sharded_ ? grad_shard_ : grads_;
    const size_t state_end = state_begin_ + state_len_;
    for (int i = 0; i < kNumParamTensors; i++) {
        // the part of tensor i in this rank's slice (all of it without ZeRO-1)
        const size_t begin = std::max(param_offsets_[i], state_begin_);
        const size_t end = std::min(param_offsets_[i + 1], state_end);
        if (begin >= end) continue;
        const size_t local = begin - state_begin_;
        const float wd = param_tensor_decays(i) ? opt.weight_decay : 0.0f;
        float* master = master_ != nullptr ? master_ + local : nullptr;
        ops_->adamw_update(i, /*whole=*/!sharded_, master, act_at(params_, begin), adam_m_ + local, adam_v_ + local,
                           g + local, end - begin, lr, opt.beta1, opt.beta2, opt.eps, wd, grad_scale, t);
    }
    if (sharded_) {   // every rank's updated slice of the working weights to every rank
        comm_->all_gather(params_, act_at(params_, state_begin_), padded_params_ / world_ * act_size_);
    }
    ops_->weights_changed();
}

void GPT::discard_step() { ops_->discard_step(); }

std::vector<float> GPT::optimizer_state(const std::string& which) const {
    std::vector<float> out(state_len_);
    if (which == "m" || which == "v") {
        k_.copy_to_host(out.data(), which == "m" ? adam_m_ : adam_v_, state_len_ * sizeof(float));
    } else if (which == "master") {
        if (master_ != nullptr) {
            k_.copy_to_host(out.data(), master_, state_len_ * sizeof(float));
        } else {   // fp32, or no masters: the working weights are the weights
            float* staging = static_cast<float*>(k_.alloc(state_len_ * sizeof(float)));
            k_.act_to_float(staging, act_at(params_, state_begin_), state_len_);
            k_.copy_to_host(out.data(), staging, state_len_ * sizeof(float));
            k_.release(staging);
        }
    } else {
        fail("no optimizer state '%s' (master, m or v)", which.c_str());
    }
    return out;
}

GPT::StateShare GPT::checkpoint_share() const {
    StateShare share;
    share.master = optimizer_state("master");
    share.m = optimizer_state("m");
    share.v = optimizer_state("v");
    share.begin = state_begin_;
    if (!sharded_ && world_ > 1) {   // replicated: rank r writes the r-th of W shares
        const size_t n = state_len_, per_rank = (n + world_ - 1) / world_;
        const size_t offset = std::min(n, per_rank * rank_), count = std::min(n - offset, per_rank);
        for (std::vector<float>* v : {&share.master, &share.m, &share.v}) {
            *v = std::vector<float>(v->begin() + offset, v->begin() + offset + count);
        }
        share.begin = offset;
    }
    return share;
}

void GPT::restore_optimizer_state(const std::vector<float>& master, const std::vector<float>& m,
                                  const std::vector<float>& v) {
    if (master.size() != state_len_ || m.size() != state_len_ || v.size() != state_len_) {
        fail("optimizer state of %zu/%zu/%zu values for a slice of %zu", master.size(), m.size(), v.size(), state_len_);
    }
    k_.copy_to_device(adam_m_, m.data(), state_len_ * sizeof(float));
    k_.copy_to_device(adam_v_, v.data(), state_len_ * sizeof(float));
    if (master_ != nullptr) k_.copy_to_device(master_, master.data(), state_len_ * sizeof(float));
    float* staging = static_cast<float*>(k_.alloc(state_len_ * sizeof(float)));
    k_.copy_to_device(staging, master.data(), state_len_ * sizeof(float));
    k_.float_to_act(act_at(params_, state_begin_), staging, state_len_);   // working = round(master)
    k_.release(staging);
    if (sharded_) comm_->all_gather(params_, act_at(params_, state_begin_), padded_params_ / world_ * act_size_);
    ops_->weights_changed();
}

std::string GPT::fp8_state_json() const { return fp8_ ? fp8_->to_json() : "[]"; }

void GPT::restore_fp8_state(const std::string& json, double dy_factor) {
    if (fp8_) fp8_->restore_json(json, dy_factor);
}

std::vector<float> GPT::logits_at(int b, int t) const {
    if (b >= last_B_ || t >= last_T_) fail("logits_at(%d, %d) outside the last forward", b, t);
    if (lm_head_chunks_ != 1) fail("logits_at: with --lm-head-chunks %d no logits are kept", lm_head_chunks_);
    const size_t V = cfg_.vocab_size;
    float* staging = static_cast<float*>(k_.alloc(V * sizeof(float)));
    k_.act_to_float(staging, act_at(acts_->logits, ((size_t)b * last_T_ + t) * cfg_.padded_vocab_size), V);
    std::vector<float> row(V);
    k_.copy_to_host(row.data(), staging, V * sizeof(float));
    k_.release(staging);
    return row;
}

}   // namespace train_gpt
