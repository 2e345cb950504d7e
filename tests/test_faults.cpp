// test_faults.cpp — fail fast, fail loud, lose nothing: the real ./train_gpt (under mpirun where
// it is about ranks) when things go wrong around it.
//   * an error on one rank ends the whole job by itself (a hang would meet the timeout), the
//     rank and the file named first;
//   * divergence: non-finite streaks never cost the healthy checkpoint, the streak survives a
//     resume, loss spikes are reported and can stop the run;
//   * resume: a damaged newest checkpoint is refused (or, asked to, passed over and kept), and
//     --resume with nothing to resume is an error;
//   * every check before anything is written: tokens against the vocabulary, the vocabulary
//     against the tokenizer, --sample-prompt, --checkpoint-dir, flags that cannot work together;
//   * every write checked: a full filesystem (a small tmpfs in a mount namespace of its own) or a
//     file-size limit stops the run naming the file, and log.jsonl keeps only whole lines;
//   * one run per directory, and nothing a previous run wrote replaced without being asked;
//   * SIGTERM / SIGUSR1 checkpoint and exit 75 (all ranks at the same step), SIGINT exits 130.
// Every command runs under `timeout` (SIGKILL 10 s after its SIGTERM, which a training run
// handles), so a regression that hangs fails instead of blocking.
#include "checkpoint/checkpoint.h"
#include "checkpoint/init_from.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "rng.h"
#include "train/resume.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>

using namespace train_gpt;
using namespace train_gpt::test;
namespace fs = std::filesystem;

namespace {

const char* const kMpirun = "mpirun --oversubscribe --allow-run-as-root ";

CommandResult run(const std::string& command, int timeout_s = 300) {
    return run_timed(format("timeout -k 10 %d ", timeout_s) + command);   // -k: a run that ignores SIGTERM
}

// The records of a log; fails the test on a line that is not a JSON object (a torn line).
std::vector<nlohmann::json> log_records(const std::string& path) {
    std::vector<nlohmann::json> records;
    const std::string text = read_text(path);
    EXPECT_TRUE(text.empty() || text.back() == '\n')
        << path << " ends in a torn line: ..." << text.substr(text.size() > 80 ? text.size() - 80 : 0);
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        try {
            records.push_back(nlohmann::json::parse(line));
        } catch (const nlohmann::json::exception&) {
            ADD_FAILURE() << path << ": not a JSON line: " << line;
        }
    }
    return records;
}

std::vector<nlohmann::json> records_of(const std::string& path, const std::string& type) {
    std::vector<nlohmann::json> out;
    for (auto& r : log_records(path)) {
        if (r["type"] == type) out.push_back(r);
    }
    return out;
}

int last_step(const std::string& log_path) {
    int step = 0;
    std::ifstream in(log_path);
    for (std::string line; std::getline(in, line);) {
        try {
            const auto j = nlohmann::json::parse(line);
            if (j["type"] == "step") step = j["step"].get<int>();
        } catch (const nlohmann::json::exception&) {
        }
    }
    return step;
}

// A checkpoint's manifest.json replaced by `text`, as an older build wrote it: the run's log then
// records that manifest's hash for it (a resume takes a checkpoint the log records by another hash
// for another's).
void write_manifest_as_written(const std::string& step_dir, const std::string& log, const std::string& text) {
    write_text(step_dir + "/manifest.json", text);
    std::istringstream in(read_text(log));
    std::string records;
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::ordered_json::parse(line);
        for (const char* names : {"path", "checkpoint"}) {
            if (j.contains(names) && j[names] == step_dir && j.contains("manifest"))
                j["manifest"] = manifest_hash(step_dir);
        }
        records += j.dump() + "\n";
    }
    write_text(log, records);
}

// A project's training shard, DIR/data/x_train_000000.bin: `count` tokens, each `token`.
void write_project_shard(const std::string& dir, size_t count, char token) {
    make_dirs(dir + "/data");
    const std::vector<uint32_t> tokens(count, (uint32_t)token);
    write_shard(dir + "/data/x_train_000000.bin", tokens.data(), (int64_t)tokens.size(), 2);
}

// A byte-level corpus and tokenizer in a scratch directory, and the flags of a tiny CPU run on it.
struct Corpus {
    ScratchDir dir;
    Corpus() {
        std::string text;
        for (int i = 0; i < 200; i++)
            text += "In the beginning was the word. ";
        std::vector<uint32_t> tokens(text.begin(), text.end());
        write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
        Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    }
    std::string flags(const std::string& out, const std::string& extra) const {
        return " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" + dir.file("train_*.bin") +
               "' --tokenizer '" + dir.file("tokenizer.bin") + "' -o '" + out + "' " + extra;
    }
    std::string train_gpt(const std::string& out, const std::string& extra) const {
        return train_gpt_binary() + flags(out, extra);
    }
    // a run in working directory `cwd` with neither -i nor -o: a project's own relative paths
    std::string train_gpt_project_in(const std::string& cwd, const std::string& extra) const {
        return "sh -c \"cd '" + cwd + "' && " + train_gpt_binary() +
               " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
               dir.file("tokenizer.bin") + "' " + extra + "\"";
    }
    // a run in working directory `cwd` without -o: into the default `out` there
    std::string train_gpt_in(const std::string& cwd, const std::string& extra) const {
        return "sh -c \"cd '" + cwd + "' && " + train_gpt_binary() +
               " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" + dir.file("train_*.bin") +
               "' --tokenizer '" + dir.file("tokenizer.bin") + "' " + extra + "\"";
    }
    std::string mpirun(int ranks, const std::string& out, const std::string& extra) const {
        return kMpirun + format("-np %d ", ranks) + train_gpt(out, extra);
    }
};

// A command started in the background (its own process group), its output into a file.
struct Background {
    pid_t pid = -1;
    std::string output_file;
    Background(const std::string& command, const std::string& output) : output_file(output) {
        pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            execl("/bin/sh", "sh", "-c", ("exec " + command + " > '" + output + "' 2>&1").c_str(), (char*)nullptr);
            _exit(127);
        }
    }
    // Waits up to `seconds` for it to end; its exit code, 128 + N if killed by signal N, or -1
    // if it is still running (then it is killed).
    int wait(double seconds) {
        const auto t0 = std::chrono::steady_clock::now();
        int status = 0;
        while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
                pid = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
        return -1;
    }
    std::string output() const { return read_text(output_file); }
    ~Background() {
        if (pid > 0) {
            kill(-pid, SIGKILL);
            int status;
            waitpid(pid, &status, 0);
        }
    }
};

// Waits (up to 300 s: a deadline for a hang, not a speed) until `done` holds; false if it never
// does.
bool wait_until(const std::function<bool()>& done) {
    for (int i = 0; i < 30000; i++) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

// The pid of the process of MPI rank `rank` whose command line contains `marker` (Open MPI puts
// the rank in each process's environment), or -1.
pid_t pid_of_rank(const std::string& marker, int rank) {
    DIR* proc = opendir("/proc");
    if (!proc) return -1;
    pid_t found = -1;
    while (dirent* e = readdir(proc)) {
        const pid_t pid = (pid_t)std::atoi(e->d_name);
        if (pid <= 0) continue;
        std::string cmdline, environ;
        std::ifstream c(format("/proc/%d/cmdline", (int)pid)), v(format("/proc/%d/environ", (int)pid));
        std::getline(c, cmdline, '\0');   // argv[0]
        std::string all((std::istreambuf_iterator<char>(c)), std::istreambuf_iterator<char>());
        environ.assign((std::istreambuf_iterator<char>(v)), std::istreambuf_iterator<char>());
        if (cmdline.find("train_gpt") == std::string::npos || all.find(marker) == std::string::npos) continue;
        if (environ.find(format("OMPI_COMM_WORLD_RANK=%d", rank) + '\0') == std::string::npos) continue;
        found = pid;
    }
    closedir(proc);
    return found;
}

// Runs `command` with `dir` on a fresh tmpfs of `size` (mount(8) size: "16k", "1m") in a mount
// namespace of its own, then copies what the tmpfs holds to `copy`. False (nothing run) where
// this machine does not allow it.
bool run_on_small_tmpfs(const std::string& dir, const std::string& size, const std::string& copy,
                        const std::string& command, CommandResult* r) {
    std::string out;
    if (run_command("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /mnt'", &out) != 0) return false;
    make_dirs(dir);
    make_dirs(copy);
    *r = run("unshare -m sh -c \"mount -t tmpfs -o size=" + size + " tmpfs '" + dir + "' && { " + command +
             "; rc=\\$?; cp -a '" + dir + "/.' '" + copy + "/'; exit \\$rc; }\"");
    return true;
}

}   // namespace

// ---- 1. an error on one rank ends the whole job -------------------------------------------------

// Rank 1's filesystem refuses its checkpoint file (a file-size limit on rank 1 alone, SIGXFSZ
// ignored: writes fail with "File too large" as they would on a disk that only one node sees as
// full) while rank 0 waits for it in the save's barrier. Before: rank 1's exception unwound into
// MPI_Finalize and the job hung, nothing printed, until the timeout.
TEST(Faults, AWriteThatFailsOnOneRankEndsTheJobNamingTheRankAndTheFile) {
    Corpus c;
    const std::string out = c.dir.file("out"), flags = c.flags(out, "-x 4 --checkpoint-every 2");
    const CommandResult r =
        run(std::string(kMpirun) + "-np 1 " + train_gpt_binary() + flags +
                " : -np 1 bash -c \"trap '' XFSZ; ulimit -f 64; exec " + train_gpt_binary() + flags + "\"",
            300);
    // the job ends by itself, not at the timeout (expect_refused refuses timeout's 124)
    expect_refused(r, {"rank 1: error: " + out + "/checkpoints/step_00000002.tmp/", "File too large"});
    // the message comes before MPI's own report of the abort
    EXPECT_LT(r.output.find("rank 1: error:"), r.output.find("MPI_ABORT")) << r.output;
    EXPECT_FALSE(file_exists(out + "/checkpoints/step_00000002")) << "no checkpoint may look complete";
}

// A bad token that only rank 1's share of the start-up scan meets: rank 1 stops at start, rank 0
// (whose checks passed) is stopped too, and nothing is written.
TEST(Faults, AnErrorOnlyOneRankMeetsAtStartEndsTheJobBeforeAnythingIsWritten) {
    Corpus c;
    std::vector<uint32_t> tokens(4000, 'a');
    tokens[3500] = 300;   // rank 1 of 2 scans tokens [2000, 4000)
    write_shard(c.dir.file("bad_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    const std::string out = c.dir.file("out");
    const CommandResult r = run(c.mpirun(2, out, "-x 4 -i '" + c.dir.file("bad_*.bin") + "'"), 300);
    expect_refused(r, {"rank 1: error: " + c.dir.file("bad_000000.bin") + ": token 300 at position 3500"});
    EXPECT_EQ(r.output.find("rank 0: error"), std::string::npos) << "rank 0 met no error of its own";
    EXPECT_FALSE(file_exists(out)) << "nothing written before every rank's checks passed";
}

// ---- 2. divergence ---------------------------------------------------------------------------

// Non-finite steps 5..10 (0-based 4..9) across the checkpoints at 6 and 8, keep-last 1: the
// checkpoint of step 4, the last one saved outside the streak, stays; the run stops at the 6th
// skipped step in a row (step 10) with exit 1; checkpoints record the streak.
TEST(Faults, NonFiniteStepsAroundACheckpointKeepTheHealthyCheckpoint) {
    Corpus c;
    const std::string out = c.dir.file("out"), ckpts = out + "/checkpoints";
    const CommandResult r =
        run(c.train_gpt(out,
                        "-x 12 --checkpoint-every 2 --keep-checkpoints 1 --inject-nonfinite-step 4-9 "
                        "--max-skipped-steps 6"));
    expect_refused(r, {"error: 6 steps in a row had a non-finite loss or gradient norm", "step 10"});
    EXPECT_EQ(list_checkpoints(ckpts), (std::vector<int64_t>{4, 8}))
        << "step 4: the newest healthy one; step 8: the newest; step 6 pruned";
    for (int64_t step : {4, 8}) {
        const auto m = read_manifest(checkpoint_dir(ckpts, step));
        EXPECT_NO_THROW(verify_checkpoint(checkpoint_dir(ckpts, step), m));
        EXPECT_EQ(nlohmann::json::parse(m.extra_json)["skip_streak"].get<int>(), step == 4 ? 0 : 4);
    }
    const auto stops = records_of(out + "/log.jsonl", "stop");
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0]["step"].get<int>(), 10);
    EXPECT_EQ(last_step(out + "/log.jsonl"), 10);
}

