// config.cpp — command line (CLI11) and the resolved-configuration table / JSON (nlohmann-json).
#include "train/config.h"

#include "cli_decimal.h"
#include "precision/fp8_scaling.h"

#include "train/flags.h"
#include "train/schedule.h"
#include "data/tokenizer.h"   // printable
#include "utils.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <filesystem>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <glob.h>

namespace train_gpt {

namespace fs = std::filesystem;

namespace {

// --help's layout: CLI11's, with each option's names as given ("--shuffle,--no-shuffle", not
// CLI11's "--no-shuffle{false}").
class HelpFormatter : public CLI::Formatter {
  public:
    std::string make_option_name(const CLI::Option* opt, bool positional) const override {
        std::string name = CLI::Formatter::make_option_name(opt, positional);
        for (size_t open; (open = name.find('{')) != std::string::npos;) {
            name.erase(open, name.find('}', open) - open + 1);
        }
        return name;
    }
};

// Every flag of the table (train/flags.h), bound to the fields of c: the parser and --help. Each
// option shows its value's name, its range and its default in --help.
// A true/false flag's value: true, false, 1, 0, yes, no, on, off (any case); yes/no/on/off become
// true/false, the others stay (lowercased: 0 and 1 are CLI11's own texts of a bool default).
// (CLI11 alone took '' and -1 as false and 2 as true, so `-w ''` turned FP32 master weights off.)
CLI::Validator boolean_value() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            std::string lower;
            for (const char ch : text)
                lower += (char)std::tolower((unsigned char)ch);
            if (lower == "true" || lower == "false" || lower == "1" || lower == "0") {
                text = lower;
                return "";
            }
            if (lower == "yes" || lower == "on" || lower == "no" || lower == "off") {
                text = lower == "yes" || lower == "on" ? "true" : "false";
                return "";
            }
            return "'" + text + "' is not true or false";
        },
        "", "BOOLEAN");
}

void add_flags(CLI::App& app, TrainConfig& c) {
    app.option_defaults()->always_capture_default();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);   // later flags override earlier ones
    app.formatter(std::make_shared<HelpFormatter>());
    app.get_formatter()->column_width(34);
    for (const Flag& flag : flag_table()) {
        CLI::Option* opt = std::visit(
            [&](auto member) -> CLI::Option* {
                auto& field = c.*member;
                using T = std::decay_t<decltype(field)>;
                if constexpr (std::is_same_v<T, bool>) {
                    // --shuffle=2 and --shuffle=0x1 (false) were taken too
                    if (flag.is_switch) return app.add_flag(flag.names, field, flag.help)->transform(boolean_value());
                }
                CLI::Option* option = app.add_option(flag.names, field, flag.help);
                if constexpr (std::is_same_v<T, bool>)
                    option->transform(boolean_value());
                else if constexpr (std::is_integral_v<T>)
                    option->transform(decimal_integer<T>());   // "010" is 10, not octal (cli_decimal.h)
                return option;
            },
            flag.field);
        opt->group(flag.group);
        if (flag.is_switch) continue;
        if (!flag.choices.empty()) opt->check(CLI::IsMember(flag.choices));
        if (flag.check) {
            opt->check(CLI::Validator([check = flag.check](std::string& text) { return check(text); }, flag.range));
        }
        const std::string default_text = field_text(flag, TrainConfig{});
        const std::string shown = default_text.empty() ? "''" : default_text;
        opt->option_text(" " + flag.value);
        opt->description(flag.help + (flag.range.empty() ? "" : " [" + flag.range + "]") + " (default " + shown + ")");
    }
    // llm.c's spelling of --resume; not a flag of its own (it records nothing)
    app.add_option_function<int>(
           "-y", [&c](const int& y) { c.resume = y != 0; }, "llm.c's form of --resume: -y 1")
        ->transform(decimal_integer<int>())
        ->check(CLI::IsMember({0, 1}))
        ->option_text(" 0|1")
        ->group("Distributed and checkpoints");
}

CLI::App make_app() {
    return CLI::App{
        "train_gpt: pretrain a GPT-2-style model from token shards.\n"
        "  single process:   ./train_gpt -e d12 -i 'data/fineweb/fw_train_*.bin' -j 'data/fineweb/fw_val_*.bin'\n"
        "  defaults train a small model on the bundled KJV corpus (scripts/run_default.sh prepares it).",
        "train_gpt"};
}

// The long name of an option ("steps"), or "" for one without (help has one: "help").
std::string long_name(const CLI::Option* opt) { return opt->get_lnames().empty() ? "" : opt->get_lnames()[0]; }

// A flag (no value: --shuffle) rather than an option with a value.
bool is_flag(const CLI::Option* opt) { return opt->get_expected_max() == 0; }

// Records in c what the parse of `app` took: every flag's text and the names given.
void record_flags(const CLI::App& app, TrainConfig& c) {
    c.flag_texts.clear();
    for (const CLI::Option* opt : app.get_options()) {
        const std::string name = long_name(opt);
        if (name.empty() || name == "help") continue;
        if (is_flag(opt)) {
            c.flag_texts[name] = opt->count() > 0 && opt->as<bool>() ? "true" : "false";   // every flag defaults to off
        } else {
            c.flag_texts[name] = opt->count() > 0 ? opt->results().back() : opt->get_default_str();
        }
    }
}

// Flags a resumed run takes from the command line only: how it was started and found its
// checkpoint, and what this process writes for inspection (a trace is one process's: taking it
// from the checkpoint would replace the earlier process's trace).
bool restored_on_resume(const std::string& name) {
    for (const char* how : {"resume", "auto-resume", "resume-from-intact", "overwrite-output", "init-from",
                            "checkpoint-dir", "trace-ops"}) {
        if (name == how) return false;
    }
    return true;
}

// The flag of the table with this long name; null for none.
const Flag* find_flag(const std::string& name) {
    for (const Flag& flag : flag_table()) {
        if (flag.long_name() == name) return &flag;
    }
    return nullptr;
}

// Whether the flag's field is of a type `Pred` accepts.
template <class Pred>
bool field_type_is(const std::string& name, Pred pred) {
    const Flag* flag = find_flag(name);
    return flag &&
           std::visit([&](auto member) { return pred((std::decay_t<decltype(TrainConfig{}.*member)>*)nullptr); },
                      flag->field);
}

// A flag that names a file, directory or glob (its value in --help: FILE, DIR, GLOB).
bool is_path_flag(const std::string& name) {
    const Flag* flag = find_flag(name);
    return flag && (flag->value == "FILE" || flag->value == "DIR" || flag->value == "GLOB");
}

// A flag whose value is a glob (its value in --help: GLOB).
bool is_glob_flag(const std::string& name) {
    const Flag* flag = find_flag(name);
    return flag && flag->value == "GLOB";
}

// A flag whose field is an integer (not a bool); one whose field is a bool.
bool is_integer_flag(const std::string& name) {
    return field_type_is(name, [](auto* t) {
        using T = std::remove_pointer_t<decltype(t)>;
        return std::is_integral_v<T> && !std::is_same_v<T, bool>;
    });
}
bool is_bool_flag(const std::string& name) {
    return field_type_is(name, [](auto* t) { return std::is_same_v<std::remove_pointer_t<decltype(t)>, bool>; });
}

// A true/false flag's text recorded by a build before boolean_value(), as that build read it
// (CLI11: '' false, a number true when above 0, t/y/enable/+ true, f/n/disable/- false), "true"
// or "false"; "" where boolean_value() takes the text, or that build refused it too.
std::string bool_as_read_before(const std::string& text) {
    std::string probe = text;
    if (boolean_value()(probe).empty()) return "";
    if (text.empty()) return "false";
    try {
        return CLI::detail::to_flag_value(text) > 0 ? "true" : "false";
    } catch (const std::exception&) {
        return "";
    }
}

// An integer flag's text recorded by a build before integers were read in decimal (cli_decimal.h),
// as that build read it: C's strtoll/strtoull with base 0 ("010" octal 8, "0x10" 16, "+5" 5),
// in decimal; "" where the text is canonical decimal already, or not a number of that form.
std::string integer_as_read_before(std::string text) {
    const bool canonical = !text.empty() &&
                           (text == "0" || text.find_first_of("123456789") == (text[0] == '-' ? 1u : 0u)) &&
                           text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) == std::string::npos;
    if (canonical) return "";
    text.erase(0, text.find_first_not_of(" \t\n\v\f\r"));   // strtoll skipped them, and then took the sign
    errno = 0;
    char* end = nullptr;
    if (!text.empty() && text[0] != '-') {
        const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
        return errno == 0 && end != text.c_str() && *end == '\0' ? std::to_string(v) : "";
    }
    const long long v = std::strtoll(text.c_str(), &end, 0);
    return errno == 0 && end != text.c_str() && *end == '\0' ? std::to_string(v) : "";
}

