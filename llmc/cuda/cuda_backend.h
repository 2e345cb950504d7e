// cuda_backend.h — the CUDA kernel set behind the Backend interface (cuda/backend_cuda.cu).
//
// Host-compiled code may include this header: it names no CUDA type. The backend keeps every
// buffer in device memory (cudaMalloc, zero-initialised) and runs every op on one stream of its
// own; ops that return a value to the host (amax, quantize_*, sum_squares) and the copies are
// synchronous, the others are queued and return at once. The kernels are compiled for the
// GENCODE of the Makefile (sm_90a by default); a device without a matching image is rejected
// when the backend is made.
#pragma once

#include "backend.h"

#include <memory>
#include <string>

namespace train_gpt {

// The CUDA kernel set for activations of `dtype` on GPU `device` (made current for this thread).
std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device);

// Number of CUDA devices; 0 (with the reason) when there is no GPU or no usable driver.
int cuda_device_count(std::string* reason);

}  // namespace train_gpt
