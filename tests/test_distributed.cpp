// test_distributed.cpp — data parallel training and checkpoints, through the real binary:
//   * -np 1, 2, 4 (mpirun), --zero 0 and 1, the same global batch: the same losses;
//   * resume on the same world size is bit-exact; a checkpoint saved on 4 ranks resumes on 2 and 1;
//   * crash safety: SIGKILL at random moments, many while a checkpoint is being written;
//   * bad checkpoints are refused with the file named, and nothing is deleted.
#include "checkpoint/checkpoint.h"
#include "rng.h"
#include "data/shard.h"
#include "test_util.h"
#include "tests/model_test_util.h"
#include "tests/tolerances.h"
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <set>
#include <sys/wait.h>
#include <sstream>
#include <thread>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

struct Corpus {
    ScratchDir dir;
    Corpus() {
        Rng rng(1);
        std::string text;
        const char* words[] = {"light ", "God ", "earth ", "and ", "the ", "waters. ", "said ", "Let "};
        for (int i = 0; i < 3000; i++)
            text += words[rng.below(8)];
        std::vector<uint32_t> tokens(text.begin(), text.end());
        write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
        Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    }
    // a 2-layer, 32-wide model; B is per rank, so B·ranks is the global batch
    std::string train_gpt(int ranks, int B, const std::string& out, const std::string& extra) const {
        std::string launcher = ranks > 1 ? format("mpirun --oversubscribe --allow-run-as-root -np %d ", ranks) : "";
        return launcher + train_gpt_binary() + " -i '" + dir.file("train_*.bin") + "' -j '' --tokenizer '" +
               dir.file("tokenizer.bin") + "' -e d2 --n-embd 32 -t 16 -g 0 --threads 1 --warmup-steps 2 " +
               format("-b %d -o '%s' ", B, out.c_str()) + extra;
    }
};

// the "step" records of a run's log, by step
std::map<int, double> losses_of(const std::string& log_path) {
    std::map<int, double> out;
    std::istringstream in(read_text(log_path));
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line);
        if (j["type"] == "step") out[j["step"].get<int>()] = j["loss"].get<double>();
    }
    return out;
}

// the last step a log records (0 if none yet; a line being written is skipped)
int last_step_of(const std::string& log_path) {
    int step = 0;
    std::ifstream in(log_path);
    for (std::string line; std::getline(in, line);) {
        try {
            auto j = nlohmann::json::parse(line);
            if (j["type"] == "step") step = j["step"].get<int>();
        } catch (const nlohmann::json::exception&) {
        }
    }
    return step;
}

void run_ok(const std::string& command) {
    std::string output;
    ASSERT_EQ(run_command(command, &output), 0) << command << "\n" << output;
}

// The bound on a step's gradients when the same global batch is split over another number of
// ranks (tests/tolerances.h): each rank's GEMMs run over fewer rows, which the BLAS may block, and
// so sum, differently, and the weight gradients' sums over the batch's B·T rows are regrouped by
// the all-reduce; every value of the forward (10L + 2 stored tensors) and backward (2 + 8L) chain
// may carry a reordered FP32 sum of up to K = max(4C, B·T) terms.
double regrouped_gradient_delta(int n_layer, int C, int BT) {
    const int n = (10 * n_layer + 2) + backward_chain_length(n_layer);
    return std::sqrt(n) * reordered_fp32_sum(std::max(4 * C, BT));
}

// `a`'s losses against `reference`'s, step by step, within tests/tolerances.h's
// trained_loss_bounds(reference, δ) plus a reordered mean over the batch's `BT` tokens (and
// `loss_rel` of the loss, where the loss itself may differ by more).
void expect_same_losses(const std::map<int, double>& a, const std::map<int, double>& reference, double delta, int BT,
                        const char* what, double loss_rel = 0) {
    ASSERT_EQ(a.size(), reference.size()) << what;
    std::vector<double> ref;
    for (auto& [step, loss] : reference)
        ref.push_back(loss);
    const std::vector<double> bounds = trained_loss_bounds(ref, delta);
    size_t i = 0;
    for (auto& [step, loss] : reference) {
        ASSERT_TRUE(a.count(step)) << what << ": step " << step;
        EXPECT_LE(std::fabs(a.at(step) - loss), bounds[i] + (reordered_fp32_sum(BT) + loss_rel) * loss)
            << what << ": step " << step;
        i++;
    }
}