// Two texts of one flag mean the same value: equal, or equal numbers ("2e-3", "0.002").
// A text of decimal digits only as the integer it writes; nullopt for any other text or one past
// 2^64 - 1.
std::optional<uint64_t> parse_u64(const std::string& text) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return std::nullopt;
    return (uint64_t)value;
}

bool same_value(const std::string& a, const std::string& b) {
    if (a == b) return true;
    // true/false in any of boolean_value()'s spellings ("1" and "true")
    std::string bool_a = a, bool_b = b;
    if (boolean_value()(bool_a).empty() && boolean_value()(bool_b).empty()) {
        auto truth = [](const std::string& t) { return t == "true" || t == "1"; };
        return truth(bool_a) == truth(bool_b);
    }
    char *end_a = nullptr, *end_b = nullptr;
    const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
    return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

}   // namespace

bool parse_injected_steps(const std::string& text, int& first, int& last) {
    // a step is an int: digits that overflow one are not a step (sscanf's %d wrapped them)
    auto step_at = [&](size_t& at, int& value, bool allow_minus_one) {
        size_t end = at;
        if (allow_minus_one && text.compare(at, 2, "-1") == 0) {
            value = -1;
            at += 2;
            return true;
        }
        while (end < text.size() && std::isdigit((unsigned char)text[end]))
            end++;
        if (end == at || end - at > 10) return false;
        const long long v = std::stoll(text.substr(at, end - at));
        if (v > INT_MAX) return false;
        value = (int)v;
        at = end;
        return true;
    };
    size_t at = 0;
    if (!step_at(at, first, true)) return false;
    if (at == text.size()) {
        last = first;
        return true;
    }
    if (first < 0 || text[at] != '-') return false;
    at++;
    return step_at(at, last, false) && at == text.size() && last >= first;
}

bool TrainConfig::injects_nonfinite_at(int step) const {
    int first = -1, last = -1;
    return parse_injected_steps(inject_nonfinite_step, first, last) && first >= 0 && step >= first && step <= last;
}

std::optional<int> parse_command_line(int argc, const char* const* argv, TrainConfig& c) {
    // llm.c's -h 1 ("evaluate HellaSwag") is --help here, which wins over every other flag: its GPT-2
    // command line printed the help and exited 0, nothing trained (round 26). -h with a value is refused.
    // Every spelling: -h 1, --help 1, -h1, -h=1, --help=1.
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i], next = i + 1 < argc ? argv[i + 1] : "";
        std::string given;   // the help flag with a value, as typed
        if ((arg == "-h" || arg == "--help") && !next.empty() && next[0] != '-') given = arg + " " + next;
        if ((arg.size() > 2 && arg.compare(0, 2, "-h") == 0) || arg.rfind("--help=", 0) == 0) given = arg;
        if (!given.empty()) {
            fail(
                "%s: %s is --help here and takes no value; llm.c's -h 1 (evaluate HellaSwag) is --hellaswag FILE "
                "(dev/data/hellaswag.sh fetches it), and -h 0 is the default: drop it",
                given.c_str(), arg.rfind("--", 0) == 0 ? "--help" : "-h");
        }
    }
    CLI::App app = make_app();
    add_flags(app, c);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ExtrasError& e) {
        const int rc = app.exit(e);
        // an unquoted glob (-i data/x_*.bin) that the shell expanded: its second file is an extra
        // argument (round 26: CLI11's message alone did not say why)
        const std::vector<std::string> extras = app.remaining();   // one copy: both iterators are its
        if (std::any_of(extras.begin(), extras.end(),
                        [](const std::string& arg) { return arg.size() > 4 && arg.rfind(".bin") == arg.size() - 4; })) {
            std::fprintf(
                stderr,
                "hint: -i and -j take one glob, in quotes (-i 'data/kjv/kjv_train_*.bin'); unquoted, the shell "
                "expands it into several arguments\n");
        }
        return exit_status_after_printing(rc);
    } catch (const CLI::ParseError& e) {
        return exit_status_after_printing(app.exit(e));   // --help on stdout, or the error on stderr
    }
    record_flags(app, c);
    // -y 0 (llm.c's "do not resume") beside --resume or --auto-resume: it used to cancel --resume
    // silently (a fresh run) and leave --auto-resume as it was; -y 1 beside --resume=false resumed
    if (const CLI::Option* y = app.get_option("-y"); y->count() > 0) {
        const bool y_resumes = y->as<int>() != 0;
        for (const char* resume : {"--resume", "--auto-resume"}) {
            const CLI::Option* opt = app.get_option(resume);
            if (opt->count() == 0) continue;
            const bool resumes = opt->as<bool>();
            if (y_resumes ? !resumes && std::string(resume) == "--resume" : resumes) {
                fail("-y %d (llm.c's: %s) and %s=%s contradict each other: give one of them", y_resumes ? 1 : 0,
                     y_resumes ? "resume" : "start afresh", resume, resumes ? "true" : "false");
            }
        }
    }
    // config.json, the log and the checkpoints' manifests are JSON, which holds UTF-8 only: a value
    // that is not (a latin-1 path, prompt) is refused here, naming its flag (before: a bare JSON
    // exception, once after training, at the first checkpoint)
    for (const auto& [name, text] : c.flag_texts) {
        if (!valid_utf8(text)) {
            fail(
                "--%s %s: not valid UTF-8; the run's JSON files (config.json, log.jsonl, checkpoints) hold UTF-8 "
                "only: give the value in UTF-8",
                name.c_str(), printable(text).c_str());
        }
    }
    c.given.clear();
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->count() > 0 && !long_name(opt).empty()) c.given.insert(long_name(opt));
    }
    return std::nullopt;
}

std::string flags_json(const TrainConfig& c) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [name, text] : c.flag_texts)
        j[name] = text;
    return j.dump();
}

