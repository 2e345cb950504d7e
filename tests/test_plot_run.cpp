// test_plot_run.cpp — scripts/plot_run.py on the logs the real binary writes: fp16 (the loss-scale
// panel) resumed half-way (the resume line), and fp8 (the telemetry panels): a PNG each, whose
// panels hold what the log holds (the script reports each panel's series and points, read back
// from the figure's lines): every step's loss, lr and norm, every val loss, the loss scale, one
// amax and one saturation series per FP8 tensor with a point per telemetry record, the resume.
// Needs Debian's python3-matplotlib (scripts/setup.sh --test): fails, never skips, without it.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model_test_util.h"

#include <map>
#include <set>
#include <unistd.h>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// A PNG: its 8-byte signature, then the IHDR chunk with the image's width and height.
void expect_png(const std::string& path, int min_width, int min_height) {
    ASSERT_TRUE(file_exists(path)) << path;
    const std::string bytes = read_text(path);
    ASSERT_GT(bytes.size(), 24u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_EQ(bytes.substr(12, 4), "IHDR");
    auto be32 = [&](size_t at) {
        return (uint32_t)(uint8_t)bytes[at] << 24 | (uint32_t)(uint8_t)bytes[at + 1] << 16 |
               (uint32_t)(uint8_t)bytes[at + 2] << 8 | (uint32_t)(uint8_t)bytes[at + 3];
    };
    EXPECT_GE((int)be32(16), min_width);
    EXPECT_GE((int)be32(20), min_height);
    EXPECT_GT(bytes.size(), 20000u) << "a figure with plotted lines, not an empty canvas";
}

// plot_run's "plot_run: panel NAME: SERIES N, SERIES N | R resume(s)" line for `panel`.
std::string panel_line(const std::string& output, const std::string& panel) {
    const std::string key = "plot_run: panel " + panel + ": ";
    const size_t at = output.find(key);
    if (at == std::string::npos) return "(no panel " + panel + ")";
    return output.substr(at + key.size(), output.find('\n', at) - at - key.size());
}

}   // namespace