// fp16 with its loss scale pinned at 2^24 overflows on every step: a natural streak. A run of 12
// steps (all skipped, below --max-skipped-steps 20) ends normally with a checkpoint that records
// the streak of 12; resumed towards 40 steps, it stops at step 20, the 20th in a row, as an
// uninterrupted run would. Before: the resumed run counted from 0 and stopped at step 32.
TEST(Faults, AResumedRunContinuesTheSkipStreakAndStopsAtTheSameStep) {
    Corpus c;
    const std::string out = c.dir.file("out");
    const std::string fp16 = "-p fp16 --loss-scale-init 16777216 --loss-scale-min 16777216 ";
    CommandResult r = run(c.train_gpt(out, fp16 + "-x 12 --checkpoint-every 4"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "12 step(s) skipped");
    r = run(train_gpt_binary() + " --resume -o '" + out + "' -x 40");
    expect_refused(r, {"error: 20 steps in a row had a non-finite loss or gradient norm", "step 20)"});
    EXPECT_EQ(last_step(out + "/log.jsonl"), 20);
}

// Round 24: the collapse warning ("gradients keep overflowing") came after 100 clean steps at a
// floor the run started at; a resume's --loss-scale-init was listed as an override that it never
// applied, and a resume's --loss-scale-min above the checkpoint's scale trained below the floor.
TEST(Faults, TheLossScaleWarningsAndOverridesSayWhatHappens) {
    Corpus c;
    const std::string out = c.dir.file("out");
    CommandResult r = run(c.train_gpt(out, "-p fp16 --loss-scale-init 1 --loss-scale-min 1 -x 102 -n 102"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_EQ(r.output.find("at its floor"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("step(s) skipped"), std::string::npos) << "no step overflowed: " << r.output;
    r = run(train_gpt_binary() + " --resume -o '" + out + "' -x 103 --loss-scale-init 8 --loss-scale-min 4");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output,
                    "--loss-scale-init 8 (the checkpoint's run: 1; it sets a fresh start's scale, and this "
                    "run goes on from the checkpoint's)");
    EXPECT_CONTAINS(r.output,
                    "notice: the checkpoint's loss scale 1 lies outside this run's range (--loss-scale-min 4 "
                    "to 1.67772e+07): it goes on from 4");
    EXPECT_CONTAINS(r.output, "step 103/103");
    EXPECT_CONTAINS(r.output, "| scale 4\n");
}

// Round 24: a run whose every save was left out (its state non-finite) ended with the summary's
// advice to give --checkpoint-every, which it had.
TEST(Faults, ASummaryWithoutACheckpointSaysWhyThereIsNone) {
    Corpus c;
    const CommandResult r = run(c.train_gpt(c.dir.file("out"), "-x 6 -n 2 -l 3e38 -u 0 -k constant"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "warning: no checkpoint at step 2: the model's state holds a non-finite value");
    EXPECT_CONTAINS(
        r.output, "checkpoint: none written (the model's state held a non-finite value at each of the 3 save(s) due)");
    EXPECT_EQ(r.output.find("--checkpoint-every N writes one"), std::string::npos) << r.output;
}

// A learning rate of 3 on the tiny model: the loss goes from 5.6 to 87 at step 2. Warned about
// (once per series, every spike step logged); with --stop-on-loss-spike the run stops there, exit
// 1, without a checkpoint of the spiked state.
TEST(Faults, ALossSpikeIsReportedAndCanStopTheRun) {
    Corpus c;
    const std::string steep = "-x 8 -l 3 -k constant -u 0 --grad-clip 0 ";
    CommandResult r = run(c.train_gpt(c.dir.file("warn"), steep));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "warning: loss spike at step 2: loss ");
    EXPECT_CONTAINS(r.output, "x its running level");
    EXPECT_EQ(r.output.find("warning: loss spike at step 3"), std::string::npos) << "one warning per series";
    const auto spikes = records_of(c.dir.file("warn/log.jsonl"), "loss_spike");
    ASSERT_GE(spikes.size(), 1u);
    EXPECT_EQ(spikes[0]["step"].get<int>(), 2);
    EXPECT_GT(spikes[0]["loss"].get<double>(), 2 * spikes[0]["level"].get<double>());

    r = run(c.train_gpt(c.dir.file("stop"), steep + "--stop-on-loss-spike --checkpoint-every 1"));
    expect_refused(r, {"error: loss spike at step 2", "stopping (--stop-on-loss-spike)"});
    EXPECT_EQ(list_checkpoints(c.dir.file("stop/checkpoints")), (std::vector<int64_t>{1}));
    EXPECT_EQ(last_step(c.dir.file("stop/log.jsonl")), 2);

    r = run(c.train_gpt(c.dir.file("off"), steep + "--loss-spike-factor 0"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_EQ(r.output.find("loss spike"), std::string::npos);
}

// A loss that blows up and stays finite (a resume with a far too large learning rate): the
// checkpoints saved in the spike series are not healthy, so pruning keeps the one before it.
// Before: pruning counted only non-finite streaks, deleted the checkpoint before the blow-up and
// kept the ones at a loss 30x the level as healthy.
TEST(Faults, ALossThatBlowsUpButStaysFiniteKeepsTheCheckpointBeforeIt) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 4 -l 1e-3 --checkpoint-every 2 --keep-checkpoints 1")).rc, 0);
    const CommandResult r = run(c.train_gpt(out,
                                            "--resume -x 10 -l 3 -k constant -u 0 --grad-clip 0 --checkpoint-every 2 "
                                            "--keep-checkpoints 1"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "warning: loss spike at step ");
    const auto spikes = records_of(out + "/log.jsonl", "loss_spike");
    ASSERT_GE(spikes.size(), 1u);
    const int first_spike = spikes[0]["step"].get<int>();
    ASSERT_GT(first_spike, 4);
    EXPECT_EQ(list_checkpoints(out + "/checkpoints"), (std::vector<int64_t>{4, 10}))
        << "the newest checkpoint, and the newest before the spikes";
    const auto extra = nlohmann::json::parse(read_manifest(checkpoint_dir(out + "/checkpoints", 10)).extra_json);
    EXPECT_EQ(extra["spike_since"].get<int>(), first_spike) << "the series is saved with the state";
    // round 27: and said as it is saved (a skip streak's checkpoint said so; a spike series' did not)
    EXPECT_CONTAINS(r.output,
                    checkpoint_dir(out + "/checkpoints", 10) +
                        format(" (during a series of loss spikes since step %d: not counted as healthy)", first_spike));
    EXPECT_EQ(nlohmann::json::parse(read_manifest(checkpoint_dir(out + "/checkpoints", 4)).extra_json)["spike_since"],
              0);
}

// Round 36: a run put inside another run's checkpoint step directory (a fine-tune kept beside the
// step it starts from, -o <base>/checkpoints/step_2/ft) was accepted, and went, log, config and
// checkpoints, when the base run pruned that step. Such a -o or --checkpoint-dir is refused; and
// pruning keeps, with a warning, a step directory that holds a directory.
TEST(Faults, NoRunIsKeptInsideACheckpointThatPruningDeletes) {
    Corpus c;
    const std::string base = c.dir.file("base"), step2 = checkpoint_dir(base + "/checkpoints", 2);
    ASSERT_EQ(run(c.train_gpt(base, "-x 4 --checkpoint-every 2 --keep-checkpoints 5")).rc, 0);
    const auto before = directory_snapshot(base);
    expect_refused(run(c.train_gpt(step2 + "/ft", "-x 2 --checkpoint-every 1 --init-from '" + step2 + "'")),
                   {"--output-dir " + step2 + "/ft: it is inside " + step2 +
                    ", a checkpoint's step directory, which "
                    "the run that saved it deletes whole when it prunes its old checkpoints"});
    expect_refused(
        run(c.train_gpt(c.dir.file("o"), "-x 2 --checkpoint-every 1 --checkpoint-dir '" + step2 + "/sub/ck'")),
        {"--checkpoint-dir " + step2 + "/sub/ck: it is inside " + step2 + ", a checkpoint's step directory"});
    EXPECT_EQ(directory_snapshot(base), before) << "nothing written";
    // round 37: ... nor inside (or at) an unfinished save's step_N.tmp, which the next save removes;
    // round 38: nor a step not saved yet, whose save then fails, losing the steps before it
    const std::string ckpts = base + "/checkpoints", tmp5 = checkpoint_dir(ckpts, 5) + ".tmp";
    make_dirs(tmp5);
    expect_refused(run(c.train_gpt(tmp5 + "/ft", "-x 2")), {"--output-dir " + tmp5 + "/ft: it is inside " + tmp5 +
                                                            ", named as a checkpoint's unfinished "
                                                            "save in the checkpoint directory " +
                                                            ckpts + ", which its run deletes whole at its next save"});
    expect_refused(run(c.train_gpt(tmp5, "-x 2")), {"--output-dir " + tmp5 + ": it is " + tmp5 + ", named as"});
    EXPECT_FALSE(file_exists(tmp5 + "/ft")) << "nothing written";
    std::filesystem::remove_all(tmp5);
    const std::string step9 = checkpoint_dir(ckpts, 9);
    expect_refused(run(c.train_gpt(step9, "-x 2")), {"--output-dir " + step9 + ": it is " + step9 +
                                                     ", named as a checkpoint's step in the checkpoint "
                                                     "directory " +
                                                     ckpts + ", which its run saves there when it gets to that step"});
    expect_refused(run(c.train_gpt(step9 + "/x", "-x 2")), {"it is inside " + step9 + ", named as"});
    EXPECT_FALSE(file_exists(step9)) << "nothing written";
    // put there by hand (a file no manifest lists, round 37; a directory; one in a stale save): kept
    write_text(step2 + "/eval_results.json", "mine");
    const std::string tmp1 = checkpoint_dir(base + "/checkpoints", 1) + ".tmp";
    make_dirs(tmp1 + "/notes");
    write_text(tmp1 + "/notes/mine.txt", "mine");
    const CommandResult pruned = run(c.train_gpt(base, "--resume -x 8 --checkpoint-every 2 --keep-checkpoints 1"));
    ASSERT_EQ(pruned.rc, 0) << pruned.output;
    EXPECT_CONTAINS(pruned.output, "warning: cannot remove old checkpoint " + step2 +
                                       " (it holds eval_results.json, which is no part of a checkpoint); it is kept");
    EXPECT_CONTAINS(pruned.output,
                    "warning: the stale " + tmp1 + " holds notes, which is no part of a checkpoint; it is kept");
    EXPECT_EQ(read_text(step2 + "/eval_results.json"), "mine");
    EXPECT_EQ(read_text(tmp1 + "/notes/mine.txt"), "mine");
    EXPECT_EQ(list_checkpoints(base + "/checkpoints"), (std::vector<int64_t>{2, 8}));
    // a stale save of the step about to be saved, holding a directory: the save stops, it is kept
    const std::string tmp10 = checkpoint_dir(base + "/checkpoints", 10) + ".tmp";
    make_dirs(tmp10 + "/notes");
    expect_refused(run(c.train_gpt(base, "--resume -x 10 --checkpoint-every 2 --keep-checkpoints 1")),
                   {"cannot save checkpoint " + checkpoint_dir(base + "/checkpoints", 10) + ": its unfinished save " +
                    tmp10 + " holds notes, which is no part of a checkpoint; move it away"});
    EXPECT_TRUE(std::filesystem::is_directory(tmp10 + "/notes"));
}

// ---- 3. resume -------------------------------------------------------------------------------

namespace {

// A run with checkpoints at steps 2, 4 and 6.
struct ThreeCheckpoints {
    Corpus c;
    std::string out, ckpts;
    ThreeCheckpoints() : out(c.dir.file("out")), ckpts(c.dir.file("out/checkpoints")) {
        const CommandResult r = run(c.train_gpt(out, "-x 6 --checkpoint-every 2 --keep-checkpoints 5"));
        EXPECT_EQ(r.rc, 0) << r.output;
    }
    std::string step(int s) const { return checkpoint_dir(ckpts, s); }
};

}   // namespace

TEST(Faults, ADamagedNewestCheckpointIsRefusedNamingTheFileAndTheProblem) {
    ThreeCheckpoints t;
    const std::string manifest = t.step(6) + "/manifest.json";
    const std::string text = read_text(manifest);
    struct Damage {
        const char* what;
        std::function<void()> apply;
        std::vector<std::string> named;
    } damages[] = {
        {"a truncated manifest",
         [&] { write_text(manifest, text.substr(0, text.size() / 2)); },
         {manifest, "not valid JSON"}},
        {"no manifest", [&] { std::remove(manifest.c_str()); }, {t.step(6), "has no manifest.json"}},
        {"a missing file",
         [&] { fs::rename(t.step(6) + "/state-00000.safetensors", t.c.dir.file("moved")); },
         {t.step(6) + "/state-00000.safetensors", "missing"}},
        {"an altered byte",
         [&] {
             std::string bytes = read_text(t.step(6) + "/model-00001-of-00001.safetensors");
             bytes[bytes.size() / 2] ^= 1;
             write_text(t.step(6) + "/model-00001-of-00001.safetensors", bytes);
         },
         {t.step(6) + "/model-00001-of-00001.safetensors", "checksum mismatch"}},
    };
    for (auto& d : damages) {
        SCOPED_TRACE(d.what);
        const std::string saved = t.c.dir.file("saved");
        ASSERT_EQ(run("cp -a '" + t.step(6) + "' '" + saved + "'").rc, 0);
        d.apply();
        const auto before = directory_snapshot(t.out);
        std::vector<std::string> named = d.named;
        named.push_back("the newest checkpoint, " + t.step(6) + ", is damaged");
        named.push_back("--resume-from-intact");
        expect_refused(run(train_gpt_binary() + " --resume -o '" + t.out + "'"), named);
        EXPECT_EQ(directory_snapshot(t.out), before) << "nothing written, pruned or changed";
        ASSERT_EQ(run("rm -rf '" + t.step(6) + "' && mv '" + saved + "' '" + t.step(6) + "'").rc, 0);
        std::remove(t.c.dir.file("moved").c_str());
    }
}

// --resume-from-intact: the newest intact checkpoint (step 4) is taken with a warning; the damaged
// one is kept, untouched, as step_00000006.damaged, and the run saves a new step 6 beside it.
TEST(Faults, ResumeFromIntactTakesTheNewestIntactCheckpointAndKeepsTheDamagedOne) {
    ThreeCheckpoints t;
    const std::string manifest = t.step(6) + "/manifest.json";
    const std::string text = read_text(manifest);
    write_text(manifest, text.substr(0, text.size() - 40));
    const auto damaged = directory_snapshot(t.step(6));
    const CommandResult r = run(train_gpt_binary() + " --resume --resume-from-intact -o '" + t.out + "'");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "warning: " + t.step(6) + " is damaged (" + manifest);
    EXPECT_CONTAINS(r.output, "resuming from " + t.step(4));
    EXPECT_CONTAINS(r.output, "kept the damaged checkpoint as " + t.step(6) + ".damaged");
    std::map<std::string, std::string> kept;
    for (const auto& [path, what] : directory_snapshot(t.step(6) + ".damaged")) {
        kept[t.step(6) + path.substr((t.step(6) + ".damaged").size())] = what;
    }
    EXPECT_EQ(kept, damaged) << "the damaged checkpoint, renamed, every byte as it was";
    EXPECT_NO_THROW(verify_checkpoint(t.step(6), read_manifest(t.step(6))));
    EXPECT_EQ(records_of(t.out + "/log.jsonl", "resume").back()["step"].get<int>(), 4);
}

TEST(Faults, ResumeWithNothingToResumeIsAnErrorAndAutoResumeStartsFresh) {
    Corpus c;
    const std::string out = c.dir.file("out");
    expect_refused(run(c.train_gpt(out, "-x 2 --resume")),
                   {"--resume: no checkpoint in " + out + "/checkpoints", "--auto-resume"});
    EXPECT_FALSE(file_exists(out)) << "nothing written";
    CommandResult r = run(c.train_gpt(out, "-x 2 --checkpoint-every 2 --auto-resume"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "--auto-resume: no checkpoint in " + out + "/checkpoints; starting a fresh run");
    r = run(c.train_gpt(out, "-x 4 --checkpoint-every 2 --auto-resume"));   // the same command, once more
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "resuming from " + out + "/checkpoints/step_00000002");
    EXPECT_EQ(last_step(out + "/log.jsonl"), 4);
    // killed before its first checkpoint, a requeued job starts again with the same command (before:
    // refused on every restart, since the first start had written log.jsonl and config.json)
    const std::string early = c.dir.file("early");
    Background job(c.train_gpt(early, "-x 100000 --checkpoint-every 50000 --auto-resume"), c.dir.file("early.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(early + "/log.jsonl") >= 2; })) << job.output();
    kill(-job.pid, SIGKILL);
    job.wait(300);
    r = run(c.train_gpt(early, "-x 3 --checkpoint-every 50000 --auto-resume"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "starting a fresh run (it replaces the log.jsonl and config.json in " + early +
                                  " of a start that wrote no checkpoint)");
    EXPECT_EQ(records_of(early + "/log.jsonl", "step").size(), 3u) << "one run's steps, not two";
}

// Every rank verifies what it reads. Two ranks resume a 2-rank ZeRO-1 checkpoint, each from its
// own copy under the same relative path (as node-local storage would hold it: mpirun -wdir): where
// rank 1's copy of its state file has other bytes of the same size, rank 1 refuses it naming the
// file (before: only rank 0 verified, and rank 1 trained on the altered values, exit 0); where
// rank 1's manifest differs from rank 0's, the ranks see different checkpoints, and it says so.
TEST(Faults, EveryRankVerifiesTheCheckpointFilesItReads) {
    Corpus c;
    const std::string a = c.dir.file("node_a"), b = c.dir.file("node_b");
    make_dirs(a);
    const std::string flags = c.flags("out", "--zero 1 --checkpoint-every 2");
    ASSERT_EQ(run(std::string(kMpirun) + "-np 2 -wdir '" + a + "' " + train_gpt_binary() + flags + " -x 2").rc, 0);
    const std::string step = "/out/checkpoints/step_00000002";
    auto resume = [&] {
        return run(std::string(kMpirun) + "-np 1 -wdir '" + a + "' " + train_gpt_binary() + flags +
                   " -x 4 --resume : " + "-np 1 -wdir '" + b + "' " + train_gpt_binary() + flags + " -x 4 --resume");
    };
    // an altered value in rank 1's state file, the size unchanged
    ASSERT_EQ(run("rm -rf '" + b + "' && cp -a '" + a + "' '" + b + "'").rc, 0);
    std::string state = read_text(b + step + "/state-00001.safetensors");
    state[state.size() - 5] ^= 0x40;
    write_text(b + step + "/state-00001.safetensors", state);
    expect_refused(resume(),
                   {"rank 1: error: out/checkpoints/step_00000002/state-00001.safetensors: checksum mismatch"});
    // another manifest on rank 1
    ASSERT_EQ(run("rm -rf '" + b + "' && cp -a '" + a + "' '" + b + "'").rc, 0);
    write_text(b + step + "/manifest.json", read_text(b + step + "/manifest.json") + "\n");
    expect_refused(resume(),
                   {"rank 1: error: out/checkpoints/step_00000002/manifest.json differs from the one rank 0 read"});
    // the same files (node B's directory a link to node A's: a save needs one directory that
    // every rank sees): the resume runs
    ASSERT_EQ(run("rm -rf '" + b + "' && ln -s '" + a + "' '" + b + "'").rc, 0);
    const CommandResult r = resume();
    EXPECT_EQ(r.rc, 0) << r.output;
}

// A save is finalized only with every rank's files in it. Rank 1 runs in its own directory (as on
// a node without the shared file system), where a step_N.tmp of the same name exists: its weight
// and state shards go there, not into the directory rank 0 finalizes. Before: rank 0 wrote a
// manifest of what it saw, exit 0, older checkpoints pruned, and every resume failed on the
// missing shard. Now the save stops naming rank 1's missing file, and the step is not saved.
TEST(Faults, ASaveLackingARanksFilesIsNeverFinalized) {
    Corpus c;
    const std::string a = c.dir.file("node_a"), b = c.dir.file("node_b");
    make_dirs(a);
    make_dirs(b + "/out/checkpoints/step_00000002.tmp");
    const std::string flags = c.flags("out", "--zero 1 --checkpoint-every 2 -x 2");
    const CommandResult r = run(std::string(kMpirun) + "-np 1 -wdir '" + a + "' " + train_gpt_binary() + flags +
                                " : -np 1 -wdir '" + b + "' " + train_gpt_binary() + flags);
    expect_refused(r, {"out/checkpoints/step_00000002.tmp lacks state-00001.safetensors, written by rank 1",
                       "every rank must see the same directory"});
    EXPECT_TRUE(list_checkpoints(a + "/out/checkpoints").empty()) << "no checkpoint that lacks a rank's files";
    EXPECT_FALSE(file_exists(a + "/out/checkpoints/step_00000002")) << r.output;
}

// Every rank starts from the same model and reads the same data. Two ranks, each in its own
// directory (node-local copies under one relative path), where rank 1's copy differs: another
// checkpoint under --init-from (its manifest), a transformers directory of the same shape with
// other weights, or training data with more tokens. Before (round 40): each rank trained its own
// model, exit 0, and the saved checkpoint mixed their shards; the data went unchecked.
TEST(Faults, EveryRankStartsFromTheSameModelAndData) {
    Corpus c;
    const std::string a = c.dir.file("node_a"), b = c.dir.file("node_b");
    for (const std::string& node : {a, b}) {   // two bases of one shape, other seeds
        make_dirs(node);
        ASSERT_EQ(
            run(c.train_gpt(node + "/base", "-x 2 --checkpoint-every 2 --seed " + std::string(node == a ? "1" : "2")))
                .rc,
            0);
    }
    std::string tokenizer = c.dir.file("tokenizer.bin");
    auto two_ranks = [&](const std::string& out, const std::string& extra, const std::string& train = std::string()) {
        const std::string flags = " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" +
                                  (train.empty() ? c.dir.file("train_*.bin") : train) + "' --tokenizer '" + tokenizer +
                                  "' -o " + out + " -x 2 --checkpoint-every 2 " + extra;
        return run(std::string(kMpirun) + "-np 1 -wdir '" + a + "' " + train_gpt_binary() + flags + " : -np 1 -wdir '" +
                   b + "' " + train_gpt_binary() + flags);
    };
    expect_refused(two_ranks("out", "--init-from base/checkpoints"),
                   {"rank 1: error: --init-from base/checkpoints: the model found",
                    "differs from the one rank 0 read: the ranks see different models under one path"});
    EXPECT_FALSE(file_exists(a + "/out/checkpoints/step_00000002"));
    // transformers directories (no manifest): the same shape, other weights
    for (const std::string& node : {a, b}) {
        make_dirs(node + "/hf");
        ASSERT_EQ(run("sh -c \"cd '" + node +
                      "/base/checkpoints/step_00000002' && cp config.json model*.safetensors* '" + node + "/hf/'\"")
                      .rc,
                  0);
    }
    expect_refused(two_ranks("out2", "--init-from hf"),
                   {"rank 1: error: --init-from hf: the model read from hf differs", "different models"});
    // the same copies: it trains
    ASSERT_EQ(run("rm -rf '" + b + "/hf' && cp -r '" + a + "/hf' '" + b + "/hf'").rc, 0);
    const CommandResult same = two_ranks("'" + a + "/out3'", "--init-from hf");   // one -o for both
    EXPECT_EQ(same.rc, 0) << same.output;
    // training data: rank 1's copy of the shard holds more tokens
    for (const std::string& node : {a, b}) {
        std::vector<uint32_t> tokens(node == a ? 4000 : 4100, 'a');
        write_shard(node + "/x_train_000000.bin", tokens.data(), (int64_t)tokens.size(), 2);
    }
    expect_refused(two_ranks("out4", "", "x_train_*.bin"),
                   {"rank 1: error: -i x_train_*.bin: the data found (4100 tokens in 1 shard(s)) differs from the one "
                    "rank 0 read: the ranks see different data under one path"});
    // HellaSwag's examples: rank 1's file has another label
    const std::string example = R"({"ctx": "He", "label": 0, "endings": ["ran.", "sat.", "hid.", "ate."]})";
    write_text(a + "/hs.jsonl", example + "\n");
    write_text(b + "/hs.jsonl", R"({"ctx": "He", "label": 2, "endings": ["ran.", "sat.", "hid.", "ate."]})"
                                "\n");
    expect_refused(two_ranks("out5", "--hellaswag hs.jsonl"),
                   {"rank 1: error: --hellaswag hs.jsonl (1 examples) differs from the one rank 0 read"});
    // the tokenizer: rank 1's spells one token otherwise (the same vocabulary)
    for (const std::string& node : {a, b}) {
        std::string bytes = read_text(c.dir.file("tokenizer.bin"));
        if (node == b) bytes[bytes.size() - 1] ^= 0x01;
        write_text(node + "/tok.bin", bytes);
    }
    tokenizer = "tok.bin";
    expect_refused(two_ranks("out6", ""), {"rank 1: error: the tokenizer tok.bin differs from the one rank 0 read"});
}

// ---- 4. every check before anything is written --------------------------------------------------

TEST(Faults, EveryCheckComesBeforeAnythingIsWritten) {
    Corpus c;
    const std::string out = c.dir.file("out");
    std::vector<uint32_t> tokens(4000, 'a');
    tokens[3999] = 257;   // = the byte-level vocabulary: the last token of the shard
    write_shard(c.dir.file("bad_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    write_text(c.dir.file("a_file"), "mine\n");
    // HellaSwag examples in the byte-level tokenizer (a token a byte): the second one's third
    // ending, 36 tokens with its leading space, cannot fit a window of 16
    const std::string ok = R"({"ctx": "He", "label": 0, "endings": ["ran.", "sat.", "hid.", "ate."]})";
    write_text(
        c.dir.file("hellaswag.jsonl"),
        ok + "\n" +
            R"({"ctx": "She", "label": 1, "endings": ["ran.", "sat.", "walked all the way to the far hill.", "ate."]})" +
            "\n" + ok + "\n");
    const struct {
        const char* flags;
        std::vector<std::string> named;
    } cases[] = {
        {"-x 4 -i 'BAD_*.bin'", {"BAD_000000.bin: token 257 at position 3999 is not below the vocabulary size 257"}},
        {"-x 4 --vocab-size 300", {"--vocab-size 300 is larger than the tokenizer's 257"}},
        {"-x 4 --checkpoint-every 2 --checkpoint-dir 'A_FILE'",
         {"--checkpoint-dir A_FILE: it exists and is not a directory"}},
        {"-x 4 --checkpoint-every 2 --checkpoint-dir 'A_FILE/ckpts'", {"A_FILE exists and is not a directory"}},
        {"-x 4 -l 1e39", {"--lr: 1e39 is beyond FP32's range"}},
        {"-x 4 --resume-from-intact", {"--resume-from-intact", "--resume or --auto-resume"}},
        {"-x 4 --stop-on-loss-spike --loss-spike-factor 0", {"--stop-on-loss-spike", "no loss is ever a spike"}},
        {"-x 4 --resume --auto-resume", {"--resume and --auto-resume"}},
        {"-x 4 --loss-spike-factor 0.5", {"--loss-spike-factor", "0 (off) or a number above 1"}},
        // found before training, not after it (the run trained, wrote its checkpoints, then exited 1)
        {"-x 4 --checkpoint-every 2 --hellaswag 'HS_FILE'",
         {"HS_FILE:2: ending 2 has 36 tokens, which do not fit the model's window of 16 positions", "-t"}},
    };
    auto expand = [&](std::string s) {
        for (auto [key, value] : {std::pair{"BAD", c.dir.file("bad")},
                                  {"A_FILE", c.dir.file("a_file")},
                                  {"HS_FILE", c.dir.file("hellaswag.jsonl")}}) {
            for (size_t at; (at = s.find(key)) != std::string::npos;)
                s.replace(at, std::string(key).size(), value);
        }
        return s;
    };
    for (const auto& k : cases) {
        SCOPED_TRACE(k.flags);
        std::vector<std::string> named;
        for (const std::string& n : k.named)
            named.push_back(expand(n));
        expect_refused(run(c.train_gpt(out, expand(k.flags))), named);
        EXPECT_FALSE(file_exists(out)) << "nothing written";
        EXPECT_EQ(read_text(c.dir.file("a_file")), "mine\n");
    }
    // without a tokenizer (shards with none beside them, --vocab-size), a prompt cannot be encoded
    make_dirs(c.dir.file("bare"));
    ASSERT_EQ(run("cp '" + c.dir.file("train_000000.bin") + "' '" + c.dir.file("bare/") + "'").rc, 0);
    const std::string no_tokenizer = train_gpt_binary() +
                                     " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' --threads 1 "
                                     "--vocab-size 257 -i '" +
                                     c.dir.file("bare/train_*.bin") + "' -o '" + out + "' -x 2 ";
    expect_refused(run(no_tokenizer + "-g 8 --sample-prompt 'In the'"),
                   {"--sample-prompt needs a tokenizer", "has none"});
    EXPECT_FALSE(file_exists(out));
    ASSERT_EQ(run(no_tokenizer + "-g 8").rc, 0) << "without a prompt it samples ids";
}

// Flags that cannot work together, or ranks that disagree, are refused at start (issue 23):
// --resume with --init-from (before: --init-from ignored silently); --resume to a step the
// checkpoint is past (before: exit 0, nothing done); ranks started with different flags (before:
// a hang with another -x, a silent disagreement with another -b).
TEST(Faults, ConflictingResumeFlagsAndRanksThatDisagreeAreRefusedAtStart) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 6 --checkpoint-every 6")).rc, 0);
    const std::string step6 = checkpoint_dir(out + "/checkpoints", 6);
    const auto before = directory_snapshot(out);
    expect_refused(run(c.train_gpt(out, "--resume --init-from '" + step6 + "'")),
                   {"--resume continues a run from its checkpoint", "--init-from " + step6, "give one of them"});
    expect_refused(run(c.train_gpt(out, "--resume -x 3")),
                   {"--resume: " + step6 + " is at step 6, past --steps 3: there is nothing to train",
                    "--init-from " + step6 + " -x 0"});
    expect_refused(run(c.train_gpt(out, "--auto-resume -x 3 --checkpoint-every 6")),   // named as given
                   {"--auto-resume: " + step6 + " is at step 6, past --steps 3: there is nothing to train"});
    EXPECT_EQ(directory_snapshot(out), before) << "nothing written";
    const std::string other = c.dir.file("other");
    const CommandResult r = run(std::string(kMpirun) + "-np 1 " + train_gpt_binary() + c.flags(other, "-x 4") +
                                " : -np 1 " + train_gpt_binary() + c.flags(other, "-x 5"));
    expect_refused(r, {"rank 1: its flags differ from rank 0's: --steps is 5 here, 4 on rank 0",
                       "the ranks were started with different flags"});
    EXPECT_FALSE(file_exists(other)) << "nothing written";
}

// NaN weights through --init-from are refused naming the model and the tensor (before: trained
// with every step skipped, exit 0).
TEST(Faults, NonFiniteInitFromWeightsAreRefusedNamingTheTensor) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    const std::string hf = c.dir.file("hf"), step = checkpoint_dir(out + "/checkpoints", 2);
    ASSERT_EQ(run("mkdir '" + hf + "' && cp '" + step + "'/config.json '" + step + "'/model* '" + hf + "/'").rc, 0);
    write_text(c.dir.file("nan.py"),
               "import glob, sys\n"
               "from safetensors.torch import load_file, save_file\n"
               "path = glob.glob(sys.argv[1] + '/model-*.safetensors')[0]\n"
               "t = load_file(path)\n"
               "t['transformer.h.1.mlp.c_fc.weight'][3, 5] = float('nan')\n"
               "save_file(t, path, metadata={'format': 'pt'})\n");
    const CommandResult made = run(python_binary() + " '" + c.dir.file("nan.py") + "' '" + hf + "'");
    ASSERT_EQ(made.rc, 0) << "the safetensors package (with transformers: scripts/setup.sh --test): " << made.output;
    expect_refused(run(c.train_gpt(c.dir.file("ft"), "-x 2 --init-from '" + hf + "'")),
                   {"--init-from: transformers model " + hf + " holds a non-finite weight (nan) in fcw"});
}

// ---- 6. every write checked ------------------------------------------------------------------

// A full filesystem under the output directory: the run stops naming log.jsonl and the reason,
// and the log ends at its last complete record. Before: a torn last line and exit 0.
TEST(Faults, AFullFilesystemStopsTheRunAndTheLogKeepsOnlyWholeLines) {
    Corpus c;
    CommandResult r;
    const std::string fs_dir = c.dir.file("fs"), copy = c.dir.file("copy");
    if (!run_on_small_tmpfs(fs_dir, "16k", copy, c.train_gpt(fs_dir + "/out", "-x 300"), &r)) {
        GTEST_SKIP() << "this machine does not allow a tmpfs in a mount namespace (unshare -m, mount -t tmpfs); "
                        "Faults.AFileSizeLimitStopsTheRunNamingTheFile covers the same path";
    }
    expect_refused(r, {"error: " + fs_dir + "/out/log.jsonl: cannot append a record: No space left on device",
                       "the log ends at its last complete record"});
    const auto steps = records_of(copy + "/out/log.jsonl", "step");
    EXPECT_GT(steps.size(), 5u);
    EXPECT_LT(steps.size(), 300u);
}

// A checkpoint directory on a filesystem with room for one checkpoint: the second save stops the
// run, naming the file it could not write; the first checkpoint is intact.
TEST(Faults, AFullFilesystemUnderTheCheckpointsStopsTheRunAndKeepsTheCheckpointsBefore) {
    Corpus c;
    CommandResult r;
    const std::string fs_dir = c.dir.file("fs"), copy = c.dir.file("copy");
    if (!run_on_small_tmpfs(
            fs_dir, "900k", copy,
            c.train_gpt(c.dir.file("out"), "-x 6 --checkpoint-every 2 --checkpoint-dir '" + fs_dir + "'"), &r)) {
        GTEST_SKIP() << "this machine does not allow a tmpfs in a mount namespace (unshare -m, mount -t tmpfs)";
    }
    expect_refused(r, {"error: " + fs_dir + "/step_00000004.tmp/", "No space left on device"});
    EXPECT_EQ(list_checkpoints(copy), (std::vector<int64_t>{2}));
    EXPECT_NO_THROW(verify_checkpoint(checkpoint_dir(copy, 2), read_manifest(checkpoint_dir(copy, 2))));
    log_records(c.dir.file("out/log.jsonl"));   // whole lines
}

// The same through a file-size limit (ulimit -f, which needs no privilege): log.jsonl stops at
// 8 kB ("File too large"), config.json cannot be written at 1 kB (and no config.json.tmp is
// left). Before: SIGXFSZ killed the trainer, or a torn line and exit 0.
TEST(Faults, AFileSizeLimitStopsTheRunNamingTheFile) {
    Corpus c;
    const std::string out = c.dir.file("out");
    // stdout to /dev/null (no file there): the limit is then the log's alone
    CommandResult r = run("bash -c \"ulimit -f 8; exec " + c.train_gpt(out, "-x 300") + " >/dev/null\"");
    expect_refused(r, {"error: " + out + "/log.jsonl: cannot append a record: File too large"});
    EXPECT_GT(records_of(out + "/log.jsonl", "step").size(), 5u);
    const std::string small = c.dir.file("small");
    r = run("bash -c \"ulimit -f 1; exec " + c.train_gpt(small, "-x 3") + "\"");
    expect_refused(r, {"error: " + small + "/config.json.tmp: write failed: File too large"});
    EXPECT_FALSE(file_exists(small + "/config.json"));
    EXPECT_FALSE(file_exists(small + "/config.json.tmp"));
}

// stdout closed (the run piped into `head`): the run goes on to its end and its checkpoint, with
// one warning (before: killed by SIGPIPE, exit 141, no checkpoint).
TEST(Faults, AClosedStdoutIsAWarningNotTheEndOfTheRun) {
    Corpus c;
    const std::string out = c.dir.file("out");
    const CommandResult r = run("bash -c \"set -o pipefail; " + c.train_gpt(out, "-x 40 --checkpoint-every 40") +
                                " 2> '" + c.dir.file("err.txt") + "' | head -c 10 > /dev/null\"");
    EXPECT_EQ(r.rc, 0) << r.output << read_text(c.dir.file("err.txt"));
    EXPECT_EQ(list_checkpoints(out + "/checkpoints"), (std::vector<int64_t>{40}));
    EXPECT_EQ(last_step(out + "/log.jsonl"), 40);
    EXPECT_CONTAINS(read_text(c.dir.file("err.txt")), "warning: writing to stdout failed (it was closed)");
}

// Round 25: a run that writes no log (-x 0 without -o) has stdout as its only record: its sample
// written to a full device or a closed stdout was lost, exit 0, with a warning that pointed at a
// log.jsonl that was never written. It fails; with -o the warning holds and the run goes on.
TEST(Faults, StdoutLostWhereItIsTheOnlyRecordFailsTheRun) {
    Corpus c;
    ASSERT_EQ(run(c.train_gpt(c.dir.file("out"), "-x 2 --checkpoint-every 2")).rc, 0);
    const std::string sample =
        train_gpt_binary() + " --device cpu --threads 1 --init-from '" + c.dir.file("out/checkpoints") + "' -x 0 -g 8";
    for (const char* lost : {"> /dev/full", ">&-"}) {
        SCOPED_TRACE(lost);
        expect_refused(run("sh -c \"" + sample + " " + lost + "\""),
                       {"and this run writes no log.jsonl (no -o): what it samples and evaluates would go nowhere"});
        const CommandResult kept =
            run("sh -c \"" + sample + " -o '" + c.dir.file("s") + "' --overwrite-output " + lost + "\"");
        EXPECT_EQ(kept.rc, 0) << kept.output;
        EXPECT_CONTAINS(kept.output, "the run goes on, and its records are in log.jsonl");
        EXPECT_CONTAINS(read_text(c.dir.file("s/log.jsonl")), "\"type\":\"sample\"");
    }
}

// ---- 7. one run per directory, nothing replaced unasked ----------------------------------------

TEST(Faults, ASecondRunInTheSameDirectoryIsRefusedNamingTheFirst) {
    Corpus c;
    const std::string out = c.dir.file("out");
    Background first(c.train_gpt(out, "-x 100000 --checkpoint-every 50000"), c.dir.file("first.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 2; })) << first.output();
    // the same -o; another -o with the same --checkpoint-dir
    CommandResult r = run(c.train_gpt(out, "-x 10 --overwrite-output"));
    // refused at once: a run that waited for the lock would still be waiting at the timeout (124)
    expect_refused(
        r, {out + " is in use by another run: pid " + std::to_string(first.pid) + " on ", out + "/train_gpt.lock"});
    // without --overwrite-output: in use, not "a previous run" to --resume or replace (round 41)
    r = run(c.train_gpt(out, "-x 10"));
    expect_refused(r, {out + " is in use by another run: pid " + std::to_string(first.pid)});
    EXPECT_EQ(r.output.find("previous run"), std::string::npos) << r.output;
    r = run(c.train_gpt(c.dir.file("other"), "-x 10 --checkpoint-every 5 --checkpoint-dir '" + out + "/checkpoints'"));
    expect_refused(r, {out + "/checkpoints is in use by another run: pid " + std::to_string(first.pid)});
    EXPECT_FALSE(file_exists(c.dir.file("other"))) << "a refused run creates no directory";
    // the first run is untouched: it goes on, and stops cleanly on SIGINT
    const int steps = last_step(out + "/log.jsonl");
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") > steps + 2; }));
    kill(first.pid, SIGINT);
    EXPECT_EQ(first.wait(300), 130) << first.output();
    log_records(out + "/log.jsonl");
    // its lock went with it
    ASSERT_EQ(
        run(c.train_gpt(c.dir.file("other"), "-x 2 --checkpoint-every 2 --checkpoint-dir '" + out + "/checkpoints'"))
            .rc,
        0);
}

// A resume against a live run's checkpoints (written and pruned while it looks at them) says the
// directory is in use, every time (before: sometimes "does not exist" or "every one is damaged").
TEST(Faults, AResumeAgainstALiveRunSaysItIsInUse) {
    Corpus c;
    const std::string out = c.dir.file("out");
    Background live(c.train_gpt(out, "-x 100000 --n-embd 64 --checkpoint-every 1 --keep-checkpoints 2"),
                    c.dir.file("live.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 3; })) << live.output();
    for (int attempt = 0; attempt < 5; attempt++) {
        SCOPED_TRACE(attempt);
        expect_refused(run(c.train_gpt(out, "-x 100000 --auto-resume --resume-from-intact")),
                       {out + "/checkpoints is in use by another run: pid " + std::to_string(live.pid)});
    }
    kill(live.pid, SIGINT);
    EXPECT_EQ(live.wait(300), 130) << live.output();
}

TEST(Faults, ARerunDoesNotReplaceAPreviousRunsFilesUnlessAsked) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2")).rc, 0);
    const auto before = directory_snapshot(out);
    expect_refused(run(c.train_gpt(out, "-x 3")),
                   {out + " holds the log.jsonl and config.json of a previous run", "--resume", "--overwrite-output"});
    EXPECT_EQ(directory_snapshot(out), before) << "nothing replaced";
    const CommandResult r = run(c.train_gpt(out, "-x 3 --overwrite-output"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_EQ(last_step(out + "/log.jsonl"), 3);
    // sampling a checkpoint (-x 0) writes no log unless -o says where: here the default -o is
    // `out`, the directory of the run above
    ASSERT_EQ(run(c.train_gpt(c.dir.file("ck"), "-x 2 --checkpoint-every 2")).rc, 0);
    const auto trained = directory_snapshot(out);
    const CommandResult s = run("sh -c \"cd '" + c.dir.path + "' && " + train_gpt_binary() + " --init-from '" +
                                c.dir.file("ck/checkpoints") + "' -x 0 -g 4 --threads 1\"");
    ASSERT_EQ(s.rc, 0) << s.output;
    EXPECT_CONTAINS(s.output, "---- sample (4 tokens, step 0) ----");
    EXPECT_EQ(directory_snapshot(out), trained) << "the run's log and config untouched";
}

// ---- 9. SIGTERM / SIGUSR1 / SIGINT ----------------------------------------------------------------

// SIGUSR1 in the middle of a run: the step finishes, a checkpoint of it is written, exit 75; the
// resumed run ends with the same weights and optimizer state as an uninterrupted one. The run is
// one that would not end by itself (100000 steps) at a constant learning rate without warmup, so
// that the signal always comes mid-run and `-x` (the step both runs end at) changes nothing else.
TEST(Faults, SigusrOneWritesACheckpointAndExits75AndTheRunResumesBitExactly) {
    Corpus c;
    const std::string schedule = "--lr-schedule constant --warmup-steps 0 ";
    const std::string out = c.dir.file("out");
    Background job(c.train_gpt(out, schedule + "-x 100000 --checkpoint-every 50000"), c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 3; })) << job.output();
    kill(job.pid, SIGUSR1);
    ASSERT_EQ(job.wait(300), 75) << job.output();
    const auto stops = records_of(out + "/log.jsonl", "stop");
    ASSERT_EQ(stops.size(), 1u);
    const int stopped = stops[0]["step"].get<int>();
    EXPECT_EQ(stops[0]["checkpoint"], checkpoint_dir(out + "/checkpoints", stopped));
    EXPECT_CONTAINS(job.output(), format("stopped by SIGUSR1 after step %d; resume with --resume", stopped));
    EXPECT_EQ(list_checkpoints(out + "/checkpoints").back(), stopped);
    // resumed to `end`, and a run that trains to `end` in one go
    const int end = stopped + 5;
    const std::string to_end = format("-x %d --checkpoint-every %d", end, end);
    const CommandResult r = run(train_gpt_binary() + " --resume -o '" + out + "' " + to_end);
    ASSERT_EQ(r.rc, 0) << r.output;
    ASSERT_EQ(run(c.train_gpt(c.dir.file("whole"), schedule + to_end)).rc, 0);
    auto files = [](const std::string& step) {
        std::map<std::string, uint64_t> out;
        for (auto& [name, rec] : read_manifest(step).files)
            out[name] = rec.xxh3;
        return out;
    };
    EXPECT_EQ(files(checkpoint_dir(out + "/checkpoints", end)),
              files(checkpoint_dir(c.dir.file("whole/checkpoints"), end)));
}

// SIGTERM without checkpointing configured says so; SIGINT stops without a checkpoint, exit 130.
TEST(Faults, SigtermWithoutCheckpointsAndSigintStopCleanly) {
    Corpus c;
    for (auto [sig, name, flags, code, says] :
         {std::tuple{SIGTERM, "SIGTERM", "-x 100000", 75, "no checkpoint: --checkpoint-every is 0"},
          {SIGINT, "SIGINT", "-x 100000 --checkpoint-every 50000", 130, "(Ctrl-C: no checkpoint)"}}) {
        SCOPED_TRACE(name);
        const std::string out = c.dir.file(name);
        Background job(c.train_gpt(out, flags), c.dir.file(std::string(name) + ".txt"));
        ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 3; })) << job.output();
        kill(job.pid, sig);
        EXPECT_EQ(job.wait(300), code) << job.output();
        EXPECT_CONTAINS(job.output(), std::string("stopped by ") + name + " after step ");
        EXPECT_CONTAINS(job.output(), says);
        if (sig == SIGINT) {   // said on receipt: a due save still happens (before: "without a checkpoint")
            EXPECT_CONTAINS(job.output(),
                            "SIGINT: stopping after this step, with a checkpoint only if one is due then");
        }
        EXPECT_TRUE(list_checkpoints(out + "/checkpoints").empty());
        EXPECT_EQ(records_of(out + "/log.jsonl", "stop").size(), 1u);
    }
}

// Round 11: a signal that arrives while a due checkpoint is being written stops the run right
// there, with that checkpoint (before: one more step, and a second save of it before exit 75,
// twice the save time a preemption's grace period must hold). Saves every 2 steps of a model wide
// enough that a save takes a while; the signal is sent as soon as a save's .tmp appears.
TEST(Faults, ASignalDuringASaveStopsWithThatCheckpoint) {
    Corpus c;
    const std::string out = c.dir.file("out"), ck = out + "/checkpoints";
    Background job(c.train_gpt(out, "-x 100000 --checkpoint-every 2 --keep-checkpoints 100 --n-embd 384"),
                   c.dir.file("job.txt"));
    auto saving = [&] {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(ck, ec))
            if (e.path().extension() == ".tmp") return true;
        return false;
    };
    const auto t0 = std::chrono::steady_clock::now();
    while (!saving() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(300))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_TRUE(saving()) << job.output();
    kill(job.pid, SIGUSR1);
    ASSERT_EQ(job.wait(300), 75) << job.output();
    const auto stops = records_of(out + "/log.jsonl", "stop");
    ASSERT_EQ(stops.size(), 1u);
    const int stopped = stops[0]["step"].get<int>();
    EXPECT_EQ(stopped % 2, 0) << "stopped after the step whose save the signal came during, not one more\n"
                              << job.output();
    const auto steps = list_checkpoints(ck);
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.back(), stopped);
    for (auto s : steps)
        EXPECT_EQ(s % 2, 0) << "only the due saves: no second one for the stop";
}

// Round 14: a trainer started with its standard descriptors closed opens /dev/null in their place
// first, so its own files never take fds 0–2 (before: log.jsonl became fd 2, the SIGUSR1 notice
// landed in it, and every resume was refused at that line; with only stdout closed, the step
// lines went into the lock file). Its log stays whole and the run resumes; a closed stdout alone
// is said once on stderr.
TEST(Faults, ClosedStandardDescriptorsNeverBecomeTheRunsFiles) {
    Corpus c;
    const std::string out = c.dir.file("out");
    {
        Background job("sh -c \"exec " + c.train_gpt(out, "-x 100000 --checkpoint-every 50000") + " <&- >&- 2>&-\"",
                       c.dir.file("job.txt"));
        ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 3; })) << job.output();
        kill(job.pid, SIGUSR1);
        ASSERT_EQ(job.wait(300), 75);
    }
    std::istringstream log(read_text(out + "/log.jsonl"));
    for (std::string line; std::getline(log, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        EXPECT_TRUE(j.is_object()) << "not a record: " << line;
    }
    const auto stops = records_of(out + "/log.jsonl", "stop");
    ASSERT_EQ(stops.size(), 1u);
    const int stopped = stops[0]["step"].get<int>();
    const CommandResult resumed = run(train_gpt_binary() + format(" --resume -o '%s' -x %d", out.c_str(), stopped + 2));
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    // stdout alone closed: said once, and the lock is no transcript
    const std::string o2 = c.dir.file("o2");
    const CommandResult quiet = run("sh -c \"" + c.train_gpt(o2, "-x 3") + " >&-\" 2>&1");
    ASSERT_EQ(quiet.rc, 0) << quiet.output;
    EXPECT_CONTAINS(quiet.output, "warning: stdout is closed; the run goes on, and its records are in log.jsonl");
    EXPECT_EQ(last_step(o2 + "/log.jsonl"), 3);
}

// Under mpirun, a signal that only rank 1 receives (as when a scheduler's signals reach the ranks
// at different moments): every rank stops after the same step, one checkpoint holds both ranks'
// state, and the job exits 75.
TEST(Faults, ASignalToOneRankStopsEveryRankAtTheSameStepWithOneCheckpoint) {
    Corpus c;
    const std::string out = c.dir.file("mpi_out");
    Background job(c.mpirun(2, out, "-x 100000 --checkpoint-every 50000 --zero 1"), c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 3; })) << job.output();
    const pid_t rank1 = pid_of_rank(out, 1);
    ASSERT_GT(rank1, 0) << "rank 1's process";
    kill(rank1, SIGUSR1);
    EXPECT_EQ(job.wait(300), 75) << job.output();
    const auto stops = records_of(out + "/log.jsonl", "stop");
    ASSERT_EQ(stops.size(), 1u);
    const int stopped = stops[0]["step"].get<int>();
    EXPECT_CONTAINS(job.output(), format("stopped by another rank's signal after step %d", stopped));
    const std::string ckpt = checkpoint_dir(out + "/checkpoints", stopped);
    const auto manifest = read_manifest(ckpt);
    EXPECT_EQ(manifest.world_size, 2);
    EXPECT_EQ(manifest.files.count("state-00000.safetensors") + manifest.files.count("state-00001.safetensors"), 2u);
    EXPECT_NO_THROW(verify_checkpoint(ckpt, manifest));
}

// An output path whose directories can be made, but under which a checkpoint's files cannot (the
// whole path past PATH_MAX), is refused at start naming the flag (before: the first save failed
// with "File name too long", leaving its .tmp).
TEST(Faults, AnOutputPathWithNoRoomForTheCheckpointsIsRefusedAtStart) {
    Corpus c;
    std::string deep = c.dir.path;
    while (deep.size() < PATH_MAX - 60)
        deep += "/" + std::string(std::min<size_t>(200, PATH_MAX - 61 - deep.size()), 'd');
    ASSERT_EQ(run("mkdir -p '" + deep + "'").rc, 0) << "the directory itself fits";
    const std::string out = deep + "/o";
    expect_refused(run("sh -c \"cd '" + c.dir.path + "' && " + c.train_gpt(out, "-x 2 --checkpoint-every 1") + "\""),
                   {"--checkpoint-dir " + out + "/checkpoints: its", "leave too little room for the files"});
    EXPECT_FALSE(file_exists(out)) << "nothing written";
}

// Round 27: an old checkpoint the run cannot remove (its directory write-protected, or another
// user's) ended the run with exit 1 after every later save, left renamed to step_*.tmp (no longer a
// checkpoint) and the save's log record missing. It is kept with a warning, and the run goes on.
// Run as nobody where the tests run as root (root removes anything).
TEST(Faults, AnOldCheckpointThatCannotBeRemovedIsKeptWithAWarning) {
    Corpus c;
    const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    ASSERT_EQ(::chmod(c.dir.path.c_str(), 0777), 0);
    const std::string out = c.dir.file("out"), checkpoints = out + "/checkpoints";
    const std::string flags = "--checkpoint-every 1 --keep-checkpoints 1";
    CommandResult r = run(as_user + c.train_gpt(out, "-x 2 " + flags));
    ASSERT_EQ(r.rc, 0) << r.output;
    ASSERT_TRUE(file_exists(checkpoint_dir(checkpoints, 2) + "/manifest.json")) << r.output;
    ASSERT_EQ(::chmod(checkpoint_dir(checkpoints, 2).c_str(), 0555), 0);   // protected
    r = run(as_user + c.train_gpt(out, "-x 4 --resume " + flags));
    EXPECT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "warning: cannot remove old checkpoint " + checkpoint_dir(checkpoints, 2) +
                                  " (Permission denied); it is kept");
    EXPECT_TRUE(file_exists(checkpoint_dir(checkpoints, 2) + "/manifest.json")) << "kept under its name";
    EXPECT_FALSE(file_exists(checkpoint_dir(checkpoints, 3))) << "pruned as usual";
    EXPECT_TRUE(file_exists(checkpoint_dir(checkpoints, 4) + "/manifest.json"));
    EXPECT_FALSE(file_exists(checkpoint_tmp_dir(checkpoints, 2)));
    std::set<int> logged;   // the steps of the log's checkpoint records: every save's
    std::istringstream log(read_text(out + "/log.jsonl"));
    for (std::string line; std::getline(log, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j["type"] == "checkpoint") logged.insert(j["step"].get<int>());
    }
    EXPECT_EQ(logged, (std::set<int>{1, 2, 3, 4}));
    ::chmod(checkpoint_dir(checkpoints, 2).c_str(), 0755);
}

