// shard.cpp — see shard.h. Host byte order is assumed little-endian (checked at compile time),
// so header ints and tokens are read and written with plain memcpy.
#include "data/shard.h"

#include "utils.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <filesystem>
#include <glob.h>
#include <sys/stat.h>

namespace train_gpt {

// The file format is little-endian; reading it with memcpy is only correct on such hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shard I/O assumes a little-endian host");

int shard_version_for_token_bytes(int token_bytes) {
    if (token_bytes == 2) return 1;
    if (token_bytes == 4) return 2;
    fail("shard token width must be 2 or 4 bytes, got %d", token_bytes);
}

int token_bytes_for_shard_version(int version, const std::string& path) {
    if (version == 1) return 2;
    if (version == 2) return 4;
    fail("%s: unsupported shard version %d (expected 1 = uint16 tokens or 2 = uint32 tokens)", path.c_str(), version);
}

int token_bytes_for_vocab(int64_t vocab_size) {
    if (vocab_size < 1) fail("vocab size must be positive, got %lld", (long long)vocab_size);
    return vocab_size <= 65536 ? 2 : 4;   // ids 0 .. 65535 fit in uint16
}

ShardInfo read_shard_header(const std::string& path) {
    FILE* f = open_file(path, "rb");
    struct stat st;
    if (::fstat(fileno(f), &st) != 0) {
        int err = errno;
        std::fclose(f);
        fail("%s: cannot stat: %s", path.c_str(), std::strerror(err));
    }
    const int64_t file_bytes = st.st_size;
    int32_t header[kShardHeaderInts];   // (256,)
    const size_t got = std::fread(header, sizeof(int32_t), kShardHeaderInts, f);
    std::fclose(f);
    if (got != kShardHeaderInts) {
        fail("%s: incomplete shard header (file has %lld bytes, the header alone is %lld)", path.c_str(),
             (long long)file_bytes, (long long)kShardHeaderBytes);
    }
    if (header[0] != kShardMagic) {
        fail("%s: bad magic number %d in shard header (expected %d); not a token shard", path.c_str(), header[0],
             kShardMagic);
    }
    ShardInfo info;
    info.path = path;
    info.token_bytes = token_bytes_for_shard_version(header[1], path);
    info.num_tokens = header[2];
    if (info.num_tokens < 0) {
        fail("%s: negative token count %lld in shard header", path.c_str(), (long long)info.num_tokens);
    }
    if (header[3] < 0) fail("%s: negative tokenizer vocabulary size %d in shard header", path.c_str(), header[3]);
    info.tokenizer.vocab_size = header[3];
    info.tokenizer.fingerprint = (uint64_t)(uint32_t)header[4] | (uint64_t)(uint32_t)header[5] << 32;
    const int64_t expected = kShardHeaderBytes + info.num_tokens * info.token_bytes;
    if (file_bytes < expected) {
        fail("%s: truncated shard: header says %lld tokens, so expected %lld bytes, found %lld", path.c_str(),
             (long long)info.num_tokens, (long long)expected, (long long)file_bytes);
    }
    if (file_bytes > expected) {
        fail(
            "%s: trailing bytes after shard: header says %lld tokens, so expected %lld bytes, "
            "found %lld",
            path.c_str(), (long long)info.num_tokens, (long long)expected, (long long)file_bytes);
    }
    return info;
}

std::vector<uint32_t> read_shard(const std::string& path) {
    const ShardInfo info = read_shard_header(path);
    std::vector<uint32_t> tokens(static_cast<size_t>(info.num_tokens));   // (N,)
    FILE* f = open_file(path, "rb");
    if (std::fseek(f, kShardHeaderBytes, SEEK_SET) != 0) {
        std::fclose(f);
        fail("%s: cannot seek past the shard header", path.c_str());
    }
    try {
        if (info.token_bytes == 2) {
            std::vector<uint16_t> narrow(tokens.size());   // (N,)
            read_exact(narrow.data(), 2, narrow.size(), f, path);
            std::copy(narrow.begin(), narrow.end(), tokens.begin());
        } else {
            read_exact(tokens.data(), 4, tokens.size(), f, path);
        }
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
    return tokens;
}

namespace {

// max over x[begin, end): a plain loop the compiler vectorises (pmaxuw / pmaxud), over blocks so
// that a failing range is found without reading the rest.
template <typename T>
T max_of(const T* x, int64_t begin, int64_t end) {
    T m = 0;
    for (int64_t i = begin; i < end; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

template <typename T>
int64_t first_at_least(const T* x, int64_t begin, int64_t end, uint32_t limit) {
    constexpr int64_t kBlock = int64_t(1) << 16;   // tokens per vectorised pass
    for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t e = std::min(end, b + kBlock);
        if ((uint32_t)max_of(x, b, e) < limit) continue;
        for (int64_t i = b; i < e; i++) {
            if ((uint32_t)x[i] >= limit) return i;
        }
    }
    return -1;
}

}   // namespace

int64_t find_token_at_least(const void* tokens, int token_bytes, int64_t begin, int64_t end, uint32_t limit) {
    if (token_bytes == 2) {
        if (limit > 65535) return -1;   // every uint16 is below it
        return first_at_least(static_cast<const uint16_t*>(tokens), begin, end, limit);
    }
    if (token_bytes == 4) return first_at_least(static_cast<const uint32_t*>(tokens), begin, end, limit);
    fail("find_token_at_least: token width must be 2 or 4 bytes, got %d", token_bytes);
}

void write_shard(const std::string& path, const uint32_t* tokens, int64_t n, int token_bytes,
                 const ShardTokenizer& tokenizer) {
    const int version = shard_version_for_token_bytes(token_bytes);
    if (n < 0 || n > INT32_MAX) {
        fail("%s: cannot write %lld tokens into one shard (the header holds an int32 count)", path.c_str(),
             (long long)n);
    }
    // bytes: header (1024) then n tokens of token_bytes each.
    std::vector<unsigned char> bytes(kShardHeaderBytes + n * token_bytes, 0);
    int32_t header[kShardHeaderInts] = {};   // (256,)
    header[0] = kShardMagic;
    header[1] = version;
    header[2] = static_cast<int32_t>(n);
    if (tokenizer.vocab_size < 0) fail("%s: negative tokenizer vocabulary size %d", path.c_str(), tokenizer.vocab_size);
    header[3] = tokenizer.vocab_size;
    header[4] = static_cast<int32_t>(static_cast<uint32_t>(tokenizer.fingerprint));
    header[5] = static_cast<int32_t>(static_cast<uint32_t>(tokenizer.fingerprint >> 32));
    std::memcpy(bytes.data(), header, sizeof(header));
    unsigned char* body = bytes.data() + kShardHeaderBytes;
    if (token_bytes == 2) {
        for (int64_t i = 0; i < n; i++) {
            if (tokens[i] > 65535) {
                fail(
                    "%s: token %u at index %lld does not fit a uint16 shard (version 1); "
                    "use 4-byte tokens",
                    path.c_str(), tokens[i], (long long)i);
            }
            const uint16_t t = static_cast<uint16_t>(tokens[i]);
            std::memcpy(body + 2 * i, &t, 2);
        }
    } else if (n > 0) {
        std::memcpy(body, tokens, static_cast<size_t>(n) * 4);
    }
    write_file_atomic(path, bytes.data(), bytes.size());
}

namespace {
// The first directory glob(3) could not read, and why: a match may be missing for that reason
thread_local std::string g_unreadable_dir;
int note_unreadable_dir(const char* path, int err) {
    if (g_unreadable_dir.empty()) g_unreadable_dir = format("%s: %s", path, std::strerror(err));
    return 0;   // go on with the rest
}
}   // namespace

std::vector<std::string> expand_glob(const std::string& pattern) {
    glob_t g;
    std::memset(&g, 0, sizeof(g));
    g_unreadable_dir.clear();
    const int rc = ::glob(pattern.c_str(), 0, note_unreadable_dir, &g);
    std::vector<std::string> paths;
    if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            paths.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty())) {
        // a file's own name with [ ] * ? in it is a pattern that does not match itself
        const bool literal_file = pattern.find_first_of("[]*?") != std::string::npos && file_exists(pattern);
        fail("no files match %s%s", pattern.c_str(),
             literal_file ? " (the file of that name exists, but a glob reads its [ ] * ? as patterns: escape each "
                            "with a backslash)"
             : !g_unreadable_dir.empty()
                 ? format(" (a directory could not be read: %s)", g_unreadable_dir.c_str()).c_str()
                 : "");
    }
    if (rc != 0) {
        fail("cannot expand glob %s (%s)", pattern.c_str(), rc == GLOB_NOSPACE ? "out of memory" : "read error");
    }
    std::sort(paths.begin(), paths.end());
    return paths;
}

std::string publishing_marker(const std::string& dir, const std::string& name) {
    return dir + "/" + name + ".publishing";
}

void fail_if_being_published(const std::vector<std::string>& shards) {
    std::set<std::string> dirs_seen;
    for (const std::string& shard : shards) {
        const std::filesystem::path path(shard);
        const std::string dir = path.parent_path().empty() ? "." : path.parent_path().string();
        if (!dirs_seen.insert(dir).second) continue;
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
            const std::string marker = entry.path().filename().string();
            const size_t suffix = marker.size() - std::min(marker.size(), std::strlen(".publishing"));
            if (marker.compare(suffix, std::string::npos, ".publishing") != 0 || suffix == 0) continue;
            const std::string name_ = marker.substr(0, suffix) + "_";
            for (const std::string& other : shards) {
                const std::filesystem::path o(other);
                if ((o.parent_path().empty() ? "." : o.parent_path().string()) == dir &&
                    o.filename().string().rfind(name_, 0) == 0) {
                    fail(
                        "%s: prepare_text was replacing the dataset %s there and did not finish (a full disk, a "
                        "kill?), so its shards, %s among them, may be of two preparations: run that prepare_text "
                        "command again",
                        entry.path().c_str(), marker.substr(0, suffix).c_str(), other.c_str());
                }
            }
        }
    }
}

}   // namespace train_gpt
