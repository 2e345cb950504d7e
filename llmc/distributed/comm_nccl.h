// comm_nccl.h — the NCCL Comm: collectives between GPUs on device buffers (comm_nccl.cu).
//
// Host-compiled code may include this header: it names no CUDA or NCCL type.
#pragma once

#include "distributed/comm.h"

#include <memory>

namespace train_gpt {

// An NCCL communicator over the ranks of `bootstrap` (the MPI Comm): the same rank, world size
// and local rank; rank 0 makes the ncclUniqueId and bootstrap.broadcast() hands it to the others.
// Every rank calls it once, after selecting its GPU (make_cuda_backend); buffers passed to the
// collectives are device memory of that GPU. `bootstrap` must outlive it: abort_job() aborts the
// NCCL communicator, then ends the job through bootstrap.abort_job(). See comm_nccl.cu for
// ordering, determinism and the NaN-propagating max.
std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap);

}   // namespace train_gpt
