// test_reference_parity.cpp — the whole CPU model against the PyTorch reference
// (dev/reference/parity.py, Debian's python3-torch) on the same weights and tokens, in fp32:
// step-0 logits, loss and every parameter gradient, then 10 AdamW steps with warmup + cosine
// learning rates, weight decay and gradient clipping.
//
// Tolerances (tests/tolerances.h), normwise relative (max |a − b| / max |b| per tensor, see
// test_util.h). Both sides compute the same maths in FP32 with other summation orders and other
// libm functions: fp32_logits_bound, fp32_loss_bound and fp32_gradient_bound say what that can do
// (reordered sums and last-bit function differences in quadrature over the chain); the losses of
// the 10 steps within trained_loss_bounds with δ = the gradients' bound, plus the loss's. The
// gradient norm is compared at step 0 within the gradients' bound; after it the norm depends on
// how the weights moved, which no first-order argument bounds, so the steps are compared by
// whether each was clipped, where the reference's norm is not within those bounds of the
// threshold.
// PyTorch is required: the test fails (never skips) when it cannot run the reference.
#include "model/gpt.h"
#include "rng.h"
#include "train/schedule.h"
#include "test_util.h"
#include "tests/tolerances.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

template <typename T>
void write_binary(const std::string& path, const std::vector<T>& v) {
    FILE* f = open_file(path, "wb");
    write_exact(v.data(), sizeof(T), v.size(), f, path);
    std::fclose(f);
}

std::vector<float> read_floats(const std::string& path, size_t n) {
    std::vector<float> v(n);
    FILE* f = open_file(path, "rb");
    read_exact(v.data(), sizeof(float), n, f, path);
    std::fclose(f);
    return v;
}

struct ParityRun {
    GPTConfig cfg;
    int B = 2, T = 16, steps = 10;
    float grad_clip = 1.0f;
    AdamWConfig adamw{0.9f, 0.95f, 1e-8f, 0.1f};
    std::vector<float> lrs;
    std::vector<float> weights;
    std::vector<int32_t> tokens;   // (steps, 2, B, T)

    ParityRun() {
        cfg = gpt_config_from_spec("d2", /*vocab*/ 77, /*max_seq_len*/ 20, /*n_embd*/ 32, /*n_head*/ 2);
        LrSchedule schedule;
        schedule.lr = 3e-3f;
        schedule.warmup_steps = 2;
        schedule.total_steps = steps;
        for (int s = 0; s < steps; s++)
            lrs.push_back(schedule.at(s));
        Rng rng(7);
        tokens.resize((size_t)steps * 2 * B * T);
        for (int32_t& t : tokens)
            t = (int32_t)rng.below(cfg.vocab_size);
    }
    const int32_t* inputs(int s) const { return tokens.data() + (size_t)s * 2 * B * T; }
    const int32_t* targets(int s) const { return inputs(s) + B * T; }
};

}   // namespace

