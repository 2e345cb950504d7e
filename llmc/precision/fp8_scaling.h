// fp8_scaling.h — per-tensor FP8 scales: the amax history, delayed scaling, and the scaled
// casts (quantise / dequantise) with the telemetry users debug FP8 with.
//
// Why scale. E4M3 spans 2^-9 … 448 and E5M2 2^-16 … 57344 with 3 or 2 mantissa bits: a tensor
// whose values live around 1e-3 (activations after a norm are O(1); gradients are often 1e-5)
// would lose most of its values to the subnormals or to zero. So each FP8 operand carries a
// per-tensor scale s: the cast stores q = saturate(x · s) and the GEMM multiplies its FP32
// accumulator by 1/s for each operand. The best s maps the tensor's largest magnitude
// amax = max|x| onto the format's largest finite value: s = fp8_max / amax — nothing saturates
// and the small values keep as many bits as the format has. A margin m backs off by 2^m,
// s = (fp8_max / amax) · 2^-m, so a tensor that grows by up to 2^m still fits.
//
// Why delayed. Knowing amax before the cast needs a full pass over the tensor before the cast
// can start; fused into the kernel that produces the tensor, that is one extra read of it (and
// a grid-wide sync) per GEMM operand. Delayed scaling instead predicts this step's amax from the
// amaxes recorded during the last H casts (the amax history): a = max(history) (or the most
// recent entry, `--fp8-amax-algo most_recent`), and records this step's amax — computed for
// free inside the cast — for the next step. Amaxes change slowly from step to step, the margin
// and the max over H steps absorb the drift, and a value that does outgrow the prediction
// saturates (counted) instead of overflowing. Weights can even be cast in the optimizer
// kernel, ahead of the step that uses them, because their scale is already known.
//
// The rules (DESIGN §4), per scaled tensor, one step at a time:
//   step 0             no history: the caller computes the tensor's amax first and the scale
//                      comes from it ("just in time", scale_from_amax), rather than casting
//                      with s = 1;
//   cast               q = saturate(x · s); the cast returns amax = max|x| of the unscaled x
//                      (NaN if any x is NaN);
//   end of step        ranks MAX-reduce their amaxes (combine_amax keeps a NaN), the result
//                      enters the history (newest first, the oldest falls out past H), and the
//                      scale for the next step is computed from the history:
//                      a = max(history) or history[0];  s = (fp8_max / a) · 2^-margin;
//                      a == 0, a inf or a NaN → keep the previous s (a zero tensor says
//                      nothing about scale; a NaN amax is the step that gets skipped);
//                      s = inf (a tiny amax) → FLT_MAX.
//   recipe current     every step is step 0: the scale comes from this step's own amax
//                      (scale_from_amax before each cast); the history is still kept for
//                      telemetry. For side-by-side comparison with delayed scaling.
// max(history) propagates NaN and inf, so one non-finite amax holds the scale for H steps,
// until it rolls out of the history (the previous scale is a good one meanwhile).
// Extension: a scale that would underflow below FLT_MIN (an amax near FLT_MAX with a margin)
// is clamped to FLT_MIN so that 1/s stays finite.
#pragma once

#include "model/layout.h"
#include "precision/dtypes.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace train_gpt {

enum class Fp8Format { E4M3, E5M2 };
enum class Fp8AmaxAlgo { Max, MostRecent };
enum class Fp8Recipe { Delayed, Current };

Fp8AmaxAlgo parse_fp8_amax_algo(const std::string& name);   // max|most_recent, else fails
const char* fp8_amax_algo_name(Fp8AmaxAlgo algo);
Fp8Recipe parse_fp8_recipe(const std::string& name);   // delayed|current, else fails
const char* fp8_recipe_name(Fp8Recipe recipe);
const char* fp8_format_name(Fp8Format format);   // e4m3|e5m2
// "all", "none" or a comma list of qkv, attproj, fc, fcproj (model/layout.h: kBlockGemms) → the
// bit mask of Fp8ScalingConfig::gemms; anything else (or nothing) fails naming the flag.
// fp8_gemms_name is the inverse ("all" for every GEMM, "none" for 0).
unsigned parse_fp8_gemms(const std::string& list);
std::string fp8_gemms_name(unsigned gemms);

// Largest finite value: 448 (E4M3), 57344 (E5M2).
TG_HD inline float fp8_max(Fp8Format format) {
    return format == Fp8Format::E4M3 ? fp8e4m3::max_finite : fp8e5m2::max_finite;
}