// the final checkpoint's file checksums: equal checksums = identical weights and optimizer state
std::map<std::string, uint64_t> checksums(const std::string& checkpoint) {
    std::map<std::string, uint64_t> out;
    for (auto& [name, record] : read_manifest(checkpoint).files)
        out[name] = record.xxh3;
    return out;
}

}   // namespace

TEST(Distributed, OneTwoAndFourRanksGiveTheSameLossesWithAndWithoutZero) {
    Corpus c;
    const std::string steps = "-x 20 ";
    run_ok(c.train_gpt(1, 4, c.dir.file("np1"), steps));
    const auto reference = losses_of(c.dir.file("np1/log.jsonl"));
    ASSERT_EQ(reference.size(), 20u);
    for (int ranks : {2, 4}) {
        for (int zero : {0, 1}) {
            std::string out = c.dir.file(format("np%d_zero%d", ranks, zero));
            run_ok(c.train_gpt(ranks, 4 / ranks, out, steps + format("--zero %d", zero)));
            expect_same_losses(losses_of(out + "/log.jsonl"), reference, regrouped_gradient_delta(2, 32, 64), 64,
                               format("-np %d --zero %d", ranks, zero).c_str());
        }
    }
}

// fp16: the loss-scaling decisions agree on every rank; fp8: amaxes are MAX-reduced at the end of
// each step, so from the second step on every rank casts with the delayed scales one rank would
// use on the whole batch (the first step's just-in-time scales are each rank's own). What is
// asserted, 2 ranks against 1 on the same global batch:
//   fp16: the same loss scale and the same skipped steps at every step, exactly (the decisions);
//     the losses within trained_loss_bounds for the δ of 16-bit storage: the regrouped FP32 sums
//     flip an occasional 16-bit rounding, each by 2u, in quadrature over the chain of n stored
//     tensors (√n·2u, as tests/test_lm_head_chunks.cpp argues), plus one flip of the loss;
//   fp8: at step 1, from the same weights, every scaled tensor's scale within what a flip of the
//     values it is the maximum of can do, √n·2u(bf16) relative (a rank casting with its own amax
//     instead differs by the ratio of its half's maximum to the whole's; after an update the
//     weights differ by E4M3 flips, and so do the amaxes, by more); the losses within the recipe's
//     own error against fp32, u(E4M3) (tests/test_precision.cpp): E4M3 and E5M2 flips move a
//     value by an eighth or a quarter, and what that does to a loss is not small in δ.
TEST(Distributed, MixedPrecisionAgreesAcrossWorldSizes) {
    Corpus c;
    const int n = (10 * 2 + 2) + backward_chain_length(2);
    for (const char* precision : {"fp16", "fp8"}) {
        const std::string flags = format("-x 10 -p %s --fp8-telemetry-every 1 ", precision);
        const std::string one = c.dir.file(format("%s_np1", precision)), two = c.dir.file(format("%s_np2", precision));
        run_ok(c.train_gpt(1, 4, one, flags));
        run_ok(c.train_gpt(2, 2, two, flags + "--zero 1"));
        const auto np1 = losses_of(one + "/log.jsonl"), np2 = losses_of(two + "/log.jsonl");
        if (std::string(precision) == "fp16") {
            const auto s1 = log_records(one + "/log.jsonl", "step"), s2 = log_records(two + "/log.jsonl", "step");
            ASSERT_EQ(s1.size(), s2.size());
            for (size_t i = 0; i < s1.size(); i++) {
                EXPECT_EQ(s2[i]["loss_scale"], s1[i]["loss_scale"]) << "step " << s1[i]["step"];
                EXPECT_EQ(s2[i]["skipped"], s1[i]["skipped"]) << "step " << s1[i]["step"];
            }
            expect_same_losses(np2, np1, std::sqrt(n) * one_flip(kUnitRoundoffFp16), 64, precision,
                               one_flip(kUnitRoundoffFp16));
        } else {
            const auto t1 = log_records(one + "/log.jsonl", "fp8"), t2 = log_records(two + "/log.jsonl", "fp8");
            ASSERT_EQ(t1.size(), t2.size());
            ASSERT_GT(t1.size(), 0u);
            for (size_t i = 0; i < t1.size(); i++) {
                ASSERT_EQ(t2[i]["tensor"], t1[i]["tensor"]);
                if (t1[i]["step"].get<int>() != 1) continue;   // after an update, the weights differ by E4M3 flips
                // each rank's dY carries the loss gradient of its own tokens, 1/(B·T) per rank, and
                // the all-reduce averages: on 2 ranks every dY is 2× one rank's on the whole batch,
                // its amax too, its scale half (a power of two: the same E5M2 values)
                const std::string tensor = t1[i]["tensor"].get<std::string>();
                const bool dy = tensor.size() > 3 && tensor.compare(tensor.size() - 3, 3, ".dy") == 0;
                const double a = t1[i]["scale"].get<double>(), b = t2[i]["scale"].get<double>() * (dy ? 2 : 1);
                EXPECT_NEAR(b, a, std::sqrt(n) * one_flip(kUnitRoundoffBf16) * a)
                    << tensor << " at step " << t1[i]["step"];
            }
            ASSERT_EQ(np2.size(), np1.size());
            for (auto& [step, loss] : np1)
                EXPECT_NEAR(np2.at(step), loss, kUnitRoundoffE4M3 * loss) << "step " << step;
        }
        double worst = 0;
        for (auto& [step, loss] : np1)
            worst = std::max(worst, std::fabs(np2.at(step) - loss) / loss);
        std::printf("%s: 2 ranks against 1, worst relative loss difference %.2e over 10 steps\n", precision, worst);
    }
}

