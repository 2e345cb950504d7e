// flags.h — the one table of the trainer's flags. Each row says how the flag is spelled, which
// TrainConfig field it sets, its help text and range, and what it adds to the resolved
// configuration (the start-up table and config.json). Everything else is built from the table:
// the parser and --help (config.cpp, CLI11), the flags a checkpoint records, the range checks,
// and config.json, which so holds every flag.
//
// Host compiler only (config.cpp, flags.cpp); the trainer sees TrainConfig and RunPlan (config.h).
#pragma once

#include "train/config.h"

#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace train_gpt {

// The TrainConfig field a flag sets.
using FlagField = std::variant<std::string TrainConfig::*, int TrainConfig::*, int64_t TrainConfig::*,
                               uint64_t TrainConfig::*, float TrainConfig::*, bool TrainConfig::*>;

// A check of a flag's text: "" when it is good, else the reason ("'abc' is not a number").
using FlagCheck = std::function<std::string(const std::string& text)>;

// What a flag adds to the resolved configuration: the value the run resolved it to (the model's
// vocabulary for --vocab-size 0), "-" where the run does not use it (kNone), and any rows that
// follow from it (n_layer after --model).
using FlagRows = std::function<std::vector<ConfigRow>(const TrainConfig&, const RunPlan&)>;

// One row of the table, written as Flag("-x,--steps", "Optimizer", "N", "Optimizer steps",
// &TrainConfig::steps).checked(non_negative, ">= 0").
struct Flag {
    std::string names;   // CLI11's spelling: "-x,--steps"; the long name is the flag's name
    std::string group;   // the --help section
    std::string value;   // what --help shows for the value ("N", "LR"); "" for a switch
    std::string help;
    FlagField field;
    bool is_switch = false;             // takes no value (--shuffle); a bool with a value is given as true/false
    std::vector<std::string> choices;   // the only values allowed ({} = any that `check` accepts)
    FlagCheck check;                    // null: any value of the field's type
    std::string range;                  // the check in words, for --help ("N >= 0"); "" = none
    FlagRows rows;                      // null: one row, the field's value, keyed by key()

    Flag(std::string names_, std::string group_, std::string value_, std::string help_, FlagField field_)
        : names(std::move(names_)),
          group(std::move(group_)),
          value(std::move(value_)),
          help(std::move(help_)),
          field(field_) {}
    Flag& no_value() {
        is_switch = true;
        return *this;
    }
    Flag& one_of(std::vector<std::string> values) {
        choices = std::move(values);
        return *this;
    }
    Flag& checked(FlagCheck c, std::string words) {
        check = std::move(c);
        range = std::move(words);
        return *this;
    }
    Flag& config(FlagRows r) {
        rows = std::move(r);
        return *this;
    }
    // A flag that only some runs use (the fp8 ones, sampling's): the others show "-" (kNone) for
    // it, and a run given it is told it has no effect there (unused_flag_notices, config.h).
    // `runs`: those it applies to, in words ("-p fp8").
    Flag& only_for(bool (*applies)(const TrainConfig&, const RunPlan&), std::string runs) {
        applies_to = applies;
        applies_to_words = std::move(runs);
        return *this;
    }
    // The same notice for a flag whose value config.json keeps in every run, because code reads it
    // back from there (the schedule's shape, compared on resume) or tests a run by it.
    Flag& effective_only_for(bool (*applies)(const TrainConfig&, const RunPlan&), std::string runs) {
        only_for(applies, std::move(runs));
        row_in_every_run = true;
        return *this;
    }
    bool (*applies_to)(const TrainConfig&, const RunPlan&) = nullptr;   // null: every run
    std::string applies_to_words;
    bool row_in_every_run = false;   // effective_only_for: the value in config.json where it has no effect

    std::string long_name() const;   // "steps"
    std::string key() const;         // "steps", "train_data": its key in config.json
};

// Every flag of the trainer, in --help's order (and config.json's).
const std::vector<Flag>& flag_table();

// The field's value, as text ("120", "true", "2e-3" as the float prints with %g).
std::string field_text(const Flag& flag, const TrainConfig& cfg);
// The default row of a flag: the field's value, of the field's kind.
ConfigRow field_row(const Flag& flag, const TrainConfig& cfg);

}   // namespace train_gpt
