// generate.cpp — see generate.h.
#include "model/generate.h"

#include "utils.h"

namespace train_gpt {

Generator::Generator(const GPT& model, Backend& backend)
    : model_(model), k_(backend), cfg_(model.config()), act_size_(dtype_size(backend.act_dtype())) {
    const size_t T = cfg_.max_seq_len, C = cfg_.n_embd;
    cache_ = k_.alloc((size_t)cfg_.n_layer * T * 3 * C * act_size_);
    for (void** buf : {&x_, &x2_, &ln_, &atty_, &proj_})
        *buf = k_.alloc(T * C * act_size_);
    fch_ = k_.alloc(T * 4 * C * act_size_);
    fch_gelu_ = k_.alloc(T * 4 * C * act_size_);
    mean_ = static_cast<float*>(k_.alloc(T * sizeof(float)));
    rstd_ = static_cast<float*>(k_.alloc(T * sizeof(float)));
    logits_ = k_.alloc((size_t)cfg_.padded_vocab_size * act_size_);
    logits_f32_ = static_cast<float*>(k_.alloc((size_t)cfg_.vocab_size * sizeof(float)));
    tokens_ = static_cast<int32_t*>(k_.alloc(T * sizeof(int32_t)));
}

Generator::~Generator() {
    for (void* buf :
         {cache_, x_, x2_, ln_, atty_, proj_, fch_, fch_gelu_, static_cast<void*>(mean_), static_cast<void*>(rstd_),
          logits_, static_cast<void*>(logits_f32_), static_cast<void*>(tokens_)}) {
        k_.release(buf);
    }
}

void* Generator::at(void* base, size_t elements) const { return static_cast<char*>(base) + elements * act_size_; }

void Generator::reset() {
    cached_ = 0;
    context_.clear();
}

void Generator::forward(const int* tokens, int n) {
    const int L = cfg_.n_layer, C = cfg_.n_embd, NH = cfg_.n_head, maxT = cfg_.max_seq_len;
    const int pos = cached_;
    const size_t NC = (size_t)n * C;
    // the weights of tensor i, layer l: every per-layer tensor is (L, ...) stacked
    const auto sizes = param_tensor_sizes(cfg_);
    auto weight = [&](int i, int l) {
        return static_cast<const char*>(model_.parameter(i)) + (size_t)l * (sizes[i] / L) * act_size_;
    };
    std::vector<int32_t> ids(tokens, tokens + n);
    k_.copy_to_device(tokens_, ids.data(), (size_t)n * sizeof(int32_t));
    const void* wpe = static_cast<const char*>(model_.parameter(kWpe)) + (size_t)pos * C * act_size_;   // rows pos..
    k_.encoder_forward(x_, tokens_, model_.parameter(kWte), wpe, 1, n, C);
    for (int l = 0; l < L; l++) {
        void* cache = at(cache_, (size_t)l * maxT * 3 * C);   // (maxT, 3C) of layer l
        // attention branch: x2 = x + attproj(attention(qkv(ln1(x)))), the new qkv rows into the cache
        k_.layernorm_forward(ln_, mean_, rstd_, x_, weight(kLn1w, l), weight(kLn1b, l), n, C);
        k_.matmul_forward(at(cache, (size_t)pos * 3 * C), ln_, weight(kQkvw, l), weight(kQkvb, l), n, C, 3 * C);
        k_.attention_decode(atty_, cache, pos, n, C, NH);
        k_.matmul_forward(proj_, atty_, weight(kAttprojw, l), weight(kAttprojb, l), n, C, C);
        k_.residual_forward(x2_, x_, proj_, NC);
        // MLP branch: x = x2 + fcproj(gelu(fc(ln2(x2))))
        k_.layernorm_forward(ln_, mean_, rstd_, x2_, weight(kLn2w, l), weight(kLn2b, l), n, C);
        k_.matmul_forward(fch_, ln_, weight(kFcw, l), weight(kFcb, l), n, C, 4 * C);
        k_.gelu_forward(fch_gelu_, fch_, NC * 4);
        k_.matmul_forward(proj_, fch_gelu_, weight(kFcprojw, l), weight(kFcprojb, l), n, 4 * C, C);
        k_.residual_forward(x_, x2_, proj_, NC);
    }
    // the last position only: final layernorm and the tied LM head
    const void* last = at(x_, (size_t)(n - 1) * C);
    k_.layernorm_forward(ln_, mean_, rstd_, last, model_.parameter(kLnfw), model_.parameter(kLnfb), 1, C);
    k_.matmul_forward(logits_, ln_, model_.parameter(kWte), nullptr, 1, C, cfg_.padded_vocab_size);
    cached_ += n;
}

std::vector<float> Generator::feed(const std::vector<int>& tokens) {
    if (tokens.empty()) fail("Generator::feed: no tokens");
    for (int id : tokens) {
        if (id < 0 || id >= cfg_.vocab_size)
            fail("token %d is outside the model's vocabulary [0, %d)", id, cfg_.vocab_size);
    }
    const int maxT = cfg_.max_seq_len;
    context_.insert(context_.end(), tokens.begin(), tokens.end());
    if (cached_ + (int)tokens.size() <= maxT) {
        forward(tokens.data(), (int)tokens.size());
    } else {   // past the position table: the last maxT tokens, from position 0 again
        context_.erase(context_.begin(), context_.end() - std::min<size_t>(context_.size(), maxT));
        cached_ = 0;
        forward(context_.data(), (int)context_.size());
    }
    std::vector<float> logits(cfg_.vocab_size);
    k_.act_to_float(logits_f32_, logits_, logits.size());
    k_.copy_to_host(logits.data(), logits_f32_, logits.size() * sizeof(float));
    return logits;
}

std::vector<int> Generator::generate(const std::vector<int>& prompt, int count, const SamplingParams& params,
                                     Rng& rng) {
    if (prompt.empty()) fail("Generator::generate: an empty prompt (start from the end-of-text token)");
    reset();
    std::vector<int> out;
    if (count <= 0) return out;
    std::vector<float> logits = feed(prompt);
    for (int i = 0; i < count; i++) {
        out.push_back(sample_token(logits, params, rng.uniform()));
        if (i + 1 < count) logits = feed({out.back()});
    }
    return out;
}

}   // namespace train_gpt
