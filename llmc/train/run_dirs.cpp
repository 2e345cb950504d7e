// run_dirs.cpp — see run_dirs.h.
#include "train/run_dirs.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/train_state.h"
#include "data/shard.h"
#include "train/resume.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

namespace train_gpt {

namespace {

// `path` is a directory, or does not exist and its nearest existing ancestor is a directory this
// process may create entries in.
void check_directory(const std::string& path, const char* flag) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) fail("%s %s: it exists and is not a directory", flag, path.c_str());
        if (::access(path.c_str(), W_OK | X_OK) != 0)
            fail("%s %s: not writable: %s", flag, path.c_str(), std::strerror(errno));
        return;
    }
    std::string ancestor = path;
    while (true) {
        const size_t slash = ancestor.find_last_of('/');
        ancestor = slash == std::string::npos ? "." : slash == 0 ? "/" : ancestor.substr(0, slash);
        if (::stat(ancestor.c_str(), &st) == 0) break;
        if (ancestor == "." || ancestor == "/") return;   // nothing exists: make_dirs will say why
    }
    if (!S_ISDIR(st.st_mode)) {
        fail("%s %s: cannot be created: %s exists and is not a directory", flag, path.c_str(), ancestor.c_str());
    }
    if (::access(ancestor.c_str(), W_OK | X_OK) != 0) {
        fail("%s %s: cannot be created in %s: %s", flag, path.c_str(), ancestor.c_str(), std::strerror(errno));
    }
}

// The room a run's files need under a directory, beyond its own name: a checkpoint's
// "/step_<8+ digits>.tmp/" (or ".damaged.N") and its longest file name with write_file_atomic's
// ".tmp" ("model.safetensors.index.json.tmp", "model-00001-of-01024.safetensors"), with room to
// spare: 80; the output directory's "/config.json.tmp" and "/log.png": 32.
constexpr size_t kCheckpointRoom = 80, kOutputRoom = 32;

// Every path the run will write under `dir` fits the system's limits: each name of `dir` within
// NAME_MAX, and the whole path with `room` more within PATH_MAX (else the first save fails with
// "File name too long", a checkpoint's .tmp left behind).
void check_path_room(const std::string& dir, size_t room, const char* flag) {
    if (dir.size() + room >= PATH_MAX) {
        fail(
            "%s %s: its %zu characters leave too little room for the files the run writes under it (they need %zu "
            "more; a path may have at most %d): give a shorter path",
            flag, dir.c_str(), dir.size(), room, PATH_MAX - 1);
    }
    for (size_t begin = 0; begin <= dir.size();) {
        size_t end = dir.find('/', begin);
        if (end == std::string::npos) end = dir.size();
        if (end - begin > NAME_MAX) {
            fail("%s %s: its name '%s…' has %zu characters (a name may have at most %d)", flag, dir.c_str(),
                 dir.substr(begin, 16).c_str(), end - begin, NAME_MAX);
        }
        begin = end + 1;
    }
}

// `path` as spelled, made absolute: links in it are not followed (what it names moves with the
// names it is spelled through)
std::string spelled_path(const std::string& path) {
    return std::filesystem::absolute(path).lexically_normal().string();
}

// `path` is `dir` or lies under it (both spelled alike: absolute, normal or resolved)
bool is_under(const std::string& path, const std::string& dir) {
    return path == dir || path.compare(0, dir.size() + 1, dir + "/") == 0;
}

// The config.json of a run's last start says --auto-resume was given (false where it is
// unreadable, or not a train_gpt run's: nothing to tell by)
bool started_with_auto_resume(const std::string& config_json) {
    if (!file_exists(config_json)) return false;
    try {
        const nlohmann::json j =
            nlohmann::json::parse(read_json_file_text(config_json, size_t(16) << 20, "a config.json"), nullptr, false);
        return j.is_object() && j.contains("auto_resume") && j["auto_resume"] == true;
    } catch (const Error&) {
        return false;
    }
}

