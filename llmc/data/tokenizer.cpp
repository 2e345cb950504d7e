// tokenizer.cpp — see tokenizer.h. Header ints are little-endian (host order, as in shard.cpp).
#include "data/tokenizer.h"

#include "data/bpe.h"
#include "utils.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace train_gpt {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tokenizer I/O assumes a little-endian host");

Tokenizer::Tokenizer(std::vector<std::string> tokens, int eot_token, const std::string& origin)
    : tokens_(std::move(tokens)), eot_token_(eot_token), origin_(origin) {
    if (tokens_.empty()) fail("%s: tokenizer has an empty vocabulary", origin.c_str());
    if (eot_token_ < 0 || eot_token_ >= vocab_size()) {
        fail("%s: eot token %d outside the vocabulary [0, %d)", origin.c_str(), eot_token_, vocab_size());
    }
    for (size_t id = 0; id < tokens_.size(); id++) {
        if (tokens_[id].empty() || tokens_[id].size() > 255) {
            fail("%s: token %zu has %zu bytes (must be 1..255)", origin.c_str(), id, tokens_[id].size());
        }
    }
}

Tokenizer Tokenizer::byte_level() {
    std::vector<std::string> tokens(257);   // (257,)
    for (int b = 0; b < 256; b++)
        tokens[b] = std::string(1, static_cast<char>(b));
    tokens[256] = kEndOfText;
    return Tokenizer(std::move(tokens), 256, "byte-level tokenizer");
}

Tokenizer Tokenizer::load(const std::string& path) {
    // The header first: the file is checked to be a tokenizer, and its vocab size to fit the
    // file, before anything is allocated from it. Then the table, whole: GPT-2's is ~0.5 MB.
    FILE* f = open_file(path, "rb");
    std::vector<unsigned char> bytes;             // (file size,)
    uint32_t header[kTokenizerHeaderInts];        // (256,)
    const size_t header_bytes = sizeof(header);   // 1024
    try {
        struct stat st;
        if (::fstat(fileno(f), &st) != 0) fail("%s: cannot stat: %s", path.c_str(), std::strerror(errno));
        const size_t file_bytes = static_cast<size_t>(st.st_size);
        if (file_bytes < header_bytes) {
            fail("%s: incomplete tokenizer header (file has %zu bytes, the header alone is %zu)", path.c_str(),
                 file_bytes, header_bytes);
        }
        read_exact(header, sizeof(uint32_t), kTokenizerHeaderInts, f, path);
        if (header[0] != kTokenizerMagic) {
            fail("%s: bad magic number %u in tokenizer header (expected %u); not a tokenizer file", path.c_str(),
                 header[0], kTokenizerMagic);
        }
        if (header[1] != 1 && header[1] != 2) {
            fail("%s: unsupported tokenizer version %u (expected 1 or 2)", path.c_str(), header[1]);
        }
        // Every token takes at least 2 bytes (its length, then at least one byte).
        const size_t max_vocab = std::min<size_t>((file_bytes - header_bytes) / 2, INT32_MAX);
        if (header[2] < 1 || header[2] > max_vocab) {
            fail(
                "%s: bad vocab size %u in tokenizer header: the file's %zu bytes after the header hold at most "
                "%zu tokens",
                path.c_str(), header[2], file_bytes - header_bytes, max_vocab);
        }
        // ... and the file no longer than that many tokens take (a length byte and at most 255 bytes
        // each): a garbage tail (a bad transfer, two files joined) is refused before it is read
        const size_t most_bytes = header_bytes + static_cast<size_t>(header[2]) * 256;
        if (file_bytes > most_bytes) {
            fail("%s: %zu bytes, but the %u tokens its header counts take at most %zu: a damaged file", path.c_str(),
                 file_bytes, header[2], most_bytes);
        }
        bytes.resize(file_bytes);
        std::memcpy(bytes.data(), header, header_bytes);
        read_exact(bytes.data() + header_bytes, 1, file_bytes - header_bytes, f, path);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);

    const uint32_t version = header[1], vocab_size = header[2];
    // Version 1 predates the eot field; llm.c fixed it to GPT-2's 50256.
    const uint32_t eot = version == 1 ? 50256 : header[3];
    if (eot >= vocab_size) {
        fail("%s: eot token %u outside the vocabulary of %u", path.c_str(), eot, vocab_size);
    }

    std::vector<std::string> tokens(vocab_size);   // (vocab_size,)
    size_t pos = header_bytes;
    for (uint32_t id = 0; id < vocab_size; id++) {
        if (pos >= bytes.size()) {
            fail("%s: truncated tokenizer: file ends before token %u of %u", path.c_str(), id, vocab_size);
        }
        const size_t length = bytes[pos++];
        if (length == 0) fail("%s: token %u has length 0", path.c_str(), id);
        if (pos + length > bytes.size()) {
            fail("%s: truncated tokenizer: token %u needs %zu bytes, file has %zu left", path.c_str(), id, length,
                 bytes.size() - pos);
        }
        tokens[id].assign(reinterpret_cast<const char*>(bytes.data() + pos), length);
        pos += length;
    }
    if (pos != bytes.size()) {
        fail("%s: %zu trailing bytes after the last token", path.c_str(), bytes.size() - pos);
    }
    Tokenizer tokenizer(std::move(tokens), static_cast<int>(eot), path);

    // BPE merges beside it: DIR/encoder.json + DIR/vocab.bpe, or DIR/vocab.json + DIR/merges.txt.
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    std::string encoder = dir + "/encoder.json", merges = dir + "/vocab.bpe";
    if (!file_exists(encoder) || !file_exists(merges)) encoder = dir + "/vocab.json", merges = dir + "/merges.txt";
    if (file_exists(encoder) && file_exists(merges)) {
        auto bpe = std::make_shared<const Bpe>(Bpe::load_gpt2(encoder, merges));
        bool same = bpe->vocab_size() == tokenizer.vocab_size() && bpe->eot_token() == tokenizer.eot_token();
        for (int id = 0; same && id < tokenizer.vocab_size(); id++)
            same = bpe->token_bytes(id) == tokenizer.tokens_[id];
        if (!same) {
            fail(
                "%s: its table (vocab %d) differs from the BPE vocabulary beside it in %s and %s (vocab %d); "
                "re-run prepare_text or remove the stale files",
                path.c_str(), tokenizer.vocab_size(), encoder.c_str(), merges.c_str(), bpe->vocab_size());
        }
        tokenizer.bpe_ = std::move(bpe);
    }
    return tokenizer;
}