TEST(ReferenceParity, MatchesPyTorchOnLogitsGradientsAndTenAdamWSteps) {
    ParityRun run;
    std::unique_ptr<Backend> backend = make_cpu_backend();
    GPT model(run.cfg, *backend, run.B, run.T);
    model.init_weights(11);
    // perturb every tensor (biases and layernorm gains too) so that no term is trivially 0 or 1
    std::vector<float> w = model.weights();
    Rng rng(12);
    const size_t padding_start = (size_t)run.cfg.vocab_size * run.cfg.n_embd;
    for (size_t i = 0; i < w.size(); i++) {
        if (i >= padding_start && i < model.offset_of(kWpe)) continue;   // wte padding rows stay 0
        w[i] += (float)(0.05 * rng.normal());
    }
    model.set_weights(w);

    ScratchDir dir;
    const std::string bundle = dir.file("bundle"), out = dir.file("out");
    make_dirs(bundle);
    make_dirs(out);
    nlohmann::json config = {{"n_layer", run.cfg.n_layer},
                             {"n_head", run.cfg.n_head},
                             {"n_embd", run.cfg.n_embd},
                             {"vocab_size", run.cfg.vocab_size},
                             {"padded_vocab_size", run.cfg.padded_vocab_size},
                             {"max_seq_len", run.cfg.max_seq_len},
                             {"B", run.B},
                             {"T", run.T},
                             {"steps", run.steps},
                             {"lrs", run.lrs},
                             {"beta1", run.adamw.beta1},
                             {"beta2", run.adamw.beta2},
                             {"eps", run.adamw.eps},
                             {"weight_decay", run.adamw.weight_decay},
                             {"grad_clip", run.grad_clip}};
    write_text(bundle + "/config.json", config.dump(1));
    write_binary(bundle + "/params.bin", w);
    write_binary(bundle + "/tokens.bin", run.tokens);

    std::string output;
    const std::string command =
        python_binary() + " '" + repo_root() + "/dev/reference/parity.py' '" + bundle + "' '" + out + "'";
    ASSERT_EQ(run_command(command, &output), 0) << "the PyTorch reference failed (is python3-torch installed? "
                                                   "scripts/setup.sh --test installs it):\n"
                                                << output;
    nlohmann::json results = nlohmann::json::parse(read_text(out + "/results.json"));

    // ---- step 0: logits, loss, gradients at the initial weights ----
    const int B = run.B, T = run.T, V = run.cfg.vocab_size;
    model.forward(run.inputs(0), nullptr, B, T);
    std::vector<float> logits;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            std::vector<float> row = model.logits_at(b, t);
            logits.insert(logits.end(), row.begin(), row.end());
        }
    }
    std::vector<float> ref_logits = read_floats(out + "/logits.bin", (size_t)B * T * V);
    const double logits_bound = fp32_logits_bound(run.cfg, T), grad_bound = fp32_gradient_bound(run.cfg, B, T);
    const double logits_error = max_rel_error(logits.data(), ref_logits.data(), logits.size());
    EXPECT_LT(logits_error, logits_bound);
    double max_logit = 0;
    for (float x : ref_logits)
        max_logit = std::max(max_logit, (double)std::fabs(x));

    model.zero_grad();
    const float loss = model.forward(run.inputs(0), run.targets(0), B, T, 1.0f / (B * T));
    model.backward();
    const double ref_loss = results["loss"].get<double>();
    const double loss_bound = fp32_loss_bound(run.cfg, T, max_logit, ref_loss);
    EXPECT_LT(std::fabs(loss - ref_loss) / ref_loss, loss_bound) << loss << " vs " << ref_loss;

    std::vector<float> grads = model.gradients();
    std::vector<float> ref_grads = read_floats(out + "/grads.bin", grads.size());
    auto sizes = param_tensor_sizes(run.cfg);
    double worst_grad_error = 0;
    for (int i = 0; i < kNumParamTensors; i++) {
        const size_t off = model.offset_of(i);
        double err = max_rel_error(grads.data() + off, ref_grads.data() + off, sizes[i]);
        EXPECT_LT(err, grad_bound) << "gradient of " << param_tensor_name(i);
        worst_grad_error = std::max(worst_grad_error, err);
    }

    // ---- 10 AdamW steps ----
    std::vector<double> ref_losses;
    for (int s = 0; s < run.steps; s++)
        ref_losses.push_back(results["losses"][s].get<double>());
    const std::vector<double> step_bounds = trained_loss_bounds(ref_losses, grad_bound);
    model.set_weights(w);   // also resets the Adam moments
    int clipped = 0;
    double worst_loss_error = 0;
    for (int s = 0; s < run.steps; s++) {
        model.zero_grad();
        const float step_loss = model.forward(run.inputs(s), run.targets(s), B, T, 1.0f / (B * T));
        model.backward();
        const double norm = model.gradient_norm();
        const float scale = std::min(1.0f, (float)(run.grad_clip / (norm + 1e-6)));
        clipped += scale < 1.0f;
        model.update(run.lrs[s], run.adamw, scale, s + 1);
        const double ref = ref_losses[s];
        EXPECT_LE(std::fabs(step_loss - ref), step_bounds[s] + loss_bound * ref)
            << "step " << s << ": " << step_loss << " vs " << ref;
        worst_loss_error = std::max(worst_loss_error, std::fabs(step_loss - ref) / ref);
        const double ref_norm = results["grad_norms"][s].get<double>();
        if (s == 0) {
            EXPECT_LT(std::fabs(norm - ref_norm) / ref_norm, grad_bound) << "grad norm at step 0";
        }
        if (std::fabs(ref_norm - run.grad_clip) > grad_bound * ref_norm + step_bounds[s]) {
            EXPECT_EQ(norm > run.grad_clip, ref_norm > run.grad_clip) << "clipping at step " << s;
        }
    }
    std::printf(
        "parity vs PyTorch: logits %.2e (bound %.1e), loss %.2e (bound %.1e), worst gradient tensor %.2e "
        "(bound %.1e), worst of 10 step losses %.2e\n",
        logits_error, logits_bound, std::fabs(loss - ref_loss) / ref_loss, loss_bound, worst_grad_error, grad_bound,
        worst_loss_error);
    EXPECT_GT(clipped, 0) << "no step was clipped: the test would not cover clipping";
    EXPECT_LT(results["losses"][run.steps - 1].get<double>(), results["losses"][0].get<double>())
        << "the reference did not learn: the comparison would be weak";
}
