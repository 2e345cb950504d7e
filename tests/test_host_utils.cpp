// test_host_utils.cpp — the small host helpers: learning-rate schedules, the RNG, the JSONL
// log, command-line parsing and the resolved config, model shapes, the file utilities, the
// divergence rules, the directory lock and the reason stdout failed.
#include "train/config.h"
#include "model/gpt.h"
#include "train/divergence.h"
#include "train/logger.h"
#include "train/run_lock.h"
#include "rng.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>

using namespace train_gpt;
using namespace train_gpt::test;

// The depth every JSON file is checked for before it is parsed: brackets inside strings (escaped
// quotes included) do not count; exactly the limit passes, one more does not.
TEST(JsonDepth, CountsNestingOutsideStringsOnly) {
    auto nested = [](int n) { return std::string(n, '[') + std::string(n, ']'); };
    EXPECT_TRUE(json_depth_within(nested(64)));
    EXPECT_FALSE(json_depth_within(nested(65)));
    EXPECT_TRUE(json_depth_within(nested(3), 3));
    EXPECT_FALSE(json_depth_within("{\"a\": [{\"b\": 1}]}", 2));
    EXPECT_TRUE(json_depth_within("{\"a\": \"" + std::string(100, '[') + "\"}", 1));
    EXPECT_TRUE(json_depth_within(R"({"a": "\" [[[[ \\", "b": 1})", 1)) << "an escaped quote does not end the string";
    EXPECT_FALSE(json_depth_within(R"({"a": "\\", "b": [[1]]})", 2)) << "an escaped backslash does";
    EXPECT_TRUE(json_depth_within(std::string(10, ']') + nested(64))) << "unbalanced text: the parser's to refuse";
    EXPECT_CONTAINS(error_of([&] { check_json_depth(nested(100), "f.json", "a config.json"); }),
                    "f.json: JSON nested deeper than 64 levels, which a config.json never is");
}

TEST(Schedule, WarmupIsLinearFromLrOverWarmup) {
    LrSchedule s;
    s.lr = 1.0f;
    s.warmup_steps = 4;
    s.total_steps = 100;
    EXPECT_FLOAT_EQ(s.at(0), 0.25f);
    EXPECT_FLOAT_EQ(s.at(3), 1.0f);
}

TEST(Schedule, CosineLinearConstantAndWsdHitTheirEndpoints) {
    LrSchedule s;
    s.lr = 2.0f;
    s.warmup_steps = 10;
    s.total_steps = 110;   // post-warmup steps 10..109
    s.final_lr_frac = 0.1f;
    // each value is a few FP32 operations on numbers ≤ 2: within 4 ulps of 2 (2^-20)
    const float ulps4 = 0x1p-20f;
    s.kind = LrScheduleKind::Cosine;
    EXPECT_FLOAT_EQ(s.at(10), 2.0f);
    EXPECT_NEAR(s.at(109), 0.2f, ulps4);
    // step 59 of the 99 after warmup: lr_min + ½(1 + cos(π·49/99))·(lr − lr_min), in double
    EXPECT_NEAR(s.at(59), 0.2 + 0.5 * (1 + std::cos(M_PI * 49 / 99)) * 1.8, ulps4);
    s.kind = LrScheduleKind::Linear;
    EXPECT_FLOAT_EQ(s.at(10), 2.0f);
    EXPECT_NEAR(s.at(109), 0.2f, ulps4);
    EXPECT_NEAR(s.at(10 + 33), 2.0f - 1.8f * 33 / 99, ulps4);
    s.kind = LrScheduleKind::Constant;
    EXPECT_FLOAT_EQ(s.at(109), 2.0f);
    s.kind = LrScheduleKind::WSD;
    s.decay_frac = 0.2f;   // decay over the last 22 steps: 88..109
    EXPECT_FLOAT_EQ(s.at(87), 2.0f);
    EXPECT_FLOAT_EQ(s.at(88), 2.0f);
    EXPECT_NEAR(s.at(109), 0.2f, ulps4);
    EXPECT_LT(s.at(100), 2.0f);
}

