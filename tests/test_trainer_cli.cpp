// test_trainer_cli.cpp — the ./train_gpt binary end to end: a short run succeeds and writes its
// log and config; every kind of bad input exits non-zero with a message naming the file or flag,
// and leaves an existing output directory untouched.
#include "data/shard.h"
#include "train/config.h"
#include "model_test_util.h"
#include "test_util.h"
#include "data/tokenizer.h"
#include "rng.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <sstream>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// A tiny byte-level corpus: train and val shards plus the tokenizer, in a scratch directory.
struct TinyCorpus {
    ScratchDir dir;
    TinyCorpus() {
        std::string text;
        for (int i = 0; i < 200; i++)
            text += "In the beginning was the word. ";
        std::vector<uint32_t> tokens(text.begin(), text.end());
        write_shard(dir.file("tiny_train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
        write_shard(dir.file("tiny_val_000000.bin"), tokens.data(), 2000, 2);
        Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    }
    // flags for a 2-layer, 32-wide model on this corpus
    std::string args(const std::string& train_glob = "") const {
        return " -i '" + (train_glob.empty() ? dir.file("tiny_train_*.bin") : train_glob) + "' -j '" +
               dir.file("tiny_val_*.bin") + "' --tokenizer '" + dir.file("tokenizer.bin") +
               "' -e d2 --n-embd 32 -b 2 -t 16 -m 2 -o '" + dir.file("out") + "'";
    }
};

// Runs train_gpt with args; expects failure; returns its output.
std::string expect_failure(const std::string& args) {
    std::string output;
    int rc = run_command(train_gpt_binary() + " " + args, &output);
    EXPECT_NE(rc, 0) << "expected a non-zero exit for: " << args << "\n" << output;
    EXPECT_NE(rc, -1) << "crashed (killed by a signal) for: " << args;
    return output;
}

}   // namespace

TEST(TrainerCli, ShortRunWritesLogConfigAndSample) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 6 -v 3 -g 16 -d 64", &output), 0) << output;
    EXPECT_CONTAINS(output, "| grad_accum_steps ");   // the start-up table
    EXPECT_CONTAINS(output, "step 6/6 | loss");
    EXPECT_CONTAINS(output, "---- sample (16 tokens, step 6) ----");

    int steps = 0, vals = 0, samples = 0, summaries = 0;
    double last_elapsed = 0, last_time = 0;
    std::istringstream log(read_text(corpus.dir.file("out/log.jsonl")));
    for (std::string line; std::getline(log, line);) {
        auto j = nlohmann::json::parse(line);   // every line is one JSON object
        std::string type = j["type"];
        if (type == "step") {
            steps++;
            EXPECT_EQ(j["step"].get<int>(), steps);
            for (const char* key : {"loss", "lr", "grad_norm", "ms", "tok_per_s"})
                EXPECT_TRUE(j.contains(key)) << key;
            EXPECT_EQ(j["tokens"].get<int64_t>(), 64 * steps) << "tokens seen: 2 micro-batches of 2·16 a step";
            EXPECT_GE(j["elapsed_s"].get<double>(), last_elapsed);
            EXPECT_GE(j["time"].get<double>(), last_time);
            EXPECT_GT(j["time"].get<double>(), 1.7e9) << "seconds since the Unix epoch";
            last_elapsed = j["elapsed_s"].get<double>();
            last_time = j["time"].get<double>();
            EXPECT_FALSE(j.contains("mfu")) << "no MFU without a GPU peak";
        }
        summaries += type == "summary";
        vals += type == "val";
        samples += type == "sample";
    }
    EXPECT_EQ(steps, 6);
    EXPECT_EQ(vals, 3);   // steps 0, 3 and the end
    EXPECT_EQ(samples, 1);
    EXPECT_EQ(summaries, 1);
    // the step line: elapsed time and ETA, no MFU on the CPU; the closing summary
    EXPECT_CONTAINS(output, "s elapsed, ETA ");
    EXPECT_EQ(output.find("MFU"), std::string::npos);
    EXPECT_CONTAINS(output, "---- run summary ----");
    EXPECT_CONTAINS(output, "for 6 step(s), 384 tokens");
    // round 26: the plot script beside the trainer, so that the hint runs from any directory (it was
    // scripts/plot_run.py, relative to the repository)
    const std::string bin_dir = train_gpt_binary().substr(0, train_gpt_binary().rfind('/'));
    const std::string plot =
        file_exists(bin_dir + "/scripts/plot_run.py") ? bin_dir + "/scripts/plot_run.py" : "scripts/plot_run.py";
    EXPECT_CONTAINS(output, "plot it: " + plot + " " + corpus.dir.file("out/log.jsonl"));
    EXPECT_CONTAINS(output, "checkpoint: none written");
    auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config["n_embd"].get<int>(), 32);
    EXPECT_EQ(config["vocab_size"].get<int>(), 257);
    EXPECT_EQ(config["padded_vocab_size"].get<int>(), 384);
    EXPECT_EQ(config["grad_accum_steps"].get<int>(), 2);   // -d 64 = 2 micro-batches of 2·16
}

namespace {

// The records of a log by type: (type, step) → how many times, and the step records' losses.
struct LogSummary {
    std::map<std::pair<std::string, int>, int> count;
    std::map<int, double> loss, norm;
    std::vector<std::string> types;   // in order
};
LogSummary summarize_log(const std::string& path) {
    LogSummary s;
    std::istringstream in(read_text(path));
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line);
        const std::string type = j["type"];
        const int step = j["step"].get<int>();
        s.count[{type, step}]++;
        s.types.push_back(type);
        if (type == "step") {
            s.loss[step] = j["loss"].get<double>();
            s.norm[step] = j["grad_norm"].get<double>();
        }
    }
    return s;
}

}   // namespace

// --resume with no other flag continues the checkpoint's run (batch, accumulation, schedule,
// precision, data, ...), bit for bit; a flag given now overrides and is reported; the log holds
// each step once, and the resume as a record of its own.
TEST(TrainerCli, ResumeWithoutFlagsRestoresTheRunAndLogsEachStepOnce) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() +
                              " -x 6 -d 64 -l 1e-3 --lr-schedule linear -p bf16 -v 3 "
                              "-g 4 --checkpoint-every 3 --threads 1",
                          &output),
              0)
        << output;
    const LogSummary full = summarize_log(corpus.dir.file("out/log.jsonl"));
    ASSERT_EQ(full.loss.size(), 6u);
    // the run, interrupted after its checkpoint at step 3
    ASSERT_EQ(run_command("cp -r '" + corpus.dir.file("out") + "' '" + corpus.dir.file("out2") + "' && rm -r '" +
                              corpus.dir.file("out2/checkpoints/step_00000006") + "'",
                          &output),
              0)
        << output;
    ASSERT_EQ(run_command(train_gpt_binary() + " --resume -o '" + corpus.dir.file("out2") + "'", &output), 0) << output;
    EXPECT_CONTAINS(output, "resuming the run of " + corpus.dir.file("out2/checkpoints/step_00000003"));
    EXPECT_CONTAINS(
        output, "--output-dir " + corpus.dir.file("out2") + " (the checkpoint's run: " + corpus.dir.file("out") + ")");
    EXPECT_CONTAINS(output, "step 6/6 | loss");
    auto config = nlohmann::json::parse(read_text(corpus.dir.file("out2/config.json")));
    EXPECT_EQ(config["batch_size"].get<int>(), 2);
    EXPECT_EQ(config["grad_accum_steps"].get<int>(), 2);
    EXPECT_EQ(config["precision"], "bf16");
    EXPECT_EQ(config["lr_schedule"], "linear");
    EXPECT_EQ(config["n_embd"].get<int>(), 32);
    const LogSummary resumed = summarize_log(corpus.dir.file("out2/log.jsonl"));
    for (int step = 1; step <= 6; step++) {
        EXPECT_EQ(resumed.count.at({"step", step}), 1) << "step " << step;
        EXPECT_EQ(resumed.loss.at(step), full.loss.at(step)) << "step " << step;
        EXPECT_EQ(resumed.norm.at(step), full.norm.at(step)) << "step " << step;
    }
    for (int step : {0, 3, 6})
        EXPECT_EQ(resumed.count.at({"val", step}), 1) << "val at step " << step;
    EXPECT_EQ(resumed.count.at({"resume", 3}), 1);
    EXPECT_EQ(resumed.count.at({"sample", 6}), 1);
    EXPECT_EQ(resumed.count.at({"summary", 6}), 1);
    EXPECT_EQ(resumed.count.at({"start", 0}), 1);
    EXPECT_EQ(resumed.count.size(), 1u + 6 + 3 + 1 + 1 + 2 + 1)
        << "the start (the run's identity), steps, vals, resume, sample, checkpoints 3 and 6, summary";

    // a longer run than the checkpoint's: the flag given now wins and is reported
    ASSERT_EQ(run_command(train_gpt_binary() + " --resume -o '" + corpus.dir.file("out2") + "' -x 8", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "--steps 8 (the checkpoint's run: 6)");
    EXPECT_CONTAINS(output, "step 8/8 | loss");
    const LogSummary longer = summarize_log(corpus.dir.file("out2/log.jsonl"));
    for (int step = 1; step <= 8; step++)
        EXPECT_EQ(longer.count.at({"step", step}), 1) << "step " << step;
    EXPECT_EQ(longer.count.at({"resume", 6}), 1);
}

