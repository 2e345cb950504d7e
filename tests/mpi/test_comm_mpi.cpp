// test_comm_mpi.cpp — the MPI Comm, run as one program on every rank:
//
//   mpirun --oversubscribe -np 4 build/test_mpi      (also -np 1 and -np 2; scripts/test.sh)
//
// Every rank runs every test, so every collective is called by all ranks in the same order.
// Each rank can compute every other rank's input (it is a function of the rank), hence the
// expected result. A test fails on all ranks when it fails on any (MpiTest::TearDown), so rank
// 0's GoogleTest summary speaks for the world; the other ranks print only their failures.
#include "distributed/comm.h"
#include "utils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace train_gpt;

namespace {

Comm* g_comm = nullptr;   // made in main(), before GoogleTest, and destroyed after it

uint32_t bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}

// Rank r's input at index i: integers, so sums of a few are exact and easy to write down.
float int_value(int r, size_t i) { return float(1000 * r + int(i % 997)); }

// Rank r's input at index i: mixed magnitudes and signs, so the order of the additions
// matters (1e8 + 1 == 1e8 in FP32). A small integer hash keeps it the same on every rank.
float messy_value(int r, size_t i) {
    uint32_t h = uint32_t(r) * 2654435761u ^ uint32_t(i) * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    const float mantissa = float(h & 0xffff) / 65536.0f - 0.5f;
    const int exponent = int((h >> 16) % 40) - 20;   // 2^-20 … 2^19
    return std::ldexp(mantissa, exponent) + ((h >> 24) % 3 == 0 ? 1e8f : 0.0f);
}

// The spec of a sum: ((x₀ + x₁) + x₂) + … in FP32.
template <class F>
float rank_order_sum(F value, int world, size_t i) {
    float s = value(0, i);
    for (int r = 1; r < world; r++)
        s += value(r, i);
    return s;
}

// Every rank's copy of `v` is bitwise the same as rank 0's.
void expect_same_on_every_rank(const std::vector<float>& v) {
    const int W = g_comm->world_size();
    std::vector<float> all(W * v.size());
    g_comm->all_gather(all.data(), v.data(), v.size() * sizeof(float));
    for (int r = 1; r < W; r++)
        EXPECT_EQ(0, std::memcmp(all.data(), all.data() + r * v.size(), v.size() * sizeof(float)))
            << "rank " << r << " differs from rank 0";
}

// The first i in [0, n) where got(i) != want(i), or -1. Tests check loops with this rather than
// ASSERT: a rank that returns early from a test would skip collectives the others still call.
template <class Got, class Want>
long first_mismatch(size_t n, Got got, Want want) {
    for (size_t i = 0; i < n; i++)
        if (!(got(i) == want(i))) return long(i);
    return -1;
}

const char* const kOtherRanksFailed = "failed on another rank";

// A test fails everywhere when it fails on any rank.
class MpiTest : public ::testing::Test {
  protected:
    void TearDown() override {
        const double failed_ranks = g_comm->all_reduce_sum(HasFailure() ? 1.0 : 0.0);
        if (failed_ranks > 0 && !HasFailure()) ADD_FAILURE() << kOtherRanksFailed << " (" << failed_ranks << ")";
    }
    int W() const { return g_comm->world_size(); }
    int rank() const { return g_comm->rank(); }
};

// Prints a failed assertion with its rank (installed on ranks > 0 instead of the default printer).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  public:
    explicit RankFailurePrinter(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (r.failed() && !std::strstr(r.summary(), kOtherRanksFailed))
            std::printf("[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                        r.summary());
    }

  private:
    int rank_;
};

TEST_F(MpiTest, RanksMatchTheLauncher) {
    EXPECT_EQ(g_comm->name(), "mpi");
    EXPECT_TRUE(launched_by_mpi());
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    ASSERT_TRUE(size && r && local) << "run under Open MPI's mpirun";
    EXPECT_EQ(W(), std::atoi(size));
    EXPECT_EQ(rank(), std::atoi(r));
    EXPECT_EQ(g_comm->local_rank(), std::atoi(local));
    EXPECT_EQ(g_comm->is_root(), rank() == 0);
    g_comm->barrier();
}

