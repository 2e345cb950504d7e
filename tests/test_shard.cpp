// test_shard.cpp — llm.c shard format: exact bytes on disk, round trips, and one test per way a
// shard file can be wrong (each error must name the path and the problem).
#include "data/shard.h"
#include "test_util.h"
#include "utils.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

std::vector<unsigned char> file_bytes(const std::string& path) {
    FILE* f = open_file(path, "rb");
    std::vector<unsigned char> bytes;
    int c;
    while ((c = std::fgetc(f)) != EOF)
        bytes.push_back(static_cast<unsigned char>(c));
    std::fclose(f);
    return bytes;
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
    FILE* f = open_file(path, "wb");
    write_exact(bytes.data(), 1, bytes.size(), f, path);
    std::fclose(f);
}

int32_t header_int(const std::vector<unsigned char>& bytes, int i) {
    int32_t v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
}

void set_header_int(std::vector<unsigned char>* bytes, int i, int32_t v) { std::memcpy(bytes->data() + 4 * i, &v, 4); }

}   // namespace

TEST(Shard, RoundTripUint16HasLlmcLayout) {
    ScratchDir dir;
    const std::string path = dir.file("a.bin");
    const std::vector<uint32_t> tokens = {0, 1, 50256, 65535, 7, 300};
    write_shard(path, tokens.data(), tokens.size(), 2);

    const std::vector<unsigned char> bytes = file_bytes(path);
    ASSERT_EQ(bytes.size(), 1024u + 2 * tokens.size());
    EXPECT_EQ(header_int(bytes, 0), 20240520);
    EXPECT_EQ(header_int(bytes, 1), 1);
    EXPECT_EQ(header_int(bytes, 2), 6);
    for (int i = 3; i < 256; i++)
        EXPECT_EQ(header_int(bytes, i), 0) << "header int " << i;
    // little-endian uint16: 50256 = 0xC450
    EXPECT_EQ(bytes[1024 + 4], 0x50);
    EXPECT_EQ(bytes[1024 + 5], 0xC4);

    const ShardInfo info = read_shard_header(path);
    EXPECT_EQ(info.path, path);
    EXPECT_EQ(info.num_tokens, 6);
    EXPECT_EQ(info.token_bytes, 2);
    EXPECT_EQ(read_shard(path), tokens);
    EXPECT_FALSE(file_exists(path + ".tmp"));   // written via temp + rename
}

TEST(Shard, RoundTripUint32) {
    ScratchDir dir;
    const std::string path = dir.file("b.bin");
    const std::vector<uint32_t> tokens = {0, 65535, 65536, 100000, 4000000000u};
    write_shard(path, tokens.data(), tokens.size(), 4);
    const std::vector<unsigned char> bytes = file_bytes(path);
    ASSERT_EQ(bytes.size(), 1024u + 4 * tokens.size());
    EXPECT_EQ(header_int(bytes, 1), 2);
    const ShardInfo info = read_shard_header(path);
    EXPECT_EQ(info.num_tokens, 5);
    EXPECT_EQ(info.token_bytes, 4);
    EXPECT_EQ(read_shard(path), tokens);
}

// header[3..5] record the tokenizer that made the shard; llm.c's fields are untouched.
TEST(Shard, HeaderRecordsTheTokenizerThatMadeIt) {
    ScratchDir dir;
    const std::string path = dir.file("r.bin");
    const std::vector<uint32_t> tokens = {5, 6, 7};
    write_shard(path, tokens.data(), tokens.size(), 2, ShardTokenizer{2048, 0x0123456789abcdefull});
    const std::vector<unsigned char> bytes = file_bytes(path);
    EXPECT_EQ(header_int(bytes, 0), 20240520);
    EXPECT_EQ(header_int(bytes, 1), 1);
    EXPECT_EQ(header_int(bytes, 2), 3);
    EXPECT_EQ(header_int(bytes, 3), 2048);
    EXPECT_EQ((uint32_t)header_int(bytes, 4), 0x89abcdefu);
    EXPECT_EQ((uint32_t)header_int(bytes, 5), 0x01234567u);
    for (int i = 6; i < 256; i++)
        EXPECT_EQ(header_int(bytes, i), 0) << "header int " << i;
    const ShardInfo info = read_shard_header(path);
    EXPECT_TRUE(info.tokenizer.recorded());
    EXPECT_EQ(info.tokenizer.vocab_size, 2048);
    EXPECT_EQ(info.tokenizer.fingerprint, 0x0123456789abcdefull);
    EXPECT_EQ(read_shard(path), tokens);
    write_shard(path, tokens.data(), tokens.size(), 2);   // llm.c's shards record none
    EXPECT_FALSE(read_shard_header(path).tokenizer.recorded());
    EXPECT_CONTAINS(error_of([&] { write_shard(path, tokens.data(), 3, 2, ShardTokenizer{-1, 0}); }), "negative");
}

