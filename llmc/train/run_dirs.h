// run_dirs.h — the directories a run writes into: checked before anything is written, locked
// while the run lasts, and never silently taken over from a previous run.
//
//   --output-dir       log.jsonl and config.json. Every run that trains writes them; a run that
//                      does not (-x 0: sampling, evaluating) only where -o is given, so that
//                      sampling a checkpoint never touches the log of the run that wrote it.
//   --checkpoint-dir   step_XXXXXXXX/ directories: used by a run that checkpoints or resumes.
//
// Rules, each an error naming the path (nothing written):
//   * a directory must be one (or not exist yet, below a directory that does);
//   * one run per directory: each is locked (run_lock.h); a second run is refused naming the first;
//   * a run that does not resume does not replace a previous run's log.jsonl or config.json
//     (unless --overwrite-output), and does not write checkpoints among another run's (any step_*
//     directory, damaged ones included).
// Except for the default output directory (no -o given, the checkpoints inside it): a run there
// that finds a previous run's files moves that run aside, whole, to out.previous-<UTC time>, and
// says so, so that the same command (scripts/run_default.sh) runs again as often as it is given.
#pragma once

#include "train/config.h"
#include "train/run_lock.h"

#include <memory>
#include <string>
#include <vector>

namespace train_gpt {

struct RunDirs {
    std::string output;           // where log.jsonl and config.json go; "": the run writes none
    std::string checkpoints;      // the checkpoint directory the run uses; "": none
    bool move_previous = false;   // the default output directory holds a previous run: move it aside
};
// resuming: the run continues a checkpoint (--resume, or --auto-resume that found one).
RunDirs run_dirs(const TrainConfig& cfg, const RunPlan& plan, bool resuming);

// The checks that need no lock, for an early answer: both paths are directories or can be made,
// and the previous-run rules above. Reads only.
void check_run_dirs(const RunDirs& dirs, const TrainConfig& cfg, bool resuming);

// Rank 0, once every other check has passed, before anything is written: creates the directories,
// locks them, and checks the previous-run rules again under the lock. The locks are held as long
// as the returned object lives. Where a filesystem cannot lock, its warning is in `warnings`.
struct HeldRunDirs {
    std::vector<std::unique_ptr<DirLock>> locks;
    std::vector<std::string> warnings;
    std::string moved_to;   // where a previous run in the default output directory went; "": none moved
    // the lock file held for the checkpoint directory: its own, or the output directory's where the
    // two are one directory under two names (a symbolic link, "x" and "../p/x"); "": none held
    std::string checkpoint_lock;
    std::string output_lock;   // the same for the output directory
};
HeldRunDirs hold_run_dirs(const RunDirs& dirs, const TrainConfig& cfg, bool resuming, const std::string& command);

// Rank 0, before each checkpoint of `step`: fails if the checkpoint directory this run locked was
// moved or deleted while it ran (its path may now be another run's, locked by it, whose checkpoints
// this run's save and pruning would mix with and delete). Nothing is written; the error says where
// the directory went. A lock file deleted from the directory, which stayed, is locked again.
void fail_if_checkpoint_dir_moved(const HeldRunDirs& held, const std::string& checkpoints, int64_t step);

// Rank 0, after each step: the output directory's lock file, deleted while the run was live (a
// clean-up of lock files that look stale), is locked again, with a warning, before another run
// can take the directory and replace its log.jsonl; where another run has made one there since,
// the log there is that run's: fails, saying so. (A moved -o needs nothing: the log, open, moved
// with it.)
void keep_output_dir_locked(const HeldRunDirs& held, const std::string& output);

}   // namespace train_gpt
