// run_tokenizer.h — the tokenizer a run uses, and the check that it is the one its data was made
// with.
//
// The tokenizer, in order of precedence:
//   1. the one given (--tokenizer PATH);
//   2. the one the model came with: a checkpoint's or a transformers directory's tokenizer files
//      (checkpoint/hf_tokenizer.h), when the run starts from one;
//   3. the one beside the training shards: DIR/tokenizer.bin, DIR the directory of the glob's
//      first shard (prepare_text writes it there).
// None of these: the run has no tokenizer (it needs --vocab-size, and samples print ids).
// Shards record the tokenizer that made them (data/shard.h); every shard the run reads that does
// must record the chosen tokenizer's fingerprint, else the run stops naming both tokenizers.
// Shards without a record (llm.c's, older ones) are taken as they are.
#pragma once

#include "data/shard.h"
#include "data/tokenizer.h"

#include <optional>
#include <string>
#include <vector>

namespace train_gpt {

// What the shards of a glob record: the first record found, and the shard it is in (empty if no
// shard records one). Fails, naming two shards, if they record different tokenizers.
struct DataTokenizer {
    ShardTokenizer tokenizer;
    std::string shard;
};
DataTokenizer data_tokenizer(const std::string& glob);

// The run's tokenizer from `flag` (--tokenizer, "" = not given), the model's own (nullopt: the
// run does not start from a model that has one) and the globs of the shards it reads (empty
// strings are skipped; the first non-empty one is the training glob when the run trains).
// `how` is set to a line saying where the tokenizer came from.
std::optional<Tokenizer> choose_run_tokenizer(const std::string& flag, std::optional<Tokenizer> model_tokenizer,
                                              const std::vector<std::string>& globs, std::string* how);

}   // namespace train_gpt
