// hellaswag.cpp — see hellaswag.h.
#include "eval/hellaswag.h"

#include "utils.h"

#include <algorithm>

namespace train_gpt {

namespace {

// One row: context + ending, cut to the window (the ending whole, the context's last tokens).
struct Row {
    std::vector<int32_t> tokens;   // (n ≤ max_T + 1)
    int ending_start = 0;          // index of the ending's first token in tokens (≥ 1)
};

Row make_row(const HellaSwagExample& ex, int e, int max_T, bool* truncated) {
    const std::vector<int>& end = ex.endings[e];
    const int window = max_T + 1;
    if ((int)end.size() >= window) {
        fail("a HellaSwag ending of %zu tokens does not fit the model's window of %d positions", end.size(), max_T);
    }
    const int keep_context = std::min<int>((int)ex.context.size(), window - (int)end.size());
    *truncated = *truncated || keep_context < (int)ex.context.size();
    Row r;
    r.tokens.assign(ex.context.end() - keep_context, ex.context.end());
    r.ending_start = (int)r.tokens.size();
    r.tokens.insert(r.tokens.end(), end.begin(), end.end());
    return r;
}

}   // namespace

HellaSwagResult evaluate_hellaswag(GPT& model, const std::vector<HellaSwagExample>& examples, int max_B, int max_T,
                                   Comm& comm) {
    const int64_t n = (int64_t)examples.size();
    const int rank = comm.rank(), world = comm.world_size();
    // this rank's examples' rows, in order; per row the summed and the mean loss of its ending
    std::vector<int64_t> mine;
    for (int64_t i = rank; i < n; i += world)
        mine.push_back(i);
    std::vector<Row> rows;
    std::vector<float> truncated(n, 0.0f);
    for (int64_t i : mine) {
        bool cut = false;
        for (int e = 0; e < 4; e++)
            rows.push_back(make_row(examples[i], e, max_T, &cut));
        truncated[i] = cut ? 1.0f : 0.0f;
    }
    std::vector<double> sum_loss(rows.size()), mean_loss(rows.size());
    for (size_t first = 0; first < rows.size(); first += max_B) {
        const int B = (int)std::min<size_t>(max_B, rows.size() - first);
        int T = 1;
        for (int b = 0; b < B; b++)
            T = std::max(T, (int)rows[first + b].tokens.size() - 1);
        std::vector<int32_t> inputs((size_t)B * T, 0), targets((size_t)B * T, 0);   // (B, T), right-padded
        for (int b = 0; b < B; b++) {
            const std::vector<int32_t>& t = rows[first + b].tokens;
            std::copy(t.begin(), t.end() - 1, inputs.begin() + (size_t)b * T);
            std::copy(t.begin() + 1, t.end(), targets.begin() + (size_t)b * T);
        }
        model.forward(inputs.data(), targets.data(), B, T);
        const std::vector<float>& losses = model.token_losses();   // (B, T)
        for (int b = 0; b < B; b++) {
            const Row& r = rows[first + b];
            // position p predicts token p + 1: the ending's tokens are predicted at ending_start − 1 ..
            double s = 0;
            const int from = r.ending_start - 1, to = (int)r.tokens.size() - 1;
            for (int p = from; p < to; p++)
                s += losses[(size_t)b * T + p];
            sum_loss[first + b] = s;
            mean_loss[first + b] = s / (to - from);
        }
    }
    // every example's two choices, gathered by a sum (each example is one rank's)
    std::vector<float> choice(2 * n, 0.0f);   // [acc_norm choice, acc choice] per example
    for (size_t k = 0; k < mine.size(); k++) {
        const double* mean = &mean_loss[4 * k];
        const double* sum = &sum_loss[4 * k];
        choice[2 * mine[k]] = (float)(std::min_element(mean, mean + 4) - mean);   // the first of equal minima
        choice[2 * mine[k] + 1] = (float)(std::min_element(sum, sum + 4) - sum);
    }
    comm.all_reduce_sum(choice.data(), choice.size());
    comm.all_reduce_sum(truncated.data(), truncated.size());
    HellaSwagResult r;
    r.examples = n;
    for (int64_t i = 0; i < n; i++) {
        const int norm = (int)choice[2 * i], plain = (int)choice[2 * i + 1];
        r.choices.push_back((char)('0' + norm));
        r.choices_acc.push_back((char)('0' + plain));
        r.correct_norm += norm == examples[i].label;
        r.correct += plain == examples[i].label;
        r.truncated += truncated[i] != 0.0f;
    }
    return r;
}

}   // namespace train_gpt