void check_previous_run(const RunDirs& dirs, const TrainConfig& cfg, bool resuming) {
    struct stat link;   // a link to the previous run moves as a link: the run's files stay where they are
    const bool output_is_link = ::lstat(dirs.output.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    if (dirs.move_previous && !cfg.init_from.empty() && output_is_link) {
        // ... so a start model is taken away only where its path is spelled through the link's
        // name, which the move gives to a new, empty directory
        const std::string out = spelled_path(dirs.output), from = spelled_path(cfg.init_from);
        if (is_under(from, out)) {
            fail(
                "--init-from %s is inside %s, the default --output-dir (a link to %s), which this run would move "
                "aside (to %s.previous-<time>): give the start model as %s, or this run its own --output-dir",
                cfg.init_from.c_str(), dirs.output.c_str(), resolved_path(dirs.output).c_str(), dirs.output.c_str(),
                resolved_path(cfg.init_from).c_str());
        }
    }
    if (dirs.move_previous && !cfg.init_from.empty() && !output_is_link) {
        // a fine-tune from the previous run's checkpoints, into the default directory: moving that
        // run aside took this run's start model away from the name it records (config.json,
        // manifests), which its own checkpoints then took
        const std::string out = resolved_path(dirs.output);
        auto inside = [&](const std::string& path) { return is_under(resolved_path(path), out); };
        // the root given, or the step it starts from (a link into out: round 21)
        std::error_code ec;
        const std::optional<std::string> newest =
            std::filesystem::is_directory(cfg.init_from, ec) ? latest_checkpoint(cfg.init_from) : std::nullopt;
        // ... or any of the files it reads there (links to them: cp -rs makes such a tree)
        auto links_inside = [&](const std::string& dir) {
            for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
                if (inside(entry.path().string())) return true;
            }
            return false;
        };
        const std::string step = newest ? *newest : cfg.init_from;
        const bool through_link =
            !inside(cfg.init_from) && (inside(step) || (std::filesystem::is_directory(step, ec) && links_inside(step)));
        if (inside(cfg.init_from) || through_link) {
            fail(
                "--init-from %s%s is inside %s, the default --output-dir, whose previous run this run would move "
                "aside (to %s.previous-<time>): give this run its own --output-dir",
                cfg.init_from.c_str(),
                through_link ? format(" (%s, through links into %s)", step.c_str(), resolved_path(step).c_str()).c_str()
                             : "",
                dirs.output.c_str(), dirs.output.c_str());
        }
    }
    if (dirs.move_previous) {
        // what else the run reads from inside out, or writes its output to there: it would go with
        // the previous run (round 28: shards under out/ were read from, stdout redirected to
        // out/train.log was written into, out.previous-<time>). A path spelled through out (through
        // a link inside it too: out/data -> /scratch/data) moves with its name; a file of out's
        // tree reached by another name moves too, unless out is a link (which moves alone)
        const std::string out = resolved_path(dirs.output), spelled_out = spelled_path(dirs.output);
        auto inside = [&](const std::string& path) {
            return is_under(spelled_path(path), spelled_out) || (!output_is_link && is_under(resolved_path(path), out));
        };
        auto refuse = [&](const std::string& what) {
            fail(
                "%s is inside %s, the default --output-dir, whose previous run this run would move aside (to "
                "%s.previous-<time>), and would go with it: give this run its own --output-dir (-o), or keep it "
                "out of %s",
                what.c_str(), dirs.output.c_str(), dirs.output.c_str(), dirs.output.c_str());
        };
        const RunData data = run_data(cfg);
        for (const auto& [flag, glob] : {std::pair<const char*, std::string>{"-i", data.train}, {"-j", data.val}}) {
            if (glob.empty()) continue;
            std::vector<std::string> shards;
            try {
                shards = expand_glob(glob);
            } catch (const Error&) {   // matches nothing: the loaders say so, naming the flag
            }
            for (const std::string& shard : shards)
                if (inside(shard)) refuse(format("%s %s (%s)", flag, glob.c_str(), shard.c_str()));
        }
        for (const auto& [flag, path] :
             {std::pair<const char*, std::string>{"--tokenizer", cfg.tokenizer}, {"--hellaswag", cfg.hellaswag}}) {
            if (!path.empty() && file_exists(path) && inside(path)) refuse(format("%s %s", flag, path.c_str()));
        }
        // the previous run's log, parted from checkpoints it saved elsewhere (its own
        // --checkpoint-dir): its restart would find them, and another run's log (round 32)
        // (out a link: the log stays where the link leads, with them)
        const LoggedRun logged = read_logged_run(dirs.output + "/log.jsonl");
        const LoggedRun previous = output_is_link ? LoggedRun{} : logged;
        // (a copy of a run's directory: its log names the original's checkpoints, under the -o its
        // records name, which are not elsewhere: round 33)
        // (nor are those a link inside out leads to, out/checkpoints -> /scratch/ck: the link moves
        // with the log, round 34)
        std::vector<std::string> linked;
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(dirs.output, ec))
            if (std::error_code link_ec; entry.is_symlink(link_ec))
                linked.push_back(resolved_path(entry.path().string()));
        auto elsewhere = [&](const std::string& checkpoint) {
            const std::string path = resolved_path(checkpoint);
            if (is_under(path, out)) return false;
            for (const std::string& target : linked)
                if (is_under(path, target)) return false;
            for (const std::string& logged_out : previous.output_dirs)
                if (is_under(path, logged_out) || is_under(path, resolved_path(logged_out))) return false;
            return true;
        };
        for (auto saved = previous.checkpoints.rbegin(); saved != previous.checkpoints.rend(); ++saved) {
            if (file_exists(saved->second + "/manifest.json") && elsewhere(saved->second)) {
                fail(
                    "%s holds a previous run, which this run would move aside, whose checkpoints are elsewhere (%s): "
                    "moved aside, its log would be parted from them. Give this run its own --output-dir (-o)",
                    dirs.output.c_str(), saved->second.c_str());
            }
        }
        // the previous run a job that --auto-resume restarts (a requeue), not finished: moved aside,
        // its restart found no checkpoint in out and trained from step 0, or resumed this run's
        // checkpoint as its own where the flags agree (round 34). A link moves too: the job's out
        // is then the new directory. Its checkpoints: in out/checkpoints, in out itself, or
        // wherever its log saved them (--checkpoint-dir out/ckpt: round 35); a job started with
        // --auto-resume and once resumed by hand with --resume is one still (its log says so).
        std::optional<std::string> newest = latest_checkpoint(dirs.output + "/checkpoints");
        if (!newest) newest = latest_checkpoint(dirs.output);
        for (auto saved = logged.checkpoints.rbegin(); !newest && saved != logged.checkpoints.rend(); ++saved)
            if (file_exists(saved->second + "/manifest.json")) newest = saved->second;
        const bool finished = logged.summary_step >= 0 && logged.summary_step >= logged.last_step;
        if (newest && !finished && (logged.auto_resumed || started_with_auto_resume(dirs.output + "/config.json"))) {
            fail(
                "%s holds a run started with --auto-resume that has not finished (its newest checkpoint: %s), a job "
                "waiting to be requeued: moved aside, its restart would find no checkpoint in %s and start over. "
                "Give this run its own --output-dir (-o); to go on with that job, give its command again (with "
                "--auto-resume); to set it aside, move %s yourself",
                dirs.output.c_str(), newest->c_str(), dirs.output.c_str(), dirs.output.c_str());
        }
        for (const auto& [fd, name] : {std::pair<int, const char*>{1, "stdout"}, {2, "stderr"}}) {
            char target[PATH_MAX + 1] = {0};
            const std::string link = "/proc/self/fd/" + std::to_string(fd);
            struct stat st;
            if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::readlink(link.c_str(), target, PATH_MAX) > 0 &&
                target[0] == '/' && is_under(target, out)) {   // into the previous run's files, wherever they are
                refuse(format("%s, redirected to %s,", name, target));
            }
        }
    }
    if (resuming || dirs.move_previous) return;
    // --auto-resume that found no checkpoint restarts a run killed before its first one: the same
    // command again (a requeued job), whose log and config it replaces (the trainer says so)
    if (!dirs.output.empty() && !cfg.overwrite_output && !cfg.auto_resume) {
        std::string found;
        for (const char* name : {"log.jsonl", "config.json"}) {
            if (file_exists(dirs.output + "/" + name)) found += std::string(found.empty() ? "" : " and ") + name;
        }
        if (!found.empty()) {
            DirLock::fail_if_held(dirs.output);   // a live run's, not a previous one (round 41)
            fail(
                "%s holds the %s of a previous run, which this run would replace. Continue that run with --resume, "
                "give this one another --output-dir, or add --overwrite-output to replace them",
                dirs.output.c_str(), found.c_str());
        }
    }
    // ... but only that: not the log of a run that saved checkpoints (into another --checkpoint-dir,
    // or since moved or deleted), resumed from one (round 30: a resume killed before its next save
    // was taken for a start) or finished, which a fresh start would lose
    if (!dirs.output.empty() && !cfg.overwrite_output && cfg.auto_resume) {
        const LoggedRun before = read_logged_run(dirs.output + "/log.jsonl");
        if (!before.known.empty() || before.finished) {
            const std::string what =
                !before.checkpoints.empty()
                    ? format("saved checkpoints (its newest: %s)", before.checkpoints.back().second.c_str())
                : !before.known.empty() ? format("resumed from %s", before.known.back().first.c_str())
                                        : std::string("finished (it logged its summary)");
            fail(
                "--auto-resume found no checkpoint in %s, but %s/log.jsonl is the log of a run that %s: a fresh start "
                "would replace it. Give --checkpoint-dir of that run's checkpoints to continue it, another "
                "--output-dir for a new run, or --overwrite-output to replace it",
                checkpoint_dir_of(cfg).c_str(), dirs.output.c_str(), what.c_str());
        }
    }
    if (!dirs.checkpoints.empty() && cfg.checkpoint_every > 0) {
        if (const std::optional<std::string> newest = latest_checkpoint(dirs.checkpoints)) {
            fail(
                "%s already holds checkpoints (newest: %s); continue that run with --resume, or give another "
                "--checkpoint-dir",
                dirs.checkpoints.c_str(), newest->c_str());
        }
    }
}

}   // namespace

