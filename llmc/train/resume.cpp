// resume.cpp — see resume.h.
#include "train/resume.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/train_state.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <functional>
#include <string_view>

namespace train_gpt {

std::vector<FlagOverride> resume_run_flags(int argc, const char* const* argv, const std::string& checkpoint,
                                           TrainConfig& cfg, bool* recorded, std::vector<std::string>* notices) {
    const std::string extra = read_manifest(checkpoint).extra_json;
    const std::string saved = run_flags_from_json(extra);
    *recorded = !saved.empty();
    if (saved.empty()) return {};
    const std::string root =
        checkpoint.substr(0, checkpoint.find_last_of('/') == std::string::npos ? 0 : checkpoint.find_last_of('/'));
    // the run's own log in a directory: its original, where the checkpoints are a copy's
    const std::string run_id = counters_from_json(extra, checkpoint + "/manifest.json").run_id;
    auto holds_run_log = [&](const std::string& dir) {
        try {
            return !run_id.empty() && read_logged_run(dir + "/log.jsonl").run_ids.count(run_id) > 0;
        } catch (const Error&) {
            return false;
        }
    };
    return parse_resumed_command_line(argc, argv, saved, root.empty() ? "." : root, cfg, run_path_dirs_from_json(extra),
                                      notices, holds_run_log);
}

std::optional<ResumeChoice> choose_resume_checkpoint(const std::string& root, bool fallback) {
    const auto dirs = checkpoint_step_dirs(root);
    if (dirs.empty()) return std::nullopt;
    ResumeChoice choice;
    for (size_t i = dirs.size(); i-- > 0;) {
        const std::string& dir = dirs[i].second;
        try {
            choice.manifest = read_manifest(dir);
            verify_checkpoint(dir, choice.manifest);
            choice.dir = dir;
            return choice;
        } catch (const NewerBuildError& e) {
            // not damaged: never passed over (nor renamed .damaged) by --resume-from-intact
            fail("the checkpoint %s is not this build's: %s. Nothing was changed", dir.c_str(), e.what());
        } catch (const UnreadableCheckpointError& e) {
            // nor is one this user may not read (round 27: called damaged, with --resume-from-intact
            // advised, which would have set a healthy checkpoint aside)
            fail(
                "the checkpoint %s cannot be read by this user (%s). Nothing was changed: run as its owner, or give "
                "this user read access",
                dir.c_str(), e.what());
        } catch (const Error& e) {
            if (!fallback) {
                fail(
                    "the newest checkpoint, %s, is damaged: %s. Nothing was changed. To resume from the newest intact "
                    "checkpoint before it instead, add --resume-from-intact (the damaged one is then kept as "
                    "%s)",
                    dir.c_str(), e.what(), damaged_checkpoint_name(dir).c_str());
            }
            choice.damaged.emplace_back(dir, e.what());
        }
    }
    std::string list;
    for (const auto& [dir, problem] : choice.damaged)
        list += "\n  " + dir + ": " + problem;
    fail("no intact checkpoint in %s; every one is damaged:%s", root.c_str(), list.c_str());
}

std::string damaged_checkpoint_name(const std::string& dir) {
    std::string to = dir + ".damaged";
    for (int k = 2; file_exists(to); k++)
        to = dir + ".damaged." + std::to_string(k);
    return to;
}

std::string set_aside_damaged_checkpoint(const std::string& dir) {
    const std::string to = damaged_checkpoint_name(dir);
    if (std::rename(dir.c_str(), to.c_str()) != 0) {
        fail("cannot rename the damaged checkpoint %s to %s: %s", dir.c_str(), to.c_str(), std::strerror(errno));
    }
    return to;
}

namespace {
// Calls visit(line, record) for each record of a log.jsonl's `text`, in order. Blank lines are
// skipped; an unparsable last line is a torn write (a crash mid-record) and is dropped; an
// unparsable line with records after it fails, naming the file and the line (before: the log
// ended there, and a resume deleted what followed). One record is parsed at a time (round 27: the
// whole log's records were held at once, about ten times the file's size).
void for_each_log_record(const std::string& path, const std::string& text,
                         const std::function<void(std::string_view line, const nlohmann::json& record)>& visit) {
    int number = 0, torn = 0;   // the line number of an unparsable line not yet followed by another
    for (size_t at = 0; at < text.size();) {
        const size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line(text.data() + at, end - at);
        at = end + 1;
        number++;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        if (torn != 0) {
            fail(
                "%s:%d: not a JSON record, with records after it (a log edited by hand?): fix or remove that line; "
                "a resume would otherwise lose what follows it",
                path.c_str(), torn);
        }
        nlohmann::json j;
        try {
            if (json_depth_within(line)) j = nlohmann::json::parse(line);   // deeper: not a record of ours
        } catch (const nlohmann::json::exception&) {
        }
        if (!j.is_object()) {
            torn = number;
            continue;
        }
        visit(line, j);
    }
}
// a step's record is ~300 bytes: 4 GiB is ten million steps, and a larger file another one
std::string read_log_text(const std::string& path) {
    return read_file_text(path, size_t(4) << 30, "a run's log.jsonl");
}
// a record's type ("" where it has none, or one that is no string: a hand-edited log)
std::string type_of(const nlohmann::json& j) {
    return j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
}
int64_t step_of(const nlohmann::json& j) {
    return j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : INT64_MAX;
}
}   // namespace

LoggedRun read_logged_run(const std::string& path) {
    LoggedRun run;
    if (!file_exists(path)) return run;
    for_each_log_record(path, read_log_text(path), [&](std::string_view, const nlohmann::json& j) {
        run.record_count++;
        const std::string type = type_of(j);
        if (type == "step") run.last_step = std::max(run.last_step, step_of(j));
        if (type == "summary") run.summary_step = std::max(run.summary_step, step_of(j));
        if ((type == "start" || type == "resume") && j.contains("output_dir") && j["output_dir"].is_string()) {
            run.output_dirs.insert(j["output_dir"].get<std::string>());
            run.last_output_dir = j["output_dir"].get<std::string>();
        }
        if (type == "checkpoint" && j.contains("path") && j["path"].is_string())
            run.checkpoints.emplace_back(step_of(j), j["path"].get<std::string>());
        const char* names = type == "checkpoint" ? "path" : type == "resume" ? "checkpoint" : nullptr;
        if (names != nullptr && j.contains(names) && j[names].is_string()) {
            const std::string hash =
                j.contains("manifest") && j["manifest"].is_string() ? j["manifest"].get<std::string>() : "";
            run.known.emplace_back(resolved_path(j[names].get<std::string>()), hash);
            if (type == "checkpoint") run.saves.push_back(run.known.back());
        }
        const bool names_run = type == "start" || type == "resume" || type == "checkpoint" || type == "summary";
        if (names_run && j.contains("run_id") && j["run_id"].is_string())
            run.run_ids.insert(j["run_id"].get<std::string>());
        if (type == "summary") run.finished = true;
        if ((type == "start" || type == "resume") && j.contains("auto_resume") && j["auto_resume"] == true)
            run.auto_resumed = true;
        if (type == "val" && j.contains("loss") && j["loss"].is_number() &&
            (!run.best_val_loss || j["loss"].get<double>() < *run.best_val_loss)) {
            run.best_val_loss = j["loss"].get<double>();
            run.best_val_step = step_of(j);
        }
    });
    return run;
}

bool LoggedRun::saved(const std::string& checkpoint) const {
    const std::string target = resolved_path(checkpoint);
    for (const auto& [s, path] : checkpoints)
        if (resolved_path(path) == target) return true;
    return false;
}

bool LoggedRun::knows(const std::string& checkpoint, const std::string& manifest_hash) const {
    const std::string target = resolved_path(checkpoint);
    for (const auto& [path, hash] : known)
        // by hash where both have one (a branch's checkpoint put at a path this log saved another
        // at is no checkpoint of it), else by path
        if (!manifest_hash.empty() && !hash.empty() ? hash == manifest_hash : path == target) return true;
    return false;
}

bool LoggedRun::records(const std::string& checkpoint, const std::string& manifest_hash) const {
    const std::string target = resolved_path(checkpoint);
    for (const auto& [path, hash] : saves)
        if (!manifest_hash.empty() && !hash.empty() ? hash == manifest_hash : path == target) return true;
    return false;
}

std::string LoggedRun::hash_of(const std::string& checkpoint) const {
    const std::string target = resolved_path(checkpoint);
    for (const auto& [path, hash] : known)
        if (path == target && !hash.empty()) return hash;
    return "";
}

std::string manifest_hash(const std::string& checkpoint) {
    try {
        uint64_t bytes = 0;
        return format("%016llx", (unsigned long long)hash_file(checkpoint + "/manifest.json", &bytes));
    } catch (const Error&) {
        return "";
    }
}

bool LoggedRun::saved_step(int64_t step, const std::string& manifest_hash) const {
    for (size_t i = 0; i < checkpoints.size(); i++) {   // saves[i] is the same record's (path, hash)
        const std::string& hash = i < saves.size() ? saves[i].second : std::string();
        if (checkpoints[i].first == step && (manifest_hash.empty() || hash.empty() || hash == manifest_hash))
            return true;
    }
    return false;
}

void truncate_log_for_resume(const std::string& path, int64_t step, const std::set<std::string>& written_again) {
    if (!file_exists(path)) return;
    const std::string log = read_log_text(path);
    // the last checkpoint record of the step, if any: the records up to it are kept
    int64_t record = 0, keep_until = -1;
    for_each_log_record(path, log, [&](std::string_view, const nlohmann::json& j) {
        if (type_of(j) == "checkpoint" && step_of(j) == step) keep_until = record + 1;
        record++;
    });
    const bool found = keep_until >= 0;
    // what the run evaluated or sampled at the step itself (after its checkpoint record) stays,
    // unless the resumed run does it again
    auto kept_evaluation = [&](const nlohmann::json& j) {
        const std::string type = type_of(j);
        return (type == "val" || type == "hellaswag" || type == "sample") && step_of(j) == step &&
               !written_again.count(type);
    };
    std::string text;
    record = 0;
    for_each_log_record(path, log, [&](std::string_view line, const nlohmann::json& j) {
        const int64_t i = record++;
        if (found && i >= keep_until && !kept_evaluation(j)) return;
        if (!found && !kept_evaluation(j)) {
            const std::string type = type_of(j);
            const bool after_the_step = type == "step" || type == "fp8" || type == "checkpoint";
            if (after_the_step ? step_of(j) > step : step_of(j) >= step) return;
        }
        text.append(line);
        text += '\n';
    });
    write_file_atomic(path, text.data(), text.size());
}

}   // namespace train_gpt
