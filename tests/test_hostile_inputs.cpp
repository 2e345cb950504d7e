// test_hostile_inputs.cpp — the real binaries (./train_gpt, build/prepare_text) given odd paths
// and hostile files: each is refused at start with a non-zero exit and a message naming the path
// and the problem, without blocking, crashing or allocating what the file cannot hold, and
// without writing or overwriting anything.
//   * odd paths: a FIFO or a directory where a file is expected (shard, tokenizer, input,
//     vocabulary), a file where a directory is expected, thread counts out of range;
//   * size fields beyond the file (tokenizer.bin's vocab size, a .tiktoken rank);
//   * checkpoint manifests with values of the wrong type or out of range.
// Commands run under `timeout`, so a regression that blocks fails instead of hanging the suite,
// and (outside sanitizer builds, whose shadow memory needs the address space) under an 8 GiB
// address-space limit, so one that allocates what a header claims fails instead of swapping.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <sys/stat.h>

using namespace train_gpt;
using namespace train_gpt::test;
namespace fs = std::filesystem;

namespace {

#if defined(__SANITIZE_ADDRESS__)
const char* const kLimits = "timeout 60 ";
#else
const char* const kLimits = "ulimit -v 8388608; timeout 60 ";   // 8 GiB of address space
#endif

CommandResult run(const std::string& command) { return run_timed(kLimits + command); }

// A byte-level corpus and tokenizer in a scratch directory, and the flags of a tiny CPU run on it.
struct Corpus {
    ScratchDir dir;
    Corpus() {
        std::string text;
        for (int i = 0; i < 100; i++)
            text += "In the beginning was the word. ";
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

}   // namespace

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

// Round 23: an empty --input or --out-dir (a script's unset variable) ended prepare_text in an
// uncaught std::filesystem error (abort, exit 134); it is refused naming the flag.
TEST(HostileInputs, PrepareTextRefusesEmptyPaths) {
    ScratchDir dir;
    write_text(dir.file("book.txt"), "In the beginning.\n");
    expect_refused(run(prepare_text("--input '' --out-dir '" + dir.file("out") + "'")),
                   {"--input: an empty value names no file"});
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --out-dir ''")),
                   {"--out-dir: an empty value names no file"});
    EXPECT_FALSE(file_exists(dir.file("out")));
}

// Round 25: BPE training on one long pre-token (a line of random letters, a genome on one line)
// pushed every pair of that word onto the heap at every merge: 200 kB took 166 s and 4.2 GB, a few
// MB an OOM kill. Only the pairs a merge changes are pushed now, and a pre-token is counted in pieces
// no longer than a token can be: seconds and megabytes.
TEST(HostileInputs, BpeTrainingOnOneLongLineTakesSecondsNotGigabytes) {
    ScratchDir dir;
    std::string line;
    uint64_t x = 1;
    for (int i = 0; i < 200000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;   // a fixed pseudo-random line
        line += (char)('a' + (x >> 33) % 10);
    }
    write_text(dir.file("line.txt"), line);
    const CommandResult r = run("timeout 60 " + prepare_text("--input '" + dir.file("line.txt") + "' --out-dir '" +
                                                             dir.file("out") + "' --tokenizer bpe --vocab-size 4096"));
    ASSERT_EQ(r.rc, 0) << r.output;   // 124: still training at the timeout
    EXPECT_EQ(Tokenizer::load(dir.file("out/tokenizer.bin")).vocab_size(), 4096);
}

TEST(HostileInputs, ThreadCountsAreBounded) {
    Corpus c;
    expect_refused(run(c.train_gpt("-x 1 --threads 100000")), {"--threads", "100000", "1024"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
    write_text(c.dir.file("book.txt"), "In the beginning.\n");
    const CommandResult r = run(prepare_text("--input '" + c.dir.file("book.txt") + "' --out-dir '" +
                                             c.dir.file("data") + "' --threads 100000"));
    expect_refused(r, {"--threads", "100000", "1024"});
    EXPECT_FALSE(file_exists(c.dir.file("data")));
}

// ---- size fields beyond the file ----------------------------------------------------------------

TEST(HostileInputs, TokenizerVocabSizeBeyondTheFileIsRefusedBeforeAllocating) {
    Corpus c;
    // a 1.6 kB tokenizer.bin whose header claims 2^31 - 1 tokens (64 GB of strings)
    std::string bytes = read_text(c.dir.file("tokenizer.bin"));
    const uint32_t vocab = 0x7fffffff;
    std::memcpy(&bytes[8], &vocab, 4);
    const std::string path = c.dir.file("huge_vocab.bin");
    write_text(path, bytes);
    expect_refused(run(c.train_gpt("-x 1 --tokenizer '" + path + "'")),
                   {path, "bad vocab size 2147483647", "hold at most"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
}

// Round 26: a tokenizer file with a valid header and a garbage tail (a bad transfer, two files
// joined), or an encoder.json / vocab.bpe of gigabytes, was read whole before any check: at 30 GB
// "std::bad_alloc" naming no file. The header's vocab bounds tokenizer.bin (1024 + 256 V bytes), and
// the text vocabulary files are bounded too: refused by their size, before they are read.
TEST(HostileInputs, ATokenizerFileLargerThanItsFormatAllowsIsRefusedUnread) {
    Corpus c;
    const std::string path = c.dir.file("long_tail.bin");
    std::filesystem::copy_file(c.dir.file("tokenizer.bin"), path);
    std::filesystem::resize_file(path, size_t(3) << 30);   // sparse: 3 GB that take no disk
    expect_refused(run(c.train_gpt("-x 1 --tokenizer '" + path + "'")),
                   {path + ": 3221225472 bytes, but the 257 tokens its header counts take at most 66816"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
    // the BPE files beside a tokenizer.bin, as a run reads them, and as prepare_text --bpe-dir does
    const std::string bpe = c.dir.file("bpe");
    make_dirs(bpe);
    write_text(c.dir.file("book.txt"), "In the beginning was the word.\n");
    ASSERT_EQ(run(prepare_text("--input '" + c.dir.file("book.txt") + "' --out-dir '" + bpe +
                               "' --tokenizer bpe --vocab-size 270"))
                  .rc,
              0);
    for (const char* file : {"encoder.json", "vocab.bpe"}) {
        SCOPED_TRACE(file);
        const std::string copy = c.dir.file(std::string("big_") + file);
        make_dirs(copy);
        for (const char* f : {"encoder.json", "vocab.bpe", "tokenizer.bin"})
            std::filesystem::copy_file(bpe + "/" + f, copy + "/" + f);
        std::filesystem::resize_file(copy + "/" + file, size_t(300) << 20);
        const std::string says = copy + "/" + file + ": 314572800 bytes, more than a";
        expect_refused(run(prepare_text("--input '" + c.dir.file("book.txt") + "' --out-dir '" + c.dir.file("o") +
                                        "' --tokenizer bpe --bpe-dir '" + copy + "'")),
                       {says, "can hold (at most 268435456)"});
        expect_refused(run(c.train_gpt("-x 1 --tokenizer '" + copy + "/tokenizer.bin'")), {says});
    }
}

// Round 27: a --hellaswag file and a checkpoint's manifest.json were read whole whatever their
// size: a wrong file of gigabytes ended in "std::bad_alloc" naming nothing (or an OOM kill). Each
// is refused by its size before it is read; --resume-from-intact sets such a checkpoint aside.
TEST(HostileInputs, AHellaSwagFileOrAManifestLargerThanItsFormatIsRefusedUnread) {
    Corpus c;
    const std::string hs = c.dir.file("hs.jsonl");
    write_text(hs, "");
    std::filesystem::resize_file(hs, size_t(2) << 30);   // sparse
    expect_refused(run(c.train_gpt("-x 1 --hellaswag '" + hs + "'")),
                   {hs + ": 2147483648 bytes, more than a HellaSwag jsonl can hold (at most 1073741824)"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));

    ASSERT_EQ(run(c.train_gpt("-x 4 --checkpoint-every 2")).rc, 0);
    const std::string manifest = c.dir.file("out/checkpoints/step_00000004/manifest.json");
    std::filesystem::resize_file(manifest, size_t(100) << 20);
    const std::string says = manifest + ": 104857600 bytes, more than a checkpoint's manifest.json can hold";
    expect_refused(run(c.train_gpt("-x 6 --resume")), {says});
    expect_refused(run(train_gpt_binary() + " -x 0 -g 0 -j '' --init-from '" + c.dir.file("out/checkpoints") + "'"),
                   {says});
    const CommandResult intact = run(c.train_gpt("-x 6 --resume --resume-from-intact"));
    EXPECT_EQ(intact.rc, 0) << intact.output;
    EXPECT_CONTAINS(intact.output, "resuming from " + c.dir.file("out/checkpoints/step_00000002"));
}

// Round 27: a NUL byte ended a HellaSwag line (JSON's parser stops there): the record after it,
// even an invalid one, went unread. Refused naming the line, as prepare_text refuses it in JSONL.
TEST(HostileInputs, ANulByteInAHellaSwagLineIsRefused) {
    Corpus c;
    const std::string hs = c.dir.file("hs.jsonl");
    const std::string record = R"({"ctx":"And God said","endings":["a","b","c","d"],"label":1})";
    write_text(hs, record + std::string(1, '\0') + R"({"ctx":"x","endings":["a"],"label":9})" + "\n");
    expect_refused(run(c.train_gpt("-x 1 --hellaswag '" + hs + "'")),
                   {hs + ":1: a NUL byte, which JSON text does not hold"});
    EXPECT_FALSE(file_exists(c.dir.file("out")));
}

// Round 27: a checkpoint's step directory without its manifest.json, named by --init-from, was read
// as a transformers model: its weights unverified (altered bytes trained on). Refused as damaged.
TEST(HostileInputs, AStepDirectoryWithoutItsManifestIsNotReadAsATransformersModel) {
    Corpus c;
    ASSERT_EQ(run(c.train_gpt("-x 2 --checkpoint-every 2")).rc, 0);
    const std::string step = c.dir.file("out/checkpoints/step_00000002");
    ASSERT_TRUE(file_exists(step + "/config.json") && file_exists(step + "/state-00000.safetensors"));
    std::filesystem::remove(step + "/manifest.json");
    expect_refused(run(train_gpt_binary() + " -x 0 -g 4 -j '' --init-from '" + step + "' -o '" + c.dir.file("s") + "'"),
                   {"--init-from " + step +
                    ": a train_gpt checkpoint (it holds state-00000.safetensors) without its "
                    "manifest.json"});
    EXPECT_FALSE(file_exists(c.dir.file("s")));
}

// Round 27: a data directory this user may not list said only "no files match"; it says why. (As
// nobody where the tests run as root, whom permissions do not stop.)
TEST(HostileInputs, AGlobIntoADirectoryThatCannotBeListedSaysSo) {
    Corpus c;
    const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    ASSERT_EQ(::chmod(c.dir.path.c_str(), 0777), 0);
    const std::string data = c.dir.file("data");
    make_dirs(data);
    std::filesystem::copy_file(c.dir.file("train_000000.bin"), data + "/x_train_000000.bin");
    ASSERT_EQ(::chmod(data.c_str(), 0711), 0);   // its files can be opened by name, not listed
    expect_refused(
        run(as_user + c.train_gpt("-x 1 -i '" + data + "/x_train_*.bin' -o '" + c.dir.file("o") + "'")),
        {"no files match " + data + "/x_train_*.bin (a directory could not be read: " + data + ": Permission denied)"});
}

// Round 28: a working directory whose name is not UTF-8 (Latin-1), with a relative path flag, failed
// the first checkpoint save in the JSON library ("type_error.316"), the steps before it lost; a glob
// into such a directory failed alike after -o was made. Both are refused at start, named.
TEST(HostileInputs, ADirectoryNameThatIsNotUtf8IsRefusedAtStart) {
    Corpus c;
    const std::string latin = c.dir.file("w\xe9rk");   // "wérk" in Latin-1
    make_dirs(latin);
    const std::string said = c.dir.file("w\xef\xbf\xbdrk");   // as messages print it: U+FFFD for the byte
    expect_refused(run("sh -c \"cd '" + latin + "' && " + c.train_gpt("-x 2 --checkpoint-every 1 -o out") + "\""),
                   {"the working directory " + said + " is not valid UTF-8", "relative path --output-dir out"});
    EXPECT_FALSE(file_exists(latin + "/out")) << "nothing written";
    std::filesystem::copy_file(c.dir.file("train_000000.bin"), latin + "/x_train_000000.bin");
    std::filesystem::copy_file(c.dir.file("tokenizer.bin"), latin + "/tokenizer.bin");
    expect_refused(run(c.train_gpt("-x 1 --tokenizer '' -i '" + c.dir.file("w?rk") + "/x_train_*.bin'")),
                   {"tokenizer " + said + "/tokenizer.bin: not valid UTF-8 (a directory named in another encoding?)"});
    EXPECT_FALSE(file_exists(c.dir.file("out"))) << "nothing written";
}

// Round 28: a transformers directory without tokenizer files (save_pretrained writes none) took the
// run's tokenizer's ids as its own without a word; it is said.
TEST(HostileInputs, AModelWithoutATokenizerSaysWhoseIdsItTakes) {
    Corpus c;
    ASSERT_EQ(run(c.train_gpt("-x 1 --checkpoint-every 1")).rc, 0);
    const std::string step = c.dir.file("out/checkpoints/step_00000001"), hf = c.dir.file("hf");
    make_dirs(hf);
    for (const char* f : {"config.json", "model-00001-of-00001.safetensors", "model.safetensors.index.json"})
        std::filesystem::copy_file(step + "/" + f, hf + "/" + f);
    const CommandResult r = run(c.train_gpt("-x 1 --init-from '" + hf + "' -o '" + c.dir.file("tuned") + "'"));
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: transformers model " + hf +
                                  " brings no tokenizer: its token ids are taken to "
                                  "be those of " +
                                  c.dir.file("tokenizer.bin"));
    // a checkpoint, which brings its own: no such notice
    const CommandResult own = run(c.train_gpt("-x 1 --init-from '" + step + "' -o '" + c.dir.file("own") + "'"));
    ASSERT_EQ(own.rc, 0) << own.output;
    EXPECT_EQ(own.output.find("brings no tokenizer"), std::string::npos) << own.output;
}

TEST(HostileInputs, TiktokenRankBeyondTheFileIsRefusedBeforeAllocating) {
    ScratchDir dir;
    write_text(dir.file("book.txt"), "In the beginning.\n");
    const std::string vocab = dir.file("ranks.tiktoken");
    write_text(vocab, "YQ== 999999999\n");   // one token ("a") with rank 10^9 - 1: a 32 GB table
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --out-dir '" + dir.file("out") +
                                    "' --tokenizer bpe --bpe-dir '" + vocab + "'")),
                   {vocab + ":1", "rank 999999999", "only 2 lines"});
    EXPECT_FALSE(file_exists(dir.file("out")));
}

// A token longer than tokenizer.bin can store is refused as the vocabulary loads, before anything
// is written (and before the pair table, whose work grows with the square of a token's length: a
// 500 kB token took 30 s).
TEST(HostileInputs, BpeTokenOfMoreThan255BytesIsRefusedBeforeAnythingIsWritten) {
    ScratchDir dir;
    write_text(dir.file("book.txt"), "In the beginning.\n");
    std::string ranks;
    const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; b++) {   // the 256 single bytes, base64
        ranks += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
    }
    ranks += std::string(344, 'Q') + " 256\n";   // 344 base64 characters: 258 bytes
    const std::string vocab = dir.file("long.tiktoken");
    write_text(vocab, ranks);
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --out-dir '" + dir.file("out") +
                                    "' --tokenizer bpe --bpe-dir '" + vocab + "'")),
                   {vocab, "token 256 has 258 bytes; a token has at most 255"});
    EXPECT_FALSE(file_exists(dir.file("out")));
}