TEST(Distributed, ResumeIsBitExactAndReshardsFromFourRanksToTwoAndOne) {
    Corpus c;
    const std::string full = c.dir.file("full");
    // uninterrupted: 4 ranks, ZeRO-1, checkpoints every 5 of 10 steps
    run_ok(c.train_gpt(4, 1, full, "-x 10 --checkpoint-every 5 --keep-checkpoints 5 --zero 1"));
    const auto reference = losses_of(full + "/log.jsonl");

    // same world size: resume from step 5 in a copy of the run → identical losses and final state
    const std::string again = c.dir.file("again");
    make_dirs(again + "/checkpoints");
    run_ok("cp -r '" + full + "/checkpoints/step_00000005' '" + again + "/checkpoints/'");
    run_ok(c.train_gpt(4, 1, again, "-x 10 --checkpoint-every 5 --zero 1 --resume"));
    auto resumed = losses_of(again + "/log.jsonl");
    for (int step = 6; step <= 10; step++)
        EXPECT_EQ(resumed.at(step), reference.at(step)) << "step " << step;
    EXPECT_EQ(checksums(again + "/checkpoints/step_00000010"), checksums(full + "/checkpoints/step_00000010"))
        << "weights and optimizer state after the resumed run differ from the uninterrupted run's";

    // 4 → 2 and 4 → 1 ranks, ZeRO-1 and not: the same losses within FP32 reassociation (the
    // resumed log holds steps 6..10)
    for (auto [ranks, zero] : {std::pair{2, 1}, {1, 0}, {2, 0}}) {
        const std::string out = c.dir.file(format("reshard%d_%d", ranks, zero));
        make_dirs(out + "/checkpoints");
        run_ok("cp -r '" + full + "/checkpoints/step_00000005' '" + out + "/checkpoints/'");
        run_ok(c.train_gpt(ranks, 4 / ranks, out, format("-x 10 --zero %d --resume", zero)));
        // from the same weights at step 5: the losses of steps 6..10 within the bound above
        std::map<int, double> after_resume;
        for (int step = 6; step <= 10; step++)
            after_resume[step] = reference.at(step);
        expect_same_losses(losses_of(out + "/log.jsonl"), after_resume, regrouped_gradient_delta(2, 32, 64), 64,
                           format("%d ranks, zero %d", ranks, zero).c_str());
    }
}

// -p fp8 (delayed scaling) saved on 1 rank resumes on 2 and 4 at the same global batch within the
// same bound as fp32's resharding: its dY amax histories are rescaled to the new gradient unit (a
// rank's mean over 2x, 4x fewer tokens: gradients 2x, 4x larger), so the first steps cast with the
// scales the new rank count would have had. Before (round 39): the old histories, scales 2x, 4x
// off, losses ~2e-3 and ~1.5e-2 apart.
TEST(Distributed, Fp8ResumesOnAnotherNumberOfRanksInItsGradientUnits) {
    Corpus c;
    const std::string full = c.dir.file("full"), flags = "-p fp8 --fp8-recipe delayed ";
    run_ok(c.train_gpt(1, 4, full, flags + "-x 8 --checkpoint-every 3 --keep-checkpoints 5"));
    const auto reference = losses_of(full + "/log.jsonl");
    for (int ranks : {2, 4}) {
        const std::string out = c.dir.file(format("reshard%d", ranks));
        make_dirs(out + "/checkpoints");
        run_ok("cp -r '" + full + "/checkpoints/step_00000003' '" + out + "/checkpoints/'");
        run_ok(c.train_gpt(ranks, 4 / ranks, out, flags + "-x 8 --zero 1 --resume"));
        std::map<int, double> after_resume;
        for (int step = 4; step <= 8; step++)
            after_resume[step] = reference.at(step);
        expect_same_losses(losses_of(out + "/log.jsonl"), after_resume, regrouped_gradient_delta(2, 32, 64), 64,
                           format("fp8, 1 to %d ranks", ranks).c_str());
    }
}

