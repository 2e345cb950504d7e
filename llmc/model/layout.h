// layout.h — the shape of a GPT-2 model: its configuration, its parameter tensors (names,
// shapes, order in the flat parameter vector) and the table of the four GEMMs of a block.
//
// These tables are the one place the model, the checkpoints, the FP8 scaling and the FP8
// autotuner learn the layout from; nothing else lists the tensors or the GEMMs again.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace train_gpt {

struct GPTConfig {
    int n_layer = 0;             // L
    int n_head = 0;              // NH
    int n_embd = 0;              // C
    int vocab_size = 0;          // V: real tokens
    int padded_vocab_size = 0;   // Vp: V rounded up to a multiple of 128
    int max_seq_len = 0;         // rows of the position table
};

// Shape from a depth dial "dN": GPT-2's sizes for d12 (124M), d24, d36, d48 (1.5B); otherwise
// n_embd = 64·N, n_head = N (head size 64). n_embd / n_head override when > 0.
GPTConfig gpt_config_from_spec(const std::string& spec, int vocab_size, int max_seq_len, int n_embd_override = 0,
                               int n_head_override = 0);
int pad_vocab(int vocab_size);   // round up to a multiple of 128

// The bounds every size computed from a shape relies on (a tensor's dimensions are ints, its
// element count and the model's a size_t): at most kMaxModelWidth wide (so 4·C fits an int),
// kMaxModelLayers deep, kMaxModelRows of vocabulary or positions, kMaxModelParameters in all.
// Far beyond any model this engine trains; fails naming `origin` (a flag, a manifest, a
// config.json) and the field, before anything is allocated. Checked wherever a shape is made.
constexpr int kMaxModelWidth = 1 << 20, kMaxModelLayers = 1 << 16, kMaxModelRows = 1 << 30;
constexpr long long kMaxModelParameters = 1LL << 40;
// transformers: name the fields as a transformers config.json does (n_positions, not max_seq_len).
void check_model_shape(const GPTConfig& cfg, const std::string& origin, bool transformers = false);

// The parameter tensors in the order of the flat parameter vector (llm.c's order); per-layer
// tensors are stacked along a leading L dimension.
enum ParamTensor {
    kWte,
    kWpe,
    kLn1w,
    kLn1b,
    kQkvw,
    kQkvb,
    kAttprojw,
    kAttprojb,
    kLn2w,
    kLn2b,
    kFcw,
    kFcb,
    kFcprojw,
    kFcprojb,
    kLnfw,
    kLnfb,
    kNumParamTensors
};
const char* param_tensor_name(int i);   // "wte", "qkvw", ...
// Weight decay applies to the 2-D weights only: embeddings and the four matrices of each block.
bool param_tensor_decays(int i);
// Shape of each tensor as stored, e.g. qkvw → {L, 3C, C}.
std::vector<int> param_tensor_shape(const GPTConfig& cfg, int i);
std::array<size_t, kNumParamTensors> param_tensor_sizes(const GPTConfig& cfg);
// Where each tensor starts in the flat vector; entry kNumParamTensors is the total.
std::array<size_t, kNumParamTensors + 1> param_tensor_offsets(const GPTConfig& cfg);

// The four GEMMs of a block, in the order the forward runs them:
//   qkv      (N, C)  → (N, 3C)   input: ln1 of the residual stream
//   attproj  (N, C)  → (N, C)    input: the attention output
//   fc       (N, C)  → (N, 4C)   input: ln2 of the residual stream
//   fcproj   (N, 4C) → (N, C)    input: gelu of fc's output
// out (N, out·C) = inp (N, in·C) · weight[l]ᵀ + bias[l], weight[l] (out·C, in·C).
enum BlockGemm { kQkv, kAttproj, kFc, kFcproj, kNumBlockGemms };
struct BlockGemmInfo {
    const char* name;     // in --fp8-gemms, FP8 telemetry and checkpoints
    ParamTensor weight;   // (L, out·C, in·C)
    ParamTensor bias;     // (L, out·C)
    int in, out;          // input and output widths, in units of C
};
inline constexpr BlockGemmInfo kBlockGemms[kNumBlockGemms] = {
    {"qkv", kQkvw, kQkvb, 1, 3},
    {"attproj", kAttprojw, kAttprojb, 1, 1},
    {"fc", kFcw, kFcb, 1, 4},
    {"fcproj", kFcprojw, kFcprojb, 4, 1},
};
// A set of block GEMMs as a bit mask: bit g stands for kBlockGemms[g].
inline constexpr unsigned kAllBlockGemms = (1u << kNumBlockGemms) - 1;
// The block GEMM whose weight parameter tensor i is, or -1.
int block_gemm_of_weight(int param_tensor);

}   // namespace train_gpt
