// init_from.h — the model --init-from names: a checkpoint root (its newest complete step), a
// checkpoint step directory, or a transformers GPT-2 directory (GPT2LMHeadModel.save_pretrained,
// safetensors weights: one model.safetensors or shards with an index), and what it holds: the
// model's shape, its weights, and its tokenizer files (checkpoint/hf_tokenizer.h).
//
// A checkpoint gives its FP32 master weights (the optimizer's copy: what training continues
// from), a transformers directory its weights as stored (F32, BF16 or F16, widened). A
// transformers config must describe GPT-2 as the engine computes it: GELU with the tanh
// approximation, n_inner 4·n_embd, layernorm epsilon 1e-5, tied embeddings, attention scaled by
// 1/√head_size; anything else is refused, naming the field.
#pragma once

#include "data/tokenizer.h"
#include "model/layout.h"

#include <optional>
#include <string>
#include <vector>

namespace train_gpt {

struct ModelDir {
    std::string dir;           // the step directory or the transformers directory
    bool checkpoint = false;   // a train_gpt checkpoint (else a transformers directory)
    GPTConfig model;
    std::string description;    // for the start-up lines: what was found where
    std::string root;           // the checkpoint root it is the newest of; "": given itself
    int manifest_version = 0;   // a checkpoint's (1: no checksum of its own values); 0 for a transformers dir
};

// Resolves --init-from PATH; fails naming the path when it is none of the three.
ModelDir find_model_dir(const std::string& path);

// The model's weights in the engine's layout (gpt.h's flat vector, FP32, padding rows zero).
std::vector<float> read_model_weights(const ModelDir& model);
// The tokenizer its directory holds (checkpoint/hf_tokenizer.h: read_model_tokenizer), or none.
// Both readers say so where a live run pruned the newest checkpoint of a root while they read it.
std::optional<Tokenizer> read_model_dir_tokenizer(const ModelDir& model);

// transformers' config.json (GPT2Config) as a model shape; fails naming the file and field.
GPTConfig gpt_config_from_hf(const std::string& config_json_path);

}   // namespace train_gpt
