// prepare_text — turn plain-text files into byte-level token shards and a tokenizer file.
//
//   build/prepare_text --input data/kjv/kjv.txt --out-dir data/kjv --name kjv --val-fraction 0.05
//
// Each input file is one document. The token stream is, per document, the EOT token then one
// token per byte (byte-level tokenizer: ids 0..255 = bytes, 256 = <|endoftext|>). The last
// val-fraction of the stream (moved to the nearest line or document boundary within a small
// window, if there is one) is written to DIR/NAME_val_000000.bin, ...; the rest to
// DIR/NAME_train_000000.bin, _000001, ... with at most --shard-tokens tokens per shard.
// DIR/tokenizer.bin holds the byte-level tokenizer. Shards are uint16 (llm.c version 1)
// whenever the vocabulary fits, so llm.c can read them too.
//
// Invariant: decoding train shards then val shards, in order, gives back exactly
// "<|endoftext|>" + file1 + "<|endoftext|>" + file2 + ...
// The whole stream is held in memory (4 bytes per input byte); fine for corpora of a few GB.
#include "shard.h"
#include "tokenizer.h"
#include "utils.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace train_gpt;

namespace {

struct Options {
    std::vector<std::string> inputs;
    std::string out_dir;
    std::string name = "data";
    double val_fraction = 0.05;
    int64_t shard_tokens = 100000000;
};

std::string read_whole_file(const std::string& path) {
    FILE* f = open_file(path, "rb");
    std::string text;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
    const bool error = std::ferror(f) != 0;
    std::fclose(f);
    if (error) fail("%s: read error", path.c_str());
    return text;
}

// Index where the val split starts: about `val_tokens` from the end, moved to the nearest
// boundary (just after a '\n', or at an EOT) within `window` tokens if there is one.
// Result in [1, n - 1] so both splits are non-empty.
int64_t choose_val_start(const std::vector<uint32_t>& tokens, int64_t val_tokens, uint32_t eot) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    const int64_t target = n - val_tokens;
    const int64_t window = std::min<int64_t>(4096, std::max<int64_t>(val_tokens / 2, 1));
    auto is_boundary = [&](int64_t i) {
        return i >= 1 && i <= n - 1 && (tokens[i - 1] == '\n' || tokens[i] == eot);
    };
    for (int64_t d = 0; d <= window; d++) {  // nearest first; ties go to the larger val split
        if (is_boundary(target - d)) return target - d;
        if (is_boundary(target + d)) return target + d;
    }
    return target;
}

// Writes tokens[begin, end) as DIR/NAME_split_000000.bin, ... of at most shard_tokens each;
// returns the paths. An empty range writes nothing.
std::vector<std::string> write_split(const Options& opt, const std::string& split,
                                     const std::vector<uint32_t>& tokens, int64_t begin,
                                     int64_t end, int token_bytes) {
    std::vector<std::string> paths;
    for (int64_t start = begin, index = 0; start < end; start += opt.shard_tokens, index++) {
        const int64_t count = std::min(opt.shard_tokens, end - start);
        const std::string path =
            format("%s/%s_%s_%06lld.bin", opt.out_dir.c_str(), opt.name.c_str(), split.c_str(),
                   (long long)index);
        write_shard(path, tokens.data() + start, count, token_bytes);
        paths.push_back(path);
    }
    return paths;
}