TEST(Schedule, NamesRoundTripAndUnknownFails) {
    for (auto kind : {LrScheduleKind::Constant, LrScheduleKind::Cosine, LrScheduleKind::Linear, LrScheduleKind::WSD}) {
        EXPECT_EQ(parse_lr_schedule(lr_schedule_name(kind)), kind);
    }
    EXPECT_CONTAINS(error_of([] { parse_lr_schedule("step"); }), "step");
}

TEST(Rng, IsDeterministicAndWellDistributed) {
    Rng a(42), b(42), c(43);
    EXPECT_EQ(a.next_u64(), b.next_u64());
    EXPECT_NE(Rng(42).next_u64(), c.next_u64());
    // std::mt19937_64's 10000th output is fixed by the C++ standard
    Rng standard(5489u);
    for (int i = 0; i < 9999; i++)
        standard.next_u64();
    EXPECT_EQ(standard.next_u64(), 9981545732273789042ull);
    Rng r(1);
    const int n = 200000;
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < n; i++) {
        double x = r.normal();
        sum += x;
        sum_sq += x * x;
    }
    EXPECT_NEAR(sum / n, 0.0, 5.0 / std::sqrt(n));   // 5 standard errors
    EXPECT_NEAR(sum_sq / n, 1.0, 5.0 * std::sqrt(2.0 / n));
    std::set<uint64_t> seen;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = r.below(7);
        EXPECT_LT(x, 7u);
        seen.insert(x);
    }
    EXPECT_EQ(seen.size(), 7u);
    for (int i = 0; i < 1000; i++) {
        double u = r.uniform();
        EXPECT_GE(u, 0.0);
        EXPECT_LT(u, 1.0);
    }
}

TEST(Logger, WritesOneJsonObjectPerLineIncludingNonFinite) {
    ScratchDir dir;
    {
        JsonlLog log(dir.file("log.jsonl"));
        log.write(
            LogRecord("step").num("step", 1).num("loss", 2.5).str("note", "a \"quoted\" word").boolean("ok", true));
        log.write(LogRecord("step").num("step", 2).num("loss", NAN).num("grad_norm", INFINITY));
    }
    std::string text = read_text(dir.file("log.jsonl"));
    size_t newline = text.find('\n');
    auto first = nlohmann::json::parse(text.substr(0, newline));
    EXPECT_EQ(first["type"], "step");
    EXPECT_EQ(first["loss"].get<double>(), 2.5);
    EXPECT_EQ(first["note"], "a \"quoted\" word");
    EXPECT_EQ(first["ok"], true);
    EXPECT_EQ(text.substr(0, newline),
              R"({"type":"step","step":1,"loss":2.5,"note":"a \"quoted\" word","ok":true})");   // in the order given
    auto second = nlohmann::json::parse(text.substr(newline + 1));
    EXPECT_EQ(second["loss"], "nan");
    EXPECT_EQ(second["grad_norm"], "inf");
    EXPECT_CONTAINS(error_of([&] { JsonlLog bad(dir.file("missing/dir/log.jsonl")); }), "missing/dir/log.jsonl");
}

namespace {
std::optional<int> parse(std::vector<const char*> args, TrainConfig& cfg) {
    args.insert(args.begin(), "train_gpt");
    ::testing::internal::CaptureStderr();
    ::testing::internal::CaptureStdout();
    auto rc = parse_command_line((int)args.size(), args.data(), cfg);
    ::testing::internal::GetCapturedStderr();
    ::testing::internal::GetCapturedStdout();
    return rc;
}
}   // namespace

TEST(Config, ParsesFlagsAndLaterFlagsWin) {
    TrainConfig cfg;
    EXPECT_FALSE(parse({"-e", "d12", "-b", "4", "--lr", "6e-4", "-b", "16", "--shuffle", "--lr-schedule", "wsd"}, cfg));
    EXPECT_EQ(cfg.model, "d12");
    EXPECT_EQ(cfg.batch_size, 16);
    EXPECT_FLOAT_EQ(cfg.lr, 6e-4f);
    EXPECT_TRUE(cfg.shuffle);
    EXPECT_EQ(cfg.lr_schedule, "wsd");
}