// Round 27: a checkpoint file this user may not read was called damaged, and --resume-from-intact
// advised, which sets a healthy checkpoint aside; it is refused as unreadable, by either, with
// nothing renamed. A file replaced by a FIFO was said to be "missing". (As nobody where the tests
// run as root, whom permissions do not stop.)
TEST(Faults, ACheckpointThisUserCannotReadIsNotCalledDamaged) {
    Corpus c;
    const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    ASSERT_EQ(::chmod(c.dir.path.c_str(), 0777), 0);
    const std::string out = c.dir.file("out"), step = checkpoint_dir(out + "/checkpoints", 2);
    ASSERT_EQ(run(as_user + c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(::chmod((step + "/state-00000.safetensors").c_str(), 0), 0);
    for (const char* intact : {"", " --resume-from-intact"}) {
        SCOPED_TRACE(intact);
        expect_refused(run(as_user + c.train_gpt(out, std::string("-x 4 --resume") + intact)),
                       {"the checkpoint " + step + " cannot be read by this user (" + step +
                        "/state-00000.safetensors: this user cannot read it: Permission denied). Nothing was "
                        "changed"});
        EXPECT_TRUE(file_exists(step + "/manifest.json")) << "not set aside";
    }
    ASSERT_EQ(::chmod((step + "/state-00000.safetensors").c_str(), 0644), 0);
    std::filesystem::remove(step + "/config.json");
    ASSERT_EQ(::mkfifo((step + "/config.json").c_str(), 0644), 0);
    expect_refused(run(c.train_gpt(out, "-x 4 --resume")),
                   {step + "/config.json: not a regular file (listed in manifest.json as one)"});
}

// Round 27: a resume that cuts log.jsonl back replaced it by a file of the umask's mode: a private
// (0600) log became world-readable. The file replaced keeps its mode.
TEST(Faults, ALogCutBackOnAResumeKeepsItsMode) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 4 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(::chmod((out + "/log.jsonl").c_str(), 0600), 0);
    std::filesystem::remove_all(checkpoint_dir(out + "/checkpoints", 4));   // the resume cuts steps 3-4 off
    const CommandResult r = run(c.train_gpt(out, "-x 4 --checkpoint-every 2 --resume"));
    ASSERT_EQ(r.rc, 0) << r.output;
    struct stat st {};
    ASSERT_EQ(::stat((out + "/log.jsonl").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Round 28 (low): a resume held all of log.jsonl's records at once, about ten times the file's
// size (a 233 MB log took 2.35 GB, where a 4 GiB log is allowed); it parses one record at a time.
// The peak memory of a resume with a 50 MB log, over that of one with a short log, is measured
// (getrusage of the finished child) and bounded by 4x the log: the text, a cut-back copy of it,
// and the lines being parsed.
TEST(Faults, AResumeReadsALongLogOneRecordAtATime) {
    Corpus c;
    const std::string short_log = c.dir.file("short"), long_log = c.dir.file("long");
    for (const std::string& out : {short_log, long_log})
        ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    // 220000 copies of the first step record after the start record: kept by the cut-back (step 1)
    std::istringstream in(read_text(long_log + "/log.jsonl"));
    std::string start, step_record, rest;
    std::getline(in, start);
    std::getline(in, step_record);
    ASSERT_NE(step_record.find("\"type\":\"step\""), std::string::npos) << step_record;
    rest = step_record + "\n" + std::string(std::istreambuf_iterator<char>(in), {});
    std::string text = start + "\n";
    for (int i = 0; i < 220000; i++)
        text += step_record + "\n";
    write_text(long_log + "/log.jsonl", text + rest);
    const double log_mib = (double)text.size() / (1 << 20);
    ASSERT_GT(log_mib, 40.0);
    auto peak_mib = [&](const std::string& out) {   // the resume's peak resident memory
        write_text(c.dir.file("resume.sh"), c.train_gpt(out, "-x 3 --checkpoint-every 2 --resume") + "\n");
        const CommandResult r =
            run("python3 -c 'import resource, subprocess, sys; rc = subprocess.run([\"sh\", sys.argv[1]]).returncode; "
                "print(\"rc\", rc, \"peak_kib\", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' '" +
                c.dir.file("resume.sh") + "'");
        EXPECT_CONTAINS(r.output, "rc 0 peak_kib ");
        const size_t at = r.output.rfind("peak_kib ");
        return at == std::string::npos ? 0.0 : std::stod(r.output.substr(at + 9)) / 1024;
    };
    const double base = peak_mib(short_log), peak = peak_mib(long_log);
    EXPECT_GT(base, 1.0);
    EXPECT_LT(peak - base, 4 * log_mib) << "a " << log_mib << " MiB log; " << base << " MiB with a short one";
    EXPECT_EQ(last_step(long_log + "/log.jsonl"), 3);
}

// A shard truncated while the run reads it: one message naming the shard, exit 1 (before: "Bus
// error" and nothing else, exit 135).
TEST(Faults, AShardTruncatedWhileTrainingIsNamed) {
    Corpus c;
    std::string text;
    for (int i = 0; i < 20000; i++)
        text += "In the beginning was the word. ";   // 620k tokens, 1.2 MB
    const std::vector<uint32_t> tokens(text.begin(), text.end());
    const std::string shard = c.dir.file("big_000000.bin");
    write_shard(shard, tokens.data(), (int64_t)tokens.size(), 2);
    const std::string out = c.dir.file("out");
    Background job(c.train_gpt(out, "-x 100000 --checkpoint-every 50000 -i '" + shard + "'"), c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 2; })) << job.output();
    ASSERT_EQ(::truncate(shard.c_str(), 4096), 0);   // the header and a few tokens are left
    EXPECT_EQ(job.wait(300), 1) << job.output();
    EXPECT_CONTAINS(job.output(), "error: " + shard + " was truncated or changed while the run read it");
}

// Round 26: the handler named a shard from a table of 4096 mappings, so in a dataset of more shards
// a later one truncated while the run read it ended the run in a bare "Bus error" (exit 135). Here
// 4096 shards of one sample come first and the 4 large ones the shuffled run mostly reads after.
TEST(Faults, AShardBeyondTheFirst4096TruncatedWhileTrainingIsNamed) {
    Corpus c;
    const std::vector<uint32_t> one_sample(17, 'a');   // T + 1 tokens
    write_shard(c.dir.file("one.bin"), one_sample.data(), (int64_t)one_sample.size(), 2);
    for (int i = 0; i < 4096; i++)
        std::filesystem::copy_file(c.dir.file("one.bin"), c.dir.file(format("s_%06d.bin", i)));
    std::string text;
    for (int i = 0; i < 20000; i++)
        text += "In the beginning was the word. ";   // 620k tokens, 1.2 MB
    const std::vector<uint32_t> tokens(text.begin(), text.end());
    write_shard(c.dir.file("big.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    std::vector<std::string> late;   // the shards mapped after the first 4096
    for (int i = 4096; i < 4100; i++) {
        late.push_back(c.dir.file(format("s_%06d.bin", i)));
        std::filesystem::copy_file(c.dir.file("big.bin"), late.back());
    }
    const std::string out = c.dir.file("out");
    Background job(c.train_gpt(out, "-x 100000 --checkpoint-every 50000 --shuffle -i '" + c.dir.file("s_*.bin") + "'"),
                   c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 2; })) << job.output();
    for (const std::string& shard : late)
        ASSERT_EQ(::truncate(shard.c_str(), 4096), 0);
    EXPECT_EQ(job.wait(300), 1) << job.output();
    EXPECT_CONTAINS(job.output(), "was truncated or changed while the run read it");
    EXPECT_CONTAINS(job.output(), "error: " + c.dir.file("s_00409"));   // one of the late four, by name
}

// Round 17: a shard written in place while the run reads it (the same size, valid ids: another
// shard copied over it) was trained on silently, though its pages were checked at start with
// other content; it ends the run naming the shard, as a truncation does.
TEST(Faults, AShardWrittenInPlaceWhileTrainingIsNamed) {
    Corpus c;
    std::string text;
    for (int i = 0; i < 20000; i++)
        text += "In the beginning was the word. ";
    std::vector<uint32_t> tokens(text.begin(), text.end());
    const std::string shard = c.dir.file("big_000000.bin");
    write_shard(shard, tokens.data(), (int64_t)tokens.size(), 2);
    const std::string out = c.dir.file("out");
    Background job(c.train_gpt(out, "-x 100000 --checkpoint-every 50000 -i '" + shard + "'"), c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 2; })) << job.output();
    std::reverse(tokens.begin(), tokens.end());   // other text, the same tokens and size
    const std::string other = c.dir.file("other.bin");
    write_shard(other, tokens.data(), (int64_t)tokens.size(), 2);
    // over the old bytes, never shorter (cp's O_TRUNC would end it in a bus error, the case above)
    // and its mtime put back after (round 18: touch -r hid the write; the ctime still moves)
    ASSERT_EQ(run("touch -r '" + shard + "' '" + other + ".time' && dd if='" + other + "' of='" + shard +
                  "' conv=notrunc status=none && touch -r '" + other + ".time' '" + shard + "'")
                  .rc,
              0);
    EXPECT_EQ(job.wait(300), 1) << job.output();
    EXPECT_CONTAINS(job.output(), "error: " + shard + " was truncated or changed while the run read it");
}