// The MAX of two amaxes that a NaN survives (IEEE fmax and MPI_MAX on floats would drop it):
// used by the cast's reduction and by the cross-rank MAX all-reduce.
TG_HD inline float combine_amax(float a, float b) {
    if (is_nan_f32(a)) return a;
    if (is_nan_f32(b)) return b;
    return a > b ? a : b;
}

// ---- the scaling rules, host and device ---------------------------------------------------------
// One implementation of the rules above for the host (Fp8TensorScale) and for the state that
// lives in the kernel set's memory (Fp8ScaleSlot, Fp8Ops::fp8_end_step): the same FP32
// operations in the same order, so the CPU and CUDA kernel sets agree bit for bit.

// s = (fp8_max / amax) · 2^-margin; amax 0 / inf / NaN → previous; s = inf → FLT_MAX;
// s < FLT_MIN (normal) → FLT_MIN. 2^-margin is exact: margin ≤ 64 (validate()).
TG_HD inline float fp8_scale_rule(float amax, float fp8_max, int margin, float previous) {
    if (!(amax > 0.0f) || !is_finite_f32(amax)) return previous;   // 0, NaN, inf (and < 0, never an amax)
    float s = fp8_max / amax;
    for (int i = 0; i < margin; i++)
        s *= 0.5f;                                                     // · 2^-margin, exact until s underflows
    if (!is_finite_f32(s)) return bits_float(0x7f7fffffu);             // FLT_MAX
    if (s < bits_float(0x00800000u)) return bits_float(0x00800000u);   // FLT_MIN
    return s;
}

// a from a history of `len` amaxes, newest first: its NaN-propagating max, or the newest. Empty → 0.
TG_HD inline float fp8_select_rule(const float* history, int len, bool most_recent) {
    if (len <= 0) return 0.0f;
    if (most_recent) return history[0];
    float a = history[0];
    for (int i = 1; i < len; i++)
        a = combine_amax(a, history[i]);
    return a;
}

// The scale state of one scaled tensor in the kernel set's memory: what the casts read (scale)
// and what the FP8 GEMMs read (inv_scale = 1/s, first: cuBLASLt takes its address as an operand's
// scale pointer, which must be 16-byte aligned; the slots are 256 bytes apart). The amax history
// (newest first, hist_len entries) lives beside, in an array of H floats per slot.
struct Fp8ScaleSlot {
    float inv_scale;
    float scale;
    int32_t hist_len;
    int32_t pad[61];
};
static_assert(sizeof(Fp8ScaleSlot) == 256, "Fp8ScaleSlot: 256 bytes, so every inv_scale is 256-byte aligned");

// End of step for one slot and its history (H floats, newest first): amax enters the history,
// the oldest falls out past H; under delayed scaling the next scale follows from the history.
// The same steps as Fp8TensorScale::end_step.
TG_HD inline void fp8_end_step_rule(Fp8ScaleSlot& slot, float* history, float amax, float fp8_max, int H,
                                    bool most_recent, int margin, bool delayed) {
    const int len = slot.hist_len < H ? slot.hist_len + 1 : H;
    for (int i = len - 1; i > 0; i--)
        history[i] = history[i - 1];
    history[0] = amax;
    slot.hist_len = len;
    if (delayed) {
        slot.scale = fp8_scale_rule(fp8_select_rule(history, len, most_recent), fp8_max, margin, slot.scale);
        slot.inv_scale = 1.0f / slot.scale;
    }
}

// The longest amax history: a window far past any recipe's (Transformer Engine's default is
// 1024); each entry is kept per scaled tensor, so 10^8 took gigabytes for a small model.
constexpr int kMaxAmaxHistory = 65536;

struct Fp8ScalingConfig {
    int amax_history = 16;                   // H, --fp8-amax-history (1..kMaxAmaxHistory)
    Fp8AmaxAlgo algo = Fp8AmaxAlgo::Max;     // --fp8-amax-algo
    int margin = 0;                          // --fp8-margin (≥ 0): s is backed off by 2^-margin
    Fp8Recipe recipe = Fp8Recipe::Delayed;   // --fp8-recipe
    unsigned gemms = kAllBlockGemms;         // --fp8-gemms: bit g set = block GEMM g (model/layout.h:
                                             // kBlockGemms) runs in FP8; the others in 16 bits