TEST(Distributed, ResumeIsBitExactInEveryPrecision) {
    // the loss scaler's state and the FP8 amax histories and scales travel in the manifest
    Corpus c;
    for (const char* precision : {"bf16", "fp16", "fp8"}) {
        const std::string flags = format("-x 6 --checkpoint-every 2 --keep-checkpoints 5 -p %s ", precision);
        const std::string full = c.dir.file(format("%s_full", precision)),
                          again = c.dir.file(format("%s_again", precision));
        run_ok(c.train_gpt(1, 2, full, flags));
        make_dirs(again + "/checkpoints");
        run_ok("cp -r '" + full + "/checkpoints/step_00000004' '" + again + "/checkpoints/'");
        run_ok(c.train_gpt(1, 2, again, flags + "--resume"));
        EXPECT_EQ(checksums(again + "/checkpoints/step_00000006"), checksums(full + "/checkpoints/step_00000006"))
            << precision;
        EXPECT_EQ(read_manifest(again + "/checkpoints/step_00000006").fp8_json,
                  read_manifest(full + "/checkpoints/step_00000006").fp8_json)
            << precision;
    }
}

// SIGKILL at chosen moments of a run that checkpoints every step, each kill followed by a restart
// of the same command: half of the kills land while a checkpoint is being written (the moment its
// step_*.tmp directory appears), the others after a step drawn at random has been logged. After
// every kill each complete checkpoint is intact, and the run, finished at last, ends with the
// state of an uninterrupted run. The kills wait for events, not for a time: on a slow machine
// they land at the same points of the run.
TEST(Distributed, SurvivesSigkillAtRandomMomentsIncludingDuringCheckpointWrites) {
    Corpus c;
    // a wider model on tiny batches: writing a checkpoint is a large part of each step
    // the same command for the first start and every restart: --auto-resume, and --overwrite-output
    // for a restart after a kill that came before the first checkpoint
    const std::string args =
        "-x 16 --n-embd 128 --checkpoint-every 1 --keep-checkpoints 2 --auto-resume --overwrite-output";
    const std::string full = c.dir.file("full");
    run_ok(c.train_gpt(1, 4, full, args));

    const std::string crashy = c.dir.file("crashy"), checkpoints = crashy + "/checkpoints";
    const std::string command = c.train_gpt(1, 4, crashy, args) + " > /dev/null 2>&1";
    auto names_in = [](const std::string& dir) {
        std::set<std::string> names;
        if (DIR* d = opendir(dir.c_str())) {
            while (dirent* e = readdir(d))
                names.insert(e->d_name);
            closedir(d);
        }
        return names;
    };
    auto new_tmp = [&](const std::set<std::string>& before) {
        for (const std::string& name : names_in(checkpoints)) {
            if (name.find(".tmp") != std::string::npos && !before.count(name)) return true;
        }
        return false;
    };
    Rng rng(2024);
    int kills = 0, kills_during_checkpoint = 0, finished = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);   // a hang, not a speed
    for (int attempt = 0; attempt < 100 && (kills < 12 || kills_during_checkpoint < 6); attempt++) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the restarts no longer make progress";
        if (file_exists(checkpoints + "/step_00000016")) run_ok("rm -rf '" + crashy + "'");
        const bool during_write = kills_during_checkpoint < 6 && attempt % 2 == 0;
        const int after_step = 1 + (int)rng.below(15);   // the other kills: once this step is logged
        const std::set<std::string> before = names_in(checkpoints);
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            setpgid(0, 0);
            execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), (char*)nullptr);
            _exit(127);
        }
        int status = 0;
        bool ended = false;
        for (;;) {   // wait for the event, or for the run to end first
            if (waitpid(pid, &status, WNOHANG) == pid) {
                ended = true;
                break;
            }
            if (during_write ? new_tmp(before) : last_step_of(crashy + "/log.jsonl") >= after_step) break;
            if (std::chrono::steady_clock::now() > deadline) break;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        if (ended) {   // it finished first (the resume worked): no kill this time
            EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a resumed run failed";
            finished++;
            continue;
        }
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        kills++;
        // was a checkpoint being saved? then a step_*.tmp directory that was not there before is left
        if (new_tmp(before)) kills_during_checkpoint++;
        // every complete checkpoint is intact: manifest, checksums, model shape
        for (int64_t step : list_checkpoints(checkpoints)) {
            std::string dir = checkpoint_dir(checkpoints, step);
            EXPECT_NO_THROW(verify_checkpoint(dir, read_manifest(dir))) << dir << " damaged after kill " << kills;
        }
    }
    EXPECT_GE(kills, 12);
    EXPECT_GE(kills_during_checkpoint, 6) << "too few kills landed inside a checkpoint write";
    run_ok(command);   // finish the run
    EXPECT_EQ(checksums(checkpoints + "/step_00000016"), checksums(full + "/checkpoints/step_00000016"))
        << "after " << kills << " kills the final weights differ from the uninterrupted run's";
    std::printf(
        "crash test: %d kills, %d during a checkpoint write, %d runs that finished first; final state identical\n",
        kills, kills_during_checkpoint, finished);
}