// An allocation that fails names what asked for it (before: "out of host memory allocating N
// bytes", naming neither the model nor its sizes).
TEST(Faults, AModelThatDoesNotFitInMemoryIsNamedWithItsSizes) {
    Corpus c;
    const CommandResult r = run("bash -c \"ulimit -v 2000000; exec " +
                                c.train_gpt(c.dir.file("out"), "-x 1 -e d12 --n-embd 768 -b 64 -t 1024") + "\"");
    expect_refused(r, {"error: building the model (a fresh one; 12 layers, 768 wide, ", "activations for B=64, T=1024",
                       "out of host memory allocating"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
}

// The default output directory (no -o): the same command runs again as often as it is given; a
// previous run there is moved aside whole, and the run says where (before: the second run was
// refused, and its hint, --resume, failed for a run without checkpoints). With -o given, a
// previous run is refused as above.
TEST(Faults, TheDefaultOutputDirectoryMovesAPreviousRunAsideAndSaysWhere) {
    Corpus c;
    const std::string in_dir = "sh -c \"cd '" + c.dir.path + "' && " + train_gpt_binary() +
                               " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" +
                               c.dir.file("train_*.bin") + "' --tokenizer '" + c.dir.file("tokenizer.bin") + "' ";
    ASSERT_EQ(run(in_dir + "-x 2 --checkpoint-every 2\"").rc, 0);
    const std::string first_log = read_text(c.dir.file("out/log.jsonl"));
    const CommandResult again = run(in_dir + "-x 3\"");
    ASSERT_EQ(again.rc, 0) << again.output;
    const size_t at = again.output.find("notice: out held a previous run; it is now out.previous-");
    ASSERT_NE(at, std::string::npos) << again.output;
    const size_t name = again.output.find("out.previous-", at);
    const std::string moved = again.output.substr(name, again.output.find(',', name) - name);
    EXPECT_CONTAINS(again.output, "(to continue it: --resume -o " + moved + ")");
    EXPECT_EQ(read_text(c.dir.file(moved + "/log.jsonl")), first_log) << "the first run, whole";
    EXPECT_EQ(list_checkpoints(c.dir.file(moved + "/checkpoints")), (std::vector<int64_t>{2}));
    EXPECT_EQ(last_step(c.dir.file("out/log.jsonl")), 3);
    ASSERT_EQ(run(in_dir + "-x 2\"").rc, 0) << "and once more";
}

// Round 30: the move-aside checked the locks of out and out/checkpoints only, and moved a live run
// whose -o (the README's -o out/mine) or --checkpoint-dir was inside out: that run stopped at its
// next save, its steps since the last checkpoint lost. A live run anywhere under out now stops it,
// and so do shards the run reads, or its redirected output, inside out.
TEST(Faults, TheDefaultOutIsNotMovedAsideWithALiveRunInsideIt) {
    Corpus c;
    const std::string cwd = c.dir.file("cwd");
    make_dirs(cwd);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 1")).rc, 0);   // out holds a previous run
    // the live run's flags, and the directory it holds (round 31: 10 levels down, past the walk's
    // depth bound then)
    const std::string deep = "out/a/b/c/d/e/f/g/h/i/j/k";
    for (const auto& [inside, held] : std::vector<std::pair<std::string, std::string>>{
             {"-o out/mine", "out/mine"},
             {"-o '" + c.dir.file("elsewhere") + "' --checkpoint-dir out/checkpoints", "out/checkpoints"},
             {"-o " + deep, deep}}) {
        SCOPED_TRACE(inside);
        Background live(c.train_gpt_in(cwd, "-x 100000 --checkpoint-every 50000 " + inside), c.dir.file("live.txt"));
        ASSERT_TRUE(wait_until([&] { return file_exists(cwd + "/" + held + "/train_gpt.lock"); })) << live.output();
        sleep(1);   // locked (the file is made, then locked)
        expect_refused(run(c.train_gpt_in(cwd, "-x 1")),
                       {"out holds a previous run, which this run would move aside, with " + held +
                            " inside it: " + held + " is in use by another run: pid ",
                        held + "/train_gpt.lock holds the lock"});
        for (const auto& e : std::filesystem::directory_iterator(cwd))
            EXPECT_EQ(e.path().filename().string().rfind("out.previous-", 0), std::string::npos) << e.path();
        kill(-live.pid, SIGINT);   // its process group: the shell and the run
        EXPECT_EQ(live.wait(300), 130) << live.output();
    }
    // round 28 (lows): shards under out were read from, and stdout redirected to out/train.log
    // written into, the moved-aside previous run
    write_project_shard(cwd + "/out", 6000, 'b');
    expect_refused(run("sh -c \"cd '" + cwd + "' && " + train_gpt_binary() +
                       " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
                       c.dir.file("tokenizer.bin") + "' -i 'out/data/x_train_*.bin' -x 1\""),
                   {"-i out/data/x_train_*.bin (out/data/x_train_000000.bin) is inside out, the default "
                    "--output-dir, whose previous run this run would move aside"});
    std::filesystem::remove_all(cwd + "/out/data");
    // round 32: ... through a link inside out too (out/linked -> elsewhere): the link moves
    write_project_shard(c.dir.file("scratch"), 6000, 'b');
    ASSERT_EQ(::symlink(c.dir.file("scratch/data").c_str(), (cwd + "/out/linked").c_str()), 0);
    expect_refused(run("sh -c \"cd '" + cwd + "' && " + train_gpt_binary() +
                       " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
                       c.dir.file("tokenizer.bin") + "' -i 'out/linked/x_train_*.bin' -x 1\""),
                   {"-i out/linked/x_train_*.bin (out/linked/x_train_000000.bin) is inside out"});
    std::filesystem::remove(cwd + "/out/linked");
    const CommandResult redirected = run(c.train_gpt_in(cwd, "-x 1 > out/train.log 2>&1"));
    EXPECT_EQ(redirected.rc, 1);
    EXPECT_CONTAINS(
        read_text(cwd + "/out/train.log"),
        "error: stdout, redirected to " + std::filesystem::canonical(cwd).string() + "/out/train.log, is inside out");
    for (const auto& e : std::filesystem::directory_iterator(cwd))
        EXPECT_EQ(e.path().filename().string().rfind("out.previous-", 0), std::string::npos) << e.path();
    // round 32: nor with another run's directory inside it that holds its checkpoints, live or
    // not (a job waiting to be requeued with -o out/d48 found none, and started over)
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 -o out/d48")).rc, 0);
    expect_refused(run(c.train_gpt_in(cwd, "-x 1")),
                   {"out holds a previous run, which this run would move aside, and another run's directory, "
                    "out/d48, with its checkpoint out/d48/checkpoints/step_00000002"});
    std::filesystem::remove_all(cwd + "/out/d48");
    // round 36: ... its checkpoints kept elsewhere (moved along, its log was parted from them), or
    // another run's --checkpoint-dir out/checkpoints, its -o elsewhere (taken as out's own by name)
    const std::string job_ck = c.dir.file("job_ck"), job_out = c.dir.file("job_out");
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 -o out/job --checkpoint-dir '" + job_ck + "'")).rc, 0);
    expect_refused(run(c.train_gpt_in(cwd, "-x 1")), {"and another run's directory, out/job, with its checkpoint " +
                                                      std::filesystem::canonical(job_ck).string() + "/step_00000002"});
    std::filesystem::remove_all(cwd + "/out/job");
    ASSERT_EQ(
        run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 -o '" + job_out + "' --checkpoint-dir out/checkpoints")).rc,
        0);
    expect_refused(run(c.train_gpt_in(cwd, "-x 1")),
                   {"and another run's directory, out/checkpoints, with its checkpoint out/checkpoints/step_00000002"});
    std::filesystem::remove_all(cwd + "/out/checkpoints");
    // round 37: ... another run's --checkpoint-dir out itself; and newer saves into out/checkpoints
    // by a resume of out's run whose log is elsewhere (an earlier save there made them out's own)
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 -o '" + job_out + "2' --checkpoint-dir out")).rc, 0);
    expect_refused(run(c.train_gpt_in(cwd, "-x 1")),
                   {"out holds a previous run, which this run would move aside, and checkpoints its log does not "
                    "know, another run's (out/step_00000002; its --checkpoint-dir out)"});
    std::filesystem::remove_all(cwd + "/out/step_00000002");
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 --overwrite-output")).rc, 0);
    const CommandResult elsewhere_log = run(c.train_gpt_in(
        cwd, "--resume -x 4 --checkpoint-every 2 -o '" + job_out + "3' --checkpoint-dir out/checkpoints"));
    ASSERT_EQ(elsewhere_log.rc, 0) << elsewhere_log.output;
    expect_refused(run(c.train_gpt_in(cwd, "-x 1")),
                   {"and another run's directory, out/checkpoints, with its checkpoint out/checkpoints/step_00000004"});
    std::filesystem::remove_all(cwd + "/out/checkpoints");
    // ... nor where its own run kept its checkpoints elsewhere: its log would be parted from them
    const std::string elsewhere = c.dir.file("ck");
    ASSERT_EQ(
        run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 --overwrite-output --checkpoint-dir '" + elsewhere + "'"))
            .rc,
        0);
    expect_refused(run(c.train_gpt_in(cwd, "-x 1")),
                   {"out holds a previous run, which this run would move aside, whose checkpoints are elsewhere (" +
                    std::filesystem::canonical(c.dir.path).string() + "/ck/step_00000002)"});
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 1 --overwrite-output")).rc, 0);   // out's run is this one's now
    // round 33: ... but a copy of a project is no such case: its log names the original's
    // checkpoints, under the -o it records (the copy's default run was refused)
    const std::string p1 = c.dir.file("proj1"), p2 = c.dir.file("proj2");
    make_dirs(p1);
    ASSERT_EQ(run(c.train_gpt_in(p1, "-x 2 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("cp -a '" + p1 + "' '" + p2 + "'").rc, 0);
    const CommandResult in_copy = run(c.train_gpt_in(p2, "-x 1"));
    ASSERT_EQ(in_copy.rc, 0) << in_copy.output;
    EXPECT_CONTAINS(in_copy.output, "notice: out held a previous run; it is now out.previous-");
    // round 31: links back up (out/l1 -> .) made the walk exponential (six: three minutes); a
    // directory it cannot list is not moved unlooked-at
    for (int k = 0; k < 8; k++)
        ASSERT_EQ(::symlink(".", (cwd + "/out/l" + std::to_string(k)).c_str()), 0);
    const CommandResult linked = run(c.train_gpt_in(cwd, "-x 1 -o linked"));
    ASSERT_EQ(linked.rc, 0) << linked.output;
    const CommandResult looped = run(c.train_gpt_in(cwd, "-x 1"));
    ASSERT_EQ(looped.rc, 0) << looped.output;
    EXPECT_LT(looped.seconds, linked.seconds + 30) << "the walk of out, next to a run that walks nothing";
    EXPECT_CONTAINS(looped.output, "notice: out held a previous run; it is now out.previous-");
    const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    const std::string mine = c.dir.file("mine");
    make_dirs(mine + "/out/x");
    ASSERT_EQ(run("chmod -R 0777 '" + c.dir.path + "' && chown -R 65534:65534 '" + mine +
                  "' 2>/dev/null; chmod 0311 '" + mine + "/out/x'")
                  .rc,
              0);
    write_text(mine + "/out/log.jsonl", "");   // a previous run's
    expect_refused(run(as_user + c.train_gpt_in(mine, "-x 1")),
                   {"out holds a previous run, which this run would move aside, but out/x cannot be listed "
                    "(Permission denied), so a live run inside it could be moved from under it"});
    ::chmod((mine + "/out/x").c_str(), 0755);
}

// Round 34: a job started with --auto-resume (sbatch scripts/slurm_train.sbatch without -o),
// preempted (SIGUSR1, exit 75) and waiting to be requeued in the default out, was moved aside by a
// plain run there; the requeue then found no checkpoint and started over, or resumed the plain
// run's checkpoint as its own (the flags agreed). Such a job's out stays until it has finished.
TEST(Faults, AJobWaitingToBeRequeuedInTheDefaultOutIsNotMovedAside) {
    Corpus c;
    const std::string cwd = c.dir.file("cwd");
    make_dirs(cwd);
    // `flags` run in cwd, stopped by SIGUSR1 (exit 75) after a few steps, with a checkpoint
    auto preempted = [&](const std::string& flags) {
        std::string line = c.train_gpt_in(cwd, flags + " -x 100000 --checkpoint-every 50000");
        line.replace(line.find("&& "), 3, "&& exec ");   // job.pid: the run itself
        const int steps = last_step(cwd + "/out/log.jsonl");
        Background job(line, c.dir.file("job.txt"));
        EXPECT_TRUE(wait_until([&] { return last_step(cwd + "/out/log.jsonl") >= steps + 2; })) << job.output();
        kill(job.pid, SIGUSR1);
        EXPECT_EQ(job.wait(300), 75) << job.output();
    };
    auto refused = [&](const std::string& checkpoints) {
        const std::vector<int64_t> saved = list_checkpoints(cwd + "/" + checkpoints);
        ASSERT_FALSE(saved.empty());
        const auto before = directory_snapshot(cwd);
        expect_refused(
            run(c.train_gpt_in(cwd, "-x 1")),
            {"out holds a run started with --auto-resume that has not finished (its newest checkpoint: ",
             format("%s/step_%08lld), a job waiting to be requeued", checkpoints.c_str(), (long long)saved.back()),
             "Give this run its own --output-dir (-o)"});
        EXPECT_EQ(directory_snapshot(cwd), before) << "nothing moved";
    };
    preempted("--auto-resume");
    refused("out/checkpoints");
    // ... and once resumed by hand, and preempted again: a job still (round 35: config.json said
    // only the last start's flags, and it was moved)
    preempted("--resume");
    refused("out/checkpoints");
    // the requeue goes on from the job's checkpoint, to its end; then a plain run moves it aside
    const int64_t saved = list_checkpoints(cwd + "/out/checkpoints").back();
    const CommandResult requeued =
        run(c.train_gpt_in(cwd, format("--auto-resume -x %lld --checkpoint-every 50000", (long long)saved + 2)));
    ASSERT_EQ(requeued.rc, 0) << requeued.output;
    EXPECT_CONTAINS(requeued.output, format("resuming from out/checkpoints/step_%08lld", (long long)saved));
    CommandResult plain = run(c.train_gpt_in(cwd, "-x 1"));
    ASSERT_EQ(plain.rc, 0) << plain.output;
    EXPECT_CONTAINS(plain.output, "notice: out held a previous run; it is now out.previous-");
    // a job whose checkpoints are inside out by another name (round 35: only out/checkpoints was
    // looked in)
    std::filesystem::remove_all(cwd);
    make_dirs(cwd);
    preempted("--auto-resume --checkpoint-dir out/ckpt");
    refused("out/ckpt");
    std::filesystem::remove_all(cwd);
    make_dirs(cwd);
    preempted("--auto-resume --checkpoint-dir out");
    refused("out");
}

// Round 34 (lows): the previous run's own checkpoints, kept in out by another name (its
// --checkpoint-dir out/ckpt) or through a link inside out (out/checkpoints -> a bigger disk),
// stopped the move-aside as "another run's directory" or "checkpoints elsewhere": they move with
// its log, and so the run goes on. An out that is a mount point cannot move: said so, with -o.
TEST(Faults, TheDefaultOutMovesAsideWithItsOwnCheckpointsWhereverTheyLie) {
    Corpus c;
    const std::string cwd = c.dir.file("cwd"), scratch = c.dir.file("scratch");
    make_dirs(cwd);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2 --checkpoint-dir out/ckpt")).rc, 0);
    CommandResult again = run(c.train_gpt_in(cwd, "-x 1"));
    ASSERT_EQ(again.rc, 0) << again.output;
    EXPECT_CONTAINS(again.output, "notice: out held a previous run; it is now out.previous-");
    make_dirs(scratch);
    std::filesystem::remove_all(cwd);
    make_dirs(cwd + "/out");
    ASSERT_EQ(::symlink(scratch.c_str(), (cwd + "/out/checkpoints").c_str()), 0);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(list_checkpoints(scratch), (std::vector<int64_t>{2}));
    again = run(c.train_gpt_in(cwd, "-x 1"));
    ASSERT_EQ(again.rc, 0) << again.output;
    EXPECT_CONTAINS(again.output, "notice: out held a previous run; it is now out.previous-");
    EXPECT_EQ(list_checkpoints(scratch), (std::vector<int64_t>{2}));
    // a crash between a save and its log record (killed while pruning, say): the checkpoint, of the
    // log's run and at the step its log ends at, is its own (round 38: refused as another run's)
    std::filesystem::remove_all(cwd);
    make_dirs(cwd);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 --checkpoint-every 2")).rc, 0);
    std::string kept;
    for (const auto& record : log_records(cwd + "/out/log.jsonl"))
        if (record["type"] != "checkpoint" && record["type"] != "summary") kept += record.dump() + "\n";
    write_text(cwd + "/out/log.jsonl", kept);
    again = run(c.train_gpt_in(cwd, "-x 1"));
    ASSERT_EQ(again.rc, 0) << again.output;
    EXPECT_CONTAINS(again.output, "notice: out held a previous run; it is now out.previous-");
    // out a mount point (a container's volume), in a mount namespace of its own
    std::filesystem::remove_all(cwd);
    make_dirs(cwd + "/out");
    make_dirs(cwd + "/volume");
    write_text(c.dir.file("mounted.sh"), "mount --bind '" + cwd + "/volume' '" + cwd + "/out' || exit 99\n" +
                                             c.train_gpt_in(cwd, "-x 1 > /dev/null") + " || exit 98\necho second\n" +
                                             c.train_gpt_in(cwd, "-x 1") + "\n");
    const CommandResult mounted = run("unshare -m sh '" + c.dir.file("mounted.sh") + "'");
    if (mounted.output.find("second") == std::string::npos)
        GTEST_SKIP() << "this machine does not allow a bind mount in a mount namespace: " << mounted.output;
    expect_refused(mounted, {"cannot move the previous run in out to out.previous-",
                             "Device or resource busy (out is a mount point, which cannot be moved): give this run "
                             "its own --output-dir (-o)"});
}

// Extending a finished run with a larger -x stretches its schedule: the learning rate it resumes
// at is raised, and the run says so, with the flags that keep the rate it ended with (which then
// resume without a notice). Before: the rate rose from 1e-4 to 3.25e-4 silently. Another --lr
// is said as such.
TEST(Faults, ExtendingAFinishedRunSaysHowTheLearningRateChanges) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 6 --checkpoint-every 6 -l 1e-3")).rc, 0);
    ASSERT_EQ(run("cp -a '" + out + "' '" + c.dir.file("copy") + "'").rc, 0);
    ASSERT_EQ(run("cp -a '" + out + "' '" + c.dir.file("lr") + "'").rc, 0);
    ASSERT_EQ(run("cp -a '" + out + "' '" + c.dir.file("warm") + "'").rc, 0);
    // a run ten times longer: its warmup (a sixth of -x) covers the step again, and is named
    CommandResult warm = run(train_gpt_binary() + " --resume -o '" + c.dir.file("warm") + "' -x 60");
    ASSERT_EQ(warm.rc, 0) << warm.output;
    EXPECT_CONTAINS(warm.output,
                    "notice: the learning-rate schedule now runs to step 60 (the checkpoint's run: 6), so the learning "
                    "rate at step 7 is 0.0007, raised from the 0.0001 of the checkpoint's schedule (the step is back "
                    "in the warmup, which now runs to step 10)");
    // only --lr changed (the README's "resume with other settings"): said so, and the new rate is
    // not advised away (round 34: "now runs to step 6 (the checkpoint's run: 6)", then the old --lr)
    CommandResult r = run(train_gpt_binary() + " --resume -o '" + c.dir.file("lr") + "' -l 3e-3");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output,
                    "notice: the learning-rate schedule changed: --lr 0.003 (the checkpoint's run: 0.001), so the "
                    "learning rate at step 7 is 0.0003, raised from the 0.0001 of the checkpoint's schedule\n");
    r = run(train_gpt_binary() + " --resume -o '" + out + "' -x 9");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output,
                    "notice: the learning-rate schedule now runs to step 9 (the checkpoint's run: 6), so the "
                    "learning rate at step 7 is 0.000325, raised from the 0.0001 of the checkpoint's schedule");
    EXPECT_CONTAINS(r.output, "add --lr-schedule constant --lr 0.0001 --warmup-steps 0");
    r = run(train_gpt_binary() + " --resume -o '" + c.dir.file("copy") +
            "' -x 9 --lr-schedule constant --lr 0.0001 --warmup-steps 0");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_EQ(r.output.find("learning-rate schedule now runs"), std::string::npos) << r.output;
    EXPECT_CONTAINS(r.output, "| lr 1.00e-04 |");
}

// ---- 10. what a restart may replace ---------------------------------------------------------------

// --auto-resume that finds no checkpoint starts fresh over the log of a start killed before its
// first checkpoint, but never over the log of a run that saved checkpoints (here into another
// --checkpoint-dir; or since moved or deleted) or finished (-n 0): before, both were replaced
// with a notice, exit 0, without --overwrite-output.
TEST(Faults, AutoResumeNeverReplacesTheLogOfARunThatSavedOrFinished) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 4 --checkpoint-every 2")).rc, 0);
    const auto saved = directory_snapshot(out);
    expect_refused(run(c.train_gpt(out, "-x 4 --checkpoint-every 2 --auto-resume --checkpoint-dir '" +
                                            c.dir.file("elsewhere") + "'")),
                   {"--auto-resume found no checkpoint in " + c.dir.file("elsewhere"),
                    "saved checkpoints (its newest: " + out + "/checkpoints/step_00000004)", "--overwrite-output"});
    EXPECT_EQ(directory_snapshot(out), saved) << "nothing replaced";
    EXPECT_FALSE(file_exists(c.dir.file("elsewhere")));
    const std::string finished = c.dir.file("finished");
    ASSERT_EQ(run(c.train_gpt(finished, "-x 2")).rc, 0);
    const auto done = directory_snapshot(finished);
    const CommandResult refused = run(c.train_gpt(finished, "-x 2 --auto-resume"));
    expect_refused(refused, {"finished (it logged its summary)"});
    // round 24: not after a notice that it starts a fresh run
    EXPECT_EQ(refused.output.find("starting a fresh run"), std::string::npos) << refused.output;
    EXPECT_EQ(directory_snapshot(finished), done);
    const CommandResult again = run(c.train_gpt(finished, "-x 2 --auto-resume --overwrite-output"));
    EXPECT_EQ(again.rc, 0) << again.output;
}

// --resume into an --output-dir that holds another run's log is refused (before: that log was cut
// back to the checkpoint's step and the two runs' records mixed, exit 0); a run directory that was
// moved, whose log records the checkpoint's save, resumes.
TEST(Faults, ResumingIntoAnotherRunsOutputDirectoryIsRefused) {
    Corpus c;
    const std::string a = c.dir.file("a"), b = c.dir.file("b"), ck = c.dir.file("ck");
    ASSERT_EQ(run(c.train_gpt(a, "-x 2 --checkpoint-every 2 --checkpoint-dir '" + ck + "'")).rc, 0);
    ASSERT_EQ(run(c.train_gpt(b, "-x 6 --seed 7")).rc, 0);
    const auto before = directory_snapshot(b);
    expect_refused(run(c.train_gpt(b, "-x 4 --resume --checkpoint-dir '" + ck + "'")),
                   {"--output-dir " + b + " holds the log.jsonl of another run", "the checkpoint's run wrote to " + a,
                    "-o " + a, "--overwrite-output"});
    EXPECT_EQ(directory_snapshot(b), before) << "the other run's log and config untouched";
    ASSERT_EQ(std::rename(a.c_str(), c.dir.file("a_moved").c_str()), 0);
    const CommandResult moved = run(c.train_gpt(c.dir.file("a_moved"), "-x 4 --resume --checkpoint-dir '" + ck + "'"));
    ASSERT_EQ(moved.rc, 0) << moved.output;
    EXPECT_EQ(last_step(c.dir.file("a_moved/log.jsonl")), 4);

    // another run that saved checkpoints at the same step numbers (before: its log was taken for
    // the checkpoint's, since it records a save of step 2 too), and another run that replaced the
    // log in the checkpoint's own -o (before: not checked at all, -o being the checkpoint's)
    const std::string ck2 = c.dir.file("ck2"), d = c.dir.file("d");
    ASSERT_EQ(run(c.train_gpt(d, "-x 6 --checkpoint-every 2 --seed 9 --checkpoint-dir '" + ck2 + "'")).rc, 0);
    const auto d_before = directory_snapshot(d);
    expect_refused(run(c.train_gpt(d, "-x 8 --resume --checkpoint-dir '" + ck + "'")),
                   {"--output-dir " + d + " holds the log.jsonl of another run"});
    EXPECT_EQ(directory_snapshot(d), d_before);
    const std::string shared = c.dir.file("shared"), ca = c.dir.file("ca"), cb = c.dir.file("cb");
    ASSERT_EQ(run(c.train_gpt(shared, "-x 2 --checkpoint-every 2 --checkpoint-dir '" + ca + "'")).rc, 0);
    ASSERT_EQ(
        run(c.train_gpt(shared, "-x 2 --checkpoint-every 2 --overwrite-output --seed 5 --checkpoint-dir '" + cb + "'"))
            .rc,
        0);
    const auto shared_before = directory_snapshot(shared);
    expect_refused(run(c.train_gpt(shared, "-x 4 --resume --checkpoint-dir '" + ca + "'")),
                   {"--output-dir " + shared + " holds the log.jsonl of another run"});
    EXPECT_EQ(directory_snapshot(shared), shared_before);
}

// Branching a run from an earlier checkpoint (its step directory copied into a checkpoint directory
// of its own) into the run's own -o is refused: the log records the later saves it would cut
// (before: the original run's log lost its steps past the checkpoint and its summary, exit 0). With
// a new -o the branch runs.
TEST(Faults, ABranchFromAnEarlierCheckpointNeedsItsOwnOutputDirectory) {
    Corpus c;
    const std::string r = c.dir.file("r"), branch = c.dir.file("branch_ck");
    ASSERT_EQ(run(c.train_gpt(r, "-x 8 --checkpoint-every 2")).rc, 0);
    make_dirs(branch);
    ASSERT_EQ(run("cp -r '" + r + "/checkpoints/step_00000004' '" + branch + "/'").rc, 0);
    const auto before = directory_snapshot(r);
    expect_refused(run(train_gpt_binary() + " --resume --checkpoint-dir '" + branch + "' -l 1e-3"),
                   {"--output-dir " + r + ": its log.jsonl records a later save of this run",
                    r + "/checkpoints/step_00000008", "give the branch a new --output-dir"});
    EXPECT_EQ(directory_snapshot(r), before) << "the original run untouched";
    const CommandResult ok = run(train_gpt_binary() + " --resume --checkpoint-dir '" + branch + "' -l 1e-3 -o '" +
                                 c.dir.file("branch_out") + "'");
    ASSERT_EQ(ok.rc, 0) << ok.output;
    EXPECT_EQ(last_step(c.dir.file("branch_out/log.jsonl")), 8);
    EXPECT_EQ(last_step(r + "/log.jsonl"), 8);
}

// A resume that stretches the schedule suggests the checkpoint's learning rate to go on at (before:
// the old schedule's last rate, 10x too low for a run stopped mid-schedule).
TEST(Faults, TheLearningRateNoticeSuggestsTheCheckpointsRate) {
    Corpus c;
    const std::string out = c.dir.file("out"), ck = c.dir.file("ck");
    ASSERT_EQ(run(c.train_gpt(out, "-x 20 --checkpoint-every 5 --keep-checkpoints 4 -l 1e-3")).rc, 0);
    double lr_step6 = 0;   // the rate the checkpoint of step 5 goes on with: step 6's
    for (const auto& j : records_of(out + "/log.jsonl", "step"))
        if (j["step"] == 6) lr_step6 = j["lr"].get<double>();
    ASSERT_GT(lr_step6, 0);
    make_dirs(ck);
    ASSERT_EQ(run("cp -r '" + out + "/checkpoints/step_00000005' '" + ck + "/'").rc, 0);
    const CommandResult r =
        run(train_gpt_binary() + " --resume --checkpoint-dir '" + ck + "' -x 40 -o '" + c.dir.file("longer") + "'");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, format("add --lr-schedule constant --lr %.4g --warmup-steps 0", lr_step6));
}

// On 3 ranks, -m evaluates equal shares within one pass over the validation set and says how many
// (before: ceil(m / 3) each, past the set: -m 100 on a 52-batch set evaluated 54, -m 20 became 21).
TEST(Faults, ValidationOnThreeRanksCoversEqualSharesOfOnePass) {
    Corpus c;
    const std::string out = c.dir.file("out");
    const CommandResult r = run(c.mpirun(3, out, "-x 1 -v 1 -m 20 -j '" + c.dir.file("train_*.bin") + "'") + " 2>&1");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: -m 20: each evaluation covers 18 batches of 2x16, equal shares of the 3 ranks");
    EXPECT_CONTAINS(r.output, "warning: -i");
    for (const auto& v : records_of(out + "/log.jsonl", "val"))
        EXPECT_EQ(v["val_tokens"].get<int64_t>(), 18 * 2 * 16);
}

