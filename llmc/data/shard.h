// shard.h — llm.c's token shard file format.
//
// A shard is a 1024-byte header of 256 little-endian int32 followed by its tokens:
//   header[0] = kShardMagic (20240520)
//   header[1] = version: 1 = uint16 tokens (llm.c's format, vocab <= 65536),
//                        2 = uint32 tokens (this project's extension for larger vocabularies)
//   header[2] = N, the number of tokens
//   header[3] = the vocabulary size of the tokenizer that made the shard, 0 if not recorded
//   header[4], header[5] = that tokenizer's Tokenizer::fingerprint(), low and high 32 bits
//   header[6..255] = 0
//   then N tokens of 2 or 4 bytes each.
// llm.c reads header[0..2] only, so a shard that records its tokenizer is still llm.c's format;
// its own shards (header[3..5] = 0) read as "not recorded".
// Invariant: a shard that passes read_shard_header() is exactly 1024 + N * token_bytes bytes,
// so its tokens can be mapped and indexed without further checks. Files are written whole
// (temp file + rename), so a crash never leaves a torn shard behind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train_gpt {

constexpr int32_t kShardMagic = 20240520;
constexpr int kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);   // 1024

// The tokenizer a shard was made with, as its header records it.
struct ShardTokenizer {
    int vocab_size = 0;         // 0: not recorded
    uint64_t fingerprint = 0;   // Tokenizer::fingerprint()
    bool recorded() const { return vocab_size != 0; }
};

struct ShardInfo {
    std::string path;
    int64_t num_tokens;   // N
    int token_bytes;      // 2 (version 1) or 4 (version 2)
    ShardTokenizer tokenizer;
};

// Shard version for a token width, and the token width a version implies (fails otherwise).
int shard_version_for_token_bytes(int token_bytes);
int token_bytes_for_shard_version(int version, const std::string& path);

// Smallest token width that holds every id of a vocabulary of `vocab_size` tokens: 2 or 4.
int token_bytes_for_vocab(int64_t vocab_size);

// Reads and validates the header: the file is readable, the header complete, the magic and
// version known, the recorded vocabulary size not negative, and the file size exactly
// 1024 + N * token_bytes (else "truncated ... expected E bytes, found A" or "trailing bytes
// ..."). Every error message names the path.
ShardInfo read_shard_header(const std::string& path);

// Reads a whole shard (header validated as above) into `tokens`, widened to uint32: (N,).
std::vector<uint32_t> read_shard(const std::string& path);

// Writes tokens (n,) as a shard of `token_bytes` (2 or 4) per token, atomically, recording
// `tokenizer` in the header. Fails, naming the path and the token's index, if token_bytes == 2
// and a token > 65535.
void write_shard(const std::string& path, const uint32_t* tokens, int64_t n, int token_bytes,
                 const ShardTokenizer& tokenizer = {});

// The position of the first of tokens[begin, end) that is >= limit, or -1 when there is none.
// `tokens` is a shard's token array (N tokens of token_bytes = 2 or 4 each, native-aligned, e.g.
// a mapped shard's bytes after its header). One vectorised pass computes the range's maximum (at
// memory speed: see docs/data.md for its cost); only a range that fails is scanned again for the
// position.
int64_t find_token_at_least(const void* tokens, int token_bytes, int64_t begin, int64_t end, uint32_t limit);

// Paths matching a glob(3) pattern, sorted; fails with "no files match <pattern>" if none.
std::vector<std::string> expand_glob(const std::string& pattern);

// prepare_text replacing a dataset: between its first shard's rename into place and its last step
// (the tokenizer files, the earlier dataset's extra shards removed) the directory holds
// DIR/NAME.publishing, so that shards of two preparations are never read as one dataset, whatever
// stops it midway (a full disk, a kill).
std::string publishing_marker(const std::string& dir, const std::string& name);
// Fails, naming the marker, where one of `shards` (DIR/NAME_..., expanded from a glob) lies beside
// DIR/NAME.publishing: its dataset was being replaced, and the run that did it did not finish.
void fail_if_being_published(const std::vector<std::string>& shards);

}   // namespace train_gpt
