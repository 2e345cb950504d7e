// test_tokenizer.cpp — tokenizer.bin format (llm.c), byte-level encode/decode, printable(), and
// the BPE merges picked up from encoder.json + vocab.bpe beside tokenizer.bin.
#include "data/bpe.h"
#include "dev/data/bpe_train.h"
#include "test_util.h"
#include "data/tokenizer.h"
#include "utils.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// A tokenizer file built by hand: header (magic, version, vocab, eot) then length-prefixed tokens.
std::string tokenizer_file(uint32_t magic, uint32_t version, uint32_t eot, const std::vector<std::string>& tokens) {
    uint32_t header[256] = {};
    header[0] = magic;
    header[1] = version;
    header[2] = static_cast<uint32_t>(tokens.size());
    header[3] = eot;
    std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
    for (const std::string& t : tokens) {
        bytes.push_back(static_cast<char>(t.size()));
        bytes += t;
    }
    return bytes;
}

const std::vector<std::string> kSmallVocab = {"hello", " world", "\xe2\x82", "\xac", "<|eot|>"};

}   // namespace

TEST(Tokenizer, ByteLevelTable) {
    const Tokenizer tok = Tokenizer::byte_level();
    EXPECT_EQ(tok.vocab_size(), 257);
    EXPECT_EQ(tok.eot_token(), 256);
    EXPECT_TRUE(tok.is_byte_level());
    EXPECT_EQ(tok.token_bytes('A'), "A");
    EXPECT_EQ(tok.token_bytes(0), std::string(1, '\0'));
    EXPECT_EQ(tok.token_bytes(255), "\xff");
    EXPECT_EQ(tok.token_bytes(256), "<|endoftext|>");
}

TEST(Tokenizer, ByteLevelEncodeDecodeRoundTrip) {
    const Tokenizer tok = Tokenizer::byte_level();
    const std::string text = std::string("Caf\xc3\xa9\n\t", 7) + std::string(1, '\0') + "\xff end";
    const std::vector<int> ids = tok.encode_bytes(text);
    ASSERT_EQ(ids.size(), text.size());
    EXPECT_EQ(ids[0], 'C');
    EXPECT_EQ(ids[3], 0xc3);
    EXPECT_EQ(ids[7], 0);
    EXPECT_EQ(ids[8], 255);
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_EQ(tok.decode({256, 'h', 'i', 256}), "<|endoftext|>hi<|endoftext|>");
    EXPECT_TRUE(tok.encode_bytes("").empty());
    EXPECT_EQ(tok.decode({}), "");
}

TEST(Tokenizer, SaveLoadRoundTripByteLevel) {
    ScratchDir dir;
    const std::string path = dir.file("tokenizer.bin");
    Tokenizer::byte_level().save(path);
    EXPECT_FALSE(file_exists(path + ".tmp"));
    const std::string bytes = read_text(path);
    EXPECT_EQ(bytes.size(), 1024u + 256 * 2 + 1 + 13);
    EXPECT_EQ(bytes, tokenizer_file(20240328, 2, 256, [] {
                  std::vector<std::string> t;
                  for (int b = 0; b < 256; b++)
                      t.push_back(std::string(1, static_cast<char>(b)));
                  t.push_back("<|endoftext|>");
                  return t;
              }()));
    const Tokenizer tok = Tokenizer::load(path);
    EXPECT_TRUE(tok.is_byte_level());
    EXPECT_EQ(tok.eot_token(), 256);
    for (int id = 0; id < 257; id++)
        EXPECT_EQ(tok.token_bytes(id), Tokenizer::byte_level().token_bytes(id));
}

TEST(Tokenizer, LoadSaveNonByteLevelFileIsByteExact) {
    ScratchDir dir;
    const std::string path = dir.file("small.bin");
    const std::string file = tokenizer_file(20240328, 2, 4, kSmallVocab);
    write_text(path, file);
    const Tokenizer tok = Tokenizer::load(path);
    EXPECT_EQ(tok.vocab_size(), 5);
    EXPECT_EQ(tok.eot_token(), 4);
    EXPECT_FALSE(tok.is_byte_level());
    // Tokens may split a UTF-8 character ("€" = e2 82 | ac); decoding joins the bytes.
    EXPECT_EQ(tok.decode({0, 1, 2, 3, 4}), "hello world\xe2\x82\xac<|eot|>");
    const std::string msg = error_of([&] { tok.encode_bytes("hi"); });
    EXPECT_CONTAINS(msg, "byte-level");
    const std::string copy = dir.file("copy.bin");
    tok.save(copy);
    EXPECT_EQ(read_text(copy), file);
}

