// fp8_scaling.cpp — see fp8_scaling.h for the recipe.
#include "precision/fp8_scaling.h"

#include "utils.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

namespace train_gpt {

Fp8AmaxAlgo parse_fp8_amax_algo(const std::string& name) {
    if (name == "max") return Fp8AmaxAlgo::Max;
    if (name == "most_recent") return Fp8AmaxAlgo::MostRecent;
    fail("--fp8-amax-algo: unknown algorithm '%s' (expected max or most_recent)", name.c_str());
}

const char* fp8_amax_algo_name(Fp8AmaxAlgo algo) { return algo == Fp8AmaxAlgo::Max ? "max" : "most_recent"; }

Fp8Recipe parse_fp8_recipe(const std::string& name) {
    if (name == "delayed") return Fp8Recipe::Delayed;
    if (name == "current") return Fp8Recipe::Current;
    fail("--fp8-recipe: unknown recipe '%s' (expected delayed or current)", name.c_str());
}

const char* fp8_recipe_name(Fp8Recipe recipe) { return recipe == Fp8Recipe::Delayed ? "delayed" : "current"; }

const char* fp8_format_name(Fp8Format format) { return format == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

unsigned parse_fp8_gemms(const std::string& list) {
    if (list == "all") return kAllBlockGemms;
    if (list == "none") return 0u;   // what auto records when no GEMM is faster in FP8
    unsigned mask = 0;
    size_t begin = 0;
    while (begin <= list.size()) {
        const size_t end = std::min(list.find(',', begin), list.size());
        std::string name = list.substr(begin, end - begin);
        name.erase(0, name.find_first_not_of(' '));   // "qkv, fc": spaces around a name are no part of it
        name.erase(name.find_last_not_of(' ') + 1);
        unsigned bit = 0;
        for (unsigned g = 0; g < kNumBlockGemms; g++) {
            if (name == kBlockGemms[g].name) bit = 1u << g;
        }
        if (bit == 0) {
            fail(
                "--fp8-gemms: '%s' is not a GEMM of the block (all or none alone, or a comma list of qkv, attproj, fc, "
                "fcproj)",
                name.c_str());
        }
        mask |= bit;
        begin = end + 1;
    }
    return mask;
}

std::string fp8_gemms_name(unsigned gemms) {
    if ((gemms & kAllBlockGemms) == kAllBlockGemms) return "all";
    std::string out;
    for (unsigned g = 0; g < kNumBlockGemms; g++) {
        if (gemms >> g & 1u) out += (out.empty() ? "" : ",") + std::string(kBlockGemms[g].name);
    }
    return out.empty() ? "none" : out;
}

void Fp8ScalingConfig::validate() const {
    if (amax_history < 1 || amax_history > kMaxAmaxHistory)
        fail("--fp8-amax-history must be in [1, %d] (got %d)", kMaxAmaxHistory, amax_history);
    // 2^-margin must stay a normal float factor; real margins are 0..4
    if (margin < 0 || margin > 64) fail("--fp8-margin must be in [0, 64] (got %d)", margin);
    // gemms may be 0: --fp8-gemms auto found no GEMM faster in FP8 (fp8 mode then runs bf16 GEMMs)
}

float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous) {
    return fp8_scale_rule(amax, fp8_max, margin, previous);
}

float fp8_select_amax(const std::vector<float>& history, Fp8AmaxAlgo algo) {
    return fp8_select_rule(history.data(), (int)history.size(), algo == Fp8AmaxAlgo::MostRecent);
}

Fp8TensorScale::Fp8TensorScale(Fp8Format format, const Fp8ScalingConfig& config) : format_(format), config_(config) {
    config_.validate();
    history_.reserve(size_t(config_.amax_history));
}

bool Fp8TensorScale::needs_amax_now() const { return config_.recipe == Fp8Recipe::Current || history_.empty(); }

void Fp8TensorScale::scale_from_amax(float amax) {
    scale_ = fp8_scale_from_amax(amax, fp8_max(format_), config_.margin, scale_);
}

void Fp8TensorScale::end_step(float amax) {
    // roll: newest first, the oldest falls out past H
    history_.insert(history_.begin(), amax);
    if (history_.size() > size_t(config_.amax_history)) history_.pop_back();
    ++steps_;
    if (config_.recipe == Fp8Recipe::Delayed) scale_from_amax(fp8_select_amax(history_, config_.algo));
}

void Fp8TensorScale::restore(float scale, const std::vector<float>& history, int64_t steps) {
    scale_ = scale;
    history_.assign(history.begin(), history.begin() + std::min(history.size(), size_t(config_.amax_history)));
    steps_ = steps;
}

Fp8CastStats& Fp8CastStats::operator+=(const Fp8CastStats& o) {
    amax = combine_amax(amax, o.amax);
    count += o.count;
    saturated += o.saturated;
    flushed += o.flushed;
    nan += o.nan;
    return *this;
}

namespace {

constexpr size_t kParallelMin = size_t(1) << 16;   // below this, threads cost more than they save

// One NaN in, the canonical NaN out (whichever thread saw a NaN first must not show).
float canonical_amax(float a) { return is_nan_f32(a) ? std::numeric_limits<float>::quiet_NaN() : a; }

template <class T>
Fp8CastStats quantize_impl(T* q, const float* x, size_t n, float scale) {
    const float max = T::max_finite;
    Fp8CastStats total;
#pragma omp parallel if (n >= kParallelMin)
    {
        Fp8CastStats local;
#pragma omp for schedule(static) nowait
        for (size_t i = 0; i < n; ++i) {
            const float y = x[i] * scale;   // the GPU cast does the same fp32 multiply, then cvt.rn.satfinite
            q[i] = T::from_float(y);
            local.amax = combine_amax(local.amax, std::fabs(x[i]));
            if (is_nan_f32(x[i])) {
                ++local.nan;
            } else if (std::fabs(y) > max) {
                ++local.saturated;
            } else if (x[i] != 0.0f && (q[i].bits & 0x7fu) == 0) {
                ++local.flushed;
            }
        }
#pragma omp critical
        total += local;
    }
    total.count = n;
    total.amax = canonical_amax(total.amax);
    return total;
}

template <class T>
void dequantize_impl(float* x, const T* q, size_t n, float inv_scale) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (size_t i = 0; i < n; ++i)
        x[i] = q[i].to_float() * inv_scale;
}

}   // namespace

