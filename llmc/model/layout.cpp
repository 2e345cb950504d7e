// layout.cpp — see layout.h.
#include "model/layout.h"

#include "utils.h"

namespace train_gpt {

int pad_vocab(int vocab_size) { return (int)(((long long)vocab_size + 127) / 128 * 128); }

void check_model_shape(const GPTConfig& cfg, const std::string& origin, bool transformers) {
    const std::pair<const char*, std::pair<long long, long long>> fields[] = {
        {"n_layer", {cfg.n_layer, kMaxModelLayers}},
        {"n_embd", {cfg.n_embd, kMaxModelWidth}},
        {"n_head", {cfg.n_head, kMaxModelWidth}},   // divisibility is each caller's, naming its field
        {"vocab_size", {cfg.vocab_size, kMaxModelRows}},
        {transformers ? "vocab_size (padded to a multiple of 128)" : "padded_vocab_size",
         {cfg.padded_vocab_size, kMaxModelRows}},
        {transformers ? "n_positions" : "max_seq_len", {cfg.max_seq_len, kMaxModelRows}}};
    for (const auto& [name, value_max] : fields) {
        if (value_max.first < 1 || value_max.first > value_max.second)
            fail("%s: %s %lld is outside 1..%lld", origin.c_str(), name, value_max.first, value_max.second);
    }
    // per block: the four matrices 12·C² (3C·C, C·C, 4C·C, C·4C), biases and layernorms 13·C. With
    // C <= 2^20 and L <= 2^16 this is below 2^60: no product overflows an int64
    const long long L = cfg.n_layer, C = cfg.n_embd;
    const long long parameters =
        ((long long)cfg.padded_vocab_size + cfg.max_seq_len) * C + L * (12 * C * C + 13 * C) + 2 * C;
    if (parameters > kMaxModelParameters) {
        fail(
            "%s: %lld layers of width %lld, with %d vocabulary and %d position rows, make more than %lld parameters, "
            "the most this build sizes",
            origin.c_str(), L, C, cfg.padded_vocab_size, cfg.max_seq_len, kMaxModelParameters);
    }
}

GPTConfig gpt_config_from_spec(const std::string& spec, int vocab_size, int max_seq_len, int n_embd_override,
                               int n_head_override) {
    if (spec.size() < 2 || spec[0] != 'd' || spec.find_first_not_of("0123456789", 1) != std::string::npos) {
        fail("model spec '%s' is not of the form dN (e.g. d12 for GPT-2 124M)", spec.c_str());
    }
    if (spec.size() > 5) fail("model spec '%s': depth must be in 1..1024", spec.c_str());
    GPTConfig cfg;
    cfg.n_layer = std::stoi(spec.substr(1));
    if (cfg.n_layer < 1 || cfg.n_layer > 1024) fail("model spec '%s': depth must be in 1..1024", spec.c_str());
    switch (cfg.n_layer) {   // GPT-2 small / medium / large / XL
        case 12:
            cfg.n_embd = 768;
            cfg.n_head = 12;
            break;
        case 24:
            cfg.n_embd = 1024;
            cfg.n_head = 16;
            break;
        case 36:
            cfg.n_embd = 1280;
            cfg.n_head = 20;
            break;
        case 48:
            cfg.n_embd = 1600;
            cfg.n_head = 25;
            break;
        default:
            cfg.n_embd = 64 * cfg.n_layer;
            cfg.n_head = cfg.n_layer;
            break;
    }
    if (n_embd_override > 0) cfg.n_embd = n_embd_override;
    if (n_head_override > 0) cfg.n_head = n_head_override;
    if (cfg.n_embd % cfg.n_head != 0) {
        fail("n_embd %d (--n-embd%s) is not divisible by n_head %d (--n-head%s): the heads split the width evenly",
             cfg.n_embd, n_embd_override > 0 ? "" : ", from --model", cfg.n_head,
             n_head_override > 0 ? "" : ", from --model");
    }
    if (vocab_size < 2) fail("vocab size %d is too small", vocab_size);
    if (max_seq_len < 1) fail("max sequence length %d must be positive", max_seq_len);
    cfg.vocab_size = vocab_size;
    cfg.padded_vocab_size = pad_vocab(vocab_size);
    cfg.max_seq_len = max_seq_len;
    std::string origin = "--model " + spec;
    if (n_embd_override > 0) origin += format(" --n-embd %d", n_embd_override);
    if (n_head_override > 0) origin += format(" --n-head %d", n_head_override);
    check_model_shape(cfg, origin);
    return cfg;
}

const char* param_tensor_name(int i) {
    static const char* names[kNumParamTensors] = {"wte",      "wpe",      "ln1w", "ln1b", "qkvw", "qkvb",
                                                  "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                                  "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
    return names[i];
}

bool param_tensor_decays(int i) { return i == kWte || i == kWpe || block_gemm_of_weight(i) >= 0; }

std::vector<int> param_tensor_shape(const GPTConfig& cfg, int i) {
    const int L = cfg.n_layer, C = cfg.n_embd;
    for (const BlockGemmInfo& g : kBlockGemms) {
        if (i == g.weight) return {L, g.out * C, g.in * C};
        if (i == g.bias) return {L, g.out * C};
    }
    switch (i) {
        case kWte: return {cfg.padded_vocab_size, C};
        case kWpe: return {cfg.max_seq_len, C};
        case kLn1w:
        case kLn1b:
        case kLn2w:
        case kLn2b: return {L, C};
        case kLnfw:
        case kLnfb: return {C};
    }
    fail("no parameter tensor %d", i);
}

std::array<size_t, kNumParamTensors> param_tensor_sizes(const GPTConfig& cfg) {
    std::array<size_t, kNumParamTensors> sizes{};
    for (int i = 0; i < kNumParamTensors; i++) {
        size_t n = 1;
        for (int d : param_tensor_shape(cfg, i))
            n *= (size_t)d;
        sizes[i] = n;
    }
    return sizes;
}

std::array<size_t, kNumParamTensors + 1> param_tensor_offsets(const GPTConfig& cfg) {
    const auto sizes = param_tensor_sizes(cfg);
    std::array<size_t, kNumParamTensors + 1> offsets{};
    for (int i = 0; i < kNumParamTensors; i++)
        offsets[i + 1] = offsets[i] + sizes[i];
    return offsets;
}

int block_gemm_of_weight(int param_tensor) {
    for (int g = 0; g < kNumBlockGemms; g++) {
        if (kBlockGemms[g].weight == param_tensor) return g;
    }
    return -1;
}

}   // namespace train_gpt