    void validate() const;   // fails naming the flag
};

// s = (fp8_max / amax) · 2^-margin; amax 0 / inf / NaN → previous; s = inf → FLT_MAX;
// s < FLT_MIN → FLT_MIN.
float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous);
// a from a history (newest first): its NaN-propagating max, or history[0]. Empty → 0.
float fp8_select_amax(const std::vector<float>& history, Fp8AmaxAlgo algo);

// The scale state of one FP8-cast tensor (one operand of one GEMM: X, W or dY).
class Fp8TensorScale {
  public:
    Fp8TensorScale(Fp8Format format, const Fp8ScalingConfig& config);

    Fp8Format format() const { return format_; }
    // s for this step's cast, and 1/s, the GEMM's dequantisation factor.
    float scale() const { return scale_; }
    float inv_scale() const { return 1.0f / scale_; }
    // True when this step's cast needs its own amax first: step 0 of delayed scaling (no
    // history yet), every step of the current recipe. Then: a = amax_of(x), scale_from_amax(a).
    bool needs_amax_now() const;
    // Just-in-time scale from the tensor's own amax (same rules: 0 / non-finite keeps s).
    void scale_from_amax(float amax);
    // End of step: `amax` (this step's, already MAX-reduced across ranks) enters the history;
    // under delayed scaling the scale for the next step is computed from the history.
    void end_step(float amax);

    const std::vector<float>& history() const { return history_; }   // newest first, ≤ H entries
    int64_t steps() const { return steps_; }                         // end_step calls so far
    // Checkpoint restore: the scale and history as saved (history newest first, truncated to H).
    void restore(float scale, const std::vector<float>& history, int64_t steps);

  private:
    Fp8Format format_;
    Fp8ScalingConfig config_;
    float scale_ = 1.0f;
    std::vector<float> history_;
    int64_t steps_ = 0;
};

// What a cast did, for telemetry (DESIGN §4): the fraction of values that saturated or
// flushed to zero tells whether the scale fits the tensor.
struct Fp8CastStats {
    float amax = 0.0f;      // max|x| of the unscaled input, NaN if any x is NaN
    size_t count = 0;       // values cast
    size_t saturated = 0;   // |x · s| > fp8_max (inf included): clipped to ±fp8_max
    size_t flushed = 0;     // x ≠ 0 (and not NaN) but q = ±0
    size_t nan = 0;         // NaN inputs (cast to the NaN encoding 0x7f)

    Fp8CastStats& operator+=(const Fp8CastStats& o);   // amax by combine_amax, counts summed
    double saturated_frac() const { return count ? double(saturated) / double(count) : 0.0; }
    double flushed_frac() const { return count ? double(flushed) / double(count) : 0.0; }
};

// A cast's statistics as they accumulate in the backend's memory (Fp8Ops::quantize_transpose_e4m3/e5m2 and the fused casts),
// so that no cast waits for the host: the casts of one step into one slot (its micro-batches)
// combine, and the trainer reads every slot back once per step. The amax is kept as the bits of
// |x|: non-negative floats order like their bit patterns and every NaN (sign cleared) lies above
// +inf, so the integer max is the NaN-propagating max, the same in any order. Counts are summed.
// Zero bytes are the empty state (amax 0, no values).
struct Fp8Counters {
    uint32_t amax_bits;
    uint32_t pad;
    unsigned long long count, saturated, flushed, nan;   // (CUDA's 64-bit atomics take this type)
};

// The counters as telemetry (amax from its bits; any NaN as the canonical NaN).
Fp8CastStats to_cast_stats(const Fp8Counters& c);
// c += s: what the CPU kernel set does after each cast.
void accumulate(Fp8Counters& c, const Fp8CastStats& s);

// max|x| over n floats, NaN-propagating.
float amax_of(const float* x, size_t n);
// q[i] = saturate(x[i] · scale) in E4M3 / E5M2, with the cast's statistics.
Fp8CastStats quantize(fp8e4m3* q, const float* x, size_t n, float scale);
Fp8CastStats quantize(fp8e5m2* q, const float* x, size_t n, float scale);
// x[i] = float(q[i]) · inv_scale.
void dequantize(float* x, const fp8e4m3* q, size_t n, float inv_scale);
void dequantize(float* x, const fp8e5m2* q, size_t n, float inv_scale);

}   // namespace train_gpt
