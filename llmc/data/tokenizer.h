// tokenizer.h — the token-id → bytes table (llm.c's tokenizer.bin) and a byte-level encoder.
//
// File format (llm.c): a header of 256 little-endian uint32
//   [0] magic 20240328, [1] version 2, [2] vocab_size, [3] eot_token (end-of-text id)
// then, for each id 0 .. vocab_size-1, one uint8 length L >= 1 and the token's L raw bytes.
// (Version 1, from older llm.c, has no [3]; its eot is 50256 and its vocab 50257.)
//
// Invariant: every id in [0, vocab_size) has a non-empty byte string, so decode() is a plain
// concatenation and never fails for in-range ids. A token's bytes need not be valid UTF-8
// on their own (BPE splits characters); use printable() before showing them.
//
// The byte-level tokenizer maps ids 0..255 to the bytes 0..255 and id 256 to
// <|endoftext|> (stored as that text): vocab 257. A BPE tokenizer (llmc/data/bpe.h) is this table
// plus its merges: load() picks them up from encoder.json + vocab.bpe beside tokenizer.bin
// (prepare_text writes all three), and then encode() tokenises text exactly as prepare_text did.
#pragma once

#include "data/bpe.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train_gpt {

constexpr uint32_t kTokenizerMagic = 20240328;
constexpr int kTokenizerVersion = 2;
constexpr int kTokenizerHeaderInts = 256;

class Tokenizer {
  public:
    // Validates magic, version, sizes; errors name the path. If DIR/encoder.json and
    // DIR/vocab.bpe exist beside it (DIR = the file's directory), or else DIR/vocab.json and
    // DIR/merges.txt (the same formats, as a Hugging Face model directory names them), loads them
    // as its BPE merges; they must describe the same table (else an error naming both).
    static Tokenizer load(const std::string& path);
    static Tokenizer byte_level();   // vocab 257, eot 256
    // the BPE's table, able to encode; origin names it in messages
    static Tokenizer from_bpe(std::shared_ptr<const Bpe> bpe, const std::string& origin = "BPE tokenizer");
    void save(const std::string& path) const;   // version 2, atomic

    int vocab_size() const { return static_cast<int>(tokens_.size()); }
    int eot_token() const { return eot_token_; }
    const std::string& token_bytes(int id) const;   // fails for id outside [0, vocab_size)
    bool is_byte_level() const;                     // equal to byte_level()'s table
    // FNV-1a (64-bit) over the vocabulary size, the EOT id and every token's length and bytes:
    // equal for equal tables (what a shard records of the tokenizer that made it, data/shard.h).
    uint64_t fingerprint() const;
    const std::string& origin() const { return origin_; }   // the file it came from, or what made it

    // Concatenation of the ids' bytes (the EOT id decodes to "<|endoftext|>").
    std::string decode(const std::vector<int>& ids) const;
    // One id per byte of `text` (id = byte value); fails unless is_byte_level().
    std::vector<int> encode_bytes(const std::string& text) const;
    // Ordinary text to ids (no special tokens; "<|endoftext|>" in the text is text): byte-level
    // or BPE; fails, naming the file, for a table without merges.
    std::vector<int> encode(const std::string& text) const;
    bool can_encode() const { return bpe_ != nullptr || is_byte_level(); }
    const Bpe* bpe() const { return bpe_.get(); }   // null unless merges are loaded

  private:
    Tokenizer(std::vector<std::string> tokens, int eot_token, const std::string& origin);
    std::vector<std::string> tokens_;   // (vocab_size,): bytes of each id
    int eot_token_ = 0;
    std::string origin_;               // the file it came from, for error messages
    std::shared_ptr<const Bpe> bpe_;   // merges, when loaded
};

// `bytes` made safe to print on a UTF-8 terminal: valid UTF-8 passes through; each byte of an
// invalid or truncated sequence becomes U+FFFD; control characters other than \n and \t
// become escapes (\xNN for C0 and DEL, \u00NN for C1).
std::string printable(const std::string& bytes);
// Generated text for a terminal: printable(), after every line break of another convention
// (\r\n, \r, \f, \v) becomes \n, so a model trained on CRLF text prints lines, not \x0d escapes.
// The other control characters stay escaped (a sampled ESC sequence must not drive the terminal).
std::string printable_text(const std::string& bytes);

}   // namespace train_gpt