// A resumed run samples what the uninterrupted one does: the checkpoint holds the samples' random
// numbers where they were (before: a resumed run drew from a fresh seed, so every sample after the
// resume differed, while the losses were bit-exact).
TEST(TrainerCli, SamplesAfterAResumeAreTheUninterruptedRuns) {
    TinyCorpus corpus;
    std::string output;
    const std::string flags = " -x 6 -s 2 -g 8 -v 0 --checkpoint-every 3 --threads 1";
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + flags, &output), 0) << output;
    ASSERT_EQ(run_command("cp -r '" + corpus.dir.file("out") + "' '" + corpus.dir.file("out2") + "' && rm -r '" +
                              corpus.dir.file("out2/checkpoints/step_00000006") + "'",
                          &output),
              0)
        << output;
    ASSERT_EQ(run_command(train_gpt_binary() + " --resume -o '" + corpus.dir.file("out2") + "'", &output), 0) << output;
    auto samples = [](const std::string& log) {
        std::map<int, std::string> by_step;
        std::istringstream in(read_text(log));
        for (std::string line; std::getline(in, line);) {
            const auto j = nlohmann::json::parse(line);
            if (j["type"] == "sample") by_step[j["step"].get<int>()] = j["text"].get<std::string>();
        }
        return by_step;
    };
    const auto full = samples(corpus.dir.file("out/log.jsonl")), resumed = samples(corpus.dir.file("out2/log.jsonl"));
    ASSERT_EQ(full.size(), 3u) << "samples at steps 2, 4 and the end";
    EXPECT_EQ(resumed, full);
}

// -s N samples during training; -x 0 with --init-from samples and evaluates a checkpoint with no
// training data at all (here: none in the working directory, and a -i that matches nothing).
TEST(TrainerCli, SamplesDuringTrainingAndFromACheckpointWithoutTrainingData) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 6 -s 2 -g 8 -v 3 --checkpoint-every 6 --threads 1",
                          &output),
              0)
        << output;
    const LogSummary run = summarize_log(corpus.dir.file("out/log.jsonl"));
    for (int step : {2, 4, 6})
        EXPECT_EQ(run.count.at({"sample", step}), 1) << "sample at step " << step;
    EXPECT_EQ(run.count.count({"sample", 3}), 0u);
    double final_val = 0;
    {
        std::istringstream log(read_text(corpus.dir.file("out/log.jsonl")));
        for (std::string line; std::getline(log, line);) {
            auto j = nlohmann::json::parse(line);
            if (j["type"] == "val" && j["step"] == 6) final_val = j["loss"].get<double>();
        }
    }
    make_dirs(corpus.dir.file("elsewhere"));
    int samples = 0;
    auto sample = [&](const std::string& from, const std::string& flags) {
        const std::string out_dir = corpus.dir.file("elsewhere/s" + std::to_string(samples++));
        std::string out;
        EXPECT_EQ(
            run_command("cd '" + corpus.dir.file("elsewhere") + "' && " + train_gpt_binary() + " --init-from '" + from +
                            "' -x 0 -g 16 -i '/nonexistent/*.bin' --threads 1 -o '" + out_dir + "' " + flags,
                        &out),
            0)
            << out;
        std::string text;
        std::istringstream log(read_text(out_dir + "/log.jsonl"));
        for (std::string line; std::getline(log, line);) {
            auto j = nlohmann::json::parse(line);
            if (j["type"] == "sample") text = j["text"];
            if (j["type"] == "val") {
                EXPECT_EQ(j["loss"].get<double>(), final_val) << "the same weights, the same val loss";
            }
        }
        EXPECT_FALSE(text.empty()) << out;
        return text;
    };
    const std::string root = corpus.dir.file("out/checkpoints"), step = root + "/step_00000006";
    const std::string a = sample(root, "--sample-seed 5");
    EXPECT_EQ(sample(step, "--sample-seed 5"), a) << "a checkpoint root is its newest step";
    EXPECT_NE(sample(root, "--sample-seed 6"), a);
    EXPECT_EQ(sample(root, "--temperature 0"), sample(root, "--temperature 0 --sample-seed 9")) << "greedy";
    sample(root, "--top-k 3 --top-p 0.5 -j '" + corpus.dir.file("tiny_val_*.bin") + "' -m 2 -b 2 -t 16");
}

// Evaluating a checkpoint without training (-x 0) measures its val loss as its run did: the run's
// -b, -t, -m, so the same tokens and the same loss as the training log's at that step (before: the
// command line's defaults, another loss); the val line says how many tokens it covered.
TEST(TrainerCli, EvaluatingACheckpointGivesTheValLossItsRunLogged) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 4 -v 4 -n 4 -g 0 --threads 1", &output), 0)
        << output;
    double logged = 0;
    std::istringstream log(read_text(corpus.dir.file("out/log.jsonl")));
    for (std::string line; std::getline(log, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j["type"] == "val" && j["step"] == 4) logged = j["loss"].get<double>();
    }
    EXPECT_CONTAINS(output, "step 4/4 | val loss " + format("%.4f", logged) + " | 64 tokens (2 batches of 2x16)");
    const std::string eval = train_gpt_binary() + " --init-from '" + corpus.dir.file("out/checkpoints") +
                             "' -x 0 -g 0 -j '" + corpus.dir.file("tiny_val_*.bin") + "' --threads 1 -o '" +
                             corpus.dir.file("eval") + "'";
    ASSERT_EQ(run_command(eval, &output), 0) << output;
    EXPECT_CONTAINS(output, "evaluating as the checkpoint's run did: --batch-size 2 --seq-len 16 --val-batches 2");
    EXPECT_CONTAINS(output, "step 0/0 | val loss " + format("%.4f", logged) + " | 64 tokens (2 batches of 2x16)");
    // given flags hold: another batch, other tokens
    ASSERT_EQ(run_command(eval + " -m 1 --overwrite-output", &output), 0) << output;
    EXPECT_CONTAINS(output, "--batch-size 2 --seq-len 16 (from");
    EXPECT_CONTAINS(output, "| 32 tokens (1 batches of 2x16)");
}

// precision_study.sh checks its argument before it installs, builds or trains anything (round 43:
// a typo, "mode", did all three and ran no study, exit 0). A copy runs beside a stub setup.sh, so
// that a check gone missing cannot install anything here.
TEST(TrainerCli, PrecisionStudyRefusesAnUnknownStudyFirst) {
    ScratchDir dir;
    make_dirs(dir.file("scripts"));
    std::string output;
    ASSERT_EQ(
        run_command("cp '" + repo_root() + "/scripts/precision_study.sh' '" + dir.file("scripts") + "/'", &output), 0);
    write_text(dir.file("scripts/setup.sh"), "#!/bin/sh\necho SETUP RAN\nexit 1\n");
    ASSERT_EQ(run_command("chmod +x '" + dir.file("scripts") + "'/*.sh", &output), 0);
    for (const std::string& args : {std::string("mode"), std::string("all extra")}) {
        EXPECT_EQ(run_command(dir.file("scripts/precision_study.sh") + " " + args, &output), 2) << output;
        EXPECT_CONTAINS(output, args == "mode" ? "'mode' is not a study: give modes, ablation or all"
                                               : "one argument (modes, ablation or all), got 2");
        EXPECT_EQ(output.find("SETUP RAN"), std::string::npos) << output;
    }
    EXPECT_EQ(run_command(dir.file("scripts/precision_study.sh") + " modes", &output), 1) << "then setup runs";
    EXPECT_CONTAINS(output, "SETUP RAN");
}

// scripts/op_budget.py refuses a bad flag in one line naming it (round 44: tracebacks for --model
// 124M or a missing --profile; tables of zeros for -B 0; --n-embd without --trace-lines ignored).
TEST(TrainerCli, OpBudgetRefusesBadFlagsNamingThem) {
    const std::string script = "/usr/bin/python3 " + repo_root() + "/scripts/op_budget.py ";
    for (const auto& [args, says] :
         {std::pair<std::string, std::string>{"--model 124M", "--model 124M: expected d<layers>"},
          {"--profile /nonexistent --steps 1", "--profile /nonexistent: no such file"},
          {"-B 0", "-B 0: expected a positive number"},
          {"--steps -1", "--steps, --n-embd, --n-head and --max-seq-len are 0 (the default) or positive"},
          {"--n-embd 64", "--n-embd and --n-head apply with --trace-lines only"}}) {
        std::string output;
        EXPECT_EQ(run_command(script + args, &output), 2) << args << "\n" << output;
        EXPECT_CONTAINS(output, "op_budget.py: error: " + says);
        EXPECT_EQ(output.find("Traceback"), std::string::npos) << output;
    }
    std::string output;
    ASSERT_EQ(run_command(script + "--model d2 -B 2 -T 64", &output), 0) << output;
    EXPECT_CONTAINS(output, "**d2** (L=2, C=128, NH=2), B=2, T=64");
}

