// hf_tokenizer.h — a tokenizer as the files of a Hugging Face model directory, and back: what
// makes a checkpoint's step directory a complete model directory (AutoTokenizer and
// pipeline("text-generation") load it as it is), and what a model directory's tokenizer is.
//
// Files written beside the weights:
//   tokenizer.bin             the engine's own table (data/tokenizer.h), exact, EOT included
//   vocab.json, merges.txt    GPT-2's BPE files (the same formats as encoder.json and vocab.bpe,
//                             data/bpe.h): each token in GPT-2's byte alphabet → its id, and the
//                             merges in order; the EOT token as the text "<|endoftext|>"
//   tokenizer_config.json     GPT2Tokenizer, the EOT as bos/eos/unk token, no prefix space,
//                             model_max_length = the model's position table
//   special_tokens_map.json   the same special tokens
// The HF files need a table GPT-2's tokenizer can express: the byte-level one (256 single bytes
// and the EOT, no merges) or a BPE with its merges. A table without merges (llm.c's
// tokenizer.bin alone) gets tokenizer.bin only.
#pragma once

#include "data/tokenizer.h"

#include <optional>
#include <string>

namespace train_gpt {

// Whether the files above can be written for `tokenizer`: a BPE with its merges list, or the byte-level one.
bool hf_tokenizer_writable(const Tokenizer& tokenizer);
// Writes the files above into dir. Returns false when only tokenizer.bin could be written.
bool write_hf_tokenizer(const std::string& dir, const Tokenizer& tokenizer, int model_max_length);

// The tokenizer of a model directory: its tokenizer.bin (with the merges beside it, which
// Tokenizer::load picks up), else vocab.json + merges.txt (a transformers directory);
// nullopt when it has neither.
std::optional<Tokenizer> read_model_tokenizer(const std::string& dir);

}   // namespace train_gpt