// A resume on another number of ranks with -d 0 changes the tokens per optimizer step: it says so
// and how to keep the checkpoint's (before: silently half the batch).
TEST(Faults, AResumeOnAnotherWorldSizeSaysTheBatchChanged) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.mpirun(2, out, "-x 2 --checkpoint-every 2 --zero 1")).rc, 0);
    const CommandResult r = run(c.train_gpt(out, "-x 3 --resume --checkpoint-every 0"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: an optimizer step now takes 32 tokens");
    EXPECT_CONTAINS(r.output, "the checkpoint's run took 64 on 2 rank(s)");
    EXPECT_CONTAINS(r.output, "give -d 64");
    const CommandResult kept = run(c.train_gpt(out, "-x 4 --resume -d 64"));
    ASSERT_EQ(kept.rc, 0) << kept.output;
    EXPECT_EQ(kept.output.find("an optimizer step now takes"), std::string::npos) << kept.output;
}

// Round 23: -m counts batches of B, so a resume with another -b (the same global batch on another
// number of ranks) evaluated other validation tokens, the val losses before and after it means over
// different sets, without a word. It says so, and the -m that keeps the checkpoint's.
TEST(Faults, AResumeWhoseEvaluationCoversOtherTokensSaysSo) {
    Corpus c;
    const std::string out = c.dir.file("out"), val = " -j '" + c.dir.file("train_*.bin") + "' -v 2";
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2 -m 4" + val)).rc, 0);
    // half the batch, twice the batches: the same 128 tokens, no notice
    const CommandResult kept = run(c.train_gpt(out, "-x 4 --resume -b 1 -d 32 -m 8" + val));
    ASSERT_EQ(kept.rc, 0) << kept.output;
    EXPECT_EQ(kept.output.find("an evaluation now covers"), std::string::npos) << kept.output;
    // twice the batch again, the same -m: twice the tokens
    const CommandResult r = run(c.train_gpt(out, "-x 6 --resume -b 2 -d 32 -m 8" + val));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output,
                    "notice: an evaluation now covers 8 batches of 2x16, 256 tokens of the validation set; the "
                    "checkpoint's run covered 8 batches of 1x16, 128 tokens. Val losses before and after this step "
                    "are means over other tokens. To keep the checkpoint's, give -m 4.");
    // ... but not where this run evaluates no val loss (round 44: -v 0, said anyway)
    const CommandResult none = run(c.train_gpt(out, "-x 8 --resume -b 1 -d 32 -m 8" + val + " -v 0"));
    ASSERT_EQ(none.rc, 0) << none.output;
    EXPECT_EQ(none.output.find("an evaluation now covers"), std::string::npos) << none.output;
}

// A signal during the validation at the start step, before any step, ends the run at once (as
// during the rest of the start-up); during training, the signal is said on stderr when it arrives.
// Before: the whole validation ran, then a step, and only then the run stopped, silently.
TEST(Faults, ASignalDuringTheFirstValidationEndsTheRunAtOnce) {
    Corpus c;
    Rng rng(3);
    std::vector<uint32_t> val(4000000);
    for (uint32_t& t : val)
        t = (uint32_t)rng.below(256);
    write_shard(c.dir.file("val_000000.bin"), val.data(), (int64_t)val.size(), 2);
    const std::string out = c.dir.file("out");
    Background job(c.train_gpt(out, "-x 4 -v 2 -m 1000000 -j '" + c.dir.file("val_*.bin") + "'"),
                   c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return file_exists(out + "/log.jsonl"); })) << job.output();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto signalled = std::chrono::steady_clock::now();
    kill(job.pid, SIGINT);
    EXPECT_EQ(job.wait(300), 128 + SIGINT) << job.output();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(), 2.0);
    EXPECT_TRUE(records_of(out + "/log.jsonl", "step").empty()) << "no step after the signal";

    const std::string mid = c.dir.file("mid");
    Background training(c.train_gpt(mid, "-x 100000"), c.dir.file("mid.txt"));
    ASSERT_TRUE(wait_until([&] { return last_step(mid + "/log.jsonl") >= 2; })) << training.output();
    kill(training.pid, SIGTERM);
    EXPECT_EQ(training.wait(300), 75) << training.output();
    EXPECT_CONTAINS(training.output(), "SIGTERM: stopping after this step");
}

// Round 16: a signal during the final evaluation (after the last step's checkpoint) was said
// ("stopping after this step") and then ignored: the evaluation, sample and summary ran on and the
// run exited 0, so a Slurm time limit cut it there and nothing requeued it. Now that evaluation runs
// to its end and the run stops with the last checkpoint (exit 75); the resume finishes the run,
// with the final val loss logged once.
TEST(Faults, ASignalDuringTheFinalEvaluationStopsWithTheLastCheckpoint) {
    Corpus c;
    Rng rng(5);
    std::vector<uint32_t> val(1000000);   // an evaluation of a second or two
    for (uint32_t& t : val)
        t = (uint32_t)rng.below(256);
    write_shard(c.dir.file("val_000000.bin"), val.data(), (int64_t)val.size(), 2);
    const std::string out = c.dir.file("out");
    const std::string command =
        c.train_gpt(out, "-x 4 -v 4 -m 1000000 --checkpoint-every 4 -j '" + c.dir.file("val_*.bin") + "'");
    Background job(command, c.dir.file("job.txt"));
    ASSERT_TRUE(wait_until([&] { return file_exists(out + "/checkpoints/step_00000004"); })) << job.output();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));   // into the final evaluation
    kill(job.pid, SIGTERM);
    ASSERT_EQ(job.wait(300), 75) << job.output();
    EXPECT_CONTAINS(job.output(),
                    "stopped by SIGTERM during the final evaluation, after step 4 (the last); its "
                    "checkpoint " +
                        out + "/checkpoints/step_00000004 is written");
    const auto stops = records_of(out + "/log.jsonl", "stop");
    ASSERT_EQ(stops.size(), 1u);
    EXPECT_EQ(stops[0]["checkpoint"], out + "/checkpoints/step_00000004");
    EXPECT_TRUE(records_of(out + "/log.jsonl", "summary").empty()) << job.output();

    const CommandResult resumed = run(command + " --auto-resume");
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    ASSERT_EQ(records_of(out + "/log.jsonl", "summary").size(), 1u);
    int final_vals = 0;
    for (const auto& v : records_of(out + "/log.jsonl", "val"))
        final_vals += v["step"] == 4;
    EXPECT_EQ(final_vals, 1) << "the final val loss, logged once";
    EXPECT_EQ(records_of(out + "/log.jsonl", "step").size(), 4u);
}

// Round 16: a live run whose checkpoint directory was moved (or deleted) re-created it at the old
// path and saved there, among the checkpoints of a new run started at that path, which held its
// lock; the live run's pruning then deleted them. Now the live run checks before each save that
// the path still names the lock file it holds, and stops, saying where its directory went.
TEST(Faults, ACheckpointDirMovedUnderALiveRunIsNeverWrittenAgain) {
    Corpus c;
    const std::string a = c.dir.file("a"), moved = c.dir.file("a_renamed");
    Background live(c.train_gpt(a, "-x 100000 --checkpoint-every 5000"), c.dir.file("live.txt"));
    // stopped at once after its first save (which has nothing to prune), long before its next
    ASSERT_TRUE(wait_until([&] { return file_exists(a + "/checkpoints/step_00005000/manifest.json"); }))
        << live.output();
    kill(live.pid, SIGSTOP);
    ASSERT_EQ(std::rename(a.c_str(), moved.c_str()), 0);
    // a new run in the freed name, with three checkpoints, while the first one is stopped
    const CommandResult fresh = run(c.train_gpt(a, "-x 6 --checkpoint-every 2 --seed 7"));
    ASSERT_EQ(fresh.rc, 0) << fresh.output;
    const auto fresh_files = directory_snapshot(a);
    kill(live.pid, SIGCONT);
    ASSERT_EQ(live.wait(300), 1) << live.output();
    EXPECT_CONTAINS(live.output(), "error: --checkpoint-dir " + a +
                                       "/checkpoints was moved or deleted while this run "
                                       "was live (it is now " +
                                       moved + "/checkpoints): the checkpoint of step 10000 is not written");
    EXPECT_EQ(directory_snapshot(a), fresh_files) << "the new run's files, untouched";
    // the live run's checkpoints are where its directory went, and resume from there
    EXPECT_TRUE(file_exists(moved + "/checkpoints/step_00005000"));
    EXPECT_FALSE(file_exists(moved + "/checkpoints/step_00010000"));
    const CommandResult resumed = run(c.train_gpt(moved, "-x 5002 --checkpoint-every 5000 --resume"));
    EXPECT_EQ(resumed.rc, 0) << resumed.output;
}

// A live run into `a` (a checkpoint at step 5000 of 10000), stopped after that save while its lock
// file `lock` is deleted and, where `another_came`, another run's lock file put in its place; then
// `check` of the run going on.
void delete_a_live_runs_lock(const Corpus& c, const std::string& a, const std::string& lock, bool another_came,
                             const std::function<void(Background&)>& check) {
    Background live(c.train_gpt(a, "-x 10000 --checkpoint-every 5000"), c.dir.file("live.txt"));
    ASSERT_TRUE(wait_until([&] { return file_exists(a + "/checkpoints/step_00005000/manifest.json"); }))
        << live.output();
    kill(live.pid, SIGSTOP);
    ASSERT_EQ(std::remove(lock.c_str()), 0);
    if (another_came) write_text(lock, "pid 1 on elsewhere, started 2026-12-06 00:00:00 UTC: train_gpt\n");
    kill(live.pid, SIGCONT);
    check(live);
}

// Round 23: deleting only the lock file of a live run's checkpoint directory (a clean-up of lock
// files that look stale) stopped the run at its next save, saying the directory was deleted "and
// the checkpoints saved before went with it", the steps since the last save lost. The directory is
// where it was: the run locks it again and saves; only where another run has made a lock file there
// since does it stop, and says what happened.
TEST(Faults, ALiveRunWhoseLockFileWasDeletedLocksItAgain) {
    Corpus c;
    for (const bool another_came : {false, true}) {
        SCOPED_TRACE(another_came ? "another run's lock file" : "no lock file");
        const std::string a = c.dir.file(another_came ? "b" : "a"), lock = a + "/checkpoints/train_gpt.lock";
        delete_a_live_runs_lock(c, a, lock, another_came, [&](Background& live) {
            if (!another_came) {
                ASSERT_EQ(live.wait(300), 0) << live.output();
                EXPECT_CONTAINS(live.output(), "warning: " + lock +
                                                   " was deleted while this run was live (the directory is where it "
                                                   "was); this run locks it again and saves step 10000");
                EXPECT_TRUE(file_exists(a + "/checkpoints/step_00010000/manifest.json"));
                EXPECT_CONTAINS(read_text(lock), "pid ");
            } else {
                ASSERT_EQ(live.wait(300), 1) << live.output();
                EXPECT_CONTAINS(live.output(), "error: --checkpoint-dir " + a +
                                                   "/checkpoints was moved or deleted while this run was live (only "
                                                   "its lock file was deleted, and another run has made a new one "
                                                   "there since): the checkpoint of step 10000 is not written");
                EXPECT_CONTAINS(live.output(), "The checkpoints saved before are still there");
                EXPECT_FALSE(file_exists(a + "/checkpoints/step_00010000"));
                EXPECT_CONTAINS(read_text(lock), "pid 1 on elsewhere");
            }
        });
        EXPECT_TRUE(file_exists(a + "/checkpoints/step_00005000/manifest.json"));
    }
}

// Round 25: the same for the output directory's lock: deleted under a live run, it was never
// taken again, so a second run took -o with --overwrite-output and replaced the live run's
// log.jsonl, which wrote on into the unlinked file and exited 0. The live run locks it again after
// its step; where another run's lock file stands there, it stops.
TEST(Faults, ALiveRunWhoseOutputLockWasDeletedLocksItAgain) {
    Corpus c;
    for (const bool another_came : {false, true}) {
        SCOPED_TRACE(another_came ? "another run's lock file" : "no lock file");
        const std::string a = c.dir.file(another_came ? "b" : "a"), lock = a + "/train_gpt.lock";
        delete_a_live_runs_lock(c, a, lock, another_came, [&](Background& live) {
            if (!another_came) {
                // taken again at once: a second run into -o is refused as the live one's
                ASSERT_TRUE(wait_until([&] {
                    return read_text(live.output_file).find(lock + " was deleted") != std::string::npos;
                })) << live.output();
                expect_refused(
                    run(c.train_gpt(a, "-x 5 --overwrite-output --checkpoint-dir '" + c.dir.file("c2") + "'")),
                    {a + " is in use by another run: pid " + std::to_string(live.pid)});
                ASSERT_EQ(live.wait(300), 0) << live.output();
                EXPECT_EQ(last_step(a + "/log.jsonl"), 10000);
            } else {
                ASSERT_EQ(live.wait(300), 1) << live.output();
                EXPECT_CONTAINS(live.output(), "error: --output-dir " + a +
                                                   ": only its lock file was deleted, and another run has made a new "
                                                   "one there since, so its log.jsonl may be that run's now");
                EXPECT_CONTAINS(read_text(lock), "pid 1 on elsewhere");
            }
        });
    }
}

// Round 16: the data position is a sample index, and a resume with a shorter -t (an accepted
// override) read sample p of the shorter cut, half-way back over tokens already trained on, without
// a word. The position now moves to the same token, and the notice says so.
TEST(Faults, AResumeWithAShorterSeqLenReadsOnFromTheSameToken) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 10 --checkpoint-every 10")).rc, 0);   // 20 samples of 16: token 320
    const CommandResult resumed = run(c.train_gpt(out, "-x 12 --checkpoint-every 12 --resume -t 8"));
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    EXPECT_CONTAINS(resumed.output,
                    "notice: --seq-len 8 (the checkpoint's run: 16): the data position, a sample "
                    "index, moves from sample 20 of 16-token samples to sample 40 of 8-token "
                    "samples, the same place in the token stream");
    const auto manifest = nlohmann::json::parse(read_text(out + "/checkpoints/step_00000012/manifest.json"));
    EXPECT_EQ(manifest["data_position"], 40 + 2 * 2) << "token 320, then two steps of 2 samples";
}

// Round 16 (A-D7): --init-from the checkpoint root of a live run, which pruned the newest
// checkpoint (--keep-checkpoints) while this run read it, failed saying a file "does not exist".
// It says what happened. The race made deterministic: the step directory found is removed before
// its weights are read.
TEST(Faults, AnInitFromCheckpointPrunedWhileItIsReadSaysSo) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    const ModelDir m = find_model_dir(out + "/checkpoints");
    std::filesystem::remove_all(m.dir);
    EXPECT_CONTAINS(error_of([&] { read_model_weights(m); }), "--init-from " + out +
                                                                  "/checkpoints: its newest checkpoint, " + m.dir +
                                                                  ", was removed while this run read it");
    // its tokenizer files, read before the weights (round 40: "cannot open .../merges.txt", or none)
    EXPECT_CONTAINS(error_of([&] { read_model_dir_tokenizer(m); }), ", was removed while this run read it");
}

// Round 17: a bit flipped in manifest.json (a data position 8 → 9, a learning rate) was resumed
// from silently: the manifest held the files' checksums but none of its own. It does now, and a
// manifest that does not match it is a damaged checkpoint.
TEST(Faults, AManifestAlteredAfterItWasWrittenIsADamagedCheckpoint) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 4 --checkpoint-every 2")).rc, 0);
    const std::string manifest = out + "/checkpoints/step_00000004/manifest.json";
    std::string text = read_text(manifest);
    const size_t at = text.find("\"data_position\": 8,");
    ASSERT_NE(at, std::string::npos) << text;
    text[at + std::string("\"data_position\": ").size()] ^= 1;   // '8' → '9'
    write_text(manifest, text);
    const CommandResult refused = run(c.train_gpt(out, "-x 6 --resume"));
    EXPECT_EQ(refused.rc, 1) << refused.output;
    EXPECT_CONTAINS(refused.output, manifest + ": checksum mismatch: its checksum is XXH3 ");
    EXPECT_CONTAINS(refused.output, "(the manifest was altered or corrupted after it was written)");
    // round 18: "version": 1 beside the checksum (a version 1 never wrote one) is checked all the same
    std::string downgraded = text;
    downgraded.replace(downgraded.find("\"version\": 2"), 12, "\"version\": 1");
    write_text(manifest, downgraded);
    expect_refused(run(c.train_gpt(out, "-x 6 --resume")), {manifest + ": checksum mismatch: its checksum is XXH3 "});
    // without it, as a version 1 wrote it: read, and said to be unverifiable
    {
        auto j = nlohmann::ordered_json::parse(text);
        j.erase("manifest_xxh3");
        j["version"] = 1;
        j["data_position"] = 8;
        write_manifest_as_written(out + "/checkpoints/step_00000004", out + "/log.jsonl", j.dump(2));
        const CommandResult v1 = run(c.train_gpt(out, "-x 6 --resume -n 0"));
        ASSERT_EQ(v1.rc, 0) << v1.output;
        EXPECT_CONTAINS(v1.output, "/manifest.json is of version 1, written before manifests held their own checksum");
        // round 19 (A3): --init-from it says so too (it took the manifest's values silently)
        const CommandResult init = run(train_gpt_binary() + " --device cpu -x 0 -g 2 -j '' --threads 1 --init-from '" +
                                       out + "/checkpoints/step_00000004' -o '" + c.dir.file("eval") + "'");
        ASSERT_EQ(init.rc, 0) << init.output;
        EXPECT_CONTAINS(init.output, "notice: " + out + "/checkpoints/step_00000004/manifest.json is of version 1");
        write_text(manifest, text);
    }
    // a .damaged of that step from before: the warning names the one it is kept as (round 17: it
    // said .damaged, then renamed it .damaged.2)
    make_dirs(out + "/checkpoints/step_00000004.damaged");
    const CommandResult intact = run(c.train_gpt(out, "-x 6 --resume --resume-from-intact"));
    ASSERT_EQ(intact.rc, 0) << intact.output;
    EXPECT_CONTAINS(intact.output, "resuming from " + out + "/checkpoints/step_00000002");
    EXPECT_CONTAINS(intact.output, "will be kept as " + out + "/checkpoints/step_00000004.damaged.2\n");
    EXPECT_TRUE(file_exists(out + "/checkpoints/step_00000004.damaged.2/manifest.json"));
}

// Round 18 (HIGH): a --checkpoint-dir that is the parent of -o, both new, was never locked (the
// output's make_dirs created it between the passes that lock existing, then new, directories), so
// a second run resumed and saved among the live run's checkpoints. Both are locked now.
TEST(Faults, ACheckpointDirThatIsTheOutputDirsParentIsLockedToo) {
    Corpus c;
    const std::string ck = c.dir.file("ck");
    const CommandResult first =
        run(c.train_gpt(ck + "/inner", "-x 2 --checkpoint-every 2 --checkpoint-dir '" + ck + "'"));
    ASSERT_EQ(first.rc, 0) << first.output;
    EXPECT_TRUE(file_exists(ck + "/train_gpt.lock")) << "the checkpoint dir's lock";
    EXPECT_TRUE(file_exists(ck + "/inner/train_gpt.lock")) << "the output dir's lock";
    // held: a second run there is refused while one holds it
    const CommandResult held = run("flock -n '" + ck + "/train_gpt.lock' " +
                                   c.train_gpt(c.dir.file("other"), "-x 4 --resume --checkpoint-dir '" + ck + "'"));
    expect_refused(held, {ck + " is in use by another run"});
}

