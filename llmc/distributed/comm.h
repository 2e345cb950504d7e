// comm.h — collective communication between data-parallel ranks.
//
// One small interface, three implementations:
//   single process   world 1; every collective is the identity (or a copy)       comm.cpp
//   MPI              host buffers, for the CPU backend; `mpirun -np 4` on a laptop comm_mpi.cpp
//   NCCL             device buffers, bootstrapped through MPI                 comm_nccl.cu
// Buffers are wherever the implementation's backend keeps them (host memory for single/MPI,
// device memory for NCCL); counts are in elements of FP32 or in raw bytes, never in MPI types,
// so the callers (model, optimizer, FP8 scaling) are the same code for all three.
//
// Invariants every implementation keeps:
// - Deterministic sums. Every rank holds bit-identical results, whatever the timing, and a run
//   repeats bit-exactly on the same world size (and, for NCCL, the same topology and version).
//   The single-process and MPI Comms add in rank order 0, 1, …, W-1 with FP32 accumulation; NCCL
//   adds in its ring's or tree's order (comm_nccl.cu), so its sums can differ from MPI's in the
//   last bits. (Different world sizes differ by FP32 reassociation.)
// - NaN-propagating max. If any rank holds NaN at index i, all_reduce_max gives NaN at i on
//   every rank (FP8 amaxes: a NaN must not vanish in the reduction). +0 wins over -0.
// - Destination first; every rank calls every collective in the same order with the same
//   counts (`root` included).
//
// Launch: make_comm() picks MPI when the process was started by mpirun / srun (it sees
// OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS), else the single-process Comm. The MPI Comm
// calls MPI_Init on creation and MPI_Finalize when destroyed: create it once per process,
// before any other work, and keep it for the whole run.
//
// Failure: an error that only some ranks hit must not leave the others waiting in a collective.
// The failing rank reports and calls abort_job(), which ends every rank; it must not finalise
// (MPI_Finalize waits for every rank). So a Comm destroyed while an exception unwinds the stack
// releases only what is its own: the MPI Comm skips MPI_Finalize, the NCCL Comm aborts its
// communicator (ncclCommAbort) instead of destroying it (which would wait for its peers).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace train_gpt {

class Comm {
  public:
    virtual ~Comm() = default;
    virtual std::string name() const = 0;   // "single", "mpi", "nccl"
    virtual int rank() const = 0;           // 0 … world_size()-1
    virtual int world_size() const = 0;
    virtual int local_rank() const = 0;            // rank among the processes on this node (GPU choice)
    bool is_root() const { return rank() == 0; }   // for rank-0-only printing and logging

    // data (n) ← Σ over ranks of data (n), in place.
    virtual void all_reduce_sum(float* data, size_t n) = 0;
    // data (n) ← max over ranks of data (n), in place; NaN anywhere at i gives NaN at i.
    virtual void all_reduce_max(float* data, size_t n) = 0;
    // src (W·n_per_rank) on every rank; dst (n_per_rank) ← block `rank()` of Σ over ranks of src.
    // ZeRO-1: each rank receives the summed gradients of the parameter shard it owns.
    virtual void reduce_scatter_sum(float* dst, const float* src, size_t n_per_rank) = 0;
    // dst (W·bytes_per_rank) ← the src (bytes_per_rank) of ranks 0, 1, …, W-1, in rank order.
    // src may alias dst's block `rank()` (in-place gather of sharded parameters).
    virtual void all_gather(void* dst, const void* src, size_t bytes_per_rank) = 0;
    // data (bytes) on every rank ← data on rank `root`.
    virtual void broadcast(void* data, size_t bytes, int root) = 0;
    virtual void barrier() = 0;
    // Scalars (loss, Σ g², token counts): Σ over ranks in rank order, in double.
    virtual double all_reduce_sum(double x) = 0;

    // Ends every rank of the job now, with `exit_code` (MPI_Abort: the launcher stops the other
    // ranks wherever they are, a collective included); never returns. The single-process Comm
    // just exits. For one rank's failure: the others cannot know of it, and a collective exit
    // (MPI_Finalize) would wait for them forever.
    [[noreturn]] virtual void abort_job(int exit_code) = 0;
};

// Moves `bytes` from src to dst in the implementation's memory (may overlap).
using CommCopyFn = std::function<void(void* dst, const void* src, size_t bytes)>;

// The single-process Comm: rank 0 of 1. Its only work is the copy that reduce_scatter_sum and
// all_gather make from src to dst; `copy` does it (default: host memmove; a device backend
// passes its own device-to-device copy).
std::unique_ptr<Comm> make_single_comm(CommCopyFn copy = nullptr);

// The MPI Comm over (a duplicate of) MPI_COMM_WORLD, on host buffers. Initialises MPI if it is
// not yet; the last MPI Comm destroyed finalises it, after which no MPI Comm can be made again
// in this process. One MPI call moves at most `segment_bytes` in all: longer collectives run as
// a fixed sequence of segments (this bounds the scratch memory, about twice that, and keeps
// MPI's int counts in range; results do not depend on it). Tests make it small.
std::unique_ptr<Comm> make_mpi_comm(size_t segment_bytes = size_t(1) << 28);

// True when the environment says a launcher (mpirun, srun, another PMI) started this process.
bool launched_by_mpi();

// make_mpi_comm() when launched_by_mpi(), else make_single_comm().
std::unique_ptr<Comm> make_comm();

}   // namespace train_gpt