// The launch scripts start mpirun as root too (containers, cloud images: Open MPI refuses root
// without --allow-run-as-root), and not with it otherwise. make, mpirun and id are stubs on PATH.
TEST(TrainerCli, LaunchScriptsStartMpirunAsRoot) {
    ScratchDir dir;
    make_dirs(dir.file("bin"));
    write_text(dir.file("bin/mpirun"), "#!/bin/sh\necho \"mpirun $*\"\n");
    write_text(dir.file("bin/make"), "#!/bin/sh\nexit 0\n");
    write_text(dir.file("hosts.txt"), "node1 slots=2\nnode2 slots=2\n");
    for (const char* uid : {"0", "1000"}) {
        write_text(dir.file("bin/id"), std::string("#!/bin/sh\necho ") + uid + "\n");
        std::string chmod_out;
        ASSERT_EQ(run_command("chmod +x '" + dir.file("bin") + "'/*", &chmod_out), 0) << chmod_out;
        const std::string env = "PATH='" + dir.file("bin") + "':$PATH ";
        std::string single, multi;
        ASSERT_EQ(run_command(env + repo_root() + "/scripts/run_gpt2_124M.sh 2 -x 1", &single), 0) << single;
        ASSERT_EQ(run_command(env + "HOSTFILE='" + dir.file("hosts.txt") + "' GPUS_PER_NODE=2 " + repo_root() +
                                  "/scripts/run_multinode.sh -x 1",
                              &multi),
                  0)
            << multi;
        EXPECT_CONTAINS(single, "mpirun ");
        EXPECT_CONTAINS(single, "-np 2 --bind-to none ./train_gpt -e d12");
        EXPECT_CONTAINS(multi, "-np 4 --hostfile " + dir.file("hosts.txt") + " ");
        // round 26: a HOSTFILE relative to where the script is started (it was read in the repository)
        std::string relative;
        EXPECT_EQ(run_command("cd '" + dir.path + "' && " + env + "HOSTFILE=hosts.txt GPUS_PER_NODE=2 " + repo_root() +
                                  "/scripts/run_multinode.sh -x 1",
                              &relative),
                  0)
            << relative;
        EXPECT_CONTAINS(relative, "-np 4 --hostfile " + dir.file("hosts.txt") + " ");
        EXPECT_EQ(run_command("cd '" + dir.path + "' && " + env + "HOSTFILE=nowhere.txt " + repo_root() +
                                  "/scripts/run_multinode.sh -x 1",
                              &relative),
                  1);
        EXPECT_CONTAINS(relative, "run_multinode.sh: HOSTFILE nowhere.txt is not a file (from " + dir.path + ")");
        // round 28: a hostfile without hosts, and GPU counts bash cannot take (exit 1 with no word, or
        // bash's own "unbound variable" / "value too great for base")
        write_text(dir.file("empty_hosts.txt"), "# none\n\n");
        for (const auto& [vars, says] :
             {std::pair<std::string, std::string>{"HOSTFILE=empty_hosts.txt",
                                                  "HOSTFILE " + dir.file("empty_hosts.txt") + " lists no host"},
              {"HOSTFILE=hosts.txt GPUS_PER_NODE=08", "GPUS_PER_NODE=08: expected a number of GPUs per node"},
              {"HOSTFILE=hosts.txt GPUS_PER_NODE=abc", "GPUS_PER_NODE=abc: expected a number of GPUs per node"},
              {"HOSTFILE=hosts.txt GPUS_PER_NODE=0", "GPUS_PER_NODE=0: expected a number of GPUs per node"}}) {
            EXPECT_EQ(run_command("cd '" + dir.path + "' && " + env + vars + " " + repo_root() +
                                      "/scripts/run_multinode.sh -x 1",
                                  &relative),
                      1)
                << vars;
            EXPECT_CONTAINS(relative, "run_multinode.sh: " + says);
        }
        EXPECT_EQ(run_command(env + repo_root() + "/scripts/run_gpt2_124M.sh 08 -x 1", &relative), 1);
        EXPECT_CONTAINS(relative, "run_gpt2_124M.sh: NUM_GPUS=08: expected 1 to 9999");
        for (const std::string& out : {single, multi}) {
            EXPECT_EQ(out.find("--allow-run-as-root") != std::string::npos, std::string(uid) == "0")
                << uid << ": " << out;
        }
    }
}

// A SIGTERM to a launch script reaches mpirun as SIGUSR1 (which Open MPI forwards to every rank:
// checkpoint, exit 75), and the script exits with mpirun's status. Before: the script exec'd
// mpirun, whose own SIGTERM handling kills the ranks ~2 s later and exits 1. Round 23: so does a
// Ctrl-C, which the terminal sends to the script's whole process group (before: mpirun, in that
// group, got the SIGINT too and killed the ranks mid-save). mpirun is a stub that exits 75 on
// SIGUSR1 and 1 on SIGTERM or SIGINT, as Open MPI's does; it is Python, whose handlers take over a
// signal ignored at its start, as mpirun's do (a shell's trap cannot).
TEST(TrainerCli, ASigtermToALaunchScriptStopsTheRanksWithACheckpoint) {
    ScratchDir dir;
    make_dirs(dir.file("bin"));
    // mpirun and srun: each says how it was called and which signal reached it
    const std::string launcher_stub =
        "#!/usr/bin/env python3\nimport os, signal, sys, time\n"
        "def on(name, rc):\n"
        "    def handler(signum, frame):\n"
        "        print('stub: ' + name, flush=True)\n"
        "        sys.exit(rc)\n"
        "    return handler\n"
        "signal.signal(signal.SIGUSR1, on('SIGUSR1', 75))\n"
        "signal.signal(signal.SIGTERM, on('SIGTERM', 1))\n"
        "signal.signal(signal.SIGINT, on('SIGINT', 1))\n"
        "print(os.path.basename(sys.argv[0]) + ' ' + ' '.join(sys.argv[1:]), flush=True)\n"
        "while True:\n    time.sleep(0.05)\n";
    write_text(dir.file("bin/mpirun"), launcher_stub);
    write_text(dir.file("bin/srun"), launcher_stub);
    // scontrol: the job's state from $JOB_STATE (RUNNING unless set), and the requeue it is asked for
    write_text(dir.file("bin/scontrol"),
               "#!/bin/sh\nif [ \"$1\" = show ] && [ \"$JOB_STATE\" = fail ]; then exit 1; fi\nif [ \"$1\" = show ]; "
               "then echo \"JobId=42 JobState=${JOB_STATE:-RUNNING} "
               "Reason=None\"; else echo \"scontrol $*\"; fi\n");
    write_text(dir.file("bin/make"), "#!/bin/sh\nexit 0\n");
    write_text(dir.file("hosts.txt"), "node1 slots=2\n");
    std::string out;
    ASSERT_EQ(run_command("chmod +x '" + dir.file("bin") + "'/*", &out), 0) << out;
    const std::string env = "PATH='" + dir.file("bin") + "':$PATH ";
    // round 27: slurm_train.sbatch (as sbatch runs it: a copy, from the submit directory) passed a
    // SIGTERM to srun, which kills the ranks at once; it exits 75 and requeues the job
    const std::string sbatch = "cd " + repo_root() + " && SLURM_JOB_ID=42 " + env +
                               "bash -c 'cat scripts/slurm_train.sbatch > " + dir.file("slurm_script") +
                               "; exec bash " + dir.file("slurm_script") + " -x 1'";
    // runs `script` in the background (set -m: a process group of its own, as a terminal's
    // foreground job has), sends `kill` its `signal` a second later; returns what the driver printed
    // ("exit N") and the script's own output
    auto signalled = [&](const std::string& script, const std::string& signal) {
        write_text(dir.file("drive.sh"), "set -m; ( " + script + " ) > '" + dir.file("out.txt") +
                                             "' 2>&1 & pid=$!; sleep 1; kill " + signal +
                                             "; wait $pid; echo \"exit $?\"\n");
        std::string output;
        run_command("bash '" + dir.file("drive.sh") + "'", &output);
        return std::make_pair(output, read_text(dir.file("out.txt")));
    };
    for (const std::string& script :
         {env + repo_root() + "/scripts/run_gpt2_124M.sh 2 -x 1",
          env + "HOSTFILE='" + dir.file("hosts.txt") + "' GPUS_PER_NODE=2 " + repo_root() + "/scripts/run_multinode.sh",
          sbatch}) {
        // the script's pid, and the whole group, as Ctrl-C and `kill -- -PGID` do
        for (const std::string signal : {"-TERM $pid", "-INT -- -$pid", "-TERM -- -$pid"}) {
            SCOPED_TRACE(script + ": kill " + signal);
            const auto [output, log] = signalled(script, signal);
            EXPECT_CONTAINS(output, "exit 75") << log;
            EXPECT_CONTAINS(log, "stub: SIGUSR1");
            EXPECT_EQ(log.find("stub: SIGTERM"), std::string::npos) << log;
            EXPECT_EQ(log.find("stub: SIGINT"), std::string::npos) << log;
            if (script == sbatch) {
                EXPECT_CONTAINS(log, "srun --mpi=pmix ./train_gpt --auto-resume -x 1\n");
                EXPECT_CONTAINS(log, "scontrol requeue 42\n");
            }
        }
    }
    // round 27: a plain scancel of a running job (the ranks checkpoint and exit 75) requeued it, so
    // the job came back after every scancel; a job Slurm no longer has RUNNING is not requeued
    {
        auto in_state = [&](const std::string& state) {   // the sbatch script, scontrol saying `state`
            std::string script = sbatch;
            script.replace(script.find("SLURM_JOB_ID=42 "), 16, "SLURM_JOB_ID=42 JOB_STATE=" + state + " ");
            return script;
        };
        const auto [output, log] = signalled(in_state("COMPLETING"), "-TERM $pid");
        EXPECT_CONTAINS(output, "exit 75") << log;
        EXPECT_CONTAINS(log, "job 42 is COMPLETING (cancelled?): not requeued");
        EXPECT_EQ(log.find("scontrol requeue"), std::string::npos) << log;
        // round 29: a state scontrol could not say (the controller busy): requeued, as before
        EXPECT_CONTAINS(signalled(in_state("fail"), "-TERM $pid").second, "scontrol requeue 42\n");
    }
    // round 27: Slurm makes no directory for --output; out/slurm-%j.log failed the job at launch in
    // a checkout without out/ (git ignores it)
    const std::string sbatch_text = read_text(repo_root() + "/scripts/slurm_train.sbatch");
    const size_t output_at = sbatch_text.find("#SBATCH --output=");
    ASSERT_NE(output_at, std::string::npos);
    const std::string output_value = sbatch_text.substr(output_at, sbatch_text.find('\n', output_at) - output_at);
    EXPECT_EQ(output_value.find('/'), std::string::npos) << output_value << ": in the submit directory";
    // round 23: the restart of a start without NUM_GPUS, "the same command with --resume", gave
    // mpirun "-np --resume"; a first argument that is a flag leaves NUM_GPUS at 8
    for (const std::string& args : {std::string("--resume"), std::string("4 --resume")}) {
        const std::string log = signalled(env + repo_root() + "/scripts/run_gpt2_124M.sh " + args, "-TERM $pid").second;
        EXPECT_CONTAINS(log, args == "--resume" ? " -np 8 --bind-to none ./train_gpt " : " -np 4 --bind-to none ");
        EXPECT_CONTAINS(log, "-o out/gpt2_124M --resume\n");
    }
}