// ---- checkpoint manifests -----------------------------------------------------------------------

namespace {

// A checkpoint of a 2-step run, and a way to damage one field of its manifest.
struct Checkpointed {
    Corpus c;
    std::string checkpoint, manifest_path, manifest;
    Checkpointed() {
        std::string output;
        EXPECT_EQ(run_command(c.train_gpt("-x 2 --checkpoint-every 2"), &output), 0) << output;
        checkpoint = c.dir.file("out/checkpoints/step_00000002");
        manifest_path = checkpoint + "/manifest.json";
        manifest = read_text(manifest_path);
    }
    // Sets the field at `pointer` (a JSON pointer, "/model/n_layer") to `value` (JSON text).
    void set(const std::string& pointer, const std::string& value) {
        nlohmann::json j = nlohmann::json::parse(manifest);
        j[nlohmann::json::json_pointer(pointer)] = nlohmann::json::parse(value);
        write_text(manifest_path, j.dump(2));
    }
};

}   // namespace

TEST(HostileInputs, ManifestValuesOfTheWrongTypeOrOutOfRangeAreRefused) {
    Checkpointed ck;
    const struct {
        const char* pointer;
        const char* value;
        const char* problem;
    } cases[] = {
        {"/step", "-5", "\"step\" must be an integer in [0, 2147483647], got -5"},
        {"/step", "1e300", "\"step\" must be an integer in [0, 2147483647], got 1e+300"},
        {"/step", "\"2\"", "\"step\" must be an integer"},
        {"/step", "2.0", "\"step\" must be an integer"},
        {"/step", "4", "\"step\" is 4, but the directory is named for step 2"},
        {"/world_size", "0", "\"world_size\" must be an integer in [1,"},
        {"/model/n_layer", "-2", "\"model.n_layer\" must be an integer in [1,"},
        {"/model/n_embd", "1e300", "\"model.n_embd\" must be an integer"},
        // no tensor's shape holds the head count: checked against the width (before: head size 10,
        // or 0, trained silently and went into the new checkpoints)
        {"/model/n_head", "3", "\"model.n_head\" 3 does not divide \"model.n_embd\" 32"},
        {"/model/n_head", "64", "\"model.n_head\" 64 does not divide \"model.n_embd\" 32"},
        // one that divides it: against the run's configuration (round 17: a 4-head model sampled silently)
        {"/model/n_head", "4", "\"model.n_head\" 4 disagrees with \"train_config.n_head\" 2: the manifest was edited"},
        {"/data_position", "-1", "\"data_position\" must be an integer in [0,"},
        {"/data_position", "1e300", "\"data_position\" must be an integer"},
        {"/rng_state", "7", "\"rng_state\" must be a string"},
        {"/rng_state", "\"12 34\"", "\"rng_state\" is not the state of the sampler's random numbers"},
        {"/extra/updates", "-1", "\"extra.updates\" must be an integer in [0,"},
        {"/extra/skipped", "1.5", "\"extra.skipped\" must be an integer"},
        {"/loss_scaler", R"({"scale": 1e39, "clean_streak": 0, "floor_streak": 0, "skipped": 0})",
         "\"loss_scaler.scale\" must be a finite number"},
        {"/loss_scaler", R"({"scale": -1, "clean_streak": 0, "floor_streak": 0, "skipped": 0})",
         "\"loss_scaler.scale\" must be a finite number"},
        {"/fp8", R"([{"x": {"scale": 1, "history": [1], "steps": 1}}])", "\"fp8[0].w\" is missing"},
        {"/fp8", R"([{"x": {"scale": 1, "history": [-1], "steps": 1}, "w": {}, "dy": {}}])",
         "\"fp8[0].x.history[0]\" must be a finite number in [0,"},
        // a subnormal scale, whose inverse is inf in FP32 (round 40: every step then skipped)
        {"/fp8", R"([{"x": {"scale": 1.5e-45, "history": [], "steps": 0}, "w": {}, "dy": {}}])",
         "\"fp8[0].x.scale\" must be a finite number in [1.17549e-38,"},
        {"/files/config.json/bytes", "-1", "\"files.config.json.bytes\" must be an integer in [0,"},
    };
    for (const auto& k : cases) {
        SCOPED_TRACE(std::string(k.pointer) + " = " + k.value);
        ck.set(k.pointer, k.value);
        const auto before = directory_snapshot(ck.c.dir.path);
        // --init-from reads the manifest and nothing else of the run
        expect_refused(
            run(ck.c.train_gpt("-x 4 --init-from '" + ck.checkpoint + "' -o '" + ck.c.dir.file("fresh") + "'")),
            {ck.manifest_path, k.problem});
        EXPECT_EQ(directory_snapshot(ck.c.dir.path), before) << "nothing may be written or changed";
    }
}

