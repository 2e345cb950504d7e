// bpe.h — GPT-2's byte-level BPE: encoding, decoding, and its vocabulary files. (Training one is
// the data tool's job: dev/data/bpe_train.h.)
//
// Encoding text (what tiktoken's encode_ordinary does, and what the tests hold it to):
//   1. Pre-tokenise with GPT-2's pattern (PCRE2, UTF + Unicode properties, JIT):
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      where \s is Unicode White_Space (PCRE2's \s is widened by U+0085, as in Python/Rust).
//      Bytes that are not valid UTF-8 never match (PCRE2_MATCH_INVALID_UTF); each such byte
//      becomes its own single-byte token, so every input round-trips.
//   2. A pre-token that is itself a token is that token. Otherwise start from its bytes and
//      repeatedly merge the adjacent pair whose concatenation has the lowest rank (leftmost
//      on ties) until no adjacent pair concatenates to a token. Ranks are token ids: ids
//      0..255 are the single bytes in GPT-2's order, merges follow in the order learned,
//      and <|endoftext|> is the last id (GPT-2: 50256). Special tokens in the text are text.
//
// Invariant: every id in [0, vocab_size) has 1..255 bytes (what tokenizer.bin can store), no two
// ids have the same bytes (except that <|endoftext|>'s text may also be reachable as ordinary
// tokens), and decode(encode(x)) == x for every byte string x.
//
// Files. GPT-2's pair: encoder.json maps each token, written in GPT-2's byte-to-unicode
// alphabet (byte 0x20 = "Ġ"), to its id; vocab.bpe is "#version: 0.2" then one merge
// "left right" per line, the merge on line k (k = 0, 1, ...) producing id 256 + k.
// tiktoken's .tiktoken: one "base64(token bytes) rank" per line; <|endoftext|> gets the next id.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace train_gpt {

inline constexpr const char* kEndOfText = "<|endoftext|>";

// GPT-2's byte-to-unicode alphabet: the printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves, the other 68 bytes for U+0100 + n in byte order. gpt2_byte_char(0x20) == "Ġ".
std::string gpt2_byte_char(uint8_t byte);   // UTF-8 of the character standing for `byte`
// The byte's id in GPT-2's vocabulary: the printable bytes first, in byte order, then the rest.
int gpt2_byte_rank(uint8_t byte);
// Inverse of gpt2_byte_char over a whole string; false if a character is outside the alphabet.
bool gpt2_decode_chars(std::string_view chars, std::string* bytes);

// Pre-tokenisation: calls f(begin, end) for each pre-token of text, in order; an invalid UTF-8
// byte is a pre-token of its own (and the only kind of pre-token that isn't valid UTF-8).
// Thread-safe (the compiled pattern is shared, match data is per call).
class Pretokenizer {
  public:
    Pretokenizer();
    ~Pretokenizer();
    Pretokenizer(const Pretokenizer&) = delete;
    Pretokenizer& operator=(const Pretokenizer&) = delete;
    template <typename F>
    void split(std::string_view text, F&& f) {
        size_t pos = 0;
        while (pos < text.size()) {
            size_t begin, end;
            if (!next_match(text, pos, &begin, &end)) begin = end = text.size();
            for (; pos < begin; pos++)
                f(pos, pos + 1);   // invalid UTF-8: one byte each
            if (begin == end) break;
            f(begin, end);
            pos = end;
        }
    }

  private:
    // First match at or after `offset`: [*begin, *end); false if none.
    bool next_match(std::string_view text, size_t offset, size_t* begin, size_t* end);
    struct State;
    std::unique_ptr<State> state_;
};

// Whether pre-tokenising text[0, i) and text[i, end) separately gives the same pre-tokens as the
// whole: true if text[i - 1] is a '\n' that is preceded by an ASCII non-space (or is the first
// byte) and text[i] is an ASCII non-space. (A longer whitespace run would end the first piece
// differently: at the end of text, \s+(?!\S) takes the whole run; before a letter it leaves
// the last space to the word.)
bool is_pretokenizer_cut(std::string_view text, size_t i);
// Cut offsets, increasing, each in (0, len) and is_pretokenizer_cut, about `target` bytes
// apart (the first at or after `target`, each next at or after the previous + target); a text
// with no such place is one piece.
std::vector<size_t> pretokenizer_cuts(std::string_view text, size_t target);

class Bpe {
  public:
    // A vocabulary from its tables: tokens (id -> bytes, the last "<|endoftext|>") and the merges
    // that made ids 256.. (may be empty); checked as load_gpt2 checks files, errors naming `origin`.
    static Bpe from_tables(std::vector<std::string> tokens, std::vector<std::pair<int, int>> merges,
                           const std::string& origin);

    // GPT-2's encoder.json + vocab.bpe (checked against each other: errors name file and line).
    static Bpe load_gpt2(const std::string& encoder_json, const std::string& vocab_bpe);
    // tiktoken's ranks file: ranks must be 0..N-1 and include the 256 single bytes.
    static Bpe load_tiktoken(const std::string& path);
    // A directory with encoder.json + vocab.bpe, or a .tiktoken file.
    static Bpe load(const std::string& dir_or_file);

    // Writes DIR/encoder.json and DIR/vocab.bpe (atomically), loadable by load_gpt2, tiktoken's
    // data_gym_to_mergeable_bpe_ranks and Hugging Face's GPT2Tokenizer. Needs merges (not for
    // a vocabulary loaded from a .tiktoken file).
    void save_gpt2(const std::string& dir) const;
    void save_tiktoken(const std::string& path) const;

    int vocab_size() const { return static_cast<int>(tokens_.size()); }
    int eot_token() const { return vocab_size() - 1; }
    int num_merges() const { return vocab_size() - 257; }
    const std::string& token_bytes(int id) const;   // fails outside [0, vocab_size)
    const std::vector<std::string>& tokens() const { return tokens_; }
    // (left id, right id) of the merge that made id 256 + k; empty if unknown (.tiktoken).
    const std::vector<std::pair<int, int>>& merges() const { return merges_; }
    // FNV-1a over the token table: equal for equal vocabularies.
    uint64_t fingerprint() const;

    // Ordinary text to ids (no special tokens). Allocates a cache per call; for bulk
    // encoding keep a BpeEncoder.
    std::vector<int> encode(std::string_view text) const;
    std::string decode(const std::vector<int>& ids) const;

    // Ids of one pre-token (its bytes), appended to *out. Step 2 above; no cache.
    void encode_piece(std::string_view piece, std::vector<uint32_t>* out) const;

  private:
    friend class BpeEncoder;
    Bpe(std::vector<std::string> tokens, std::vector<std::pair<int, int>> merges, const std::string& origin);
    std::vector<std::string> tokens_;              // (vocab,): id -> bytes; last = "<|endoftext|>"
    std::vector<std::pair<int, int>> merges_;      // (vocab - 257,) or empty
    std::unordered_map<std::string, int> id_of_;   // bytes -> id, every token but <|endoftext|>
    std::unordered_map<uint64_t, int> pair_id_;    // (left << 32 | right) -> id of left+right
    std::array<int, 256> byte_id_{};               // byte -> its id
};

// Bulk encoder over one Bpe: pre-tokeniser state and a pre-token -> ids cache, so a repeated
// word costs one hash lookup. One per thread (not thread-safe); the Bpe must outlive it.
class BpeEncoder {
  public:
    explicit BpeEncoder(const Bpe& bpe);
    void encode(std::string_view text, std::vector<uint32_t>* out);   // appends the ids of text

  private:
    const Bpe& bpe_;
    Pretokenizer pretokenizer_;
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> cache_;   // piece -> (offset, count) in ids_
    std::vector<uint32_t> ids_;
};

}   // namespace train_gpt
