// comm.cpp — the single-process Comm and make_comm(); see comm.h. (MPI: comm_mpi.cpp.)
#include "distributed/comm.h"

#include "utils.h"

#include <cstdlib>
#include <cstring>

namespace train_gpt {

namespace {

// World of one: sums and maxima over one rank are the data itself; gathers and scatters are
// a copy of the one block.
class SingleComm final : public Comm {
  public:
    explicit SingleComm(CommCopyFn copy) : copy_(std::move(copy)) {
        if (!copy_) copy_ = [](void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); };
    }
    std::string name() const override { return "single"; }
    int rank() const override { return 0; }
    int world_size() const override { return 1; }
    int local_rank() const override { return 0; }

    void all_reduce_sum(float*, size_t) override {}
    void all_reduce_max(float*, size_t) override {}
    void reduce_scatter_sum(float* dst, const float* src, size_t n_per_rank) override {
        if (dst != src && n_per_rank > 0) copy_(dst, src, n_per_rank * sizeof(float));
    }
    void all_gather(void* dst, const void* src, size_t bytes_per_rank) override {
        if (dst != src && bytes_per_rank > 0) copy_(dst, src, bytes_per_rank);
    }
    void broadcast(void*, size_t, int root) override {
        if (root != 0) fail("broadcast: root %d is not a rank of a world of 1", root);
    }
    void barrier() override {}
    double all_reduce_sum(double x) override { return x; }
    [[noreturn]] void abort_job(int exit_code) override { std::_Exit(exit_code); }

  private:
    CommCopyFn copy_;
};

}   // namespace

std::unique_ptr<Comm> make_single_comm(CommCopyFn copy) { return std::make_unique<SingleComm>(std::move(copy)); }

bool launched_by_mpi() {
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
        if (std::getenv(var)) return true;
    }
    return false;
}

std::unique_ptr<Comm> make_comm() { return launched_by_mpi() ? make_mpi_comm() : make_single_comm(); }

}   // namespace train_gpt
