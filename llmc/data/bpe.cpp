// bpe.cpp — see bpe.h. Sections: the byte alphabet, the pre-tokeniser (PCRE2), the Bpe tables
// and the merge loop of one pre-token, the bulk encoder, and the vocabulary files. (Training a
// BPE is the data tool's: dev/data/bpe_train.cpp.)
#include "data/bpe.h"

#include "utils.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <queue>

namespace train_gpt {

// ---------------------------------------------------------------------------------------------
// GPT-2's byte-to-unicode alphabet

namespace {

bool gpt2_printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct ByteAlphabet {
    std::array<uint32_t, 256> code_point{};   // byte -> the character standing for it
    std::array<int, 256> rank{};              // byte -> its id in GPT-2's vocabulary
    std::array<int, 324> byte_of{};           // code point (< 324) -> byte, or -1
    ByteAlphabet() {
        byte_of.fill(-1);
        int next_rank = 0, n = 0;
        for (int b = 0; b < 256; b++) {
            if (gpt2_printable(b)) {
                code_point[b] = b;
                rank[b] = next_rank++;
            }
        }
        for (int b = 0; b < 256; b++) {
            if (!gpt2_printable(b)) {
                code_point[b] = 256 + n++;
                rank[b] = next_rank++;
            }
        }
        for (int b = 0; b < 256; b++)
            byte_of[code_point[b]] = b;
    }
};

const ByteAlphabet& alphabet() {
    static const ByteAlphabet a;
    return a;
}

void append_utf8(uint32_t cp, std::string* out) {   // cp < 0x800 here
    if (cp < 0x80) {
        out->push_back(static_cast<char>(cp));
    } else {
        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}   // namespace

std::string gpt2_byte_char(uint8_t byte) {
    std::string s;
    append_utf8(alphabet().code_point[byte], &s);
    return s;
}

int gpt2_byte_rank(uint8_t byte) { return alphabet().rank[byte]; }

bool gpt2_decode_chars(std::string_view chars, std::string* bytes) {
    bytes->clear();
    const ByteAlphabet& a = alphabet();
    for (size_t i = 0; i < chars.size();) {
        const unsigned char c = static_cast<unsigned char>(chars[i]);
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < chars.size() &&
                   (static_cast<unsigned char>(chars[i + 1]) & 0xC0) == 0x80) {
            cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(chars[i + 1]) & 0x3F);
            i += 2;
        } else {
            return false;   // 3- and 4-byte characters are all outside the alphabet
        }
        if (cp >= a.byte_of.size() || a.byte_of[cp] < 0 || (c >= 0x80 && cp < 0x80)) return false;
        bytes->push_back(static_cast<char>(a.byte_of[cp]));
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokeniser

namespace {

// GPT-2's pattern with \s spelled out as Unicode White_Space, which is what Python's and Rust's
// \s mean; PCRE2's own \s (with PCRE2_UCP) differs at U+180E.
#define WS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr const char* kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";
#undef WS

struct CompiledPattern {
    pcre2_code* code = nullptr;
    bool jit = false;
    CompiledPattern() {
        int error = 0;
        PCRE2_SIZE offset = 0;
        code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
        if (!code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof(message));
            fail("PCRE2 cannot compile GPT-2's pattern at offset %zu: %s", static_cast<size_t>(offset),
                 reinterpret_cast<const char*>(message));
        }
        jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;   // else the interpreter (slower)
    }
};

const CompiledPattern& pattern() {
    static const CompiledPattern p;   // compiled once; pcre2_code is safe to share between threads
    return p;
}

}   // namespace

struct Pretokenizer::State {
    pcre2_match_data* match = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    ~State() {
        if (match) pcre2_match_data_free(match);
        if (context) pcre2_match_context_free(context);
        if (stack) pcre2_jit_stack_free(stack);
    }
};

Pretokenizer::Pretokenizer() : state_(std::make_unique<State>()) {
    const CompiledPattern& p = pattern();
    state_->match = pcre2_match_data_create_from_pattern(p.code, nullptr);
    state_->context = pcre2_match_context_create(nullptr);
    state_->stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (!state_->match || !state_->context || !state_->stack) fail("PCRE2: out of memory");
    pcre2_jit_stack_assign(state_->context, nullptr, state_->stack);
}

Pretokenizer::~Pretokenizer() = default;

bool Pretokenizer::next_match(std::string_view text, size_t offset, size_t* begin, size_t* end) {
    const CompiledPattern& p = pattern();
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const int rc = p.jit ? pcre2_jit_match(p.code, subject, text.size(), offset, 0, state_->match, state_->context)
                         : pcre2_match(p.code, subject, text.size(), offset, 0, state_->match, state_->context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        fail("PCRE2 match failed at byte %zu: %s", offset, reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state_->match);
    *begin = ovector[0];
    *end = ovector[1];
    return *end > *begin;   // every alternative consumes a character
}

static bool is_ascii_non_space(char ch) {
    const unsigned char c = static_cast<unsigned char>(ch);
    return c < 0x80 && c != ' ' && !(c >= '\t' && c <= '\r');
}

bool is_pretokenizer_cut(std::string_view text, size_t i) {
    // No alternative of the pattern looks back, and none spans a lone '\n' between two
    // non-spaces: the '\n' is a pre-token of its own whether or not text follows it.
    return i >= 1 && i < text.size() && text[i - 1] == '\n' && is_ascii_non_space(text[i]) &&
           (i == 1 || is_ascii_non_space(text[i - 2]));
}

std::vector<size_t> pretokenizer_cuts(std::string_view text, size_t target) {
    std::vector<size_t> cuts;
    if (target == 0) target = 1;
    for (size_t pos = target; pos < text.size();) {
        size_t i = pos;
        while (i < text.size() && !is_pretokenizer_cut(text, i))
            i++;
        if (i >= text.size()) break;
        cuts.push_back(i);
        pos = i + target;
    }
    return cuts;
}

// ---------------------------------------------------------------------------------------------
// The tables and the merge loop

static uint64_t pair_key(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

Bpe::Bpe(std::vector<std::string> tokens, std::vector<std::pair<int, int>> merges, const std::string& origin)
    : tokens_(std::move(tokens)), merges_(std::move(merges)) {
    const int n = vocab_size();
    if (n < 257) fail("%s: a byte-level BPE vocabulary needs at least 257 tokens, has %d", origin.c_str(), n);
    if (tokens_.back() != kEndOfText) fail("%s: the last id %d must be %s", origin.c_str(), n - 1, kEndOfText);
    if (!merges_.empty() && static_cast<int>(merges_.size()) != n - 257) {
        fail("%s: %zu merges for %d tokens (expected %d)", origin.c_str(), merges_.size(), n, n - 257);
    }
    id_of_.reserve(2 * n);
    for (int id = 0; id < n - 1; id++) {
        const std::string& t = tokens_[id];
        if (t.empty()) fail("%s: token %d is empty", origin.c_str(), id);
        // tokenizer.bin stores a token's length in one byte; the bound also keeps the pair table
        // below linear in the vocabulary's bytes (each split of each token is looked up)
        if (t.size() > 255) {
            fail("%s: token %d has %zu bytes; a token has at most 255", origin.c_str(), id, t.size());
        }
        if (!id_of_.emplace(t, id).second) {
            fail("%s: tokens %d and %d have the same bytes", origin.c_str(), id_of_[t], id);
        }
    }
    for (int b = 0; b < 256; b++) {
        auto it = id_of_.find(std::string(1, static_cast<char>(b)));
        if (it == id_of_.end()) fail("%s: no token for the single byte 0x%02x", origin.c_str(), b);
        byte_id_[b] = it->second;
    }
    for (size_t k = 0; k < merges_.size(); k++) {
        const auto [l, r] = merges_[k];
        if (l < 0 || r < 0 || l >= n - 1 || r >= n - 1 || tokens_[l] + tokens_[r] != tokens_[256 + k]) {
            fail("%s: merge %zu (%d, %d) does not make token %zu", origin.c_str(), k, l, r, 256 + k);
        }
    }
    // Every split of every token into two tokens: the table the merge loop looks pairs up in.
    // Looking up (left id, right id) is the same as looking up the bytes left+right (tiktoken).
    for (int id = 0; id < n - 1; id++) {
        const std::string& t = tokens_[id];
        for (size_t k = 1; k < t.size(); k++) {
            auto l = id_of_.find(t.substr(0, k));
            if (l == id_of_.end()) continue;
            auto r = id_of_.find(t.substr(k));
            if (r == id_of_.end()) continue;
            pair_id_.emplace(pair_key(l->second, r->second), id);
        }
    }
}

Bpe Bpe::from_tables(std::vector<std::string> tokens, std::vector<std::pair<int, int>> merges,
                     const std::string& origin) {
    return Bpe(std::move(tokens), std::move(merges), origin);
}

const std::string& Bpe::token_bytes(int id) const {
    if (id < 0 || id >= vocab_size()) fail("token id %d is outside the vocabulary [0, %d)", id, vocab_size());
    return tokens_[static_cast<size_t>(id)];
}

uint64_t Bpe::fingerprint() const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
    for (const std::string& t : tokens_) {
        mix(static_cast<unsigned char>(t.size()));
        for (char c : t)
            mix(static_cast<unsigned char>(c));
    }
    return h;
}

void Bpe::encode_piece(std::string_view piece, std::vector<uint32_t>* out) const {
    const size_t n = piece.size();
    if (n == 0) return;
    if (n == 1) {
        out->push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
        return;
    }
    if (auto it = id_of_.find(std::string(piece)); it != id_of_.end()) {
        out->push_back(it->second);
        return;
    }
    auto rank_of = [&](uint32_t l, uint32_t r) -> uint32_t {   // id of l+r, or "never"
        auto it = pair_id_.find(pair_key(l, r));
        return it == pair_id_.end() ? UINT32_MAX : static_cast<uint32_t>(it->second);
    };
    if (n <= 64) {
        // tiktoken's loop: merge the lowest-ranked adjacent pair (leftmost on ties). O(n^2).
        uint32_t ids[64], ranks[64];   // ranks[i]: rank of ids[i] + ids[i+1]
        size_t m = n;
        for (size_t i = 0; i < n; i++)
            ids[i] = byte_id_[static_cast<unsigned char>(piece[i])];
        for (size_t i = 0; i + 1 < m; i++)
            ranks[i] = rank_of(ids[i], ids[i + 1]);
        while (m > 1) {
            size_t best = 0;
            for (size_t i = 1; i + 1 < m; i++) {
                if (ranks[i] < ranks[best]) best = i;
            }
            if (ranks[best] == UINT32_MAX) break;
            ids[best] = ranks[best];   // the merged token's id is its rank
            for (size_t i = best + 1; i + 1 < m; i++)
                ids[i] = ids[i + 1];
            for (size_t i = best + 1; i + 2 < m; i++)
                ranks[i] = ranks[i + 1];
            m--;
            if (best > 0) ranks[best - 1] = rank_of(ids[best - 1], ids[best]);
            if (best + 1 < m) ranks[best] = rank_of(ids[best], ids[best + 1]);
        }
        out->insert(out->end(), ids, ids + m);
        return;
    }
    // Long pieces (a run of digits or symbols): the same merges in O(n log n), with a linked
    // list of parts and a heap of (rank, position); an entry is stale if the pair changed.
    std::vector<uint32_t> id(n);             // (n,): id of the part starting at byte i
    std::vector<int64_t> next(n), prev(n);   // (n,): neighbouring part starts, -1 / n at the ends
    for (size_t i = 0; i < n; i++) {
        id[i] = byte_id_[static_cast<unsigned char>(piece[i])];
        next[i] = static_cast<int64_t>(i) + 1;
        prev[i] = static_cast<int64_t>(i) - 1;
    }
    using Entry = std::pair<uint32_t, int64_t>;   // (rank, start of the left part)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    for (size_t i = 0; i + 1 < n; i++) {
        const uint32_t r = rank_of(id[i], id[i + 1]);
        if (r != UINT32_MAX) heap.push({r, static_cast<int64_t>(i)});
    }
    std::vector<char> alive(n, 1);
    const int64_t end = static_cast<int64_t>(n);
    while (!heap.empty()) {
        const auto [r, i] = heap.top();
        heap.pop();
        if (!alive[i] || next[i] >= end || rank_of(id[i], id[next[i]]) != r) continue;   // stale
        const int64_t j = next[i];
        id[i] = r;
        alive[j] = 0;
        next[i] = next[j];
        if (next[j] < end) prev[next[j]] = i;
        if (prev[i] >= 0) {
            const uint32_t rl = rank_of(id[prev[i]], id[i]);
            if (rl != UINT32_MAX) heap.push({rl, prev[i]});
        }
        if (next[i] < end) {
            const uint32_t rr = rank_of(id[i], id[next[i]]);
            if (rr != UINT32_MAX) heap.push({rr, i});
        }
    }
    for (int64_t i = 0; i < end; i = next[i])
        out->push_back(id[i]);
}

std::vector<int> Bpe::encode(std::string_view text) const {
    BpeEncoder encoder(*this);
    std::vector<uint32_t> ids;
    encoder.encode(text, &ids);
    return std::vector<int>(ids.begin(), ids.end());
}

std::string Bpe::decode(const std::vector<int>& ids) const {
    std::string text;
    for (int id : ids)
        text += token_bytes(id);
    return text;
}

// ---------------------------------------------------------------------------------------------
// Bulk encoder

BpeEncoder::BpeEncoder(const Bpe& bpe) : bpe_(bpe) {}

void BpeEncoder::encode(std::string_view text, std::vector<uint32_t>* out) {
    constexpr size_t kMaxCachedPiece = 64, kMaxCacheIds = 1 << 24;   // bound the cache's memory
    pretokenizer_.split(text, [&](size_t begin, size_t end) {
        const std::string_view piece = text.substr(begin, end - begin);
        if (piece.size() == 1) {
            out->push_back(static_cast<uint32_t>(bpe_.byte_id_[static_cast<unsigned char>(piece[0])]));
            return;
        }
        if (piece.size() > kMaxCachedPiece) {
            bpe_.encode_piece(piece, out);
            return;
        }
        std::string key(piece);
        if (auto it = cache_.find(key); it != cache_.end()) {
            out->insert(out->end(), ids_.begin() + it->second.first,
                        ids_.begin() + it->second.first + it->second.second);
            return;
        }
        const size_t before = out->size();
        bpe_.encode_piece(piece, out);
        if (ids_.size() > kMaxCacheIds) {
            cache_.clear();
            ids_.clear();
        }
        cache_.emplace(std::move(key),
                       std::make_pair(static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(out->size() - before)));
        ids_.insert(ids_.end(), out->begin() + before, out->end());
    });
}

// ---------------------------------------------------------------------------------------------
// Vocabulary files

namespace {

std::string to_chars(const std::string& bytes) {
    std::string s;
    for (char c : bytes)
        s += gpt2_byte_char(static_cast<uint8_t>(c));
    return s;
}

// encoder.json, vocab.bpe and a .tiktoken file are read whole: GPT-2's are 1 MB and 456 kB, and a
// vocabulary of a million tokens fits in tens of MB; a larger file is refused before it is read
constexpr size_t kMaxVocabFileBytes = size_t(256) << 20;

// A token or line an error quotes, cut to 60 bytes: a line of megabytes was quoted whole (round 42).
std::string cut(const std::string& text) { return cut_text(text, 60); }

}   // namespace

Bpe Bpe::load_gpt2(const std::string& encoder_json, const std::string& vocab_bpe) {
    nlohmann::json encoder;
    try {
        encoder = nlohmann::json::parse(read_json_file_text(encoder_json, kMaxVocabFileBytes, "an encoder.json"));
    } catch (const nlohmann::json::exception& e) {
        fail("%s: invalid JSON: %s", encoder_json.c_str(), cut_text(e.what()).c_str());
    }
    if (!encoder.is_object()) fail("%s: expected a JSON object of token -> id", encoder_json.c_str());
    const size_t n = encoder.size();
    if (n < 257 || n > static_cast<size_t>(INT32_MAX))
        fail("%s: %zu tokens (need at least 257)", encoder_json.c_str(), n);
    std::vector<std::string> tokens(n);
    std::vector<char> have(n, 0);
    for (auto it = encoder.begin(); it != encoder.end(); ++it) {
        if (!it.value().is_number_integer()) {
            fail("%s: token \"%s\" has a non-integer id", encoder_json.c_str(), cut(it.key()).c_str());
        }
        // read in its own type: 18446744073709551615 is not "-1" (round 42)
        const bool in_range = it.value().is_number_unsigned() ? it.value().get<uint64_t>() < n
                                                              : it.value().get<int64_t>() >= 0 &&
                                                                    it.value().get<int64_t>() < static_cast<int64_t>(n);
        if (!in_range) {
            fail("%s: token \"%s\" has id %s outside [0, %zu): ids must be 0..N-1", encoder_json.c_str(),
                 cut(it.key()).c_str(), it.value().dump().c_str(), n);
        }
        const int64_t id = it.value().get<int64_t>();
        if (have[id]) fail("%s: id %lld is given twice", encoder_json.c_str(), (long long)id);
        have[id] = 1;
        if (it.key() == kEndOfText) {
            tokens[id] = kEndOfText;
            if (id != static_cast<int64_t>(n) - 1) {
                fail("%s: %s has id %lld; it must be the last id, %zu", encoder_json.c_str(), kEndOfText, (long long)id,
                     n - 1);
            }
        } else if (!gpt2_decode_chars(it.key(), &tokens[id])) {
            fail("%s: token \"%s\" has a character outside GPT-2's byte alphabet", encoder_json.c_str(),
                 cut(it.key()).c_str());
        }
    }
    if (tokens[n - 1] != kEndOfText) fail("%s: no %s entry", encoder_json.c_str(), kEndOfText);

    // vocab.bpe: the merge on line k makes id 256 + k (tiktoken checks the same).
    const std::string text = read_file_text(vocab_bpe, kMaxVocabFileBytes, "a vocab.bpe");
    std::unordered_map<std::string, int> id_of;
    for (size_t id = 0; id + 1 < n; id++)
        id_of.emplace(tokens[id], static_cast<int>(id));
    std::vector<std::pair<int, int>> merges;
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
        const size_t space = line.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
            line.find(' ', space + 1) != std::string::npos) {
            fail("%s:%zu: expected \"left right\", got \"%s\"", vocab_bpe.c_str(), line_no, cut(line).c_str());
        }
        std::string left, right;
        if (!gpt2_decode_chars(std::string_view(line).substr(0, space), &left) ||
            !gpt2_decode_chars(std::string_view(line).substr(space + 1), &right)) {
            fail("%s:%zu: a character outside GPT-2's byte alphabet", vocab_bpe.c_str(), line_no);
        }
        auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
        if (l == id_of.end() || r == id_of.end() || m == id_of.end()) {
            fail("%s:%zu: merge \"%s\" uses or makes a token missing from %s", vocab_bpe.c_str(), line_no,
                 cut(line).c_str(), encoder_json.c_str());
        }
        const size_t expected = 256 + merges.size();
        if (static_cast<size_t>(m->second) != expected) {
            fail("%s:%zu: merge \"%s\" makes id %d in %s; merge %zu must make id %zu", vocab_bpe.c_str(), line_no,
                 cut(line).c_str(), m->second, encoder_json.c_str(), merges.size(), expected);
        }
        merges.push_back({l->second, r->second});
    }
    if (merges.size() != n - 257) {
        fail("%s: %zu merges, but %s has %zu tokens (expected %zu merges)", vocab_bpe.c_str(), merges.size(),
             encoder_json.c_str(), n, n - 257);
    }
    return Bpe(std::move(tokens), std::move(merges), encoder_json);
}

