// gpt.cpp — the model's forward, backward and update, as calls into the Backend.
#include "gpt.h"

#include "rng.h"
#include "utils.h"

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
struct GPT::Activations {
    float* encoded;     // (B, T, C)
    float* ln1;         // (L, B, T, C)
    float* ln1_mean;    // (L, B, T)
    float* ln1_rstd;    // (L, B, T)
    float* qkv;         // (L, B, T, 3C)
    float* atty;        // (L, B, T, C)   attention output, before the projection
    float* att_lse;     // (L, B, NH, T)  softmax log-sum-exp per query row
    float* attproj;     // (L, B, T, C)
    float* residual2;   // (L, B, T, C)   after the attention branch
    float* ln2;         // (L, B, T, C)
    float* ln2_mean;    // (L, B, T)
    float* ln2_rstd;    // (L, B, T)
    float* fch;         // (L, B, T, 4C)
    float* fch_gelu;    // (L, B, T, 4C)
    float* fcproj;      // (L, B, T, C)
    float* residual3;   // (L, B, T, C)   after the MLP branch: the block's output
    float* lnf;         // (B, T, C)
    float* lnf_mean;    // (B, T)
    float* lnf_rstd;    // (B, T)
    float* logits;      // (B, T, Vp)     overwritten by dlogits when training
    float* losses;      // (B, T)
    // backward scratch, reused by every layer
    float* dresidual;   // (B, T, C)   gradient of the residual stream, flows down through the layers
    float* dln;         // (B, T, C)   gradient of a layernorm output
    float* dqkv;        // (B, T, 3C)
    float* datty;       // (B, T, C)
    float* dfch;        // (B, T, 4C)
    float* dfch_gelu;   // (B, T, 4C)
    float* base;        // the one allocation everything above points into
};

GPT::GPT(const GPTConfig& cfg, Backend& backend, int max_B, int max_T)
    : cfg_(cfg), k_(backend), max_B_(max_B), max_T_(max_T) {
    if (max_T > cfg.max_seq_len) {
        fail("sequence length %d exceeds the model's position table (%d)", max_T, cfg.max_seq_len);
    }
    auto sizes = param_tensor_sizes(cfg);
    for (int i = 0; i < kNumParamTensors; i++) {
        param_offsets_[i] = num_params_;
        num_params_ += sizes[i];
    }
    params_ = static_cast<float*>(k_.alloc(num_params_ * sizeof(float)));
    grads_ = static_cast<float*>(k_.alloc(num_params_ * sizeof(float)));
    adam_m_ = static_cast<float*>(k_.alloc(num_params_ * sizeof(float)));
    adam_v_ = static_cast<float*>(k_.alloc(num_params_ * sizeof(float)));

    const size_t L = cfg.n_layer, C = cfg.n_embd, NH = cfg.n_head, Vp = cfg.padded_vocab_size;
    const size_t BT = (size_t)max_B * max_T;
    acts_ = new Activations();
    struct Slot { float** ptr; size_t n; };
    Slot slots[] = {
        {&acts_->encoded, BT * C}, {&acts_->ln1, L * BT * C}, {&acts_->ln1_mean, L * BT},
        {&acts_->ln1_rstd, L * BT}, {&acts_->qkv, L * BT * 3 * C}, {&acts_->atty, L * BT * C},
        {&acts_->att_lse, L * BT * NH}, {&acts_->attproj, L * BT * C}, {&acts_->residual2, L * BT * C},
        {&acts_->ln2, L * BT * C}, {&acts_->ln2_mean, L * BT}, {&acts_->ln2_rstd, L * BT},
        {&acts_->fch, L * BT * 4 * C}, {&acts_->fch_gelu, L * BT * 4 * C}, {&acts_->fcproj, L * BT * C},
        {&acts_->residual3, L * BT * C}, {&acts_->lnf, BT * C}, {&acts_->lnf_mean, BT},
        {&acts_->lnf_rstd, BT}, {&acts_->logits, BT * Vp}, {&acts_->losses, BT},
        {&acts_->dresidual, BT * C}, {&acts_->dln, BT * C}, {&acts_->dqkv, BT * 3 * C},
        {&acts_->datty, BT * C}, {&acts_->dfch, BT * 4 * C}, {&acts_->dfch_gelu, BT * 4 * C},
    };
    size_t total = 0;
    for (const Slot& s : slots) total += (s.n + 15) / 16 * 16;   // keep every tensor 64-byte aligned
    acts_->base = static_cast<float*>(k_.alloc(total * sizeof(float)));
    float* p = acts_->base;
    for (const Slot& s : slots) {
        *s.ptr = p;
        p += (s.n + 15) / 16 * 16;
    }
    inputs_ = static_cast<int32_t*>(k_.alloc(BT * sizeof(int32_t)));
    targets_ = static_cast<int32_t*>(k_.alloc(BT * sizeof(int32_t)));
}