// -x 0 (evaluating or sampling, no training): a one-line model description instead of the
// training table, a summary that says what it did, the tokenizer beside the training shards for a
// fresh model's samples, a notice where samples can only be ids; -x 0 -g 0 with nothing to evaluate
// is an error; llm.c's -e gpt2_124M.bin points to --init-from.
TEST(TrainerCli, RunsThatTrainNothingSayWhatTheyDo) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 2 -n 2 -g 0 --threads 1", &output), 0) << output;
    const std::string from = " --init-from '" + corpus.dir.file("out/checkpoints") + "' --threads 1";
    ASSERT_EQ(run_command(train_gpt_binary() + from + " -x 0 -g 4 -o '" + corpus.dir.file("s") + "'", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "model: 2 layers, 32 wide, 2 heads, vocab 257, 16 positions,");
    EXPECT_EQ(output.find("| batch_size"), std::string::npos) << "no training table";
    EXPECT_CONTAINS(output, "---- run summary ----\nsample:     4 tokens (above)\n");
    // round 25: the sample_seed config.json records draws the same sample when given back (it
    // recorded --seed, while the draws used a seed derived from it)
    const auto sampled = nlohmann::json::parse(read_text(corpus.dir.file("s/config.json")));
    const std::string first = output.substr(output.find("---- sample"));
    std::string again;
    ASSERT_EQ(run_command(train_gpt_binary() + from + " -x 0 -g 4 --sample-seed " +
                              std::to_string(sampled.at("sample_seed").get<int64_t>()) + " -o '" +
                              corpus.dir.file("s2") + "'",
                          &again),
              0)
        << again;
    EXPECT_EQ(again.substr(again.find("---- sample"), first.find("---- run summary")),
              first.substr(0, first.find("---- run summary")));
    // round 24: -n there saves nothing: it says so, and makes no checkpoint directory
    ASSERT_EQ(run_command(train_gpt_binary() + from + " -x 0 -g 4 -n 1 -o '" + corpus.dir.file("s1") + "'", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "notice: --checkpoint-every has no effect in this run: it applies with -x N (N > 0) only");
    EXPECT_FALSE(file_exists(corpus.dir.file("s1/checkpoints")));
    // nothing to do
    const std::string none = train_gpt_binary() + from + " -x 0 -g 0 -o '" + corpus.dir.file("n") + "'";
    ASSERT_EQ(run_command(none, &output), 1) << output;
    EXPECT_CONTAINS(output, "-x 0 -g 0: nothing to do");
    // round 25: ... and an empty -j (a script's unset variable) evaluates nothing either (exit 0)
    ASSERT_EQ(run_command(none + " -j ''", &output), 1) << output;
    EXPECT_CONTAINS(output, "-x 0 -g 0: nothing to do");
    // a fresh model's samples decode with the tokenizer beside the training shards
    const std::string glob = corpus.dir.file("tiny_train_*.bin");
    ASSERT_EQ(run_command(train_gpt_binary() + " -i '" + glob + "' -e d2 --n-embd 32 -t 16 -x 0 -g 4 --threads 1 -o '" +
                              corpus.dir.file("f") + "'",
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output, "(beside the training shards)");
    // no tokenizer at all (--vocab-size): a notice that the sample is ids
    ASSERT_EQ(run_command(train_gpt_binary() +
                              " -i '/nonexistent/*.bin' --vocab-size 300 -e d2 --n-embd 32 -t 16 -x 0 "
                              "-g 4 --threads 1 -o '" +
                              corpus.dir.file("v") + "'",
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output, "notice: the run has no tokenizer: samples are printed as token ids");
    // llm.c's habit
    EXPECT_CONTAINS(expect_failure("-e gpt2_124M.bin"), "give --init-from DIR");
}

// A gradient norm far above its running level is a warning of its own, in the output and the log
// (before: a norm 85x its level passed silently, the loss spike warning needing the loss to double).
// Data that changes at step 31, from a repeated sentence to random bytes: the norm jumps about 4x its level.
TEST(TrainerCli, AGradientNormSpikeIsAWarning) {
    ScratchDir dir;
    std::string text;
    while (text.size() < 960)
        text += "In the beginning was the word. ";
    std::vector<uint32_t> tokens(text.begin(), text.begin() + 960);
    Rng rng(1);
    for (int i = 0; i < 2000; i++)
        tokens.push_back((uint32_t)(rng.next_u64() % 256));
    write_shard(dir.file("s_train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    const std::string run = train_gpt_binary() + " -i '" + dir.file("s_train_*.bin") +
                            "' -j '' --vocab-size 257 -e d2 "
                            "--n-embd 32 -b 2 -t 16 -x 36 -g 0 -u 0 -k constant --threads 1 -o '" +
                            dir.file("out") + "'";
    std::string output;
    ASSERT_EQ(run_command(run + " --grad-norm-spike-factor 3", &output), 0) << output;
    EXPECT_CONTAINS(output, "warning: step 31: the gradient norm");
    EXPECT_CONTAINS(output, "(--grad-norm-spike-factor 3): a spike");
    const LogSummary log = summarize_log(dir.file("out/log.jsonl"));
    EXPECT_EQ(log.count.at({"grad_norm_spike", 31}), 1);
    // the norm's running level is in the checkpoint: a run resumed at step 28 warns at step 31 as
    // well (before: it measured the level again from step 29, too few steps to judge step 31)
    const std::string checkpointed = run + " --grad-norm-spike-factor 3 -n 28 --overwrite-output";
    ASSERT_EQ(run_command(checkpointed, &output), 0) << output;
    std::filesystem::remove_all(dir.file("out/checkpoints/step_00000036"));
    ASSERT_EQ(run_command(checkpointed + " --resume", &output), 0) << output;
    EXPECT_CONTAINS(output, "resum");
    EXPECT_CONTAINS(output, "warning: step 31: the gradient norm");
    ASSERT_EQ(run_command(run + " --grad-norm-spike-factor 0 --overwrite-output", &output), 0) << output;
    EXPECT_EQ(output.find("gradient norm"), std::string::npos) << "0: never";
}

// llm.c's short flags where they do not clash (-y resume, -n checkpoint every, -s sample every,
// -z ZeRO, -q final lr fraction, -k schedule, -w master weights), and a warmup that scales with
// the run: 12 steps warm up for 2, not all of them.
TEST(TrainerCli, LlmcShortFlagsAndTheWarmupOfAShortRun) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(
        run_command(train_gpt_binary() + corpus.args() + " -x 12 -n 6 -s 6 -g 4 -z 0 -q 0 -k linear -w 1 --threads 1",
                    &output),
        0)
        << output;
    auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config["warmup_steps"].get<int>(), 2);
    EXPECT_EQ(config["checkpoint_every"].get<int>(), 6);
    EXPECT_EQ(config["sample_every"].get<int>(), 6);
    EXPECT_EQ(config["lr_schedule"], "linear");
    EXPECT_EQ(config["final_lr_frac"].get<double>(), 0.0);
    EXPECT_EQ(config["zero"].get<int>(), 0);
    auto line_of = [&](const std::string& start) {
        const size_t at = output.find("\n" + start);
        return at == std::string::npos ? std::string() : output.substr(at + 1, output.find('\n', at + 1) - at - 1);
    };
    EXPECT_CONTAINS(line_of("step 1/12 | loss"), "| lr 1.00e-03 |");   // half-way through the warmup
    EXPECT_CONTAINS(line_of("step 2/12 | loss"), "| lr 2.00e-03 |");   // its end: the peak
    EXPECT_TRUE(file_exists(corpus.dir.file("out/checkpoints/step_00000006/manifest.json")));
    EXPECT_CONTAINS(output, "---- sample (4 tokens, step 6) ----");
    ASSERT_EQ(run_command(train_gpt_binary() + " -y 1 -o '" + corpus.dir.file("out") + "' -x 14", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "resuming from " + corpus.dir.file("out/checkpoints/step_00000012"));
    EXPECT_CONTAINS(output, "step 14/14 | loss");
    config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config["warmup_steps"].get<int>(), 3) << "a sixth of 14, rounded up";
    EXPECT_EQ(config["lr_schedule"], "linear") << "restored";
}

TEST(TrainerCli, HelpExitsZeroAndShowsDefaults) {
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + " --help", &output), 0);
    EXPECT_CONTAINS(output, "-b,--batch-size  B");
    EXPECT_CONTAINS(output, "Micro-batch size B (sequences per rank) [> 0] (default 8)");   // range and default
    EXPECT_CONTAINS(output, "(default true)");   // a bool's default in words, not 1
    EXPECT_CONTAINS(output, "--shuffle,--no-shuffle ");
    EXPECT_CONTAINS(output, "Testing:\n  --inject-nonfinite-step");   // the testing flag in a group of its own
    // none of CLI11's own notation: type names, validator names, "=default", "{false}"
    for (const char* artefact : {"INT", "FLOAT", "TEXT:", "=8", "{false}", "POSITIVE", " in ["}) {
        EXPECT_EQ(output.find(artefact), std::string::npos) << artefact;
    }
    // round 23: help text that could not be written (stdout on a full device) exited 0
    for (const std::string& tool : {train_gpt_binary(), build_dir() + "/prepare_text"}) {
        ASSERT_EQ(run_command("( " + tool + " --help > /dev/full )", &output), 1) << output;
        EXPECT_CONTAINS(output, "error: cannot write to stdout: No space left on device");
        // round 24: ... or where stdout is closed
        ASSERT_EQ(run_command("( " + tool + " --help >&- )", &output), 1) << output;
        EXPECT_CONTAINS(output, "error: cannot write to stdout");
        EXPECT_EQ(output.find("the run goes on"), std::string::npos) << output;
    }
}

// Round 26: llm.c's GPT-2 command line ends in -h 1 (evaluate HellaSwag); -h is --help here, so
// the whole line printed the help and exited 0 with nothing trained. -h with a value is refused.
TEST(TrainerCli, LlmcsMinusHWithAValueIsRefusedNotTakenForHelp) {
    TinyCorpus corpus;
    // round 27: every spelling of a value (-h1 and --help=1 still printed the help)
    for (const char* h : {"-h 1", "-h 0", "--help 1", "-h1", "-h=1", "--help=1"}) {
        SCOPED_TRACE(h);
        std::string output;
        EXPECT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 2 " + h, &output), 1) << output;
        EXPECT_CONTAINS(output, std::string("error: ") + h + ": ");
        EXPECT_CONTAINS(output, "is --help here and takes no value; llm.c's -h 1 (evaluate HellaSwag) is --hellaswag");
        EXPECT_FALSE(file_exists(corpus.dir.file("out")));
    }
    std::string output;
    EXPECT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 2 -h", &output), 0) << output;   // help, as ever
    EXPECT_CONTAINS(output, "-b,--batch-size  B");
}

// config.json holds every flag --help lists (as its long name with '_'), so it is the whole run.
TEST(TrainerCli, ConfigJsonHoldsEveryFlag) {
    std::string help;
    ASSERT_EQ(run_command(train_gpt_binary() + " --help", &help), 0);
    std::vector<std::string> flags;
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) {
        const size_t at = line.find("--");
        if (line.rfind("  ", 0) != 0 || at == std::string::npos || at > 6) continue;   // an option's line
        const size_t end = line.find_first_of(", ", at);
        const std::string name = line.substr(at + 2, end - at - 2);
        if (name != "help") flags.push_back(name);
    }
    ASSERT_GT(flags.size(), 60u) << help;
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -v 0 -g 0 --threads 1", &output), 0) << output;
    const auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    for (std::string name : flags) {
        for (char& ch : name) {
            if (ch == '-') ch = '_';
        }
        EXPECT_TRUE(config.contains(name)) << name << " is a flag, but not in config.json";
    }
}