Bpe Bpe::load_tiktoken(const std::string& path) {
    static const auto base64_value = [] {
        std::array<int, 256> v;
        v.fill(-1);
        const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; i++)
            v[static_cast<unsigned char>(alphabet[i])] = i;
        return v;
    }();
    const std::string text = read_file_text(path, kMaxVocabFileBytes, "a .tiktoken file");
    // Ranks are 0..N-1, one per line, so a rank is below the file's line count: a rank beyond it
    // is refused before the table grows to hold it.
    const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    std::vector<std::string> tokens;
    std::vector<char> have;
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string_view line(text.data() + pos, eol - pos);
        pos = eol + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        const size_t space = line.find(' ');
        auto bad = [&](const char* what) {
            fail("%s:%zu: %s (expected \"base64 rank\")", path.c_str(), line_no, what);
        };
        if (space == std::string_view::npos) bad("no space");
        const std::string_view b64 = line.substr(0, space), rank_text = line.substr(space + 1);
        std::string bytes;
        uint32_t acc = 0;
        int bits = 0;
        size_t k = 0;
        for (; k < b64.size() && b64[k] != '='; k++) {
            const int v = base64_value[static_cast<unsigned char>(b64[k])];
            if (v < 0) bad("invalid base64");
            acc = (acc << 6) | static_cast<uint32_t>(v);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                bytes.push_back(static_cast<char>((acc >> bits) & 0xFF));
            }
        }
        for (; k < b64.size(); k++) {
            if (b64[k] != '=') bad("invalid base64");
        }
        if (bytes.empty()) bad("empty token");
        if (rank_text.empty() || rank_text.size() > 9 ||
            !std::all_of(rank_text.begin(), rank_text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            bad("invalid rank");
        }
        const size_t rank = std::stoul(std::string(rank_text));
        if (rank >= lines) {
            fail("%s:%zu: rank %zu, but the file has only %zu lines (ranks must be 0..N-1, one per line)", path.c_str(),
                 line_no, rank, lines);
        }
        if (rank >= tokens.size()) {
            tokens.resize(rank + 1);
            have.resize(rank + 1, 0);
        }
        if (have[rank]) fail("%s:%zu: rank %zu is given twice", path.c_str(), line_no, rank);
        have[rank] = 1;
        tokens[rank] = std::move(bytes);
    }
    for (size_t r = 0; r < tokens.size(); r++) {
        if (!have[r]) fail("%s: rank %zu is missing (ranks must be 0..N-1)", path.c_str(), r);
    }
    tokens.push_back(kEndOfText);
    return Bpe(std::move(tokens), {}, path);
}

