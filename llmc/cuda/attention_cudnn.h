// cuda/attention_cudnn.h — --attention cudnn: cuDNN's fused attention (its SDPA operation graphs,
// through cudnn-frontend's C++ headers) as the CUDA kernel set's attention. It is the in-run peer
// of the hand-written flash attention (cuda/attention_flash.cuh) and, where a GPU run validates
// it, the fastest choice; never run on a GPU yet (docs/gpu-results.md).
//
// The ops are Backend::attention_forward / attention_backward (backend.h) on bf16 or fp16
// buffers: causal, scale 1/√hs, lse (B, NH, T) the natural log-sum-exp of each row of scaled
// scores (cuDNN's softmax statistics), the backward deterministic (cuDNN's deterministic
// algorithm). Their twins are cpu::attention_forward / attention_backward; cuDNN does not say how
// it rounds the probabilities before P·V, so the GPU tests compare within the flash attention's
// bounds (tests/cuda/test_cuda_attention_cudnn.cu).
//
// Its own translation unit (cuda/attention_cudnn.cpp), compiled by the host compiler: cuDNN's
// graph API is host code, and cudnn-frontend's headers are heavy. Built where the Makefile finds
// cuDNN (cudnn.h beside the CUDA headers, libcudnn) and cudnn-frontend's headers (scripts/setup.sh
// unpacks them into third_party/); elsewhere cudnn_attention_available() says why not and the
// trainer refuses the flag. Host-compilable: no CUDA type in this header (streams are void*).
#pragma once

#include "precision/precision.h"

#include <string>

namespace train_gpt {

// Whether this build has cuDNN's attention; *why: the reason when it has not.
bool cudnn_attention_available(std::string* why);

// out (B,T,C), lse (B,NH,T) ← causal attention of qkv (B,T,3C), on `stream` (a cudaStream_t);
// dtype: the activations' (BF16 or F16); head size C / NH, at most 128 and a multiple of 8.
void attention_forward_cudnn(void* out, float* lse, const void* qkv, int B, int T, int C, int NH, DType dtype,
                             void* stream);
// dqkv (B,T,3C) ← the gradient from dout (B,T,C) and the forward's qkv, out and lse; overwritten.
void attention_backward_cudnn(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                              int T, int C, int NH, DType dtype, void* stream);

// Frees the cached graphs, handles and workspaces of this process (the CUDA backend's destructor).
void release_cudnn_attention();

}   // namespace train_gpt