// --resume with a manifest whose step is negative: never a run from a negative step (that trained
// with a negative learning rate and wrote step_-0000004), and the checkpoint stays as it was.
// Round 41: a JSON value nested 100000 deep ([[[[...]]]], a 200 kB file) in any JSON file a run
// reads crashed it (segfault, exit 139, no message): the parse holds it, but printing it into an
// error recursed past the stack. Every JSON text read from a file is refused past 64 levels first,
// naming the file; a checkpoint whose manifest is such is damaged like any other, so
// --resume-from-intact passes over it to the one before.
TEST(HostileInputs, JsonNestedFarTooDeepIsRefusedNamingTheFile) {
    Corpus c;
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    auto engine = [&](const std::string& out, const std::string& flags) {
        return train_gpt_binary() + " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -j '' -g 0 --threads 1 -i '" +
               c.dir.file("train_*.bin") + "' --tokenizer '" + c.dir.file("tokenizer.bin") + "' -o '" +
               c.dir.file(out) + "' " + flags;
    };
    ASSERT_EQ(run(engine("out", "-x 4 --checkpoint-every 2")).rc, 0);
    const std::string step2 = c.dir.file("out/checkpoints/step_00000002"),
                      step4 = c.dir.file("out/checkpoints/step_00000004");
    // a transformers directory (the step's weights, config and tokenizer) with "n_inner" nested
    const std::string hf = c.dir.file("hf");
    make_dirs(hf);
    ASSERT_EQ(run("sh -c \"cp '" + step2 + "'/*.json '" + step2 + "'/*.txt '" + step2 + "'/model* '" + hf +
                  "'/ && rm '" + hf + "/manifest.json'\"")
                  .rc,
              0);
    const std::string config = read_text(hf + "/config.json");
    write_text(hf + "/config.json", "{\"n_inner\": " + deep + ", " + config.substr(config.find('{') + 1));
    expect_refused(run(engine("o1", "-x 0 -g 4 --init-from '" + hf + "'")),
                   {hf + "/config.json: JSON nested deeper than 64 levels, which a config.json never is"});
    write_text(hf + "/config.json", config);
    // its weight file's safetensors header, a tensor's dtype nested
    const std::string header = "{\"transformer.wte.weight\": {\"dtype\": " + deep + "}}";
    std::string file(8, '\0');
    for (int i = 0; i < 8; i++)
        file[i] = (char)(header.size() >> (8 * i) & 0xff);
    write_text(hf + "/model-00001-of-00001.safetensors", file + header);
    expect_refused(run(engine("o2", "-x 0 -g 4 --init-from '" + hf + "'")),
                   {"model-00001-of-00001.safetensors: JSON nested deeper than 64 levels, which a safetensors header"});
    // a HellaSwag example whose label is nested
    write_text(c.dir.file("hs.jsonl"),
               "{\"ctx\": \"He\", \"label\": " + deep + ", \"endings\": [\"ran.\", \"sat.\", \"hid.\", \"ate.\"]}\n");
    expect_refused(run(engine("o3", "-x 2 --hellaswag '" + c.dir.file("hs.jsonl") + "'")),
                   {c.dir.file("hs.jsonl") + ":1: JSON nested deeper than 64 levels"});
    // the newest checkpoint's manifest, its step nested: damaged, passed over
    const std::string manifest = read_text(step4 + "/manifest.json");
    const size_t at = manifest.find("\"step\": 4");
    ASSERT_NE(at, std::string::npos);
    write_text(step4 + "/manifest.json", manifest.substr(0, at) + "\"step\": " + deep + manifest.substr(at + 9));
    expect_refused(run(engine("o4", "-x 0 -g 4 --init-from '" + step4 + "'")),
                   {step4 + "/manifest.json: JSON nested deeper than 64 levels"});
    const CommandResult resumed = run(engine("out", "-x 6 --resume --resume-from-intact"));
    ASSERT_EQ(resumed.rc, 0) << resumed.output;
    EXPECT_CONTAINS(resumed.output, "JSON nested deeper than 64 levels");
    EXPECT_TRUE(file_exists(step4 + ".damaged")) << resumed.output;
    // the run's own config.json (a start without a checkpoint, restarted by --auto-resume)
    ASSERT_EQ(run(engine("o5", "-x 2 --auto-resume")).rc, 0);
    std::string log, line;   // as a SIGKILL before its end leaves it: no summary record
    std::istringstream records(read_text(c.dir.file("o5/log.jsonl")));
    while (std::getline(records, line))
        if (line.find("\"summary\"") == std::string::npos) log += line + "\n";
    write_text(c.dir.file("o5/log.jsonl"), log);
    const std::string saved = read_text(c.dir.file("o5/config.json"));
    write_text(c.dir.file("o5/config.json"), "{\"lr\": " + deep + ", " + saved.substr(saved.find('{') + 1));
    expect_refused(run(engine("o5", "-x 2 --auto-resume")),
                   {c.dir.file("o5/config.json") + ": JSON nested deeper than 64 levels"});
}

