// bench_shard_scan — what the trainer's start-up token scan costs (llmc/data/shard.h:
// find_token_at_least over a mapped shard, as DataLoader does) next to reading the shard once.
//
//   build/bench_shard_scan                       a 100M-token uint16 shard in /tmp, then the timings
//   build/bench_shard_scan --shard FILE          an existing shard
//
// Each measurement runs warm (the file in the page cache) and cold (its pages dropped first with
// posix_fadvise(DONTNEED), so the disk is read): read() of the whole file into a buffer, and
// mmap + the scan. The best of --repeat runs counts. One JSON line.
#include "data/shard.h"
#include "cli_decimal.h"
#include "utils.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace train_gpt;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void drop_cache(const std::string& path) {
    const int fd = open_regular_file(path, O_RDONLY);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

// read(2) of the whole file, 8 MB at a time, into one buffer
double time_read(const std::string& path, std::vector<char>& buffer) {
    const auto t0 = std::chrono::steady_clock::now();
    const int fd = open_regular_file(path, O_RDONLY);
    size_t done = 0;
    ssize_t n;
    while ((n = ::read(fd, buffer.data() + done, std::min<size_t>(8 << 20, buffer.size() - done))) > 0)
        done += (size_t)n;
    ::close(fd);
    return seconds_since(t0);
}

// as DataLoader: mmap the file, scan its tokens
double time_scan(const std::string& path, const ShardInfo& info, int64_t* found) {
    const auto t0 = std::chrono::steady_clock::now();
    const int fd = open_regular_file(path, O_RDONLY);
    struct stat st;
    ::fstat(fd, &st);
    void* base = ::mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) fail("cannot mmap %s", path.c_str());
    *found = find_token_at_least(static_cast<const char*>(base) + kShardHeaderBytes, info.token_bytes, 0,
                                 info.num_tokens, 50257);
    ::munmap(base, (size_t)st.st_size);
    return seconds_since(t0);
}

}   // namespace

int main(int argc, char** argv) {
    std::string shard;
    int64_t tokens = 100000000;
    int repeat = 3;
    CLI::App app{"bench_shard_scan: the start-up token scan against reading the shard once"};
    app.add_option("--shard", shard, "An existing shard ('' = write a uint16 shard of --tokens tokens in /tmp)");
    train_gpt::add_decimal_option(app, "--tokens", tokens, "Tokens of the generated shard")
        ->check(CLI::Range(int64_t(1), int64_t(INT32_MAX)));
    train_gpt::add_decimal_option(app, "--repeat", repeat, "Runs of each measurement (the best counts)")
        ->check(CLI::Range(1, 1000000));
    CLI11_PARSE(app, argc, argv);
    try {
        bool generated = false;
        if (shard.empty()) {
            shard = format("/tmp/bench_shard_scan_%d.bin", (int)::getpid());
            std::vector<uint32_t> t((size_t)tokens);
            for (size_t i = 0; i < t.size(); i++)
                t[i] = (uint32_t)((i * 2654435761u) % 50257);   // ids below GPT-2's vocab
            write_shard(shard, t.data(), tokens, 2);
            generated = true;
        }
        const ShardInfo info = read_shard_header(shard);
        const size_t bytes = (size_t)(kShardHeaderBytes + info.num_tokens * info.token_bytes);
        std::vector<char> buffer(bytes);
        double read_warm = 1e30, scan_warm = 1e30, read_cold = 1e30, scan_cold = 1e30;
        int64_t found = 0;
        for (int r = 0; r < repeat; r++) {
            drop_cache(shard);
            read_cold = std::min(read_cold, time_read(shard, buffer));
            read_warm = std::min(read_warm, time_read(shard, buffer));
            drop_cache(shard);
            scan_cold = std::min(scan_cold, time_scan(shard, info, &found));
            scan_warm = std::min(scan_warm, time_scan(shard, info, &found));
        }
        if (generated) std::remove(shard.c_str());
        std::printf(
            "{\"tokens\": %lld, \"bytes\": %zu, \"read_warm_s\": %.4f, \"scan_warm_s\": %.4f, \"read_cold_s\": %.4f, "
            "\"scan_cold_s\": %.4f, \"scan_over_read_warm\": %.3f, \"scan_over_read_cold\": %.3f, \"found\": %lld}\n",
            (long long)info.num_tokens, bytes, read_warm, scan_warm, read_cold, scan_cold, scan_warm / read_warm,
            scan_cold / read_cold, (long long)found);
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
