// bpe_train.h — learning a GPT-2-style byte-level BPE from text (the data tool's half of the BPE;
// encoding, decoding and the vocabulary files are llmc/data/bpe.h, which the trainer uses).
//
// Pre-tokenise each document (GPT-2's pattern, in parallel), count each distinct pre-token, then
// repeatedly merge the most frequent adjacent pair, updating the pair counts incrementally (only
// words containing the pair are touched). Ties go to the pair with the smaller (left id, right
// id). A pair whose concatenation already is a token is merged without a new id. Stops at
// vocab_size ids (256 bytes + merges + <|endoftext|>) or when no pair is left (a small corpus
// gives a smaller vocabulary). Deterministic, whatever the number of threads.
#pragma once

#include "data/bpe.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace train_gpt {

Bpe train_bpe(const std::vector<std::string_view>& documents, int vocab_size, int threads = 1);
// The same from (pre-token, count) pairs.
Bpe train_bpe_from_counts(std::vector<std::pair<std::string, int64_t>> word_counts, int vocab_size);

}   // namespace train_gpt