namespace {
// `p` absolute and lexically normal, without a trailing separator ("x/checkpoints/" → ".../x/checkpoints")
fs::path normal_absolute(const fs::path& p) {
    std::error_code ec;
    fs::path n = fs::absolute(p, ec).lexically_normal();
    if (!n.has_filename() && n.has_parent_path() && n != n.root_path()) n = n.parent_path();
    return n;
}

// A path flag's text as the checkpoint's run read it: relative to the directory `saved_dirs`
// records for the flag (its run's working directory), absolute and lexically normal.
fs::path recorded_path(const std::string& name, const std::string& text,
                       const std::map<std::string, std::string>& saved_dirs) {
    const auto dir = saved_dirs.find(name);
    const fs::path t = text;
    return normal_absolute(t.is_absolute() || dir == saved_dirs.end() ? t : fs::path(dir->second) / t);
}

// The files an absolute glob pattern matches (its directory part taken as spelled), each
// resolved, sorted; none where it matches none.
std::vector<std::string> matched_files(const fs::path& pattern) {
    glob_t g{};
    std::vector<std::string> files;
    const std::string escaped = glob_escaped(pattern.parent_path().string()) + "/" + pattern.filename().string();
    if (::glob(escaped.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            files.push_back(resolved_path(g.gl_pathv[i]));
    }
    globfree(&g);
    std::sort(files.begin(), files.end());
    return files;
}

// Whether two texts of a path flag name one path: `was` as the checkpoint's run read it, `now`
// relative to this directory ("out", "./out/", ../run/out, or a link to it). A glob's directory
// part is resolved and its pattern compared as text, or, where they differ, the files each
// matches now (round 34: the job line retyped with the glob unquoted, which the shell expanded
// to the one file it matches).
bool names_one_path(const std::string& name, const std::string& was,
                    const std::map<std::string, std::string>& saved_dirs, const std::string& now) {
    if (was.empty() || now.empty()) return was == now;
    const fs::path a = recorded_path(name, was, saved_dirs), b = normal_absolute(now);
    if (a == b) return true;
    std::error_code ec;
    if (is_glob_flag(name)) {
        if (a.filename() == b.filename() && fs::equivalent(a.parent_path(), b.parent_path(), ec)) return true;
        const std::vector<std::string> files = matched_files(a);
        return !files.empty() && files == matched_files(b);
    }
    return fs::equivalent(a, b, ec);
}

// Whether the checkpoint's run kept its checkpoints at <output-dir>/checkpoints: no
// --checkpoint-dir, or one naming just that, as a resume records it (as spelled, through links, or
// (the links gone after a move) by the names of its last two components). `saved`: its flags.
bool in_output_dir_layout(const nlohmann::json& saved, const std::map<std::string, std::string>& saved_dirs) {
    if (!saved.contains("checkpoint-dir") || saved["checkpoint-dir"].get<std::string>().empty()) return true;
    if (!saved.contains("output-dir") || saved["output-dir"].get<std::string>().empty()) return false;
    std::error_code ec;
    const fs::path k = recorded_path("checkpoint-dir", saved["checkpoint-dir"].get<std::string>(), saved_dirs);
    const fs::path was = recorded_path("output-dir", saved["output-dir"].get<std::string>(), saved_dirs);
    return k == was / "checkpoints" || fs::weakly_canonical(k, ec) == fs::weakly_canonical(was, ec) / "checkpoints" ||
           (k.filename() == "checkpoints" && k.parent_path().filename() == was.filename());
}

// Where a checkpoint's run is now, when its checkpoints were found elsewhere than it wrote them:
// its directory was moved or copied (and another may stand at its old place).
struct MovedRun {
    fs::path checkpoints;   // where they are now
    fs::path output_dir;    // their parent, which holds the log: the run's -o now
    fs::path was;           // the -o the checkpoint records (absolute)
    std::string new_base;   // where that directory is now ("": -o absolute, or not a suffix of output_dir)
    bool copy = false;      // the recorded -o still holds the run's log: the original stands
    // what moved: `was` and `output_dir` without the trailing components they share (/w/p/out →
    // /w/q/out: /w/p → /w/q); a directory under old_prefix is now under new_prefix
    fs::path old_prefix, new_prefix;
    // where a directory the run recorded is now ("" if it was not under what moved)
    std::string moved_dir(const std::string& recorded) const {
        if (recorded.empty()) return "";
        const fs::path r = normal_absolute(recorded);
        auto at = r.begin();
        for (auto part = old_prefix.begin(); part != old_prefix.end(); ++part, ++at) {
            if (at == r.end() || *at != *part) return "";
        }
        fs::path now = new_prefix;
        for (; at != r.end(); ++at)
            now /= *at;
        return now.string();
    }
};

// A run of the layout where checkpoints go into <output-dir>/checkpoints (no --checkpoint-dir, or
// one naming just that, as a resume records it) keeps its log beside its checkpoints: where the
// checkpoints resumed from (in `root`) are in a directory named "checkpoints" whose parent holds a
// log.jsonl, and that parent is not the -o the checkpoint records, the run's directory moved
// (round 19: the log went on at the old place, in another tree standing there, or in the
// original of a copy, and the run's own -o was refused afterwards as a branch).
std::optional<MovedRun> moved_run(const nlohmann::json& saved, const std::map<std::string, std::string>& saved_dirs,
                                  const std::string& root, const std::set<std::string>& given,
                                  const std::function<bool(const std::string&)>& holds_run_log) {
    if (given.count("output-dir") || !saved.contains("output-dir") || !saved.contains("checkpoint-dir"))
        return std::nullopt;
    std::error_code ec;
    const std::string output_text = saved["output-dir"].get<std::string>();
    if (output_text.empty()) return std::nullopt;
    const fs::path was = recorded_path("output-dir", output_text, saved_dirs);
    // checkpoints of their own place (--checkpoint-dir): the log need not be beside them (a resume
    // from a linked spelling of <-o>/checkpoints recorded that: round 22)
    if (!in_output_dir_layout(saved, saved_dirs)) return std::nullopt;
    // the checkpoints as named (<out>/checkpoints may be a link to storage elsewhere: nothing moved),
    // else where a link to them leads
    MovedRun m;
    bool found = false;
    for (const fs::path& checkpoints : {normal_absolute(root), fs::canonical(root, ec)}) {
        if (checkpoints.empty()) continue;
        const fs::path parent = checkpoints.parent_path();
        if (checkpoints.filename() != "checkpoints") continue;
        if (parent == was || fs::equivalent(parent, was, ec)) return std::nullopt;   // where the run wrote them
        if (fs::exists(parent / "log.jsonl", ec)) {
            m.checkpoints = checkpoints;
            m.output_dir = parent;
            found = true;
            break;
        }
    }
    if (!found) return std::nullopt;
    m.was = was;
    m.copy = holds_run_log && holds_run_log(was.string());
    m.old_prefix = was;
    m.new_prefix = m.output_dir;
    while (m.old_prefix.has_relative_path() && m.new_prefix.has_relative_path() &&
           m.old_prefix.filename() == m.new_prefix.filename()) {
        m.old_prefix = m.old_prefix.parent_path();
        m.new_prefix = m.new_prefix.parent_path();
    }
    if (output_text[0] != '/') {   // the text as typed, relative to the directory now before it
        const fs::path typed = fs::path(output_text).lexically_normal();
        fs::path base = m.output_dir;
        bool suffix = true;
        for (auto part = typed.end(); suffix && part != typed.begin();) {
            --part;
            if (part->empty() || *part == ".") continue;
            suffix = base.filename() == *part;
            base = base.parent_path();
        }
        if (suffix) m.new_base = base.string();
    }
    return m;
}

// A relative path flag's text exists under `dir` (a glob: matches a file there).
bool exists_under(const std::string& dir, const std::string& name, const std::string& text) {
    if (is_glob_flag(name)) {
        glob_t g{};
        const int rc = ::glob((glob_escaped(dir) + "/" + text).c_str(), 0, nullptr, &g);
        const bool found = rc == 0 && g.gl_pathc > 0;
        globfree(&g);
        return found;
    }
    std::error_code ec;
    return fs::exists(fs::path(dir) / text, ec);
}
}   // namespace

std::vector<FlagOverride> parse_resumed_command_line(int argc, const char* const* argv, const std::string& saved_json,
                                                     const std::string& checkpoint_root, TrainConfig& c,
                                                     const std::map<std::string, std::string>& saved_path_dirs,
                                                     std::vector<std::string>* notices,
                                                     const std::function<bool(const std::string&)>& holds_run_log) {
    nlohmann::json saved;
    try {
        saved = nlohmann::json::parse(saved_json);
        if (!saved.is_object()) fail("not a JSON object");
        for (const auto& [name, text] : saved.items()) {
            if (!text.is_string()) fail("flag %s is not a string", name.c_str());
        }
    } catch (const std::exception& e) {
        fail("the checkpoint's record of its run's flags is malformed: %s", e.what());
    }
    TrainConfig resumed;
    CLI::App app = make_app();
    add_flags(app, resumed);
    std::error_code ec;
    const fs::path here = fs::current_path(ec);
    std::map<std::string, std::string> kept_dirs;   // restored relative paths read from their run's directory
    const std::optional<MovedRun> moved =
        moved_run(saved, saved_path_dirs, c.given.count("checkpoint-dir") ? c.checkpoint_dir : checkpoint_root, c.given,
                  holds_run_log);
    if (moved && notices) {
        notices->push_back(
            format("the checkpoints are in %s, not under the --output-dir their run wrote, %s: the "
                   "run's directory was moved or copied; its log goes on beside them, in %s",
                   moved->checkpoints.c_str(), moved->was.c_str(), moved->output_dir.c_str()));
    }
    // the checkpoint's flags first, then this command line's: a flag given twice takes the last value
    std::vector<std::string> args = {argc > 0 ? argv[0] : "train_gpt"};
    for (const auto& [name, value] : saved.items()) {
        std::string text = value.get<std::string>();
        const CLI::Option* opt = nullptr;
        for (const CLI::Option* o : app.get_options()) {
            if (long_name(o) == name) opt = o;
        }
        if (opt == nullptr || !restored_on_resume(name) || c.given.count(name))
            continue;   // not a flag of this version
        // a text an older build took that this one reads otherwise or refuses ("010" octal 8; '' and
        // -1 false, 2 true): resumed as that build read it, what its run trained with
        const bool integer = is_integer_flag(name), boolean = !integer && is_bool_flag(name) && !is_flag(opt);
        const std::string before = integer   ? integer_as_read_before(text)
                                   : boolean ? bool_as_read_before(text)
                                             : std::string();
        if (!before.empty()) {
            if (notices) {
                const char* quote = boolean || text.find_first_of(" \t") != std::string::npos ? "'" : "";
                const size_t digits = text.find_first_not_of(" \t+-");
                const bool base = integer && digits != std::string::npos && text[digits] == '0' &&
                                  digits + 1 < text.size();   // "010", "0x5": not " -1"
                notices->push_back(
                    format("the checkpoint records --%s %s%s%s, which the build that wrote it read as "
                           "%s%s: resumed with %s",
                           name.c_str(), quote, text.c_str(), quote, before.c_str(),
                           base ? " (a leading 0 octal, 0x hex)" : "", before.c_str()));
            }
            text = before;
        }
        // a relative path: from the directory of the run that was given it, while that exists; of
        // a run whose directory moved, from where it is now (-o always, the others where they exist)
        if (moved && name == "output-dir" && moved->new_base.empty()) {
            text = moved->output_dir.string();
        } else if (is_path_flag(name) && !text.empty() && text[0] != '/') {
            const auto recorded = saved_path_dirs.find(name);
            const std::string recorded_dir = recorded == saved_path_dirs.end() ? "" : recorded->second;
            std::string dir = fs::is_directory(recorded_dir, ec) ? recorded_dir : "";
            // of a moved run, where it is now; of a copy, where the original's directory still
            // holds it (the run's data, not what stands beside the copy: round 21)
            const std::string moved_dir = !moved                 ? ""
                                          : name == "output-dir" ? moved->new_base
                                                                 : moved->moved_dir(recorded_dir);
            const bool follows =
                !moved_dir.empty() &&
                (name == "output-dir" || (!(moved->copy && !dir.empty() && exists_under(dir, name, text)) &&
                                          exists_under(moved_dir, name, text)));
            if (follows) dir = moved_dir;
            if (dir.empty() && !recorded_dir.empty() && notices) {   // a moved tree: as typed, here
                notices->push_back(
                    format("--%s %s is relative to where the run was given it, %s, which no longer "
                           "exists: read from this directory, %s",
                           name.c_str(), text.c_str(), recorded_dir.c_str(), here.c_str()));
            }
            if (!dir.empty()) {
                kept_dirs[name] = dir;
                if (!fs::equivalent(dir, here, ec)) {
                    // a glob's directory is literal: its own [ ] * ? escaped (a run started in "e[1]")
                    const std::string there = (is_glob_flag(name) ? glob_escaped(dir) : dir) + "/" + text;
                    if (notices) {
                        notices->push_back(format("--%s %s is relative to %s %s: read as %s", name.c_str(),
                                                  text.c_str(),
                                                  follows ? "the run's directory, now" : "where the run was given it,",
                                                  dir.c_str(), there.c_str()));
                    }
                    text = there;
                }
            }
        }
        if (is_flag(opt)) {
            args.push_back("--" + name + "=" + text);
        } else {
            args.push_back("--" + name);
            args.push_back(text);
        }
    }
    if (!c.given.count("checkpoint-dir")) {
        args.push_back("--checkpoint-dir");
        args.push_back(checkpoint_root);
    }
    for (int i = 1; i < argc; i++)
        args.push_back(argv[i]);
    std::vector<const char*> arg_ptrs;
    for (const std::string& a : args)
        arg_ptrs.push_back(a.c_str());
    try {
        app.parse((int)arg_ptrs.size(), arg_ptrs.data());
    } catch (const CLI::ParseError& e) {
        fail("the flags of the checkpoint's run, with this command line's, do not parse: %s", e.what());
    }
    record_flags(app, resumed);
    resumed.given = c.given;
    for (const auto& [name, dir] : kept_dirs) {   // the text as given, relative to its directory
        resumed.flag_texts[name] = saved[name].get<std::string>();
        resumed.path_dirs[name] = dir;
    }
    std::vector<FlagOverride> overrides;
    for (const std::string& name : c.given) {
        if (!saved.contains(name) || !restored_on_resume(name)) continue;
        const std::string was = saved[name].get<std::string>(), now = resumed.flag_texts[name];
        // as the build that wrote it read it ("010" was 8: -x 8 changes nothing)
        const std::string read = is_integer_flag(name) ? integer_as_read_before(was)
                                 : is_bool_flag(name)  ? bool_as_read_before(was)
                                                       : std::string();
        // a path spelled otherwise ("-o ." then "-o ./") is no change (round 29: --auto-resume took it
        // for another run's)
        if (is_path_flag(name) && names_one_path(name, was, saved_path_dirs, now)) continue;
        if (!same_value(read.empty() ? was : read, now)) overrides.push_back({name, was, now});
    }
    // --init-from is not restored (a resume starts from the checkpoint's weights), but the run began
    // from it: recorded on, so its checkpoints and config.json keep saying so and --auto-resume
    // knows the run by it (round 30: a resume recorded none, and the run's own restart with its
    // --init-from was refused as another run's)
    if (!resumed.given.count("init-from") && saved.contains("init-from")) {
        resumed.init_from = resumed.flag_texts["init-from"] = saved["init-from"].get<std::string>();
        if (const auto dir = saved_path_dirs.find("init-from"); dir != saved_path_dirs.end())
            resumed.path_dirs["init-from"] = dir->second;
    }
    c = resumed;
    return overrides;
}

std::string path_dirs_json(const TrainConfig& c) {
    std::error_code ec;
    const std::string here = fs::current_path(ec).string();
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [name, text] : c.flag_texts) {
        if (!is_path_flag(name) || text.empty() || text[0] == '/') continue;
        const auto kept = c.path_dirs.find(name);
        if (kept != c.path_dirs.end()) {
            j[name] = kept->second;
        } else if (!ec) {
            // round 28: a Latin-1 directory name failed the first checkpoint save in the JSON library
            if (!valid_utf8(here)) {
                fail(
                    "the working directory %s is not valid UTF-8, and the run records it (for the relative path "
                    "--%s %s) in its checkpoints' JSON, which holds UTF-8 only: run from a directory whose name is "
                    "UTF-8, or give the paths absolute",
                    printable(here).c_str(), name.c_str(), text.c_str());
            }
            j[name] = here;
        }
    }
    return j.dump();
}

