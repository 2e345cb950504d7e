// bench_tokenizer — speed of llmc/data/bpe.cpp: encoding throughput and training time, one JSON line.
//
//   build/bench_tokenizer --input data/kjv/kjv.txt --bpe-dir ../shared/data/gpt2 --repeat 3
//   build/bench_tokenizer --input data/kjv/kjv.txt --train-vocab 8192 --threads 2
//
// Encoding: the whole file as one text, on one thread, with a fresh BpeEncoder (cold cache)
// each repeat; the best repeat counts. dev/data/bench_tokenizer.sh runs this and tiktoken
// (dev/data/tiktoken_oracle.py bench) on the same text and prints the ratio.
#include "data/bpe.h"
#include "dev/data/bpe_train.h"
#include "cli_decimal.h"
#include "utils.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace train_gpt;

static std::string read_all(const std::string& path) {
    FILE* f = open_file(path, "rb");
    std::string text;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
        text.append(buf, got);
    std::fclose(f);
    return text;
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char** argv) {
    std::string input, bpe_dir;
    int repeat = 3, train_vocab = 0, threads = 1;
    CLI::App app{"bench_tokenizer: BPE encoding throughput (one thread) or training time"};
    app.add_option("--input", input, "text file")->required();
    CLI::Option* bpe_option =
        app.add_option("--bpe-dir", bpe_dir, "encode with this vocabulary (encoder.json + vocab.bpe, or .tiktoken)");
    train_gpt::add_decimal_option(app, "--repeat", repeat, "encoding repeats; the best counts")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    train_gpt::add_decimal_option(app, "--train-vocab", train_vocab,
                                  "instead: train a BPE of this size on the file and time it")
        ->check(CLI::Range(257, 1 << 24))
        ->excludes(bpe_option);
    train_gpt::add_decimal_option(app, "--threads", threads, "training threads")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        const std::string text = read_all(input);
        if (train_vocab > 0) {
            const auto t0 = std::chrono::steady_clock::now();
            const Bpe bpe = train_bpe({text}, train_vocab, threads);
            std::printf("{\"bytes\": %zu, \"vocab\": %d, \"threads\": %d, \"train_seconds\": %.3f}\n", text.size(),
                        bpe.vocab_size(), threads, seconds_since(t0));
            return 0;
        }
        if (bpe_dir.empty()) fail("give --bpe-dir (encode) or --train-vocab (train)");
        const Bpe bpe = Bpe::load(bpe_dir);
        double best = 1e30;
        size_t tokens = 0;
        std::vector<uint32_t> ids;
        for (int r = 0; r < std::max(repeat, 1); r++) {
            ids.clear();
            ids.reserve(text.size());
            BpeEncoder encoder(bpe);
            const auto t0 = std::chrono::steady_clock::now();
            encoder.encode(text, &ids);
            best = std::min(best, seconds_since(t0));
            tokens = ids.size();
        }
        std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.4f, \"tokens_per_s\": %.0f}\n", text.size(),
                    tokens, best, tokens / best);
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