RunDirs run_dirs(const TrainConfig& cfg, const RunPlan& plan, bool resuming) {
    RunDirs d;
    if (cfg.steps > 0 || cfg.given.count("output-dir")) d.output = cfg.output_dir;
    if ((cfg.checkpoint_every > 0 && cfg.steps > 0) || resuming) d.checkpoints = plan.checkpoint_dir;
    // the default directory, with the checkpoints (if any) inside it, holding a previous run
    const bool defaults = !d.output.empty() && !cfg.given.count("output-dir") && !cfg.given.count("checkpoint-dir");
    if (defaults && !resuming && !cfg.auto_resume && !cfg.overwrite_output) {
        d.move_previous = file_exists(d.output + "/log.jsonl") || file_exists(d.output + "/config.json") ||
                          latest_checkpoint(d.output + "/checkpoints").has_value();
    }
    return d;
}

// A checkpoint's step directory (its manifest.json) or a transformers model directory (a
// config.json beside model weights) is a model, not a place to write a run into: its config.json
// is part of the model and checksummed, a log or a checkpoint beside it would damage it.
static void refuse_model_directory(const std::string& dir, const char* flag) {
    const bool manifest = file_exists(dir + "/manifest.json");
    const bool weights = file_exists(dir + "/model.safetensors") ||
                         file_exists(dir + "/model.safetensors.index.json") ||
                         file_exists(dir + "/model-00001-of-00001.safetensors");
    if (manifest || weights) {
        fail(
            "%s %s: that is %s, not a directory to write a run into; give another %s (to continue the run it "
            "belongs to: --resume -o <that run's output directory>)",
            flag, dir.c_str(),
            manifest ? "a checkpoint's step directory (it holds manifest.json)" : "a model directory", flag);
    }
    // ... nor is any directory inside a step directory: the run that saved it deletes it whole
    // when it prunes its old checkpoints (round 36: a fine-tune kept in its start step's
    // directory, -o <base>/checkpoints/step_2/ft, went with it)
    // (or inside, or at, a step's name in a checkpoint directory: an unfinished save's step_N.tmp,
    // which the next save removes (round 37), or a step not saved yet, whose save then fails
    // "already exists" and loses the steps since the last one (round 38))
    const std::filesystem::path resolved = resolved_path(dir);
    for (std::filesystem::path up = resolved; up.has_relative_path(); up = up.parent_path()) {
        const std::string name = up.filename().string(), parent = up.parent_path().string();
        const bool tmp_name = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
                              parse_step_name(name.substr(0, name.size() - 4)) >= 0;
        const bool step_name = parse_step_name(name) >= 0;
        const bool saved = step_name && file_exists((up / "manifest.json").string());
        const bool in_checkpoints = file_exists(lock_file_of(parent)) || !list_checkpoints(parent).empty();
        if (saved && up != resolved) {
            fail(
                "%s %s: it is inside %s, a checkpoint's step directory, which the run that saved it deletes whole "
                "when it prunes its old checkpoints (--keep-checkpoints): give a %s outside it",
                flag, dir.c_str(), up.c_str(), flag);
        }
        if (!saved && (tmp_name || step_name) && in_checkpoints) {
            fail(
                "%s %s: it is %s%s, named as a checkpoint's %s in the checkpoint directory %s, which its run %s: "
                "give a %s outside it",
                flag, dir.c_str(), up == resolved ? "" : "inside ", up.c_str(), tmp_name ? "unfinished save" : "step",
                parent.c_str(), tmp_name ? "deletes whole at its next save" : "saves there when it gets to that step",
                flag);
        }
    }
}