// the flags that set the model's shape (with --init-from: its start model's, checked against them)
static bool is_model_shape_flag(const std::string& name) {
    for (const char* shape : {"model", "n-embd", "n-head", "vocab-size", "max-seq-len"})
        if (name == shape) return true;
    return false;
}

bool defines_the_run(const std::string& name) {
    // -x (a longer run's resubmission), the divergence watch and telemetry (round 29: a restart
    // that changed one was refused), and the memory knobs, which change no value the run computes
    for (const char* knob : {"steps", "max-skipped-steps", "loss-spike-factor", "grad-norm-spike-factor",
                             "stop-on-loss-spike", "fp8-telemetry-every", "recompute", "lm-head-chunks"}) {
        if (name == knob) return false;
    }
    if (name == "seed") return true;
    const Flag* flag = find_flag(name);
    if (flag == nullptr) return false;
    for (const char* group : {"Data", "Model", "Batch", "Optimizer", "Precision"}) {
        if (flag->group == group) return true;
    }
    return false;
}

namespace {
// Whether a path flag's text names something: a file or directory, or a glob's match.
bool names_something(const std::string& name, const fs::path& path) {
    if (is_glob_flag(name)) return exists_under(path.parent_path().string(), name, path.filename().string());
    std::error_code ec;
    return fs::exists(path, ec);
}
}   // namespace

