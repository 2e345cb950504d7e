// test_sampling.cpp — the next-token sampler (model/sampling.h): every draw lands in the slice of
// one candidate of non-zero probability, a draw near 1 lands among the least likely candidates
// (not on the last id: issue 15, item 8), the frequencies follow the distribution, and top-k,
// top-p and temperature 0 keep what they say.
#include "model/sampling.h"
#include "rng.h"
#include "test_util.h"

#include <cmath>
#include <limits>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// The unnormalised probabilities exp((l − max)/temperature), in long double (the oracle).
std::vector<long double> weights_of(const std::vector<float>& logits, float temperature) {
    float max_logit = -std::numeric_limits<float>::infinity();
    for (float l : logits)
        max_logit = std::max(max_logit, l);
    std::vector<long double> w(logits.size());
    for (size_t i = 0; i < logits.size(); i++)
        w[i] = std::exp(((long double)logits[i] - max_logit) / temperature);
    return w;
}

// Candidate a ranks before candidate b: more likely, or as likely with a lower id.
bool ranks_before(const std::vector<long double>& w, size_t a, size_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
}

// Mass of the candidates ranked before `id`, and the total: the slice of `id` is
// [before, before + w[id]) of [0, total).
struct Slice {
    long double before = 0, total = 0;
};
Slice slice_of(const std::vector<long double>& w, size_t id) {
    Slice s;
    for (size_t i = 0; i < w.size(); i++) {
        s.total += w[i];
        if (ranks_before(w, i, id)) s.before += w[i];
    }
    return s;
}

// The draw u must land in the chosen id's slice, up to the rounding of two double sums over V
// terms (relative 1e-12 of the total: V·2^-53 for V = 50257 is 6e-12 at worst, far below any slice
// width these tests make, which are at least 1e-9 of the total).
void expect_in_slice(const std::vector<float>& logits, double u, int id, const char* what) {
    const std::vector<long double> w = weights_of(logits, 1.0f);
    ASSERT_GE(id, 0) << what;
    ASSERT_LT(id, (int)logits.size()) << what;
    EXPECT_GT(w[id], 0) << what << ": id " << id << " has probability 0";
    const Slice s = slice_of(w, id);
    const long double x = u * s.total, slack = 1e-12L * s.total;
    EXPECT_LE(s.before - slack, x) << what << ": u " << u << " lands before the slice of id " << id;
    EXPECT_LT(x, s.before + w[id] + slack) << what << ": u " << u << " lands after the slice of id " << id;
}

}   // namespace

// Issue 15, item 8: the default sample's second draw is 0.99996908; the model there gave
// <|endoftext|>, the last id (2047), probability 4.3e-5, and the draw landed on it because it was
// the last id in the order of the cumulative sum. Here the same draw, the same EOT probability, and
// a thousand ids (0.0001 of the mass) less likely than it: the draw lands among those.
TEST(Sampling, ADrawNearOneLandsAmongTheLeastLikelyCandidatesNotOnTheLastId) {
    const int V = 2048, eot = V - 1;
    std::vector<float> logits(V, -30.0f);
    logits[267] = 10.0f;   // the bulk of the mass
    for (int i = 0; i < 1000; i++)
        logits[1000 + i] = 10.0f + std::log(1e-7f);   // 1e-7 each
    logits[eot] = 10.0f + std::log(4.3e-5f);
    const double u = 0.99996908;
    const int id = sample_token(logits, SamplingParams{}, u);
    EXPECT_NE(id, eot);
    EXPECT_GE(id, 1000);
    EXPECT_LT(id, 2000);
    expect_in_slice(logits, u, id, "the reported draw");
}

TEST(Sampling, EveryDrawLandsInTheSliceOfACandidateWithNonZeroProbability) {
    Rng rng(7);
    const double edge_draws[] = {0.0, 0.5, 0.99996908, 1.0 - 0x1.0p-53};
    for (int V : {2, 5, 257, 2048, 50257}) {
        for (double scale : {0.1, 3.0, 30.0}) {
            std::vector<float> logits(V);
            for (float& l : logits)
                l = (float)(scale * rng.normal());
            // masked ids (-inf) and a tail that exp() flushes to zero must never be drawn
            logits[V - 1] = -std::numeric_limits<float>::infinity();
            if (V > 2) logits[V / 2] = logits[0] - 1000.0f;
            std::vector<double> draws(std::begin(edge_draws), std::end(edge_draws));
            for (int k = 0; k < 20; k++)
                draws.push_back(rng.uniform());
            for (double u : draws) {
                const int id = sample_token(logits, SamplingParams{}, u);
                expect_in_slice(logits, u, id, format("V %d, scale %g", V, scale).c_str());
            }
        }
    }
}

