// resume.h — continuing a run from its newest checkpoint: the run's flags come back from the
// checkpoint (those given on the command line override them), and its JSONL log continues
// after the checkpoint's step, so that no step appears twice.
//
// The model's and the optimizer's state, the data position and the counters are restored by
// the trainer (train_gpt.cu: load_checkpoint); this file restores what the run was told.
#pragma once

#include "checkpoint/checkpoint.h"
#include "train/config.h"

#include <optional>
#include <set>

#include <cstdint>
#include <string>
#include <vector>

namespace train_gpt {

// The checkpoint a run resumes from, in `root` (--checkpoint-dir): the newest step directory,
// verified — its manifest read and checked, every file it lists present with its size and XXH3
// checksum (one read of the whole checkpoint). nullopt when root holds no step directory.
// A damaged newest checkpoint (no manifest, a truncated or invalid one, a file missing, truncated
// or altered) is an error naming the directory, the file and the problem; with `fallback`
// (--resume-from-intact), the newest intact one is taken instead, and the damaged ones newer than
// it are listed in `damaged` (directory and problem). Reads only.
struct ResumeChoice {
    std::string dir;
    CheckpointManifest manifest;
    std::vector<std::pair<std::string, std::string>> damaged;   // newest first
};
std::optional<ResumeChoice> choose_resume_checkpoint(const std::string& root, bool fallback);

// Renames a damaged checkpoint directory out of the way of the steps a resumed run will save:
// step_00000600 → step_00000600.damaged (.damaged.2, ... when taken). Nothing in it is changed or
// deleted; checkpoint listings and pruning ignore the new name. Returns the new path.
std::string set_aside_damaged_checkpoint(const std::string& dir);
// The name set_aside_damaged_checkpoint gives `dir`: dir.damaged, or .damaged.2, ... where taken.
std::string damaged_checkpoint_name(const std::string& dir);

// cfg (this command line, parsed) becomes the run of `checkpoint` (a step directory) with the
// flags given now on top, and --checkpoint-dir the directory the checkpoint was found in, unless
// given. Returns the flags given now that differ from the checkpoint's run. *recorded: false for
// a checkpoint that records no flags (cfg is then left as it is). *notices: the relative paths
// taken from where the checkpoint's run was started (parse_resumed_command_line).
std::vector<FlagOverride> resume_run_flags(int argc, const char* const* argv, const std::string& checkpoint,
                                           TrainConfig& cfg, bool* recorded, std::vector<std::string>* notices);

// What a run's log.jsonl says about the run that wrote it (a missing file: nothing): the
// checkpoints it saved (step, path; oldest first) and whether it finished (a summary record).
// A torn last line (a crash mid-write) is left out; an unparsable line before the last fails,
// naming the file and line.
struct LoggedRun {
    std::vector<std::pair<int64_t, std::string>> checkpoints;
    // every checkpoint the log records saving or resuming from: (resolved path, manifest hash) —
    // the hash ("" in logs from before it) finds a checkpoint again after it was moved
    std::vector<std::pair<std::string, std::string>> known;
    std::vector<std::pair<std::string, std::string>> saves;   // the same, of its checkpoint records only
    std::set<std::string> run_ids;       // the run identities its start, resume, checkpoint and summary records carry
    std::set<std::string> output_dirs;   // the absolute --output-dir its start and resume records name
    std::string last_output_dir;         // the one its last start or resume record names ("": none)
    int64_t last_step = -1;              // the last step record's step (-1: none)
    int64_t summary_step = -1;           // the step of its last summary (-1: none)
    bool finished = false;
    bool auto_resumed = false;             // a start or resume record of it says --auto-resume (a job requeued)
    std::optional<double> best_val_loss;   // the lowest val loss its val records hold (the first such)
    int64_t best_val_step = -1;            // and its step
    int64_t record_count = 0;              // how many records it holds (0: an empty file, nothing to lose)
    bool saved(const std::string& checkpoint) const;   // a checkpoint record of this step directory
    // a checkpoint record of this step (of this manifest's hash, where both have one)
    bool saved_step(int64_t step, const std::string& manifest_hash = "") const;
    // a checkpoint or resume record of this step directory: by its manifest's hash where both have one
    // (found after a move; another checkpoint at its path is not it), else by its path
    bool knows(const std::string& checkpoint, const std::string& manifest_hash) const;
    // a checkpoint record (a save, not a resume) of this checkpoint, strictly: by its manifest's hash
    // where both sides have one, else by path. A log that saved it holds the steps before it.
    bool records(const std::string& checkpoint, const std::string& manifest_hash) const;
    // the manifest hash a checkpoint record of this path recorded ("": none, or an older log)
    std::string hash_of(const std::string& checkpoint) const;
};
// The hash a log records for a checkpoint: of its manifest.json (16 hex digits), "" if unreadable.
std::string manifest_hash(const std::string& checkpoint);
LoggedRun read_logged_run(const std::string& path);

// The log of a run resumed at `step`: keeps the records up to the checkpoint record of that step
// (the trainer logs {"type": "checkpoint", "step": s, ...} when it saves one) and drops the rest,
// which the resumed run writes again. A log without that record keeps the step and fp8 records
// of steps <= step and the other records of steps < step. Either way the val, hellaswag and
// sample records of `step` itself are kept, but for the types in `written_again`: those the
// resumed run writes again at its first step (round 35: a resume with -v 0 dropped the val loss
// of its checkpoint's step, and the best val loss with it). A torn last line is dropped; an
// unparsable line before the last fails (read as read_logged_run reads). Rewrites the file
// atomically; a missing file is left missing.
void truncate_log_for_resume(const std::string& path, int64_t step, const std::set<std::string>& written_again);

}   // namespace train_gpt