void check_run_dirs(const RunDirs& dirs, const TrainConfig& cfg, bool resuming) {
    if (!dirs.output.empty()) refuse_model_directory(dirs.output, "--output-dir");
    if (!dirs.checkpoints.empty()) refuse_model_directory(dirs.checkpoints, "--checkpoint-dir");
    if (!dirs.output.empty()) {
        check_path_room(dirs.output, kOutputRoom, "--output-dir");
        check_directory(dirs.output, "--output-dir");
    }
    if (!dirs.checkpoints.empty()) {
        check_path_room(dirs.checkpoints, kCheckpointRoom, "--checkpoint-dir");
        check_directory(dirs.checkpoints, "--checkpoint-dir");
    }
    check_previous_run(dirs, cfg, resuming);
}

namespace {
// Fails naming the holder if a live run (or prepare_text) holds a directory in the tree under
// `dir`, `dir` included, links to directories followed (their paths go with a move of `dir`):
// moving `dir` aside would move that run's directory from under it (round 30: a run with -o
// out/mine stopped at its next save, its steps since the last checkpoint lost). Each directory is
// looked into once (by device and inode: links back up end there, round 31: a walk with a depth
// bound missed deeper runs and was exponential in such links); one that cannot be listed, or a
// tree of more than `kMaxDirs` directories, fails too: what it cannot look into, it does not move.
// So does another run's directory inside it that holds checkpoints, live or not.
void fail_unless_movable_aside(const std::string& dir) {
    constexpr size_t kMaxDirs = 100000;
    namespace fs = std::filesystem;
    DirLock::fail_if_held(dir);
    auto cannot_look = [&](const std::string& why) {
        fail(
            "%s holds a previous run, which this run would move aside, but %s, so a live run inside it could be "
            "moved from under it: give this run its own --output-dir (-o)",
            dir.c_str(), why.c_str());
    };
    std::set<std::pair<dev_t, ino_t>> seen;
    // Another run's checkpoints in the tree, live or not, stop it too: a job waiting to be requeued
    // with -o out/d48 would find none and start over (round 32). Checkpoints are the previous run's
    // own (they move with its log) where its log knows the newest of them, by its manifest's hash
    // (a copied run's log names the original's paths): not by their directory's name, nor by an
    // earlier save there (round 36: another run's --checkpoint-dir out/checkpoints, its -o
    // elsewhere, was taken as out's own by name; round 37: --checkpoint-dir out itself, and newer
    // saves into out/checkpoints by a resume whose log is elsewhere).
    const LoggedRun previous = read_logged_run(dir + "/log.jsonl");
    auto theirs = [&](const std::string& d) -> std::optional<std::string> {
        const std::optional<std::string> newest = latest_checkpoint(d);
        if (!newest || previous.knows(*newest, manifest_hash(*newest))) return std::nullopt;
        // ... or where a crash came between its save and the log's record of it: the checkpoint
        // names the log's run, at the step its log ends at, unfinished (round 38: the quick start
        // after such a crash called its own checkpoint another run's)
        try {
            const CheckpointManifest manifest = read_manifest(*newest);
            const std::string id = counters_from_json(manifest.extra_json, *newest + "/manifest.json").run_id;
            if (!id.empty() && previous.run_ids.count(id) && manifest.step == previous.last_step &&
                previous.summary_step < manifest.step)
                return std::nullopt;
        } catch (const Error&) {   // damaged: not known to be the run's
        }
        return newest;
    };
    std::vector<std::string> todo = {dir};
    while (!todo.empty()) {
        const std::string at = todo.back();
        todo.pop_back();
        struct stat st;
        if (::stat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !seen.insert({st.st_dev, st.st_ino}).second)
            continue;
        if (seen.size() > kMaxDirs) cannot_look(format("it holds more than %zu directories", kMaxDirs));
        if (at != dir) {
            try {
                DirLock::fail_if_held(at);
            } catch (const Error& e) {
                fail("%s holds a previous run, which this run would move aside, with %s inside it: %s", dir.c_str(),
                     at.c_str(), e.what());
            }
        }
        if (file_exists(lock_file_of(at))) {   // a run's directory (its -o or its --checkpoint-dir)
            std::optional<std::string> newest = theirs(at);
            if (!newest && at != dir) newest = theirs(at + "/checkpoints");
            // (or its log's, kept elsewhere: moved along, its log would be parted from them,
            // round 36)
            const LoggedRun logged = newest || at == dir ? LoggedRun{} : read_logged_run(at + "/log.jsonl");
            for (auto saved = logged.checkpoints.rbegin(); !newest && saved != logged.checkpoints.rend(); ++saved) {
                if (file_exists(saved->second + "/manifest.json") &&
                    !previous.knows(saved->second, manifest_hash(saved->second)))
                    newest = saved->second;
            }
            if (newest && at == dir) {
                fail(
                    "%s holds a previous run, which this run would move aside, and checkpoints its log does not "
                    "know, another run's (%s; its --checkpoint-dir %s): moved along, that run's restart (a job "
                    "requeued, or a run resumed to train on) would find none where it looks. Give this run its own "
                    "--output-dir (-o)",
                    dir.c_str(), newest->c_str(), dir.c_str());
            }
            if (newest) {
                fail(
                    "%s holds a previous run, which this run would move aside, and another run's directory, %s, "
                    "with its checkpoint %s: moved along, that run's restart (a job requeued, or a run resumed "
                    "to train on) would find no checkpoint, or no log, where it looks. Give this run its own "
                    "--output-dir (-o), or move %s out of %s",
                    dir.c_str(), at.c_str(), newest->c_str(), at.c_str(), dir.c_str());
            }
        }
        std::error_code ec;
        fs::directory_iterator entries(at, ec);
        for (; !ec && entries != fs::directory_iterator(); entries.increment(ec)) {
            std::error_code type_ec;
            if (entries->is_directory(type_ec)) todo.push_back(entries->path().string());
        }
        if (ec) cannot_look(format("%s cannot be listed (%s)", at.c_str(), ec.message().c_str()));
    }
}
}   // namespace

