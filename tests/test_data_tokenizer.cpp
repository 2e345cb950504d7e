// test_data_tokenizer.cpp — data carries its tokenizer (data/run_tokenizer.h): prepare_text
// records the tokenizer in every shard and prints the command to train on them; the trainer,
// through the real binaries, takes the tokenizer beside the shards when none is given and refuses
// one that did not make the data, naming both, before writing anything.
#include "data/run_tokenizer.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

std::string prepare_text() { return build_dir() + "/prepare_text"; }

// A text of a few kB: enough for shards of a tiny model and a BPE of a few hundred tokens.
std::string some_text() {
    std::string text;
    const char* lines[] = {"In the beginning God created the heaven and the earth.\n",
                           "And the earth was without form, and void.\n", "And God said, Let there be light.\n"};
    for (int i = 0; i < 60; i++)
        text += lines[i % 3];
    return text;
}

// Runs prepare_text on `args`; returns its output.
std::string prepare(const ScratchDir& dir, const std::string& args) {
    write_text(dir.file("book.txt"), some_text());
    std::string output;
    EXPECT_EQ(run_command(prepare_text() + " --input '" + dir.file("book.txt") + "' " + args, &output), 0) << output;
    return output;
}

// a tiny model and a few steps, on whatever data the command names
const char* kTinyRun = " -e d2 --n-embd 32 -b 2 -t 16 -x 2 -m 1 -v 2 -g 4 --threads 1";

}   // namespace

TEST(DataTokenizer, TokenizerFingerprintTellsTablesApart) {
    const Tokenizer bytes = Tokenizer::byte_level();
    EXPECT_EQ(bytes.fingerprint(), Tokenizer::byte_level().fingerprint());
    ScratchDir dir;
    bytes.save(dir.file("t.bin"));
    EXPECT_EQ(Tokenizer::load(dir.file("t.bin")).fingerprint(), bytes.fingerprint()) << "the table, not the file name";
    // one byte of one token changed, or another EOT: another fingerprint
    std::string file = read_text(dir.file("t.bin"));
    file[1024 + 2 * 65 + 1] = 'b';   // token 65 ('A', length 1 at 1024 + 2·65) becomes 'b'
    write_text(dir.file("u.bin"), file);
    EXPECT_NE(Tokenizer::load(dir.file("u.bin")).fingerprint(), bytes.fingerprint());
}