TEST(HostileInputs, ResumeNeverTrainsFromANegativeStep) {
    Checkpointed ck;
    ck.set("/step", "-5");
    const auto checkpoints_before = directory_snapshot(ck.c.dir.file("out/checkpoints"));
    const CommandResult r = run(ck.c.train_gpt("-x 4 --checkpoint-every 2 --resume"));
    EXPECT_NE(r.rc, 0) << r.output;
    EXPECT_EQ(r.output.find("step -4/4"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("lr -"), std::string::npos) << r.output;
    for (const auto& e : fs::directory_iterator(ck.c.dir.file("out/checkpoints"))) {
        EXPECT_EQ(e.path().filename().string().find("step_-"), std::string::npos) << e.path();
    }
    EXPECT_EQ(directory_snapshot(ck.c.dir.file("out/checkpoints")), checkpoints_before);
}

// An error that quotes what a file holds prints it safely: a control byte as \xNN, a byte of
// invalid UTF-8 as U+FFFD (before: the raw bytes, an escape sequence reaching the terminal).
TEST(HostileInputs, ErrorsQuotingAFilesBytesPrintThemSafely) {
    ScratchDir dir;
    make_dirs(dir.file("hf"));
    write_text(dir.file("hf/config.json"),
               R"({"model_type": "gpt2", "n_layer": 1, "n_head": 1, "n_embd": 8, "vocab_size": 10, "n_positions": 8})");
    // a header whose tensor name holds ESC (escaped in the JSON, raw once parsed)
    const std::string header = "{\"\\u001b[31mX\":{\"dtype\":\"F32\"}}";
    std::string file(8, '\0');
    for (int i = 0; i < 8; i++)
        file[i] = (char)((header.size() >> (8 * i)) & 0xff);
    write_text(dir.file("hf/model.safetensors"), file + header);
    CommandResult r = run(train_gpt_binary() + " --init-from '" + dir.file("hf") + "' -x 0 -g 1");
    expect_refused(r, {dir.file("hf/model.safetensors") + ": tensor '\\x1b[31mX' lacks dtype"});
    EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "no raw ESC reaches the terminal";
    // invalid UTF-8 in the header: the parser's message quotes it
    const std::string raw = "{\"\xff\x1b[2J\":1}";
    std::string file2(8, '\0');
    for (int i = 0; i < 8; i++)
        file2[i] = (char)((raw.size() >> (8 * i)) & 0xff);
    write_text(dir.file("hf/model.safetensors"), file2 + raw);
    r = run(train_gpt_binary() + " --init-from '" + dir.file("hf") + "' -x 0 -g 1");
    expect_refused(r, {dir.file("hf/model.safetensors") + ": header is not valid JSON", "\xEF\xBF\xBD"});
    EXPECT_EQ(r.output.find('\xff'), std::string::npos);
}

// ---- the third adversarial round -------------------------------------------------------------

// --trace-ops names a file the run writes, so it is checked like the run's other outputs, before
// anything is written (before: fopen("w") emptied whatever it named while the model was built —
// a checkpoint's weights being evaluated or resumed, a shard, the tokenizer, another run's
// log.jsonl — and the run often exited 0).
TEST(HostileInputs, TraceOpsNeverEmptiesAnotherFileOfTheRun) {
    Corpus c;
    auto size_of = [](const std::string& p) { return fs::exists(p) ? (long long)fs::file_size(p) : -1LL; };
    ASSERT_EQ(run(c.train_gpt("-x 4 -v 0 --checkpoint-every 2")).rc, 0);
    const std::string ckpt = c.dir.file("out/checkpoints/step_00000004");
    const std::string weights = ckpt + "/model-00001-of-00001.safetensors";
    const long long weights_bytes = size_of(weights), log_bytes = size_of(c.dir.file("out/log.jsonl"));
    const long long shard_bytes = size_of(c.dir.file("train_000000.bin"));
    ASSERT_GT(weights_bytes, 0);
    // evaluating the checkpoint, the trace at its weights
    expect_refused(run(train_gpt_binary() + " --device cpu --init-from '" + ckpt + "' -x 0 -g 5 -o '" +
                       c.dir.file("eval") + "' --trace-ops '" + weights + "'"),
                   {"--trace-ops " + weights + ": the file exists and is not a trace"});
    // resuming it, the trace in the checkpoint directory (at a file that exists, and one that does not)
    expect_refused(run(c.train_gpt("-x 6 -v 0 --checkpoint-every 2 --resume --trace-ops '" + weights + "'")),
                   {"is in the checkpoint directory"});
    expect_refused(run(c.train_gpt("-x 6 -v 0 --checkpoint-every 2 --resume --trace-ops '" +
                                   c.dir.file("out/checkpoints/step_00000006") + "'")),
                   {"is in the checkpoint directory"});
    // the run's own log, and a shard it reads
    expect_refused(run(c.train_gpt("-x 6 -v 0 --resume --trace-ops '" + c.dir.file("out/log.jsonl") + "'")),
                   {"that is the run's own log.jsonl"});
    expect_refused(run(c.train_gpt("-x 2 -v 0 -o '" + c.dir.file("out2") + "' --trace-ops '" +
                                   c.dir.file("train_000000.bin") + "'")),
                   {"is not a trace"});
    EXPECT_EQ(size_of(weights), weights_bytes);
    EXPECT_EQ(size_of(c.dir.file("out/log.jsonl")), log_bytes);
    EXPECT_EQ(size_of(c.dir.file("train_000000.bin")), shard_bytes);
    EXPECT_FALSE(fs::exists(c.dir.file("out/checkpoints/step_00000006")));
    // an earlier trace may be replaced; the resumed run does not take --trace-ops from its checkpoint
    const std::string trace = c.dir.file("ops.txt");
    ASSERT_EQ(
        run(c.train_gpt("-x 2 -v 0 -o '" + c.dir.file("out3") + "' --checkpoint-every 2 --trace-ops '" + trace + "'"))
            .rc,
        0);
    const std::string first = read_text(trace);
    ASSERT_EQ(first.rfind("alloc bytes=", 0), 0u) << first.substr(0, 80);
    ASSERT_EQ(run(c.train_gpt("-x 4 -v 0 -o '" + c.dir.file("out3") + "' --checkpoint-every 2 --resume")).rc, 0);
    EXPECT_EQ(read_text(trace), first) << "the resumed run replaced the first process's trace";
    EXPECT_EQ(run(c.train_gpt("-x 2 -v 0 -o '" + c.dir.file("out4") + "' --trace-ops '" + trace + "'")).rc, 0);
}

// Every write of the trace is checked, the flush and the close too (before: a trace cut short by a
// full device, or one whose only write was the close's, exited 0).
TEST(HostileInputs, ATraceThatCannotBeWrittenWholeFailsTheRun) {
    Corpus c;
    expect_refused(run(c.train_gpt("-x 2 -v 0 --trace-ops /dev/full")),
                   {"--trace-ops /dev/full", "No space left on device"});
}

// Round 23: a --trace-ops path that cannot be written was refused only after -o was made and
// locked (an empty directory left behind); a FIFO without a reader was waited on before anything
// was printed. Both are refused, and only a readerless FIFO (known only when it is opened, after the
// directories) leaves -o behind.
TEST(HostileInputs, ATracePathThatCannotBeWrittenIsRefusedBeforeTheRunsDirectories) {
    Corpus c;
    write_text(c.dir.file("file"), "x");
    const struct {
        std::string path, says;
    } cases[] = {
        {c.dir.path, "that is a directory"},
        {c.dir.file("file/ops.txt"), c.dir.file("file") + " is not a directory"},
        {c.dir.file("none/ops.txt"), c.dir.file("none") + " does not exist"},
    };
    for (const auto& k : cases) {
        SCOPED_TRACE(k.path);
        expect_refused(run(c.train_gpt("-x 2 -v 0 -o '" + c.dir.file("out") + "' --trace-ops '" + k.path + "'")),
                       {"--trace-ops " + k.path + ": " + k.says});
        EXPECT_FALSE(file_exists(c.dir.file("out")));
    }
    // round 24: ... but -o, which the run makes, need not exist yet
    const CommandResult beside_the_log = run(
        c.train_gpt("-x 2 -v 0 -o '" + c.dir.file("fresh") + "' --trace-ops '" + c.dir.file("fresh/ops.txt") + "'"));
    ASSERT_EQ(beside_the_log.rc, 0) << beside_the_log.output;
    EXPECT_EQ(read_text(c.dir.file("fresh/ops.txt")).rfind("alloc bytes=", 0), 0u);
    const std::string fifo = c.dir.file("ops.fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
    expect_refused(run(c.train_gpt("-x 2 -v 0 -o '" + c.dir.file("out") + "' --trace-ops '" + fifo + "'")),
                   {"--trace-ops " + fifo + ": cannot open it for writing: it is a FIFO that no process reads"});
}

// A testing flag that would do nothing says so (before: silently nothing, exit 0).
TEST(HostileInputs, AnInjectionOutsideTheRunSaysItInjectsNothing) {
    Corpus c;
    const CommandResult r = run(c.train_gpt("-x 6 -v 0 --inject-nonfinite-step 6"));
    EXPECT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: --inject-nonfinite-step 6 injects nothing: this run trains steps 0 to 5");
    const CommandResult in = run(c.train_gpt("-x 6 -v 0 -o '" + c.dir.file("o2") + "' --inject-nonfinite-step 5"));
    EXPECT_EQ(in.output.find("injects nothing"), std::string::npos) << in.output;
}

// prepare_text refuses an input it would overwrite or remove, an input given twice, and a
// --train-bytes below 1 (before: the input text was replaced by a shard, a doubled input
// leaked validation text into training, and --train-bytes -1 trained a BPE on nothing, exit 0).
TEST(HostileInputs, PrepareTextNeverOverwritesAnInputAndTakesEachOnce) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 400; i++)
        text += "And the evening and the morning were the first day. ";
    write_text(dir.file("book.txt"), text);
    write_text(dir.file("data_train_000000.bin"), text);   // a text file under a shard's name
    expect_refused(run(prepare_text("--input '" + dir.file("data_train_000000.bin") + "' --out-dir '" + dir.path +
                                    "' --format text")),
                   {"is a file this run writes or removes in --out-dir"});
    EXPECT_EQ(read_text(dir.file("data_train_000000.bin")), text);
    write_text(dir.file("tokenizer.bin"), text);
    expect_refused(run(prepare_text("--input '" + dir.file("tokenizer.bin") + "' --out-dir '" + dir.path + "/'")),
                   {"is a file this run writes or removes"});
    EXPECT_EQ(read_text(dir.file("tokenizer.bin")), text);
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --input '" + dir.file("book.txt") +
                                    "' --out-dir '" + dir.file("o") + "'")),
                   {"is given twice"});
    // round 25: ... also under a second name that is a hard link (the document was read twice)
    ASSERT_EQ(::link(dir.file("book.txt").c_str(), dir.file("hard.txt").c_str()), 0);
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --input '" + dir.file("hard.txt") +
                                    "' --out-dir '" + dir.file("o") + "'")),
                   {"input " + dir.file("hard.txt") + " is given twice (--input): it is another name (a hard link)"});
    expect_refused(run(prepare_text("--input '" + dir.file("book.txt") + "' --out-dir '" + dir.file("o") +
                                    "' --tokenizer bpe --train-bytes -1")),
                   {"--train-bytes must be at least 1"});
    EXPECT_FALSE(fs::exists(dir.file("o")));
}