// Round 18: -o and --checkpoint-dir naming one directory two ways (a symbolic link) were refused
// as "in use by another run", naming this run's own pid. It is locked once.
TEST(Faults, OneDirectoryUnderTwoNamesIsLockedOnce) {
    Corpus c;
    const std::string s = c.dir.file("s");
    make_dirs(s);
    ASSERT_EQ(::symlink(s.c_str(), c.dir.file("s_link").c_str()), 0);
    const CommandResult r =
        run(c.train_gpt(s, "-x 2 --checkpoint-every 2 --checkpoint-dir '" + c.dir.file("s_link") + "'"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_TRUE(file_exists(s + "/step_00000002/manifest.json"));
    // round 19 (HIGH): the link re-pointed under a live run, at another run's checkpoints: the saves
    // and the pruning, which go through the link, stop (before: they went on there and pruned that
    // run's checkpoints, the check looking at the -o name only)
    const std::string other = c.dir.file("other"), live_dir = c.dir.file("live"), link = c.dir.file("live_link");
    ASSERT_EQ(run(c.train_gpt(other, "-x 3 --checkpoint-every 1 --checkpoint-dir '" + other + "'")).rc, 0);
    const auto others = directory_snapshot(other);
    make_dirs(live_dir);
    ASSERT_EQ(::symlink(live_dir.c_str(), link.c_str()), 0);
    Background live(
        c.train_gpt(live_dir, "-x 100000 --checkpoint-every 5000 --keep-checkpoints 1 --checkpoint-dir '" + link + "'"),
        c.dir.file("live.txt"));
    ASSERT_TRUE(wait_until([&] { return file_exists(live_dir + "/step_00005000/manifest.json"); })) << live.output();
    kill(live.pid, SIGSTOP);
    ASSERT_EQ(std::remove(link.c_str()), 0);
    ASSERT_EQ(::symlink(other.c_str(), link.c_str()), 0);
    kill(live.pid, SIGCONT);
    ASSERT_EQ(live.wait(300), 1) << live.output();
    EXPECT_CONTAINS(live.output(), "error: --checkpoint-dir " + link + " was moved or deleted while this run was live");
    EXPECT_EQ(directory_snapshot(other), others) << "the other run's checkpoints, untouched";
}

// Round 21: a train_gpt.lock that is a symbolic link (cp -rs makes them) was followed: its target was
// emptied and the holder's line written into it. Refused, the target untouched.
TEST(Faults, ALockFileThatIsALinkIsNeverFollowed) {
    Corpus c;
    const std::string out = c.dir.file("out"), victim = c.dir.file("victim.txt");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    write_text(victim, "keep me");
    ASSERT_EQ(std::remove((out + "/train_gpt.lock").c_str()), 0);
    ASSERT_EQ(::symlink(victim.c_str(), (out + "/train_gpt.lock").c_str()), 0);
    expect_refused(run(c.train_gpt(out, "-x 4 --resume")), {out + "/train_gpt.lock is a symbolic link"});
    EXPECT_EQ(read_text(victim), "keep me");
}

// Round 23 (HIGH): a fresh log in a copy made of links (cp -rs, cp -al) truncated the log it
// linked to, the original run's, and wrote the copy's records into it (the original's resume was
// then refused as another run's). A fresh log replaces what stands at its path.
TEST(Faults, AFreshLogInALinkedCopyLeavesTheOriginalsLogAlone) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 4 --checkpoint-every 2")).rc, 0);
    const std::string originals_log = read_text(out + "/log.jsonl");
    for (const char* how : {"-rs", "-al"}) {
        const std::string copy = c.dir.file(std::string("copy") + how);
        ASSERT_EQ(run(std::string("cp ") + how + " '" + out + "' '" + copy + "' && rm -f '" + copy +
                      "/train_gpt.lock' '" + copy + "/checkpoints/train_gpt.lock'")
                      .rc,
                  0);
        const CommandResult fresh = run(c.train_gpt(copy, "-x 2 --seed 5 --overwrite-output"));
        ASSERT_EQ(fresh.rc, 0) << fresh.output;
        EXPECT_EQ(read_text(out + "/log.jsonl"), originals_log) << how;
        EXPECT_CONTAINS(read_text(copy + "/log.jsonl"), copy);   // the copy's own start record
    }
    const CommandResult resumed = run(c.train_gpt(out, "-x 6 --resume"));
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    EXPECT_EQ(last_step(out + "/log.jsonl"), 6);
}

// Round 17 (HIGH): a checkpoint records its run's paths as typed, and a resume started in another
// directory read its relative -i from there: other data, silently. They are read from where the
// checkpoint's run was started, with a notice; -o too, so its log goes on in the run's directory.
TEST(Faults, AResumeFromAnotherDirectoryReadsTheRunsRelativePathsFromItsOwn) {
    Corpus c;
    const std::string first = c.dir.file("rel/a/b"), second = c.dir.file("rel/c");
    make_dirs(first);
    make_dirs(second);
    make_dirs(c.dir.file("rel/data"));
    make_dirs(c.dir.file("data"));
    const std::vector<uint32_t> ours(3000, 'a'), decoy(5000, 'b');
    write_shard(c.dir.file("rel/data/x_train_000000.bin"), ours.data(), (int64_t)ours.size(), 2);
    write_shard(c.dir.file("data/x_train_000000.bin"), decoy.data(), (int64_t)decoy.size(),
                2);   // ../../data from rel/c
    const std::string flags = " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
                              c.dir.file("tokenizer.bin") + "' ";
    auto in = [&](const std::string& cwd, const std::string& args) {
        return run("sh -c \"cd '" + cwd + "' && " + train_gpt_binary() + flags + args + "\"");
    };
    ASSERT_EQ(in(first, "-i '../../data/x_train_*.bin' -o out -x 2 --checkpoint-every 2").rc, 0);
    const CommandResult resumed = in(second, "--resume --checkpoint-dir ../a/b/out/checkpoints -x 4");
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    EXPECT_CONTAINS(resumed.output,
                    "notice: --train-data ../../data/x_train_*.bin is relative to where the run "
                    "was given it, " +
                        first + ": read as " + first + "/../../data/x_train_*.bin");
    EXPECT_CONTAINS(resumed.output, "train: 3000 tokens in 1 shard(s)");
    EXPECT_EQ(resumed.output.find("training data is not"), std::string::npos) << resumed.output;
    EXPECT_EQ(resumed.output.find("--checkpoint-dir ../a/b/out/checkpoints is relative"), std::string::npos)
        << "a flag this command line gives is not the checkpoint's (round 18)";
    EXPECT_FALSE(file_exists(second + "/out")) << "the run's -o is its own directory's out";
    EXPECT_CONTAINS(read_text(first + "/out/log.jsonl"), "\"step\":4");
    // round 18: that resume's checkpoint keeps the text and its directory (before: the path made
    // absolute), so the tree moved afterwards resumes as typed from the new place
    const std::string moved = c.dir.file("moved");
    ASSERT_EQ(std::rename(c.dir.file("rel").c_str(), moved.c_str()), 0);
    const CommandResult after_move = in(moved + "/a/b", "--resume -o out -x 6");
    ASSERT_EQ(after_move.rc, 0) << after_move.output;
    EXPECT_CONTAINS(after_move.output, "train: 3000 tokens in 1 shard(s)");
}

// Round 19 (A6): a run tree moved, and a new directory made at its old place: a resume from the moved
// tree read the restored -o from the old place (its recorded directory exists again), so the log
// went on in the other tree, and the run's own -o was refused afterwards as a branch. The -o of a
// run of the default layout follows its checkpoints: it is their parent, which holds the log.
TEST(Faults, AMovedRunTreeKeepsItsLogBesideItsCheckpoints) {
    Corpus c;
    const std::string tree = c.dir.file("P/a"), moved = c.dir.file("P/a3");
    make_dirs(tree);
    auto in = [&](const std::string& cwd, const std::string& args) { return run(c.train_gpt_in(cwd, args)); };
    ASSERT_EQ(in(tree, "-o r -x 2 --checkpoint-every 2").rc, 0);
    ASSERT_EQ(std::rename(tree.c_str(), moved.c_str()), 0);
    make_dirs(tree);   // another tree at the old place
    const CommandResult resumed = in(moved, "--resume --checkpoint-dir r/checkpoints -x 4");
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    EXPECT_CONTAINS(resumed.output,
                    "the run's directory was moved or copied; its log goes on beside them, in " + moved + "/r\n");
    EXPECT_FALSE(file_exists(tree + "/r")) << "nothing written into the other tree";
    EXPECT_CONTAINS(read_text(moved + "/r/log.jsonl"), "\"step\":4");
    // and on from there with the run's -o as typed (it was refused as another run's branch)
    const CommandResult again = in(moved, "--resume -o r -x 6");
    ASSERT_EQ(again.rc, 0) << again.output;
    EXPECT_CONTAINS(read_text(moved + "/r/log.jsonl"), "\"step\":6");
    // from elsewhere, with the old place still standing: the checkpoint keeps -o as typed, with the
    // moved tree as its directory
    const CommandResult elsewhere = in(c.dir.path, "--resume --checkpoint-dir '" + moved + "/r/checkpoints' -x 8");
    ASSERT_EQ(elsewhere.rc, 0) << elsewhere.output;
    EXPECT_FALSE(file_exists(tree + "/r"));
    EXPECT_FALSE(file_exists(c.dir.file("r")));
    EXPECT_CONTAINS(read_text(moved + "/r/log.jsonl"), "\"step\":8");
}

// Round 20: the same for a run resumed before (its checkpoints record --checkpoint-dir
// out/checkpoints: the log stayed at the old place), with another run's log standing there (refused,
// with advice that replaced that run's log), and its relative -i, which is read from the moved
// directory where it exists there (it read the decoy shards at the old place); a copy of the tree
// resumes into the copy (it wrote its log into the original's directory).
TEST(Faults, ARequeuedRunFollowsItsMovedOrCopiedDirectory) {
    Corpus c;
    const std::string tree = c.dir.file("q/t"), moved = c.dir.file("q/m"), copy = c.dir.file("q/c");
    auto shards = [](const std::string& dir, size_t count, char token) { write_project_shard(dir, count, token); };
    auto in = [&](const std::string& cwd, const std::string& args) { return run(c.train_gpt_project_in(cwd, args)); };
    shards(tree, 3000, 'a');
    ASSERT_EQ(in(tree, "-i 'data/x_train_*.bin' -x 2 -n 2").rc, 0);
    ASSERT_EQ(in(tree, "--resume -x 4").rc, 0);
    ASSERT_EQ(std::rename(tree.c_str(), moved.c_str()), 0);
    shards(tree, 5000, 'b');   // another project at the old place, with a run of its own
    ASSERT_EQ(in(tree, "-i 'data/x_train_*.bin' -x 2 -n 2").rc, 0);
    const std::string others_log = read_text(tree + "/out/log.jsonl");
    const CommandResult requeued = in(moved, "-i 'data/x_train_*.bin' --auto-resume -x 6 -n 2");   // its job line
    ASSERT_EQ(requeued.rc, 0) << requeued.output;
    EXPECT_CONTAINS(requeued.output, "its log goes on beside them, in " + moved + "/out\n");
    EXPECT_CONTAINS(requeued.output, "train: 3000 tokens in 1 shard(s)");
    EXPECT_CONTAINS(read_text(moved + "/out/log.jsonl"), "\"step\":6");
    EXPECT_EQ(read_text(tree + "/out/log.jsonl"), others_log) << "the other run's log, untouched";
    // a copy resumes into itself (reading the data where the original's directory holds it, round
    // 21), and the original goes on as well
    ASSERT_EQ(run("cp -r '" + moved + "' '" + copy + "'").rc, 0);
    const std::string originals_log = read_text(moved + "/out/log.jsonl");
    const CommandResult copied = in(copy, "--resume -x 8");
    ASSERT_EQ(copied.rc, 0) << copied.output;
    EXPECT_CONTAINS(read_text(copy + "/out/log.jsonl"), "\"step\":8");
    EXPECT_EQ(read_text(moved + "/out/log.jsonl"), originals_log);
    const CommandResult original = in(moved, "--resume -x 8");
    ASSERT_EQ(original.rc, 0) << original.output;
    EXPECT_CONTAINS(read_text(moved + "/out/log.jsonl"), "\"step\":8");
    // round 20 (HIGH): moved again, its old place gone, resumed from another directory that holds
    // data by that relative name: the run's own data, from where its directory is now (it read the
    // other directory's, silently)
    const std::string again = c.dir.file("q/again");
    ASSERT_EQ(std::rename(moved.c_str(), again.c_str()), 0);
    shards(c.dir.path, 5000, 'b');
    const CommandResult elsewhere = in(c.dir.path, "--resume --checkpoint-dir '" + again + "/out/checkpoints' -x 10");
    ASSERT_EQ(elsewhere.rc, 0) << elsewhere.output;
    EXPECT_CONTAINS(elsewhere.output, "--train-data data/x_train_*.bin is relative to the run's directory, now " +
                                          again + ": read as " + again + "/data/x_train_*.bin");
    EXPECT_CONTAINS(elsewhere.output, "train: 3000 tokens in 1 shard(s)");
    EXPECT_CONTAINS(read_text(again + "/out/log.jsonl"), "\"step\":10");
    // where the run's directory holds no such data, the text is read here, and said so
    const std::string bare = c.dir.file("q/bare");
    ASSERT_EQ(run("mv '" + again + "' '" + bare + "' && rm -r '" + bare + "/data'").rc, 0);
    const CommandResult no_data = in(c.dir.path, "--resume --checkpoint-dir '" + bare + "/out/checkpoints' -x 12");
    ASSERT_EQ(no_data.rc, 0) << no_data.output;
    EXPECT_CONTAINS(no_data.output, "--train-data data/x_train_*.bin is relative to where the run was given it, " +
                                        again + ", which no longer exists: read from this directory, " + c.dir.path);
    EXPECT_CONTAINS(no_data.output, "notice: the training data is not the checkpoint's");
}

// Round 21: a copy of a run's output directory in another project read that project's data by the
// run's relative -i (the same token count: no notice); <out>/checkpoints a link to storage whose
// directory holds another run's log was taken for a moved run (refused, with advice that replaced
// that log); a copy whose checkpoints directory was renamed wrote its continuation into the
// original's log (and the original could not resume afterwards).
TEST(Faults, ACopiedOrLinkedRunKeepsItsOwnDataAndLog) {
    Corpus c;
    const std::string w = c.dir.file("w"), p2 = c.dir.file("p2");
    auto shards = [](const std::string& dir, char token) { write_project_shard(dir, 3000, token); };
    auto in = [&](const std::string& cwd, const std::string& args) { return run(c.train_gpt_project_in(cwd, args)); };
    shards(w, 'a');
    shards(p2, 'b');
    ASSERT_EQ(in(w, "-i 'data/x_train_*.bin' -o runs/A -x 2 -n 2").rc, 0);
    const std::string originals_log = read_text(w + "/runs/A/log.jsonl");
    ASSERT_EQ(run("mkdir -p '" + p2 + "/runs' && cp -a '" + w + "/runs/A' '" + p2 + "/runs/A'").rc, 0);
    const CommandResult copied = in(p2, "--resume --checkpoint-dir runs/A/checkpoints -x 4");
    ASSERT_EQ(copied.rc, 0) << copied.output;
    EXPECT_CONTAINS(copied.output, "--train-data data/x_train_*.bin is relative to where the run was given it, " + w +
                                       ": read as " + w + "/data/x_train_*.bin");
    EXPECT_CONTAINS(read_text(p2 + "/runs/A/log.jsonl"), "\"step\":4");
    EXPECT_EQ(read_text(w + "/runs/A/log.jsonl"), originals_log);
    // a copy with its checkpoints renamed: refused, the original's log untouched
    ASSERT_EQ(
        run("cp -a '" + w + "/runs/A' '" + w + "/runs/R' && mv '" + w + "/runs/R/checkpoints' '" + w + "/runs/R/ck'")
            .rc,
        0);
    expect_refused(in(w, "--resume --checkpoint-dir runs/R/ck -x 4"),
                   {"runs/R/ck/step_00000002 is a copy of " + w + "/runs/A/checkpoints/step_00000002"});
    EXPECT_EQ(read_text(w + "/runs/A/log.jsonl"), originals_log);
    ASSERT_EQ(in(w, "--resume -o runs/A -x 4").rc, 0) << "the original resumes";
    // <out>/checkpoints a link into storage beside another run's log: nothing moved
    ASSERT_EQ(in(w, "-i 'data/x_train_*.bin' -o store/E -x 2").rc, 0);
    const std::string others_log = read_text(w + "/store/E/log.jsonl");
    make_dirs(w + "/store/E/checkpoints");
    make_dirs(w + "/runs/F");
    ASSERT_EQ(::symlink("../../store/E/checkpoints", (w + "/runs/F/checkpoints").c_str()), 0);
    ASSERT_EQ(in(w, "-i 'data/x_train_*.bin' -o runs/F -x 2 -n 2").rc, 0);
    const CommandResult linked = in(w, "--resume --checkpoint-dir runs/F/checkpoints -x 4");
    ASSERT_EQ(linked.rc, 0) << linked.output;
    EXPECT_EQ(linked.output.find("moved or copied"), std::string::npos) << linked.output;
    EXPECT_CONTAINS(read_text(w + "/runs/F/log.jsonl"), "\"step\":4");
    EXPECT_EQ(read_text(w + "/store/E/log.jsonl"), others_log);
}

// Round 22: a moved run with an absolute -o, resumed from another project with data of its own by
// the same relative name, read that project's data (only the -o followed the move); a checkpoint
// dir recorded through a linked spelling of -o's parent turned the following off for good; a copy
// of a checkpoint taken after the run moved was resumed into the moved run's log.
TEST(Faults, AMovedRunsDataFollowsItWhateverItsPathsSpelling) {
    Corpus c;
    const std::string pb = c.dir.file("pb"), moved = c.dir.file("pbM"), px = c.dir.file("px");
    auto shards = [](const std::string& dir, size_t count, char token) { write_project_shard(dir, count, token); };
    auto in = [&](const std::string& cwd, const std::string& args) { return run(c.train_gpt_project_in(cwd, args)); };
    shards(pb, 3000, 'a');
    shards(px, 5000, 'b');
    ASSERT_EQ(in(pb, "-i 'data/x_train_*.bin' -o '" + pb + "/out' -x 2 -n 2").rc, 0);
    // a resume through a linked spelling of the project's directory
    ASSERT_EQ(::symlink(pb.c_str(), c.dir.file("plink").c_str()), 0);
    ASSERT_EQ(in(pb, "--resume --checkpoint-dir '" + c.dir.file("plink") + "/out/checkpoints' -x 4").rc, 0);
    ASSERT_EQ(std::rename(pb.c_str(), moved.c_str()), 0);
    const CommandResult r = in(px, "--resume --checkpoint-dir '" + moved + "/out/checkpoints' -x 6");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "its log goes on beside them, in " + moved + "/out\n");
    EXPECT_CONTAINS(r.output, "--train-data data/x_train_*.bin is relative to the run's directory, now " + moved +
                                  ": read as " + moved + "/data/x_train_*.bin");
    EXPECT_CONTAINS(r.output, "train: 3000 tokens in 1 shard(s)");
    EXPECT_FALSE(file_exists(px + "/out"));
    EXPECT_CONTAINS(read_text(moved + "/out/log.jsonl"), "\"step\":6");
    // a copy of its newest checkpoint, taken after the move: refused into the moved run's log
    const std::string log = read_text(moved + "/out/log.jsonl");
    ASSERT_EQ(run("mkdir -p '" + c.dir.file("stash/checkpoints") + "' && cp -r '" + moved +
                  "/out/checkpoints/step_00000006' '" + c.dir.file("stash/checkpoints") + "/'")
                  .rc,
              0);
    expect_refused(
        in(moved, "--resume -o out --checkpoint-dir '" + c.dir.file("stash/checkpoints") + "' -x 8"),
        {c.dir.file("stash/checkpoints") + "/step_00000006 is a copy of " + moved + "/out/checkpoints/step_00000006"});
    EXPECT_EQ(read_text(moved + "/out/log.jsonl"), log);
    ASSERT_EQ(in(moved, "--resume -o out -x 8").rc, 0) << "the run itself goes on";
}

