// fp8_autotune.h — `--fp8-gemms auto`: which block GEMMs run in FP8, chosen by timing them.
//
// FP8 pays where a GEMM's speed-up outweighs the casts it adds, which depends on the GEMM's
// shape and the GPU: at GPT-2 small widths it may not. For each GEMM of a block (qkv, attproj,
// fc, fcproj) at the run's B·T, this times on the kernel set, one after the other:
//   16-bit  matmul_forward + matmul_backward (dX and dW)
//   FP8     X → E4M3 (q and Xᵀ) + matmul_forward_fp8 + dY → E5M2 (q and dYᵀ) + matmul_backward_fp8
// and picks FP8 where it is faster. The FP8 side counts every cast in full although the model
// fuses most of them into their producers (a layernorm or GELU writes E4M3 instead of bf16), so
// the choice leans to 16 bits when the two are close; the weights' cast (once per optimizer
// step, inside AdamW) is left out. Inputs are random, outputs discarded, buffers freed after.
#pragma once

#include "backend.h"
#include "distributed/comm.h"
#include "model/layout.h"

#include <optional>
#include <string>
#include <vector>

namespace train_gpt {

struct Fp8GemmTiming {
    std::string name;                  // qkv, attproj, fc, fcproj
    int n = 0, c_in = 0, c_out = 0;    // the GEMM: (n, c_in) · (c_out, c_in)ᵀ
    double ms_16bit = 0, ms_fp8 = 0;   // forward + backward, median of the repetitions
    bool fp8 = false;                  // FP8 chosen: ms_fp8 < ms_16bit
};

// Times every block GEMM of cfg at B·T tokens on `backend` (an fp8-mode kernel set, bf16
// activations) and returns the GEMM mask for Fp8ScalingConfig::gemms (possibly 0: none pays).
std::vector<Fp8GemmTiming> time_fp8_gemms(Backend& backend, const GPTConfig& cfg, int B, int T, int reps = 10);
unsigned fp8_gemms_from_timings(const std::vector<Fp8GemmTiming>& timings);

// `--fp8-gemms auto`, resolved for a run: one that resumes keeps the GEMMs its checkpoint trained
// with (its config records the resolved list), so the resume stays bit-exact; a new one times
// them on every rank's kernel set and takes rank 0's choice; the CPU kernel set, which emulates
// FP8 as the specification, takes all. `how` is one line for the log.
struct Fp8AutoChoice {
    unsigned gemms = kAllBlockGemms;
    std::string how;
};
Fp8AutoChoice choose_fp8_gemms_auto(Backend& backend, const GPTConfig& cfg, int B, int T,
                                    const std::optional<std::string>& resume_checkpoint, Comm& comm);

}   // namespace train_gpt
