// run_tokenizer.cpp — see run_tokenizer.h.
#include "data/run_tokenizer.h"

#include "utils.h"

namespace train_gpt {

namespace {

std::string directory_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string describe(const ShardTokenizer& t) {
    return format("vocab %d, fingerprint %016llx", t.vocab_size, (unsigned long long)t.fingerprint);
}

ShardTokenizer record_of(const Tokenizer& t) { return ShardTokenizer{t.vocab_size(), t.fingerprint()}; }

bool same(const ShardTokenizer& a, const ShardTokenizer& b) {
    return a.vocab_size == b.vocab_size && a.fingerprint == b.fingerprint;
}

}   // namespace

DataTokenizer data_tokenizer(const std::string& glob) {
    DataTokenizer found;
    for (const std::string& path : expand_glob(glob)) {
        const ShardInfo info = read_shard_header(path);
        if (!info.tokenizer.recorded()) continue;
        if (found.shard.empty()) {
            found = DataTokenizer{info.tokenizer, path};
        } else if (!same(found.tokenizer, info.tokenizer)) {
            fail("%s and %s were made with different tokenizers (%s; %s); a run reads shards of one tokenizer",
                 found.shard.c_str(), path.c_str(), describe(found.tokenizer).c_str(),
                 describe(info.tokenizer).c_str());
        }
    }
    return found;
}

std::optional<Tokenizer> choose_run_tokenizer(const std::string& flag, std::optional<Tokenizer> model_tokenizer,
                                              const std::vector<std::string>& globs, std::string* how) {
    std::vector<DataTokenizer> records;   // one per glob that records a tokenizer
    std::string first_shard;              // of the first glob: where "beside the shards" is
    for (const std::string& glob : globs) {
        if (glob.empty()) continue;
        if (first_shard.empty()) first_shard = expand_glob(glob).front();
        DataTokenizer d = data_tokenizer(glob);
        if (!d.shard.empty()) records.push_back(std::move(d));
    }
    for (size_t i = 1; i < records.size(); i++) {
        if (!same(records[0].tokenizer, records[i].tokenizer)) {
            fail("%s and %s were made with different tokenizers (%s; %s); a run reads shards of one tokenizer",
                 records[0].shard.c_str(), records[i].shard.c_str(), describe(records[0].tokenizer).c_str(),
                 describe(records[i].tokenizer).c_str());
        }
    }
    const std::string beside = first_shard.empty() ? "" : directory_of(first_shard) + "/tokenizer.bin";
    // The tokenizer beside the shards, when it is the one they record: named in the errors below.
    auto matching_beside = [&]() -> std::string {
        if (beside.empty() || !file_exists(beside) || records.empty()) return "";
        return same(record_of(Tokenizer::load(beside)), records[0].tokenizer) ? beside : "";
    };

    std::optional<Tokenizer> tokenizer;
    std::string source;   // for the messages: "--tokenizer X", "the model's tokenizer (...)", ...
    const bool from_model = flag.empty() && model_tokenizer;
    if (!flag.empty()) {
        tokenizer = Tokenizer::load(flag);
        source = "--tokenizer " + flag;
        *how = "tokenizer: " + flag + " (--tokenizer)";
        // the model's ids are its own tokenizer's: another one would read and write other text
        if (model_tokenizer && !same(record_of(*tokenizer), record_of(*model_tokenizer))) {
            fail(
                "%s (%s) is not the tokenizer of the model the run starts from (%s: %s): the model's token ids "
                "stand for its tokenizer's text. Drop --tokenizer to use the model's%s",
                source.c_str(), describe(record_of(*tokenizer)).c_str(), model_tokenizer->origin().c_str(),
                describe(record_of(*model_tokenizer)).c_str(),
                records.empty() ? ""
                                : ", with data made by the model's tokenizer, or train a fresh model on this "
                                  "data (without --init-from)");
        }
    } else if (model_tokenizer) {
        tokenizer = std::move(model_tokenizer);
        source = "the model's tokenizer (" + tokenizer->origin() + ")";
        *how = "tokenizer: the model's, " + tokenizer->origin();
    } else if (!beside.empty() && file_exists(beside)) {
        tokenizer = Tokenizer::load(beside);
        source = beside + " (beside the shards)";
        *how = "tokenizer: " + beside + " (beside the training shards)";
    } else {
        if (!records.empty()) {
            fail("%s was made with a tokenizer (%s) but there is no tokenizer.bin beside it; give --tokenizer",
                 records[0].shard.c_str(), describe(records[0].tokenizer).c_str());
        }
        *how = beside.empty() ? "tokenizer: none" : "tokenizer: none (no " + beside + ")";
        return std::nullopt;
    }
    if (!records.empty() && !same(record_of(*tokenizer), records[0].tokenizer) && from_model) {
        fail(
            "%s (%s) is not the tokenizer %s was made with (%s): the model reads the ids of its own tokenizer, "
            "and these are another's. Make the data with the model's tokenizer, or train a fresh model on this data "
            "(without --init-from)",
            source.c_str(), describe(record_of(*tokenizer)).c_str(), records[0].shard.c_str(),
            describe(records[0].tokenizer).c_str());
    }
    if (!records.empty() && !same(record_of(*tokenizer), records[0].tokenizer)) {
        const std::string right = matching_beside();
        fail("%s (%s) is not the tokenizer %s was made with (%s%s); %s", source.c_str(),
             describe(record_of(*tokenizer)).c_str(), records[0].shard.c_str(), describe(records[0].tokenizer).c_str(),
             right.empty() ? "" : (": " + right).c_str(),
             right.empty() ? "give --tokenizer with the tokenizer that made the data"
                           : ("give --tokenizer " + right + ", or no --tokenizer").c_str());
    }
    return tokenizer;
}

}   // namespace train_gpt