TEST(Tokenizer, LoadsVersion1WithGpt2Eot) {
    ScratchDir dir;
    const std::string path = dir.file("v1.bin");
    std::vector<std::string> tokens(50257, "x");
    tokens[50256] = "<|endoftext|>";
    write_text(path, tokenizer_file(20240328, 1, 0 /* unused in v1 */, tokens));
    const Tokenizer tok = Tokenizer::load(path);
    EXPECT_EQ(tok.vocab_size(), 50257);
    EXPECT_EQ(tok.eot_token(), 50256);
    EXPECT_EQ(tok.decode({50256}), "<|endoftext|>");
}

TEST(Tokenizer, OutOfRangeIdFails) {
    const Tokenizer tok = Tokenizer::byte_level();
    EXPECT_CONTAINS(error_of([&] { tok.token_bytes(257); }), "token id 257");
    EXPECT_CONTAINS(error_of([&] { tok.token_bytes(-1); }), "token id -1");
    const std::string msg = error_of([&] { tok.decode({72, 105, 1000}); });
    EXPECT_CONTAINS(msg, "1000");
    EXPECT_CONTAINS(msg, "[0, 257)");
}

TEST(Tokenizer, BadFilesNameThePathAndTheProblem) {
    ScratchDir dir;
    struct Case {
        const char* name;
        std::string bytes;
        const char* problem;
    };
    std::string truncated = tokenizer_file(20240328, 2, 4, kSmallVocab);
    truncated.pop_back();
    std::string zero_length = tokenizer_file(20240328, 2, 4, kSmallVocab);
    zero_length[1024] = 0;   // length byte of token 0
    const std::vector<Case> cases = {
        {"magic.bin", tokenizer_file(20240520, 2, 4, kSmallVocab), "bad magic number 20240520"},
        {"version.bin", tokenizer_file(20240328, 3, 4, kSmallVocab), "version 3"},
        {"eot.bin", tokenizer_file(20240328, 2, 5, kSmallVocab), "eot token 5"},
        {"empty_vocab.bin", tokenizer_file(20240328, 2, 0, {}), "bad vocab size 0"},
        {"header.bin", std::string(100, '\0'), "incomplete tokenizer header"},
        {"truncated.bin", truncated, "truncated"},
        {"zero.bin", zero_length, "token 0 has length 0"},
        {"trailing.bin", tokenizer_file(20240328, 2, 4, kSmallVocab) + "zz", "2 trailing bytes"},
    };
    for (const Case& c : cases) {
        const std::string path = dir.file(c.name);
        write_text(path, c.bytes);
        const std::string msg = error_of([&] { Tokenizer::load(path); });
        EXPECT_CONTAINS(msg, path);
        EXPECT_CONTAINS(msg, c.problem);
    }
    const std::string missing = dir.file("missing.bin");
    const std::string msg = error_of([&] { Tokenizer::load(missing); });
    EXPECT_CONTAINS(msg, missing);
    EXPECT_CONTAINS(msg, "No such file");
}

// Samples print the line breaks of any convention as lines (before: "\x0d" before every line of
// a model trained on CRLF text); other control characters stay escaped.
TEST(Tokenizer, PrintableTextPrintsLineBreaksAsLines) {
    EXPECT_EQ(printable_text("one\r\ntwo\rthree\ffour\vfive\n"), "one\ntwo\nthree\nfour\nfive\n");
    EXPECT_EQ(printable_text("\r\r\n"), "\n\n");
    EXPECT_EQ(printable_text("\x1b[2Jtab\there"), "\\x1b[2Jtab\there");
    EXPECT_EQ(printable_text(std::string("a\0b", 3)), "a\\x00b");
}