GPT::~GPT() {
    k_.release(params_);
    k_.release(grads_);
    k_.release(adam_m_);
    k_.release(adam_v_);
    k_.release(acts_->base);
    k_.release(inputs_);
    k_.release(targets_);
    delete acts_;
}

void GPT::init_weights(uint64_t seed) {
    std::vector<float> host(num_params_, 0.0f);
    Rng rng(seed);
    const size_t C = cfg_.n_embd;
    const double std_default = 0.02;
    const double std_residual = 0.02 / std::sqrt(2.0 * cfg_.n_layer);   // GPT-2: scale residual projections
    auto sizes = param_tensor_sizes(cfg_);
    for (int i = 0; i < kNumParamTensors; i++) {
        float* t = host.data() + param_offsets_[i];
        size_t n = sizes[i];
        switch (i) {
            case kWte: n = (size_t)cfg_.vocab_size * C; [[fallthrough]];   // padding rows stay 0
            case kWpe: case kQkvw: case kFcw:
                for (size_t j = 0; j < n; j++) t[j] = (float)(std_default * rng.normal());
                break;
            case kAttprojw: case kFcprojw:
                for (size_t j = 0; j < n; j++) t[j] = (float)(std_residual * rng.normal());
                break;
            case kLn1w: case kLn2w: case kLnfw:
                for (size_t j = 0; j < n; j++) t[j] = 1.0f;
                break;
            default: break;   // biases: 0
        }
    }
    set_weights(host);
}

void GPT::set_weights(const std::vector<float>& host) {
    if (host.size() != num_params_) {
        fail("weights have %zu values, the model has %zu", host.size(), num_params_);
    }
    k_.copy_to_device(params_, host.data(), num_params_ * sizeof(float));
    k_.zero(adam_m_, num_params_ * sizeof(float));
    k_.zero(adam_v_, num_params_ * sizeof(float));
}

std::vector<float> GPT::weights() const {
    std::vector<float> host(num_params_);
    k_.copy_to_host(host.data(), params_, num_params_ * sizeof(float));
    return host;
}