namespace {
// The path flags that say which run it is: its data, its output directory, and where its weights
// began. Not the tokenizer: the shards pin its vocabulary, and a resume takes the checkpoint's
// (round 31: the path a start resolved it to, inside --init-from's newest step, was compared).
constexpr const char* kRunPathFlags[] = {"train-data", "val-data", "output-dir", "init-from"};

// Whether this run's text `now` of a path flag (given or its default) is the earlier run's `was`
// (relative to `saved_dirs`' directory for the flag): the same text (the same job line, in its
// project moved or copied too: round 31), the same path however spelled (names_one_path), or, for
// -i only, its new place: what `was` named is gone and `now` names something (round 29: a project
// moved with its job script's absolute paths was refused; the training data's token counts still
// decide), said in *notices. Not for -j, whose val set nothing else checks (round 33), nor for
// --init-from, whose weights a resume does not read: a recorded start model gone (a base run's
// pruned step) is not any other (round 31). (A path under a moved run's old directory, given at
// its new place, is the run's: moved_with_the_run.)
bool same_path_of_the_run(const std::string& name, const std::string& was,
                          const std::map<std::string, std::string>& saved_dirs, const std::string& now,
                          std::vector<std::string>* notices) {
    if (was == now || names_one_path(name, was, saved_dirs, now)) return true;
    if (name != "train-data") return false;   // -j: no counts to back it (round 33: any val set was "moved")
    const fs::path then = recorded_path(name, was, saved_dirs);
    if (was.empty() || now.empty() || names_something(name, then) || !names_something(name, normal_absolute(now)))
        return false;
    if (notices) {
        notices->push_back(format("--%s %s: the earlier run's %s names nothing now; taken as moved here%s",
                                  name.c_str(), now.c_str(), then.c_str(),
                                  name == "train-data" ? " (its token and shard counts are checked)" : ""));
    }
    return true;
}
// Where `path` (absolute) is now if it moved as `from` moved to `to` (a directory under `from` is
// now under `to`); "" if it was not under `from`.
fs::path moved_along(const fs::path& path, const fs::path& from, const fs::path& to) {
    auto at = path.begin();
    for (auto part = from.begin(); part != from.end(); ++part, ++at) {
        if (at == path.end() || *at != *part) return {};
    }
    fs::path now = to;
    for (; at != path.end(); ++at)
        now /= *at;
    return now;
}
// A run's directory moved from `was` to `now` (absolute): from what to what, their shared last
// names left out (/w/p/ft -> /w/q/ft: /w/p -> /w/q); {} where it did not move.
std::pair<fs::path, fs::path> directory_move(fs::path was, fs::path now) {
    while (was != now && was.has_relative_path() && now.has_relative_path() && was.filename() == now.filename()) {
        was = was.parent_path();
        now = now.parent_path();
    }
    return was == now ? std::pair<fs::path, fs::path>{} : std::make_pair(was, now);
}
// Whether `now` is the path `was` (absolute) moved with the run's directory (`move`, from
// directory_move; round 32: a fine-tune's absolute --init-from in a moved project was another
// run's); said in *notices.
bool moved_with_the_run(const std::string& name, const fs::path& was, const std::string& now,
                        const std::pair<fs::path, fs::path>& move, std::vector<std::string>* notices) {
    if (move.first.empty() || was.empty() || now.empty()) return false;
    const fs::path along = moved_along(was, move.first, move.second);
    std::error_code ec;
    if (along.empty() || (along != normal_absolute(now) && !fs::equivalent(along, now, ec))) return false;
    if (notices) {
        notices->push_back(format("--%s %s: the earlier run's %s, moved with the run's directory (%s to %s)",
                                  name.c_str(), now.c_str(), was.c_str(), move.first.c_str(), move.second.c_str()));
    }
    return true;
}
// "--init-from X (the checkpoint's run: Y)", an empty one said as a fresh model
std::string init_from_difference(const std::string& now, const std::string& was) {
    return format("%s (the checkpoint's run: %s)",
                  now.empty() ? "no --init-from (a fresh model)" : ("--init-from " + now).c_str(),
                  was.empty() ? "a fresh model" : ("--init-from " + was).c_str());
}
}   // namespace

std::string path_identity_differences(const std::string& now_flags, const std::string& saved_flags,
                                      const std::map<std::string, std::string>& saved_dirs,
                                      const std::string& checkpoint_root, std::vector<std::string>* notices) {
    const nlohmann::json saved = nlohmann::json::parse(saved_flags);
    std::error_code ec;
    const fs::path holder = normal_absolute(checkpoint_root).parent_path();
    // the run's directory moved (its checkpoints, of the <-o>/checkpoints layout, are found under
    // another directory): a path under its old place given at the new one moved with it
    std::pair<fs::path, fs::path> move;
    if (saved.contains("output-dir") && in_output_dir_layout(saved, saved_dirs) &&
        !recorded_flag_text(saved_flags, "output-dir").empty())
        move = directory_move(recorded_path("output-dir", recorded_flag_text(saved_flags, "output-dir"), saved_dirs),
                              holder);
    std::string out;
    // given now or left at their defaults (round 31: a job on the default -i took over a run that
    // gave other data; round 30: one without --init-from, a fine-tune's)
    for (const char* name : kRunPathFlags) {
        if (!saved.contains(name)) continue;   // a checkpoint from before the flag
        const std::string now = recorded_flag_text(now_flags, name), was = recorded_flag_text(saved_flags, name);
        // -o naming the directory that holds the checkpoints of a run that kept them there: this
        // run's directory, moved (round 29: not one whose --checkpoint-dir put them there)
        if (std::string(name) == "output-dir" && !now.empty() && in_output_dir_layout(saved, saved_dirs) &&
            (normal_absolute(now) == holder || fs::equivalent(now, holder, ec)))
            continue;
        if (same_path_of_the_run(name, was, saved_dirs, now, notices) ||
            (!was.empty() && moved_with_the_run(name, recorded_path(name, was, saved_dirs), now, move, notices)))
            continue;
        out += (out.empty() ? "" : ", ") +
               (std::string(name) == "init-from"
                    ? init_from_difference(now, was)
                    : format("--%s %s (the checkpoint's run: %s)", name, now.c_str(), was.c_str()));
    }
    return out;
}

std::optional<std::string> config_identity_differences(const std::string& saved_config_json, const TrainConfig& c,
                                                       const RunPlan& p) {
    const auto saved = nlohmann::json::parse(saved_config_json, nullptr, false);
    if (!saved.is_object()) return std::nullopt;
    // a config.json of train_gpt's holds these (round 31: one of another program, none of them,
    // compared equal)
    for (const char* key : {"train_data", "model", "batch_size", "lr", "seed", "precision"})
        if (!saved.contains(key)) return std::nullopt;
    const auto now = nlohmann::json::parse(config_json(c, p));
    std::string out;
    for (const Flag& flag : flag_table()) {
        const std::string key = flag.key(), name = flag.long_name();
        // fp8's GEMMs: auto is resolved (timed) after this, and config.json holds the choice; the
        // warmup's default (-u -1, given or not) follows -x, which a restart may raise (round 30:
        // an explicit -u -1 was compared as the warmup it resolved to); paths below
        if (!defines_the_run(name) || is_path_flag(name) || key == "fp8_gemms" ||
            (key == "warmup_steps" && c.warmup_steps < 0) || !saved.contains(key) || !now.contains(key) ||
            saved[key] == now[key])
            continue;
        out += format("%s%s %s (config.json: %s)", out.empty() ? "" : ", ", key.c_str(), now[key].dump().c_str(),
                      saved[key].dump().c_str());
    }
    // the data and where the weights began, as what they name relative to this directory (round
    // 30: a job on other data, or a fresh model, replaced the log of another killed early); -o is
    // the directory this config.json is in
    std::pair<fs::path, fs::path> move;   // moved with the directory of this config.json, which records it
    if (saved.contains("output_dir") && saved["output_dir"].is_string() && !c.output_dir.empty())
        move = directory_move(normal_absolute(saved["output_dir"].get<std::string>()), normal_absolute(c.output_dir));
    for (const char* name : kRunPathFlags) {
        std::string key = name;
        std::replace(key.begin(), key.end(), '-', '_');
        if (key == "output_dir" || !saved.contains(key) || !saved[key].is_string() || !now.contains(key) ||
            !now[key].is_string())
            continue;
        const std::string was = saved[key].get<std::string>(), is = now[key].get<std::string>();
        if (same_path_of_the_run(name, was, {}, is, nullptr) ||
            (!was.empty() && moved_with_the_run(name, normal_absolute(was), is, move, nullptr)))
            continue;
        out += format("%s%s %s (config.json: %s)", out.empty() ? "" : ", ", key.c_str(), now[key].dump().c_str(),
                      saved[key].dump().c_str());
    }
    return out;
}

std::string recorded_flag_text(const std::string& flags, const std::string& long_name) {
    const nlohmann::json j = nlohmann::json::parse(flags);
    return j.contains(long_name) && j[long_name].is_string() ? j[long_name].get<std::string>() : "";
}

std::string run_identity_differences(const std::string& now_flags, const std::string& saved_flags) {
    const nlohmann::json now = nlohmann::json::parse(now_flags), saved = nlohmann::json::parse(saved_flags);
    // the same number however written ("0.002", "2e-3"); integers as integers (round 30: seeds above
    // 2^53 differing in their low bits were one double)
    auto same = [](const std::string& a, const std::string& b) {
        if (a == b) return true;
        const std::optional<uint64_t> int_a = parse_u64(a), int_b = parse_u64(b);
        if (int_a && int_b) return *int_a == *int_b;
        return same_value(a, b);   // true/false in any spelling (round 31: -w true was not "1"), numbers
    };
    // a fine-tune's shape is its start model's (--init-from, compared as a path), and a shape flag
    // given is checked against that model: the text of one left at its default says nothing
    // (round 34: a restart giving the true -e d1 was refused against the default's "d2")
    auto from_a_model = [](const nlohmann::json& flags) {
        return flags.contains("init-from") && flags["init-from"].is_string() &&
               !flags["init-from"].get<std::string>().empty();
    };
    const bool shaped_by_init_from = from_a_model(now) && from_a_model(saved);
    std::string out;
    for (const auto& [name, text] : now.items()) {
        if (!defines_the_run(name) || is_path_flag(name) || !saved.contains(name) || !text.is_string() ||
            !saved[name].is_string())
            continue;
        if (shaped_by_init_from && is_model_shape_flag(name)) continue;
        if (!same(text.get<std::string>(), saved[name].get<std::string>())) {
            out += format("%s--%s %s (the checkpoint's run: %s)", out.empty() ? "" : ", ", name.c_str(),
                          text.get<std::string>().c_str(), saved[name].get<std::string>().c_str());
        }
    }
    return out;
}