void run(const Options& opt) {
    if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0)) {
        fail("--val-fraction must be in [0, 1), got %g", opt.val_fraction);
    }
    if (opt.shard_tokens < 1 || opt.shard_tokens > INT32_MAX) {
        fail("--shard-tokens must be in [1, %d], got %lld", INT32_MAX, (long long)opt.shard_tokens);
    }
    if (opt.name.empty() || opt.name.find('/') != std::string::npos) {
        fail("--name must be non-empty and contain no '/', got '%s'", opt.name.c_str());
    }

    const Tokenizer tokenizer = Tokenizer::byte_level();
    const uint32_t eot = static_cast<uint32_t>(tokenizer.eot_token());
    std::vector<uint32_t> tokens;  // (n,): the whole stream
    int64_t input_bytes = 0;
    for (const std::string& path : opt.inputs) {
        const std::string text = read_whole_file(path);
        if (text.empty()) fail("input %s is empty", path.c_str());
        input_bytes += static_cast<int64_t>(text.size());
        tokens.push_back(eot);  // every document is preceded by EOT
        for (int id : tokenizer.encode_bytes(text)) tokens.push_back(static_cast<uint32_t>(id));
    }
    const int64_t n = static_cast<int64_t>(tokens.size());  // >= 2: EOT + at least one byte

    int64_t val_start = n;
    if (opt.val_fraction > 0.0) {
        int64_t val_tokens = std::llround(opt.val_fraction * static_cast<double>(n));
        val_tokens = std::clamp<int64_t>(val_tokens, 1, n - 1);
        val_start = choose_val_start(tokens, val_tokens, eot);
    }

    make_dirs(opt.out_dir);
    const int token_bytes = token_bytes_for_vocab(tokenizer.vocab_size());
    const std::vector<std::string> train = write_split(opt, "train", tokens, 0, val_start, token_bytes);
    const std::vector<std::string> val = write_split(opt, "val", tokens, val_start, n, token_bytes);
    const std::string tokenizer_path = opt.out_dir + "/tokenizer.bin";
    tokenizer.save(tokenizer_path);
    // Shards left by an earlier run with more shards would silently join the split's glob.
    for (const std::string split : {"train", "val"}) {
        const std::vector<std::string>& written = split == "train" ? train : val;
        const std::string pattern = format("%s/%s_%s_[0-9]*.bin", opt.out_dir.c_str(),
                                           opt.name.c_str(), split.c_str());
        std::vector<std::string> existing;
        try {
            existing = expand_glob(pattern);
        } catch (const Error&) {  // nothing matches: nothing stale
        }
        for (const std::string& path : existing) {
            if (std::find(written.begin(), written.end(), path) != written.end()) continue;
            if (std::remove(path.c_str()) != 0) fail("cannot remove stale shard %s", path.c_str());
            std::printf("  removed stale shard %s\n", path.c_str());
        }
    }

    std::printf("prepare_text: %zu document(s), %lld bytes -> %lld tokens (byte-level, vocab %d, "
                "uint%d shards)\n",
                opt.inputs.size(), (long long)input_bytes, (long long)n, tokenizer.vocab_size(),
                8 * token_bytes);
    std::printf("  train: %12lld tokens in %zu shard(s): %s%s\n", (long long)val_start,
                train.size(), train.empty() ? "-" : train.front().c_str(),
                train.size() > 1 ? " ..." : "");
    std::printf("  val:   %12lld tokens in %zu shard(s): %s%s\n", (long long)(n - val_start),
                val.size(), val.empty() ? "-" : val.front().c_str(), val.size() > 1 ? " ..." : "");
    std::printf("  tokenizer: %s\n", tokenizer_path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    CLI::App app{"prepare_text: plain text files -> byte-level token shards (llm.c format) "
                 "and tokenizer.bin"};
    app.add_option("--input", opt.inputs, "text file; one document each (repeatable)")->required();
    app.add_option("--out-dir", opt.out_dir, "output directory (created if missing)")->required();
    app.add_option("--name", opt.name, "shard name prefix: NAME_train_000000.bin, ...")
        ->capture_default_str();
    app.add_option("--val-fraction", opt.val_fraction,
                   "fraction of the token stream, taken from its end, for validation; 0 = none")
        ->capture_default_str();
    app.add_option("--shard-tokens", opt.shard_tokens, "maximum tokens per shard")
        ->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);  // prints the help text, exit 0
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", e.what());
        return 1;
    }
    try {
        run(opt);
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