TEST(PlotRun, WritesAPngOfTheLossLearningRateNormAndPrecisionTelemetry) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 300; i++)
        text += "In the beginning was the word. ";
    std::vector<uint32_t> tokens(text.begin(), text.end());
    write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    const std::string base = train_gpt_binary() + " -i '" + dir.file("train_*.bin") + "' -j '" +
                             dir.file("train_*.bin") + "' -e d2 --n-embd 32 -b 2 -t 16 -m 1 -v 2 -g 0 --threads 1 ";
    std::string out;
    ASSERT_EQ(run_command(base + "-x 4 -p fp16 --checkpoint-every 2 -o '" + dir.file("fp16") + "'", &out), 0) << out;
    ASSERT_EQ(run_command(base + "-x 8 -p fp16 --resume -o '" + dir.file("fp16") + "'", &out), 0) << out;
    ASSERT_EQ(run_command(base + "-x 6 -p fp8 --fp8-telemetry-every 2 -o '" + dir.file("fp8") + "'", &out), 0) << out;

    const std::string plot = "/usr/bin/python3 " + repo_root() + "/scripts/plot_run.py ";
    ASSERT_EQ(run_command(plot + "'" + dir.file("fp16/log.jsonl") + "'", &out), 0) << out;
    EXPECT_CONTAINS(out, "plot_run: " + dir.file("fp16/log.png"));
    expect_png(dir.file("fp16/log.png"), 800, 800);
    // 8 steps (4, then 4 more after the resume at step 4), a val loss every 2 steps
    const size_t steps = log_records(dir.file("fp16/log.jsonl"), "step").size();
    const size_t vals = log_records(dir.file("fp16/log.jsonl"), "val").size();
    ASSERT_EQ(steps, 8u);
    ASSERT_GE(vals, 4u);
    EXPECT_EQ(panel_line(out, "loss"),
              format("train loss %zu, val loss %zu | 1 resume | legend: train loss, val loss", steps, vals));
    EXPECT_EQ(panel_line(out, "lr"), format("lr %zu | 1 resume", steps));
    EXPECT_EQ(panel_line(out, "norm"), format("grad norm %zu | 1 resume", steps));
    EXPECT_EQ(panel_line(out, "scale"), format("loss scale %zu | 1 resume", steps));
    EXPECT_EQ(panel_line(out, "amax"), "(no panel amax)") << "no FP8 telemetry in an fp16 run";

    ASSERT_EQ(run_command(plot + "'" + dir.file("fp8/log.jsonl") + "' -o '" + dir.file("fp8.png") + "'", &out), 0)
        << out;
    expect_png(dir.file("fp8.png"), 800, 1200);   // five panels: loss, lr, norm, amax, saturation
    // one series per scaled tensor (2 layers × 4 GEMMs × x, w, dy), a point per telemetry record
    std::map<std::string, int> records_per_tensor;
    for (const auto& r : log_records(dir.file("fp8/log.jsonl"), "fp8"))
        records_per_tensor[r["tensor"].get<std::string>()]++;
    ASSERT_EQ(records_per_tensor.size(), 24u);
    std::string series;
    for (const auto& [tensor, n] : records_per_tensor)
        series += (series.empty() ? "" : ", ") + tensor + " " + std::to_string(n);
    // a legend of operands (colour) and GEMMs (line style), whatever the number of layers (before: none past 12 tensors)
    const std::string legend = " | legend: x, w, dy, qkv, attproj, fc, fcproj";
    EXPECT_EQ(panel_line(out, "amax"), series + " | 0 resumes" + legend);
    EXPECT_EQ(panel_line(out, "saturated"), series + " | 0 resumes" + legend);
    EXPECT_EQ(panel_line(out, "scale"), "(no panel scale)") << "no loss scale in an fp8 run";

    write_text(dir.file("bad.jsonl"), "{\"type\": \"step\"\n" + read_text(dir.file("fp16/log.jsonl")));
    EXPECT_NE(run_command(plot + "'" + dir.file("bad.jsonl") + "'", &out), 0);
    EXPECT_CONTAINS(out, dir.file("bad.jsonl") + ":1: not a JSON record");
}

// A log whose last line is torn (a run killed while writing it) is drawn without that line, with a
// warning (before: refused); a skipped step whose loss is NaN or inf still gets its marker, at the
// last finite loss before it (before: drawn at NaN, so not at all).
TEST(PlotRun, DrawsATornLogAndMarksNonFiniteSkippedSteps) {
    ScratchDir dir;
    std::string log;
    for (int step = 1; step <= 5; step++) {
        const bool skipped = step == 2 || step == 4;
        log += format(
            "{\"type\": \"step\", \"step\": %d, \"loss\": %s, \"lr\": 0.001, \"grad_norm\": %s, "
            "\"skipped\": %d}\n",
            step,
            step == 2   ? "\"nan\""
            : step == 4 ? "\"inf\""
                        : "3.5",
            skipped ? "\"nan\"" : "1.0", skipped ? 1 : 0);
    }
    write_text(dir.file("log.jsonl"), log + "{\"type\": \"step\", \"st");
    std::string out;
    ASSERT_EQ(
        run_command("/usr/bin/python3 " + repo_root() + "/scripts/plot_run.py '" + dir.file("log.jsonl") + "'", &out),
        0)
        << out;
    EXPECT_CONTAINS(out, "log.jsonl:6: the last line is not a whole record");
    EXPECT_EQ(panel_line(out, "loss"), "train loss 3, skipped step 2 | 0 resumes | legend: train loss, skipped step");
}