HeldRunDirs hold_run_dirs(const RunDirs& dirs, const TrainConfig& cfg, bool resuming, const std::string& command) {
    HeldRunDirs held;
    if (dirs.move_previous) {   // not while another run holds it, or a directory inside it
        fail_unless_movable_aside(dirs.output);
        const std::time_t now = std::time(nullptr);
        char when[32];
        std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", std::gmtime(&now));
        std::string to = dirs.output + ".previous-" + when;
        for (int k = 2; file_exists(to); k++)
            to = dirs.output + ".previous-" + when + "-" + std::to_string(k);
        // a symbolic link (out -> /scratch/...) moves as a link: it still points at the previous run,
        // and this run's directory is a new, plain one, on this directory's disk, which is said
        struct stat link;
        char target[PATH_MAX + 1] = {0};
        const bool is_link = ::lstat(dirs.output.c_str(), &link) == 0 && S_ISLNK(link.st_mode) &&
                             ::readlink(dirs.output.c_str(), target, PATH_MAX) > 0;
        if (std::rename(dirs.output.c_str(), to.c_str()) != 0) {
            const int error = errno;
            fail("cannot move the previous run in %s to %s: %s%s", dirs.output.c_str(), to.c_str(),
                 std::strerror(error),
                 error == EBUSY ? format(" (%s is a mount point, which cannot be moved): give this run its own "
                                         "--output-dir (-o)",
                                         dirs.output.c_str())
                                      .c_str()
                                : "");
        }
        held.moved_to = to;
        if (is_link)
            held.warnings.push_back(format(
                "%s was a symbolic link to %s: the link is now %s (pointing there still), and this run writes to a "
                "new plain directory %s; to write elsewhere, give -o",
                dirs.output.c_str(), target, to.c_str(), dirs.output.c_str()));
    }
    // Directories that exist are locked first: a run refused there creates no directory. Which
    // exist is decided before any is made (one may be the other's parent: --checkpoint-dir ck
    // -o ck/inner, whose make_dirs creates ck; before, ck was then skipped by both passes, unlocked).
    std::vector<std::pair<std::string, bool>> todo;   // (directory, it existed)
    for (const std::string& dir : {dirs.output, dirs.checkpoints}) {
        if (!dir.empty() && (todo.empty() || todo[0].first != dir)) todo.emplace_back(dir, file_exists(dir));
    }
    for (int pass = 0; pass < 2; pass++) {
        for (const auto& [dir, existed] : todo) {
            if ((pass == 0) != existed) continue;
            make_dirs(dir);
            // one directory under two names (-o s --checkpoint-dir s_link): locked once (before, the
            // second lock was refused as "in use" by this very run)
            std::string held_as;
            for (const std::unique_ptr<DirLock>& lock : held.locks) {
                std::error_code ec;
                if (std::filesystem::equivalent(dir, std::filesystem::path(lock->path()).parent_path(), ec))
                    held_as = lock->path();
            }
            if (held_as.empty()) {
                std::string warning;
                if (auto lock = DirLock::acquire(dir, command, &warning)) {
                    held_as = lock->path();
                    held.locks.push_back(std::move(lock));
                }
                if (!warning.empty()) held.warnings.push_back(warning);
            }
            if (dir == dirs.checkpoints) held.checkpoint_lock = held_as;
            if (dir == dirs.output) held.output_lock = held_as;
        }
    }
    check_previous_run(dirs, cfg, resuming);
    return held;
}

