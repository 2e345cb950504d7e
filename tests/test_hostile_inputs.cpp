// test_hostile_inputs.cpp — the real binaries (./train_gpt, build/prepare_text) given odd paths
// and hostile files: each is refused at start with a non-zero exit and a message naming the path
// and the problem, without blocking, crashing or allocating what the file cannot hold, and
// without writing or overwriting anything.
//   * odd paths: a FIFO or a directory where a file is expected (shard, tokenizer, input,
//     vocabulary), a file where a directory is expected, thread counts out of range;
// Commands run under `timeout`, so a regression that blocks fails instead of hanging the suite,
// and (outside sanitizer builds, whose shadow memory needs the address space) under an 8 GiB
// address-space limit, so one that allocates what a header claims fails instead of swapping.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "test_util.h"

#include <sys/stat.h>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

#if defined(__SANITIZE_ADDRESS__)
const char* const kLimits = "timeout 60 ";
#else
const char* const kLimits = "ulimit -v 8388608; timeout 60 ";   // 8 GiB of address space
#endif

struct Result {
    int rc;
    std::string output;
};

Result run(const std::string& command) {
    Result r;
    r.rc = run_command(kLimits + command, &r.output);
    return r;
}

// A refusal: an error exit (1..123: not the timeout's 124, not 128 + a signal), and every part in
// the output.
void expect_refused(const Result& r, const std::vector<std::string>& parts) {
    EXPECT_TRUE(r.rc >= 1 && r.rc <= 123) << "exit " << r.rc
                                          << " (124: blocked until the timeout; 128 + N or -1: killed by signal N)\n"
                                          << r.output;
    for (const std::string& part : parts) EXPECT_CONTAINS(r.output, part);
}

// A byte-level corpus and tokenizer in a scratch directory, and the flags of a tiny CPU run on it.
struct Corpus {
    ScratchDir dir;
    Corpus() {
        std::string text;
        for (int i = 0; i < 100; i++) text += "In the beginning was the word. ";
        std::vector<uint32_t> tokens(text.begin(), text.end());
        write_shard(dir.file("train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
        Tokenizer::byte_level().save(dir.file("tokenizer.bin"));
    }
    std::string train_gpt(const std::string& flags) const {
        return train_gpt_binary() + " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" +
               dir.file("train_*.bin") + "' --tokenizer '" + dir.file("tokenizer.bin") + "' -o '" + dir.file("out") +
               "' " + flags;
    }
};

std::string prepare_text(const std::string& args) { return build_dir() + "/prepare_text " + args; }

}  // namespace

// ---- odd paths ---------------------------------------------------------------------------------

TEST(HostileInputs, FifoAsAShardIsRefusedWithoutWaitingForAWriter) {
    Corpus c;
    const std::string fifo = c.dir.file("pipe_000000.bin");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
    expect_refused(run(c.train_gpt("-x 1 -i '" + c.dir.file("pipe_*.bin") + "'")),
                   {fifo, "it is a FIFO (named pipe), not a regular file"});
    EXPECT_FALSE(file_exists(c.dir.file("out"))) << "nothing may be written";
}

TEST(HostileInputs, DirectoryAsAShardIsRefused) {
    Corpus c;
    const std::string dir = c.dir.file("dir_000000.bin");
    make_dirs(dir);
    expect_refused(run(c.train_gpt("-x 1 -i '" + c.dir.file("dir_*.bin") + "'")),
                   {dir, "it is a directory, not a regular file"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
}

TEST(HostileInputs, DirectoryOrFifoAsTheTokenizerIsRefused) {
    Corpus c;
    const std::string dir = c.dir.file("tokenizer_dir");
    make_dirs(dir);
    expect_refused(run(c.train_gpt("-x 1 --tokenizer '" + dir + "'")), {dir, "it is a directory, not a regular file"});
    const std::string fifo = c.dir.file("tokenizer_pipe");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
    expect_refused(run(c.train_gpt("-x 1 --tokenizer '" + fifo + "'")), {fifo, "it is a FIFO"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
}

TEST(HostileInputs, FileAsTheOutputDirectoryIsRefusedAndKept) {
    Corpus c;
    const std::string file = c.dir.file("not_a_dir");
    write_text(file, "mine\n");
    expect_refused(run(c.train_gpt("-x 1 -o '" + file + "'")), {file, "exists and is not a directory"});
    EXPECT_EQ(read_text(file), "mine\n");
}

TEST(HostileInputs, PrepareTextRefusesFifosAsInputOrVocabulary) {
    ScratchDir dir;
    const std::string fifo = dir.file("pipe.txt");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
    expect_refused(run(prepare_text("--input '" + fifo + "' --out-dir '" + dir.file("out") + "'")),
                   {fifo, "it is a FIFO"});
    write_text(dir.file("book.txt"), "In the beginning.\n");
    const std::string vocab = dir.file("pipe.tiktoken");
    ASSERT_EQ(mkfifo(vocab.c_str(), 0644), 0);
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --out-dir '" + dir.file("out") +
                                    "' --tokenizer bpe --bpe-dir '" + vocab + "'")),
                   {vocab, "it is a FIFO"});
    EXPECT_FALSE(file_exists(dir.file("out")));
}

TEST(HostileInputs, ThreadCountsAreBounded) {
    Corpus c;
    expect_refused(run(c.train_gpt("-x 1 --threads 100000")), {"--threads", "100000", "1024"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
    write_text(c.dir.file("book.txt"), "In the beginning.\n");
    const Result r = run(prepare_text("--input '" + c.dir.file("book.txt") + "' --out-dir '" + c.dir.file("data") +
                                      "' --threads 100000"));
    expect_refused(r, {"--threads", "100000", "1024"});
    EXPECT_FALSE(file_exists(c.dir.file("data")));
}