TEST(Shard, EmptyShardRoundTrips) {
    ScratchDir dir;
    const std::string path = dir.file("empty.bin");
    write_shard(path, nullptr, 0, 2);
    EXPECT_EQ(read_shard_header(path).num_tokens, 0);
    EXPECT_TRUE(read_shard(path).empty());
}

TEST(Shard, TokenBytesForVocab) {
    EXPECT_EQ(token_bytes_for_vocab(257), 2);
    EXPECT_EQ(token_bytes_for_vocab(50257), 2);
    EXPECT_EQ(token_bytes_for_vocab(65536), 2);   // ids up to 65535
    EXPECT_EQ(token_bytes_for_vocab(65537), 4);
    EXPECT_EQ(shard_version_for_token_bytes(2), 1);
    EXPECT_EQ(shard_version_for_token_bytes(4), 2);
    EXPECT_CONTAINS(error_of([] { shard_version_for_token_bytes(3); }), "2 or 4");
}

TEST(Shard, Uint16RejectsLargeTokenAndWritesNothing) {
    ScratchDir dir;
    const std::string path = dir.file("big.bin");
    const std::vector<uint32_t> tokens = {1, 2, 65536};
    const std::string msg = error_of([&] { write_shard(path, tokens.data(), tokens.size(), 2); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "65536");
    EXPECT_CONTAINS(msg, "index 2");
    EXPECT_FALSE(file_exists(path));
}

TEST(Shard, MissingFile) {
    ScratchDir dir;
    const std::string path = dir.file("nope.bin");
    const std::string msg = error_of([&] { read_shard_header(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "No such file");
}

TEST(Shard, GlobMatchingNothing) {
    ScratchDir dir;
    const std::string pattern = dir.file("x_*.bin");
    const std::string msg = error_of([&] { expand_glob(pattern); });
    EXPECT_CONTAINS(msg, "no files match");
    EXPECT_CONTAINS(msg, pattern);
}

TEST(Shard, GlobIsSorted) {
    ScratchDir dir;
    const uint32_t t = 1;
    for (const char* name : {"d_000002.bin", "d_000000.bin", "d_000010.bin", "d_000001.bin", "other.bin"}) {
        write_shard(dir.file(name), &t, 1, 2);
    }
    const std::vector<std::string> expected = {dir.file("d_000000.bin"), dir.file("d_000001.bin"),
                                               dir.file("d_000002.bin"), dir.file("d_000010.bin")};
    EXPECT_EQ(expand_glob(dir.file("d_*.bin")), expected);
}

TEST(Shard, WrongMagic) {
    ScratchDir dir;
    const std::string path = dir.file("magic.bin");
    const uint32_t tokens[3] = {1, 2, 3};
    write_shard(path, tokens, 3, 2);
    std::vector<unsigned char> bytes = file_bytes(path);
    set_header_int(&bytes, 0, 20240328);   // the tokenizer's magic: a plausible mix-up
    write_bytes(path, bytes);
    const std::string msg = error_of([&] { read_shard_header(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "magic");
    EXPECT_CONTAINS(msg, "20240328");
}

TEST(Shard, BadVersion) {
    ScratchDir dir;
    const std::string path = dir.file("version.bin");
    const uint32_t tokens[3] = {1, 2, 3};
    write_shard(path, tokens, 3, 2);
    std::vector<unsigned char> bytes = file_bytes(path);
    set_header_int(&bytes, 1, 7);
    write_bytes(path, bytes);
    const std::string msg = error_of([&] { read_shard_header(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "version 7");
}

TEST(Shard, TruncatedShard) {
    ScratchDir dir;
    const std::string path = dir.file("trunc.bin");
    const uint32_t tokens[4] = {1, 2, 3, 4};
    write_shard(path, tokens, 4, 2);
    std::vector<unsigned char> bytes = file_bytes(path);
    bytes.pop_back();   // 1031 of 1032 bytes
    write_bytes(path, bytes);
    const std::string msg = error_of([&] { read_shard_header(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "truncated");
    EXPECT_CONTAINS(msg, "1032");
    EXPECT_CONTAINS(msg, "1031");
    EXPECT_CONTAINS(error_of([&] { read_shard(path); }), "truncated");
}

TEST(Shard, IncompleteHeader) {
    ScratchDir dir;
    const std::string path = dir.file("short.bin");
    write_bytes(path, std::vector<unsigned char>(100, 0));
    const std::string msg = error_of([&] { read_shard_header(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "incomplete shard header");
}

TEST(Shard, TrailingBytes) {
    ScratchDir dir;
    const std::string path = dir.file("trail.bin");
    const uint32_t tokens[4] = {1, 2, 3, 4};
    write_shard(path, tokens, 4, 4);
    std::vector<unsigned char> bytes = file_bytes(path);
    bytes.push_back(0);
    bytes.push_back(0);
    write_bytes(path, bytes);
    const std::string msg = error_of([&] { read_shard_header(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, "trailing bytes");
    EXPECT_CONTAINS(msg, "1040");   // expected 1024 + 4 * 4
    EXPECT_CONTAINS(msg, "1042");
}
