// test_resume.cpp — resuming a run (train/resume.h, the flags record of train/config.h): the flags
// a checkpoint records come back exactly, flags given on the command line override them and are
// reported, and the log of a resumed run keeps each record once.
#include "train/config.h"
#include "train/resume.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

TrainConfig parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"train_gpt"};
    for (const std::string& a : args)
        argv.push_back(a.c_str());
    TrainConfig cfg;
    EXPECT_EQ(parse_command_line((int)argv.size(), argv.data(), cfg), std::nullopt);
    return cfg;
}

std::vector<FlagOverride> resume(const std::vector<std::string>& args, const std::string& saved, TrainConfig* cfg) {
    std::vector<const char*> argv = {"train_gpt"};
    for (const std::string& a : args)
        argv.push_back(a.c_str());
    *cfg = parse(args);
    return parse_resumed_command_line((int)argv.size(), argv.data(), saved, "ckpts", *cfg);
}

}   // namespace

TEST(Resume, TheFlagsOfTheRunComeBackExactly) {
    const TrainConfig run = parse({"-e",
                                   "d4",
                                   "-b",
                                   "2",
                                   "-t",
                                   "32",
                                   "-d",
                                   "128",
                                   "-x",
                                   "30",
                                   "--lr",
                                   "0.000123456789",
                                   "--lr-schedule",
                                   "wsd",
                                   "-p",
                                   "bf16",
                                   "-j",
                                   "",
                                   "--shuffle",
                                   "--seed",
                                   "18446744073709551615",
                                   "--sample-prompt",
                                   "In the beginning",
                                   "--threads",
                                   "1"});
    const std::string saved = flags_json(run);
    TrainConfig resumed;
    const auto overrides = resume({"--resume"}, saved, &resumed);
    EXPECT_TRUE(overrides.empty());
    EXPECT_EQ(resumed.model, "d4");
    EXPECT_EQ(resumed.batch_size, 2);
    EXPECT_EQ(resumed.seq_len, 32);
    EXPECT_EQ(resumed.total_batch_tokens, 128);
    EXPECT_EQ(resumed.steps, 30);
    EXPECT_EQ(resumed.lr, run.lr) << "the command line's text, not a rounded rendering";
    EXPECT_EQ(resumed.lr_schedule, "wsd");
    EXPECT_EQ(resumed.precision, "bf16");
    EXPECT_EQ(resumed.val_data, "");
    EXPECT_TRUE(resumed.shuffle);
    EXPECT_EQ(resumed.seed, UINT64_MAX);
    EXPECT_EQ(resumed.sample_prompt, "In the beginning");
    EXPECT_EQ(resumed.threads, 1);
    EXPECT_TRUE(resumed.resume);
    EXPECT_EQ(resumed.checkpoint_dir, "ckpts") << "where the checkpoint was found";
    for (const auto& [name, text] : run.flag_texts) {
        if (name == "resume" || name == "checkpoint-dir") continue;
        EXPECT_EQ(resumed.flag_texts.at(name), text) << name;
    }
}

TEST(Resume, FlagsGivenNowOverrideTheRunsAndTheChangesAreReported) {
    const std::string saved = flags_json(parse({"-b", "2", "-x", "30", "--no-shuffle", "-o", "run1"}));
    TrainConfig resumed;
    // -b 2 and --lr 2e-3 (the default, 0.002) agree with the saved run: not reported
    const auto overrides =
        resume({"--resume", "-x", "60", "-b", "2", "--lr", "2e-3", "--shuffle", "--checkpoint-dir", "elsewhere"}, saved,
               &resumed);
    ASSERT_EQ(overrides.size(), 2u);
    EXPECT_EQ(overrides[0].flag, "shuffle");
    EXPECT_EQ(overrides[0].saved, "false");
    EXPECT_EQ(overrides[0].now, "true");
    EXPECT_EQ(overrides[1].flag, "steps");
    EXPECT_EQ(overrides[1].saved, "30");
    EXPECT_EQ(overrides[1].now, "60");
    EXPECT_EQ(resumed.steps, 60);
    EXPECT_EQ(resumed.batch_size, 2);
    EXPECT_TRUE(resumed.shuffle);
    EXPECT_EQ(resumed.output_dir, "run1");
    EXPECT_EQ(resumed.checkpoint_dir, "elsewhere");
    EXPECT_EQ(resumed.given,
              (std::set<std::string>{"resume", "steps", "batch-size", "lr", "shuffle", "checkpoint-dir"}));
}

