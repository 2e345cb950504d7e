// comm_nccl.cu — the NCCL Comm on device buffers (the CUDA backend's data parallelism); see comm.h.
//
// Ordering. Every collective is synchronous from the host's point of view: it first waits for
// all work queued on the device (the backend's stream produced the data), runs on the Comm's own
// stream, and returns when that stream is done. So callers need no stream plumbing, and a buffer
// may be read, overwritten or freed as soon as the call returns. (Overlapping communication with
// backward is a later optimisation; it would hand the backend's stream to this Comm.)
//
// Determinism. Sums (all_reduce_sum, reduce_scatter_sum) are NCCL's ncclAllReduce /
// ncclReduceScatter in FP32. NCCL reduces each element once and sends the result to every rank,
// so every rank holds the same bits, and a run repeats bit-exactly on the same world size,
// topology and NCCL version. The order of the additions is NCCL's (its ring or tree), not
// 0, 1, …, W-1 as in the MPI Comm, so the two can differ in the last bits of a sum; pin NCCL's
// choice with NCCL_ALGO=Ring NCCL_PROTO=Simple when runs on different machines must agree.
// The double all_reduce_sum gathers the W values and adds them on the host in rank order, as the
// MPI Comm does.
//
// NaN-propagating max. ncclMax on floats is the hardware max, which returns the other operand
// when one is NaN, so a NaN amax could vanish. all_reduce_max therefore all-gathers the W
// vectors and combines them with a small kernel, in rank order, with nan_max (NaN wins, +0 beats
// -0) — the same function as the MPI Comm's custom op, so both give the same bits.
#include "distributed/comm_nccl.h"

#include "cuda/common.cuh"
#include "utils.h"

#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <vector>

namespace train_gpt {

namespace {

void nccl_check(ncclResult_t result, const char* call, const char* file, int line) {
    if (result == ncclSuccess) return;
    const char* detail = ncclGetLastError(nullptr);
    fail("NCCL error at %s:%d: %s: %s%s%s", file, line, call, ncclGetErrorString(result),
         detail != nullptr && detail[0] != '\0' ? ": " : "", detail != nullptr ? detail : "");
}
#define ncclCheck(call) nccl_check((call), #call, __FILE__, __LINE__)

// max(a, b) with NaN winning and +0 beating -0 (comm_mpi.cpp's nan_max).
__device__ __forceinline__ float nan_max(float a, float b) {
    if (isnan(a) || isnan(b)) return __int_as_float(0x7fc00000);   // quiet NaN
    if (a != b) return a > b ? a : b;
    return signbit(a) ? b : a;
}

// data (n) = nan_max over r = 0, 1, …, W-1 of gathered (W, n).
__global__ void nan_max_kernel(float* data, const float* gathered, size_t n, int W) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float m = gathered[i];
        for (int r = 1; r < W; r++)
            m = nan_max(m, gathered[(size_t)r * n + i]);
        data[i] = m;
    }
}

class NcclComm final : public Comm {
  public:
    explicit NcclComm(Comm& bootstrap)
        : bootstrap_(bootstrap),
          rank_(bootstrap.rank()),
          world_(bootstrap.world_size()),
          local_rank_(bootstrap.local_rank()) {
        // Rank 0 makes the unique id and broadcasts it (host memory, over MPI) with its status
        // first, so that a failure on rank 0 stops every rank with the reason instead of leaving
        // the others waiting in the broadcast or in ncclCommInitRank.
        ncclUniqueId id{};
        int32_t status = ncclSuccess;
        if (rank_ == 0) status = ncclGetUniqueId(&id);
        bootstrap.broadcast(&status, sizeof status, 0);
        if (status != ncclSuccess) {
            fail("NCCL: rank 0 could not create the communicator's unique id: %s",
                 ncclGetErrorString(static_cast<ncclResult_t>(status)));
        }
        bootstrap.broadcast(&id, sizeof id, 0);
        cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        ncclCheck(ncclCommInitRank(&comm_, world_, id, rank_));
    }