// 200 000 draws from p = (0.5, 0.25, 0.15, 0.09, 0.01): each count within 5 standard deviations
// of n·p (a false failure has probability below 3e-6 per count).
TEST(Sampling, FrequenciesFollowTheDistribution) {
    const std::vector<double> p = {0.5, 0.25, 0.15, 0.09, 0.01};
    std::vector<float> logits;
    for (double x : p)
        logits.push_back((float)std::log(x));
    const int n = 200000;
    std::vector<int> counts(p.size(), 0);
    Rng rng(11);
    for (int i = 0; i < n; i++)
        counts[sample_token(logits, SamplingParams{}, rng.uniform())]++;
    for (size_t i = 0; i < p.size(); i++) {
        const double sigma = std::sqrt(n * p[i] * (1 - p[i]));
        EXPECT_NEAR(counts[i], n * p[i], 5 * sigma) << "id " << i;
    }
}

TEST(Sampling, TopKAndTopPKeepTheMostLikelyCandidates) {
    // p = (0.05, 0.5, 0.15, 0.3): ranked 1, 3, 2, 0
    const std::vector<float> logits = {std::log(0.05f), std::log(0.5f), std::log(0.15f), std::log(0.3f)};
    SamplingParams top2;
    top2.top_k = 2;   // {1, 3}, renormalised to (0.625, 0.375)
    EXPECT_EQ(sample_token(logits, top2, 0.0), 1);
    EXPECT_EQ(sample_token(logits, top2, 0.62), 1);
    EXPECT_EQ(sample_token(logits, top2, 0.63), 3);
    EXPECT_EQ(sample_token(logits, top2, 1.0 - 0x1.0p-53), 3);
    SamplingParams nucleus;
    nucleus.top_p = 0.79f;   // 0.5 + 0.3 = 0.8 reaches 0.79: {1, 3}
    EXPECT_EQ(sample_token(logits, nucleus, 1.0 - 0x1.0p-53), 3);
    nucleus.top_p = 0.81f;   // needs 2 as well: {1, 3, 2}
    EXPECT_EQ(sample_token(logits, nucleus, 1.0 - 0x1.0p-53), 2);
    nucleus.top_p = 0.4f;   // 0.5 alone reaches it
    EXPECT_EQ(sample_token(logits, nucleus, 0.99), 1);
    SamplingParams all;
    EXPECT_EQ(sample_token(logits, all, 1.0 - 0x1.0p-53), 0);   // the least likely of all four
    SamplingParams k_beyond_v;
    k_beyond_v.top_k = 100;
    EXPECT_EQ(sample_token(logits, k_beyond_v, 1.0 - 0x1.0p-53), 0);
}

TEST(Sampling, TemperatureScalesTheLogitsAndZeroIsGreedy) {
    const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    for (double u : {0.0, 0.7, 1.0 - 0x1.0p-53})
        EXPECT_EQ(sample_token(logits, greedy, u), 1);   // lowest id of the tie
    // temperature 2 halves the logits: p ∝ (e^0.5, e^1.5, e^1.5, e^-1)
    SamplingParams hot;
    hot.temperature = 2.0f;
    const double total = std::exp(0.5) + 2 * std::exp(1.5) + std::exp(-1.0);
    const double first = std::exp(1.5) / total;   // the slice of id 1 is [0, first)
    EXPECT_EQ(sample_token(logits, hot, first * 0.999), 1);
    EXPECT_EQ(sample_token(logits, hot, first * 1.001), 2);
    EXPECT_EQ(sample_token(logits, hot, 1.0 - 0x1.0p-53), 3);
}

TEST(Sampling, NonFiniteLogitsAndBadParametersFail) {
    std::vector<float> logits = {0.0f, 1.0f, std::numeric_limits<float>::quiet_NaN()};
    EXPECT_CONTAINS(error_of([&] { sample_token(logits, SamplingParams{}, 0.5); }), "not finite");
    logits[2] = std::numeric_limits<float>::infinity();
    EXPECT_CONTAINS(error_of([&] { sample_token(logits, SamplingParams{}, 0.5); }), "not finite");
    const std::vector<float> masked(3, -std::numeric_limits<float>::infinity());
    EXPECT_CONTAINS(error_of([&] { sample_token(masked, SamplingParams{}, 0.5); }), "no id has a finite logit");
    EXPECT_CONTAINS(error_of([&] { sample_token({}, SamplingParams{}, 0.5); }), "empty");
    SamplingParams bad;
    bad.top_p = 0.0f;
    EXPECT_CONTAINS(error_of([&] { sample_token({0.0f, 1.0f}, bad, 0.5); }), "top_p");
    bad = SamplingParams{};
    bad.temperature = -1.0f;
    EXPECT_CONTAINS(error_of([&] { sample_token({0.0f, 1.0f}, bad, 0.5); }), "temperature");
    bad = SamplingParams{};
    bad.top_k = -3;
    EXPECT_CONTAINS(error_of([&] { sample_token({0.0f, 1.0f}, bad, 0.5); }), "top_k");
    EXPECT_CONTAINS(error_of([&] { sample_token({0.0f, 1.0f}, SamplingParams{}, 1.0); }), "draw");
}