TEST_F(MpiTest, AllReduceSumOfIntegersIsExact) {
    // Lengths below, at and off multiples of the world size (internal padding), and empty.
    for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(7), size_t(4 * W()), size_t(1001)}) {
        std::vector<float> x(n);
        for (size_t i = 0; i < n; i++)
            x[i] = int_value(rank(), i);
        g_comm->all_reduce_sum(x.data(), n);
        // Σ_r (1000 r + i') = 1000 W(W-1)/2 + W i'
        auto want = [&](size_t i) { return float(1000 * W() * (W() - 1) / 2 + W() * int(i % 997)); };
        EXPECT_EQ(first_mismatch(
                      n, [&](size_t i) { return x[i]; }, want),
                  -1)
            << "n=" << n;
    }
}

TEST_F(MpiTest, AllReduceSumAddsInRankOrderIdenticallyOnEveryRankAndEveryCall) {
    const size_t n = 4099;   // prime: padded to W blocks
    std::vector<float> x(n), y(n);
    for (size_t i = 0; i < n; i++)
        x[i] = y[i] = messy_value(rank(), i);
    g_comm->all_reduce_sum(x.data(), n);
    g_comm->all_reduce_sum(y.data(), n);
    EXPECT_EQ(first_mismatch(
                  n, [&](size_t i) { return bits(x[i]); },
                  [&](size_t i) { return bits(rank_order_sum(messy_value, W(), i)); }),
              -1);
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), n * sizeof(float))) << "same call, different bits";
    expect_same_on_every_rank(x);
}

TEST_F(MpiTest, AllReduceSumPropagatesNaNAndInf) {
    std::vector<float> x = {1.0f, 2.0f, 3.0f};
    if (rank() == W() - 1) {
        x[0] = std::numeric_limits<float>::quiet_NaN();
        x[1] = std::numeric_limits<float>::infinity();
    }
    g_comm->all_reduce_sum(x.data(), x.size());
    EXPECT_TRUE(std::isnan(x[0]));
    EXPECT_EQ(x[1], std::numeric_limits<float>::infinity());
    EXPECT_EQ(x[2], 3.0f * W());
}

TEST_F(MpiTest, ReduceScatterGivesEachRankItsBlockOfTheSum) {
    for (size_t n : {size_t(0), size_t(1), size_t(5), size_t(333)}) {
        // src (W, n) on rank r: element (j, i) = messy_value(r, j n + i)
        std::vector<float> src(W() * n), dst(n, -1.0f), again(n);
        for (size_t k = 0; k < src.size(); k++)
            src[k] = messy_value(rank(), k);
        g_comm->reduce_scatter_sum(dst.data(), src.data(), n);
        g_comm->reduce_scatter_sum(again.data(), src.data(), n);
        EXPECT_EQ(first_mismatch(
                      n, [&](size_t i) { return bits(dst[i]); },
                      [&](size_t i) { return bits(rank_order_sum(messy_value, W(), rank() * n + i)); }),
                  -1)
            << "n=" << n;
        EXPECT_EQ(0, std::memcmp(dst.data(), again.data(), n * sizeof(float)));
    }
}

TEST_F(MpiTest, ReduceScatterThenAllGatherEqualsAllReduce) {
    // ZeRO-1's path and the plain all-reduce give the same bits.
    const size_t n = 50;
    std::vector<float> src(W() * n), full(W() * n), block(n), gathered(W() * n);
    for (size_t k = 0; k < src.size(); k++)
        full[k] = src[k] = messy_value(rank(), k);
    g_comm->all_reduce_sum(full.data(), full.size());
    g_comm->reduce_scatter_sum(block.data(), src.data(), n);
    g_comm->all_gather(gathered.data(), block.data(), n * sizeof(float));
    EXPECT_EQ(0, std::memcmp(full.data(), gathered.data(), full.size() * sizeof(float)));
}