Bpe Bpe::load(const std::string& dir_or_file) {
    const std::string& p = dir_or_file;
    if (p.size() >= 9 && p.compare(p.size() - 9, 9, ".tiktoken") == 0) return load_tiktoken(p);
    const std::string encoder = p + "/encoder.json", vocab = p + "/vocab.bpe";
    if (!file_exists(encoder) || !file_exists(vocab)) {   // either one not regular: load_gpt2 names it
        fail("%s: expected a directory with encoder.json and vocab.bpe, or a .tiktoken file", p.c_str());
    }
    return load_gpt2(encoder, vocab);
}

void Bpe::save_gpt2(const std::string& dir) const {
    if (merges_.empty() && num_merges() > 0) {
        fail("cannot write vocab.bpe: this vocabulary has no merge list (loaded from a .tiktoken file)");
    }
    std::string encoder = "{";
    for (int id = 0; id < vocab_size(); id++) {
        const std::string key = id == eot_token() ? std::string(kEndOfText) : to_chars(tokens_[id]);
        encoder += nlohmann::json(key).dump() + ": " + std::to_string(id) + (id + 1 < vocab_size() ? ", " : "");
    }
    encoder += "}";
    std::string vocab = "#version: 0.2\n";
    for (const auto& [l, r] : merges_)
        vocab += to_chars(tokens_[l]) + " " + to_chars(tokens_[r]) + "\n";
    make_dirs(dir);
    write_file_atomic(dir + "/encoder.json", encoder.data(), encoder.size());
    write_file_atomic(dir + "/vocab.bpe", vocab.data(), vocab.size());
}

void Bpe::save_tiktoken(const std::string& path) const {
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (int id = 0; id < eot_token(); id++) {
        const std::string& t = tokens_[id];
        for (size_t i = 0; i < t.size(); i += 3) {
            uint32_t v = static_cast<unsigned char>(t[i]) << 16;
            if (i + 1 < t.size()) v |= static_cast<unsigned char>(t[i + 1]) << 8;
            if (i + 2 < t.size()) v |= static_cast<unsigned char>(t[i + 2]);
            out += alphabet[(v >> 18) & 63];
            out += alphabet[(v >> 12) & 63];
            out += i + 1 < t.size() ? alphabet[(v >> 6) & 63] : '=';
            out += i + 2 < t.size() ? alphabet[v & 63] : '=';
        }
        out += " " + std::to_string(id) + "\n";
    }
    write_file_atomic(path, out.data(), out.size());
}

}   // namespace train_gpt