// ---- the fourth adversarial round ------------------------------------------------------------

// -o (or --checkpoint-dir) at a checkpoint's step directory or a model directory is refused,
// naming the flag (before: --auto-resume -o <step dir> replaced the checkpoint's checksummed
// config.json, exit 0, and the newest checkpoint was lost; without it, the refusal suggested
// --overwrite-output, which did the same).
TEST(HostileInputs, AModelDirectoryIsNoOutputDirectory) {
    Corpus c;
    ASSERT_EQ(run(c.train_gpt("-x 2 -v 0 --checkpoint-every 2")).rc, 0);
    const std::string step = c.dir.file("out/checkpoints/step_00000002");
    const std::string config = read_text(step + "/config.json");
    for (const char* flags : {"--auto-resume", "--overwrite-output", ""}) {
        expect_refused(run(train_gpt_binary() + " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -x 2 -v 0 -g 0 -i '" +
                           c.dir.file("train_*.bin") + "' --tokenizer '" + c.dir.file("tokenizer.bin") + "' -o '" +
                           step + "' " + flags),
                       {"--output-dir " + step + ": that is a checkpoint's step directory"});
    }
    expect_refused(run(c.train_gpt("-x 2 -v 0 --checkpoint-every 2 -o '" + c.dir.file("o2") + "' --checkpoint-dir '" +
                                   step + "'")),
                   {"--checkpoint-dir " + step + ": that is a checkpoint's step directory"});
    EXPECT_EQ(read_text(step + "/config.json"), config);
    EXPECT_FALSE(fs::exists(step + "/log.jsonl"));
    ASSERT_EQ(run(c.train_gpt("-x 4 -v 0 --checkpoint-every 2 --resume")).rc, 0) << "the checkpoint still resumes";
}