TEST_F(MpiTest, AllReduceMaxTakesTheMaximumAndANaNOnOneRankWins) {
    const size_t n = 2 * W() + 5;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> x(n);
    // Index i: rank r holds -(r - i mod W)² - 1, so the max, -1, is held by rank i mod W only.
    for (size_t i = 0; i < n; i++) {
        const int d = rank() - int(i % W());
        x[i] = -float(d * d) - 1.0f;
    }
    // Index 0 and 1: a NaN on one rank only (the last; for index 1 a rank that does not hold the max).
    if (rank() == W() - 1) x[0] = nan;
    if (rank() == 0) x[1] = nan;
    // Index 2: +inf on rank 0. Index 3: -0 everywhere but +0 on the last rank.
    if (rank() == 0) x[2] = std::numeric_limits<float>::infinity();
    x[3] = rank() == W() - 1 && W() > 1 ? 0.0f : -0.0f;
    std::vector<float> y = x;
    g_comm->all_reduce_max(x.data(), n);
    g_comm->all_reduce_max(y.data(), n);
    EXPECT_TRUE(std::isnan(x[0]));
    EXPECT_TRUE(std::isnan(x[1]));
    EXPECT_EQ(x[2], std::numeric_limits<float>::infinity());
    EXPECT_EQ(bits(x[3]), bits(W() > 1 ? 0.0f : -0.0f));
    for (size_t i = 4; i < n; i++)
        EXPECT_EQ(x[i], -1.0f) << "i=" << i;
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), n * sizeof(float)));
    expect_same_on_every_rank(x);
}

TEST_F(MpiTest, AllGatherOfBytesIsInRankOrder) {
    for (size_t b : {size_t(0), size_t(1), size_t(13)}) {
        std::vector<uint8_t> src(b), dst(W() * b + 1, 0xEE);   // one guard byte past the end
        for (size_t i = 0; i < b; i++)
            src[i] = uint8_t(31 * rank() + i);
        g_comm->all_gather(dst.data(), src.data(), b);
        // dst (W, b): row r is rank r's src
        EXPECT_EQ(
            first_mismatch(
                W() * b, [&](size_t k) { return dst[k]; }, [&](size_t k) { return uint8_t(31 * (k / b) + k % b); }),
            -1)
            << "b=" << b;
        EXPECT_EQ(dst.back(), 0xEE) << "wrote past W * bytes_per_rank";
    }
}

TEST_F(MpiTest, AllGatherInPlace) {
    // Each rank's src is its own block of dst: the sharded-parameter gather.
    const size_t b = 10;
    std::vector<uint8_t> buf(W() * b, 0);
    for (size_t i = 0; i < b; i++)
        buf[rank() * b + i] = uint8_t(7 * rank() + i + 1);
    g_comm->all_gather(buf.data(), buf.data() + rank() * b, b);
    for (int r = 0; r < W(); r++)
        for (size_t i = 0; i < b; i++)
            ASSERT_EQ(buf[r * b + i], uint8_t(7 * r + i + 1));
}

TEST_F(MpiTest, BroadcastFromANonZeroRoot) {
    for (int root : {W() - 1, W() / 2, 0}) {
        std::vector<uint8_t> data(17);
        for (size_t i = 0; i < data.size(); i++)
            data[i] = uint8_t(100 * rank() + i);
        g_comm->broadcast(data.data(), data.size(), root);
        EXPECT_EQ(
            first_mismatch(
                data.size(), [&](size_t i) { return data[i]; }, [&](size_t i) { return uint8_t(100 * root + i); }),
            -1)
            << "root " << root;
    }
}

TEST_F(MpiTest, BroadcastRejectsARootOutsideTheWorld) {
    // Checked before any MPI call, on every rank alike: no rank is left waiting.
    EXPECT_THROW(g_comm->broadcast(nullptr, 0, W()), Error);
    EXPECT_THROW(g_comm->broadcast(nullptr, 0, -1), Error);
}