TEST(Config, BadInputGivesANonZeroExitCode) {
    TrainConfig cfg;
    EXPECT_NE(parse({"--nope"}, cfg).value_or(0), 0);
    EXPECT_NE(parse({"-t", "x"}, cfg).value_or(0), 0);
    EXPECT_NE(parse({"-t", "0"}, cfg).value_or(0), 0);
    EXPECT_EQ(parse({"--help"}, cfg).value_or(-1), 0);
}

TEST(Config, GradAccumulationMustDivide) {
    TrainConfig cfg;
    cfg.batch_size = 4;
    cfg.seq_len = 64;
    cfg.total_batch_tokens = 1024;
    EXPECT_EQ(grad_accum_steps_for(cfg, 1), 4);
    EXPECT_EQ(grad_accum_steps_for(cfg, 2), 2);
    cfg.total_batch_tokens = 1000;
    EXPECT_CONTAINS(error_of([&] { grad_accum_steps_for(cfg, 1); }), "--total-batch-tokens");
}

// Round 26: the CUDA kernel set's shape conditions, which its launches check only after config.json
// and log.jsonl are written, are checked at start-up by these (train_gpt's choose_attention and
// build_model); the CUDA test TrainGptRefusesCudaShapesBeforeWritingAnything runs them in the binary.
TEST(Config, CudaShapeChecksNameTheFlags) {
    EXPECT_NO_THROW(check_cuda_attention_shape("gemm", 768, 12));    // hs 64
    EXPECT_NO_THROW(check_cuda_attention_shape("cudnn", 1024, 8));   // hs 128
    EXPECT_NO_THROW(check_cuda_attention_shape("flash", 100, 2));    // never chosen there
    EXPECT_CONTAINS(error_of([] { check_cuda_attention_shape("gemm", 100, 2); }),
                    "--n-embd 100 / --n-head 2 = head size 50: the CUDA attention (gemm) takes a head size that is "
                    "a multiple of 8;");
    EXPECT_CONTAINS(error_of([] { check_cuda_attention_shape("cudnn", 1088, 4); }),
                    "head size 272: the CUDA attention (cudnn) takes a head size that is a multiple of 8 up to 128");
    EXPECT_NO_THROW(check_fp8_training_shape(1, 100, 1, "cpu"));   // the emulation takes any
    EXPECT_NO_THROW(check_fp8_training_shape(2, 8, 16, "cuda"));
    EXPECT_CONTAINS(error_of([] { check_fp8_training_shape(1, 100, 16, "cuda"); }),
                    "-p fp8 training on cuda: -b 1 times -t 100 = 100 must be a multiple of 16");
    EXPECT_CONTAINS(error_of([] { check_fp8_training_shape(65535, 65535, 16, "cuda"); }), "= 4294836225 must be");
}

TEST(Config, ResolvedConfigIsSavedAsJson) {
    ScratchDir dir;
    TrainConfig cfg;
    RunPlan plan;
    plan.model = gpt_config_from_spec("d12", 50257, 1024);
    plan.device = "cpu";
    save_config_json(dir.file("config.json"), cfg, plan);
    auto j = nlohmann::json::parse(read_text(dir.file("config.json")));
    EXPECT_EQ(j["n_embd"].get<int>(), 768);
    EXPECT_EQ(j["padded_vocab_size"].get<int>(), 50304);
    EXPECT_EQ(j["device"], "cpu");
    EXPECT_EQ(j["lr_schedule"], "cosine");
    // each value in its JSON type: counts as integers, switches as booleans, what the run does not
    // use (the fp8 settings of an fp32 run) as null
    EXPECT_TRUE(j["n_layer"].is_number_integer());
    EXPECT_TRUE(j["batch_size"].is_number_integer());
    EXPECT_TRUE(j["seed"].is_number_integer());
    EXPECT_TRUE(j["lr"].is_number_float());
    EXPECT_TRUE(j["shuffle"].is_boolean());
    EXPECT_TRUE(j["master_weights"].is_boolean());
    EXPECT_TRUE(j["fp8_gemms"].is_null());
}