// A flag given to a run that does not use it says so (before: --fp8-recipe under fp32, --eval-every
// without --hellaswag and --temperature with -g 0 were dropped in silence), and its config.json row is null.
TEST(TrainerCli, AFlagThisRunDoesNotUseSaysItHasNoEffect) {
    TinyCorpus corpus;
    const std::string run = train_gpt_binary() + corpus.args() + " -x 1 -v 0 --threads 1 -p fp32";
    std::string output;
    ASSERT_EQ(run_command(run + " -g 0 --fp8-recipe current --eval-every 5 --temperature 0.5", &output), 0) << output;
    EXPECT_CONTAINS(output, "notice: --fp8-recipe has no effect in this run: it applies with -p fp8 only");
    EXPECT_CONTAINS(
        output,
        "notice: --eval-every has no effect in this run: it applies with --hellaswag FILE and -x N (N > 0) only");
    EXPECT_CONTAINS(output, "notice: --temperature has no effect in this run: it applies with -g N (N > 0) only");
    // round 17's: fp16's loss scaling, pruning without checkpoints, the CUDA kernel set's flags
    ASSERT_EQ(
        run_command(run + " -g 0 --loss-scaling false --keep-checkpoints 5 --fused-kernels true --overwrite-output",
                    &output),
        0)
        << output;
    EXPECT_CONTAINS(output, "notice: --loss-scaling has no effect in this run: it applies with -p fp16 only");
    EXPECT_CONTAINS(output, "notice: --keep-checkpoints has no effect in this run: it applies with -n N (N > 0) only");
    EXPECT_CONTAINS(output,
                    "notice: --fused-kernels has no effect in this run: it applies with the CUDA kernel set only");
    const auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_TRUE(config.at("temperature").is_null());
    EXPECT_TRUE(config.at("fp8_recipe").is_null());
    // round 23's: the schedule's shape flags, and master weights in 32 bits
    ASSERT_EQ(run_command(run + " -g 0 --wsd-decay-frac 0.5 -w false --overwrite-output", &output), 0) << output;
    EXPECT_CONTAINS(output, "notice: --wsd-decay-frac has no effect in this run: it applies with -k wsd only");
    EXPECT_CONTAINS(output,
                    "notice: --master-weights has no effect in this run: it applies with -p bf16, fp16 or fp8 only");
    // ... whose values config.json keeps (a resume compares the schedule's shape with them)
    const auto kept = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(kept.at("wsd_decay_frac"), 0.5);
    EXPECT_EQ(kept.at("master_weights"), false);
    // round 44: the amax history and its algorithm set the delayed recipe's scales only
    ASSERT_EQ(run_command(run + " -g 0 -p fp8 --fp8-recipe current --fp8-amax-history 1 --fp8-amax-algo most_recent "
                                "--overwrite-output",
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output,
                    "notice: --fp8-amax-history has no effect in this run: it applies with -p fp8 "
                    "--fp8-recipe delayed only");
    EXPECT_CONTAINS(output, "notice: --fp8-amax-algo has no effect in this run");
    ASSERT_EQ(run_command(run + " -g 0 -k constant -q 0.5 --overwrite-output", &output), 0) << output;
    EXPECT_CONTAINS(output,
                    "notice: --final-lr-frac has no effect in this run: it applies with -k cosine, linear or wsd only");
    // round 27's: sampling during training with -x 0, top-k/top-p of a greedy sample, HellaSwag's
    // --eval-every with -x 0
    ASSERT_EQ(run_command(run + " -g 2 --temperature 0 --top-k 5 --top-p 0.5 --overwrite-output", &output), 0)
        << output;
    for (const char* flag : {"top-k", "top-p"}) {
        EXPECT_CONTAINS(output, std::string("notice: --") + flag +
                                    " has no effect in this run: it applies with -g N (N > 0) and --temperature "
                                    "above 0 (0 is greedy) only");
    }
    const std::string eval_only = train_gpt_binary() + corpus.args() + " -x 0 -g 2 --threads 1 -p fp32 -s 5";
    ASSERT_EQ(run_command(eval_only + " --overwrite-output", &output), 0) << output;
    EXPECT_CONTAINS(output,
                    "notice: --sample-every has no effect in this run: it applies with -g N (N > 0) and -x N (N > 0) "
                    "only");
    // round 34's: a -x 0 run reads a val set only where -j is given: -v and -m have no effect without
    const std::string no_val_set = train_gpt_binary() + " -i '" + corpus.dir.file("tiny_train_*.bin") +
                                   "' --tokenizer '" + corpus.dir.file("tokenizer.bin") +
                                   "' -e d2 --n-embd 32 -b 2 -t 16 -x 0 -g 2 --threads 1 -p fp32";
    ASSERT_EQ(run_command(no_val_set + " -v 5 -m 3", &output), 0) << output;
    EXPECT_CONTAINS(output, "notice: --val-every has no effect in this run: it applies with -j GLOB only");
    EXPECT_CONTAINS(output, "notice: --val-batches has no effect in this run: it applies with -j GLOB only");
    // used: no notice, the value in config.json
    ASSERT_EQ(run_command(run + " -g 2 --temperature 0.5 --overwrite-output", &output), 0) << output;
    EXPECT_EQ(output.find("has no effect"), std::string::npos) << output;
    EXPECT_EQ(nlohmann::json::parse(read_text(corpus.dir.file("out/config.json"))).at("temperature"), 0.5);
}

// -p auto (the default): fp32 on the CPU, bf16 on a GPU, and the configuration says which and why;
// config.json records the precision the run had, so it reproduces the run on either machine.
TEST(TrainerCli, TheDefaultPrecisionIsTheDevicesAndSaysSo) {
    EXPECT_EQ(default_precision_for("cpu"), Precision::FP32);
    EXPECT_EQ(default_precision_for("cuda"), Precision::BF16);
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -v 0 -g 0 --device cpu", &output), 0) << output;
    EXPECT_CONTAINS(output, "| precision                  | fp32 ");
    EXPECT_CONTAINS(output, "| precision_from             | default: fp32 on the CPU");
    auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config["precision"], "fp32");
    EXPECT_EQ(config["precision_from"], "default: fp32 on the CPU");
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -v 0 -g 0 --device cpu -p bf16 -o '" +
                              corpus.dir.file("out_bf16") + "'",
                          &output),
              0)
        << output;
    config = nlohmann::json::parse(read_text(corpus.dir.file("out_bf16/config.json")));
    EXPECT_EQ(config["precision"], "bf16");
    EXPECT_EQ(config["precision_from"], "-p bf16");
    RunPlan plan;
    plan.device = "cuda";
    TrainConfig cfg;
    EXPECT_EQ(precision_source(cfg, plan), "default: bf16 on a GPU");
}