// A text flag that is not UTF-8 is refused at start, naming the flag (before: a bare JSON
// exception from config.json, with an empty log and a lock left behind; with -o '' only at the
// first checkpoint, after training).
TEST(HostileInputs, ATextFlagThatIsNotUtf8IsRefusedAtStart) {
    Corpus c;
    expect_refused(run(c.train_gpt("-x 2 -v 0 -g 4 --sample-prompt \"$(printf 'caf\\351')\"")),
                   {"--sample-prompt caf", "not valid UTF-8"});
    EXPECT_FALSE(fs::exists(c.dir.file("out"))) << "nothing is written before the refusal";
    expect_refused(run(c.train_gpt("-x 2 -v 0 -o \"" + c.dir.file("$(printf 'caf\\351')") + "\"")),
                   {"--output-dir", "not valid UTF-8"});
}

// -o '' has no checkpoint directory (before: checkpoints went to /checkpoints at the root), and
// a training run without an output directory says it writes no log.
TEST(HostileInputs, NoOutputDirectoryMeansNoCheckpointsUnlessGivenADirectory) {
    Corpus c;
    expect_refused(run(c.train_gpt("-x 2 -v 0 -o '' --checkpoint-every 2")),
                   {"-o '': checkpoints go under the output directory, and there is none"});
    expect_refused(run(c.train_gpt("-x 2 -v 0 -o '' --auto-resume")), {"(with --auto-resume)"});
    const CommandResult r =
        run(c.train_gpt("-x 2 -v 0 -o '' --checkpoint-every 2 --checkpoint-dir '" + c.dir.file("ck") + "'"));
    EXPECT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: -o '': this run writes no log.jsonl or config.json");
    EXPECT_TRUE(fs::exists(c.dir.file("ck/step_00000002")));
}

