// dataloader.h — micro-batches of (inputs, targets) from a glob of token shards.
//
// Samples. Each shard of N tokens is cut into (N - 1) / T samples; sample k covers the T + 1
// tokens [k*T, k*T + T]: inputs are the first T, targets the last T (inputs shifted by one).
// Samples never cross a shard boundary; a shard's last < T + 1 leftover tokens are unused.
// The epoch's sample list is the concatenation, over shards in sorted path order, of their
// samples: S = samples_per_epoch() in all.
//
// Position. The loader's state is one integer p, the global sample index, which counts up
// across epochs (epoch = p / S). A call to next_batch() on rank r reads the B samples at
// global indices p + r*B + i, i = 0 .. B-1, then every rank advances p by world_size * B.
// Global index q names slot q % S of epoch q / S; that slot holds sample q % S, or with
// shuffling sample perm_e[q % S] where perm_e is a permutation of 0 .. S-1 drawn from
// (seed, epoch e) alone. So ranks read disjoint samples, world_size ranks of B samples read
// exactly what one rank of world_size * B samples reads, and p means the same data at any
// world size: a checkpoint taken on 8 ranks resumes on 4.
//
// Shards are mmap'ed read-only for the loader's lifetime. Every token is checked against
// vocab_size at construction, split over the ranks (rank r of W scans the r-th W-th of each
// shard: together they scan every token once), and again as it is copied out.
#pragma once

#include "data/shard.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train_gpt {

class DataLoader {
  public:
    // B sequences of T tokens per micro-batch for this rank. Every shard's header is validated
    // up front, and this rank's share of the tokens scanned (a token >= vocab_size fails, naming
    // the shard, the token and its position); fails if the glob holds fewer than
    // world_size * B samples in all.
    DataLoader(const std::string& glob, int B, int T, int rank, int world_size, bool shuffle, uint64_t seed,
               int vocab_size);
    ~DataLoader();
    DataLoader(DataLoader&&) noexcept;
    DataLoader& operator=(DataLoader&&) noexcept;
    DataLoader(const DataLoader&) = delete;
    DataLoader& operator=(const DataLoader&) = delete;

    // inputs: (B, T), targets: (B, T), row-major; targets[b][t] = token after inputs[b][t].
    // Fails naming the shard when one it read from is not the file it mapped at start (written in
    // place, truncated, replaced or removed since).
    void next_batch(int32_t* inputs, int32_t* targets);

    void reset();   // p = 0: global sample 0 of epoch 0
    int64_t position() const { return position_; }
    void set_position(int64_t global_sample);   // for checkpoint resume; must be >= 0
    // A position saved by a run that cut these shards into samples of saved_T tokens, as a
    // position of this loader's cut (a resume with another -t): the same epoch and, in order, the
    // first sample that starts at or after where the saved position's sample started, so that no
    // token is read twice; shuffled, the same fraction of the epoch (the permutations differ).
    int64_t position_at_seq_len(int64_t saved_position, int saved_T) const;
    int64_t epoch() const { return position_ / samples_per_epoch_; }

    int64_t samples_per_epoch() const { return samples_per_epoch_; }
    int64_t num_tokens() const { return num_tokens_; }   // all tokens of all shards
    int num_shards() const { return static_cast<int>(shards_.size()); }
    const std::string& glob() const { return glob_; }
    int B() const { return B_; }
    int T() const { return T_; }
    bool shuffled() const { return shuffle_; }
    uint64_t seed() const { return seed_; }

    // Sample id (0 .. S-1, in concatenation order) at global index q: q % S, or perm[q % S].
    // Exposed so tests can check the order; next_batch() reads through it.
    int64_t sample_at(int64_t global_index);

    // The permutation of epoch `epoch` for `seed`: (S,), a Fisher-Yates shuffle driven by
    // std::mt19937_64, so the result is identical on every platform and standard library.
    static std::vector<int64_t> shuffled_order(int64_t num_samples, uint64_t seed, int64_t epoch);

  private:
    struct MappedShard;
    // Copies sample `sample` (T + 1 tokens) into inputs (T,) and targets (T,).
    void load_sample(int32_t* inputs, int32_t* targets, int64_t sample) const;
    size_t shard_of(int64_t sample) const;   // the shard holding sample `sample`
    const std::vector<int64_t>& order_for_epoch(int64_t epoch);

    std::string glob_;
    int B_, T_, rank_, world_size_;
    bool shuffle_;
    uint64_t seed_;
    int vocab_size_;

    std::vector<std::unique_ptr<MappedShard>> shards_;
    std::vector<int64_t> first_sample_;   // (num_shards + 1,): shard s owns samples [first[s], first[s+1])
    int64_t samples_per_epoch_ = 0;       // S
    int64_t num_tokens_ = 0;
    int64_t position_ = 0;   // p

    // A batch spans at most two epochs, so two cached permutations (by epoch) suffice.
    int64_t cached_epoch_[2] = {-1, -1};
    std::vector<int64_t> cached_order_[2];   // each (S,)
    int next_cache_slot_ = 0;
};

}   // namespace train_gpt
