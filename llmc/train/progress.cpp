// progress.cpp — see progress.h.
#include "train/progress.h"

#include "utils.h"

#include <chrono>
#include <cmath>

namespace train_gpt {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}   // namespace

double flops_per_token(const GPTConfig& cfg, size_t num_parameters, int T) {
    return 6.0 * (double)num_parameters + 6.0 * cfg.n_layer * cfg.n_embd * (double)T;
}

double gpu_peak_flops(const std::string& name) {
    // dense BF16 tensor-core peaks (NVIDIA's data sheets, without sparsity)
    if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) return 989e12;
    return 0.0;
}

double unix_time() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string human_duration(double s) {
    if (!(s >= 0) || !std::isfinite(s)) return "?";
    const int64_t t = (int64_t)std::llround(s);
    if (t < 60) return format("%llds", (long long)t);
    if (t < 3600) return format("%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
    if (t < 86400) return format("%lldh%02lldm", (long long)(t / 3600), (long long)(t % 3600 / 60));
    return format("%lldd%02lldh", (long long)(t / 86400), (long long)(t % 86400 / 3600));
}

RunClock::RunClock(double earlier_seconds) : earlier_(earlier_seconds), start_(now_seconds()) {}

double RunClock::elapsed() const { return earlier_ + here(); }
double RunClock::here() const { return now_seconds() - start_; }

double RunClock::eta(int steps, int evaluations) const {
    if (steps_ == 0) return -1;
    return step_seconds_ / steps_ * steps + (evals_ > 0 ? eval_seconds_ / evals_ * evaluations : 0.0);
}

std::vector<std::string> summary_lines(const RunSummary& s) {
    std::vector<std::string> lines;
    lines.push_back("---- run summary ----");
    if (s.steps > s.first_step || s.first_step > 0) {
        std::string time = format("time:       %s for %d step(s), %lld tokens", human_duration(s.seconds).c_str(),
                                  s.steps, (long long)s.tokens);
        // after a resume the totals are the whole run's, the rate this process's: said apart
        if (s.first_step > 0 && s.first_step >= s.steps) {   // resumed at its last step: nothing trained
            time += format(" (the whole run); this process: no step (resumed at step %d) in %s", s.first_step,
                           human_duration(s.process_seconds).c_str());
        } else if (s.first_step > 0) {
            time += format(" (the whole run); this process: steps %d-%d in %s", s.first_step + 1, s.steps,
                           human_duration(s.process_seconds).c_str());
            if (s.mean_tokens_per_second > 0) time += format(", %.0f tok/s on average", s.mean_tokens_per_second);
        } else if (s.mean_tokens_per_second > 0) {
            time += format("; %.0f tok/s on average", s.mean_tokens_per_second);
        }
        if (s.mfu > 0) time += format(", MFU %.1f%%", 100 * s.mfu);
        lines.push_back(time);
    }
    std::string loss = "loss:      ";
    if (s.final_loss) loss += format(" train %.4f (last step)", *s.final_loss);
    if (s.final_val_loss) {
        loss += format("%s val %.4f (end)", s.final_loss ? "," : "", *s.final_val_loss);
        if (s.best_val_loss) loss += format(", best %.4f at step %d", *s.best_val_loss, s.best_val_step);
    }
    if (s.final_loss || s.final_val_loss) lines.push_back(loss);
    if (s.hellaswag_acc_norm) lines.push_back(format("hellaswag:  acc_norm %.4f (end)", *s.hellaswag_acc_norm));
    if (s.steps == 0 && s.sample_tokens > 0) lines.push_back(format("sample:     %d tokens (above)", s.sample_tokens));
    if (!s.log_path.empty())
        lines.push_back("log:        " + s.log_path + "   (plot it: " + shell_quoted(s.plot_script) + " " +
                        shell_quoted(s.log_path) + ")");
    if (s.checkpoint) {
        std::string what = "a Hugging Face model directory: " + s.checkpoint_holds;
        // transformers' generate stops at n_positions tokens; the engine's sampling slides its window
        if (s.max_seq_len > 0 && s.max_seq_len < 1024) {
            what += format(
                "; n_positions %d: transformers generates at most %d tokens, the engine's samples slide "
                "past them",
                s.max_seq_len, s.max_seq_len);
        }
        lines.push_back("checkpoint: " + *s.checkpoint + "   (" + what + ")");
        lines.push_back("next:       " + shell_quoted(s.program) + " --init-from " + shell_quoted(s.checkpoint_dir) +
                        " -x 0 -g 200" + (s.tokenizer_encodes ? " --sample-prompt 'Text to continue'" : "") +
                        "   (sample from it)");
        const std::string where = s.checkpoint_dir == s.output_dir + "/checkpoints"
                                      ? ""
                                      : " --checkpoint-dir " + shell_quoted(s.checkpoint_dir);
        lines.push_back("            " + shell_quoted(s.program) + " --resume -o " + shell_quoted(s.output_dir) +
                        where + " -x " + std::to_string(2 * s.steps) +
                        "   (train on, to twice the steps: the schedule stretches over them, and the run says how" +
                        (s.ranks > 1 ? format("; under this run's launcher, %d ranks", s.ranks) : std::string()) + ")");
    } else if (s.checkpoints_refused > 0) {
        lines.push_back(
            format("checkpoint: none written (the model's state held a non-finite value at each of the %d "
                   "save(s) due)",
                   s.checkpoints_refused));
    } else if (s.steps > 0) {
        lines.push_back("checkpoint: none written (--checkpoint-every N writes one every N steps and at the end)");
    }
    return lines;
}

}   // namespace train_gpt