Tokenizer Tokenizer::from_bpe(std::shared_ptr<const Bpe> bpe, const std::string& origin) {
    Tokenizer tokenizer(bpe->tokens(), bpe->eot_token(), origin);
    tokenizer.bpe_ = std::move(bpe);
    return tokenizer;
}

void Tokenizer::save(const std::string& path) const {
    uint32_t header[kTokenizerHeaderInts] = {};   // (256,)
    header[0] = kTokenizerMagic;
    header[1] = kTokenizerVersion;
    header[2] = static_cast<uint32_t>(tokens_.size());
    header[3] = static_cast<uint32_t>(eot_token_);
    std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
    for (const std::string& token : tokens_) {
        bytes.push_back(static_cast<char>(token.size()));   // 1..255, checked at construction
        bytes += token;
    }
    write_file_atomic(path, bytes.data(), bytes.size());
}

const std::string& Tokenizer::token_bytes(int id) const {
    if (id < 0 || id >= vocab_size()) {
        fail("token id %d is outside the vocabulary [0, %d)", id, vocab_size());
    }
    return tokens_[static_cast<size_t>(id)];
}

uint64_t Tokenizer::fingerprint() const {
    uint64_t h = 14695981039346656037ull;   // FNV-1a offset basis
    auto add = [&h](unsigned char byte) { h = (h ^ byte) * 1099511628211ull; };
    auto add_u32 = [&add](uint32_t x) {
        for (int i = 0; i < 4; i++)
            add(static_cast<unsigned char>(x >> (8 * i)));
    };
    add_u32(static_cast<uint32_t>(tokens_.size()));
    add_u32(static_cast<uint32_t>(eot_token_));
    for (const std::string& token : tokens_) {
        add(static_cast<unsigned char>(token.size()));
        for (char c : token)
            add(static_cast<unsigned char>(c));
    }
    return h;
}

bool Tokenizer::is_byte_level() const {
    if (vocab_size() != 257 || eot_token_ != 256 || tokens_[256] != kEndOfText) return false;
    for (int b = 0; b < 256; b++) {
        if (tokens_[b].size() != 1 || static_cast<unsigned char>(tokens_[b][0]) != b) return false;
    }
    return true;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
    std::string text;
    for (int id : ids)
        text += token_bytes(id);
    return text;
}

std::vector<int> Tokenizer::encode_bytes(const std::string& text) const {
    if (!is_byte_level()) {
        fail("encode_bytes needs the byte-level tokenizer (vocab 257); this one has vocab %d", vocab_size());
    }
    std::vector<int> ids(text.size());   // (len(text),)
    for (size_t i = 0; i < text.size(); i++)
        ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
    if (bpe_) return bpe_->encode(text);
    if (is_byte_level()) return encode_bytes(text);
    fail(
        "%s: cannot encode text: this vocabulary (%d tokens) is not byte-level and no BPE merges were "
        "loaded (encoder.json + vocab.bpe beside it)",
        origin_.c_str(), vocab_size());
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid or truncated.
// Rejects overlong forms, surrogates (U+D800..DFFF) and code points above U+10FFFF.
static size_t utf8_sequence_length(const std::string& s, size_t i, uint32_t* code_point) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t length;
    uint32_t cp, min_cp;
    if (c < 0x80) {
        *code_point = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        length = 2;
        cp = c & 0x1F;
        min_cp = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        length = 3;
        cp = c & 0x0F;
        min_cp = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        length = 4;
        cp = c & 0x07;
        min_cp = 0x10000;
    } else
        return 0;   // a continuation byte or 0xF8..0xFF where a sequence should start
    if (i + length > s.size()) return 0;
    for (size_t k = 1; k < length; k++) {
        const unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    *code_point = cp;
    return length;
}

std::string printable(const std::string& bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0;
    while (i < bytes.size()) {
        uint32_t cp = 0;
        const size_t length = utf8_sequence_length(bytes, i, &cp);
        if (length == 0) {
            out += "\xEF\xBF\xBD";   // U+FFFD for this one byte; resynchronise at the next
            i += 1;
        } else if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F) {
            out += format("\\x%02x", cp);
            i += 1;
        } else if (cp >= 0x80 && cp <= 0x9F) {
            out += format("\\u%04x", cp);
            i += length;
        } else {
            out.append(bytes, i, length);
            i += length;
        }
    }
    return out;
}

std::string printable_text(const std::string& bytes) {
    std::string lines;
    lines.reserve(bytes.size());
    for (size_t i = 0; i < bytes.size(); i++) {
        const char c = bytes[i];
        if (c == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') continue;   // \r\n: the \n follows
        lines += c == '\r' || c == '\f' || c == '\v' ? '\n' : c;
    }
    return printable(lines);
}

}   // namespace train_gpt
