// test_trainer_cli.cpp — the ./train_gpt binary end to end: a short run succeeds and writes its
// log and config; every kind of bad input exits non-zero with a message naming the file or flag,
// and leaves an existing output directory untouched.
#include "data/shard.h"
#include "test_util.h"
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include <sstream>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// A tiny byte-level corpus: train and val shards plus the tokenizer, in a scratch directory.
struct TinyCorpus {
    ScratchDir dir;
    TinyCorpus() {
        std::string text;
        for (int i = 0; i < 200; i++) text += "In the beginning was the word. ";
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

}  // namespace

TEST(TrainerCli, ShortRunWritesLogConfigAndSample) {
    TinyCorpus corpus;
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + corpus.args() + " -x 6 -v 3 -g 16 -d 64", &output), 0) << output;
    EXPECT_CONTAINS(output, "| grad_accum_steps  | 2");   // -d 64 = 2 micro-batches of 2·16
    EXPECT_CONTAINS(output, "step 6/6 | loss");
    EXPECT_CONTAINS(output, "---- sample (16 tokens) ----");

    int steps = 0, vals = 0, samples = 0;
    std::istringstream log(read_text(corpus.dir.file("out/log.jsonl")));
    for (std::string line; std::getline(log, line);) {
        auto j = nlohmann::json::parse(line);   // every line is one JSON object
        std::string type = j["type"];
        if (type == "step") {
            steps++;
            EXPECT_EQ(j["step"].get<int>(), steps);
            for (const char* key : {"loss", "lr", "grad_norm", "ms", "tok_per_s"}) EXPECT_TRUE(j.contains(key)) << key;
        }
        vals += type == "val";
        samples += type == "sample";
    }
    EXPECT_EQ(steps, 6);
    EXPECT_EQ(vals, 3);   // steps 0, 3 and the end
    EXPECT_EQ(samples, 1);
    auto config = nlohmann::json::parse(read_text(corpus.dir.file("out/config.json")));
    EXPECT_EQ(config["n_embd"].get<int>(), 32);
    EXPECT_EQ(config["vocab_size"].get<int>(), 257);
    EXPECT_EQ(config["padded_vocab_size"].get<int>(), 384);
}

TEST(TrainerCli, HelpExitsZeroAndShowsDefaults) {
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + " --help", &output), 0);
    EXPECT_CONTAINS(output, "--batch-size");
    EXPECT_CONTAINS(output, "=8");   // defaults are shown
}

TEST(TrainerCli, UnknownFlagIsRejected) {
    EXPECT_CONTAINS(expect_failure("--no-such-flag 3"), "--no-such-flag");
}

TEST(TrainerCli, NonNumericValueIsRejected) {
    std::string out = expect_failure("--batch-size abc");
    EXPECT_CONTAINS(out, "--batch-size");
    EXPECT_CONTAINS(out, "'abc' is not a number");
    EXPECT_CONTAINS(expect_failure("--lr 1e-3x"), "--lr");
}

TEST(TrainerCli, OutOfRangeValueIsRejected) {
    EXPECT_CONTAINS(expect_failure("--beta2 1.5"), "--beta2");
    EXPECT_CONTAINS(expect_failure("--lr-schedule sideways"), "--lr-schedule");
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