TEST(Distributed, BadCheckpointsAreRefusedAndNothingIsDeleted) {
    Corpus c;
    const std::string run = c.dir.file("run");
    run_ok(c.train_gpt(1, 2, run, "-x 2 --checkpoint-every 2"));
    const std::string ckpt = run + "/checkpoints/step_00000002";
    std::string output;

    // a directory that is not a checkpoint
    EXPECT_NE(run_command(c.train_gpt(1, 2, c.dir.file("x"), "-x 1 --init-from '" + c.dir.path + "'"), &output), 0);
    EXPECT_CONTAINS(output, c.dir.path);
    // another model config
    EXPECT_NE(run_command(c.train_gpt(1, 2, c.dir.file("y"), "-x 1 --n-embd 64 --init-from '" + ckpt + "'"), &output),
              0);
    EXPECT_CONTAINS(output, ckpt);
    EXPECT_CONTAINS(output, "n_embd");
    // an altered byte in the optimizer state: checksum mismatch naming the file
    std::string state = read_text(ckpt + "/state-00000.safetensors");
    state[state.size() - 3] ^= 1;
    write_text(ckpt + "/state-00000.safetensors", state);
    EXPECT_NE(run_command(c.train_gpt(1, 2, run, "-x 4 --resume"), &output), 0);
    EXPECT_CONTAINS(output, "state-00000.safetensors");
    EXPECT_TRUE(file_exists(ckpt + "/state-00000.safetensors")) << "a bad checkpoint must not be deleted";
    // a fresh run into a directory that holds another run's checkpoints
    EXPECT_NE(run_command(c.train_gpt(1, 2, run, "-x 4 --checkpoint-every 2"), &output), 0);
    EXPECT_CONTAINS(output, "--resume");
    // a missing file
    std::remove((ckpt + "/model.safetensors.index.json").c_str());
    EXPECT_NE(run_command(c.train_gpt(1, 2, run, "-x 4 --resume"), &output), 0);
    EXPECT_CONTAINS(output, "model.safetensors.index.json");
    EXPECT_TRUE(file_exists(ckpt + "/manifest.json"));
}

// Round 20: --resume-from-intact under MPI: rank 0 passed over the damaged newest checkpoint, the
// other ranks did not know it had, and their log check took it for a later save of the run
// ("its log.jsonl records a later save"), so every such requeue ended in MPI_ABORT. Rank 0's list
// of damaged checkpoints goes with its choice.
TEST(Distributed, ResumeFromIntactPassesOverADamagedCheckpointOnEveryRank) {
    Corpus c;
    const std::string out = c.dir.file("run");
    run_ok(c.train_gpt(2, 2, out, "-x 4 --checkpoint-every 2"));
    const std::string newest = out + "/checkpoints/step_00000004";
    std::string state = read_text(newest + "/state-00001.safetensors");
    state[state.size() - 3] ^= 1;
    write_text(newest + "/state-00001.safetensors", state);
    std::string output;
    ASSERT_EQ(run_command(c.train_gpt(2, 2, out, "-x 6 --resume --resume-from-intact"), &output), 0) << output;
    EXPECT_CONTAINS(output, "resuming from " + out + "/checkpoints/step_00000002");
    // round 26: the summary's next: --resume is this run's command, so it says to run it as this one ran
    EXPECT_CONTAINS(output, "the run says how; under this run's launcher, 2 ranks)");
    EXPECT_TRUE(file_exists(newest + ".damaged/manifest.json")) << output;
    EXPECT_EQ(losses_of(out + "/log.jsonl").count(6), 1u);
}