// --trace-ops lists the ops the run calls with their shapes, and changes nothing it computes: the
// traced run logs the untraced run's loss, digit for digit. A path it cannot write is named.
TEST(TrainerCli, TraceOpsListsTheOpsAndChangesNothing) {
    TinyCorpus corpus;
    std::string plain, traced;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 2 -v 0 -g 0 --device cpu", &plain), 0) << plain;
    const std::string trace = corpus.dir.file("ops.txt");
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 2 -v 0 -g 0 --device cpu -o '" +
                              corpus.dir.file("out_traced") + "' --trace-ops '" + trace + "'",
                          &traced),
              0)
        << traced;
    const std::string ops = read_text(trace);
    EXPECT_CONTAINS(ops, "encoder_forward B=2 T=16 C=32\n");
    EXPECT_CONTAINS(ops, "matmul_forward N=32 C=32 OC=96 bias\n");   // qkv
    EXPECT_CONTAINS(ops, "fused_classifier N=32 V=257 Vp=384 dlogits\n");
    EXPECT_CONTAINS(ops, "adamw_update");
    auto step_losses = [](const std::string& log) {
        std::string losses;
        std::istringstream in(log);
        for (std::string line; std::getline(in, line);) {
            const size_t at = line.find("\"loss\":");
            if (at != std::string::npos) losses += line.substr(at, 20) + "\n";
        }
        return losses;
    };
    const std::string a = step_losses(read_text(corpus.dir.file("out/log.jsonl")));
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, step_losses(read_text(corpus.dir.file("out_traced/log.jsonl"))));
    EXPECT_CONTAINS(expect_failure(corpus.args() + " -x 1 -o '" + corpus.dir.file("out_bad") +
                                   "' --trace-ops /nonexistent-dir/ops.txt"),
                    "--trace-ops /nonexistent-dir/ops.txt: /nonexistent-dir does not exist");
}

// -m larger than the validation set evaluates it once, and says so (before: the loader wrapped
// round, its first tokens scored again, the mean over-weighted; no notice). The tiny corpus's val
// shard holds 2000 tokens: 124 sequences of 16 (+1 target), 62 batches of 2x16.
TEST(TrainerCli, AnEvaluationNeverCountsATokenTwice) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -v 1 -m 500 -g 0 --device cpu", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "notice: -m 500: the validation set holds 62 batches of 2x16");
    EXPECT_CONTAINS(output, "| 1984 tokens (62 batches of 2x16)");
}

// A val shard the train glob also takes warns that the val loss is measured on trained tokens:
// through an overlapping glob, a symbolic link, and (round 26: it was not seen) a hard link.
// Round 28: -i without -j validated on the bundled KJV set (the default -j) without a word when the
// tokenizers agreed; it is said.
TEST(TrainerCli, TrainingDataWithoutValDataSaysTheValSetIsTheDefault) {
    TinyCorpus corpus;
    const std::string project = corpus.dir.file("p");
    make_dirs(project + "/data/kjv");
    std::filesystem::copy_file(corpus.dir.file("tiny_val_000000.bin"), project + "/data/kjv/kjv_val_000000.bin");
    const std::string run = "cd '" + project + "' && " + train_gpt_binary() + " -i '" +
                            corpus.dir.file("tiny_train_*.bin") + "' --tokenizer '" + corpus.dir.file("tokenizer.bin") +
                            "' -e d2 --n-embd 32 -b 2 -t 16 -m 2 -x 1 -g 0 --overwrite-output -o out";
    std::string output;
    ASSERT_EQ(run_command(run, &output), 0) << output;
    EXPECT_CONTAINS(output, "notice: -i " + corpus.dir.file("tiny_train_*.bin") +
                                " is given, -j is the default, data/kjv/kjv_val_*.bin: give -j for this data's val "
                                "shards (-j '' for none)");
    ASSERT_EQ(run_command(run + " -j ''", &output), 0) << output;
    EXPECT_EQ(output.find("is the default"), std::string::npos) << output;
}

TEST(TrainerCli, AShardReadTwiceIsWarnedOfUnderAnyName) {
    TinyCorpus corpus;
    make_dirs(corpus.dir.file("links"));
    const std::string val = corpus.dir.file("tiny_val_000000.bin");
    ASSERT_EQ(::symlink(val.c_str(), corpus.dir.file("links/sym_000000.bin").c_str()), 0);
    ASSERT_EQ(::link(val.c_str(), corpus.dir.file("links/hard_000000.bin").c_str()), 0);
    for (const std::string& train :
         {corpus.dir.file("tiny_*.bin"), corpus.dir.file("links/sym_*.bin"), corpus.dir.file("links/hard_*.bin")}) {
        SCOPED_TRACE(train);
        std::string output;
        ASSERT_EQ(run_command(train_gpt_binary() + corpus.args(train) + " -x 1 -g 0 --overwrite-output", &output), 0)
            << output;
        EXPECT_CONTAINS(output, "warning: -i " + train + " and -j " + corpus.dir.file("tiny_val_*.bin") +
                                    " both match " + val + ": the val loss is measured on tokens the run trains on");
    }
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -g 0 --overwrite-output", &output), 0) << output;
    EXPECT_EQ(output.find("both match"), std::string::npos) << output;
    EXPECT_EQ(output.find("under two names"), std::string::npos) << output;
    // round 30: one training shard under two names, read twice per epoch without a word
    const std::string train = corpus.dir.file("tiny_train_000000.bin");
    ASSERT_EQ(::symlink(train.c_str(), corpus.dir.file("tiny_train_000001.bin").c_str()), 0);
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -g 0 --overwrite-output", &output), 0) << output;
    EXPECT_CONTAINS(output, "warning: -i " + corpus.dir.file("tiny_train_*.bin") + " matches " + train + " and " +
                                corpus.dir.file("tiny_train_000001.bin") +
                                ", one file under two names (a link): its tokens are read twice per epoch");
}