// Round 11: a wrong path, an output it cannot write, a line that is JSON but no record, a step
// record without its step: one line naming the file (and line) and what is wrong, exit 1 (before:
// Python tracebacks). A step record without its loss is drawn as a gap.
TEST(PlotRun, BadInputsAreNamedWithoutATraceback) {
    ScratchDir dir;
    const std::string script = "/usr/bin/python3 " + repo_root() + "/scripts/plot_run.py ";
    const std::string good = "{\"type\": \"step\", \"step\": 1, \"loss\": 3.5, \"lr\": 0.001, \"grad_norm\": 1.0}\n";
    write_text(dir.file("good.jsonl"), good);
    // round 30: a reader that stops early (| head) ended it in a BrokenPipeError traceback
    std::string piped;
    run_command("sh -c \"" + script + "'" + dir.file("good.jsonl") + "' | true\"", &piped);
    EXPECT_EQ(piped.find("Traceback"), std::string::npos) << piped;
    EXPECT_EQ(piped.find("BrokenPipe"), std::string::npos) << piped;
    write_text(dir.file("number.jsonl"), "5\n" + good);
    write_text(dir.file("stepless.jsonl"), good + "{\"type\": \"resume\"}\n" + good);
    // round 23: garbage that slipped past the checks into tracebacks
    write_text(dir.file("nested.jsonl"), good + std::string(100000, '[') + std::string(100000, ']') + "\n" + good);
    write_text(dir.file("digits.jsonl"),
               good + "{\"type\": \"step\", \"step\": " + std::string(5000, '9') + "}\n" + good);
    write_text(dir.file("huge_step.jsonl"),
               good + "{\"type\": \"step\", \"step\": 1" + std::string(30, '0') + "}\n" + good);
    const struct {
        std::string args, says;
    } cases[] = {
        {"'" + dir.file("none.jsonl") + "'", dir.file("none.jsonl") + ": No such file or directory"},
        {"'" + dir.file("good.jsonl") + "' -o '" + dir.file("no/such/dir.png") + "'",
         "cannot write " + dir.file("no/such/dir.png") + ": No such file or directory"},
        // round 25: a format matplotlib does not write (a traceback)
        {"'" + dir.file("good.jsonl") + "' -o '" + dir.file("plot.gif") + "'",
         "cannot write " + dir.file("plot.gif") + ": matplotlib writes "},
        {"'" + dir.file("number.jsonl") + "'", dir.file("number.jsonl") + ":1: not a record (a JSON object), but 5"},
        {"'" + dir.file("stepless.jsonl") + "'",
         dir.file("stepless.jsonl") + ":2: a resume record without an integer \"step\""},
        {"'" + dir.file("nested.jsonl") + "'", dir.file("nested.jsonl") + ":2: not a JSON record"},
        {"'" + dir.file("digits.jsonl") + "'", dir.file("digits.jsonl") + ":2: not a JSON record"},
        {"'" + dir.file("huge_step.jsonl") + "'",
         dir.file("huge_step.jsonl") + ":2: a step record without an integer \"step\" (of 64 bits)"},
    };
    for (const auto& k : cases) {
        SCOPED_TRACE(k.args);
        std::string out;
        EXPECT_EQ(run_command(script + k.args, &out), 1) << out;
        EXPECT_CONTAINS(out, "plot_run: " + k.says);
        EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;
    }
    write_text(dir.file("lossless.jsonl"), good + "{\"type\": \"step\", \"step\": 2, \"lr\": 0.001}\n");
    std::string out;
    // ... and a name without an extension is said as matplotlib writes it
    ASSERT_EQ(run_command(script + "'" + dir.file("good.jsonl") + "' -o '" + dir.file("plot") + "'", &out), 0) << out;
    EXPECT_CONTAINS(out, "plot_run: " + dir.file("plot.png") + "\n");
    EXPECT_TRUE(file_exists(dir.file("plot.png")));
    // round 26: a directory takes the plot named for the log (before: DIR/.png.png, said as DIR/.png)
    make_dirs(dir.file("plots"));
    for (const std::string& to : {dir.file("plots") + "/", dir.file("plots")}) {
        ASSERT_EQ(run_command(script + "'" + dir.file("good.jsonl") + "' -o '" + to + "'", &out), 0) << out;
        EXPECT_CONTAINS(out, "plot_run: " + dir.file("plots") + "/good.png\n");
        EXPECT_TRUE(file_exists(dir.file("plots/good.png")));
        std::remove(dir.file("plots/good.png").c_str());
    }
    ASSERT_EQ(run_command(script + "'" + dir.file("lossless.jsonl") + "'", &out), 0) << out;
    EXPECT_EQ(panel_line(out, "loss"), "train loss 1 | 0 resumes | legend: train loss");
    // round 23: a value beyond a double's range is a gap, and a config.json beside the log that is
    // no object leaves the title to the log's path (both were tracebacks)
    make_dirs(dir.file("run"));
    write_text(dir.file("run/log.jsonl"),
               good + "{\"type\": \"step\", \"step\": 2, \"loss\": 1" + std::string(400, '0') + "}\n");
    for (const char* config : {"[]", "null", "\"x\"", "1"}) {
        SCOPED_TRACE(config);
        write_text(dir.file("run/config.json"), config);
        ASSERT_EQ(run_command(script + "'" + dir.file("run/log.jsonl") + "'", &out), 0) << out;
        EXPECT_EQ(panel_line(out, "loss"), "train loss 1 | 0 resumes | legend: train loss");
        EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;
    }
    // round 42: a run directory a sweep named 'lr_$LR_$SEED' (matplotlib read the title's $...$ as
    // mathematics: a traceback), a config.json whose model is a lone surrogate (one too), a
    // tensor name with dollars; a config.json far larger than the trainer writes (read whole: out
    // of memory) leaves the title to the log's path; a log larger than any the trainer reads is refused
    const std::string sweep = dir.file("lr_$LR_$SEED");
    make_dirs(sweep);
    write_text(sweep + "/log.jsonl",
               good + "{\"type\": \"fp8\", \"step\": 1, \"tensor\": \"h0.$x$.dy\", \"amax\": 1}\n");
    write_text(sweep + "/config.json", R"({"model": "\ud800\udfff\ud800", "precision": "$fp8$"})");
    ASSERT_EQ(run_command(script + "'" + sweep + "/log.jsonl'", &out), 0) << out;
    EXPECT_EQ(panel_line(out, "amax"), "h0.\\$x\\$.dy 1 | 0 resumes | legend: x, w, dy, qkv, attproj, fc, fcproj");
    EXPECT_TRUE(file_exists(sweep + "/log.png"));
    // round 43: values past FP32's range (the trainer's) are gaps; 1e308 and -1e308 spanned past a
    // double's range (a matplotlib traceback)
    write_text(dir.file("wide.jsonl"),
               "{\"type\": \"step\", \"step\": 1, \"loss\": 1e308, \"lr\": 1, \"grad_norm\": 1}\n"
               "{\"type\": \"step\", \"step\": 2, \"loss\": -1e308, \"lr\": 1, \"grad_norm\": 1}\n" +
                   good);
    ASSERT_EQ(run_command(script + "'" + dir.file("wide.jsonl") + "'", &out), 0) << out;
    EXPECT_EQ(panel_line(out, "loss"), "train loss 1 | 0 resumes | legend: train loss");
    ASSERT_EQ(::truncate((dir.file("run/config.json")).c_str(), (off_t)200 << 30), 0);   // sparse: no disk taken
    ASSERT_EQ(run_command(script + "'" + dir.file("run/log.jsonl") + "'", &out), 0) << out;
    write_text(dir.file("huge.jsonl"), good);
    ASSERT_EQ(::truncate(dir.file("huge.jsonl").c_str(), (off_t)5 << 30), 0);
    EXPECT_EQ(run_command(script + "'" + dir.file("huge.jsonl") + "'", &out), 1) << out;
    EXPECT_CONTAINS(out, "plot_run: " + dir.file("huge.jsonl") + ": 5368709120 bytes, larger than any log.jsonl");
    EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;
}