    ~NcclComm() override {
        // No throwing from a destructor: errors here are ignored. While an exception unwinds
        // (this rank failed; its peers may be inside a collective), the communicator is aborted:
        // ncclCommAbort returns at once, where ncclCommDestroy would wait for the peers.
        if (std::uncaught_exceptions() > 0) {
            ncclCommAbort(comm_);
            return;
        }
        cudaStreamSynchronize(stream_);
        ncclCommDestroy(comm_);
        cudaFree(scratch_);
        cudaStreamDestroy(stream_);
    }

    std::string name() const override { return "nccl"; }
    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    int local_rank() const override { return local_rank_; }

    void all_reduce_sum(float* data, size_t n) override {
        if (n == 0) return;
        begin();
        ncclCheck(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_));
        end();
    }

    void all_reduce_max(float* data, size_t n) override {
        if (n == 0) return;
        float* gathered = static_cast<float*>(scratch(world_ * n * sizeof(float)));   // (W, n)
        begin();
        ncclCheck(ncclAllGather(data, gathered, n, ncclFloat, comm_, stream_));
        const int blocks = (int)std::min<size_t>((n + 255) / 256, 1024);
        nan_max_kernel<<<blocks, 256, 0, stream_>>>(data, gathered, n, world_);
        cudaCheck(cudaGetLastError());
        end();
    }

    void reduce_scatter_sum(float* dst, const float* src, size_t n_per_rank) override {
        if (n_per_rank == 0) return;
        begin();
        ncclCheck(ncclReduceScatter(src, dst, n_per_rank, ncclFloat, ncclSum, comm_, stream_));
        end();
    }

    void all_gather(void* dst, const void* src, size_t bytes_per_rank) override {
        // in place when src is dst's block rank(): NCCL's own in-place convention
        if (bytes_per_rank == 0) return;
        begin();
        ncclCheck(ncclAllGather(src, dst, bytes_per_rank, ncclUint8, comm_, stream_));
        end();
    }

    void broadcast(void* data, size_t bytes, int root) override {
        if (root < 0 || root >= world_) fail("broadcast: root %d is not a rank of a world of %d", root, world_);
        if (bytes == 0) return;
        begin();
        ncclCheck(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
        end();
    }

    void barrier() override {
        float* one = static_cast<float*>(scratch(sizeof(float)));
        begin();
        ncclCheck(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm_, stream_));
        end();
    }

    // This rank's NCCL operations stop at once; then the bootstrap (MPI) ends every rank.
    [[noreturn]] void abort_job(int exit_code) override {
        ncclCommAbort(comm_);
        bootstrap_.abort_job(exit_code);
        std::_Exit(exit_code);   // not reached: abort_job does not return
    }

    double all_reduce_sum(double x) override {
        double* gathered = static_cast<double*>(scratch((world_ + 1) * sizeof(double)));   // (W) | mine
        double* mine = gathered + world_;
        begin();
        cudaCheck(cudaMemcpyAsync(mine, &x, sizeof x, cudaMemcpyHostToDevice, stream_));
        ncclCheck(ncclAllGather(mine, gathered, 1, ncclDouble, comm_, stream_));
        std::vector<double> all(world_);
        cudaCheck(cudaMemcpyAsync(all.data(), gathered, world_ * sizeof(double), cudaMemcpyDeviceToHost, stream_));
        end();
        double sum = all[0];
        for (int r = 1; r < world_; r++)
            sum += all[r];   // rank order
        return sum;
    }

  private:
    // The data was written by work queued on other streams (the backend's): wait for all of it.
    void begin() { cudaCheck(cudaDeviceSynchronize()); }
    void end() { cudaCheck(cudaStreamSynchronize(stream_)); }

    // A device buffer of at least `bytes`, reused across calls (no collective is in flight when
    // it grows: every call ends synchronised).
    void* scratch(size_t bytes) {
        if (bytes > scratch_bytes_) {
            cudaCheck(cudaFree(scratch_));
            scratch_ = nullptr;
            scratch_bytes_ = 0;
            cudaCheck(cudaMalloc(&scratch_, bytes));
            scratch_bytes_ = bytes;
        }
        return scratch_;
    }

    Comm& bootstrap_;
    int rank_ = 0, world_ = 1, local_rank_ = 0;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    void* scratch_ = nullptr;
    size_t scratch_bytes_ = 0;
};

}   // namespace

std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap) { return std::make_unique<NcclComm>(bootstrap); }

}   // namespace train_gpt
