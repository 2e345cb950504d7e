// fp8_state.cpp — see fp8_state.h.
#include "precision/fp8_state.h"

#include "utils.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>

namespace train_gpt {

namespace {

// The names of a GEMM's three scaled tensors in telemetry and checkpoints, by Operand.
constexpr const char* kOperandName[] = {"x", "w", "dy"};

// Whether the backward of GEMM g reads an Xᵀ kept by the forward (qkv, fc: X is a layernorm
// output, which nothing else keeps) or casts it again from what the model keeps anyway (attproj:
// the attention output; fcproj: fc's output, through GELU; qkv and fc too under --recompute 2, from
// the residual stream through the layernorm). The cast is deterministic and the scale has not
// changed since the forward, so it is the same Xᵀ, bit for bit, at the price of one elementwise
// pass instead of 1 + 4 bytes per token and channel of every layer.
bool input_t_kept(int g, int recompute) { return (g == kQkv || g == kFc) && recompute < 2; }

struct ActivationSizes {
    size_t kept_t = 0, recast_t = 0, dout = 0;
};
ActivationSizes activation_sizes(const GPTConfig& cfg, size_t tokens, unsigned gemms, int recompute) {
    const size_t L = cfg.n_layer, C = cfg.n_embd;
    ActivationSizes sizes;
    for (int g = 0; g < kNumBlockGemms; g++) {
        if (!(gemms >> g & 1u)) continue;
        const BlockGemmInfo& gemm = kBlockGemms[g];
        if (input_t_kept(g, recompute)) {
            sizes.kept_t += L * tokens * gemm.in * C;
        } else {
            sizes.recast_t = std::max(sizes.recast_t, tokens * gemm.in * C);
        }
        sizes.dout = std::max(sizes.dout, tokens * std::max(gemm.in, gemm.out) * C);
    }
    return sizes;
}

}   // namespace

Fp8Ops& fp8_ops_of(Backend& backend) {
    Fp8Ops* ops = backend.fp8();
    if (ops == nullptr) fail("fp8: the %s kernel set has no FP8 ops", backend.name().c_str());
    return *ops;
}

size_t Fp8State::activation_bytes_for(const GPTConfig& cfg, size_t tokens, unsigned gemms, int recompute) {
    const ActivationSizes s = activation_sizes(cfg, tokens, gemms, recompute);
    return s.kept_t + s.recast_t + 2 * s.dout;
}

Fp8State::Fp8State(const GPTConfig& cfg, Backend& backend, const Fp8ScalingConfig& config, void* params, int max_B,
                   int max_T, Comm* comm, int recompute)
    : cfg_(cfg),
      k_(backend),
      f_(fp8_ops_of(backend)),
      config_(config),
      params_(params),
      offsets_(param_tensor_offsets(cfg)),
      max_tokens_((size_t)max_B * max_T),
      comm_(comm),
      recompute_(recompute),
      instances_(cfg.n_layer * kNumBlockGemms) {
    config_.validate();
    const size_t L = cfg.n_layer;
    size_t weight_bytes = 0;
    for (int g = 0; g < kNumBlockGemms; g++) {
        if (runs(g)) weight_bytes += L * width(g, true) * width(g, false);   // 16-bit GEMMs keep none
    }
    const ActivationSizes sizes = activation_sizes(cfg, max_tokens_, config.gemms, recompute);
    weights_ = static_cast<fp8e4m3*>(k_.alloc(weight_bytes));
    weights_t_ = static_cast<fp8e4m3*>(k_.alloc(weight_bytes));
    inputs_t_ = static_cast<fp8e4m3*>(k_.alloc(sizes.kept_t));
    recast_t_ = static_cast<fp8e4m3*>(k_.alloc(sizes.recast_t));
    dout_ = static_cast<fp8e5m2*>(k_.alloc(sizes.dout));
    dout_t_ = static_cast<fp8e5m2*>(k_.alloc(sizes.dout));
    x_ = reinterpret_cast<fp8e4m3*>(dout_);   // the forward's cast of X and the backward's of dY never overlap
    activation_bytes_ = activation_bytes_for(cfg, max_tokens_, config.gemms, recompute);

    const size_t S = 3 * (size_t)instances_, H = (size_t)config_.amax_history;
    scales_ = static_cast<Fp8ScaleSlot*>(k_.alloc(S * sizeof(Fp8ScaleSlot)));
    history_ = static_cast<float*>(k_.alloc(S * H * sizeof(float)));
    counters_ = static_cast<Fp8Counters*>(k_.alloc((S + 1) * sizeof(Fp8Counters)));
    counters_last_ = static_cast<Fp8Counters*>(k_.alloc((S + 1) * sizeof(Fp8Counters)));
    jit_ = static_cast<Fp8Counters*>(k_.alloc(sizeof(Fp8Counters)));
    amax_buffer_ = static_cast<float*>(k_.alloc(S * sizeof(float)));
    hist_len_.assign(S, 0);
    steps_.assign(S, 0);
    std::vector<Fp8ScaleSlot> ones(S, Fp8ScaleSlot{1.0f, 1.0f, 0, {}});
    k_.copy_to_device(scales_, ones.data(), S * sizeof(Fp8ScaleSlot));
}

Fp8State::~Fp8State() {
    for (void* p :
         {(void*)weights_, (void*)weights_t_, (void*)inputs_t_, (void*)recast_t_, (void*)dout_, (void*)dout_t_,
          (void*)scales_, (void*)history_, (void*)counters_, (void*)counters_last_, (void*)jit_, (void*)amax_buffer_}) {
        k_.release(p);
    }
}

// ---- where things are -----------------------------------------------------------------------------

bool Fp8State::keeps_input_t(int g) const { return input_t_kept(g, recompute_); }

// The cast that makes GEMM g's Xᵀ again in backward, from what the model passes (Source).
Fp8State::CastInput Fp8State::recast_input(int g, const Source& s) const {
    switch (g) {
        case kFcproj: return CastInput{CastInput::kGelu, s.x};
        case kQkv:
        case kFc: {
            CastInput in{CastInput::kLayerNorm, s.x, s.ln_weight, s.ln_bias};
            in.mean = const_cast<float*>(s.mean);
            in.rstd = const_cast<float*>(s.rstd);
            in.stats_ready = true;   // the forward's saved row statistics: read, not computed again
            return in;
        }
        default: return CastInput{CastInput::kTensor, s.x};
    }
}

// Slot of a scaled tensor in the state arrays: the X block, the W block, the dY block, each
// (layer, GEMM) in layer-major order.
size_t Fp8State::slot_index(Operand operand, int l, int g) const {
    return (size_t)operand * instances_ + (size_t)l * kNumBlockGemms + g;
}

Fp8Counters* Fp8State::spare_counters() const { return counters_ + 3 * (size_t)instances_; }

// Step 0 of delayed scaling (no history yet) and every step of the current recipe.
bool Fp8State::needs_amax_now(Operand operand, int l, int g) const {
    return config_.recipe == Fp8Recipe::Current || hist_len_[slot_index(operand, l, g)] == 0;
}

// The E4M3 Xᵀ (in·C, N) of GEMM g: kept per layer (GEMM by GEMM, those that run in FP8, each with
// L layers of max_tokens), or the one layer's buffer cast again in backward.
fp8e4m3* Fp8State::input_t(int l, int g, int N) const {
    if (!keeps_input_t(g)) return recast_t_;
    fp8e4m3* x = inputs_t_;
    for (int h = 0; h < g; h++) {
        if (runs(h) && keeps_input_t(h)) x += (size_t)cfg_.n_layer * max_tokens_ * width(h, false);
    }
    return x + (size_t)l * N * width(g, false);
}

// The E4M3 copy of GEMM g's weight of layer l: W (out·C, in·C), or Wᵀ (in·C, out·C); GEMM by GEMM,
// those that run in FP8, each with L layers.
fp8e4m3* Fp8State::weight(int l, int g, bool transposed) const {
    fp8e4m3* w = transposed ? weights_t_ : weights_;
    for (int h = 0; h < g; h++) {
        if (runs(h)) w += (size_t)cfg_.n_layer * width(h, true) * width(h, false);
    }
    return w + (size_t)l * width(g, true) * width(g, false);
}

// The working (bf16) weight matrix of GEMM g, layer l, in the model's flat parameter vector.
const void* Fp8State::working_weight(int l, int g) const {
    const size_t wsize = width(g, true) * width(g, false);
    const size_t value_bytes = dtype_size(k_.act_dtype());   // bf16 in fp8 mode
    return static_cast<const char*>(params_) + (offsets_[kBlockGemms[g].weight] + l * wsize) * value_bytes;
}

// The scale from the tensor's own amax, all in backend memory (no wait for the host): record_amax
// puts the amax into an empty counters slot (an amax op, or a cast that writes nothing).
void Fp8State::scale_just_in_time(Fp8ScaleSlot* slot, float fp8_max,
                                  const std::function<void(Fp8Counters*)>& record_amax) {
    k_.zero(jit_, sizeof(Fp8Counters));
    record_amax(jit_);
    f_.fp8_scale_from_counters(slot, jit_, fp8_max, config_.margin);
}

// q (N,C) and/or qt (C,N): the E4M3 cast of a GEMM input, with its producer fused
void Fp8State::cast_input(const CastInput& in, fp8e4m3* q, fp8e4m3* qt, int N, int C, const Fp8ScaleSlot* slot,
                          Fp8Counters* stats) {
    switch (in.kind) {
        case CastInput::kTensor: f_.quantize_transpose_e4m3(q, qt, in.x, N, C, slot, stats); break;
        case CastInput::kGelu: f_.gelu_forward_e4m3(q, qt, in.x, N, C, slot, stats); break;
        case CastInput::kLayerNorm:
            f_.layernorm_forward_e4m3(q, qt, in.mean, in.rstd, in.x, in.ln_weight, in.ln_bias, N, C, slot, stats,
                                      in.stats_ready);
            break;
    }
}

// ---- forward --------------------------------------------------------------------------------------

void Fp8State::layernorm_matmul_forward(int l, int g, void* out, float* mean, float* rstd, const void* inp,
                                        const void* ln_weight, const void* ln_bias, const void* bias, int N) {
    forward(l, g, out, CastInput{CastInput::kLayerNorm, inp, ln_weight, ln_bias, mean, rstd}, bias, N);
}

void Fp8State::matmul_forward(int l, int g, void* out, const void* inp, const void* bias, int N) {
    forward(l, g, out, CastInput{CastInput::kTensor, inp}, bias, N);
}

void Fp8State::gelu_matmul_forward(int l, int g, void* out, const void* inp, const void* bias, int N) {
    forward(l, g, out, CastInput{CastInput::kGelu, inp}, bias, N);
}

bool Fp8State::attention_forward_cast(int l, void* out, float* lse, const void* qkv, int B, int T, int NH) {
    if (!runs(kAttproj) || needs_amax_now(kX, l, kAttproj)) return false;
    f_.attention_forward_e4m3(out, lse, x_, qkv, B, T, cfg_.n_embd, NH, scale(kX, l, kAttproj),
                              training_ ? counters(kX, l, kAttproj) : spare_counters());
    x_cast_slot_ = (long)slot_index(kX, l, kAttproj);
    return true;
}

void Fp8State::forward(int l, int g, void* out, const CastInput& inp, const void* bias, int N) {
    const int C = (int)width(g, false), OC = (int)width(g, true);
    const bool cast_by_producer = x_cast_slot_ == (long)slot_index(kX, l, g);   // attention_forward_cast
    x_cast_slot_ = -1;
    if (cast_by_producer) {
        f_.matmul_forward_fp8(out, x_, scale(kX, l, g), weight(l, g, false), scale(kW, l, g), bias, N, C, OC);
        return;
    }
    // X → E4M3 with its scale (just in time on the first step / every step of the current recipe:
    // the statistics of a cast that writes nothing give the amax first)
    Fp8ScaleSlot* sx = scale(kX, l, g);
    if (needs_amax_now(kX, l, g)) {
        scale_just_in_time(sx, fp8e4m3::max_finite, [&](Fp8Counters* jit) {
            if (inp.kind == CastInput::kTensor) {
                f_.amax_into(inp.x, (size_t)N * C, jit);
            } else {
                cast_input(inp, nullptr, nullptr, N, C, sx, jit);
            }
        });
    }
    // one cast, two layouts where backward keeps Xᵀ: X (N,C) for this GEMM, Xᵀ (C,N) for dW.
    // Evaluation and sampling passes keep no Xᵀ and leave the scaling state alone (their
    // statistics go to the spare slot). A layernorm whose statistics the just-in-time pass
    // computed reads them instead of computing them again.
    CastInput input = inp;
    input.stats_ready = needs_amax_now(kX, l, g) && inp.kind == CastInput::kLayerNorm;
    if (training_) {
        fp8e4m3* qt = keeps_input_t(g) ? input_t(l, g, N) : nullptr;
        cast_input(input, x_, qt, N, C, sx, counters(kX, l, g));
    } else {
        cast_input(input, x_, nullptr, N, C, sx, spare_counters());
    }
    f_.matmul_forward_fp8(out, x_, sx, weight(l, g, false), scale(kW, l, g), bias, N, C, OC);
}

// ---- backward -------------------------------------------------------------------------------------

void Fp8State::matmul_backward(int l, int g, void* dinp, float* dweight, float* dbias, const void* dout,
                               const Source& inp, int N) {
    backward(l, g, dinp, dweight, dbias, dout, /*dout_cast=*/false, inp, N);
}

void Fp8State::gelu_backward_matmul_backward(int l, int g, void* dinp, float* dweight, float* dbias, void* dfch,
                                             const void* fch, const void* dfch_gelu, const Source& inp, int N) {
    const int cols = (int)width(g, true);
    // dY of fc = GELU's input gradient: with its scale known (delayed scaling after step 0), the
    // E5M2 cast is fused into GELU backward
    const bool fuse_dy = !needs_amax_now(kDY, l, g);
    if (fuse_dy) {
        f_.gelu_backward_e5m2(dfch, dout_, dout_t_, fch, dfch_gelu, N, cols, scale(kDY, l, g), counters(kDY, l, g));
    } else {
        k_.gelu_backward(dfch, fch, dfch_gelu, (size_t)N * cols);
    }
    backward(l, g, dinp, dweight, dbias, dfch, fuse_dy, inp, N);
}

bool Fp8State::layernorm_backward_cast(int l, int g, void* dinp, float* dweight, float* dbias, const void* dout,
                                       const void* inp, const void* weight, const float* mean, const float* rstd, int N,
                                       float* dinp_sums) {
    if (!runs(g) || needs_amax_now(kDY, l, g)) return false;
    f_.layernorm_backward_e5m2(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, cfg_.n_embd, dinp_sums, dout_,
                               dout_t_, scale(kDY, l, g), counters(kDY, l, g));
    dy_cast_slot_ = (long)slot_index(kDY, l, g);
    return true;
}

bool Fp8State::attention_backward_cast(int l, void* dqkv, const void* dout, const void* qkv, const void* out,
                                       const float* lse, int B, int T, int NH) {
    if (!runs(kQkv) || needs_amax_now(kDY, l, kQkv)) return false;
    f_.attention_backward_e5m2(dqkv, dout_, dout_t_, dout, qkv, out, lse, B, T, cfg_.n_embd, NH, scale(kDY, l, kQkv),
                               counters(kDY, l, kQkv));
    dy_cast_slot_ = (long)slot_index(kDY, l, kQkv);
    return true;
}

void Fp8State::backward(int l, int g, void* dinp, float* dweight, float* dbias, const void* dout, bool dout_cast,
                        const Source& inp, int N) {
    const int C = (int)width(g, false), OC = (int)width(g, true);
    if (dy_cast_slot_ == (long)slot_index(kDY, l, g)) dout_cast = true;   // cast by its producer
    dy_cast_slot_ = -1;
    Fp8ScaleSlot* sdy = scale(kDY, l, g);
    if (!dout_cast) {   // else the producer of dY has cast it already (gelu_backward_e5m2)
        if (needs_amax_now(kDY, l, g)) {
            scale_just_in_time(sdy, fp8e5m2::max_finite,
                               [&](Fp8Counters* jit) { f_.amax_into(dout, (size_t)N * OC, jit); });
        }
        // dY (N,OC) for dX and dYᵀ (OC,N) for dW, from one cast
        f_.quantize_transpose_e5m2(dout_, dout_t_, dout, N, OC, sdy, counters(kDY, l, g));
    }
    // Xᵀ: kept by the forward, or cast again from what backward keeps (its statistics, counted by
    // the forward's cast already, go to the spare slot)
    if (!keeps_input_t(g))
        cast_input(recast_input(g, inp), nullptr, input_t(l, g, N), N, C, scale(kX, l, g), spare_counters());
    f_.matmul_backward_fp8(dinp, dweight, dbias, dout_, dout_t_, sdy, dout, input_t(l, g, N), scale(kX, l, g),
                           weight(l, g, true), scale(kW, l, g), N, C, OC);
}

// ---- the optimizer's half -------------------------------------------------------------------------

// The amaxes are MAX-reduced across ranks in one all-reduce (NaN-propagating; the weights' are the
// same on every rank), one op rolls every history and computes every next scale (fp8_end_step),
// the counters of this step become the last step's (telemetry), and the next step starts empty.
void Fp8State::end_step() {
    const int S = 3 * instances_;
    const float* reduced = nullptr;
    if (comm_ != nullptr && comm_->world_size() > 1) {
        f_.fp8_amaxes(amax_buffer_, counters_, S);
        comm_->all_reduce_max(amax_buffer_, (size_t)S);
        reduced = amax_buffer_;
    }
    f_.fp8_end_step(scales_, history_, counters_, reduced, S, 2 * instances_, config_.amax_history,
                    config_.algo == Fp8AmaxAlgo::MostRecent, config_.margin, config_.recipe == Fp8Recipe::Delayed);
    for (int i = 0; i < S; i++) {   // the host's mirror of the history lengths and step counts
        hist_len_[i] = std::min(hist_len_[i] + 1, config_.amax_history);
        steps_[i]++;
    }
    std::swap(counters_, counters_last_);
    k_.zero(counters_, (size_t)S * sizeof(Fp8Counters));
}

void Fp8State::discard_step() {
    k_.zero(counters(kX, 0, 0), (size_t)instances_ * sizeof(Fp8Counters));
    k_.zero(counters(kDY, 0, 0), (size_t)instances_ * sizeof(Fp8Counters));
}

bool Fp8State::casts_in_update(int param_tensor, bool whole) const {
    const int g = block_gemm_of_weight(param_tensor);
    if (g < 0 || !runs(g) || !whole) return false;
    for (int l = 0; l < cfg_.n_layer; l++) {
        if (needs_amax_now(kW, l, g)) return false;
    }
    return true;
}

void Fp8State::adamw_update(int param_tensor, float* master, float* m, float* v, const float* grads, float lr,
                            float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    const int g = block_gemm_of_weight(param_tensor);
    const int rows = (int)width(g, true), cols = (int)width(g, false);
    const size_t wsize = (size_t)rows * cols;
    for (int l = 0; l < cfg_.n_layer; l++) {
        const size_t off = l * wsize;
        void* working = const_cast<void*>(working_weight(l, g));
        f_.adamw_update_e4m3(master != nullptr ? master + off : nullptr, working, m + off, v + off, grads + off, rows,
                             cols, lr, beta1, beta2, eps, weight_decay, grad_scale, t, weight(l, g, false),
                             weight(l, g, true), scale(kW, l, g), counters(kW, l, g));
    }
    cast_by_update_[g] = true;
}

// The optimizer's half of delayed scaling: the weights' scale is known before the cast, so the
// E4M3 copies (W and Wᵀ, one cast) are written right after the update. Each weight's slot holds
// the amax of its latest cast only (the history takes it at the end of the step that uses it).
void Fp8State::cast_weights() {
    for (int g = 0; g < kNumBlockGemms; g++) {
        if (!runs(g) || cast_by_update_[g]) continue;
        const size_t wsize = width(g, true) * width(g, false);
        for (int l = 0; l < cfg_.n_layer; l++) {
            const void* w = working_weight(l, g);
            Fp8ScaleSlot* sw = scale(kW, l, g);
            k_.zero(counters(kW, l, g), sizeof(Fp8Counters));
            if (needs_amax_now(kW, l, g)) {
                scale_just_in_time(sw, fp8e4m3::max_finite, [&](Fp8Counters* jit) { f_.amax_into(w, wsize, jit); });
            }
            f_.quantize_transpose_e4m3(weight(l, g, false), weight(l, g, true), w, (int)width(g, true),
                                       (int)width(g, false), sw, counters(kW, l, g));
        }
    }
    cast_by_update_ = {};
}

// ---- telemetry and checkpoints --------------------------------------------------------------------

std::vector<Fp8TensorReport> Fp8State::report() const {
    // the last step's counters and the scales for the next, read back only when asked
    const size_t S = 3 * (size_t)instances_;
    std::vector<Fp8Counters> last(S);
    std::vector<Fp8ScaleSlot> scales(S);
    k_.copy_to_host(last.data(), counters_last_, S * sizeof(Fp8Counters));
    k_.copy_to_host(scales.data(), scales_, S * sizeof(Fp8ScaleSlot));
    std::vector<Fp8TensorReport> out;
    for (int l = 0; l < cfg_.n_layer; l++) {
        for (int g = 0; g < kNumBlockGemms; g++) {
            if (!runs(g)) continue;
            for (Operand op : {kX, kW, kDY}) {
                const size_t i = slot_index(op, l, g);
                const Fp8CastStats stats = to_cast_stats(last[i]);
                out.push_back({format("h%d.%s.%s", l, kBlockGemms[g].name, kOperandName[op]), stats.amax,
                               scales[i].scale, stats.saturated_frac(), stats.flushed_frac()});
            }
        }
    }
    return out;
}

std::string Fp8State::to_json() const {
    const size_t S = 3 * (size_t)instances_, H = (size_t)config_.amax_history;
    std::vector<Fp8ScaleSlot> scales(S);
    std::vector<float> history(S * H);
    k_.copy_to_host(scales.data(), scales_, S * sizeof(Fp8ScaleSlot));
    k_.copy_to_host(history.data(), history_, S * H * sizeof(float));
    nlohmann::json j = nlohmann::json::array();
    for (int l = 0; l < cfg_.n_layer; l++) {
        for (int g = 0; g < kNumBlockGemms; g++) {
            nlohmann::json instance;
            for (Operand op : {kX, kW, kDY}) {
                const size_t i = slot_index(op, l, g);
                const std::vector<float> h(history.begin() + i * H, history.begin() + i * H + scales[i].hist_len);
                instance[kOperandName[op]] = {{"scale", scales[i].scale}, {"history", h}, {"steps", steps_[i]}};
            }
            j.push_back(instance);
        }
    }
    return j.dump();
}

void Fp8State::restore_json(const std::string& text, double dy_factor) {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.is_array() && j.empty()) {
        fail(
            "the checkpoint holds no FP8 scaling state (it was not trained in fp8): resume it in its own "
            "--precision, or start fp8 from its weights with --init-from");
    }
    if (!j.is_array() || j.size() != (size_t)instances_) {
        fail("FP8 scaling state for %zu GEMMs, the model has %d", j.is_array() ? j.size() : 0, instances_);
    }
    const size_t S = 3 * (size_t)instances_, H = (size_t)config_.amax_history;
    std::vector<Fp8ScaleSlot> scales(S);
    std::vector<float> history(S * H, 0.0f);
    for (int l = 0; l < cfg_.n_layer; l++) {
        for (int g = 0; g < kNumBlockGemms; g++) {
            for (Operand op : {kX, kW, kDY}) {
                const auto& t = j[(size_t)l * kNumBlockGemms + g][kOperandName[op]];
                const size_t i = slot_index(op, l, g);
                std::vector<float> h = t["history"].get<std::vector<float>>();
                const size_t len = std::min(h.size(), H);   // a shorter --fp8-amax-history keeps the newest
                float s = t["scale"].get<float>();
                if (op == kDY && dy_factor != 1.0) {   // the same rule end_step applies, on the rescaled amaxes
                    for (float& amax : h)
                        amax = (float)(amax * dy_factor);
                    // the previous scale in the new unit, within the rule's bounds (1/s finite)
                    const float previous = (float)std::min(std::max(s / dy_factor, (double)FLT_MIN), (double)FLT_MAX);
                    s = fp8_scale_rule(fp8_select_rule(h.data(), (int)len, config_.algo == Fp8AmaxAlgo::MostRecent),
                                       fp8e5m2::max_finite, config_.margin, previous);
                }
                std::copy(h.begin(), h.begin() + len, history.begin() + i * H);
                scales[i] = Fp8ScaleSlot{1.0f / s, s, (int32_t)len, {}};
                hist_len_[i] = (int)len;
                steps_[i] = t["steps"].get<int64_t>();
            }
        }
    }
    k_.copy_to_device(scales_, scales.data(), S * sizeof(Fp8ScaleSlot));
    k_.copy_to_device(history_, history.data(), S * H * sizeof(float));
    cast_weights();
}

}   // namespace train_gpt