// -x 0 -g 0 -j GLOB -v 0 names -v 0 as the reason; -j with -v 0 says the val loss is never
// evaluated (before: "give -j GLOB", which was given; or silence).
TEST(HostileInputs, ValidationTurnedOffByVZeroSaysSo) {
    Corpus c;
    ASSERT_EQ(run(c.train_gpt("-x 2 -v 0 --checkpoint-every 2")).rc, 0);
    const std::string model = train_gpt_binary() + " --device cpu --init-from '" + c.dir.file("out/checkpoints") +
                              "' -x 0 -j '" + c.dir.file("train_*.bin") + "' -v 0 ";
    expect_refused(run(model + "-g 0"), {"nothing to do, because -v 0 turns the val loss off"});
    const CommandResult r = run(model + "-g 4");
    EXPECT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "but -v 0: the val loss is never evaluated");
}

// --seed beyond 2^64 - 1, or negative, is refused (before: saturated to 2^64 - 1, or wrapped).
TEST(HostileInputs, SeedsOutOfRangeAreRefused) {
    Corpus c;
    for (const char* seed : {"18446744073709551616", "-1", "1e3"}) {
        expect_refused(run(c.train_gpt(std::string("-x 1 -v 0 --seed ") + seed)), {"--seed"});
    }
    EXPECT_EQ(run(c.train_gpt("-x 1 -v 0 --seed 18446744073709551615")).rc, 0);
}

