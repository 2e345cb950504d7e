// gpt.cpp — the model's forward, backward and update, as calls into the Backend.
#include "model/gpt.h"

#include "rng.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

namespace train_gpt {

int pad_vocab(int vocab_size) { return (vocab_size + 127) / 128 * 128; }

GPTConfig gpt_config_from_spec(const std::string& spec, int vocab_size, int max_seq_len,
                               int n_embd_override, int n_head_override) {
    if (spec.size() < 2 || spec[0] != 'd' || spec.find_first_not_of("0123456789", 1) != std::string::npos) {
        fail("model spec '%s' is not of the form dN (e.g. d12 for GPT-2 124M)", spec.c_str());
    }
    GPTConfig cfg;
    cfg.n_layer = std::stoi(spec.substr(1));
    if (cfg.n_layer < 1 || cfg.n_layer > 1024) fail("model spec '%s': depth must be in 1..1024", spec.c_str());
    switch (cfg.n_layer) {   // GPT-2 small / medium / large / XL
        case 12: cfg.n_embd = 768;  cfg.n_head = 12; break;
        case 24: cfg.n_embd = 1024; cfg.n_head = 16; break;
        case 36: cfg.n_embd = 1280; cfg.n_head = 20; break;
        case 48: cfg.n_embd = 1600; cfg.n_head = 25; break;
        default: cfg.n_embd = 64 * cfg.n_layer; cfg.n_head = cfg.n_layer; break;
    }
    if (n_embd_override > 0) cfg.n_embd = n_embd_override;
    if (n_head_override > 0) cfg.n_head = n_head_override;
    if (cfg.n_embd % cfg.n_head != 0) {
        fail("n_embd %d is not divisible by n_head %d", cfg.n_embd, cfg.n_head);
    }
    if (vocab_size < 2) fail("vocab size %d is too small", vocab_size);
    if (max_seq_len < 1) fail("max sequence length %d must be positive", max_seq_len);
    cfg.vocab_size = vocab_size;
    cfg.padded_vocab_size = pad_vocab(vocab_size);
    cfg.max_seq_len = max_seq_len;
    return cfg;
}

const char* param_tensor_name(int i) {
    static const char* names[kNumParamTensors] = {
        "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
        "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
    return names[i];
}

bool param_tensor_decays(int i) {
    return i == kWte || i == kWpe || i == kQkvw || i == kAttprojw || i == kFcw || i == kFcprojw;
}

std::vector<int> param_tensor_shape(const GPTConfig& cfg, int i) {
    const int L = cfg.n_layer, C = cfg.n_embd;
    switch (i) {
        case kWte: return {cfg.padded_vocab_size, C};
        case kWpe: return {cfg.max_seq_len, C};
        case kLn1w: case kLn1b: case kLn2w: case kLn2b: case kAttprojb: case kFcprojb: return {L, C};
        case kQkvw: return {L, 3 * C, C};
        case kQkvb: return {L, 3 * C};
        case kAttprojw: return {L, C, C};
        case kFcw: return {L, 4 * C, C};
        case kFcb: return {L, 4 * C};
        case kFcprojw: return {L, C, 4 * C};
        case kLnfw: case kLnfb: return {C};
    }
    fail("no parameter tensor %d", i);
}

std::array<size_t, kNumParamTensors> param_tensor_sizes(const GPTConfig& cfg) {
    std::array<size_t, kNumParamTensors> sizes{};
    for (int i = 0; i < kNumParamTensors; i++) {
        size_t n = 1;
        for (int d : param_tensor_shape(cfg, i)) n *= (size_t)d;
        sizes[i] = n;
    }
    return sizes;
}

// Activations of one forward pass, sized for (max_B, max_T); per-layer tensors are (L, B, T, ·)
// with the B, T of the current call, so layer l of tensor x starts at x + l·B·T·width.
// `void*` buffers hold the activation dtype, `float*` ones FP32.
// Kept for one layer only (every layer writes the same buffer) where backward never reads them:
// the projections' outputs attproj and fcproj (consumed by the residual adds at once). The inputs
// ln1, ln2, fch_gelu of a GEMM that runs in FP8 (qkv, fc, fcproj) are never written at all: the
// FP8 cast is fused into their producer (layernorm, GELU), which writes E4M3 only: Lk = 0 then,
// else L.
struct GPT::Activations {
    void* encoded;      // (B, T, C)
    void* ln1;          // (Lk, B, T, C)   Lk: see above
    float* ln1_mean;    // (L, B, T)
    float* ln1_rstd;    // (L, B, T)
    void* qkv;          // (L, B, T, 3C)
    void* atty;         // (L, B, T, C)   attention output, before the projection
    float* att_lse;     // (L, B, NH, T)  softmax log-sum-exp per query row
    void* attproj;      // (1, B, T, C)
    void* residual2;    // (L, B, T, C)   after the attention branch
    void* ln2;          // (Lk, B, T, C)
    float* ln2_mean;    // (L, B, T)
    float* ln2_rstd;    // (L, B, T)
    void* fch;          // (L, B, T, 4C)
    void* fch_gelu;     // (Lk, B, T, 4C)
    void* fcproj;       // (1, B, T, C)
    void* residual3;    // (L, B, T, C)   after the MLP branch: the block's output
    void* lnf;          // (B, T, C)
    float* lnf_mean;    // (B, T)
    float* lnf_rstd;    // (B, T)
    void* logits;       // (B, T, Vp)     overwritten by dlogits when training
    float* losses;      // (B, T)
    // backward scratch, reused by every layer
    void* dresidual;    // (B, T, C)   gradient of the residual stream, flows down through the layers
    void* dln;          // (B, T, C)   gradient of a layernorm output
    void* dqkv;         // (B, T, 3C)
    void* datty;        // (B, T, C)
    void* dfch;         // (B, T, 4C)
    void* dfch_gelu;    // (B, T, 4C)
    void* base;         // the one allocation everything above points into
};


namespace {
// parameter tensors, output and input widths (in units of C) of each FP8 GEMM of a block
constexpr int kGemmWeight[] = {kQkvw, kAttprojw, kFcw, kFcprojw};
constexpr int kGemmBias[] = {kQkvb, kAttprojb, kFcb, kFcprojb};
constexpr int kGemmOut[] = {3, 1, 4, 1};
constexpr int kGemmIn[] = {1, 1, 1, 4};
constexpr const char* kGemmName[] = {"qkv", "attproj", "fc", "fcproj"};


// Where the backward of FP8 GEMM g finds the E4M3 Xᵀ its weight gradient reads. qkv and fc (X =
// a layernorm output): the forward's cast writes it and it is kept, one per layer. attproj (X =
// the attention output) and fcproj (X = gelu(fch)): the backward casts it again from atty / fch,
// which it keeps anyway for attention and GELU backward. The cast is deterministic and the scale
// has not changed since the forward, so it is the same Xᵀ, bit for bit, at the price of one
// elementwise pass instead of 1 + 4 bytes per token and channel of every layer.
bool fp8_keeps_input_t(int g) { return g == 0 /* qkv */ || g == 2 /* fc */; }

size_t aligned64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Bytes of every Activations tensor for BT tokens, in the order of its members (64-byte aligned).
std::vector<size_t> activation_tensor_bytes(const GPTConfig& cfg, size_t BT, const PrecisionConfig& prec) {
    const size_t L = cfg.n_layer, C = cfg.n_embd, NH = cfg.n_head, Vp = cfg.padded_vocab_size;
    const size_t A = dtype_size(activation_dtype(prec.precision)), F = sizeof(float);
    // layers of the GEMM inputs ln1, ln2, fch_gelu (see Activations)
    const size_t Lk1 = GPT::runs_in_fp8(prec, 0) ? 0 : L, Lk2 = GPT::runs_in_fp8(prec, 2) ? 0 : L;
    const size_t Lkg = GPT::runs_in_fp8(prec, 3) ? 0 : L;
    const std::array<size_t, 2> elements_and_size[] = {
        {BT * C, A},      {Lk1 * BT * C, A},  {L * BT, F},      {L * BT, F},       {L * BT * 3 * C, A},
        {L * BT * C, A},  {L * BT * NH, F},   {BT * C, A},      {L * BT * C, A},   {Lk2 * BT * C, A},
        {L * BT, F},      {L * BT, F},        {L * BT * 4 * C, A}, {Lkg * BT * 4 * C, A}, {BT * C, A},
        {L * BT * C, A},  {BT * C, A},        {BT, F},          {BT, F},           {BT * Vp, A},
        {BT, F},          {BT * C, A},        {BT * C, A},      {BT * 3 * C, A},   {BT * C, A},
        {BT * 4 * C, A},  {BT * 4 * C, A},
    };
    std::vector<size_t> bytes;
    for (const auto& t : elements_and_size) bytes.push_back(aligned64(t[0] * t[1]));
    return bytes;
}

// Bytes of the FP8 activation copies: the kept Xᵀ (E4M3) of qkv and fc (all layers), one layer's
// Xᵀ cast again in backward (attproj, fcproj), and one GEMM's E5M2 dY in both layouts, whose
// first buffer also holds the forward's E4M3 X (fp8_x_).
struct Fp8ActivationSizes { size_t kept_t = 0, recast_t = 0, dout = 0; };
Fp8ActivationSizes fp8_activation_sizes(const GPTConfig& cfg, size_t BT, const PrecisionConfig& prec) {
    const size_t L = cfg.n_layer, C = cfg.n_embd;
    Fp8ActivationSizes sizes;
    for (int g = 0; g < 4; g++) {
        if (!GPT::runs_in_fp8(prec, g)) continue;
        if (fp8_keeps_input_t(g)) {
            sizes.kept_t += L * BT * kGemmIn[g] * C;
        } else {
            sizes.recast_t = std::max(sizes.recast_t, BT * kGemmIn[g] * C);
        }
        sizes.dout = std::max(sizes.dout, BT * std::max(kGemmIn[g], kGemmOut[g]) * C);
    }
    return sizes;
}

size_t fp8_activation_bytes(const GPTConfig& cfg, size_t BT, const PrecisionConfig& prec) {
    const Fp8ActivationSizes s = fp8_activation_sizes(cfg, BT, prec);
    return s.kept_t + s.recast_t + 2 * s.dout;
}
}  // namespace

size_t GPT::activation_bytes_for(const GPTConfig& cfg, int B, int T, const PrecisionConfig& precision) {
    size_t total = 0;
    for (size_t b : activation_tensor_bytes(cfg, (size_t)B * T, precision)) total += b;
    return total + fp8_activation_bytes(cfg, (size_t)B * T, precision);
}

GPT::GPT(const GPTConfig& cfg, Backend& backend, int max_B, int max_T, const PrecisionConfig& precision,
         Comm* comm, int zero)
    : cfg_(cfg), k_(backend), max_B_(max_B), max_T_(max_T), prec_(precision),
      act_size_(dtype_size(backend.act_dtype())), comm_(comm) {
    if (max_T > cfg.max_seq_len) {
        fail("sequence length %d exceeds the model's position table (%d)", max_T, cfg.max_seq_len);
    }
    if (backend.act_dtype() != activation_dtype(precision.precision)) {
        fail("precision %s needs a %s kernel set, got %s", precision_name(precision.precision),
             dtype_name(activation_dtype(precision.precision)), dtype_name(backend.act_dtype()));
    }
    auto sizes = param_tensor_sizes(cfg);
    for (int i = 0; i < kNumParamTensors; i++) {
        param_offsets_[i] = num_params_;
        num_params_ += sizes[i];
    }
    if (zero != 0 && zero != 1) fail("--zero %d: expected 0 or 1", zero);
    // Hopper's FP8 GEMMs reduce over C (and 4C) and take leading dimensions of 16-element
    // multiples; the CPU twin emulates any shape. (Checked before anything is allocated.)
    if (fp8() && prec_.fp8.gemms != 0 && backend.name() != "cpu" && cfg.n_embd % 16 != 0) {
        fail("fp8 on %s: n_embd %d must be a multiple of 16 (FP8 tensor-core GEMMs); use bf16 for this width",
             backend.name().c_str(), cfg.n_embd);
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
    if (precision.precision != Precision::FP32 && precision.master_weights) {
        master_ = static_cast<float*>(k_.alloc(state_alloc * sizeof(float)));
    }
    grads_ = static_cast<float*>(k_.alloc(padded_params_ * sizeof(float)));
    if (sharded_) grad_shard_ = static_cast<float*>(k_.alloc(slice * sizeof(float)));
    adam_m_ = static_cast<float*>(k_.alloc(state_alloc * sizeof(float)));
    adam_v_ = static_cast<float*>(k_.alloc(state_alloc * sizeof(float)));

    const size_t L = cfg.n_layer, C = cfg.n_embd;
    const size_t BT = (size_t)max_B * max_T;
    acts_ = new Activations();
    // every tensor of Activations, in the order of activation_tensor_bytes
    void** tensors[] = {
        &acts_->encoded,   &acts_->ln1,       (void**)&acts_->ln1_mean, (void**)&acts_->ln1_rstd, &acts_->qkv,
        &acts_->atty,      (void**)&acts_->att_lse, &acts_->attproj, &acts_->residual2, &acts_->ln2,
        (void**)&acts_->ln2_mean, (void**)&acts_->ln2_rstd, &acts_->fch, &acts_->fch_gelu, &acts_->fcproj,
        &acts_->residual3, &acts_->lnf,       (void**)&acts_->lnf_mean, (void**)&acts_->lnf_rstd, &acts_->logits,
        (void**)&acts_->losses, &acts_->dresidual, &acts_->dln, &acts_->dqkv, &acts_->datty,
        &acts_->dfch,      &acts_->dfch_gelu,
    };
    const std::vector<size_t> bytes = activation_tensor_bytes(cfg, BT, precision);
    size_t total = 0;
    for (size_t b : bytes) total += b;
    acts_->base = k_.alloc(total);
    activation_bytes_ = total;
    char* p = static_cast<char*>(acts_->base);
    for (size_t i = 0; i < bytes.size(); i++) {
        *tensors[i] = p;
        p += bytes[i];
    }
    inputs_ = static_cast<int32_t*>(k_.alloc(BT * sizeof(int32_t)));
    targets_ = static_cast<int32_t*>(k_.alloc(BT * sizeof(int32_t)));

    if (fp8()) {
        prec_.fp8.validate();
        fp8_n_ = (int)L * kNumGemms;
        size_t weight_bytes = 0;
        for (int g = 0; g < kNumGemms; g++) {
            if (fp8_gemm(g)) weight_bytes += L * kGemmOut[g] * C * kGemmIn[g] * C;   // 16-bit GEMMs keep none
        }
        const Fp8ActivationSizes sizes = fp8_activation_sizes(cfg, BT, precision);
        fp8_weights_ = static_cast<fp8e4m3*>(k_.alloc(weight_bytes));
        fp8_weights_t_ = static_cast<fp8e4m3*>(k_.alloc(weight_bytes));
        fp8_inputs_t_ = static_cast<fp8e4m3*>(k_.alloc(sizes.kept_t));
        fp8_recast_t_ = static_cast<fp8e4m3*>(k_.alloc(sizes.recast_t));
        fp8_dout_ = static_cast<fp8e5m2*>(k_.alloc(sizes.dout));
        fp8_dout_t_ = static_cast<fp8e5m2*>(k_.alloc(sizes.dout));
        // the forward's cast of X and the backward's cast of dY never overlap: one buffer
        fp8_x_ = reinterpret_cast<fp8e4m3*>(fp8_dout_);
        activation_bytes_ += fp8_activation_bytes(cfg, BT, precision);
        // the scaling state in backend memory: 3n scale slots and histories (X, W, dY blocks), the
        // casts' counters for this step and the last one (+ one slot for evaluation passes), a
        // slot for just-in-time amaxes, and the amaxes reduced across ranks
        const size_t S = 3 * (size_t)fp8_n_, H = (size_t)prec_.fp8.amax_history;
        fp8_scales_ = static_cast<Fp8ScaleSlot*>(k_.alloc(S * sizeof(Fp8ScaleSlot)));
        fp8_history_ = static_cast<float*>(k_.alloc(S * H * sizeof(float)));
        fp8_counters_ = static_cast<Fp8Counters*>(k_.alloc((S + 1) * sizeof(Fp8Counters)));
        fp8_counters_last_ = static_cast<Fp8Counters*>(k_.alloc((S + 1) * sizeof(Fp8Counters)));
        fp8_jit_ = static_cast<Fp8Counters*>(k_.alloc(sizeof(Fp8Counters)));
        fp8_amax_buffer_ = static_cast<float*>(k_.alloc(S * sizeof(float)));
        fp8_hist_len_ = new std::vector<int>(S, 0);
        fp8_steps_ = new std::vector<int64_t>(S, 0);
        std::vector<Fp8ScaleSlot> ones(S);
        for (Fp8ScaleSlot& slot : ones) slot = Fp8ScaleSlot{1.0f, 1.0f, 0, {}};
        k_.copy_to_device(fp8_scales_, ones.data(), S * sizeof(Fp8ScaleSlot));
    }
}

GPT::~GPT() {
    k_.release(params_);
    if (master_ != nullptr) k_.release(master_);
    k_.release(grads_);
    k_.release(adam_m_);
    k_.release(adam_v_);
    if (grad_shard_ != nullptr) k_.release(grad_shard_);
    k_.release(acts_->base);
    k_.release(inputs_);
    k_.release(targets_);
    if (fp8_n_ > 0) {
        k_.release(fp8_weights_);
        k_.release(fp8_weights_t_);
        k_.release(fp8_inputs_t_);
        k_.release(fp8_recast_t_);
        k_.release(fp8_dout_);
        k_.release(fp8_dout_t_);
        k_.release(fp8_scales_);
        k_.release(fp8_history_);
        k_.release(fp8_counters_);
        k_.release(fp8_counters_last_);
        k_.release(fp8_jit_);
        k_.release(fp8_amax_buffer_);
        delete fp8_hist_len_;
        delete fp8_steps_;
    }
    delete acts_;
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
    struct Job { int tensor; size_t begin, end; double std; };
    std::vector<Job> jobs;
    for (int i = 0; i < kNumParamTensors; i++) {
        size_t n = sizes[i];
        double std = 0.0;
        switch (i) {
            case kWte: n = (size_t)cfg_.vocab_size * C; std = std_default; break;   // padding rows stay 0
            case kWpe: case kQkvw: case kFcw: std = std_default; break;
            case kAttprojw: case kFcprojw: std = std_residual; break;
            case kLn1w: case kLn2w: case kLnfw:
                std::fill_n(host.data() + param_offsets_[i], n, 1.0f);
                continue;
            default: continue;   // biases: 0
        }
        for (size_t b = 0; b < n; b += kChunk) jobs.push_back({i, b, std::min(n, b + kChunk), std});
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
        for (size_t k = job.begin; k < job.end; k++) t[k] = (float)(job.std * rng.normal());
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
    if (fp8()) cast_fp8_weights();
}

std::vector<float> GPT::weights() const {
    // the FP32 masters when there are any (gathered from every rank under ZeRO-1), else the
    // working weights widened
    std::vector<float> host(num_params_);
    float* full = static_cast<float*>(k_.alloc(padded_params_ * sizeof(float)));
    if (master_ == nullptr) {
        k_.act_to_float(full, params_, num_params_);
    } else if (!sharded_) {
        k_.copy_to_host(host.data(), master_, num_params_ * sizeof(float));
        k_.release(full);
        return host;
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

GPT::GemmInput GPT::layernorm_input(Gemm g, void* out, float* mean, float* rstd, const void* inp, const void* weight,
                                     const void* bias, int N, int C) {
    if (fp8_gemm(g)) return GemmInput{GemmInput::kLayerNorm, inp, weight, bias, mean, rstd};   // fused into the cast
    k_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    return GemmInput{GemmInput::kTensor, out};
}

GPT::GemmInput GPT::gelu_input(Gemm g, void* out, const void* inp, size_t n) {
    if (fp8_gemm(g)) return GemmInput{GemmInput::kGelu, inp};   // fused into the cast
    k_.gelu_forward(out, inp, n);
    return GemmInput{GemmInput::kTensor, out};
}

void GPT::cast_input(const GemmInput& in, fp8e4m3* q, fp8e4m3* qt, int N, int C, const Fp8ScaleSlot* scale,
                     Fp8Counters* counters) {
    switch (in.kind) {
        case GemmInput::kTensor: k_.quantize_transpose_e4m3(q, qt, in.x, N, C, scale, counters); break;
        case GemmInput::kGelu: k_.gelu_forward_e4m3(q, qt, in.x, N, C, scale, counters); break;
        case GemmInput::kLayerNorm:
            k_.layernorm_forward_e4m3(q, qt, in.mean, in.rstd, in.x, in.ln_weight, in.ln_bias, N, C, scale, counters);
            break;
    }
}

void GPT::linear_forward(int l, Gemm g, void* out, const GemmInput& inp, int N, int C, int OC) {
    const size_t wsize = (size_t)OC * C;
    const void* bias = param(kGemmBias[g], (size_t)l * OC);
    if (!fp8_gemm(g)) {
        k_.matmul_forward(out, inp.x, param(kGemmWeight[g], l * wsize), bias, N, C, OC);
        return;
    }
    // X → E4M3 with its scale (just in time on the first step / every step of the current recipe:
    // the statistics of a cast that writes nothing give the amax first)
    Fp8ScaleSlot* sx = fp8_scale(kFp8X, l, g);
    if (fp8_needs_amax_now(kFp8X, l, g)) {
        fp8_scale_just_in_time(sx, fp8e4m3::max_finite, [&](Fp8Counters* counters) {
            if (inp.kind == GemmInput::kTensor) {
                k_.amax_into(inp.x, (size_t)N * C, counters);
            } else {
                cast_input(inp, nullptr, nullptr, N, C, sx, counters);
            }
        });
    }
    // one cast, two layouts where backward keeps Xᵀ (fp8_keeps_input_t): X (N,C) for this GEMM,
    // Xᵀ (C,N) for dW. Evaluation and sampling passes keep no Xᵀ and leave the scaling state alone
    // (their statistics go to a slot nobody reads).
    if (training_pass_) {
        fp8e4m3* qt = fp8_keeps_input_t(g) ? fp8_input_t(l, g, N) : nullptr;
        cast_input(inp, fp8_x_, qt, N, C, sx, fp8_slot(kFp8X, l, g));
    } else {
        cast_input(inp, fp8_x_, nullptr, N, C, sx, fp8_spare_slot());
    }
    k_.matmul_forward_fp8(out, fp8_x_, sx, fp8_weight(l, g, false), fp8_scale(kFp8W, l, g), bias, N, C, OC);
}

void GPT::linear_backward(int l, Gemm g, void* dinp, const void* dout, const GemmInput& inp, int N, int C, int OC,
                          bool dout_cast) {
    const size_t wsize = (size_t)OC * C;
    float* dweight = grad(kGemmWeight[g]) + l * wsize;
    float* dbias = grad(kGemmBias[g]) + (size_t)l * OC;
    if (!fp8_gemm(g)) {
        k_.matmul_backward(dinp, dweight, dbias, dout, inp.x, param(kGemmWeight[g], l * wsize), N, C, OC);
        return;
    }
    Fp8ScaleSlot* sdy = fp8_scale(kFp8DY, l, g);
    if (!dout_cast) {   // else the producer of dY has cast it already (gelu_backward_e5m2)
        if (fp8_needs_amax_now(kFp8DY, l, g)) {
            fp8_scale_just_in_time(sdy, fp8e5m2::max_finite,
                                   [&](Fp8Counters* counters) { k_.amax_into(dout, (size_t)N * OC, counters); });
        }
        // dY (N,OC) for dX and dYᵀ (OC,N) for dW, from one cast
        k_.quantize_transpose_e5m2(fp8_dout_, fp8_dout_t_, dout, N, OC, sdy, fp8_slot(kFp8DY, l, g));
    }
    // Xᵀ: kept by the forward, or cast again from what backward keeps (its statistics, counted by
    // the forward's cast already, go to the spare slot)
    if (!fp8_keeps_input_t(g)) cast_input(inp, nullptr, fp8_input_t(l, g, N), N, C, fp8_scale(kFp8X, l, g), fp8_spare_slot());
    k_.matmul_backward_fp8(dinp, dweight, dbias, fp8_dout_, fp8_dout_t_, sdy, dout, fp8_input_t(l, g, N),
                           fp8_scale(kFp8X, l, g), fp8_weight(l, g, true), fp8_scale(kFp8W, l, g), N, C, OC);
}

// FP8 buffers are laid out GEMM by GEMM (qkv, attproj, fc, fcproj; those that run in FP8), each
// holding its L layers.
fp8e4m3* GPT::fp8_input_t(int l, int g, int N) const {   // the E4M3 Xᵀ of GEMM g, (C_in, N)
    if (!fp8_keeps_input_t(g)) return fp8_recast_t_;        // one layer's, cast in backward
    fp8e4m3* x = fp8_inputs_t_;
    for (int h = 0; h < g; h++) {
        if (fp8_gemm(h) && fp8_keeps_input_t(h)) x += (size_t)cfg_.n_layer * max_B_ * max_T_ * kGemmIn[h] * cfg_.n_embd;
    }
    return x + (size_t)l * N * kGemmIn[g] * cfg_.n_embd;
}

// the E4M3 copy of GEMM g's weight: W (C_out, C_in), or Wᵀ (C_in, C_out)
fp8e4m3* GPT::fp8_weight(int l, int g, bool transposed) const {
    fp8e4m3* w = transposed ? fp8_weights_t_ : fp8_weights_;
    for (int h = 0; h <= g; h++) {
        const size_t size = (size_t)kGemmOut[h] * kGemmIn[h] * cfg_.n_embd * cfg_.n_embd;
        if (h == g) return w + l * size;
        if (fp8_gemm(h)) w += cfg_.n_layer * size;   // only FP8 GEMMs have copies
    }
    return w;
}

// The names of a GEMM's three scaled tensors in telemetry and checkpoints, by Fp8Operand.
static const char* const kFp8OperandName[] = {"x", "w", "dy"};

// Slot of a scaled tensor in the FP8 state arrays: the X block, the W block, the dY block.
size_t GPT::fp8_index(Fp8Operand operand, int l, int g) const {
    return (size_t)operand * fp8_n_ + (size_t)l * kNumGemms + g;
}

Fp8Counters* GPT::fp8_slot(Fp8Operand operand, int l, int g) const { return fp8_counters_ + fp8_index(operand, l, g); }

Fp8Counters* GPT::fp8_spare_slot() const { return fp8_counters_ + 3 * (size_t)fp8_n_; }

Fp8ScaleSlot* GPT::fp8_scale(Fp8Operand operand, int l, int g) const { return fp8_scales_ + fp8_index(operand, l, g); }

// Step 0 of delayed scaling (no history yet) and every step of the current recipe.
bool GPT::fp8_needs_amax_now(Fp8Operand operand, int l, int g) const {
    return prec_.fp8.recipe == Fp8Recipe::Current ||
           (*fp8_hist_len_)[fp8_index(operand, l, g)] == 0;
}

// The scale from the tensor's own amax, all in backend memory (no wait for the host): record_amax
// puts the amax into an empty counters slot (an amax op, or a cast that writes nothing).
void GPT::fp8_scale_just_in_time(Fp8ScaleSlot* slot, float fp8_max,
                                 const std::function<void(Fp8Counters*)>& record_amax) {
    k_.zero(fp8_jit_, sizeof(Fp8Counters));
    record_amax(fp8_jit_);
    k_.fp8_scale_from_counters(slot, fp8_jit_, fp8_max, prec_.fp8.margin);
}

void GPT::cast_fp8_weights(const std::array<bool, kNumGemms>& already_cast) {
    // The optimizer's half of delayed scaling: the weights' scale is known before the cast, so
    // the E4M3 copies (W and Wᵀ, one cast) are written right after the update (by the update
    // itself where it can: already_cast). Each weight's slot holds the amax of its latest cast
    // only (the history takes it at the end of the step that uses the copy).
    for (int g = 0; g < kNumGemms; g++) {
        if (!fp8_gemm(g) || already_cast[g]) continue;
        const size_t wsize = (size_t)kGemmOut[g] * kGemmIn[g] * cfg_.n_embd * cfg_.n_embd;
        for (int l = 0; l < cfg_.n_layer; l++) {
            const void* w = param(kGemmWeight[g], l * wsize);
            Fp8ScaleSlot* sw = fp8_scale(kFp8W, l, g);
            k_.zero(fp8_slot(kFp8W, l, g), sizeof(Fp8Counters));
            if (fp8_needs_amax_now(kFp8W, l, g)) {
                fp8_scale_just_in_time(sw, fp8e4m3::max_finite,
                                       [&](Fp8Counters* counters) { k_.amax_into(w, wsize, counters); });
            }
            k_.quantize_transpose_e4m3(fp8_weight(l, g, false), fp8_weight(l, g, true), w, kGemmOut[g] * cfg_.n_embd,
                                       kGemmIn[g] * cfg_.n_embd, sw, fp8_slot(kFp8W, l, g));
        }
    }
}

// The FP8 GEMM whose weight parameter tensor i is, or -1.
int GPT::fp8_gemm_of_weight(int i) const {
    for (int g = 0; g < kNumGemms; g++) {
        if (kGemmWeight[g] == i) return fp8_gemm(g) ? g : -1;
    }
    return -1;
}

float GPT::forward(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss) {
    if (B < 1 || B > max_B_ || T < 1 || T > max_T_) {
        fail("forward(B=%d, T=%d) outside the allocated (%d, %d)", B, T, max_B_, max_T_);
    }
    const int L = cfg_.n_layer, C = cfg_.n_embd, NH = cfg_.n_head;
    const int V = cfg_.vocab_size, Vp = cfg_.padded_vocab_size;
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    Activations& a = *acts_;
    k_.copy_to_device(inputs_, inputs, (size_t)N * sizeof(int32_t));
    training_pass_ = targets != nullptr && dloss != 0.0f;
    if (training_pass_ && fp8() && prec_.fp8.gemms != 0 && k_.name() != "cpu" && N % 16 != 0) {   // dW reduces over B·T
        fail("fp8 training on %s: B·T = %d·%d = %d must be a multiple of 16 (FP8 tensor-core GEMMs reduce over it)",
             k_.name().c_str(), B, T, N);
    }

    k_.encoder_forward(a.encoded, inputs_, param(kWte), param(kWpe), B, T, C);
    for (int l = 0; l < L; l++) {
        const void* residual = l == 0 ? a.encoded : act_at(a.residual3, (l - 1) * NC);   // (B,T,C)
        // ln1, ln2, fch_gelu: none when their GEMM runs in FP8 (see Activations)
        void* ln1 = fp8_gemm(kQkv) ? nullptr : act_at(a.ln1, l * NC);
        float* ln1_mean = a.ln1_mean + (size_t)l * N;
        float* ln1_rstd = a.ln1_rstd + (size_t)l * N;
        void* qkv = act_at(a.qkv, l * NC * 3);
        void* atty = act_at(a.atty, l * NC);
        float* lse = a.att_lse + (size_t)l * N * NH;
        void* attproj = a.attproj;   // one layer's worth: the residual add consumes it
        void* residual2 = act_at(a.residual2, l * NC);
        void* ln2 = fp8_gemm(kFc) ? nullptr : act_at(a.ln2, l * NC);
        float* ln2_mean = a.ln2_mean + (size_t)l * N;
        float* ln2_rstd = a.ln2_rstd + (size_t)l * N;
        void* fch = act_at(a.fch, l * NC * 4);
        void* fch_gelu = fp8_gemm(kFcproj) ? nullptr : act_at(a.fch_gelu, l * NC * 4);
        void* fcproj = a.fcproj;     // one layer's worth: the residual add consumes it
        void* residual3 = act_at(a.residual3, l * NC);

        // a GEMM input's producer runs here, or (FP8) inside the GEMM's cast (layernorm_input, gelu_input)
        const GemmInput x_qkv = layernorm_input(kQkv, ln1, ln1_mean, ln1_rstd, residual, param(kLn1w, l * C),
                                                param(kLn1b, l * C), N, C);
        linear_forward(l, kQkv, qkv, x_qkv, N, C, 3 * C);
        k_.attention_forward(atty, lse, qkv, B, T, C, NH);
        linear_forward(l, kAttproj, attproj, GemmInput{GemmInput::kTensor, atty}, N, C, C);
        k_.residual_forward(residual2, residual, attproj, NC);
        const GemmInput x_fc = layernorm_input(kFc, ln2, ln2_mean, ln2_rstd, residual2, param(kLn2w, l * C),
                                               param(kLn2b, l * C), N, C);
        linear_forward(l, kFc, fch, x_fc, N, C, 4 * C);
        linear_forward(l, kFcproj, fcproj, gelu_input(kFcproj, fch_gelu, fch, NC * 4), N, 4 * C, C);
        k_.residual_forward(residual3, residual2, fcproj, NC);
    }
    const void* final_residual = act_at(a.residual3, (L - 1) * NC);
    k_.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, final_residual, param(kLnfw), param(kLnfb), N, C);
    k_.matmul_forward(a.logits, a.lnf, param(kWte), nullptr, N, C, Vp);   // tied LM head, (B,T,Vp)

    last_B_ = B;
    last_T_ = T;
    have_dlogits_ = false;
    if (targets == nullptr) return 0.0f;
    k_.copy_to_device(targets_, targets, (size_t)N * sizeof(int32_t));
    k_.fused_classifier(dloss != 0.0f ? a.logits : nullptr, a.losses, a.logits, targets_, N, V, Vp, dloss);
    have_dlogits_ = dloss != 0.0f;
    std::vector<float> losses(N);
    k_.copy_to_host(losses.data(), a.losses, (size_t)N * sizeof(float));
    double sum = 0;
    for (float x : losses) sum += x;
    return (float)(sum / N);
}

void GPT::backward() {
    if (!have_dlogits_) fail("backward() needs a forward() with targets and a non-zero dloss first");
    have_dlogits_ = false;
    const int B = last_B_, T = last_T_;
    const int L = cfg_.n_layer, C = cfg_.n_embd, NH = cfg_.n_head, Vp = cfg_.padded_vocab_size;
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    Activations& a = *acts_;

    // dresidual is the gradient of the residual stream: the LM head and lnf add into it, then
    // each block (top to bottom) adds its two branches' input gradients, and the embeddings read it.
    k_.zero(a.dresidual, NC * act_size_);
    k_.zero(a.dln, NC * act_size_);
    k_.matmul_backward(a.dln, grad(kWte), nullptr, a.logits, a.lnf, param(kWte), N, C, Vp);
    k_.layernorm_backward(a.dresidual, grad(kLnfw), grad(kLnfb), a.dln, act_at(a.residual3, (L - 1) * NC),
                          param(kLnfw), a.lnf_mean, a.lnf_rstd, N, C);

    for (int l = L - 1; l >= 0; l--) {
        const void* residual = l == 0 ? a.encoded : act_at(a.residual3, (l - 1) * NC);
        // the GEMM inputs, for the 16-bit GEMMs' weight gradients; FP8 ones read an E4M3 Xᵀ, kept by
        // the forward (qkv, fc) or cast again here from atty and gelu(fch) (fp8_keeps_input_t)
        const GemmInput x_qkv{GemmInput::kTensor, fp8_gemm(kQkv) ? nullptr : act_at(a.ln1, l * NC)};
        const void* qkv = act_at(a.qkv, l * NC * 3);
        const void* atty = act_at(a.atty, l * NC);
        const float* lse = a.att_lse + (size_t)l * N * NH;
        const void* residual2 = act_at(a.residual2, l * NC);
        const GemmInput x_fc{GemmInput::kTensor, fp8_gemm(kFc) ? nullptr : act_at(a.ln2, l * NC)};
        const void* fch = act_at(a.fch, l * NC * 4);
        const GemmInput x_fcproj = fp8_gemm(kFcproj) ? GemmInput{GemmInput::kGelu, fch}
                                                     : GemmInput{GemmInput::kTensor, act_at(a.fch_gelu, l * NC * 4)};

        // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        k_.zero(a.dfch_gelu, NC * 4 * act_size_);
        linear_backward(l, kFcproj, a.dfch_gelu, a.dresidual, x_fcproj, N, 4 * C, C);
        k_.zero(a.dfch, NC * 4 * act_size_);
        // dY of fc = GELU's input gradient: with its scale known (delayed scaling after step 0),
        // the E5M2 cast is fused into GELU backward
        const bool fuse_dy = fp8_gemm(kFc) && !fp8_needs_amax_now(kFp8DY, l, kFc);
        if (fuse_dy) {
            k_.gelu_backward_e5m2(a.dfch, fp8_dout_, fp8_dout_t_, fch, a.dfch_gelu, N, 4 * C, fp8_scale(kFp8DY, l, kFc),
                                  fp8_slot(kFp8DY, l, kFc));
        } else {
            k_.gelu_backward(a.dfch, fch, a.dfch_gelu, NC * 4);
        }
        k_.zero(a.dln, NC * act_size_);
        linear_backward(l, kFc, a.dln, a.dfch, x_fc, N, C, 4 * C, fuse_dy);
        k_.layernorm_backward(a.dresidual, grad(kLn2w) + l * C, grad(kLn2b) + l * C, a.dln, residual2,
                              param(kLn2w, l * C), a.ln2_mean + (size_t)l * N, a.ln2_rstd + (size_t)l * N, N, C);

        // attention branch: residual2 = residual + attproj(attention(qkv(ln1(residual))))
        k_.zero(a.datty, NC * act_size_);
        linear_backward(l, kAttproj, a.datty, a.dresidual, GemmInput{GemmInput::kTensor, atty}, N, C, C);
        k_.zero(a.dqkv, NC * 3 * act_size_);
        k_.attention_backward(a.dqkv, a.datty, qkv, atty, lse, B, T, C, NH);
        k_.zero(a.dln, NC * act_size_);
        linear_backward(l, kQkv, a.dln, a.dqkv, x_qkv, N, C, 3 * C);
        k_.layernorm_backward(a.dresidual, grad(kLn1w) + l * C, grad(kLn1b) + l * C, a.dln, residual,
                              param(kLn1w, l * C), a.ln1_mean + (size_t)l * N, a.ln1_rstd + (size_t)l * N, N, C);
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
    double sum = sharded_ ? comm_->all_reduce_sum(k_.sum_squares(grad_shard_, state_len_))
                          : k_.sum_squares(grads_, num_params_);
    return std::sqrt(sum) / world_;
}

void GPT::update(float lr, const AdamWConfig& opt, float grad_scale, int t) {
    grad_scale /= world_;   // the gradients are sums over ranks: apply their mean
    // fp8: the step ends first for every scaled tensor, so that the weights' next scales are known
    // when the update writes them (fused casts below)
    if (fp8()) end_fp8_step();
    const float* g = sharded_ ? grad_shard_ : grads_;
    auto sizes = param_tensor_sizes(cfg_);
    const size_t state_end = state_begin_ + state_len_;
    std::array<bool, kNumGemms> weights_cast{};   // FP8 copies written by the update itself
    for (int i = 0; i < kNumParamTensors; i++) {
        // the part of tensor i in this rank's slice (all of it without ZeRO-1)
        const size_t begin = std::max(param_offsets_[i], state_begin_);
        const size_t end = std::min(param_offsets_[i] + sizes[i], state_end);
        if (begin >= end) continue;
        const size_t local = begin - state_begin_;
        float wd = param_tensor_decays(i) ? opt.weight_decay : 0.0f;
        const int gemm = fp8_gemm_of_weight(i);
        bool scales_known = gemm >= 0;
        for (int l = 0; scales_known && l < cfg_.n_layer; l++) scales_known = !fp8_needs_amax_now(kFp8W, l, gemm);
        if (scales_known && !sharded_) {
            // the whole tensor is this rank's and its scale is known: AdamW and the E4M3 cast of
            // each layer's matrix in one pass
            const int rows = kGemmOut[gemm] * cfg_.n_embd, cols = kGemmIn[gemm] * cfg_.n_embd;
            const size_t wsize = (size_t)rows * cols;
            for (int l = 0; l < cfg_.n_layer; l++) {
                const size_t off = local + l * wsize;
                k_.adamw_update_e4m3(master_ != nullptr ? master_ + off : nullptr, act_at(params_, begin + l * wsize),
                                     adam_m_ + off, adam_v_ + off, g + off, rows, cols, lr, opt.beta1, opt.beta2, opt.eps,
                                     wd, grad_scale, t, fp8_weight(l, gemm, false), fp8_weight(l, gemm, true),
                                     fp8_scale(kFp8W, l, gemm), fp8_slot(kFp8W, l, gemm));
            }
            weights_cast[gemm] = true;
            continue;
        }
        k_.adamw_update(master_ != nullptr ? master_ + local : nullptr, act_at(params_, begin), adam_m_ + local,
                        adam_v_ + local, g + local, end - begin, lr, opt.beta1, opt.beta2, opt.eps, wd, grad_scale, t);
    }
    if (sharded_) {   // every rank's updated slice of the working weights to every rank
        comm_->all_gather(params_, act_at(params_, state_begin_), padded_params_ / world_ * act_size_);
    }
    if (fp8()) cast_fp8_weights(weights_cast);
}

// End of step for every scaled tensor, without waiting for the host: the amaxes are MAX-reduced
// across ranks in one all-reduce (NaN-propagating; the weights' are the same on every rank), one
// op rolls every history and computes every next scale (fp8_end_step), the counters of this step
// become the last step's (telemetry), and the weights' counters are emptied for their next cast.
void GPT::end_fp8_step() {
    const int S = 3 * fp8_n_;
    const float* reduced = nullptr;
    if (world_ > 1) {
        k_.fp8_amaxes(fp8_amax_buffer_, fp8_counters_, S);
        comm_->all_reduce_max(fp8_amax_buffer_, (size_t)S);
        reduced = fp8_amax_buffer_;
    }
    k_.fp8_end_step(fp8_scales_, fp8_history_, fp8_counters_, reduced, S, 2 * fp8_n_, prec_.fp8.amax_history,
                    prec_.fp8.algo == Fp8AmaxAlgo::MostRecent, prec_.fp8.margin,
                    prec_.fp8.recipe == Fp8Recipe::Delayed);
    for (int i = 0; i < S; i++) {   // the host's mirror of the history lengths and step counts
        (*fp8_hist_len_)[i] = std::min((*fp8_hist_len_)[i] + 1, prec_.fp8.amax_history);
        (*fp8_steps_)[i]++;
    }
    std::swap(fp8_counters_, fp8_counters_last_);
    k_.zero(fp8_counters_, (size_t)S * sizeof(Fp8Counters));   // the next step starts empty
}

void GPT::discard_step() {
    if (!fp8()) return;
    k_.zero(fp8_slot(kFp8X, 0, 0), (size_t)fp8_n_ * sizeof(Fp8Counters));
    k_.zero(fp8_slot(kFp8DY, 0, 0), (size_t)fp8_n_ * sizeof(Fp8Counters));
}

void GPT::poison_gradient() {
    const float inf = INFINITY;
    k_.copy_to_device(grads_ + param_offsets_[kQkvw], &inf, sizeof(float));
}

std::vector<Fp8TensorReport> GPT::fp8_report() const {
    std::vector<Fp8TensorReport> out;
    if (!fp8()) return out;
    // the last step's counters and the scales for the next, read back only when asked
    const size_t S = 3 * (size_t)fp8_n_;
    std::vector<Fp8Counters> last(S);
    std::vector<Fp8ScaleSlot> scales(S);
    k_.copy_to_host(last.data(), fp8_counters_last_, S * sizeof(Fp8Counters));
    k_.copy_to_host(scales.data(), fp8_scales_, S * sizeof(Fp8ScaleSlot));
    for (int l = 0; l < cfg_.n_layer; l++) {
        for (int g = 0; g < kNumGemms; g++) {
            if (!fp8_gemm(g)) continue;
            for (Fp8Operand op : {kFp8X, kFp8W, kFp8DY}) {
                const size_t i = fp8_index(op, l, g);
                const Fp8CastStats stats = to_cast_stats(last[i]);
                out.push_back({format("h%d.%s.%s", l, kGemmName[g], kFp8OperandName[op]), stats.amax, scales[i].scale,
                               stats.saturated_frac(), stats.flushed_frac()});
            }
        }
    }
    return out;
}

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

void GPT::restore_optimizer_state(const std::vector<float>& master, const std::vector<float>& m,
                                  const std::vector<float>& v) {
    if (master.size() != state_len_ || m.size() != state_len_ || v.size() != state_len_) {
        fail("optimizer state of %zu/%zu/%zu values for a slice of %zu", master.size(), m.size(), v.size(),
             state_len_);
    }
    k_.copy_to_device(adam_m_, m.data(), state_len_ * sizeof(float));
    k_.copy_to_device(adam_v_, v.data(), state_len_ * sizeof(float));
    if (master_ != nullptr) k_.copy_to_device(master_, master.data(), state_len_ * sizeof(float));
    float* staging = static_cast<float*>(k_.alloc(state_len_ * sizeof(float)));
    k_.copy_to_device(staging, master.data(), state_len_ * sizeof(float));
    k_.float_to_act(act_at(params_, state_begin_), staging, state_len_);   // working = round(master)
    k_.release(staging);
    if (sharded_) comm_->all_gather(params_, act_at(params_, state_begin_), padded_params_ / world_ * act_size_);
    if (fp8()) cast_fp8_weights();
}

std::string GPT::fp8_state_json() const {
    // per GEMM instance (layer-major), its three tensors' scale, history (newest first) and steps
    nlohmann::json j = nlohmann::json::array();
    if (fp8()) {
        const size_t S = 3 * (size_t)fp8_n_, H = (size_t)prec_.fp8.amax_history;
        std::vector<Fp8ScaleSlot> scales(S);
        std::vector<float> history(S * H);
        k_.copy_to_host(scales.data(), fp8_scales_, S * sizeof(Fp8ScaleSlot));
        k_.copy_to_host(history.data(), fp8_history_, S * H * sizeof(float));
        for (int j8 = 0; j8 < fp8_n_; j8++) {
            nlohmann::json g;
            for (Fp8Operand op : {kFp8X, kFp8W, kFp8DY}) {
                const size_t i = fp8_index(op, 0, j8);   // GEMM instance j8 = l·kNumGemms + g
                const std::vector<float> h(history.begin() + i * H, history.begin() + i * H + scales[i].hist_len);
                g[kFp8OperandName[op]] = {{"scale", scales[i].scale}, {"history", h}, {"steps", (*fp8_steps_)[i]}};
            }
            j.push_back(g);
        }
    }
    return j.dump();
}

void GPT::restore_fp8_state(const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text);
    if (!fp8()) return;
    if (j.is_array() && j.empty()) {
        fail("the checkpoint holds no FP8 scaling state (it was not trained in fp8): resume it in its own "
             "--precision, or start fp8 from its weights with --init-from");
    }
    if (!j.is_array() || j.size() != (size_t)fp8_n_) {
        fail("FP8 scaling state for %zu GEMMs, the model has %d", j.is_array() ? j.size() : 0, fp8_n_);
    }
    const size_t S = 3 * (size_t)fp8_n_, H = (size_t)prec_.fp8.amax_history;
    std::vector<Fp8ScaleSlot> scales(S);
    std::vector<float> history(S * H, 0.0f);
    for (int j8 = 0; j8 < fp8_n_; j8++) {
        for (Fp8Operand op : {kFp8X, kFp8W, kFp8DY}) {
            const auto& t = j[j8][kFp8OperandName[op]];
            const size_t i = fp8_index(op, 0, j8);
            const std::vector<float> h = t["history"].get<std::vector<float>>();
            const size_t len = std::min(h.size(), H);   // a shorter --fp8-amax-history keeps the newest
            std::copy(h.begin(), h.begin() + len, history.begin() + i * H);
            const float scale = t["scale"].get<float>();
            scales[i] = Fp8ScaleSlot{1.0f / scale, scale, (int32_t)len, {}};
            (*fp8_hist_len_)[i] = (int)len;
            (*fp8_steps_)[i] = t["steps"].get<int64_t>();
        }
    }
    k_.copy_to_device(fp8_scales_, scales.data(), S * sizeof(Fp8ScaleSlot));
    k_.copy_to_device(fp8_history_, history.data(), S * H * sizeof(float));
    cast_fp8_weights();
}

std::vector<float> GPT::logits_at(int b, int t) const {
    if (b >= last_B_ || t >= last_T_) fail("logits_at(%d, %d) outside the last forward", b, t);
    const size_t V = cfg_.vocab_size;
    float* staging = static_cast<float*>(k_.alloc(V * sizeof(float)));
    k_.act_to_float(staging, act_at(acts_->logits, ((size_t)b * last_T_ + t) * cfg_.padded_vocab_size), V);
    std::vector<float> row(V);
    k_.copy_to_host(row.data(), staging, V * sizeof(float));
    k_.release(staging);
    return row;
}

}  // namespace train_gpt
