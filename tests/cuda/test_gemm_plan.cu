// test_gemm_plan.cu — the state of a GEMM plan across calls (cuda/matmul.cuh, detail::run_gemm_plan),
// host-side: no GPU needed, the search and the launch are stand-ins that count their calls.
// The properties: a problem is searched once; a search that throws is not recorded, so the next
// call searches again (before, the plan was marked searched before its search ran, and every later
// GEMM of the shape returned false, which the callers ignored: a GEMM skipped silently); a problem
// known to be unsupported fails for a caller that cannot take "no", and returns false to one that
// can; a search whose launch was already the call's GEMM is not launched a second time.
#include "cuda/matmul.cuh"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using namespace train_gpt::cuda;
using detail::GemmSearchResult;

namespace {

struct Counts {
    int searches = 0, launches = 0, unsupported = 0;
};

// One call of the plan with stand-ins: search() returns `result` (or throws when `throws`).
bool call(GemmPlan& plan, Counts& n, IfUnsupported mode, const GemmSearchResult& result, bool throws = false) {
    return detail::run_gemm_plan(
        plan, mode,
        [&]() {
            n.searches++;
            if (throws) throw std::runtime_error("cuBLAS error during the search");
            return result;
        },
        [&](const GemmAlgo&) { n.launches++; },
        [&](const std::string& why) {
            n.unsupported++;
            throw std::runtime_error("cannot run: " + why);
        });
}

GemmSearchResult found(bool wrote_d) { return GemmSearchResult{GemmAlgo{}, wrote_d, ""}; }
GemmSearchResult none() { return GemmSearchResult{std::nullopt, false, "3 algorithm(s) offered"}; }

}   // namespace

TEST(GemmPlan, IsSearchedOnceAndThenLaunched) {
    GemmPlan plan;
    Counts n;
    EXPECT_TRUE(call(plan, n, IfUnsupported::Fail, found(/*wrote_d=*/true)));
    EXPECT_EQ(n.searches, 1);
    EXPECT_EQ(n.launches, 0) << "the search's launch on D was the call's GEMM: launching again would add twice";
    EXPECT_TRUE(call(plan, n, IfUnsupported::Fail, found(true)));
    EXPECT_TRUE(call(plan, n, IfUnsupported::Fail, found(true)));
    EXPECT_EQ(n.searches, 1);
    EXPECT_EQ(n.launches, 2);
}

TEST(GemmPlan, AnAutotunedSearchLaunchesOnD) {   // the auto-tuner timed on scratch: D still to write
    GemmPlan plan;
    Counts n;
    EXPECT_TRUE(call(plan, n, IfUnsupported::Fail, found(/*wrote_d=*/false)));
    EXPECT_EQ(n.searches, 1);
    EXPECT_EQ(n.launches, 1);
}

TEST(GemmPlan, ASearchThatThrowsIsSearchedAgain) {
    GemmPlan plan;
    Counts n;
    EXPECT_THROW(call(plan, n, IfUnsupported::Fail, found(true), /*throws=*/true), std::runtime_error);
    EXPECT_FALSE(plan.searched) << "a search that did not return recorded nothing";
    // the next call of the shape searches again and runs the GEMM (before: returned false, skipped)
    EXPECT_TRUE(call(plan, n, IfUnsupported::Fail, found(true)));
    EXPECT_EQ(n.searches, 2);
    EXPECT_TRUE(plan.searched);
    // the same for a caller that takes "unsupported" for an answer: a failed search is not one
    GemmPlan other;
    Counts m;
    EXPECT_THROW(call(other, m, IfUnsupported::ReturnFalse, found(true), true), std::runtime_error);
    EXPECT_TRUE(call(other, m, IfUnsupported::ReturnFalse, found(true)));
    EXPECT_EQ(m.searches, 2);
}

TEST(GemmPlan, AnUnsupportedProblemFailsEveryCallerThatCannotTakeNo) {
    GemmPlan plan;
    Counts n;
    // the FP8 GEMMs (ReturnFalse) learn it once and fall back
    EXPECT_FALSE(call(plan, n, IfUnsupported::ReturnFalse, none()));
    EXPECT_FALSE(call(plan, n, IfUnsupported::ReturnFalse, none()));
    EXPECT_EQ(n.searches, 1);
    // a caller without a fallback, on the same problem, fails naming what the search saw
    try {
        call(plan, n, IfUnsupported::Fail, none());
        FAIL() << "a GEMM of an unsupported problem returned instead of failing";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("3 algorithm(s) offered"), std::string::npos) << e.what();
    }
    EXPECT_EQ(n.launches, 0);
    EXPECT_EQ(n.unsupported, 1);
    // and so does the first call of a problem nobody has searched
    GemmPlan fresh;
    EXPECT_THROW(call(fresh, n, IfUnsupported::Fail, none()), std::runtime_error);
    EXPECT_EQ(n.unsupported, 2);
}