std::string first_flag_difference(const std::string& flags, const std::string& reference) {
    const nlohmann::json a = nlohmann::json::parse(flags), b = nlohmann::json::parse(reference);
    for (const auto& [name, text] : b.items()) {
        if (!a.contains(name))
            return format("rank 0 has --%s %s, this rank does not", name.c_str(), text.get<std::string>().c_str());
        if (a[name] != text) {
            return format("--%s is %s here, %s on rank 0", name.c_str(), a[name].get<std::string>().c_str(),
                          text.get<std::string>().c_str());
        }
    }
    for (const auto& [name, text] : a.items()) {
        if (!b.contains(name))
            return format("this rank has --%s %s, rank 0 does not", name.c_str(), text.get<std::string>().c_str());
    }
    return "";
}

std::optional<SavedDataOrder> saved_data_order(const std::string& saved_config_json) {
    const auto saved = nlohmann::json::parse(saved_config_json, nullptr, false);
    if (!saved.is_object()) return std::nullopt;
    const auto seq_len = saved.find("seq_len"), shuffle = saved.find("shuffle"), seed = saved.find("seed");
    if (seq_len == saved.end() || !seq_len->is_number_integer() || shuffle == saved.end() || !shuffle->is_boolean() ||
        seed == saved.end() || !seed->is_number_integer()) {
        return std::nullopt;
    }
    SavedDataOrder order;
    const int64_t t = seq_len->get<int64_t>();
    if (t < 1 || t > INT_MAX) return std::nullopt;
    order.seq_len = (int)t;
    order.shuffle = shuffle->get<bool>();
    order.seed = seed->get<uint64_t>();
    return order;
}

std::optional<int64_t> saved_rank_tokens_per_step(const std::string& saved_config_json) {
    const auto saved = nlohmann::json::parse(saved_config_json, nullptr, false);
    if (!saved.is_object()) return std::nullopt;
    int64_t tokens = 1;
    for (const char* key : {"batch_size", "seq_len", "grad_accum_steps"}) {
        const auto field = saved.find(key);
        if (field == saved.end() || !field->is_number_integer()) return std::nullopt;
        const int64_t n = field->get<int64_t>();
        if (n < 1 || n > INT_MAX || n > (INT64_MAX / tokens)) return std::nullopt;
        tokens *= n;
    }
    return tokens;
}

std::string data_order_change_notice(const SavedDataOrder& then, const DataOrderNow& now, int64_t position_then,
                                     int64_t position_now) {
    const int64_t epoch = now.samples_per_epoch > 0 ? position_now / now.samples_per_epoch : 0;
    const int seq_len_now = now.seq_len;
    if (then.seq_len != seq_len_now) {
        std::string text = format(
            "--seq-len %d (the checkpoint's run: %d): the data position, a sample index, moves from sample %lld of "
            "%d-token samples to sample %lld of %d-token samples",
            seq_len_now, then.seq_len, (long long)position_then, then.seq_len, (long long)position_now, seq_len_now);
        if (!now.shuffle && !then.shuffle)
            return text + ", the same place in the token stream: no token is trained on twice";
        return text + format(
                          ", the same fraction of epoch %lld; the rest of that epoch is shuffled anew over samples of "
                          "%d tokens, so part of what it trained on comes again and part of what it had not is "
                          "skipped until the next epoch",
                          (long long)epoch, seq_len_now);
    }
    if ((then.shuffle || now.shuffle) && (then.shuffle != now.shuffle || then.seed != now.seed)) {
        return format(
            "--shuffle %s --seed %llu (the checkpoint's run: --shuffle %s --seed %llu): the rest of epoch %lld is "
            "read in another order, so part of what it trained on comes again and part of what it had not is skipped "
            "until the next epoch",
            now.shuffle ? "true" : "false", (unsigned long long)now.seed, then.shuffle ? "true" : "false",
            (unsigned long long)then.seed, (long long)epoch);
    }
    return "";
}

std::string batch_change_notice(const TrainConfig& c, const RunPlan& now, const std::string& saved_config_json) {
    nlohmann::json saved;
    try {
        saved = nlohmann::json::parse(saved_config_json);
    } catch (const nlohmann::json::exception&) {
        return "";
    }
    if (!saved.contains("tokens_per_step") || !saved["tokens_per_step"].is_number_integer() ||
        !saved.contains("world_size") || !saved["world_size"].is_number_integer()) {
        return "";   // a checkpoint from before these were recorded
    }
    const int64_t then = saved["tokens_per_step"].get<int64_t>(), ranks_then = saved["world_size"].get<int64_t>();
    if (then == now.tokens_per_step) return "";
    const int64_t per_micro_step = (int64_t)c.batch_size * now.seq_len * now.world_size;
    std::string keep;
    if (then % per_micro_step == 0 && !c.given.count("total-batch-tokens"))
        keep = format(" To keep the checkpoint's, give -d %lld.", (long long)then);
    return format(
        "an optimizer step now takes %lld tokens (B %d x T %d x %d rank(s) x %d accumulation step(s)); the "
        "checkpoint's run took %lld on %lld rank(s). The batch the gradient averages over changes, and with it the "
        "gradient's noise and the learning rate that suits it.%s",
        (long long)now.tokens_per_step, c.batch_size, now.seq_len, now.world_size, now.grad_accum_steps,
        (long long)then, (long long)ranks_then, keep.c_str());
}

std::string val_set_change_notice(const TrainConfig& c, const RunPlan& now, const std::string& saved_config_json) {
    if (c.val_data.empty() || c.val_every == 0) return "";   // no val loss now (round 44: said anyway)
    const auto saved = nlohmann::json::parse(saved_config_json, nullptr, false);
    if (!saved.is_object()) return "";
    for (const char* key : {"val_batches", "batch_size", "seq_len"}) {
        if (!saved.contains(key) || !saved[key].is_number_integer()) return "";   // none then, or not recorded
    }
    const int64_t m = saved["val_batches"].get<int64_t>(), b = saved["batch_size"].get<int64_t>(),
                  t = saved["seq_len"].get<int64_t>();
    const int64_t then = m * b * t, is = (int64_t)c.val_batches * c.batch_size * now.seq_len;
    if (then == is) return "";
    std::string keep;
    if (t == now.seq_len && (m * b) % c.batch_size == 0)
        keep = format(" To keep the checkpoint's, give -m %lld.", (long long)(m * b / c.batch_size));
    return format(
        "an evaluation now covers %d batches of %dx%d, %lld tokens of the validation set; the checkpoint's run "
        "covered %lld batches of %lldx%lld, %lld tokens. Val losses before and after this step are means over "
        "other tokens.%s",
        c.val_batches, c.batch_size, now.seq_len, (long long)is, (long long)m, (long long)b, (long long)t,
        (long long)then, keep.c_str());
}

