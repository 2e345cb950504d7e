// hellaswag_data.h — HellaSwag's file, read and tokenised (the evaluation: eval/hellaswag.h).
//
// The file is the official hellaswag_val.jsonl (dev/data/hellaswag.sh downloads it): one JSON
// object per line with "ctx" (the context), "endings" (four candidate continuations) and "label"
// (the index of the right one); other fields are ignored. Each example becomes the context's
// tokens and the four endings' tokens, each ending tokenised with a leading space:
// encode(ctx) and encode(" " + ending), as llm.c renders an example.
#pragma once

#include "data/tokenizer.h"

#include <array>
#include <string>
#include <vector>

namespace train_gpt {

struct HellaSwagExample {
    std::string source;                        // "file:line", for messages
    int label = 0;                             // 0..3
    std::vector<int> context;                  // encode(ctx)
    std::array<std::vector<int>, 4> endings;   // encode(" " + ending)
};

// The first `limit` examples (0: all) of a hellaswag jsonl file, tokenised; fails naming the file
// and line for a line that is not an example.
std::vector<HellaSwagExample> load_hellaswag(const std::string& path, const Tokenizer& tokenizer, int limit = 0);

// Fails, naming the example's file and line, if an ending cannot fit a window of max_T positions
// with at least one context token before it (an evaluation keeps the ending whole and cuts the
// context): checked when the run starts, not when it evaluates after training. position_table:
// the model's (the longest -t it takes), for the message's advice.
void check_hellaswag_fits(const std::vector<HellaSwagExample>& examples, int max_T, int position_table);

}   // namespace train_gpt
