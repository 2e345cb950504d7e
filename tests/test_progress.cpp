// test_progress.cpp — the step line's and the summary's arithmetic (train/progress.h): model
// FLOPs per token, the GPU peaks MFU divides by, durations, and what the summary says to run next.
#include "train/progress.h"
#include "test_util.h"

using namespace train_gpt;
using namespace train_gpt::test;

TEST(Progress, FlopsPerTokenIsSixNPlusSixLCT) {
    const GPTConfig d12 = gpt_config_from_spec("d12", 50257, 1024);
    // 6·124,475,904 (GPT-2 124M with wte padded to 50304 rows) + 6·12·768·1024
    EXPECT_DOUBLE_EQ(flops_per_token(d12, 124475904, 1024), 6.0 * 124475904 + 6.0 * 12 * 768 * 1024);
    EXPECT_NEAR(flops_per_token(d12, 124475904, 1024), 8.03e8, 0.01e8);
}

TEST(Progress, MfuNeedsAKnownGpuPeak) {
    EXPECT_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3"), 989e12);
    EXPECT_EQ(gpu_peak_flops("NVIDIA H200"), 989e12);
    EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 4090"), 0.0);
    EXPECT_EQ(gpu_peak_flops(""), 0.0);   // the CPU
}

TEST(Progress, DurationsReadAsPeopleWriteThem) {
    EXPECT_EQ(human_duration(0), "0s");
    EXPECT_EQ(human_duration(42.4), "42s");
    EXPECT_EQ(human_duration(185), "3m05s");
    EXPECT_EQ(human_duration(3720), "1h02m");
    EXPECT_EQ(human_duration(2 * 86400 + 4 * 3600 + 59), "2d04h");
    EXPECT_EQ(human_duration(-1), "?");
}

TEST(Progress, SummarySaysWhereTheCheckpointIsAndWhatToRunNext) {
    RunSummary s;
    s.steps = 120;
    s.tokens = 122880;
    s.seconds = 64;
    s.mean_tokens_per_second = 1920;
    s.final_loss = 4.9397;
    s.final_val_loss = 5.0497;
    s.best_val_loss = 5.0497;
    s.best_val_step = 120;
    s.log_path = "out/log.jsonl";
    s.output_dir = "out";
    s.checkpoint_dir = "out/checkpoints";
    s.checkpoint = "out/checkpoints/step_00000120";
    std::string text;
    for (const std::string& line : summary_lines(s))
        text += line + "\n";
    EXPECT_CONTAINS(text, "time:       1m04s for 120 step(s), 122880 tokens; 1920 tok/s on average\n");
    EXPECT_CONTAINS(text, "train 4.9397 (last step), val 5.0497 (end), best 5.0497 at step 120");
    EXPECT_CONTAINS(text, "scripts/plot_run.py out/log.jsonl");
    EXPECT_CONTAINS(text, "checkpoint: out/checkpoints/step_00000120");
    EXPECT_CONTAINS(text, "./train_gpt --init-from out/checkpoints -x 0");
    EXPECT_CONTAINS(text, "./train_gpt --resume -o out -x 240");
    s.mfu = 0.512;
    s.checkpoint.reset();
    text.clear();
    for (const std::string& line : summary_lines(s))
        text += line + "\n";
    EXPECT_CONTAINS(text, "MFU 51.2%");
    EXPECT_CONTAINS(text, "checkpoint: none written");
}

// The ETA counts this process's training steps and evaluations at their own mean times: not the
// start-up, not the step-0 val loss as if it were a step (before: "ETA 14m05s" for a 2-minute run).
TEST(Progress, EtaIsTheMeanStepTimeAndTheMeanEvaluationTime) {
    RunClock clock(100.0);   // 100 s before this process (a resume)
    EXPECT_LT(clock.eta(10, 1), 0) << "no step measured yet: unknown";
    clock.evaluation_took(30);   // a slow step-0 val loss
    clock.step_took(2);
    clock.step_took(4);
    EXPECT_DOUBLE_EQ(clock.eta(10, 0), 30.0);          // 10 steps at 3 s
    EXPECT_DOUBLE_EQ(clock.eta(10, 2), 30.0 + 60.0);   // and two evaluations at 30 s
    EXPECT_GE(clock.elapsed(), 100.0);
    EXPECT_LT(clock.here(), 5.0);
}

// After a resume the summary says which numbers are the whole run's and which this process's;
// a short position table says what transformers can generate from the checkpoint.
TEST(Progress, AResumedRunsSummaryTellsTheWholeRunFromThisProcess) {
    RunSummary s;
    s.steps = 240;
    s.first_step = 120;
    s.tokens = 245760;
    s.seconds = 130;
    s.process_seconds = 65;
    s.mean_tokens_per_second = 1920;
    s.output_dir = "out";
    s.checkpoint_dir = "out/checkpoints";
    s.checkpoint = "out/checkpoints/step_00000240";
    s.max_seq_len = 128;
    std::string text;
    for (const std::string& line : summary_lines(s))
        text += line + "\n";
    EXPECT_CONTAINS(text,
                    "time:       2m10s for 240 step(s), 245760 tokens (the whole run); this process: steps "
                    "121-240 in 1m05s, 1920 tok/s on average\n");
    EXPECT_CONTAINS(text, "n_positions 128: transformers generates at most 128 tokens");
    s.max_seq_len = 1024;
    text.clear();
    for (const std::string& line : summary_lines(s))
        text += line + "\n";
    EXPECT_EQ(text.find("n_positions"), std::string::npos);
}

// The summary's commands can be pasted: paths with spaces or quotes are shell-quoted; a run
// resumed at its last step says it trained nothing (before: "this process: steps 9-8").
TEST(Progress, TheSummarysCommandsAreShellQuotedAndAResumeAtTheEndSaysSo) {
    RunSummary s;
    s.first_step = 8;
    s.steps = 8;
    s.tokens = 100;
    s.seconds = 10;
    s.process_seconds = 1;
    s.output_dir = "my run";
    s.checkpoint_dir = "it's/checkpoints";
    s.checkpoint = "it's/checkpoints/step_00000008";
    s.log_path = "my run/log.jsonl";
    std::string text;
    for (const std::string& line : summary_lines(s))
        text += line + "\n";
    EXPECT_CONTAINS(text, "this process: no step (resumed at step 8)");
    EXPECT_CONTAINS(text, "./train_gpt --init-from 'it'\\''s/checkpoints' -x 0");
    EXPECT_CONTAINS(text, "./train_gpt --resume -o 'my run' --checkpoint-dir 'it'\\''s/checkpoints' -x 16");
    // round 20: the plotting command too (it was not quoted)
    EXPECT_CONTAINS(text, "(plot it: scripts/plot_run.py 'my run/log.jsonl')");
    EXPECT_EQ(shell_quoted("out/checkpoints"), "out/checkpoints");
    EXPECT_EQ(shell_quoted(""), "''");
}