std::string schedule_change_notice(const LrSchedule& now, const std::string& saved_config_json, int64_t step) {
    nlohmann::json saved;
    try {
        saved = nlohmann::json::parse(saved_config_json);
    } catch (const nlohmann::json::exception&) {
        return "";
    }
    const char* keys[] = {"steps", "lr", "warmup_steps", "lr_schedule", "final_lr_frac", "wsd_decay_frac"};
    for (const char* key : keys) {
        if (!saved.contains(key)) return "";   // a checkpoint from before these were recorded
    }
    LrSchedule then;
    try {
        then.kind = parse_lr_schedule(saved["lr_schedule"].get<std::string>());
        then.lr = saved["lr"].get<float>();
        then.warmup_steps = saved["warmup_steps"].get<int>();
        then.total_steps = saved["steps"].get<int>();
        then.final_lr_frac = saved["final_lr_frac"].get<float>();
        then.decay_frac = saved["wsd_decay_frac"].get<float>();
    } catch (const std::exception&) {
        return "";
    }
    const double was = then.at((int)step), is = now.at((int)step);
    // below 0.1% the change is immaterial (and would print as "raised from 0.002 to 0.002")
    if (std::fabs(is - was) <= 1e-3 * std::max(std::fabs(was), std::fabs(is))) return "";
    // what changed (round 34: a resume given only another --lr was told its schedule "now runs to
    // step 6 (the checkpoint's run: 6)", and advised to undo the --lr)
    std::vector<std::string> changes;
    const bool longer = now.total_steps != then.total_steps;
    if (longer)
        changes.push_back(format("now runs to step %d (the checkpoint's run: %d)", now.total_steps, then.total_steps));
    auto changed = [&](const char* flag, const std::string& is_text, const std::string& was_text) {
        if (is_text != was_text)
            changes.push_back(format("%s %s (the checkpoint's run: %s)", flag, is_text.c_str(), was_text.c_str()));
    };
    changed("--lr", format("%.4g", now.lr), format("%.4g", then.lr));
    // (the default warmup follows -x: a longer run's is said by its steps)
    if (!longer) changed("--warmup-steps", std::to_string(now.warmup_steps), std::to_string(then.warmup_steps));
    changed("--lr-schedule", lr_schedule_name(now.kind), lr_schedule_name(then.kind));
    changed("--final-lr-frac", format("%.4g", now.final_lr_frac), format("%.4g", then.final_lr_frac));
    changed("--wsd-decay-frac", format("%.4g", now.decay_frac), format("%.4g", then.decay_frac));
    std::string what;
    for (size_t i = 0; i < changes.size(); i++)
        what += (i == 0 ? "" : i + 1 == changes.size() ? " and " : ", ") + changes[i];
    if (changes.empty())
        what = "changed";
    else if (!longer)
        what = "changed: " + what;
    // the advice keeps the rate the checkpoint's run would have trained on; where --lr itself was
    // changed, the new rate is the point
    const bool lr_given = now.lr != then.lr;
    // why a longer run's rate differs: the step back inside the warmup (a sixth of -x by default),
    // or further from the decay's end
    const std::string cause =
        !longer ? ""
        : step < now.warmup_steps
            ? format(" (the step is back in the warmup, which now runs to step %d)", now.warmup_steps)
            : " (a decay is stretched over the new steps)";
    return format(
        "the learning-rate schedule %s, so the learning rate at step %lld is %.4g, %s from the %.4g of the "
        "checkpoint's schedule%s%s",
        what.c_str(), (long long)step + 1, is, is > was ? "raised" : "lowered", was, cause.c_str(),
        lr_given ? ""
                 : format(". To train on at the checkpoint's rate instead, add --lr-schedule constant --lr "
                          "%.4g --warmup-steps 0",
                          was)
                       .c_str());
}

std::string evaluation_flags_of(const std::string& saved_config_json, TrainConfig& c) {
    const auto saved = nlohmann::json::parse(saved_config_json, nullptr, false);
    if (!saved.is_object()) return "";
    const std::pair<const char*, int*> fields[] = {
        {"batch-size", &c.batch_size}, {"seq-len", &c.seq_len}, {"val-batches", &c.val_batches}};
    std::string taken;
    for (const auto& [flag, field] : fields) {
        std::string key = flag;
        for (char& ch : key) {
            if (ch == '-') ch = '_';
        }
        if (c.given.count(flag) || !saved.contains(key) || !saved[key].is_number_integer()) continue;
        if (std::string(flag) == "val-batches" && c.val_data.empty()) continue;   // no val loss to measure
        const int64_t value = saved[key].get<int64_t>();
        if (value < 1 || value > INT32_MAX) continue;
        *field = (int)value;
        c.given.insert(flag);
        c.flag_texts[flag] = std::to_string(value);
        taken += format("%s--%s %d", taken.empty() ? "" : " ", flag, *field);
    }
    return taken;
}

void check_cuda_attention_shape(const std::string& kind, int n_embd, int n_head) {
    if (kind == "flash" || n_head < 1 || n_embd % n_head != 0) return;   // flash: only head size 64 is chosen
    const int hs = n_embd / n_head;
    if (hs % 8 != 0 || (kind == "cudnn" && hs > 128)) {
        fail(
            "--n-embd %d / --n-head %d = head size %d: the CUDA attention (%s) takes a head size that is a multiple "
            "of 8%s; choose another --n-head, or --device cpu",
            n_embd, n_head, hs, kind.c_str(), kind == "cudnn" ? " up to 128" : "");
    }
}

void check_fp8_training_shape(int B, int T, int fp8_gemm_multiple, const std::string& kernel_set) {
    if (fp8_gemm_multiple > 1 && ((int64_t)B * T) % fp8_gemm_multiple != 0) {
        fail(
            "-p fp8 training on %s: -b %d times -t %d = %lld must be a multiple of %d (FP8 tensor-core GEMMs reduce "
            "over B·T in the weight gradients); choose -b or -t so, or --fp8-gemms none",
            kernel_set.c_str(), B, T, (long long)B * T, fp8_gemm_multiple);
    }
}

void validate_start(const TrainConfig& c) {
    if (c.resume && c.auto_resume) fail("--resume and --auto-resume: give one (--auto-resume also starts a fresh run)");
    if (c.resume && !c.init_from.empty()) {
        fail(
            "--resume continues a run from its checkpoint, with its weights; --init-from %s starts one from other "
            "weights: give one of them",
            c.init_from.c_str());
    }
    if (c.resume_from_intact && !c.resume && !c.auto_resume) {
        fail("--resume-from-intact chooses the checkpoint a run resumes from: give it with --resume or --auto-resume");
    }
    // -o '': no output directory, so no <output-dir>/checkpoints either (before: "/checkpoints")
    if (c.output_dir.empty() && c.checkpoint_dir.empty() && (c.checkpoint_every > 0 || c.resume || c.auto_resume)) {
        fail(
            "-o '': checkpoints go under the output directory, and there is none: give -o DIR or --checkpoint-dir DIR "
            "(with %s)",
            c.checkpoint_every > 0 ? "--checkpoint-every"
            : c.resume             ? "--resume"
                                   : "--auto-resume");
    }
}

void validate(const TrainConfig& c) {
    if (c.train_data.empty()) fail("--train-data must not be empty");
    // the parser reads floats as double, then stores a float: beyond FLT_MAX they would be inf
    for (const Flag& flag : flag_table()) {
        if (const auto* member = std::get_if<float TrainConfig::*>(&flag.field); member && !std::isfinite(c.**member)) {
            const std::string name = flag.long_name();
            fail("--%s %s is beyond the range of a float (%g)", name.c_str(),
                 c.flag_texts.count(name) ? c.flag_texts.at(name).c_str() : "", FLT_MAX);
        }
    }
    if (c.stop_on_loss_spike && c.loss_spike_factor == 0) {
        fail("--stop-on-loss-spike: --loss-spike-factor is 0, so no loss is ever a spike");
    }
    if (c.max_seq_len != 0 && c.max_seq_len < c.seq_len) {
        fail("--seq-len %d exceeds --max-seq-len %d", c.seq_len, c.max_seq_len);
    }
}

int grad_accum_steps_for(const TrainConfig& c, int world_size, int seq_len) {
    const int64_t per_micro_step = (int64_t)c.batch_size * (seq_len > 0 ? seq_len : c.seq_len) * world_size;
    if (c.total_batch_tokens == 0) return 1;
    if (c.total_batch_tokens % per_micro_step != 0) {
        fail("--total-batch-tokens %lld is not a multiple of batch-size * seq-len * ranks = %lld",
             (long long)c.total_batch_tokens, (long long)per_micro_step);
    }
    // the accumulation count is an int (and each of its micro-batches a forward and backward)
    constexpr int64_t kMaxAccumulation = 1 << 20;
    if (c.total_batch_tokens / per_micro_step > kMaxAccumulation) {
        fail(
            "--total-batch-tokens %lld: %lld micro-batches of batch-size * seq-len * ranks = %lld tokens per "
            "optimizer step, more than %lld: give a smaller --total-batch-tokens (or a larger --batch-size)",
            (long long)c.total_batch_tokens, (long long)(c.total_batch_tokens / per_micro_step),
            (long long)per_micro_step, (long long)kMaxAccumulation);
    }
    return (int)(c.total_batch_tokens / per_micro_step);
}

RunData run_data(const TrainConfig& c) {
    RunData d;
    if (c.steps > 0) d.train = c.train_data;
    if (c.val_every > 0 && (c.steps > 0 || c.given.count("val-data"))) d.val = c.val_data;
    return d;
}

int default_warmup_steps(int steps) { return std::min((steps + 5) / 6, 700); }

std::string checkpoint_dir_of(const TrainConfig& c) {
    return c.checkpoint_dir.empty() ? c.output_dir + "/checkpoints" : c.checkpoint_dir;
}