// Round 20: a branch's checkpoint put where the run's own of that step was (the same path, another
// manifest) was resumed, splicing the branch's weights onto the run's log: the log's record of that
// path matched by path alone, though both sides have manifest hashes, which differ.
TEST(Faults, ABranchsCheckpointAtTheRunsOwnPathIsNoCheckpointOfTheRun) {
    Corpus c;
    const std::string r = c.dir.file("r"), b = c.dir.file("b");
    ASSERT_EQ(run(c.train_gpt(r, "-x 4 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("cp -r '" + r + "' '" + b + "' && rm -r '" + b + "/checkpoints/step_00000004'").rc, 0);
    const CommandResult branch = run(c.train_gpt(b, "-x 4 --resume --lr 0.01"));
    ASSERT_EQ(branch.rc, 0) << branch.output;
    ASSERT_EQ(run("rm -r '" + r + "/checkpoints/step_00000004' && cp -r '" + b + "/checkpoints/step_00000004' '" + r +
                  "/checkpoints/'")
                  .rc,
              0);
    const std::string log = read_text(r + "/log.jsonl");
    expect_refused(
        run(c.train_gpt(r, "-x 6 --resume")),
        {"holds this run's log.jsonl, which records neither saving nor resuming " + r + "/checkpoints/step_00000004"});
    EXPECT_EQ(read_text(r + "/log.jsonl"), log) << "the log, untouched";
}

// Round 20: a fine-tune from the previous run's checkpoints into the default `out` moved its own
// start model aside (to out.previous-*), and recorded the old name, which its own checkpoints then
// took. Refused before anything moves.
TEST(Faults, AFineTuneFromTheDefaultOutputDirIntoItIsRefused) {
    Corpus c;
    const std::string cwd = c.dir.file("w");
    make_dirs(cwd);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2 -n 2")).rc, 0);
    const auto before = directory_snapshot(cwd);
    expect_refused(run(c.train_gpt_in(cwd, "--init-from out/checkpoints -x 2 -n 2")),
                   {"--init-from out/checkpoints is inside out, the default --output-dir, whose previous run this run "
                    "would move aside",
                    "give this run its own --output-dir"});
    EXPECT_EQ(directory_snapshot(cwd), before) << "nothing moved";
    // round 21: a root of its own whose newest step is a link into out
    make_dirs(cwd + "/mine");
    ASSERT_EQ(::symlink("../out/checkpoints/step_00000002", (cwd + "/mine/step_00000002").c_str()), 0);
    const auto with_link = directory_snapshot(cwd);
    expect_refused(run(c.train_gpt_in(cwd, "--init-from mine -x 2 -n 2")),
                   {"--init-from mine (mine/step_00000002, through links into " + cwd +
                    "/out/checkpoints/step_00000002) is inside out"});
    EXPECT_EQ(directory_snapshot(cwd), with_link) << "nothing moved";
    // round 22 (HIGH): a step directory of its own whose files are links into out (cp -rs)
    ASSERT_EQ(run("cp -rs '" + cwd + "/out/checkpoints' '" + cwd + "/shadow'").rc, 0);
    const auto with_shadow = directory_snapshot(cwd);
    for (const char* from : {"shadow", "shadow/step_00000002"}) {
        SCOPED_TRACE(from);
        expect_refused(run(c.train_gpt_in(cwd, std::string("--init-from ") + from + " -x 2 -n 2")),
                       {"is inside out, the default --output-dir"});
        EXPECT_EQ(directory_snapshot(cwd), with_shadow) << "nothing moved";
    }
    // a default out that is a link moves as a link: a start model where it points stays put
    const std::string linked = c.dir.file("linked");
    make_dirs(linked + "/storage");
    ASSERT_EQ(::symlink("storage", (linked + "/out").c_str()), 0);
    ASSERT_EQ(run(c.train_gpt_in(linked, "-x 2 -n 2")).rc, 0);
    const CommandResult tune = run(c.train_gpt_in(linked, "--init-from storage/checkpoints -x 2"));
    ASSERT_EQ(tune.rc, 0) << tune.output;
    EXPECT_TRUE(file_exists(linked + "/storage/checkpoints/step_00000002/manifest.json"));
    // round 23: ... but one spelled through the link's name was refused only after the move
    const std::string relinked = c.dir.file("relinked");
    make_dirs(relinked + "/storage");
    ASSERT_EQ(::symlink("storage", (relinked + "/out").c_str()), 0);
    ASSERT_EQ(run(c.train_gpt_in(relinked, "-x 2 -n 2")).rc, 0);
    const auto with_linked_out = directory_snapshot(relinked);
    expect_refused(
        run(c.train_gpt_in(relinked, "--init-from out/checkpoints -x 2")),
        {"--init-from out/checkpoints is inside out, the default --output-dir (a link to " + relinked + "/storage)",
         "give the start model as " + relinked + "/storage/checkpoints"});
    EXPECT_EQ(directory_snapshot(relinked), with_linked_out) << "nothing moved";
    ASSERT_EQ(run(c.train_gpt_in(cwd, "--init-from out/checkpoints -x 2 -o tune")).rc, 0);
}

// Round 24: a step_* entry that is not a directory (a link to a disk not mounted now, a file, a
// link loop) was passed over without a word: --resume took the checkpoint before it and cut the
// log back to its step (or trained on and died at the save of that step). It is the newest
// checkpoint, damaged: refused, and with --resume-from-intact set aside.
TEST(Faults, ANewestStepThatIsNoDirectoryIsADamagedCheckpoint) {
    Corpus c;
    const std::string out = c.dir.file("out"), six = out + "/checkpoints/step_00000006";
    ASSERT_EQ(run(c.train_gpt(out, "-x 6 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("mv '" + six + "' '" + c.dir.file("moved6") + "'").rc, 0);
    const struct {
        std::string make, says;
    } cases[] = {
        {"ln -s /nonexistent/disk/step_00000006 '" + six + "'",
         "is a symbolic link to /nonexistent/disk/step_00000006, which cannot be reached"},
        {"ln -s step_00000006 '" + six + "'", "which cannot be reached"},
        {"echo x > '" + six + "'", "is not a checkpoint: not a directory"},
    };
    const std::string log = read_text(out + "/log.jsonl");
    for (const auto& k : cases) {
        SCOPED_TRACE(k.make);
        ASSERT_EQ(run("rm -f '" + six + "' && " + k.make).rc, 0);
        for (const char* how : {"--resume", "--auto-resume"}) {
            expect_refused(run(c.train_gpt(out, std::string("-x 8 ") + how)),
                           {"the newest checkpoint, " + six + ", is damaged", k.says, "Nothing was changed"});
            EXPECT_EQ(read_text(out + "/log.jsonl"), log) << how;
        }
    }
    const CommandResult intact = run(c.train_gpt(out, "-x 8 --resume --resume-from-intact"));
    ASSERT_EQ(intact.rc, 0) << intact.output;
    EXPECT_CONTAINS(intact.output, "kept the damaged checkpoint as " + six + ".damaged");
    EXPECT_CONTAINS(intact.output, "step_00000004 (step 4)");
    EXPECT_TRUE(file_exists(six + "/manifest.json")) << "step 6 saved anew";
}

// Round 19 (A4): a checkpoint of a newer build (a later manifest version) was called damaged, with
// the advice to add --resume-from-intact, which would have stepped back past it and renamed it
// .damaged. It is refused as not this build's, with or without --resume-from-intact.
TEST(Faults, ACheckpointOfANewerBuildIsNotCalledDamaged) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 4 --checkpoint-every 2")).rc, 0);
    const std::string step = out + "/checkpoints/step_00000004";
    auto j = nlohmann::ordered_json::parse(read_text(step + "/manifest.json"));
    j.erase("manifest_xxh3");
    j["version"] = 3;
    write_text(step + "/manifest.json", j.dump(2));
    const auto before = directory_snapshot(out + "/checkpoints");
    for (const char* how : {"", " --resume-from-intact"}) {
        const CommandResult r = run(c.train_gpt(out, std::string("-x 6 --resume") + how));
        expect_refused(r, {"the checkpoint " + step + " is not this build's: " + step +
                           "/manifest.json: manifest version 3, written by a newer build of train_gpt"});
        EXPECT_EQ(r.output.find("damaged"), std::string::npos) << r.output;
        EXPECT_EQ(directory_snapshot(out + "/checkpoints"), before) << "nothing renamed";
    }
}

// Round 19 (B11): an empty log.jsonl (a disk that filled up) was refused as "the log.jsonl of another
// run", sending the user looking for a second run, while a missing one resumed. It holds nothing
// to mix or lose: the resume goes on, with a notice, and its records start the log.
TEST(Faults, AnEmptyLogIsNoOtherRunsLog) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    write_text(out + "/log.jsonl", "");
    const CommandResult r = run(c.train_gpt(out, "-x 4 --resume"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: " + out + "/log.jsonl holds no record (an empty file)");
    const std::string log = read_text(out + "/log.jsonl");
    EXPECT_CONTAINS(log, "\"type\":\"resume\"");
    EXPECT_CONTAINS(log, "\"step\":4");
    // round 25: a log deleted or moved away is said too (it started a new one without a word)
    ASSERT_EQ(std::remove((out + "/log.jsonl").c_str()), 0);
    const CommandResult missing = run(c.train_gpt(out, "-x 6 --resume --checkpoint-every 2"));
    ASSERT_EQ(missing.rc, 0) << missing.output;
    EXPECT_CONTAINS(missing.output, "notice: " + out +
                                        "/log.jsonl does not exist: the resumed run's records start a new one, at "
                                        "step 4");
}

// Round 18: --init-from a step directory read its tokenizer.bin before any checksum: a flipped byte
// was reported as a tokenizer differing from the BPE files beside it (whose removal it advised).
// The manifest and the small files are verified first; prepare_text refuses a model directory as
// --out-dir (it replaced the checkpoint's tokenizer.bin).
TEST(Faults, InitFromVerifiesTheTokenizerFilesBeforeReadingThem) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    const std::string step = out + "/checkpoints/step_00000002";
    std::string bytes = read_text(step + "/tokenizer.bin");
    bytes[bytes.size() - 3] ^= 1;
    write_text(step + "/tokenizer.bin", bytes);
    expect_refused(run(train_gpt_binary() + " --device cpu -x 0 -g 2 -j '' --threads 1 --init-from '" + step +
                       "' -o '" + c.dir.file("eval") + "'"),
                   {step + "/tokenizer.bin: checksum mismatch"});
    expect_refused(
        run(build_dir() + "/prepare_text --input '" + c.dir.file("tokenizer.bin") + "' --out-dir '" + step + "'"),
        {"--out-dir " + step + " is a model directory"});
    EXPECT_EQ(read_text(step + "/tokenizer.bin"), bytes) << "nothing replaced";
}

// Round 18: a checkpoint of a build before integer flags were decimal records the texts as typed
// ("--seed 010", which that build read as octal 8); a resume re-read them in decimal (seed 10, a
// run other than the one saved), or refused them ("0x5"), so a requeue never started again. They
// are resumed as that build read them, with a notice. (Such a checkpoint is of manifest version 1.)
TEST(Faults, FlagsOfAnOlderBuildResumeAsThatBuildReadThem) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    const std::string manifest = out + "/checkpoints/step_00000002/manifest.json";
    auto j = nlohmann::ordered_json::parse(read_text(manifest));
    j.erase("manifest_xxh3");
    j["version"] = 1;
    j["extra"]["flags"]["seed"] = "010";
    j["extra"]["flags"]["top-k"] = "0x5";
    j["extra"]["flags"]["warmup-steps"] = " -1";    // round 19: strtoll skipped the blank (it wrapped)
    j["extra"]["flags"]["master-weights"] = "-1";   // round 19: CLI11 took it as false
    j["extra"]["flags"]["keep-checkpoints"] = "010";
    write_manifest_as_written(out + "/checkpoints/step_00000002", out + "/log.jsonl", j.dump(2));
    const CommandResult resumed = run(c.train_gpt(out, "-x 4 --resume --keep-checkpoints 8"));
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    // round 19 (A8): the value given is the one that build read, no change (it was listed as one)
    EXPECT_EQ(resumed.output.find("--keep-checkpoints 8 (the checkpoint's run"), std::string::npos) << resumed.output;
    EXPECT_CONTAINS(resumed.output,
                    "the checkpoint records --seed 010, which the build that wrote it read as 8 (a "
                    "leading 0 octal, 0x hex): resumed with 8");
    const auto config = nlohmann::json::parse(read_text(out + "/config.json"));
    EXPECT_EQ(config.at("seed"), 8u);
    EXPECT_CONTAINS(resumed.output, "records --top-k 0x5");
    EXPECT_CONTAINS(resumed.output, "records --warmup-steps ' -1', which the build that wrote it read as -1: resumed");
    EXPECT_CONTAINS(resumed.output, "records --master-weights '-1', which the build that wrote it read as false");
}

// Round 19: the summary's sampling command for a checkpoint whose tokenizer cannot encode (or of a
// run without one) gave --sample-prompt, which such a run refuses; it leaves it out there.
TEST(Faults, TheSummarysSamplingCommandWorksWithoutAnEncodingTokenizer) {
    Corpus c;
    const std::string out = c.dir.file("out");
    make_dirs(c.dir.file("bare"));   // shards with no tokenizer beside them
    const std::vector<uint32_t> tokens(3000, 'a');
    write_shard(c.dir.file("bare/x_train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    const CommandResult r =
        run(train_gpt_binary() + " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" +
            c.dir.file("bare/x_train_*.bin") + "' --vocab-size 257 -x 2 -n 2 -o '" + out + "'");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "(a Hugging Face model directory: weights (the run has no tokenizer);");
    EXPECT_CONTAINS(r.output, " -x 0 -g 200   (sample from it)");
    // round 25: the trainer as it was started, not ./train_gpt (which is not there from another cwd)
    EXPECT_CONTAINS(r.output, "next:       " + train_gpt_binary() + " --init-from ");
    EXPECT_CONTAINS(r.output, "            " + train_gpt_binary() + " --resume -o ");
}

// Round 19: --init-from a checkpoint root whose newest step directory is incomplete (no manifest)
// said it "was removed while this run read it", which no retry changes; it says what is wrong.
TEST(Faults, InitFromARootWhoseNewestStepIsIncompleteSaysSo) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "-x 2 --checkpoint-every 2")).rc, 0);
    make_dirs(out + "/checkpoints/step_00000009");
    const CommandResult r = run(train_gpt_binary() + " --device cpu -x 0 -g 2 -j '' --threads 1 --init-from '" + out +
                                "/checkpoints' -o '" + c.dir.file("eval") + "'");
    expect_refused(r, {out + "/checkpoints/step_00000009 is not a checkpoint: it has no manifest.json"});
    EXPECT_EQ(r.output.find("was removed while this run read it"), std::string::npos) << r.output;
}

// Round 19 (HIGH): the directory a relative -i is read from was joined into the glob unescaped, so
// for a run started in "e[1]" a resume from elsewhere read e1's shards (the class [1] matching "1").
TEST(Faults, ARelativeGlobOfARunStartedInADirectoryWithGlobCharactersStaysLiteral) {
    Corpus c;
    const std::string first = c.dir.file("e[1]");
    make_dirs(first + "/data");
    make_dirs(c.dir.file("e1/data"));
    const std::vector<uint32_t> ours(3000, 'a'), decoy(5000, 'b');
    write_shard(first + "/data/x_train_000000.bin", ours.data(), (int64_t)ours.size(), 2);
    write_shard(c.dir.file("e1/data/x_train_000000.bin"), decoy.data(), (int64_t)decoy.size(), 2);
    const std::string flags = " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
                              c.dir.file("tokenizer.bin") + "' ";
    auto in = [&](const std::string& cwd, const std::string& args) {
        return run("sh -c \"cd '" + cwd + "' && " + train_gpt_binary() + flags + args + "\"");
    };
    ASSERT_EQ(in(first, "-i 'data/x_train_*.bin' -o out -x 2 --checkpoint-every 2").rc, 0);
    const CommandResult resumed = in(c.dir.path, "--resume --checkpoint-dir 'e[1]/out/checkpoints' -x 4");
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    EXPECT_CONTAINS(resumed.output, "train: 3000 tokens in 1 shard(s)");
}

// Round 17: a resume on other training data (a shard removed, or prepare_text re-run with other
// inputs) said nothing, and its data position, a sample index, fell elsewhere in the text. The
// checkpoint records the shards and tokens its run read; a resume on others says so.
TEST(Faults, AResumeOnOtherTrainingDataSaysSo) {
    Corpus c;
    const std::string out = c.dir.file("out");
    const std::vector<uint32_t> more(3000, 'a');
    write_shard(c.dir.file("train_000001.bin"), more.data(), (int64_t)more.size(), 2);
    ASSERT_EQ(run(c.train_gpt(out, "-x 3 --checkpoint-every 3")).rc, 0);
    const CommandResult same = run(c.train_gpt(out, "-x 4 --checkpoint-every 4 --resume"));
    ASSERT_EQ(same.rc, 0) << same.output;
    EXPECT_EQ(same.output.find("training data is not"), std::string::npos) << same.output;
    ASSERT_EQ(std::remove(c.dir.file("train_000001.bin").c_str()), 0);
    const CommandResult other = run(c.train_gpt(out, "-x 5 --checkpoint-every 5 --resume"));
    ASSERT_EQ(other.rc, 0) << other.output;
    EXPECT_CONTAINS(other.output, "notice: the training data is not the checkpoint's: " + c.dir.file("train_*.bin") +
                                      " holds 6200 tokens in 1 shard(s), the checkpoint's run read 9200 in 2; its data "
                                      "position (sample 8) now falls elsewhere in the text");
}

// Round 16: --auto-resume without -n was accepted without a word; each stop then exits 75 with no
// checkpoint, and a requeue loop keyed on 75 starts over from step 0 every time.
TEST(Faults, AutoResumeWithoutCheckpointsIsWarnedOfAtTheStart) {
    Corpus c;
    const CommandResult bare = run(c.train_gpt(c.dir.file("a"), "-x 2 --auto-resume"));
    ASSERT_EQ(bare.rc, 0) << bare.output;
    EXPECT_CONTAINS(bare.output,
                    "warning: --auto-resume without --checkpoint-every: a stop (exit 75) writes no "
                    "checkpoint, so every restart trains from the start again; give -n N");
    const CommandResult saving = run(c.train_gpt(c.dir.file("b"), "-x 2 --auto-resume --checkpoint-every 2"));
    ASSERT_EQ(saving.rc, 0) << saving.output;
    EXPECT_EQ(saving.output.find("--auto-resume without"), std::string::npos) << saving.output;
}

// Round 7: the protections above hold however -o is spelled, for runs that saved nothing, and
// for logs with a bad line; --overwrite-output on a resume replaces the other run's log.
TEST(Faults, WhoseLogAResumeMayCutHoldsForEverySpellingRunAndLine) {
    Corpus c;
    // a branch into the run's own -o written "r/" (before: a textual compare took it for a moved run)
    const std::string r = c.dir.file("r"), branch = c.dir.file("branch_ck");
    ASSERT_EQ(run(c.train_gpt(r, "-x 4 --checkpoint-every 2")).rc, 0);
    make_dirs(branch);
    ASSERT_EQ(run("cp -r '" + r + "/checkpoints/step_00000002' '" + branch + "/'").rc, 0);
    expect_refused(run(train_gpt_binary() + " --resume --checkpoint-dir '" + branch + "' -o '" + r + "/' -x 6"),
                   {"its log.jsonl records a later save of this run"});
    // a finished run that saved nothing, over the checkpoint's own -o (before: no identity in its
    // log, so a resume of the other run cut it)
    const std::string d = c.dir.file("d");
    ASSERT_EQ(run(c.train_gpt(d, "-x 4 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("mv '" + d + "/checkpoints' '" + c.dir.file("d_ck") + "'").rc, 0);
    ASSERT_EQ(run(c.train_gpt(d, "-x 6 --seed 3 --overwrite-output")).rc, 0);
    const auto before = directory_snapshot(d);
    expect_refused(
        run(train_gpt_binary() + " --resume --checkpoint-dir '" + c.dir.file("d_ck") + "' -o '" + d + "' -x 6"),
        {"--output-dir " + d + " holds the log.jsonl of another run"});
    EXPECT_EQ(directory_snapshot(d), before);
    // ... and with --overwrite-output the other run's log is replaced, not mixed into
    const CommandResult replaced = run(train_gpt_binary() + " --resume --checkpoint-dir '" + c.dir.file("d_ck") +
                                       "' -o '" + d + "' -x 6 --overwrite-output");
    ASSERT_EQ(replaced.rc, 0) << replaced.output;
    EXPECT_CONTAINS(replaced.output, "notice: --overwrite-output: the log.jsonl in " + d + " is replaced");
    const auto steps = records_of(d + "/log.jsonl", "step");
    ASSERT_EQ(steps.size(), 2u) << "steps 5 and 6 of the resumed run only";
    EXPECT_EQ(steps[0]["step"], 5);
    EXPECT_TRUE(records_of(d + "/log.jsonl", "start").empty()) << "nothing of the replaced run";
    // a bad line in the middle of the log is named, and the log kept (before: everything after it
    // was deleted by the resume); a blank line is skipped
    const std::string e = c.dir.file("e");
    ASSERT_EQ(run(c.train_gpt(e, "-x 4 --checkpoint-every 2")).rc, 0);
    std::string log = read_text(e + "/log.jsonl");
    const size_t second = log.find('\n') + 1;
    write_text(e + "/log.jsonl", log.substr(0, second) + "\n" + log.substr(second));   // a blank line
    const CommandResult blank = run(train_gpt_binary() + " --resume -o '" + e + "' -x 6");
    ASSERT_EQ(blank.rc, 0) << blank.output;
    EXPECT_EQ(records_of(e + "/log.jsonl", "step").size(), 6u);
    log = read_text(e + "/log.jsonl");
    const size_t third = log.find('\n', log.find('\n') + 1) + 1;
    write_text(e + "/log.jsonl", log.substr(0, third) + "{\"type\": \"step\", x}\n" + log.substr(third));
    const auto edited = directory_snapshot(e);
    expect_refused(run(train_gpt_binary() + " --resume -o '" + e + "' -x 8"),
                   {e + "/log.jsonl:3: not a JSON record, with records after it"});
    EXPECT_EQ(directory_snapshot(e), edited);
}

// Round 8: a branch started from another working directory, for a run that logged relative paths,
// is refused as from the run's own (before: the recorded -o and checkpoint paths resolved against
// the new directory, and the run's log was cut); a branch's checkpoint resumed into the original's
// -o is refused (before: the shared identity let it splice the branch onto the original's log); a
// record whose type is no string is no crash.
TEST(Faults, BranchesAreRefusedFromAnyDirectoryAndNeverSplicedOntoTheOriginal) {
    Corpus c;
    const std::string flags = c.flags("r", "-x 8 --checkpoint-every 2");   // -o r: relative
    ASSERT_EQ(run("env -C '" + c.dir.path + "' " + train_gpt_binary() + flags).rc, 0);
    const std::string r = c.dir.file("r"), branch = c.dir.file("branch_ck");
    make_dirs(branch);
    ASSERT_EQ(run("cp -r '" + r + "/checkpoints/step_00000004' '" + branch + "/'").rc, 0);
    const auto before = directory_snapshot(r);
    expect_refused(run("env -C / " + train_gpt_binary() + " --resume --checkpoint-dir '" + branch + "' -o '" + r +
                       "' -x 8 -l 1e-3"),
                   {"its log.jsonl records a later save of this run"});
    EXPECT_EQ(directory_snapshot(r), before);
    // the branch, into its own -o; then its checkpoint resumed into the original's -o
    const std::string b = c.dir.file("b");
    const CommandResult branched =
        run(train_gpt_binary() + " --resume --checkpoint-dir '" + branch + "' -o '" + b + "' -x 8 -l 1e-3");
    ASSERT_EQ(branched.rc, 0) << branched.output;
    expect_refused(run(train_gpt_binary() + " --resume --checkpoint-dir '" + branch + "' -o '" + r + "' -x 10"),
                   {"--output-dir " + r + " holds this run's log.jsonl, which records neither saving nor resuming " +
                    branch + "/step_00000008"});
    EXPECT_EQ(directory_snapshot(r), before);
    // a hand-edited record with a numeric type is passed over
    const std::string log = read_text(r + "/log.jsonl");
    write_text(r + "/log.jsonl", log + "{\"type\": 5, \"step\": 3}\n{\"type\": \"note\", \"step\": 8}\n");
    const CommandResult on = run(train_gpt_binary() + " --resume -o '" + r + "' -x 10");
    ASSERT_EQ(on.rc, 0) << on.output;
    EXPECT_EQ(last_step(r + "/log.jsonl"), 10);
}

// Round 28: --auto-resume adopted whatever run's checkpoint stood in its --checkpoint-dir. A second
// job of a sweep in the same -o (another --lr, the same -x) trained nothing, reported the first
// job's val loss as its own, exit 0, and rewrote its config.json with an lr that never applied;
// a job with its own -o but a shared --checkpoint-dir trained on from the other's weights and
// pruned its checkpoints. A checkpoint whose run this command line gives another model, data, -o,
// optimizer, precision or seed is refused; a restart with a longer -x or another cadence is not.
TEST(Faults, AutoResumeRefusesTheCheckpointOfAnotherRun) {
    Corpus c;
    const std::string out = c.dir.file("out");
    ASSERT_EQ(run(c.train_gpt(out, "--auto-resume -x 4 -n 2")).rc, 0);
    const std::string config = read_text(out + "/config.json");
    const std::string shared = "-o '" + c.dir.file("other") + "' --checkpoint-dir '" + out + "/checkpoints'";
    for (const std::string& other : {std::string("-l 1e-5"), std::string("--seed 7"), shared}) {
        SCOPED_TRACE(other);
        expect_refused(run(c.train_gpt(out, "--auto-resume -x 4 -n 2 ") + other),
                       {"--auto-resume: " + checkpoint_dir(out + "/checkpoints", 4) + " is a checkpoint of another run",
                        "give this run its own --checkpoint-dir (or -o), or --resume"});
    }
    EXPECT_EQ(read_text(out + "/config.json"), config) << "the other run's, untouched";
    EXPECT_EQ(list_checkpoints(out + "/checkpoints"), (std::vector<int64_t>{2, 4}));
    EXPECT_FALSE(file_exists(c.dir.file("other")));
    // round 29: the other way round (a job on the defaults over a run that gave others), a
    // fine-tune's --init-from over a run started fresh, and other training data under the same -i
    const std::string given = c.dir.file("given");
    ASSERT_EQ(run(c.train_gpt(given, "--auto-resume -x 4 -n 2 -l 1e-3 --seed 5")).rc, 0);
    expect_refused(run(c.train_gpt(given, "--auto-resume -x 4 -n 2")),
                   {"is a checkpoint of another run (this command line gives --lr 0.002 (the checkpoint's run: 1e-3), "
                    "--seed 1337 (the checkpoint's run: 5)"});
    expect_refused(run(c.train_gpt(out, "--auto-resume -x 4 -n 2 --init-from '" + given + "/checkpoints'")),
                   {"--init-from " + given + "/checkpoints (the checkpoint's run: a fresh model)"});
    EXPECT_EQ(list_checkpoints(out + "/checkpoints"), (std::vector<int64_t>{2, 4}));
    // two projects, the same relative -i and -o, one --checkpoint-dir: the second took the first's over
    const std::string shared_dir = c.dir.file("shared");
    const std::string same_line =
        "-i 'data/train_*.bin' -o out --checkpoint-dir '" + shared_dir + "' --auto-resume -x 2 -n 2";
    for (const auto& [project, tokens] :
         {std::pair<std::string, size_t>{c.dir.file("p1"), 6000}, {c.dir.file("p2"), 5000}}) {
        make_dirs(project + "/data");
        const std::vector<uint32_t> text(tokens, 'b');
        write_shard(project + "/data/train_000000.bin", text.data(), (int64_t)text.size(), 2);
    }
    ASSERT_EQ(run(c.train_gpt_project_in(c.dir.file("p1"), same_line)).rc, 0);
    expect_refused(run(c.train_gpt_project_in(c.dir.file("p2"), same_line)),
                   {"its run read 6000 tokens in 1 shard(s), this command line's -i data/train_*.bin holds 5000 in 1"});
    EXPECT_EQ(list_checkpoints(shared_dir), (std::vector<int64_t>{2}));
    // round 29: a start that saved no checkpoint (killed): --auto-resume replaced its log and config
    // whatever run it was; only a start of the same command line's is replaced
    const std::string early = c.dir.file("early");
    {
        Background job(c.train_gpt(early, "-x 100000 --checkpoint-every 50000 --auto-resume"), c.dir.file("job.txt"));
        ASSERT_TRUE(wait_until([&] { return last_step(early + "/log.jsonl") >= 2; })) << job.output();
        kill(-job.pid, SIGKILL);
        job.wait(300);
    }
    const std::string early_log = read_text(early + "/log.jsonl");
    expect_refused(run(c.train_gpt(early, "-x 4 --checkpoint-every 2 --auto-resume -l 1e-5")),
                   {"--auto-resume found no checkpoint, and " + early +
                    " holds the log.jsonl and config.json of "
                    "another run (lr 1e-05 (config.json: 0.002)"});
    EXPECT_EQ(read_text(early + "/log.jsonl"), early_log);
    const CommandResult same = run(c.train_gpt(early, "-x 4 --checkpoint-every 2 --auto-resume"));
    ASSERT_EQ(same.rc, 0) << same.output;
    EXPECT_CONTAINS(same.output, "starting a fresh run (it replaces the log.jsonl and config.json in " + early);
    // the same run restarted: a longer -x, another checkpoint cadence, evaluation, divergence watch
    const CommandResult longer = run(c.train_gpt(out, "--auto-resume -x 6 -n 3 -v 1 --max-skipped-steps 7"));
    ASSERT_EQ(longer.rc, 0) << longer.output;
    EXPECT_CONTAINS(longer.output, "resuming from " + checkpoint_dir(out + "/checkpoints", 4));
}

// Round 29 (lows): --auto-resume compared path flags as text. The same directory spelled otherwise
// (-o . then -o ./ or ../cd1) was refused as another run's; so was a project moved with its data,
// whose job script gives absolute paths (the moved -o was exempt, the moved -i not). And the
// exemption for a moved run's -o (the directory holding the checkpoints) admitted another run
// whose checkpoints were only put there with --checkpoint-dir.
TEST(Faults, AutoResumeKnowsARunByItsPathsNotTheirSpelling) {
    Corpus c;
    const std::string run_dir = c.dir.file("cd1");
    make_dirs(run_dir);
    const std::string in_place = "--auto-resume -n 2 -i '" + c.dir.file("train_*.bin") + "'";
    ASSERT_EQ(run(c.train_gpt_project_in(run_dir, in_place + " -x 2 -o . --checkpoint-dir .")).rc, 0);
    for (const std::string& spelling : {std::string("./"), std::string("../cd1"), run_dir + "/"}) {
        SCOPED_TRACE(spelling);
        const CommandResult again =
            run(c.train_gpt_project_in(run_dir, in_place + " -x 4 -o " + spelling + " --checkpoint-dir " + spelling));
        ASSERT_EQ(again.rc, 0) << again.output;
        EXPECT_CONTAINS(again.output, "resuming from ");
        ASSERT_EQ(run("rm -r '" + run_dir + "/step_00000004'").rc, 0);   // the next spelling resumes step 2 too
    }
    // the -i glob given as the one file it matches: the job line retyped with the glob unquoted,
    // which the shell expanded (round 34: refused as another run's data)
    const CommandResult expanded = run(c.train_gpt_project_in(
        run_dir, "--auto-resume -n 2 -i '" + c.dir.file("train_000000.bin") + "' -x 4 -o . --checkpoint-dir ."));
    ASSERT_EQ(expanded.rc, 0) << expanded.output;
    EXPECT_CONTAINS(expanded.output, "resuming from ");
    // a project moved with its data: the restart gives the new absolute paths
    const std::string p1 = c.dir.file("p1"), p2 = c.dir.file("p2");
    write_project_shard(p1, 6000, 'b');
    auto project_line = [&](const std::string& p, int steps) {
        return train_gpt_binary() + " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
               c.dir.file("tokenizer.bin") + "' -i '" + p + "/data/x_train_*.bin' -o '" + p +
               "/out' --auto-resume -n 2 -x " + std::to_string(steps);
    };
    ASSERT_EQ(run(project_line(p1, 2)).rc, 0);
    ASSERT_EQ(run("mv '" + p1 + "' '" + p2 + "'").rc, 0);
    const CommandResult moved = run(project_line(p2, 4));
    ASSERT_EQ(moved.rc, 0) << moved.output;
    EXPECT_CONTAINS(moved.output, "--train-data " + p2 + "/data/x_train_*.bin: the earlier run's " + p1 +
                                      "/data/x_train_*.bin names nothing now; taken as moved here");
    EXPECT_CONTAINS(moved.output, "resuming from " + p2 + "/out/checkpoints/step_00000002");
    // ... but moved data that is not the run's (other tokens) is refused when the checkpoint is read
    write_project_shard(p2, 5000, 'b');
    ASSERT_EQ(run("mv '" + p2 + "' '" + p1 + "'").rc, 0);
    expect_refused(run(project_line(p1, 6)),
                   {"is a checkpoint of another run: its run read 6000 tokens in 1 shard(s)"});
    // another run's checkpoints put under this -o by its --checkpoint-dir: not this run, moved
    const std::string logs = c.dir.file("logs1"), sh = c.dir.file("sh");
    ASSERT_EQ(run(c.train_gpt(logs, "--auto-resume -n 2 -x 2 --checkpoint-dir '" + sh + "/checkpoints'")).rc, 0);
    expect_refused(run(c.train_gpt(sh, "--auto-resume -n 2 -x 4")),
                   {"--auto-resume: " + checkpoint_dir(sh + "/checkpoints", 2) +
                    " is a checkpoint of another run (this command line gives --output-dir " + sh});
    EXPECT_EQ(list_checkpoints(sh + "/checkpoints"), (std::vector<int64_t>{2}));
}

// Round 30: --auto-resume's "same run" rule, at its edges. --init-from was compared only when given
// now, and a resume recorded none: a fresh model's command line took over a fine-tune's
// checkpoints, and after one manual --resume the fine-tune's own job line was refused. Seeds above
// 2^53 were compared as doubles. Without a checkpoint, a start that differed only in its data or
// --init-from, or whose config.json was gone, had its log replaced, and so had the log of a resume
// killed before its next save; an explicit -u -1 (the default) refused its own longer -x.
TEST(Faults, AutoResumeKnowsARunByWhereItsWeightsAndDataCameFrom) {
    Corpus c;
    const std::string base = c.dir.file("base"), tune = c.dir.file("tune");
    ASSERT_EQ(run(c.train_gpt(base, "-x 2 --checkpoint-every 2")).rc, 0);
    const std::string from = " --init-from '" + base + "/checkpoints'";
    ASSERT_EQ(run(c.train_gpt(tune, "--auto-resume -n 2 -x 2" + from)).rc, 0);
    expect_refused(run(c.train_gpt(tune, "--auto-resume -n 2 -x 4")),
                   {"is a checkpoint of another run (this command line gives no --init-from (a fresh model) (the "
                    "checkpoint's run: --init-from " +
                    base + "/checkpoints)"});
    EXPECT_EQ(list_checkpoints(tune + "/checkpoints"), (std::vector<int64_t>{2}));
    ASSERT_EQ(run(train_gpt_binary() + " --resume -o '" + tune + "' -x 4").rc, 0);   // the summary's next: line
    EXPECT_CONTAINS(read_text(tune + "/config.json"), "\"init_from\": \"" + base + "/checkpoints\"");
    const CommandResult job = run(c.train_gpt(tune, "--auto-resume -n 2 -x 6" + from));
    ASSERT_EQ(job.rc, 0) << job.output;
    EXPECT_CONTAINS(job.output, "resuming from " + checkpoint_dir(tune + "/checkpoints", 4));
    // seeds that one double cannot tell apart
    const std::string seeded = c.dir.file("seeded");
    ASSERT_EQ(run(c.train_gpt(seeded, "--auto-resume -n 2 -x 2 --seed 10000000000000000001")).rc, 0);
    expect_refused(run(c.train_gpt(seeded, "--auto-resume -n 2 -x 4 --seed 10000000000000000002")),
                   {"--seed 10000000000000000002 (the checkpoint's run: 10000000000000000001)"});
    // starts killed before their first checkpoint
    auto killed_start = [&](const std::string& out, const std::string& flags) {
        Background job(c.train_gpt(out, "-x 100000 --checkpoint-every 50000 --auto-resume " + flags),
                       c.dir.file("job.txt"));
        EXPECT_TRUE(wait_until([&] { return last_step(out + "/log.jsonl") >= 2; })) << job.output();
        kill(-job.pid, SIGKILL);
        job.wait(300);
    };
    const std::string early = c.dir.file("early");
    killed_start(early, "-u -1");
    const std::string early_log = read_text(early + "/log.jsonl");
    write_project_shard(c.dir.file("other"), 6000, 'b');
    for (const std::string& other : {"-i '" + c.dir.file("other") + "/data/x_train_*.bin'", from}) {
        SCOPED_TRACE(other);
        expect_refused(run(c.train_gpt(early, "-x 100000 --checkpoint-every 50000 --auto-resume -u -1 " + other)),
                       {"--auto-resume found no checkpoint, and " + early +
                        " holds the log.jsonl and config.json of "
                        "another run ("});
    }
    EXPECT_EQ(read_text(early + "/log.jsonl"), early_log);
    const CommandResult longer = run(c.train_gpt(early, "-x 4 --checkpoint-every 2 --auto-resume -u -1"));
    ASSERT_EQ(longer.rc, 0) << longer.output;   // the same line, a longer -x: replaced, with a notice
    EXPECT_CONTAINS(longer.output, "starting a fresh run (it replaces the log.jsonl and config.json in " + early);
    const std::string gone = c.dir.file("gone");
    killed_start(gone, "");
    std::filesystem::remove(gone + "/config.json");
    const CommandResult unknown = run(c.train_gpt(gone, "-x 4 --checkpoint-every 2 --auto-resume"));
    expect_refused(unknown, {"holds the log.jsonl and config.json of another run (its config.json is gone, so "
                             "whose run it is cannot be told)"});
    EXPECT_EQ(unknown.output.find("starting a fresh run"), std::string::npos) << "no notice before the refusal";
    // round 31: another program's log.jsonl (with no config.json, or one of other names), or a lone
    // config.json of someone's, was replaced as "a start that wrote no checkpoint"
    const std::string foreign = c.dir.file("foreign");
    const std::string events = "{\"event\": \"eval\", \"epoch\": 1, \"acc\": 0.5}\n";
    const std::string settings = "{\"learning_rate\": 0.001, \"num_train_epochs\": 3}";
    for (const auto& [log, config] :
         std::vector<std::pair<std::string, std::string>>{{events, ""}, {events, settings}, {"", settings}}) {
        SCOPED_TRACE(log + " | " + config);
        std::filesystem::remove_all(foreign);
        make_dirs(foreign);
        if (!log.empty()) write_text(foreign + "/log.jsonl", log);
        if (!config.empty()) write_text(foreign + "/config.json", config);
        const auto before = directory_snapshot(foreign);
        expect_refused(run(c.train_gpt(foreign, "-x 2 --auto-resume")),
                       {"--auto-resume found no checkpoint, and " + foreign +
                        " holds the log.jsonl and config.json of another run (" +
                        (!log.empty() ? "its log.jsonl holds no record of a train_gpt run's start"
                                      : "its config.json is unreadable or not a train_gpt run's")});
        EXPECT_EQ(directory_snapshot(foreign), before);
    }
    // a resume killed before its next save: its log records the resume, and is no start's
    const std::string branch = c.dir.file("branch");
    {
        Background job(c.train_gpt(branch, "-x 100000 --checkpoint-every 50000 --resume --checkpoint-dir '" + tune +
                                               "/checkpoints'"),
                       c.dir.file("job.txt"));
        ASSERT_TRUE(wait_until([&] { return last_step(branch + "/log.jsonl") >= 8; })) << job.output();
        kill(-job.pid, SIGKILL);
        job.wait(300);
    }
    expect_refused(run(c.train_gpt(branch, "-x 100000 --checkpoint-every 50000 --auto-resume")),
                   {"is the log of a run that resumed from " + checkpoint_dir(tune + "/checkpoints", 6)});
}

// Round 31: the same rule against fine-tunes and defaults. A fine-tune's job line, its --init-from
// relative, was refused in a copy of its project, and in its project moved with the base deleted;
// once a base run pruned the step a fine-tune began from, another fine-tune's line took it over
// ("taken as moved"); a job on the default -i took over a run that gave other data; -w true was
// not the default's "1"; and a fine-tune killed before its first checkpoint could not restart once
// its base saved a newer step (its tokenizer's path inside that step was compared).
TEST(Faults, AutoResumeKnowsAFineTuneByItsJobLine) {
    Corpus c;
    auto in = [&](const std::string& cwd, const std::string& args) { return run(c.train_gpt_project_in(cwd, args)); };
    const std::string p1 = c.dir.file("p1"), copy = c.dir.file("copy"), moved = c.dir.file("moved");
    write_project_shard(p1, 6000, 'b');
    const std::string data = "-i 'data/x_train_*.bin' ";
    ASSERT_EQ(in(p1, data + "-o base -x 2 -n 2").rc, 0);
    const std::string job = data + "-o ft -n 2 --auto-resume --init-from base/checkpoints";
    ASSERT_EQ(in(p1, job + " -x 2").rc, 0);
    ASSERT_EQ(run("cp -a '" + p1 + "' '" + copy + "'").rc, 0);
    CommandResult r = in(copy, job + " -x 4");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "resuming from ft/checkpoints/step_00000002");
    // round 34: a fine-tune's job line without the shape flags (its start model's shape), restarted
    // with them given truly, was refused against the defaults' texts; its config.json said "d2"
    const std::string bare = "sh -c \"cd '" + p1 + "' && " + train_gpt_binary() +
                             " --device cpu -b 2 -t 16 -j '' -g 0 --threads 1 --tokenizer '" +
                             c.dir.file("tokenizer.bin") + "' " + data + "-o bare -n 2 --auto-resume " +
                             "--init-from base/checkpoints";
    ASSERT_EQ(run(bare + " -x 2\"").rc, 0);
    EXPECT_CONTAINS(read_text(p1 + "/bare/config.json"), "\"model\": \"from --init-from\"");
    r = run(bare + " -x 4 -e d2 --n-embd 32\"");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "resuming from bare/checkpoints/step_00000002");
    ASSERT_EQ(std::rename(p1.c_str(), moved.c_str()), 0);
    std::filesystem::remove_all(moved + "/base");
    r = in(moved, job + " -x 4");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "resuming from ft/checkpoints/step_00000002");
    // round 32: a project moved with its job line's absolute paths: -o, -i and --init-from moved
    // with it (--init-from was another run's)
    const std::string abs1 = c.dir.file("abs1"), abs2 = c.dir.file("abs2");
    write_project_shard(abs1, 6000, 'b');
    auto absolute_line = [&](const std::string& p, const std::string& extra) {
        return "-i '" + p + "/data/x_train_*.bin' -n 2 --auto-resume -o '" + p + "/" + extra;
    };
    ASSERT_EQ(in(abs1, absolute_line(abs1, "base' -x 2")).rc, 0);
    ASSERT_EQ(in(abs1, absolute_line(abs1, "ft' -x 2 --init-from '" + abs1 + "/base/checkpoints'")).rc, 0);
    ASSERT_EQ(std::rename(abs1.c_str(), abs2.c_str()), 0);
    r = in(abs2, absolute_line(abs2, "ft' -x 4 --init-from '" + abs2 + "/base/checkpoints'"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "--init-from " + abs2 + "/base/checkpoints: the earlier run's " + abs1 +
                                  "/base/checkpoints, moved with the run's directory (" + abs1 + " to " + abs2 + ")");
    // round 33: -j has no token counts behind it: a recorded val set gone is not "moved" to any
    // other (any -j was), only to its place in the moved project
    const std::string v1 = c.dir.file("v1"), v2 = c.dir.file("v2");
    write_project_shard(v1, 6000, 'b');
    ASSERT_EQ(run("cp '" + v1 + "/data/x_train_000000.bin' '" + v1 + "/data/x_val_000000.bin'").rc, 0);
    auto val_line = [&](const std::string& p, const std::string& val, int steps) {
        return train_gpt_binary() +
               " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -g 0 -v 2 -m 1 --threads 1 --tokenizer '" +
               c.dir.file("tokenizer.bin") + "' -i '" + p + "/data/x_train_*.bin' -j '" + val + "' -o '" + p +
               "/out' -n 2 --auto-resume -x " + std::to_string(steps);
    };
    ASSERT_EQ(run(val_line(v1, v1 + "/data/x_val_*.bin", 2)).rc, 0);
    ASSERT_EQ(std::rename(v1.c_str(), v2.c_str()), 0);
    expect_refused(run(val_line(v2, c.dir.file("train_*.bin"), 4)),
                   {"this command line gives --val-data " + c.dir.file("train_*.bin") +
                    " (the checkpoint's run: " + v1 + "/data/x_val_*.bin)"});
    r = run(val_line(v2, v2 + "/data/x_val_*.bin", 4));
    ASSERT_EQ(r.rc, 0) << r.output;
    // a job on the default -i (and no --init-from): not the fine-tune's run
    expect_refused(in(copy, "-o ft -n 2 --auto-resume -x 6"),
                   {"this command line gives --train-data data/kjv/kjv_train_*.bin (the checkpoint's run: "
                    "data/x_train_*.bin), no --init-from (a fresh model) (the checkpoint's run: --init-from "
                    "base/checkpoints)"});
    // the step a fine-tune began from, pruned by its base run, is no other step
    const std::string b = c.dir.file("b"), ft = c.dir.file("ft2");
    ASSERT_EQ(run(c.train_gpt(b, "-x 2 -n 2 --keep-checkpoints 1")).rc, 0);
    ASSERT_EQ(run(c.train_gpt(ft, "-x 4 -n 2 --auto-resume --init-from '" + b + "/checkpoints/step_00000002'")).rc, 0);
    ASSERT_EQ(run(c.train_gpt(b, "-x 6 -n 2 --keep-checkpoints 1 --resume")).rc, 0);
    ASSERT_FALSE(file_exists(b + "/checkpoints/step_00000002")) << "pruned";
    expect_refused(
        run(c.train_gpt(ft, "-x 8 -n 2 --auto-resume --init-from '" + b + "/checkpoints/step_00000006'")),
        {"this command line gives --init-from " + b + "/checkpoints/step_00000006 (the checkpoint's run: --init-from " +
         b + "/checkpoints/step_00000002)"});
    // true in another spelling
    const std::string w = c.dir.file("w");
    ASSERT_EQ(run(c.train_gpt(w, "-x 2 -n 2 --auto-resume")).rc, 0);
    r = run(c.train_gpt(w, "-x 4 -n 2 --auto-resume -w true"));
    ASSERT_EQ(r.rc, 0) << r.output;
    // a fine-tune killed before its first checkpoint, its base saving on meanwhile (no --tokenizer:
    // the model's, in the newest step of --init-from)
    const std::string ft3 = c.dir.file("ft3");
    const std::string line = train_gpt_binary() +
                             " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" +
                             c.dir.file("train_*.bin") + "' -o '" + ft3 +
                             "' --checkpoint-every 50000 --auto-resume --init-from '" + b + "/checkpoints'";
    {
        Background job(line + " -x 100000", c.dir.file("job.txt"));
        ASSERT_TRUE(wait_until([&] { return last_step(ft3 + "/log.jsonl") >= 2; })) << job.output();
        kill(-job.pid, SIGKILL);
        job.wait(300);
    }
    ASSERT_EQ(run(c.train_gpt(b, "-x 8 -n 2 --keep-checkpoints 2 --resume")).rc, 0);
    r = run(line + " -x 3");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "starting a fresh run (it replaces the log.jsonl and config.json in " + ft3);
}

// Round 9: the refusals above never stop a legitimate restart. A requeue loop whose kill fell
// between a checkpoint's save and its log record, and was killed again later, resumes (before:
// refused for good as "the checkpoint of a branch?"): the log's resume record of the checkpoint
// counts as knowing it. Checkpoints moved to another directory are known by their manifest's
// hash. And a continuation logged under another -o is not appended with a gap to a run's log.
TEST(Faults, RestartsAfterCrashesAndMovesResumeAndGapsAreRefused) {
    Corpus c;
    const std::string o = c.dir.file("o");
    ASSERT_EQ(run(c.train_gpt(o, "-x 4 --checkpoint-every 4")).rc, 0);
    // the crash between the save of step 4 and its record: the log ends at step 4, unrecorded
    auto drop_records = [&](const std::string& log, const std::function<bool(const nlohmann::json&)>& drop) {
        std::string kept;
        std::istringstream in(read_text(log));
        for (std::string line; std::getline(in, line);)
            if (!drop(nlohmann::json::parse(line))) kept += line + "\n";
        write_text(log, kept);
    };
    drop_records(o + "/log.jsonl",
                 [](const nlohmann::json& j) { return j["type"] == "checkpoint" || j["type"] == "summary"; });
    {
        Background job(c.train_gpt(o, "-x 100000 --checkpoint-every 50000 --auto-resume"), c.dir.file("job.txt"));
        ASSERT_TRUE(wait_until([&] { return last_step(o + "/log.jsonl") >= 6; })) << job.output();
        kill(-job.pid, SIGKILL);
        job.wait(300);
    }
    const CommandResult again = run(c.train_gpt(o, "-x 8 --checkpoint-every 50000 --auto-resume"));
    ASSERT_EQ(again.rc, 0) << again.output;
    EXPECT_CONTAINS(again.output, "resuming from " + o + "/checkpoints/step_00000004");
    EXPECT_EQ(last_step(o + "/log.jsonl"), 8);
    // checkpoints moved while the log went on past the newest (a full disk mid-interval)
    const std::string m = c.dir.file("m");
    ASSERT_EQ(run(c.train_gpt(m, "-x 6 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("rm -r '" + m + "/checkpoints/step_00000006'").rc, 0);
    drop_records(m + "/log.jsonl", [](const nlohmann::json& j) {
        return (j["type"] == "checkpoint" && j["step"] == 6) || j["type"] == "summary";
    });
    ASSERT_EQ(run("mv '" + m + "/checkpoints' '" + c.dir.file("m_ck") + "'").rc, 0);
    const CommandResult moved = run(c.train_gpt(m, "-x 8 --resume --checkpoint-dir '" + c.dir.file("m_ck") + "'"));
    ASSERT_EQ(moved.rc, 0) << moved.output;
    // a continuation logged under another -o, resumed into the run's first -o: refused (a gap)
    const std::string a = c.dir.file("a"), b = c.dir.file("b"), ck = c.dir.file("ck");
    ASSERT_EQ(run(c.train_gpt(a, "-x 4 --checkpoint-every 2 --checkpoint-dir '" + ck + "'")).rc, 0);
    ASSERT_EQ(run(c.train_gpt(b, "-x 8 --resume --checkpoint-dir '" + ck + "'")).rc, 0);
    const auto before = directory_snapshot(a);
    expect_refused(run(c.train_gpt(a, "-x 10 --resume --checkpoint-dir '" + ck + "'")),
                   {"--output-dir " + a + " holds this run's log.jsonl, which records neither saving nor resuming",
                    "ends at step 4, before its step 8"});
    EXPECT_EQ(directory_snapshot(a), before);
}

// Round 11: the whole run directory moved (by hand, or the trainer's move-aside of a previous run
// in `out`), then a branch into it: refused as in its first directory (before: the log named the
// old directory, so this one counted as a copy, and the branch was spliced onto the only copy of
// the run's history). The run itself, a rollback there, and a branch into a copy still resume.
TEST(Faults, ABranchIntoAMovedRunDirectoryIsRefused) {
    Corpus c;
    const std::string o = c.dir.file("o"), moved = c.dir.file("disk2/o"), branch = c.dir.file("br");
    ASSERT_EQ(run(c.train_gpt(o, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    make_dirs(c.dir.file("disk2"));
    ASSERT_EQ(run("mv '" + o + "' '" + moved + "'").rc, 0);
    make_dirs(branch);
    ASSERT_EQ(run("cp -r '" + moved + "/checkpoints/step_00000004' '" + branch + "/'").rc, 0);
    const std::string resume_branch = " --resume --checkpoint-dir '" + branch + "' -x 8 -l 1e-3";
    const auto before = directory_snapshot(moved);
    expect_refused(run(train_gpt_binary() + " -o '" + moved + "'" + resume_branch),
                   {"its log.jsonl records a later save of this run, " + moved + "/checkpoints/step_00000008"});
    EXPECT_EQ(directory_snapshot(moved), before);
    // a copy of a run directory takes a branch: the original's log keeps what the copy's loses
    const std::string q = c.dir.file("q"), copy = c.dir.file("q_copy"), branch_q = c.dir.file("br_q");
    ASSERT_EQ(run(c.train_gpt(q, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    make_dirs(branch_q);
    ASSERT_EQ(
        run("cp -r '" + q + "' '" + copy + "' && cp -r '" + q + "/checkpoints/step_00000004' '" + branch_q + "/'").rc,
        0);
    const CommandResult into_copy =
        run(train_gpt_binary() + " --resume -o '" + copy + "' --checkpoint-dir '" + branch_q + "' -x 8 -l 1e-3");
    EXPECT_EQ(into_copy.rc, 0) << into_copy.output;
    // the run itself goes on in its new place
    const CommandResult go_on = run(train_gpt_binary() + " --resume -o '" + moved + "' -x 10");
    ASSERT_EQ(go_on.rc, 0) << go_on.output;
    EXPECT_CONTAINS(go_on.output, "resuming from " + moved + "/checkpoints/step_00000008");
    // a rollback right after a move: the newest checkpoint deleted, the one before resumed
    const std::string r = c.dir.file("r"), r_moved = c.dir.file("disk2/r");
    ASSERT_EQ(run(c.train_gpt(r, "-x 6 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("mv '" + r + "' '" + r_moved + "' && rm -r '" + r_moved + "/checkpoints/step_00000006'").rc, 0);
    const CommandResult back = run(train_gpt_binary() + " --resume -o '" + r_moved + "' -x 6");
    ASSERT_EQ(back.rc, 0) << back.output;
    EXPECT_CONTAINS(back.output, "resuming from " + r_moved + "/checkpoints/step_00000004");
    // the trainer's own move-aside: a second run in the default `out` renames the first one's
    const std::string cwd = c.dir.file("cwd");
    make_dirs(cwd);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    const CommandResult second = run(c.train_gpt_in(cwd, "-x 2"));
    ASSERT_EQ(second.rc, 0) << second.output;
    std::string aside;
    for (const auto& e : std::filesystem::directory_iterator(cwd))
        if (e.path().filename().string().rfind("out.previous-", 0) == 0) aside = e.path().string();
    ASSERT_FALSE(aside.empty()) << second.output;
    const std::string branch2 = c.dir.file("br2");
    make_dirs(branch2);
    ASSERT_EQ(run("cp -r '" + aside + "/checkpoints/step_00000004' '" + branch2 + "/'").rc, 0);
    expect_refused(
        run(train_gpt_binary() + " --resume -o '" + aside + "' --checkpoint-dir '" + branch2 + "' -x 8 -l 1e-3"),
        {"its log.jsonl records a later save of this run"});
}

// Round 12: the moves round 11's check missed. A run moved with a symlink left at its old place, and
// one moved whose old name another run of it took (a branch given the old name): a branch into
// them is refused (before: both counted as copies, and the branch was spliced onto the moved log).
// A run resumed by its checkpoint directory alone, after its directory moved, says that it logs
// to the old place afresh, and the moved log then refuses the gap (before: silent). A rollback
// after two moves, or after a move of a project directory holding -o and --checkpoint-dir side by
// side, resumes (before: refused, pointing at a directory that no longer existed).
TEST(Faults, MovedRunsAreFoundWhereverTheyWent) {
    Corpus c;
    auto resume = [&](const std::string& o, const std::string& extra) {
        return run(train_gpt_binary() + " --resume -o '" + o + "' " + extra);
    };
    auto branch_from = [&](const std::string& ckpt, const std::string& name) {
        const std::string dir = c.dir.file(name);
        make_dirs(dir);
        EXPECT_EQ(run("cp -r '" + ckpt + "' '" + dir + "/'").rc, 0);
        return dir;
    };
    const std::string later = "its log.jsonl records a later save of this run";
    // a symlink left behind
    const std::string lk = c.dir.file("lk"), big = c.dir.file("big");
    ASSERT_EQ(run(c.train_gpt(lk, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    make_dirs(big);
    ASSERT_EQ(run("mv '" + lk + "' '" + big + "/lk' && ln -s '" + big + "/lk' '" + lk + "'").rc, 0);
    const std::string br1 = branch_from(big + "/lk/checkpoints/step_00000004", "br1");
    for (const std::string& o : {lk, big + "/lk"})
        expect_refused(resume(o, "--checkpoint-dir '" + br1 + "' -x 8 -l 1e-3"), {later});
    // the old name taken by a branch of the run
    const std::string x = c.dir.file("x"), x_old = c.dir.file("x.old");
    ASSERT_EQ(run(c.train_gpt(x, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    ASSERT_EQ(run("mv '" + x + "' '" + x_old + "'").rc, 0);
    // (its checkpoints where the original's were: the same paths, other checkpoints)
    make_dirs(x + "/checkpoints");
    ASSERT_EQ(run("cp -r '" + x_old + "/checkpoints/step_00000004' '" + x + "/checkpoints/'").rc, 0);
    const CommandResult named_branch = resume(x, "-x 8 -l 1e-3");
    ASSERT_EQ(named_branch.rc, 0) << named_branch.output;
    const std::string br3 = branch_from(x_old + "/checkpoints/step_00000004", "br3");
    const auto before = directory_snapshot(x_old);
    expect_refused(resume(x_old, "--checkpoint-dir '" + br3 + "' -x 8 -l 3e-3"), {later});
    EXPECT_EQ(directory_snapshot(x_old), before);
    // round 13: the old name taken by a fine-tune from the newest checkpoint, whose log resumed from
    // (did not save) it, then a branch from an earlier one into the moved run: refused (before: the
    // fine-tune's resume record passed for a copy of the save, and the moved log was cut)
    const std::string e = c.dir.file("e"), e_v1 = c.dir.file("e.v1");
    ASSERT_EQ(run(c.train_gpt(e, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    ASSERT_EQ(run("mv '" + e + "' '" + e_v1 + "'").rc, 0);
    const std::string tune = branch_from(e_v1 + "/checkpoints/step_00000008", "tune");
    const CommandResult fine_tune = resume(e, "--checkpoint-dir '" + tune + "' -x 10 -l 1e-3");
    ASSERT_EQ(fine_tune.rc, 0) << fine_tune.output;
    const std::string br4 = branch_from(e_v1 + "/checkpoints/step_00000006", "br4");
    expect_refused(resume(e_v1, "--checkpoint-dir '" + br4 + "' -x 8 -l 3e-3"),
                   {"its log.jsonl records a later save of this run, " + e_v1 + "/checkpoints/step_00000008"});
    // resumed by its checkpoints alone after a move: its log goes on beside them (round 19; before:
    // afresh at the old place, and the moved log then refused the gap), and on from there
    const std::string r1 = c.dir.file("r1"), r2 = c.dir.file("r2");
    ASSERT_EQ(run(c.train_gpt(r1, "-x 4 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    ASSERT_EQ(run("mv '" + r1 + "' '" + r2 + "'").rc, 0);
    const CommandResult by_checkpoints =
        run(train_gpt_binary() + " --resume --checkpoint-dir '" + r2 + "/checkpoints' -x 6");
    ASSERT_EQ(by_checkpoints.rc, 0) << by_checkpoints.output;
    EXPECT_CONTAINS(by_checkpoints.output, "its log goes on beside them, in " + r2 + "\n");
    EXPECT_FALSE(file_exists(r1));
    const CommandResult on = resume(r2, "-x 8");
    ASSERT_EQ(on.rc, 0) << on.output;
    EXPECT_CONTAINS(read_text(r2 + "/log.jsonl"), "\"step\":8");
    // a rollback after two moves with a resume between them
    const std::string m1 = c.dir.file("m1"), m2 = c.dir.file("m2"), m3 = c.dir.file("m3");
    ASSERT_EQ(run(c.train_gpt(m1, "-x 4 --checkpoint-every 2 --keep-checkpoints 10")).rc, 0);
    ASSERT_EQ(run("mv '" + m1 + "' '" + m2 + "'").rc, 0);
    ASSERT_EQ(resume(m2, "-x 8").rc, 0);
    ASSERT_EQ(run("mv '" + m2 + "' '" + m3 + "' && rm -r '" + m3 + "/checkpoints/step_00000004' '" + m3 +
                  "/checkpoints/step_00000006' '" + m3 + "/checkpoints/step_00000008'")
                  .rc,
              0);
    const CommandResult rolled = resume(m3, "-x 8");
    ASSERT_EQ(rolled.rc, 0) << rolled.output;
    EXPECT_CONTAINS(rolled.output, "resuming from " + m3 + "/checkpoints/step_00000002");
    // a project directory with -o and --checkpoint-dir side by side, moved, then rolled back
    const std::string prj = c.dir.file("prj"), prj2 = c.dir.file("prj2");
    ASSERT_EQ(run(c.train_gpt(prj + "/out", "-x 6 --checkpoint-every 2 --checkpoint-dir '" + prj + "/ckpt'")).rc, 0);
    ASSERT_EQ(run("mv '" + prj + "' '" + prj2 + "' && rm -r '" + prj2 + "/ckpt/step_00000006'").rc, 0);
    const CommandResult project = resume(prj2 + "/out", "--checkpoint-dir '" + prj2 + "/ckpt' -x 6");
    ASSERT_EQ(project.rc, 0) << project.output;
    EXPECT_CONTAINS(project.output, "resuming from " + prj2 + "/ckpt/step_00000004");
}

// Round 12: a previous run in a default `out` that is a symbolic link (to scratch space) moves
// aside as the link; the new run's plain directory, on the working directory's disk, is said.
TEST(Faults, MovingASymlinkedOutAsideSaysWhereTheNewRunGoes) {
    Corpus c;
    const std::string cwd = c.dir.file("cwd"), scratch = c.dir.file("scratch/o");
    make_dirs(cwd);
    make_dirs(scratch);
    ASSERT_EQ(run("ln -s '" + scratch + "' '" + cwd + "/out'").rc, 0);
    ASSERT_EQ(run(c.train_gpt_in(cwd, "-x 2")).rc, 0);
    const CommandResult second = run(c.train_gpt_in(cwd, "-x 2"));
    ASSERT_EQ(second.rc, 0) << second.output;
    EXPECT_CONTAINS(second.output,
                    "warning: out was a symbolic link to " + scratch + ": the link is now out.previous-");
    EXPECT_TRUE(file_exists(scratch + "/log.jsonl")) << "the previous run stays where the link points";
    // a link to a place that is gone (a scratch area not mounted): said so, not "not a directory"
    // (round 32), the default out and a given -o alike
    const std::string gone = c.dir.file("gone");
    ASSERT_EQ(run("rm -r '" + cwd + "/out' && ln -s '" + gone + "' '" + cwd + "/out'").rc, 0);
    expect_refused(run(c.train_gpt_in(cwd, "-x 2")),
                   {"cannot create directory out: it is a link to " + gone + ", which does not exist"});
    expect_refused(run(c.train_gpt(cwd + "/out", "-x 2")), {"it is a link to " + gone + ", which does not exist"});
    EXPECT_FALSE(file_exists(gone));
}

// Round 10: after the checkpoints were moved, a branch into the run's own -o is still refused (before:
// the log's later saves no longer existed at their recorded paths, and the branch was spliced on);
// deleting the newest checkpoint to roll a run back, in its own directory, still resumes.
TEST(Faults, ABranchAfterTheCheckpointsMovedIsRefusedAndARollbackResumes) {
    Corpus c;
    const std::string o = c.dir.file("o"), moved = c.dir.file("o_ck"), branch = c.dir.file("br");
    ASSERT_EQ(run(c.train_gpt(o, "-x 8 --checkpoint-every 2 --keep-checkpoints 4")).rc, 0);
    ASSERT_EQ(run("mv '" + o + "/checkpoints' '" + moved + "'").rc, 0);
    make_dirs(branch);
    ASSERT_EQ(run("cp -r '" + moved + "/step_00000004' '" + branch + "/'").rc, 0);
    const auto before = directory_snapshot(o);
    expect_refused(run(train_gpt_binary() + " --resume -o '" + o + "' --checkpoint-dir '" + branch + "' -x 8 -l 1e-3"),
                   {"its log.jsonl records a later save of this run"});
    EXPECT_EQ(directory_snapshot(o), before);
    // a rollback: the newest checkpoint deleted where it was saved, the one before resumed
    const std::string r = c.dir.file("r");
    ASSERT_EQ(run(c.train_gpt(r, "-x 6 --checkpoint-every 2")).rc, 0);
    ASSERT_EQ(run("rm -r '" + r + "/checkpoints/step_00000006'").rc, 0);
    const CommandResult back = run(train_gpt_binary() + " --resume -o '" + r + "' -x 6");
    ASSERT_EQ(back.rc, 0) << back.output;
    EXPECT_CONTAINS(back.output, "resuming from " + r + "/checkpoints/step_00000004");
}