TEST(Config, RunPlanResolvesTheFlags) {
    TrainConfig cfg;
    cfg.batch_size = 4;
    cfg.seq_len = 64;
    cfg.total_batch_tokens = 1024;
    cfg.precision = "fp8";
    cfg.fp8_gemms = "fc,fcproj";
    const RunPlan plan = resolve_run_plan(cfg, 2, 300);
    EXPECT_EQ(plan.model.vocab_size, 300);   // from the tokenizer
    EXPECT_EQ(plan.model.max_seq_len, 64);   // = seq_len
    EXPECT_EQ(plan.grad_accum_steps, 2);     // 1024 / (4·64·2)
    EXPECT_EQ(plan.tokens_per_step, 1024);
    EXPECT_EQ(plan.precision.fp8.gemms, (1u << kFc) | (1u << kFcproj));
    EXPECT_EQ(plan.checkpoint_dir, "out/checkpoints");
    cfg.vocab_size = 200;   // below the tokenizer's: refused, naming both
    EXPECT_CONTAINS(error_of([&] { resolve_run_plan(cfg, 2, 300); }),
                    "--vocab-size 200 is smaller than the tokenizer's 300");
}

TEST(ModelShape, DepthDialGivesGpt2Sizes) {
    auto d12 = gpt_config_from_spec("d12", 50257, 1024);
    EXPECT_EQ(d12.n_embd, 768);
    EXPECT_EQ(d12.n_head, 12);
    auto sizes = param_tensor_sizes(d12);
    size_t total = 0;
    for (size_t s : sizes)
        total += s;
    // GPT-2 small has 124,439,808 parameters with V = 50257; padding adds 47 rows of 768
    EXPECT_EQ(total, 124439808u + 47u * 768u);
    auto d48 = gpt_config_from_spec("d48", 50257, 1024);
    EXPECT_EQ(d48.n_embd, 1600);
    EXPECT_EQ(d48.n_head, 25);
    auto d2 = gpt_config_from_spec("d2", 257, 64);
    EXPECT_EQ(d2.n_embd, 128);
    EXPECT_EQ(d2.padded_vocab_size, 384);
    EXPECT_CONTAINS(error_of([] { gpt_config_from_spec("12", 100, 64); }), "dN");
    EXPECT_CONTAINS(error_of([] { gpt_config_from_spec("d4", 100, 64, 100, 3); }), "divisible");
}