void fail_if_checkpoint_dir_moved(const HeldRunDirs& held, const std::string& checkpoints, int64_t step) {
    const std::string lock_file = held.checkpoint_lock.empty() ? lock_file_of(checkpoints) : held.checkpoint_lock;
    for (const std::unique_ptr<DirLock>& lock : held.locks) {
        if (lock->path() != lock_file) continue;
        // the name the saves and the pruning use must still lead to the lock this run holds (a
        // symbolic link re-pointed under the run leads elsewhere, though the lock file itself stays)
        if (lock->held_at(lock_file_of(checkpoints))) return;
        if (lock_file == lock_file_of(checkpoints) && lock->retake_deleted_file()) {
            std::fprintf(stderr,
                         "warning: %s was deleted while this run was live (the directory is where it was); this "
                         "run locks it again and saves step %lld\n",
                         lock_file.c_str(), (long long)step);
            return;
        }
        std::string where = lock->moved_or_deleted();
        const bool relocked = where.rfind("only its lock file was deleted", 0) == 0;
        if (where.empty()) {
            where = "the name leads elsewhere now; the directory this run holds is " +
                    lock->path().substr(0, lock->path().find_last_of('/'));
        }
        const bool gone = where == "it was deleted";
        fail(
            "--checkpoint-dir %s was moved or deleted while this run was live (%s): the checkpoint of step %lld is "
            "not written, so that it never lands among, or prunes, another run's checkpoints at that path. %s",
            checkpoints.c_str(), where.c_str(), (long long)step,
            relocked ? "The checkpoints saved before are still there"
            : gone   ? "The checkpoints saved before went with it"
                     : "The checkpoints saved before are where it went: to continue from the newest, --resume with "
                       "--checkpoint-dir there");
    }
}

void keep_output_dir_locked(const HeldRunDirs& held, const std::string& output) {
    for (const std::unique_ptr<DirLock>& lock : held.locks) {
        if (lock->path() != held.output_lock || lock->held_at(lock->path())) continue;
        if (lock->retake_deleted_file()) {
            std::fprintf(stderr,
                         "warning: %s was deleted while this run was live (the directory is where it was); this "
                         "run locks it again\n",
                         lock->path().c_str());
        } else if (const std::string where = lock->moved_or_deleted();
                   where.rfind("only its lock file was deleted", 0) == 0) {
            fail(
                "--output-dir %s: %s, so its log.jsonl may be that run's now; this run stops (its checkpoints "
                "are where they were saved)",
                output.c_str(), where.c_str());
        }
    }
}

}   // namespace train_gpt