TEST(DataTokenizer, PrepareTextRecordsTheTokenizerAndPrintsTheCommandToRun) {
    ScratchDir dir;
    const std::string out = prepare(dir, "--out-dir '" + dir.file("a") + "' --name a --val-fraction 0.1");
    const std::string command = trainer_beside_prepare_text() + " -i '" + dir.file("a") + "/a_train_*.bin' -j '" +
                                dir.file("a") + "/a_val_*.bin'";
    EXPECT_CONTAINS(out, "next: " + command + " -o out/a\n") << "an output directory of its own";
    // two datasets under the default --name: each command its own output directory, named for its
    // --out-dir (before: both -o out/data, so the second command was refused)
    for (const char* d : {"first", "second"}) {
        const std::string shards = dir.file(std::string("sets/") + d);
        EXPECT_CONTAINS(prepare(dir, "--out-dir '" + shards + "' --val-fraction 0.1"),
                        "next: " + trainer_beside_prepare_text() + " -i '" + shards + "/data_train_*.bin' -j '" +
                            shards + "/data_val_*.bin' -o out/" + d + "\n");
    }
    const Tokenizer tok = Tokenizer::load(dir.file("a/tokenizer.bin"));
    for (const char* shard : {"a/a_train_000000.bin", "a/a_val_000000.bin"}) {
        const ShardInfo info = read_shard_header(dir.file(shard));
        EXPECT_EQ(info.tokenizer.vocab_size, 257) << shard;
        EXPECT_EQ(info.tokenizer.fingerprint, tok.fingerprint()) << shard;
    }
    // the printed command, as printed (plus a tiny model): the tokenizer comes from beside the shards
    std::string output;
    ASSERT_EQ(
        run_command("cd '" + repo_root() + "' && " + command + kTinyRun + " -o '" + dir.file("out") + "'", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "tokenizer: " + dir.file("a") + "/tokenizer.bin (beside the training shards)");
    const auto config = nlohmann::json::parse(read_text(dir.file("out/config.json")));
    EXPECT_EQ(config["vocab_size"].get<int>(), 257);
    EXPECT_EQ(config["tokenizer"], dir.file("a") + "/tokenizer.bin");
}

TEST(DataTokenizer, ATokenizerThatDidNotMakeTheDataIsRefusedNamingBoth) {
    ScratchDir dir;
    prepare(dir, "--out-dir '" + dir.file("a") + "' --name a");
    prepare(dir, "--out-dir '" + dir.file("b") + "' --name b --tokenizer bpe --vocab-size 300");
    make_dirs(dir.file("out"));
    write_text(dir.file("out/log.jsonl"), "previous run\n");
    const std::string data = " -i '" + dir.file("a/a_train_*.bin") + "' -j '" + dir.file("a/a_val_*.bin") + "'";
    std::string output;
    const int rc = run_command(train_gpt_binary() + data + " --tokenizer '" + dir.file("b/tokenizer.bin") + "'" +
                                   kTinyRun + " -o '" + dir.file("out") + "'",
                               &output);
    EXPECT_EQ(rc, 1) << output;
    EXPECT_CONTAINS(output, "--tokenizer " + dir.file("b/tokenizer.bin") + " (vocab 300");
    EXPECT_CONTAINS(output, "is not the tokenizer " + dir.file("a/a_train_000000.bin") + " was made with (vocab 257");
    EXPECT_CONTAINS(output, "give --tokenizer " + dir.file("a/tokenizer.bin") + ", or no --tokenizer");
    EXPECT_EQ(read_text(dir.file("out/log.jsonl")), "previous run\n") << "nothing written";

    // another tokenizer.bin put beside the shards (prepare_text refuses to write one there since
    // round 19): the shards still know theirs, and the one beside them is refused
    write_text(dir.file("a/tokenizer.bin"), read_text(dir.file("b/tokenizer.bin")));
    ASSERT_NE(run_command(train_gpt_binary() + data + kTinyRun + " -o '" + dir.file("out") + "'", &output), 0)
        << output;
    EXPECT_CONTAINS(output, dir.file("a/tokenizer.bin") + " (beside the shards) (vocab 300");
    EXPECT_CONTAINS(output, "is not the tokenizer " + dir.file("a/a_train_000000.bin") + " was made with (vocab 257");

    // shards that record a tokenizer with none beside them
    std::remove(dir.file("a/tokenizer.bin").c_str());
    ASSERT_NE(run_command(train_gpt_binary() + data + kTinyRun + " -o '" + dir.file("out") + "'", &output), 0)
        << output;
    EXPECT_CONTAINS(output, dir.file("a/a_train_000000.bin") + " was made with a tokenizer (vocab 257");
    EXPECT_CONTAINS(output, "no tokenizer.bin beside it; give --tokenizer");
    EXPECT_EQ(read_text(dir.file("out/log.jsonl")), "previous run\n") << "nothing written";
}

// A model started from (--init-from) reads ids of its own tokenizer: data made with another is
// refused, with advice that does not lead to training it on that data anyway (before: "give
// --tokenizer <the data's>", then "give -g 0", then a 300-token BPE model trained on byte data).
TEST(DataTokenizer, AModelIsNotTrainedOnDataOfAnotherTokenizer) {
    ScratchDir dir;
    prepare(dir, "--out-dir '" + dir.file("bytes") + "' --name bytes");
    prepare(dir, "--out-dir '" + dir.file("bpe") + "' --name bpe --tokenizer bpe --vocab-size 300");
    std::string output;
    ASSERT_EQ(run_command(train_gpt_binary() + " -i '" + dir.file("bpe/bpe_train_*.bin") + "' -j ''" + kTinyRun +
                              " -n 2 -o '" + dir.file("model") + "'",
                          &output),
              0)
        << output;
    const std::string bytes =
        " -i '" + dir.file("bytes/bytes_train_*.bin") + "' -j '" + dir.file("bytes/bytes_val_*.bin") + "'";
    const std::string from = " --init-from '" + dir.file("model/checkpoints") + "'";
    ASSERT_NE(run_command(train_gpt_binary() + bytes + from + kTinyRun + " -o '" + dir.file("out1") + "'", &output), 0);
    EXPECT_CONTAINS(output, "the model's tokenizer");
    EXPECT_CONTAINS(output,
                    "is not the tokenizer " + dir.file("bytes/bytes_train_000000.bin") + " was made with (vocab 257");
    EXPECT_CONTAINS(output, "without --init-from");
    EXPECT_EQ(output.find("give --tokenizer"), std::string::npos) << output;
    // the data's tokenizer given: not the model's
    ASSERT_NE(run_command(train_gpt_binary() + bytes + from + " --tokenizer '" + dir.file("bytes/tokenizer.bin") + "'" +
                              kTinyRun + " -g 0 -o '" + dir.file("out2") + "'",
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output, "--tokenizer " + dir.file("bytes/tokenizer.bin") + " (vocab 257");
    EXPECT_CONTAINS(output, "is not the tokenizer of the model the run starts from");
    EXPECT_FALSE(file_exists(dir.file("out2/log.jsonl"))) << "nothing trained";
    // the model's own data still trains
    ASSERT_EQ(run_command(train_gpt_binary() + " -i '" + dir.file("bpe/bpe_train_*.bin") + "' -j ''" + from + kTinyRun +
                              " -o '" + dir.file("out3") + "'",
                          &output),
              0)
        << output;
}

TEST(DataTokenizer, ShardsWithoutARecordTakeTheTokenizerBesideThemOrNeedAVocabularySize) {
    ScratchDir dir;
    std::vector<uint32_t> tokens(2000);
    for (size_t i = 0; i < tokens.size(); i++)
        tokens[i] = 'a' + i % 26;
    make_dirs(dir.file("d"));
    write_shard(dir.file("d/x_train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);   // llm.c's: no record
    const std::string data = " -i '" + dir.file("d/x_train_*.bin") + "' -j ''";
    std::string output;
    ASSERT_NE(run_command(train_gpt_binary() + data + kTinyRun + " -o '" + dir.file("out") + "'", &output), 0);
    EXPECT_CONTAINS(output, "the run has no tokenizer");
    EXPECT_CONTAINS(output, "--vocab-size");
    ASSERT_EQ(
        run_command(train_gpt_binary() + data + kTinyRun + " --vocab-size 200 -o '" + dir.file("out") + "'", &output),
        0)
        << output;
    Tokenizer::byte_level().save(dir.file("d/tokenizer.bin"));
    ASSERT_EQ(run_command(train_gpt_binary() + data + kTinyRun + " -o '" + dir.file("out2") + "'", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "(beside the training shards)");
    // two globs of shards made by different tokenizers
    write_shard(dir.file("d/y_val_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2, ShardTokenizer{257, 1});
    write_shard(dir.file("d/y_val_000001.bin"), tokens.data(), (int64_t)tokens.size(), 2, ShardTokenizer{257, 2});
    EXPECT_CONTAINS(error_of([&] { data_tokenizer(dir.file("d/y_val_*.bin")); }),
                    "were made with different tokenizers");
}