std::vector<float> GPT::gradients() const {
    std::vector<float> host(num_params_);
    k_.copy_to_host(host.data(), grads_, num_params_ * sizeof(float));
    return host;
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

    k_.encoder_forward(a.encoded, inputs_, param(kWte), param(kWpe), B, T, C);
    for (int l = 0; l < L; l++) {
        const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * NC;   // (B,T,C)
        float* ln1 = a.ln1 + l * NC;
        float* ln1_mean = a.ln1_mean + (size_t)l * N;
        float* ln1_rstd = a.ln1_rstd + (size_t)l * N;
        float* qkv = a.qkv + l * NC * 3;
        float* atty = a.atty + l * NC;
        float* lse = a.att_lse + (size_t)l * N * NH;
        float* attproj = a.attproj + l * NC;
        float* residual2 = a.residual2 + l * NC;
        float* ln2 = a.ln2 + l * NC;
        float* ln2_mean = a.ln2_mean + (size_t)l * N;
        float* ln2_rstd = a.ln2_rstd + (size_t)l * N;
        float* fch = a.fch + l * NC * 4;
        float* fch_gelu = a.fch_gelu + l * NC * 4;
        float* fcproj = a.fcproj + l * NC;
        float* residual3 = a.residual3 + l * NC;

        k_.layernorm_forward(ln1, ln1_mean, ln1_rstd, residual, param(kLn1w) + l * C, param(kLn1b) + l * C, N, C);
        k_.matmul_forward(qkv, ln1, param(kQkvw) + (size_t)l * 3 * C * C, param(kQkvb) + l * 3 * C, N, C, 3 * C);
        k_.attention_forward(atty, lse, qkv, B, T, C, NH);
        k_.matmul_forward(attproj, atty, param(kAttprojw) + (size_t)l * C * C, param(kAttprojb) + l * C, N, C, C);
        k_.residual_forward(residual2, residual, attproj, NC);
        k_.layernorm_forward(ln2, ln2_mean, ln2_rstd, residual2, param(kLn2w) + l * C, param(kLn2b) + l * C, N, C);
        k_.matmul_forward(fch, ln2, param(kFcw) + (size_t)l * 4 * C * C, param(kFcb) + l * 4 * C, N, C, 4 * C);
        k_.gelu_forward(fch_gelu, fch, NC * 4);
        k_.matmul_forward(fcproj, fch_gelu, param(kFcprojw) + (size_t)l * 4 * C * C, param(kFcprojb) + l * C,
                          N, 4 * C, C);
        k_.residual_forward(residual3, residual2, fcproj, NC);
    }
    const float* final_residual = a.residual3 + (L - 1) * NC;
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
    k_.zero(a.dresidual, NC * sizeof(float));
    k_.zero(a.dln, NC * sizeof(float));
    k_.matmul_backward(a.dln, grad(kWte), nullptr, a.logits, a.lnf, param(kWte), N, C, Vp);
    k_.layernorm_backward(a.dresidual, grad(kLnfw), grad(kLnfb), a.dln, a.residual3 + (L - 1) * NC,
                          param(kLnfw), a.lnf_mean, a.lnf_rstd, N, C);

    for (int l = L - 1; l >= 0; l--) {
        const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * NC;
        const float* ln1 = a.ln1 + l * NC;
        const float* qkv = a.qkv + l * NC * 3;
        const float* atty = a.atty + l * NC;
        const float* lse = a.att_lse + (size_t)l * N * NH;
        const float* residual2 = a.residual2 + l * NC;
        const float* ln2 = a.ln2 + l * NC;
        const float* fch = a.fch + l * NC * 4;
        const float* fch_gelu = a.fch_gelu + l * NC * 4;

        // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        k_.zero(a.dfch_gelu, NC * 4 * sizeof(float));
        k_.matmul_backward(a.dfch_gelu, grad(kFcprojw) + (size_t)l * 4 * C * C, grad(kFcprojb) + l * C,
                           a.dresidual, fch_gelu, param(kFcprojw) + (size_t)l * 4 * C * C, N, 4 * C, C);
        k_.zero(a.dfch, NC * 4 * sizeof(float));
        k_.gelu_backward(a.dfch, fch, a.dfch_gelu, NC * 4);
        k_.zero(a.dln, NC * sizeof(float));
        k_.matmul_backward(a.dln, grad(kFcw) + (size_t)l * 4 * C * C, grad(kFcb) + l * 4 * C, a.dfch, ln2,
                           param(kFcw) + (size_t)l * 4 * C * C, N, C, 4 * C);
        k_.layernorm_backward(a.dresidual, grad(kLn2w) + l * C, grad(kLn2b) + l * C, a.dln, residual2,
                              param(kLn2w) + l * C, a.ln2_mean + (size_t)l * N, a.ln2_rstd + (size_t)l * N, N, C);

        // attention branch: residual2 = residual + attproj(attention(qkv(ln1(residual))))
        k_.zero(a.datty, NC * sizeof(float));
        k_.matmul_backward(a.datty, grad(kAttprojw) + (size_t)l * C * C, grad(kAttprojb) + l * C, a.dresidual,
                           atty, param(kAttprojw) + (size_t)l * C * C, N, C, C);
        k_.zero(a.dqkv, NC * 3 * sizeof(float));
        k_.attention_backward(a.dqkv, a.datty, qkv, atty, lse, B, T, C, NH);
        k_.zero(a.dln, NC * sizeof(float));
        k_.matmul_backward(a.dln, grad(kQkvw) + (size_t)l * 3 * C * C, grad(kQkvb) + l * 3 * C, a.dqkv, ln1,
                           param(kQkvw) + (size_t)l * 3 * C * C, N, C, 3 * C);
        k_.layernorm_backward(a.dresidual, grad(kLn1w) + l * C, grad(kLn1b) + l * C, a.dln, residual,
                              param(kLn1w) + l * C, a.ln1_mean + (size_t)l * N, a.ln1_rstd + (size_t)l * N, N, C);
    }
    k_.encoder_backward(grad(kWte), grad(kWpe), a.dresidual, inputs_, B, T, C);
}

void GPT::zero_grad() { k_.zero(grads_, num_params_ * sizeof(float)); }

double GPT::gradient_norm() { return std::sqrt(k_.sum_squares(grads_, num_params_)); }

void GPT::update(float lr, const AdamWConfig& opt, float grad_scale, int t) {
    auto sizes = param_tensor_sizes(cfg_);
    for (int i = 0; i < kNumParamTensors; i++) {
        size_t off = param_offsets_[i];
        float wd = param_tensor_decays(i) ? opt.weight_decay : 0.0f;
        k_.adamw_update(params_ + off, adam_m_ + off, adam_v_ + off, grads_ + off, sizes[i], lr, opt.beta1,
                        opt.beta2, opt.eps, wd, grad_scale, t);
    }
}

std::vector<float> GPT::logits_at(int b, int t) const {
    if (b >= last_B_ || t >= last_T_) fail("logits_at(%d, %d) outside the last forward", b, t);
    std::vector<float> row(cfg_.vocab_size);
    k_.copy_to_host(row.data(), acts_->logits + ((size_t)b * last_T_ + t) * cfg_.padded_vocab_size,
                    row.size() * sizeof(float));
    return row;
}

}  // namespace train_gpt
