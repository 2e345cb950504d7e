// dataloader.cpp — see dataloader.h for the sample order and position invariants.
#include "data/dataloader.h"
#include "data/mapped_files.h"

#include "utils.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train_gpt {

namespace {

// The limit on a process's memory mappings (one per shard), or "" where it cannot be read.
std::string max_map_count() {
    std::ifstream in("/proc/sys/vm/max_map_count");
    std::string limit;
    in >> limit;
    return limit;
}

}   // namespace

// One shard mapped read-only for the loader's lifetime.
struct DataLoader::MappedShard {
    ShardInfo info;
    void* base = nullptr;   // the whole file: header (1024 bytes) then tokens
    size_t mapped_bytes = 0;
    size_t registry_slot = 0;                // its entry in the bus-error handler's registry (mapped_files.h)
    const unsigned char* tokens = nullptr;   // (N,) of info.token_bytes each
    struct stat opened {};                   // the file as mapped: its identity, size and mtime

    explicit MappedShard(const std::string& path) {
        info = read_shard_header(path);   // validates magic, version, exact size
        const int fd = open_regular_file(path, O_RDONLY);
        struct stat st;
        if (::fstat(fd, &st) != 0) {
            int err = errno;
            ::close(fd);
            fail("%s: cannot stat: %s", path.c_str(), std::strerror(err));
        }
        opened = st;
        mapped_bytes = static_cast<size_t>(st.st_size);
        const int64_t expected = kShardHeaderBytes + info.num_tokens * info.token_bytes;
        if (static_cast<int64_t>(mapped_bytes) != expected) {   // changed since the header check
            ::close(fd);
            fail("%s: shard changed size while opening (expected %lld bytes, found %lld)", path.c_str(),
                 (long long)expected, (long long)mapped_bytes);
        }
        base = ::mmap(nullptr, mapped_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        int err = errno;
        ::close(fd);   // the mapping keeps the file alive
        if (base == MAP_FAILED) {
            base = nullptr;
            // ENOMEM is, in practice, the per-process limit on mappings (every shard holds one)
            const std::string limit = max_map_count();
            fail("cannot mmap %s: %s%s", path.c_str(), std::strerror(err),
                 err == ENOMEM && !limit.empty()
                     ? format(" (a process holds at most vm.max_map_count = %s mappings, one per shard: fewer, "
                              "larger shards — prepare_text --shard-tokens — or a larger limit)",
                              limit.c_str())
                           .c_str()
                     : "");
        }
        tokens = static_cast<const unsigned char*>(base) + kShardHeaderBytes;
        registry_slot = register_mapped_file(base, mapped_bytes, path);   // a bus error reading it names it
    }
    // Reads will jump around (shuffling): no readahead. A hint; errors are harmless.
    void advise_random() { ::madvise(base, mapped_bytes, MADV_RANDOM); }
    ~MappedShard() {
        if (base) {
            unregister_mapped_file(registry_slot);
            ::munmap(base, mapped_bytes);
        }
    }
    MappedShard(const MappedShard&) = delete;
    MappedShard& operator=(const MappedShard&) = delete;

    // Fails naming the shard if its path no longer names the file as it was mapped (checked at
    // start): written in place (another mtime; the mapping may show the new bytes), truncated, or
    // replaced by another file (the mapping still reads the old one, a resume would read the new).
    void check_unchanged() const {
        struct stat now {};
        const bool same = ::stat(info.path.c_str(), &now) == 0 && now.st_dev == opened.st_dev &&
                          now.st_ino == opened.st_ino && now.st_size == opened.st_size &&
                          now.st_mtim.tv_sec == opened.st_mtim.tv_sec &&
                          now.st_mtim.tv_nsec == opened.st_mtim.tv_nsec &&
                          // a write with the mtime set back after it (touch -r) still moves the ctime
                          now.st_ctim.tv_sec == opened.st_ctim.tv_sec && now.st_ctim.tv_nsec == opened.st_ctim.tv_nsec;
        if (!same) {
            fail(
                "%s was truncated or changed while the run read it (it is not the file checked at start: written "
                "in place, replaced or removed); its data cannot be trusted: restore the file, then --resume",
                info.path.c_str());
        }
    }

    uint32_t token(int64_t i) const {   // i in [0, N)
        if (info.token_bytes == 2) {
            uint16_t t;
            std::memcpy(&t, tokens + 2 * i, 2);
            return t;
        }
        uint32_t t;
        std::memcpy(&t, tokens + 4 * i, 4);
        return t;
    }
};

DataLoader::DataLoader(const std::string& glob, int B, int T, int rank, int world_size, bool shuffle, uint64_t seed,
                       int vocab_size)
    : glob_(glob),
      B_(B),
      T_(T),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed),
      vocab_size_(vocab_size) {
    if (B < 1 || T < 1) fail("data loader for %s: B and T must be >= 1, got B=%d T=%d", glob.c_str(), B, T);
    if (world_size < 1 || rank < 0 || rank >= world_size) {
        fail("data loader for %s: rank %d is not in [0, world_size=%d)", glob.c_str(), rank, world_size);
    }
    if (vocab_size < 1) fail("data loader for %s: vocab_size must be >= 1, got %d", glob.c_str(), vocab_size);

    const std::vector<std::string> paths = expand_glob(glob);
    fail_if_being_published(paths);
    first_sample_.push_back(0);
    for (const std::string& path : paths) {
        shards_.push_back(std::make_unique<MappedShard>(path));
        const int64_t n = shards_.back()->info.num_tokens;
        // this rank's share of the scan: tokens [n·r/W, n·(r+1)/W) of every shard
        const int64_t begin = n * rank / world_size, end = n * (rank + 1) / world_size;
        const int64_t bad = find_token_at_least(shards_.back()->tokens, shards_.back()->info.token_bytes, begin, end,
                                                (uint32_t)vocab_size);
        if (bad >= 0) {
            fail(
                "%s: token %u at position %lld is not below the vocabulary size %d (a shard made with another "
                "tokenizer, or a damaged file)",
                path.c_str(), shards_.back()->token(bad), (long long)bad, vocab_size);
        }
        if (shuffle) shards_.back()->advise_random();   // after the scan, which reads in order
        num_tokens_ += n;
        const int64_t samples = n >= 1 ? (n - 1) / T : 0;   // each needs T + 1 tokens, stride T
        first_sample_.push_back(first_sample_.back() + samples);
    }
    samples_per_epoch_ = first_sample_.back();
    const int64_t needed = static_cast<int64_t>(world_size) * B;
    if (samples_per_epoch_ < needed) {
        fail(
            "%s: %lld tokens in %d shard(s) make only %lld samples of T+1=%d tokens, fewer "
            "than world_size*B = %d*%d = %lld needed for one step",
            glob.c_str(), (long long)num_tokens_, num_shards(), (long long)samples_per_epoch_, T + 1, world_size, B,
            (long long)needed);
    }
}

DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

void DataLoader::reset() { position_ = 0; }

void DataLoader::set_position(int64_t global_sample) {
    if (global_sample < 0) {
        fail("data loader for %s: position must be >= 0, got %lld", glob_.c_str(), (long long)global_sample);
    }
    position_ = global_sample;
}

int64_t DataLoader::position_at_seq_len(int64_t saved_position, int saved_T) const {
    if (saved_T == T_ || saved_T < 1 || saved_position < 0) return saved_position;
    std::vector<int64_t> first_then{0};   // (num_shards + 1,): the saved cut's first_sample_
    for (const auto& shard : shards_) {
        const int64_t n = shard->info.num_tokens;
        first_then.push_back(first_then.back() + (n >= 1 ? (n - 1) / saved_T : 0));
    }
    const int64_t samples_then = first_then.back();
    if (samples_then <= 0) return 0;
    const int64_t epoch = saved_position / samples_then, slot = saved_position % samples_then;
    int64_t slot_now;
    if (shuffle_) {
        slot_now = (int64_t)((__int128)slot * samples_per_epoch_ / samples_then);
    } else {
        // shard s holds the saved slot; its sample starts at token (slot - first_then[s]) * saved_T
        const size_t s =
            (size_t)(std::upper_bound(first_then.begin(), first_then.end(), slot) - first_then.begin()) - 1;
        const int64_t token = (slot - first_then[s]) * saved_T;
        slot_now = std::min(first_sample_[s] + (token + T_ - 1) / T_, first_sample_[s + 1]);
    }
    return epoch * samples_per_epoch_ + slot_now;
}

