// comm_mpi.cpp — the MPI Comm on host buffers (the CPU backend's data parallelism); see comm.h.
//
// Determinism. MPI's own reductions (MPI_Allreduce, MPI_Reduce_scatter) may combine partial
// sums in an order that depends on the algorithm Open MPI picks for the message size, so
// float sums are done here by hand:
//   reduce_scatter:  MPI_Alltoall sends block j of every rank to rank j; rank j adds the W
//                    copies of its block in rank order 0, 1, …, W-1.
//   all_reduce_sum:  pad n to W equal blocks, reduce_scatter, then MPI_Allgather.
// Only bytes travel through MPI; every addition is ours, in a fixed order, so each element's sum
// is ((x₀ + x₁) + x₂) + … on every rank and in every run. Maxima are exact in any order, so
// all_reduce_max uses MPI_Allreduce with a custom op that propagates NaN (MPI_MAX's handling of
// NaN is unspecified) and breaks the -0/+0 tie towards +0.
#include "distributed/comm.h"

#include "utils.h"

#define OMPI_SKIP_MPICXX 1   // the C API only: Open MPI's deprecated C++ bindings stay out
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <vector>

namespace train_gpt {

namespace {

void mpi_check(int rc, const char* call, const char* file, int line) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = std::snprintf(msg, sizeof msg, "code %d", rc);
    fail("MPI error at %s:%d: %s: %.*s", file, line, call, len, msg);
}
#define mpiCheck(call) mpi_check((call), #call, __FILE__, __LINE__)

// max(a, b) with NaN winning and +0 beating -0: commutative and associative on bit patterns,
// so every reduction order gives every rank the same bits.
inline float nan_max(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
    if (a != b) return a > b ? a : b;
    return std::signbit(a) ? b : a;
}

void nan_max_op(void* in, void* inout, int* len, MPI_Datatype*) {
    const float* a = static_cast<const float*>(in);
    float* b = static_cast<float*>(inout);
    for (int i = 0; i < *len; i++)
        b[i] = nan_max(a[i], b[i]);
}

// Process-wide MPI lifetime: MPI_Init by the first MpiComm (unless the program did it), and
// MPI_Finalize by the last one destroyed, if we initialised it.
int g_live_comms = 0;
bool g_we_initialised = false;

class MpiComm final : public Comm {
  public:
    explicit MpiComm(size_t segment_bytes) : segment_bytes_(segment_bytes) {
        // Preconditions: at least one float per call, and byte counts that fit MPI's int.
        if (segment_bytes_ < sizeof(float) || segment_bytes_ > size_t(INT_MAX))
            fail("MPI comm: segment of %zu bytes is outside [4, %d]", segment_bytes_, INT_MAX);
        int flag = 0;
        mpiCheck(MPI_Finalized(&flag));
        if (flag) fail("MPI comm: MPI was already finalised in this process; create the Comm once, at start-up");
        mpiCheck(MPI_Initialized(&flag));
        if (!flag) {
            mpiCheck(MPI_Init(nullptr, nullptr));
            g_we_initialised = true;
        }
        g_live_comms++;
        // Errors come back as codes (mpiCheck turns them into train_gpt::Error), not aborts.
        mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
        mpiCheck(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
        mpiCheck(MPI_Comm_rank(comm_, &rank_));
        mpiCheck(MPI_Comm_size(comm_, &world_));
        MPI_Comm node;
        mpiCheck(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
        mpiCheck(MPI_Comm_rank(node, &local_rank_));
        mpiCheck(MPI_Comm_free(&node));
        mpiCheck(MPI_Op_create(&nan_max_op, /*commute=*/1, &nan_max_));
    }

    ~MpiComm() override {
        // No throwing from a destructor: errors here are ignored. While an exception unwinds
        // (this rank failed; the others may be in a collective), nothing collective: the
        // communicator is not freed and MPI not finalised; abort_job() follows.
        if (std::uncaught_exceptions() > 0) return;
        MPI_Op_free(&nan_max_);
        MPI_Comm_free(&comm_);
        if (--g_live_comms == 0 && g_we_initialised) MPI_Finalize();
    }

    std::string name() const override { return "mpi"; }
    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    int local_rank() const override { return local_rank_; }

    void all_reduce_sum(float* data, size_t n) override {
        const size_t W = world_;
        const size_t seg = segment_bytes_ / sizeof(float);   // elements of data per segment
        for (size_t off = 0; off < n; off += seg) {
            const size_t len = std::min(seg, n - off);
            const size_t chunk = (len + W - 1) / W;   // this segment as W padded blocks
            padded_.assign(W * chunk, 0.0f);          // (W, chunk)
            std::memcpy(padded_.data(), data + off, len * sizeof(float));
            block_.resize(chunk);
            sum_blocks(block_.data(), padded_.data(), chunk);   // (chunk): my block of the sum
            mpiCheck(MPI_Allgather(block_.data(), int(chunk), MPI_FLOAT, padded_.data(), int(chunk), MPI_FLOAT, comm_));
            std::memcpy(data + off, padded_.data(), len * sizeof(float));
        }
    }

    void all_reduce_max(float* data, size_t n) override {
        const size_t seg = segment_bytes_ / sizeof(float);
        for (size_t off = 0; off < n; off += seg) {
            const size_t len = std::min(seg, n - off);
            mpiCheck(MPI_Allreduce(MPI_IN_PLACE, data + off, int(len), MPI_FLOAT, nan_max_, comm_));
        }
    }

    void reduce_scatter_sum(float* dst, const float* src, size_t n_per_rank) override {
        const size_t W = world_;
        const size_t seg = std::max<size_t>(1, segment_bytes_ / sizeof(float) / W);   // per rank
        if (n_per_rank <= seg) {                                                      // src is already (W, n_per_rank)
            if (n_per_rank > 0) sum_blocks(dst, src, n_per_rank);
            return;
        }
        for (size_t off = 0; off < n_per_rank; off += seg) {
            const size_t len = std::min(seg, n_per_rank - off);
            padded_.resize(W * len);   // (W, len): columns off… of src
            for (size_t r = 0; r < W; r++)
                std::memcpy(padded_.data() + r * len, src + r * n_per_rank + off, len * sizeof(float));
            sum_blocks(dst + off, padded_.data(), len);
        }
    }

    void all_gather(void* dst, const void* src, size_t bytes_per_rank) override {
        const size_t W = world_;
        char* out = static_cast<char*>(dst);              // (W, bytes_per_rank)
        const char* in = static_cast<const char*>(src);   // (bytes_per_rank)
        const bool in_place = in == out + rank_ * bytes_per_rank;
        const size_t seg = std::max<size_t>(1, segment_bytes_ / W);   // bytes per rank per call
        if (bytes_per_rank <= seg) {
            if (bytes_per_rank == 0) return;
            mpiCheck(MPI_Allgather(in_place ? MPI_IN_PLACE : in, int(bytes_per_rank), MPI_BYTE, out,
                                   int(bytes_per_rank), MPI_BYTE, comm_));
            return;
        }
        for (size_t off = 0; off < bytes_per_rank; off += seg) {
            const size_t len = std::min(seg, bytes_per_rank - off);
            bytes_.resize(W * len);   // (W, len)
            mpiCheck(MPI_Allgather(in + off, int(len), MPI_BYTE, bytes_.data(), int(len), MPI_BYTE, comm_));
            for (size_t r = 0; r < W; r++)
                std::memcpy(out + r * bytes_per_rank + off, bytes_.data() + r * len, len);
        }
    }

    void broadcast(void* data, size_t bytes, int root) override {
        if (root < 0 || root >= world_) fail("broadcast: root %d is not a rank of a world of %d", root, world_);
        char* p = static_cast<char*>(data);
        for (size_t off = 0; off < bytes; off += segment_bytes_) {
            const size_t len = std::min(segment_bytes_, bytes - off);
            mpiCheck(MPI_Bcast(p + off, int(len), MPI_BYTE, root, comm_));
        }
    }

    void barrier() override { mpiCheck(MPI_Barrier(comm_)); }

    [[noreturn]] void abort_job(int exit_code) override {
        MPI_Abort(MPI_COMM_WORLD, exit_code);   // returns only if MPI could not abort
        std::_Exit(exit_code);
    }

    double all_reduce_sum(double x) override {
        std::vector<double> all(world_);
        mpiCheck(MPI_Allgather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_));
        double sum = all[0];
        for (int r = 1; r < world_; r++)
            sum += all[r];   // rank order
        return sum;
    }

  private:
    // dst (n) ← Σ_r block r of everyone's src (W, n) that belongs to me: an all-to-all brings
    // block `rank_` of every rank here, then we add them in rank order.
    void sum_blocks(float* dst, const float* src, size_t n) {
        const size_t W = world_;
        recv_.resize(W * n);   // (W, n): row r from rank r
        mpiCheck(MPI_Alltoall(src, int(n), MPI_FLOAT, recv_.data(), int(n), MPI_FLOAT, comm_));
        std::memcpy(dst, recv_.data(), n * sizeof(float));
        for (size_t r = 1; r < W; r++) {
            const float* row = recv_.data() + r * n;
            for (size_t i = 0; i < n; i++)
                dst[i] += row[i];   // dst = ((x₀ + x₁) + x₂) + …
        }
    }

    size_t segment_bytes_;
    MPI_Comm comm_ = MPI_COMM_NULL;
    MPI_Op nan_max_ = MPI_OP_NULL;
    int rank_ = 0, world_ = 1, local_rank_ = 0;
    std::vector<float> padded_, block_, recv_;   // scratch, reused across calls
    std::vector<char> bytes_;
};

}   // namespace

std::unique_ptr<Comm> make_mpi_comm(size_t segment_bytes) { return std::make_unique<MpiComm>(segment_bytes); }

}   // namespace train_gpt
