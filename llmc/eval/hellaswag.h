// hellaswag.h — HellaSwag, evaluated as llm.c evaluates it: completion style, acc_norm.
//
// The examples come from the official hellaswag_val.jsonl (eval/hellaswag_data.h: the file,
// tokenised). Each example becomes four token rows, context + ending, the ending tokenised with a
// leading space: encode(ctx) + encode(" " + ending). The model reads each row; an ending's score
// is the mean cross-entropy of its tokens (each predicted from everything before it), and the
// predicted ending is the one of lowest mean loss: acc_norm, the accuracy llm.c reports (GPT-2
// 124M: about 0.2955). acc takes the lowest summed loss instead. Ties go to the
// lower index (torch.argmin's rule).
//
// A row longer than the model's window (T + 1 tokens: T inputs and the target after the last)
// keeps its ending whole and its last context tokens (llm.c's examples fit GPT-2's 1024; the
// small models of this project may not). Rows are batched B at a time, right-padded.
// Examples are split over the ranks (rank r takes r, r + W, ...); every rank gets every result.
#pragma once

#include "distributed/comm.h"
#include "eval/hellaswag_data.h"
#include "model/gpt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace train_gpt {

struct HellaSwagResult {
    int64_t examples = 0, correct = 0, correct_norm = 0;
    int64_t truncated = 0;     // examples with a row longer than the window
    std::string choices;       // the acc_norm choice of every example, '0'..'3', in file order
    std::string choices_acc;   // the acc choice (lowest summed loss) of every example, likewise
    double acc() const { return examples > 0 ? (double)correct / examples : 0.0; }
    double acc_norm() const { return examples > 0 ? (double)correct_norm / examples : 0.0; }
};

// The rows' scores on `model` (allocated for max_B rows of max_T positions), B rows a forward.
// `comm`: the host collectives (each rank evaluates its share; all ranks call this).
HellaSwagResult evaluate_hellaswag(GPT& model, const std::vector<HellaSwagExample>& examples, int max_B, int max_T,
                                   Comm& comm);

}   // namespace train_gpt