TEST(Tokenizer, PrintableKeepsValidUtf8AndEscapesTheRest) {
    const std::string fffd = "\xef\xbf\xbd";
    EXPECT_EQ(printable("plain text\nwith\ttab"), "plain text\nwith\ttab");
    EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(printable("\x1b[31mred\r"), "\\x1b[31mred\\x0d");
    EXPECT_EQ(printable("\x7f"), "\\x7f");
    EXPECT_EQ(printable("\xc2\x85"), "\\u0085");                           // C1 control NEL
    EXPECT_EQ(printable("\xff"), fffd);                                    // never valid in UTF-8
    EXPECT_EQ(printable("x\xe2\x82"), "x" + fffd + fffd);                  // truncated 3-byte sequence
    EXPECT_EQ(printable("\xe2\x82y"), fffd + fffd + "y");                  // interrupted sequence resyncs
    EXPECT_EQ(printable("\xac"), fffd);                                    // lone continuation byte
    EXPECT_EQ(printable("\xc0\xaf"), fffd + fffd);                         // overlong '/'
    EXPECT_EQ(printable("\xed\xa0\x80"), fffd + fffd + fffd);              // UTF-16 surrogate
    EXPECT_EQ(printable("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);   // above U+10FFFF
    // A token that splits a character prints safely on its own and exactly when joined.
    const Tokenizer tok = Tokenizer::byte_level();
    EXPECT_EQ(printable(tok.decode({0xe2, 0x82, 0xac})), "\xe2\x82\xac");
}

TEST(Tokenizer, EncodeIsByteLevelForTheByteLevelTable) {
    const Tokenizer tok = Tokenizer::byte_level();
    EXPECT_TRUE(tok.can_encode());
    EXPECT_EQ(tok.bpe(), nullptr);
    EXPECT_EQ(tok.encode("h\xc3\xa9"), (std::vector<int>{'h', 0xc3, 0xa9}));
}

TEST(Tokenizer, LoadPicksUpBpeMergesBesideIt) {
    ScratchDir dir;
    auto bpe = std::make_shared<const Bpe>(train_bpe({"the cat and the hat and the bat sat on the mat"}, 280));
    const Tokenizer made = Tokenizer::from_bpe(bpe);
    EXPECT_EQ(made.vocab_size(), bpe->vocab_size());
    EXPECT_EQ(made.eot_token(), bpe->vocab_size() - 1);
    made.save(dir.file("tokenizer.bin"));
    bpe->save_gpt2(dir.path);

    const Tokenizer tok = Tokenizer::load(dir.file("tokenizer.bin"));
    ASSERT_NE(tok.bpe(), nullptr);
    EXPECT_TRUE(tok.can_encode());
    const std::string text = "the cat sat on the hat, caf\xc3\xa9 \xff";
    const std::vector<int> ids = tok.encode(text);
    EXPECT_EQ(ids, bpe->encode(text));
    EXPECT_LT(ids.size(), text.size());   // merges were used
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_FALSE(tok.is_byte_level());
    EXPECT_CONTAINS(error_of([&] { tok.encode_bytes("x"); }), "byte-level");   // encode_bytes stays byte-only

    // Without the merges the same table can only decode.
    std::remove(dir.file("vocab.bpe").c_str());
    const Tokenizer table = Tokenizer::load(dir.file("tokenizer.bin"));
    EXPECT_EQ(table.bpe(), nullptr);
    EXPECT_FALSE(table.can_encode());
    EXPECT_EQ(table.decode(ids), text);
    const std::string msg = error_of([&] { table.encode("x"); });
    EXPECT_CONTAINS(msg, dir.file("tokenizer.bin"));
    EXPECT_CONTAINS(msg, "no BPE merges");

    // Merges that describe another table are an error, naming both files.
    train_bpe({"something else entirely, else entirely"}, 270).save_gpt2(dir.path);
    const std::string stale = error_of([&] { Tokenizer::load(dir.file("tokenizer.bin")); });
    EXPECT_CONTAINS(stale, dir.file("tokenizer.bin"));
    EXPECT_CONTAINS(stale, dir.file("encoder.json"));
    EXPECT_CONTAINS(stale, "differs");
}

TEST(Tokenizer, LoadsGpt2sOwnVocabularyFiles) {
    // GPT-2's encoder.json + vocab.bpe beside a tokenizer.bin made from them.
    ScratchDir dir;
    const std::string gpt2 = repo_root() + "/../shared/data/gpt2";
    auto bpe = std::make_shared<const Bpe>(Bpe::load(gpt2));
    Tokenizer::from_bpe(bpe).save(dir.file("tokenizer.bin"));
    std::string output;
    ASSERT_EQ(run_command("cp '" + gpt2 + "/encoder.json' '" + gpt2 + "/vocab.bpe' " + dir.path, &output), 0) << output;
    const Tokenizer tok = Tokenizer::load(dir.file("tokenizer.bin"));
    EXPECT_EQ(tok.vocab_size(), 50257);
    EXPECT_EQ(tok.eot_token(), 50256);
    EXPECT_EQ(tok.encode("Hello world"), (std::vector<int>{15496, 995}));
}