// Round 30: after a resume, the summary's "best val loss ... at step N" (and the summary record's)
// covered this process's evaluations only, while the same summary speaks for the whole run. A run
// whose val loss worsens from step 0 on (-l 0.5), resumed at step 4: its best is step 0's.
TEST(TrainerCli, TheSummarysBestValLossCoversTheWholeRun) {
    TinyCorpus corpus;
    std::string output;
    const std::string base = train_gpt_binary() + corpus.args() + " -v 2 -g 0 --threads 1 -l 0.5 ";
    ASSERT_EQ(run_command(base + "-x 4 --checkpoint-every 4", &output), 0) << output;
    ASSERT_EQ(run_command(base + "-x 6 --resume", &output), 0) << output;
    const auto vals = log_records(corpus.dir.file("out/log.jsonl"), "val");
    ASSERT_GE(vals.size(), 4u);
    double best = INFINITY;
    int64_t best_step = -1;
    for (const auto& v : vals) {
        if (v["loss"].get<double>() < best) {
            best = v["loss"].get<double>();
            best_step = v["step"].get<int64_t>();
        }
    }
    ASSERT_LT(best_step, 4) << "the run's best before the resume (else this test shows nothing)";
    EXPECT_CONTAINS(output, format(", best %.4f at step %lld", best, (long long)best_step));
    const auto summary = log_records(corpus.dir.file("out/log.jsonl"), "summary");
    ASSERT_FALSE(summary.empty());
    EXPECT_EQ(summary.back()["best_val_step"].get<int64_t>(), best_step);
}

// Round 35: a resume cut the log back to its checkpoint's record, and the val loss and sample of
// that step, written after it, went with it; a resume with -v 0 -g 0 never wrote them again (and
// the summary's best val loss missed them). They stay where the resumed run does not redo them,
// and are not doubled where it does.
TEST(TrainerCli, AResumeKeepsTheEvaluationsOfItsCheckpointsStepItDoesNotRedo) {
    TinyCorpus corpus;
    std::string output;
    const std::string base = train_gpt_binary() + corpus.args() + " --threads 1 ";
    const std::string log = corpus.dir.file("out/log.jsonl");
    ASSERT_EQ(run_command(base + "-x 4 -v 2 -g 4 --checkpoint-every 4", &output), 0) << output;
    const std::string copy = "cp -a '" + corpus.dir.file("out") + "' '" + corpus.dir.file("saved") + "'";
    ASSERT_EQ(run_command(copy, &output), 0) << output;
    auto at_step = [&](const char* type, int64_t step) {
        int n = 0;
        for (const auto& r : log_records(log, type))
            n += r["step"].get<int64_t>() == step;
        return n;
    };
    ASSERT_EQ(at_step("val", 4), 1);
    ASSERT_EQ(at_step("sample", 4), 1);
    ASSERT_EQ(run_command(base + "-x 6 -v 0 -g 0 --resume", &output), 0) << output;
    EXPECT_EQ(at_step("val", 4), 1) << read_text(log);
    EXPECT_EQ(at_step("sample", 4), 1) << read_text(log);
    // redone: once, the resumed run's
    ASSERT_EQ(run_command("rm -r '" + corpus.dir.file("out") + "' && mv '" + corpus.dir.file("saved") + "' '" +
                              corpus.dir.file("out") + "'",
                          &output),
              0);
    ASSERT_EQ(run_command(base + "-x 6 -v 2 -g 4 --sample-every 2 --resume", &output), 0) << output;
    EXPECT_EQ(at_step("val", 4), 1) << read_text(log);
    EXPECT_EQ(at_step("sample", 4), 1) << read_text(log);
    EXPECT_EQ(at_step("val", 6), 1) << read_text(log);
}

TEST(TrainerCli, UnknownFlagIsRejected) { EXPECT_CONTAINS(expect_failure("--no-such-flag 3"), "--no-such-flag"); }

// Round 26: an unquoted glob the shell expanded got CLI11's "not expected" alone; now a hint too.
TEST(TrainerCli, AnUnquotedGlobGetsAHintToQuoteIt) {
    TinyCorpus corpus;
    const std::string out = expect_failure("-x 1 -i " + corpus.dir.file("tiny_train_000000.bin") + " " +
                                           corpus.dir.file("tiny_val_000000.bin"));
    EXPECT_CONTAINS(out, "The following argument was not expected: " + corpus.dir.file("tiny_val_000000.bin"));
    EXPECT_CONTAINS(out, "hint: -i and -j take one glob, in quotes (-i 'data/kjv/kjv_train_*.bin')");
    EXPECT_EQ(expect_failure("-x 1 stray").find("hint:"), std::string::npos) << "not for any extra argument";
}

TEST(TrainerCli, NonNumericValueIsRejected) {
    std::string out = expect_failure("--batch-size abc");
    EXPECT_CONTAINS(out, "--batch-size");
    EXPECT_CONTAINS(out, "'abc' is not a decimal integer");
    EXPECT_CONTAINS(expect_failure("--lr 1e-3x"), "'1e-3x' is not a number");
}

// A true/false flag takes true, false, 1, 0, yes, no, on or off (round 18: '' and -1 were false and 2
// true, so `-w ''` turned FP32 master weights off).
TEST(TrainerCli, BooleanFlagsTakeTrueOrFalse) {
    EXPECT_CONTAINS(expect_failure("-w ''"), "--master-weights: '' is not true or false");
    EXPECT_CONTAINS(expect_failure("--loss-scaling 2"), "--loss-scaling: '2' is not true or false");
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -v 0 -g 0 --threads 1 -p bf16 -w Off", &output),
              0)
        << output;
    EXPECT_EQ(nlohmann::json::parse(read_text(corpus.dir.file("out/config.json"))).at("master_weights"), false);
    // round 19 (B4): a switch's =value too (--shuffle=2 was true, --shuffle=0x1 false)
    EXPECT_CONTAINS(expect_failure("--shuffle=2"), "--shuffle: '2' is not true or false");
    EXPECT_CONTAINS(expect_failure("--shuffle=0x1"), "--shuffle: '0x1' is not true or false");
    EXPECT_CONTAINS(expect_failure("--stop-on-loss-spike=5"), "'5' is not true or false");
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() +
                              " -x 1 -v 0 -g 0 --threads 1 --overwrite-output "
                              "--shuffle=off",
                          &output),
              0)
        << output;
    EXPECT_EQ(nlohmann::json::parse(read_text(corpus.dir.file("out/config.json"))).at("shuffle"), false);
}

// Integer flags are read in decimal (round 17: CLI11 read "010" as octal 8 and "0x10" as 16, after
// the checks had read them as decimal, so a zero-padded seed sweep ran other seeds than it named,
// and "08" failed to convert); an integer flag's error speaks of integers, not of FP32.
TEST(TrainerCli, IntegerFlagsAreDecimal) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(
        run_command(train_gpt_binary() + corpus.args() + " -x 010 --seed 010 -t 08 -v 0 -g 0 --threads 1", &output), 0)
        << output;
    const auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config.at("steps"), 10);
    EXPECT_EQ(config.at("seed"), 10u);
    EXPECT_EQ(config.at("seq_len"), 8);
    EXPECT_EQ(summarize_log(corpus.dir.file("out/log.jsonl")).loss.size(), 10u) << "ten steps";
    EXPECT_CONTAINS(expect_failure("-x 0x10"), "--steps: '0x10' is not a decimal integer");
    EXPECT_CONTAINS(expect_failure("-m 1e-320"), "--val-batches: '1e-320' is not a decimal integer");
    EXPECT_CONTAINS(expect_failure("-x 1e3"), "--steps: '1e3' is not a decimal integer");
    EXPECT_CONTAINS(expect_failure("-b 99999999999"), "--batch-size: '99999999999' is out of range");
    EXPECT_CONTAINS(expect_failure("--seed -1"), "--seed: '-1' is not a decimal integer >= 0");
    EXPECT_CONTAINS(expect_failure(corpus.args() + " -y 01"), "--resume: no checkpoint in");   // -y 01 is -y 1
}

TEST(TrainerCli, OutOfRangeValueIsRejected) {
    EXPECT_CONTAINS(expect_failure("--beta2 1.5"), "--beta2");
    EXPECT_CONTAINS(expect_failure("--lr-schedule sideways"), "--lr-schedule");
}