// A -d whose accumulation count overflows an int is refused naming the flag (before:
// grad_accum_steps -2147483648, "loss 0" steps, negative tokens, exit 0); an injection step past an
// int is no step (before: 4294967298 wrapped to step 2).
TEST(HostileInputs, CountsBeyondAnIntAreRefused) {
    Corpus c;
    for (const char* d : {"68719476736", "137438953472"}) {
        expect_refused(run(c.train_gpt(std::string("-x 2 -v 0 -d ") + d)),
                       {std::string("--total-batch-tokens ") + d, "micro-batches"});
    }
    EXPECT_FALSE(std::filesystem::exists(c.dir.file("out/log.jsonl")));
    for (const char* steps : {"4294967298", "2-4294967298", "99999999999"}) {
        expect_refused(run(c.train_gpt(std::string("-x 4 -v 0 --inject-nonfinite-step ") + steps)),
                       {"--inject-nonfinite-step"});
    }
    const CommandResult ok = run(c.train_gpt("-x 4 -v 0 --inject-nonfinite-step 2-3"));
    EXPECT_EQ(ok.rc, 0) << ok.output;
}

// Messages name the flags a user gave or could give: the width's and heads' divisibility, the loss
// scale's range, and a warmup longer than the run.
TEST(HostileInputs, MessagesNameTheFlagsBehindTheValues) {
    Corpus c;
    expect_refused(run(c.train_gpt("-x 2 -v 0 --n-head 3")),
                   {"n_embd 32 (--n-embd) is not divisible by n_head 3 (--n-head)"});
    expect_refused(run(c.train_gpt("-x 2 -v 0 -p fp16 --loss-scale-init 1 --loss-scale-min 1024")),
                   {"(--loss-scale-init) 1 must lie in [--loss-scale-min 1024"});
    const CommandResult r = run(c.train_gpt("-x 4 -v 0 --warmup-steps 10"));
    EXPECT_EQ(r.rc, 0) << r.output;
    EXPECT_CONTAINS(r.output, "notice: --warmup-steps 10 is longer than the run's 4 steps");
}
