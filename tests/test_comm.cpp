// test_comm.cpp — the single-process Comm (a world of one) and how make_comm() chooses.
// The MPI Comm has its own binary, run under mpirun: tests/mpi/test_comm_mpi.cpp.
#include "distributed/comm.h"
#include "test_util.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using namespace train_gpt;

namespace {

// Sets or unsets environment variables for one scope, then puts back what was there.
class EnvOverride {
  public:
    void set(const char* name, const char* value) {
        remember(name);
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~EnvOverride() {
        for (auto& [name, old] : saved_) {
            if (old)
                setenv(name.c_str(), old->c_str(), 1);
            else
                unsetenv(name.c_str());
        }
    }

  private:
    void remember(const char* name) {
        const char* v = std::getenv(name);
        saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

uint32_t bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}

}   // namespace

TEST(SingleComm, IsRankZeroOfAWorldOfOne) {
    auto c = make_single_comm();
    EXPECT_EQ(c->name(), "single");
    EXPECT_EQ(c->rank(), 0);
    EXPECT_EQ(c->world_size(), 1);
    EXPECT_EQ(c->local_rank(), 0);
    EXPECT_TRUE(c->is_root());
    c->barrier();
}

TEST(SingleComm, ReductionsLeaveTheDataBitForBit) {
    auto c = make_single_comm();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> x = {1.5f, -0.0f, nan, std::numeric_limits<float>::infinity(), 3e38f};
    std::vector<float> sum = x, max = x;
    c->all_reduce_sum(sum.data(), sum.size());
    c->all_reduce_max(max.data(), max.size());
    for (size_t i = 0; i < x.size(); i++) {
        EXPECT_EQ(bits(sum[i]), bits(x[i])) << i;
        EXPECT_EQ(bits(max[i]), bits(x[i])) << i;
    }
    c->all_reduce_sum(static_cast<float*>(nullptr), 0);
    EXPECT_EQ(c->all_reduce_sum(0.1), 0.1);
}

TEST(SingleComm, ReduceScatterAndAllGatherCopyTheOneBlock) {
    auto c = make_single_comm();
    const std::vector<float> src = {1, 2, 3};
    std::vector<float> dst(3, 0.0f);
    c->reduce_scatter_sum(dst.data(), src.data(), 3);
    EXPECT_EQ(dst, src);

    const std::vector<uint8_t> bytes = {9, 8, 7, 6, 5};
    std::vector<uint8_t> out(6, 0xEE);
    c->all_gather(out.data(), bytes.data(), 5);
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 5), bytes);
    EXPECT_EQ(out[5], 0xEE) << "wrote past bytes_per_rank";
    c->all_gather(out.data(), out.data(), 5);   // in place: nothing to do
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 5), bytes);
}

TEST(SingleComm, BroadcastFromRootZeroOnlyAndNothingMoves) {
    auto c = make_single_comm();
    std::vector<uint8_t> data = {1, 2, 3};
    c->broadcast(data.data(), data.size(), 0);
    EXPECT_EQ(data, (std::vector<uint8_t>{1, 2, 3}));
    EXPECT_CONTAINS(test::error_of([&] { c->broadcast(data.data(), data.size(), 1); }), "root 1");
}

TEST(SingleComm, CopiesThroughTheGivenCopyFunction) {
    // A device backend passes its device-to-device copy; the Comm must not memcpy itself.
    size_t copied = 0;
    auto c = make_single_comm([&](void* dst, const void* src, size_t bytes) {
        copied += bytes;
        std::memmove(dst, src, bytes);
    });
    float src[4] = {1, 2, 3, 4}, dst[4] = {};
    c->reduce_scatter_sum(dst, src, 4);
    c->all_gather(dst, src, 2 * sizeof(float));
    c->all_gather(dst, dst, 2 * sizeof(float));   // in place: no copy
    EXPECT_EQ(copied, 6 * sizeof(float));
    EXPECT_EQ(dst[3], 4.0f);
}

TEST(MakeComm, ChoosesMpiOnlyWhenALauncherSetTheEnvironment) {
    EnvOverride env;
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
        env.set(v, nullptr);
    EXPECT_FALSE(launched_by_mpi());
    EXPECT_EQ(make_comm()->name(), "single");
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
        EnvOverride one;
        one.set(v, "2");
        EXPECT_TRUE(launched_by_mpi()) << v;
    }
    EXPECT_FALSE(launched_by_mpi());
}