TEST(ModelShape, OnlyTwoDimensionalWeightsDecay) {
    std::set<std::string> decayed;
    for (int i = 0; i < kNumParamTensors; i++) {
        if (param_tensor_decays(i)) decayed.insert(param_tensor_name(i));
    }
    EXPECT_EQ(decayed, (std::set<std::string>{"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}));
}

TEST(Utils, FormatAndAtomicWriteAndMakeDirs) {
    EXPECT_EQ(format("%d-%s", 7, "x"), "7-x");
    ScratchDir dir;
    make_dirs(dir.file("a/b/c"));
    write_file_atomic(dir.file("a/b/c/f.txt"), "hello", 5);
    EXPECT_EQ(read_text(dir.file("a/b/c/f.txt")), "hello");
    EXPECT_FALSE(file_exists(dir.file("a/b/c/f.txt.tmp")));
    EXPECT_CONTAINS(error_of([&] { open_file(dir.file("nope/x"), "rb"); }), dir.file("nope/x"));
    EXPECT_CONTAINS(error_of([] { fail("value %d", 3); }), "value 3");
}

TEST(Utils, OpenFileTakesOnlyRegularFilesAndNeverBlocks) {
    ScratchDir dir;
    write_text(dir.file("plain"), "abc");
    for (const char* mode : {"rb", "r+", "ab", "wb"})
        std::fclose(open_file(dir.file("plain"), mode));
    make_dirs(dir.file("sub"));
    ASSERT_EQ(mkfifo(dir.file("pipe").c_str(), 0644), 0);
    for (const char* mode : {"rb", "wb", "a"}) {
        SCOPED_TRACE(mode);
        // no writer (or reader) on the other end: a blocking open would wait here forever
        const std::string fifo = error_of([&] { open_file(dir.file("pipe"), mode); });
        EXPECT_CONTAINS(fifo, dir.file("pipe"));
        EXPECT_CONTAINS(fifo, "it is a FIFO (named pipe), not a regular file");
        EXPECT_CONTAINS(error_of([&] { open_file(dir.file("sub"), mode); }), dir.file("sub"));
    }
    EXPECT_CONTAINS(error_of([&] { open_file(dir.file("sub"), "rb"); }), "it is a directory, not a regular file");
    EXPECT_CONTAINS(error_of([&] { open_regular_file("/dev/null", O_RDONLY); }), "it is a character device");
    EXPECT_CONTAINS(error_of([&] { open_file(dir.file("plain"), "x"); }), "unsupported mode");
}

TEST(Utils, ReadFileTextReadsAWholeRegularFile) {
    ScratchDir dir;
    std::string bytes(200000, 'x');
    bytes[7] = '\0';   // binary-safe, longer than one read
    write_text(dir.file("f"), bytes);
    EXPECT_EQ(read_file_text(dir.file("f")), bytes);
    write_text(dir.file("empty"), "");
    EXPECT_EQ(read_file_text(dir.file("empty")), "");
    EXPECT_CONTAINS(error_of([&] { read_file_text(dir.file("none")); }), "cannot open " + dir.file("none"));
    EXPECT_CONTAINS(error_of([&] { read_file_text(dir.path); }), "not a regular file");
}

TEST(Utils, MakeDirsRefusesAPathThatIsNotADirectory) {
    ScratchDir dir;
    write_text(dir.file("file"), "mine");
    EXPECT_CONTAINS(error_of([&] { make_dirs(dir.file("file")); }),
                    "cannot create directory " + dir.file("file") + ": it exists and is not a directory");
    EXPECT_CONTAINS(error_of([&] { make_dirs(dir.file("file/below")); }), dir.file("file"));
    EXPECT_EQ(read_text(dir.file("file")), "mine");
    make_dirs(dir.file("d/e"));
    make_dirs(dir.file("d/e"));   // existing directories are fine
}

// ---- train/divergence.h, train/run_lock.h ----------------------------------------------------

TEST(Divergence, TheStreakStopsAtTheLimitAndResumesFromItsSavedValue) {
    DivergenceMonitor m({3, 0, false}, {});
    EXPECT_EQ(m.observe(1, 5.0, 1.0, true).kind, StepVerdict::kOk);
    EXPECT_EQ(m.observe(2, NAN, NAN, false).kind, StepVerdict::kSkipped);
    EXPECT_EQ(m.observe(3, NAN, NAN, false).kind, StepVerdict::kSkipped);
    EXPECT_EQ(m.state().skip_streak, 2);
    // a resumed monitor carries on from the checkpoint's streak
    DivergenceMonitor resumed({3, 0, false}, m.state());
    const StepVerdict v = resumed.observe(4, NAN, INFINITY, false);
    EXPECT_EQ(v.kind, StepVerdict::kStop);
    EXPECT_CONTAINS(v.message,
                    "3 steps in a row had a non-finite loss or gradient norm (last: loss nan, norm inf, step 4)");
    EXPECT_EQ(m.observe(4, 5.0, 1.0, true).kind, StepVerdict::kOk) << "a finite step ends the streak";
    EXPECT_EQ(m.state().skip_streak, 0);
}

TEST(Divergence, ASpikeIsALossAboveTheFactorTimesTheRunningLevelAndDoesNotMoveIt) {
    DivergenceMonitor m({20, 2.0, false}, {});
    EXPECT_EQ(m.observe(1, 4.0, 1, true).kind, StepVerdict::kOk);
    EXPECT_DOUBLE_EQ(m.state().loss_level, 4.0) << "the first loss starts the level";
    EXPECT_EQ(m.observe(2, 3.0, 1, true).kind, StepVerdict::kOk);
    EXPECT_DOUBLE_EQ(m.state().loss_level, 0.9 * 4.0 + 0.1 * 3.0);   // 3.9
    EXPECT_EQ(m.observe(3, 7.8, 1, true).kind, StepVerdict::kOk) << "7.8 = 2 x 3.9 is not above the bound";
    const double level = m.state().loss_level;
    StepVerdict v = m.observe(4, 100.0, 1, true);
    EXPECT_EQ(v.kind, StepVerdict::kSpike);
    EXPECT_CONTAINS(v.message, "loss spike at step 4: loss 100 is ");
    EXPECT_DOUBLE_EQ(m.state().loss_level, level) << "a spike does not move the level";
    v = m.observe(5, 90.0, 1, true);
    EXPECT_EQ(v.kind, StepVerdict::kSpike);
    EXPECT_TRUE(v.message.empty()) << "the series goes on: no second warning";
    v = m.observe(6, 4.0, 1, true);
    EXPECT_EQ(v.kind, StepVerdict::kSpikeEnded);
    EXPECT_CONTAINS(v.message, "spikes since step 4");
    // with stop_on_spike the first spike stops; a factor of 0 judges nothing
    DivergenceMonitor stop({20, 2.0, true}, {0, 3.0});
    EXPECT_EQ(stop.observe(7, 6.5, 1, true).kind, StepVerdict::kStop);
    DivergenceMonitor off({20, 0, true}, {0, 3.0});
    EXPECT_EQ(off.observe(7, 1e13, 1, true).kind, StepVerdict::kOk);
}

TEST(DirLock, ASecondHolderIsRefusedNamingTheFirstAndTheLockGoesWithItsHolder) {
    ScratchDir dir;
    std::string warning;
    auto first = DirLock::acquire(dir.path, "train_gpt -x 10", &warning);
    ASSERT_NE(first, nullptr) << warning;
    EXPECT_CONTAINS(read_text(lock_file_of(dir.path)), format("pid %d on ", (int)getpid()));
    EXPECT_CONTAINS(read_text(lock_file_of(dir.path)), ": train_gpt -x 10\n");
    // flock belongs to the open file, so even this process cannot take it twice
    const std::string e = error_of([&] { DirLock::acquire(dir.path, "again", &warning); });
    EXPECT_CONTAINS(e, dir.path + " is in use by another run: pid " + std::to_string(getpid()));
    EXPECT_CONTAINS(e, "train_gpt -x 10");
    first.reset();
    EXPECT_NE(DirLock::acquire(dir.path, "again", &warning), nullptr) << "released with its holder";
}

// A stream whose writes fail with the errno queued in `failures` (front first), then succeed.
struct FailingWrites {
    std::vector<int> failures;
    static ssize_t write(void* cookie, const char*, size_t size) {
        auto* self = static_cast<FailingWrites*>(cookie);
        if (self->failures.empty()) return (ssize_t)size;
        errno = self->failures.front();
        self->failures.erase(self->failures.begin());
        return -1;
    }
    std::FILE* open() { return fopencookie(this, "w", {nullptr, &FailingWrites::write, nullptr, nullptr}); }
};

// Round 33: a write to stdout that failed once (ENOSPC, inside a printf) was reported with
// whatever errno the run had set since ("No such file or directory"). The reason is the flush's
// own error, or none named where only an earlier write failed.
TEST(StdoutFailure, TheReasonIsTheFlushsOwnErrorNeverAStaleErrno) {
    FailingWrites healthy;
    std::FILE* f = healthy.open();
    std::fputs("step 1\n", f);
    EXPECT_EQ(flush_failure(f), "");
    std::fclose(f);

    FailingWrites once{{ENOSPC}};
    f = once.open();
    std::fputs("step 1\n", f);
    EXPECT_EQ(std::fflush(f), EOF);   // as a printf that filled the buffer would
    std::fputs("step 2\n", f);
    errno = ENOENT;   // a stat since
    EXPECT_EQ(flush_failure(f), "an earlier write failed");
    std::fclose(f);

    FailingWrites full{{ENOSPC, ENOSPC}};
    f = full.open();
    std::fputs("step 1\n", f);
    EXPECT_EQ(std::fflush(f), EOF);
    std::fputs("step 2\n", f);
    errno = ENOENT;
    EXPECT_EQ(flush_failure(f), std::strerror(ENOSPC));
    std::fclose(f);

    FailingWrites closed{{EPIPE}};
    f = closed.open();
    std::fputs("step 1\n", f);
    EXPECT_EQ(flush_failure(f), "it was closed");
    std::fclose(f);
}
