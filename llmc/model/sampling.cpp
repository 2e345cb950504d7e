// sampling.cpp — see sampling.h.
#include "model/sampling.h"

#include "utils.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace train_gpt {

int sample_token(const std::vector<float>& logits, const SamplingParams& params, double u) {
    if (logits.empty()) fail("sample_token: empty logits");
    if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
        fail("sampling: temperature %g must be finite and >= 0", params.temperature);
    }
    if (params.top_k < 0) fail("sampling: top_k %d must be >= 0 (0 = every id)", params.top_k);
    if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) fail("sampling: top_p %g must be in (0, 1]", params.top_p);
    if (!(u >= 0.0 && u < 1.0)) fail("sampling: the draw %g is outside [0, 1)", u);
    const int V = (int)logits.size();
    int best = -1;   // the most likely id, the lowest on ties
    for (int i = 0; i < V; i++) {
        if (std::isnan(logits[i]) || logits[i] == INFINITY) fail("sampling: logit %d is %g, not finite", i, logits[i]);
        if (logits[i] != -INFINITY && (best < 0 || logits[i] > logits[best])) best = i;
    }
    if (best < 0) fail("sampling: no id has a finite logit");
    if (params.temperature == 0.0f) return best;

    // p_i ∝ exp((l_i − max) / temperature) ≤ 1, in double
    std::vector<double> weight(V);
    for (int i = 0; i < V; i++)
        weight[i] = std::exp(((double)logits[i] - logits[best]) / params.temperature);
    // candidates in order of decreasing probability, lower id first on ties
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    int n = params.top_k > 0 ? std::min(params.top_k, V) : V;
    auto before = [&](int a, int b) { return weight[a] > weight[b] || (weight[a] == weight[b] && a < b); };
    std::partial_sort(order.begin(), order.begin() + n, order.end(), before);
    // cumulative mass of the candidates, cut at the nucleus
    std::vector<double> cdf(n);   // cdf[j] = mass of candidates 0..j
    double total = 0;
    for (int j = 0; j < n; j++)
        cdf[j] = total += weight[order[j]];
    if (params.top_p < 1.0f) {
        const double target = params.top_p * total;
        int kept = 0;
        while (kept < n - 1 && cdf[kept] < target)
            kept++;
        n = kept + 1;
    }
    while (n > 1 && weight[order[n - 1]] == 0.0)
        n--;   // ids exp() flushed to zero are not candidates
    // inverse CDF within the candidates' own total: x < cdf[n-1] always, as u < 1
    const double x = u * cdf[n - 1];
    const int j = (int)(std::upper_bound(cdf.begin(), cdf.begin() + n, x) - cdf.begin());
    return order[std::min(j, n - 1)];
}

}   // namespace train_gpt