// Values where the maths is undefined or that FP32 cannot hold: β = 1 makes Adam's bias
// correction 0/0 (every weight NaN after the first update); a learning rate below FP32's smallest
// normal became 0 silently, one above its largest was refused.
TEST(TrainerCli, ValuesWhereTheMathsIsUndefinedOrUnderflowsAreRejected) {
    EXPECT_CONTAINS(expect_failure("--beta1 1"), "--beta1: 1 must be < 1");
    EXPECT_CONTAINS(expect_failure("--beta2 1"), "--beta2: 1 must be < 1");
    // round 20: below 1 in double, 1.0f in the optimizer (every step after the first was NaN)
    EXPECT_CONTAINS(expect_failure("--beta2 0.99999999"),
                    "--beta2: 0.99999999 rounds to 1 in FP32, which is excluded: give at most 0.99999994");
    EXPECT_CONTAINS(expect_failure("--beta1 0.99999998"), "--beta1: 0.99999998 rounds to 1 in FP32");
    // round 20: an amax history of 10^8 took 4.9 GB for a 76k-parameter model; the margin's
    // range was checked only when the model was built
    EXPECT_CONTAINS(expect_failure("--fp8-amax-history 100000000"), "--fp8-amax-history: 100000000 must be <= 65536");
    EXPECT_CONTAINS(expect_failure("--fp8-margin 65"), "--fp8-margin: 65 must be <= 64");
    // round 21: above 1 in double, 1.0f as the factor (the stop then named a bound the parser refuses)
    EXPECT_CONTAINS(expect_failure("--loss-spike-factor 1.00000001"), "must be 0 (off) or a number above 1");
    EXPECT_CONTAINS(expect_failure("--grad-norm-spike-factor 1.00000001"), "must be 0 (off) or a number above 1");
    EXPECT_CONTAINS(expect_failure("--lr 1e-50"), "--lr: 1e-50 underflows FP32");
    EXPECT_CONTAINS(expect_failure("--lr 1e-50"), "give 0 or a larger value");
    EXPECT_CONTAINS(expect_failure("--adam-eps 1e-45"), "--adam-eps: 1e-45 underflows FP32");
    // round 16: not "give 0", which --adam-eps (> 0) refuses in turn
    EXPECT_CONTAINS(expect_failure("--adam-eps 1e-45"),
                    "(the smallest normal value is 1.17549e-38): give a larger value");
    EXPECT_CONTAINS(expect_failure("--lr 1e39"), "--lr: 1e39 is beyond FP32's range");
    // round 23: below a double's range strtod gives 0, which passed for a 0 given (lr 0, silently)
    EXPECT_CONTAINS(expect_failure("--lr 1e-400"), "--lr: 1e-400 underflows FP32");
    EXPECT_CONTAINS(expect_failure("--adam-eps 1e-400"), "--adam-eps: 1e-400 underflows FP32");
    EXPECT_CONTAINS(expect_failure("--adam-eps 1e-400"), "give a larger value");
    EXPECT_CONTAINS(expect_failure("--loss-spike-factor 1e-400"), "must be 0 (off) or a number above 1");
    TinyCorpus corpus;
    std::string output;
    EXPECT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 1 -v 0 -g 0 --beta1 0.999 --lr 0 -o '" +
                              corpus.dir.file("ok") + "'",
                          &output),
              0)
        << output;
}

// --flash-backward wide picks the flash attention's backward kernels: without --attention flash, or
// where the FP8 backward casts in the default kernels' epilogue, it has nothing to choose and is
// refused before anything is written. On the CPU kernel set (one exact attention) it is recorded
// and changes nothing.
TEST(TrainerCli, FlashBackwardWideNeedsTheFlashAttention) {
    TinyCorpus corpus;
    const std::string args = corpus.args() + " --device cpu --threads 1 -x 1 -v 0 -g 0 ";
    EXPECT_CONTAINS(expect_failure(args + "--flash-backward wide"),
                    "--flash-backward wide chooses the flash attention's backward kernels; give --attention flash too "
                    "(here --attention gemm)");
    EXPECT_CONTAINS(expect_failure(args + "--attention flash --flash-backward wide -p fp8 --fused-kernels true"),
                    "--flash-backward wide with -p fp8 --fused-kernels true");
    EXPECT_CONTAINS(expect_failure(args + "--flash-backward narrow"), "--flash-backward");
    EXPECT_FALSE(std::filesystem::exists(corpus.dir.file("out/log.jsonl"))) << "refused before anything is written";
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + args + "--attention flash --flash-backward wide -p bf16", &output), 0)
        << output;
    const auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config["flash_backward"], "wide");
}

// llm.c's -y 0 ("start afresh") beside --resume or --auto-resume is a contradiction (before: it
// cancelled --resume silently, a fresh run, and left --auto-resume resuming); so is -y 1 beside
// --resume=false (round 19, B10: it resumed), while -y 0 with --resume=false agree.
TEST(TrainerCli, MinusYZeroAndAResumeFlagContradictEachOther) {
    for (const char* args : {"--resume -y 0", "-y 0 --resume"})
        EXPECT_CONTAINS(expect_failure(args), "-y 0 (llm.c's: start afresh) and --resume=true contradict each other");
    EXPECT_CONTAINS(expect_failure("-y 0 --auto-resume"),
                    "-y 0 (llm.c's: start afresh) and --auto-resume=true contradict each other");
    for (const char* args : {"-y 1 --resume=false", "--resume=false -y 1"})
        EXPECT_CONTAINS(expect_failure(args), "-y 1 (llm.c's: resume) and --resume=false contradict each other");
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() +
                              " -x 1 -v 0 -g 0 --threads 1 -y 0 --resume=false "
                              "--auto-resume=false",
                          &output),
              0)
        << output;
}

TEST(TrainerCli, MissingTokenizerFileIsNamed) {
    TinyCorpus corpus;
    std::string missing = corpus.dir.file("no_such_tokenizer.bin");
    std::string out = expect_failure(corpus.args() + " --tokenizer '" + missing + "'");
    EXPECT_CONTAINS(out, missing);
}

TEST(TrainerCli, GlobMatchingNothingIsNamed) {
    TinyCorpus corpus;
    std::string glob = corpus.dir.file("nothing_*.bin");
    std::string out = expect_failure(corpus.args(glob));
    EXPECT_CONTAINS(out, glob);
    EXPECT_CONTAINS(out, "no files match");
    // round 24: a shard's own path, whose name holds glob characters, says how to give it
    const std::string literal = corpus.dir.file("br[ack]et_000000.bin");
    ASSERT_EQ(std::rename(corpus.dir.file("tiny_train_000000.bin").c_str(), literal.c_str()), 0);
    out = expect_failure(corpus.args(literal));
    EXPECT_CONTAINS(out, "no files match " + literal +
                             " (the file of that name exists, but a glob reads its [ ] * ? as patterns: escape each "
                             "with a backslash)");
}

TEST(TrainerCli, WrongMagicIsNamedAndNothingIsOverwritten) {
    TinyCorpus corpus;
    make_dirs(corpus.dir.file("out"));
    write_text(corpus.dir.file("out/log.jsonl"), "previous run\n");
    std::string shard = corpus.dir.file("bad_000000.bin");
    std::string bytes = read_text(corpus.dir.file("tiny_train_000000.bin"));
    bytes[0] ^= 0x5a;   // corrupt the magic number
    write_text(shard, bytes);
    std::string out = expect_failure(corpus.args(shard) + " -x 1");
    EXPECT_CONTAINS(out, shard);
    EXPECT_CONTAINS(out, "magic");
    EXPECT_EQ(read_text(corpus.dir.file("out/log.jsonl")), "previous run\n");
}

TEST(TrainerCli, TruncatedShardIsNamed) {
    TinyCorpus corpus;
    std::string shard = corpus.dir.file("short_000000.bin");
    std::string bytes = read_text(corpus.dir.file("tiny_train_000000.bin"));
    write_text(shard, bytes.substr(0, bytes.size() - 100));
    std::string out = expect_failure(corpus.args(shard) + " -x 1");
    EXPECT_CONTAINS(out, shard);
    EXPECT_CONTAINS(out, "truncated");
}

TEST(TrainerCli, TokenIdOutsideTheVocabularyIsNamed) {
    TinyCorpus corpus;
    std::string shard = corpus.dir.file("oov_000000.bin");
    std::vector<uint32_t> tokens(400, 65);
    tokens[5] = 300;   // the byte-level vocabulary has 257 ids
    write_shard(shard, tokens.data(), (int64_t)tokens.size(), 2);
    std::string out = expect_failure(corpus.args(shard) + " -x 2 -v 0 -g 0");
    EXPECT_CONTAINS(out, shard);
    EXPECT_CONTAINS(out, "300");
}

TEST(TrainerCli, BadModelSpecIsNamed) {
    TinyCorpus corpus;
    EXPECT_CONTAINS(expect_failure(corpus.args() + " -e huge"), "huge");
    EXPECT_CONTAINS(expect_failure(corpus.args() + " --n-head 3"), "not divisible");
}