namespace {

// splitmix64 finaliser: a fixed bijective mix so nearby (seed, epoch) pairs seed unrelated streams.
uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Uniform integer in [0, n), n >= 1, by rejection: the accepted range [threshold, 2^64) has a
// length that is a multiple of n. (std::uniform_int_distribution is implementation-defined.)
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
    const uint64_t threshold = (0 - n) % n;   // 2^64 mod n
    for (;;) {
        const uint64_t x = rng();
        if (x >= threshold) return x % n;
    }
}

}   // namespace

std::vector<int64_t> DataLoader::shuffled_order(int64_t num_samples, uint64_t seed, int64_t epoch) {
    std::vector<int64_t> order(static_cast<size_t>(num_samples));   // (S,)
    for (int64_t i = 0; i < num_samples; i++)
        order[i] = i;
    std::mt19937_64 rng(mix64(seed ^ mix64(static_cast<uint64_t>(epoch))));
    // Fisher-Yates: for i = S-1 .. 1, swap order[i] with a uniform order[j], j in [0, i].
    for (int64_t i = num_samples - 1; i > 0; i--) {
        const int64_t j = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
        std::swap(order[i], order[j]);
    }
    return order;
}

const std::vector<int64_t>& DataLoader::order_for_epoch(int64_t epoch) {
    for (int slot = 0; slot < 2; slot++) {
        if (cached_epoch_[slot] == epoch) return cached_order_[slot];
    }
    const int slot = next_cache_slot_;
    next_cache_slot_ = 1 - next_cache_slot_;
    cached_order_[slot] = shuffled_order(samples_per_epoch_, seed_, epoch);
    cached_epoch_[slot] = epoch;
    return cached_order_[slot];
}

int64_t DataLoader::sample_at(int64_t global_index) {
    const int64_t slot = global_index % samples_per_epoch_;
    if (!shuffle_) return slot;
    return order_for_epoch(global_index / samples_per_epoch_)[slot];
}

size_t DataLoader::shard_of(int64_t sample) const {
    // shard s with first_sample_[s] <= sample < first_sample_[s + 1]
    const auto it = std::upper_bound(first_sample_.begin(), first_sample_.end(), sample);
    return static_cast<size_t>(it - first_sample_.begin()) - 1;
}

void DataLoader::load_sample(int32_t* inputs, int32_t* targets, int64_t sample) const {
    const size_t s = shard_of(sample);
    const MappedShard& shard = *shards_[s];
    const int64_t start = (sample - first_sample_[s]) * T_;   // token offset in the shard
    for (int64_t t = 0; t <= T_; t++) {                       // T + 1 tokens
        const uint32_t token = shard.token(start + t);
        if (token >= static_cast<uint32_t>(vocab_size_)) {
            fail("%s: token at offset %lld has id %u, >= vocab size %d", shard.info.path.c_str(),
                 (long long)(start + t), token, vocab_size_);
        }
        if (t < T_) inputs[t] = static_cast<int32_t>(token);
        if (t > 0) targets[t - 1] = static_cast<int32_t>(token);
    }
}

void DataLoader::next_batch(int32_t* inputs, int32_t* targets) {
    const int64_t first = position_ + static_cast<int64_t>(rank_) * B_;   // this rank's slice
    size_t checked = shards_.size();   // the shard last checked: consecutive samples share one
    for (int b = 0; b < B_; b++) {
        const int64_t sample = sample_at(first + b);
        load_sample(inputs + static_cast<int64_t>(b) * T_, targets + static_cast<int64_t>(b) * T_, sample);
        // after the read: a change before or during it is seen (a stat, about a microsecond)
        if (const size_t s = shard_of(sample); s != checked) {
            shards_[s]->check_unchanged();
            checked = s;
        }
    }
    position_ += static_cast<int64_t>(world_size_) * B_;
}

}   // namespace train_gpt