TEST(Resume, AMalformedFlagsRecordIsRefused) {
    TrainConfig cfg;
    EXPECT_CONTAINS(error_of([&] { resume({"--resume"}, "[1, 2]", &cfg); }), "flags is malformed");
    EXPECT_CONTAINS(error_of([&] { resume({"--resume"}, R"({"steps": 3})", &cfg); }), "flag steps is not a string");
    EXPECT_CONTAINS(error_of([&] { resume({"--resume"}, R"({"steps": "many"})", &cfg); }), "do not parse");
    // a flag this version does not know is left out, not an error
    EXPECT_NO_THROW(resume({"--resume"}, R"({"steps": "7", "no-such-flag": "1"})", &cfg));
    EXPECT_EQ(cfg.steps, 7);
}

namespace {

std::string log_of(const std::vector<std::string>& records) {
    std::string text;
    for (const std::string& r : records)
        text += r + "\n";
    return text;
}

}   // namespace

TEST(Resume, TheLogIsCutAfterTheCheckpointRecordOfTheStep) {
    ScratchDir dir;
    const std::string path = dir.file("log.jsonl");
    const std::vector<std::string> kept = {
        R"({"type":"val","step":0,"loss":7.6})",       R"({"type":"step","step":1,"loss":7.5})",
        R"({"type":"step","step":2,"loss":7.4})",      R"({"type":"checkpoint","step":2,"path":"a"})",
        R"({"type":"val","step":2,"loss":7.3})",       R"({"type":"step","step":3,"loss":7.2})",
        R"({"type":"step","step":4,"loss":7.1})",      R"({"type":"fp8","step":4,"tensor":"x"})",
        R"({"type":"checkpoint","step":4,"path":"b"})"};
    const std::vector<std::string> dropped = {R"({"type":"val","step":4,"loss":7.0})",
                                              R"({"type":"step","step":5,"loss":6.9})",
                                              R"({"type":"step","st)"};   // torn by a crash
    write_text(path, log_of(kept) + log_of(dropped));
    truncate_log_for_resume(path, 4, {"val", "sample"});   // the resumed run evaluates step 4 again
    EXPECT_EQ(read_text(path), log_of(kept));
    // ... or not (-v 0 now): the val loss of the step itself stays (round 35: it was lost)
    write_text(path, log_of(kept) + log_of(dropped));
    truncate_log_for_resume(path, 4, {"sample"});
    EXPECT_EQ(read_text(path), log_of(kept) + log_of({dropped[0]}));
}

TEST(Resume, ALogWithoutTheCheckpointRecordKeepsWhatCameBeforeTheStep) {
    ScratchDir dir;
    const std::string path = dir.file("log.jsonl");
    write_text(path, log_of({R"({"type":"val","step":0,"loss":7.6})", R"({"type":"step","step":1,"loss":7.5})",
                             R"({"type":"step","step":2,"loss":7.4})", R"({"type":"fp8","step":2,"tensor":"x"})",
                             R"({"type":"val","step":2,"loss":7.3})", R"({"type":"step","step":3,"loss":7.2})"}));
    const std::string before = read_text(path);
    truncate_log_for_resume(path, 2, {"val"});
    EXPECT_EQ(read_text(path),
              log_of({R"({"type":"val","step":0,"loss":7.6})", R"({"type":"step","step":1,"loss":7.5})",
                      R"({"type":"step","step":2,"loss":7.4})", R"({"type":"fp8","step":2,"tensor":"x"})"}));
    write_text(path, before);
    truncate_log_for_resume(path, 2, {});
    EXPECT_EQ(read_text(path),
              log_of({R"({"type":"val","step":0,"loss":7.6})", R"({"type":"step","step":1,"loss":7.5})",
                      R"({"type":"step","step":2,"loss":7.4})", R"({"type":"fp8","step":2,"tensor":"x"})",
                      R"({"type":"val","step":2,"loss":7.3})"}));
    truncate_log_for_resume(dir.file("missing.jsonl"), 2, {});
    EXPECT_FALSE(file_exists(dir.file("missing.jsonl")));
}

// A true/false flag given now in another spelling of the saved value is no change (round 19:
// "--master-weights true (the checkpoint's run: 1)" was listed as one).
TEST(Resume, AnEqualTrueOrFalseInAnotherSpellingIsNoOverride) {
    const std::string saved = flags_json(parse({"-w", "1", "--loss-scaling", "false"}));
    TrainConfig resumed;
    EXPECT_TRUE(resume({"--resume", "-w", "true", "--loss-scaling", "0"}, saved, &resumed).empty());
    EXPECT_EQ(resume({"--resume", "-w", "off"}, saved, &resumed).size(), 1u);
}