RunPlan resolve_run_plan(const TrainConfig& c, int world_size, int tokenizer_vocab, const GPTConfig* model,
                         const std::string& model_source) {
    RunPlan plan;
    int vocab_size = c.vocab_size;
    if (model != nullptr && vocab_size == 0) vocab_size = model->vocab_size;
    if (tokenizer_vocab > 0) {
        if (vocab_size == 0) vocab_size = tokenizer_vocab;
        const bool from_model = model != nullptr && c.vocab_size == 0;
        const char* what = from_model ? "the vocabulary of the model the run starts from" : "--vocab-size";
        if (vocab_size < tokenizer_vocab)
            fail("%s %d is smaller than the tokenizer's %d", what, vocab_size, tokenizer_vocab);
        // ids the tokenizer has no text for: samples could not be decoded
        if (vocab_size > tokenizer_vocab && (!from_model || c.sample_tokens > 0)) {
            fail("%s %d is larger than the tokenizer's %d (%s): the model could sample ids it cannot decode%s", what,
                 vocab_size, tokenizer_vocab, c.tokenizer.empty() ? "the run's tokenizer" : c.tokenizer.c_str(),
                 from_model && c.steps == 0 ? "; give -g 0 to evaluate it without sampling" : "");
        }
    }
    if (vocab_size == 0) {
        fail(
            "the run has no tokenizer (no --tokenizer, none beside the training shards): give --tokenizer, or "
            "--vocab-size to train without one");
    }
    if (model != nullptr) {
        // the model's shape; a shape flag given on the command line must describe the same model
        plan.model = *model;
        const GPTConfig flags = gpt_config_from_spec(
            c.model, vocab_size, c.max_seq_len > 0 ? c.max_seq_len : model->max_seq_len, c.n_embd, c.n_head);
        auto check = [&](const char* flag, const char* field, int want, int got) {
            if (c.given.count(flag) && want != got) {
                fail("--%s: the model the run starts from (%s) has %s %d, the flags make %d", flag,
                     model_source.c_str(), field, got, want);
            }
        };
        check("model", "n_layer", flags.n_layer, model->n_layer);
        check("n-embd", "n_embd", flags.n_embd, model->n_embd);
        check("n-head", "n_head", flags.n_head, model->n_head);
        check("vocab-size", "vocab_size", flags.vocab_size, model->vocab_size);
        check("max-seq-len", "max_seq_len", flags.max_seq_len, model->max_seq_len);
        if (c.seq_len > model->max_seq_len && c.given.count("seq-len")) {
            fail("--seq-len %d exceeds the position table (%d) of the model the run starts from (%s)", c.seq_len,
                 model->max_seq_len, model_source.c_str());
        }
        // without -t: what the model has, when that is shorter or the run only evaluates
        if (!c.given.count("seq-len") && (c.seq_len > model->max_seq_len || c.steps == 0)) {
            plan.seq_len = model->max_seq_len;
        }
    } else {
        plan.model = gpt_config_from_spec(c.model, vocab_size, c.max_seq_len > 0 ? c.max_seq_len : c.seq_len, c.n_embd,
                                          c.n_head);
    }
    if (plan.seq_len == 0) plan.seq_len = c.seq_len;
    plan.world_size = world_size;
    plan.grad_accum_steps = grad_accum_steps_for(c, world_size, plan.seq_len);
    plan.tokens_per_step = (int64_t)c.batch_size * plan.seq_len * world_size * plan.grad_accum_steps;

    PrecisionConfig& p = plan.precision;
    // auto: the CPU's default until the trainer knows the device (default_precision_for)
    p.precision = c.precision == "auto" ? default_precision_for("cpu") : parse_precision(c.precision);
    p.master_weights = c.master_weights;
    p.fp8.amax_history = c.fp8_amax_history;
    p.fp8.algo = parse_fp8_amax_algo(c.fp8_amax_algo);
    p.fp8.margin = c.fp8_margin;
    p.fp8.recipe = parse_fp8_recipe(c.fp8_recipe);
    if (c.fp8_gemms != "auto") p.fp8.gemms = parse_fp8_gemms(c.fp8_gemms);   // auto: timed by the trainer

    plan.adamw = AdamWConfig{c.beta1, c.beta2, c.adam_eps, c.weight_decay};
    plan.schedule.kind = parse_lr_schedule(c.lr_schedule);
    plan.schedule.lr = c.lr;
    plan.schedule.warmup_steps = c.warmup_steps >= 0 ? c.warmup_steps : default_warmup_steps(c.steps);
    plan.schedule.total_steps = c.steps;
    plan.schedule.final_lr_frac = c.final_lr_frac;
    plan.schedule.decay_frac = c.wsd_decay_frac;
    plan.checkpoint_dir = checkpoint_dir_of(c);
    // checked last: the model and the flags are checked against each other first (a -x 0 -g 0 run
    // does that and nothing else, refused only here)
    // (-j '' evaluates nothing: a script's unset variable)
    if (c.steps == 0 && c.sample_tokens == 0 && c.hellaswag.empty() &&
        !(c.val_every > 0 && c.given.count("val-data") && !c.val_data.empty())) {
        if (c.given.count("val-data") && !c.val_data.empty()) {
            fail("-x 0 -g 0 -j %s: nothing to do, because -v 0 turns the val loss off: give -v N (N > 0) to evaluate",
                 c.val_data.c_str());
        }
        fail(
            "-x 0 -g 0: nothing to do (no training, no sample, no evaluation). Give -j GLOB (and --init-from) to "
            "evaluate a model's val loss, --hellaswag FILE, or -g N to sample");
    }
    return plan;
}

std::vector<ConfigRow> describe(const TrainConfig& c, const RunPlan& p) {
    std::vector<ConfigRow> rows;
    for (const Flag& flag : flag_table()) {
        if (flag.applies_to && !flag.row_in_every_run && !flag.applies_to(c, p)) {
            rows.push_back({ConfigRow::kNone, flag.key(), "-"});
        } else if (flag.rows) {
            for (ConfigRow& r : flag.rows(c, p))
                rows.push_back(std::move(r));
        } else {
            rows.push_back(field_row(flag, c));
        }
    }
    return rows;
}

std::vector<std::string> unused_flag_notices(const TrainConfig& c, const RunPlan& p) {
    std::vector<std::string> notices;
    for (const Flag& flag : flag_table()) {
        if (flag.applies_to && !flag.applies_to(c, p) && c.given.count(flag.long_name())) {
            notices.push_back(format("--%s has no effect in this run: it applies with %s only",
                                     flag.long_name().c_str(), flag.applies_to_words.c_str()));
        }
    }
    return notices;
}

void print_config_table(const TrainConfig& c, const RunPlan& p) {
    auto rows = describe(c, p);
    size_t key_width = 0, value_width = 0;
    for (const ConfigRow& r : rows) {
        key_width = std::max(key_width, r.key.size());
        value_width = std::max(value_width, r.value.size());
    }
    std::string rule = "+" + std::string(key_width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+";
    std::printf("%s\n", rule.c_str());
    for (const ConfigRow& r : rows) {
        std::printf("| %-*s | %-*s |\n", (int)key_width, r.key.c_str(), (int)value_width, r.value.c_str());
    }
    std::printf("%s\n", rule.c_str());
}

std::string config_json(const TrainConfig& c, const RunPlan& p) {
    nlohmann::ordered_json j;
    for (const ConfigRow& r : describe(c, p)) {
        // a flag's text is checked as it is parsed; what the run found (a tokenizer beside shards a
        // glob matched) is checked here (round 28: the JSON library's error, after -o was made)
        if (!valid_utf8(r.value)) {
            fail(
                "%s %s: not valid UTF-8 (a directory named in another encoding?); the run's JSON files (config.json, "
                "log.jsonl, checkpoints) hold UTF-8 only",
                r.key.c_str(), printable(r.value).c_str());
        }
        switch (r.kind) {
            case ConfigRow::kText: j[r.key] = r.value; break;
            case ConfigRow::kInteger:   // int64, or uint64 (the seed)
                if (r.value[0] == '-')
                    j[r.key] = std::stoll(r.value);
                else
                    j[r.key] = std::stoull(r.value);
                break;
            case ConfigRow::kNumber: j[r.key] = std::stod(r.value); break;
            case ConfigRow::kBool: j[r.key] = r.value == "true"; break;
            case ConfigRow::kNone: j[r.key] = nullptr; break;
        }
    }
    return j.dump(2) + "\n";
}

void save_config_json(const std::string& path, const TrainConfig& c, const RunPlan& p) {
    std::string text = config_json(c, p);
    write_file_atomic(path, text.data(), text.size());
}

Precision default_precision_for(const std::string& device) {
    return device == "cuda" ? Precision::BF16 : Precision::FP32;
}

std::string precision_source(const TrainConfig& cfg, const RunPlan& plan) {
    if (cfg.precision != "auto") return "-p " + cfg.precision;
    return plan.device == "cuda" ? "default: bf16 on a GPU" : "default: fp32 on the CPU";
}

}   // namespace train_gpt