float amax_of(const float* x, size_t n) {
    float amax = 0.0f;
#pragma omp parallel if (n >= kParallelMin)
    {
        float local = 0.0f;
#pragma omp for schedule(static) nowait
        for (size_t i = 0; i < n; ++i)
            local = combine_amax(local, std::fabs(x[i]));
#pragma omp critical
        amax = combine_amax(amax, local);
    }
    return canonical_amax(amax);
}

Fp8CastStats quantize(fp8e4m3* q, const float* x, size_t n, float scale) { return quantize_impl(q, x, n, scale); }
Fp8CastStats quantize(fp8e5m2* q, const float* x, size_t n, float scale) { return quantize_impl(q, x, n, scale); }
void dequantize(float* x, const fp8e4m3* q, size_t n, float inv_scale) { dequantize_impl(x, q, n, inv_scale); }
void dequantize(float* x, const fp8e5m2* q, size_t n, float inv_scale) { dequantize_impl(x, q, n, inv_scale); }

Fp8CastStats to_cast_stats(const Fp8Counters& c) {
    Fp8CastStats s;
    float amax;
    std::memcpy(&amax, &c.amax_bits, sizeof(amax));
    s.amax = std::isnan(amax) ? NAN : amax;
    s.count = size_t(c.count);
    s.saturated = size_t(c.saturated);
    s.flushed = size_t(c.flushed);
    s.nan = size_t(c.nan);
    return s;
}

void accumulate(Fp8Counters& c, const Fp8CastStats& s) {
    uint32_t bits;
    const float amax = std::fabs(s.amax);   // the cast's amax is non-negative or NaN
    std::memcpy(&bits, &amax, sizeof(bits));
    bits &= 0x7fffffffu;
    c.amax_bits = bits > c.amax_bits ? bits : c.amax_bits;
    c.count += s.count;
    c.saturated += s.saturated;
    c.flushed += s.flushed;
    c.nan += s.nan;
}

}   // namespace train_gpt