TEST_F(MpiTest, ScalarSumIsInRankOrder) {
    EXPECT_EQ(g_comm->all_reduce_sum(rank() + 0.5), W() * (W() - 1) / 2.0 + 0.5 * W());
    // 1e16 + 1 == 1e16 in double: the rank order is visible.
    auto value = [](int r) { return r % 2 == 0 ? 1.0 : (r == 1 ? 1e16 : -1e16); };
    double want = value(0);
    for (int r = 1; r < W(); r++)
        want += value(r);
    EXPECT_EQ(g_comm->all_reduce_sum(value(rank())), want);
}

TEST_F(MpiTest, SegmentedCallsGiveTheSameBits) {
    // A Comm that moves at most 12 bytes per MPI call runs every collective as many segments;
    // the results must not change.
    auto small = make_mpi_comm(12);
    ASSERT_EQ(small->world_size(), W());
    ASSERT_EQ(small->rank(), rank());
    const size_t n = 4 * W() + 3;
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = messy_value(rank(), i);
    g_comm->all_reduce_sum(a.data(), n);
    small->all_reduce_sum(b.data(), n);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float))) << "all_reduce_sum";

    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = messy_value(rank(), i);
    a[5] = b[5] = rank() == W() - 1 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    g_comm->all_reduce_max(a.data(), n);
    small->all_reduce_max(b.data(), n);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float))) << "all_reduce_max";

    std::vector<float> src(W() * n), ra(n), rb(n);
    for (size_t k = 0; k < src.size(); k++)
        src[k] = messy_value(rank(), 3 * k);
    g_comm->reduce_scatter_sum(ra.data(), src.data(), n);
    small->reduce_scatter_sum(rb.data(), src.data(), n);
    EXPECT_EQ(0, std::memcmp(ra.data(), rb.data(), n * sizeof(float))) << "reduce_scatter_sum";

    const size_t bytes = 29;
    std::vector<uint8_t> mine(bytes), ga(W() * bytes), gb(W() * bytes, 0);
    for (size_t i = 0; i < bytes; i++)
        mine[i] = uint8_t(rank() * 17 + i * 3);
    g_comm->all_gather(ga.data(), mine.data(), bytes);
    small->all_gather(gb.data(), mine.data(), bytes);
    EXPECT_EQ(ga, gb) << "all_gather";
    std::vector<uint8_t> gc(W() * bytes, 0);
    std::memcpy(gc.data() + rank() * bytes, mine.data(), bytes);
    small->all_gather(gc.data(), gc.data() + rank() * bytes, bytes);
    EXPECT_EQ(ga, gc) << "all_gather in place";

    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; i++)
        data[i] = uint8_t(rank() * 5 + i);
    small->broadcast(data.data(), bytes, W() - 1);
    for (size_t i = 0; i < bytes; i++)
        ASSERT_EQ(data[i], uint8_t((W() - 1) * 5 + i));
}

TEST_F(MpiTest, MakeCommPicksMpiUnderTheLauncher) {
    auto c = make_comm();
    EXPECT_EQ(c->name(), "mpi");
    EXPECT_EQ(c->world_size(), W());
    EXPECT_EQ(c->rank(), rank());
}

TEST_F(MpiTest, RejectsASegmentThatCannotHoldAFloat) { EXPECT_THROW(make_mpi_comm(3), Error); }

}   // namespace

int main(int argc, char** argv) {
    // MPI first: GoogleTest then runs inside an initialised world, and MPI_Finalize comes after.
    std::unique_ptr<Comm> comm;
    try {
        comm = make_mpi_comm();
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    g_comm = comm.get();
    ::testing::InitGoogleTest(&argc, argv);
    if (comm->rank() != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new RankFailurePrinter(comm->rank()));
    }
    const int rc = RUN_ALL_TESTS();
    // Everyone's output is out before any rank exits: mpirun kills the rest when one exits non-zero.
    std::fflush(stdout);
    comm->barrier();
    g_comm = nullptr;
    comm.reset();   // MPI_Finalize
    return rc;
}
