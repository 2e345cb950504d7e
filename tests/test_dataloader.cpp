// test_dataloader.cpp — DataLoader sample order, rank split, resume, shuffle and checks; and
// prepare_text end to end (its shards read back through DataLoader to the original bytes), with
// the byte-level and BPE tokenizers, JSONL input, resumption, and uint32 shards.
//
// Shards here hold consecutive integers (token i of the concatenated stream is i, or a known
// function of i), so a sample's identity can be read off its first input token.
#include "data/bpe.h"
#include "data/dataloader.h"
#include "data/shard.h"
#include "test_util.h"
#include "data/tokenizer.h"
#include "utils.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// Writes shards d_000000.bin, ... with the given token counts; shard s holds the values
// start_s, start_s + 1, ... where start_s = 1000 * s. Returns the glob.
std::string write_counting_shards(const ScratchDir& dir, const std::vector<int>& sizes, int token_bytes = 2) {
    for (size_t s = 0; s < sizes.size(); s++) {
        std::vector<uint32_t> tokens(sizes[s]);
        for (int i = 0; i < sizes[s]; i++)
            tokens[i] = static_cast<uint32_t>(1000 * s + i);
        write_shard(dir.file(format("d_%06zu.bin", s)), tokens.data(), sizes[s], token_bytes);
    }
    return dir.file("d_*.bin");
}

struct Batch {
    std::vector<int32_t> inputs, targets;   // each (B, T)
};

Batch next(DataLoader& loader) {
    Batch b;
    b.inputs.resize(static_cast<size_t>(loader.B()) * loader.T());
    b.targets.resize(b.inputs.size());
    loader.next_batch(b.inputs.data(), b.targets.data());
    return b;
}

// The first input token of each row: identifies the sample in counting shards.
std::vector<int32_t> row_starts(const Batch& b, int B, int T) {
    std::vector<int32_t> starts(B);
    for (int i = 0; i < B; i++)
        starts[i] = b.inputs[static_cast<size_t>(i) * T];
    return starts;
}

constexpr int kVocab = 5000;

}   // namespace

TEST(DataLoader, SamplesPerShardAndTargetsShiftedByOne) {
    ScratchDir dir;
    // T = 4: shard 0 has (25-1)/4 = 6 samples, shard 1 (8-1)/4 = 1, shard 2 (4 tokens) none,
    // shard 3 (16-1)/4 = 3.
    const std::string glob = write_counting_shards(dir, {25, 8, 4, 16});
    DataLoader loader(glob, 2, 4, 0, 1, false, 0, kVocab);
    EXPECT_EQ(loader.num_shards(), 4);
    EXPECT_EQ(loader.num_tokens(), 25 + 8 + 4 + 16);
    EXPECT_EQ(loader.samples_per_epoch(), 10);

    // Expected first tokens of samples 0..9 in concatenation order.
    const std::vector<int32_t> sample_start = {0, 4, 8, 12, 16, 20, 1000, 3000, 3004, 3008};
    for (int step = 0; step < 5; step++) {
        const Batch b = next(loader);
        for (int row = 0; row < 2; row++) {
            const int32_t s0 = sample_start[2 * step + row];
            for (int t = 0; t < 4; t++) {
                EXPECT_EQ(b.inputs[row * 4 + t], s0 + t) << "step " << step << " row " << row;
                EXPECT_EQ(b.targets[row * 4 + t], s0 + t + 1) << "step " << step << " row " << row;
            }
        }
        EXPECT_EQ(loader.position(), 2 * (step + 1));
    }
}

TEST(DataLoader, ReadsUint32Shards) {
    ScratchDir dir;
    std::vector<uint32_t> tokens(9);
    for (int i = 0; i < 9; i++)
        tokens[i] = 70000 + i;
    write_shard(dir.file("w.bin"), tokens.data(), tokens.size(), 4);
    DataLoader loader(dir.file("w.bin"), 2, 4, 0, 1, false, 0, 100000);
    const Batch b = next(loader);
    const std::vector<int32_t> inputs = {70000, 70001, 70002, 70003, 70004, 70005, 70006, 70007};
    const std::vector<int32_t> targets = {70001, 70002, 70003, 70004, 70005, 70006, 70007, 70008};
    EXPECT_EQ(b.inputs, inputs);
    EXPECT_EQ(b.targets, targets);
}

TEST(DataLoader, WrapsAroundTheEpoch) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {21});   // T = 4: 5 samples
    DataLoader loader(glob, 2, 4, 0, 1, false, 0, kVocab);
    ASSERT_EQ(loader.samples_per_epoch(), 5);
    const std::vector<std::vector<int32_t>> expected = {{0, 4}, {8, 12}, {16, 0}, {4, 8}, {12, 16}};
    for (size_t step = 0; step < expected.size(); step++) {
        EXPECT_EQ(row_starts(next(loader), 2, 4), expected[step]) << "step " << step;
    }
    EXPECT_EQ(loader.position(), 10);
    EXPECT_EQ(loader.epoch(), 2);
    loader.reset();
    EXPECT_EQ(loader.position(), 0);
    EXPECT_EQ(row_starts(next(loader), 2, 4), expected[0]);
}

// world_size ranks of B samples each read, together, exactly what one rank of world*B reads,
// and never the same sample within a step.
static void check_ranks_equal_one_big_rank(bool shuffle) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {41, 30, 50});   // T = 5: 8 + 5 + 9 = 22
    const int b = 3, T = 5;
    DataLoader single(glob, 2 * b, T, 0, 1, shuffle, 7, kVocab);
    DataLoader rank0(glob, b, T, 0, 2, shuffle, 7, kVocab);
    DataLoader rank1(glob, b, T, 1, 2, shuffle, 7, kVocab);
    ASSERT_EQ(single.samples_per_epoch(), 22);
    for (int step = 0; step < 12; step++) {   // several epochs, crossing boundaries mid-batch
        const Batch all = next(single), r0 = next(rank0), r1 = next(rank1);
        std::vector<int32_t> joined = r0.inputs;
        joined.insert(joined.end(), r1.inputs.begin(), r1.inputs.end());
        EXPECT_EQ(joined, all.inputs) << "step " << step;
        std::vector<int32_t> joined_targets = r0.targets;
        joined_targets.insert(joined_targets.end(), r1.targets.begin(), r1.targets.end());
        EXPECT_EQ(joined_targets, all.targets) << "step " << step;
        std::set<int32_t> starts0, starts1;
        for (int32_t s : row_starts(r0, b, T))
            starts0.insert(s);
        for (int32_t s : row_starts(r1, b, T))
            starts1.insert(s);
        for (int32_t s : starts0)
            EXPECT_EQ(starts1.count(s), 0u) << "step " << step << " sample " << s;
        EXPECT_EQ(rank0.position(), single.position());
        EXPECT_EQ(rank1.position(), single.position());
    }
}

TEST(DataLoader, TwoRanksEqualOneRankWithTwiceB) { check_ranks_equal_one_big_rank(false); }
TEST(DataLoader, TwoRanksEqualOneRankWithTwiceBShuffled) { check_ranks_equal_one_big_rank(true); }

TEST(DataLoader, SetPositionReproducesBatchesAcrossWorldSizes) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {101, 64});   // T = 6: 16 + 10 = 26
    const int T = 6;
    for (bool shuffle : {false, true}) {
        DataLoader a(glob, 4, T, 0, 1, shuffle, 123, kVocab);
        std::vector<Batch> batches;
        for (int i = 0; i < 20; i++)
            batches.push_back(next(a));
        // Same loader, rewound.
        a.set_position(8);   // after two batches of 4
        for (int i = 2; i < 20; i++)
            EXPECT_EQ(next(a).inputs, batches[i].inputs) << i;
        // A fresh loader resumed at the position, with a different world size (2 ranks of 2).
        DataLoader r0(glob, 2, T, 0, 2, shuffle, 123, kVocab);
        DataLoader r1(glob, 2, T, 1, 2, shuffle, 123, kVocab);
        r0.set_position(4 * 13);
        r1.set_position(4 * 13);
        for (int i = 13; i < 20; i++) {
            Batch x = next(r0);
            const Batch y = next(r1);
            x.inputs.insert(x.inputs.end(), y.inputs.begin(), y.inputs.end());
            EXPECT_EQ(x.inputs, batches[i].inputs) << "shuffle " << shuffle << " batch " << i;
        }
    }
    DataLoader a(glob, 4, T, 0, 1, false, 0, kVocab);
    EXPECT_CONTAINS(error_of([&] { a.set_position(-1); }), "position");
}

// Round 16: a resume with another -t read sample p of the new cut, so a shorter T read again
// tokens already trained on. The position is mapped: in order, to the first sample of the new cut
// that starts at or after the saved sample's first token (same epoch); shuffled, to the same
// fraction of the epoch. Checked against the counting shards' tokens, which name (shard, offset).
TEST(DataLoader, APositionOfAnotherSeqLenMapsToTheSamePlaceInTheTokens) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {101, 64});   // T 6: 16 + 10 samples; T 4: 25 + 15
    for (const auto& [saved_T, T] : {std::pair{6, 4}, std::pair{4, 6}, std::pair{6, 6}}) {
        DataLoader saved(glob, 1, saved_T, 0, 1, false, 0, kVocab), now(glob, 1, T, 0, 1, false, 0, kVocab);
        const int64_t S_then = saved.samples_per_epoch(), S_now = now.samples_per_epoch();
        now.set_position(S_now - 1);
        const int32_t last_start_now = next(now).inputs[0];
        for (int64_t p = 0; p < 3 * S_then; p++) {
            saved.set_position(p);
            const int32_t first_token = next(saved).inputs[0];   // 1000 * shard + offset
            const int64_t q = now.position_at_seq_len(p, saved_T);
            // past the new cut's last sample (a shard's tail), the epoch is done: the next one begins
            const bool epoch_done = first_token > last_start_now;
            EXPECT_EQ(q / S_now, p / S_then + (epoch_done ? 1 : 0)) << "T " << saved_T << " -> " << T << ", p " << p;
            if (!epoch_done) {
                now.set_position(q);
                EXPECT_GE(next(now).inputs[0], first_token) << "nothing read twice, p " << p;
            }
            if (q % S_now != 0 || epoch_done) {   // and nothing skipped: the sample before starts before it
                now.set_position(q - 1);
                EXPECT_LT(next(now).inputs[0], first_token) << "p " << p;
            }
            if (saved_T == T) {
                EXPECT_EQ(q, p);
            }
        }
        DataLoader shuffled(glob, 1, T, 0, 1, true, 7, kVocab);
        for (int64_t p : {(int64_t)0, (int64_t)5, S_then - 1, S_then + 3})
            EXPECT_EQ(shuffled.position_at_seq_len(p, saved_T), p / S_then * S_now + p % S_then * S_now / S_then);
    }
}

TEST(DataLoader, ShuffleIsADeterministicPermutationPerEpoch) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {97, 33});   // T = 4: 24 + 8 = 32 samples
    const int B = 4, T = 4, S = 32;
    auto epoch_orders = [&](uint64_t seed, int epochs) {
        DataLoader loader(glob, B, T, 0, 1, true, seed, kVocab);
        EXPECT_EQ(loader.samples_per_epoch(), S);
        std::vector<std::vector<int32_t>> orders(epochs);
        for (int e = 0; e < epochs; e++) {
            for (int step = 0; step < S / B; step++) {
                for (int32_t s : row_starts(next(loader), B, T))
                    orders[e].push_back(s);
            }
        }
        return orders;
    };
    const auto orders = epoch_orders(42, 3);
    std::vector<int32_t> unshuffled;
    for (int k = 0; k < 24; k++)
        unshuffled.push_back(4 * k);
    for (int k = 0; k < 8; k++)
        unshuffled.push_back(1000 + 4 * k);
    for (int e = 0; e < 3; e++) {
        std::vector<int32_t> sorted = orders[e];
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(sorted, unshuffled) << "epoch " << e << " is not a permutation";
        EXPECT_NE(orders[e], unshuffled) << "epoch " << e << " was not shuffled";
    }
    EXPECT_NE(orders[0], orders[1]);
    EXPECT_NE(orders[1], orders[2]);
    EXPECT_EQ(epoch_orders(42, 3), orders);         // same seed: same data order
    EXPECT_NE(epoch_orders(43, 1)[0], orders[0]);   // different seed: different order
}

TEST(DataLoader, ShuffledOrderIsPinned) {
    // The order is part of the checkpoint contract (resume must replay it), so pin it: a change
    // here silently changes which data a resumed run sees.
    const std::vector<int64_t> order = DataLoader::shuffled_order(10, 42, 0);
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_EQ(order, (std::vector<int64_t>{9, 6, 2, 0, 1, 4, 3, 8, 5, 7}));
    EXPECT_EQ(DataLoader::shuffled_order(10, 42, 0), order);
    EXPECT_NE(DataLoader::shuffled_order(10, 42, 1), order);
    EXPECT_EQ(DataLoader::shuffled_order(1, 42, 0), (std::vector<int64_t>{0}));
    EXPECT_TRUE(DataLoader::shuffled_order(0, 42, 0).empty());
}

TEST(DataLoader, ShuffleUsesEachEpochsOwnOrderAcrossTheBoundary) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {21});   // T = 4: 5 samples
    DataLoader loader(glob, 3, 4, 0, 1, true, 9, kVocab);
    const std::vector<int64_t> e0 = DataLoader::shuffled_order(5, 9, 0);
    const std::vector<int64_t> e1 = DataLoader::shuffled_order(5, 9, 1);
    const Batch first = next(loader);    // slots 0, 1, 2 of epoch 0
    const Batch second = next(loader);   // slots 3, 4 of epoch 0, slot 0 of epoch 1
    const std::vector<int32_t> expected_first = {int32_t(4 * e0[0]), int32_t(4 * e0[1]), int32_t(4 * e0[2])};
    const std::vector<int32_t> expected_second = {int32_t(4 * e0[3]), int32_t(4 * e0[4]), int32_t(4 * e1[0])};
    EXPECT_EQ(row_starts(first, 3, 4), expected_first);
    EXPECT_EQ(row_starts(second, 3, 4), expected_second);
}

TEST(DataLoader, TooFewSamplesForOneStep) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {17, 3});   // T = 4: 4 samples
    const std::string msg = error_of([&] { DataLoader(glob, 3, 4, 0, 2, false, 0, kVocab); });
    EXPECT_CONTAINS(msg, glob);
    EXPECT_CONTAINS(msg, "only 4 samples");
    EXPECT_CONTAINS(msg, "20 tokens");
    EXPECT_CONTAINS(msg, "2*3");
    DataLoader ok(glob, 2, 4, 1, 2, false, 0, kVocab);   // exactly enough
    EXPECT_EQ(row_starts(next(ok), 2, 4), (std::vector<int32_t>{8, 12}));
}

TEST(DataLoader, RejectsBadArguments) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {100});
    EXPECT_CONTAINS(error_of([&] { DataLoader(glob, 1, 4, 2, 2, false, 0, kVocab); }), "rank 2");
    EXPECT_CONTAINS(error_of([&] { DataLoader(glob, 0, 4, 0, 1, false, 0, kVocab); }), "B=0");
    EXPECT_CONTAINS(error_of([&] { DataLoader(glob, 1, 0, 0, 1, false, 0, kVocab); }), "T=0");
    EXPECT_CONTAINS(error_of([&] { DataLoader(dir.file("nothing_*.bin"), 1, 4, 0, 1, false, 0, kVocab); }),
                    "no files match");
}

TEST(DataLoader, ValidatesEveryShardHeaderUpFront) {
    ScratchDir dir;
    const std::string glob = write_counting_shards(dir, {50, 50, 50});
    // Corrupt the last shard: drop its final byte.
    const std::string bad = dir.file("d_000002.bin");
    ASSERT_EQ(truncate(bad.c_str(), 1024 + 2 * 50 - 1), 0);
    const std::string msg = error_of([&] { DataLoader(glob, 1, 4, 0, 1, false, 0, kVocab); });
    EXPECT_CONTAINS(msg, bad);
    EXPECT_CONTAINS(msg, "truncated");
}

TEST(DataLoader, TokenOutOfVocabularyNamesShardOffsetAndValue) {
    ScratchDir dir;
    std::vector<uint32_t> good(20, 5), bad(20, 5);
    bad[13] = 300;
    write_shard(dir.file("s_000000.bin"), good.data(), good.size(), 2);
    write_shard(dir.file("s_000001.bin"), bad.data(), bad.size(), 2);
    // found by the scan when the loader is made
    std::string msg = error_of([&] { DataLoader loader(dir.file("s_*.bin"), 2, 4, 0, 1, false, 0, 257); });
    EXPECT_CONTAINS(msg, dir.file("s_000001.bin"));
    EXPECT_CONTAINS(msg, "token 300 at position 13 is not below the vocabulary size 257");
    // and as it is read: on 2 ranks with B = 1, rank 0 scans tokens [0, 10) of each shard but
    // reads samples 0, 2, 4, 6; sample 2 (tokens 8..12 of shard 0) holds position 11
    std::vector<uint32_t> late(20, 5);
    late[11] = 300;
    write_shard(dir.file("s_000000.bin"), late.data(), late.size(), 2);
    write_shard(dir.file("s_000001.bin"), good.data(), good.size(), 2);
    DataLoader rank0(dir.file("s_*.bin"), 1, 4, 0, 2, false, 0, 257);
    std::vector<int32_t> inputs(4), targets(4);
    rank0.next_batch(inputs.data(), targets.data());   // sample 0
    msg = error_of([&] { rank0.next_batch(inputs.data(), targets.data()); });
    EXPECT_CONTAINS(msg, dir.file("s_000000.bin"));
    EXPECT_CONTAINS(msg, "offset 11");
    EXPECT_CONTAINS(msg, "300");
    EXPECT_CONTAINS(msg, "257");
    EXPECT_CONTAINS(error_of([&] { DataLoader rank1(dir.file("s_*.bin"), 1, 4, 1, 2, false, 0, 257); }), "position 11");
}

// ---------------------------------------------------------------------------------------------
// prepare_text end to end: run the built tool, read its shards back.

namespace {

// build/prepare_text, which the Makefile builds before the test binary; a missing tool is a
// failure, not a skip.
std::string prepare_text_binary() { return build_dir() + "/prepare_text"; }

}   // namespace

TEST(DataLoaderPrepareText, EndToEndShardsReadBackToTheOriginalBytes) {
    const std::string tool = prepare_text_binary();
    ASSERT_EQ(access(tool.c_str(), X_OK), 0)
        << tool << " is missing or not executable: run make (it builds the tools before the tests)";
    ScratchDir dir;
    std::string doc1, doc2;
    for (int i = 0; i < 30; i++)
        doc1 += format("Line %d of the first document, caf\xc3\xa9.\n", i);
    for (int i = 0; i < 12; i++)
        doc2 += format("Verse %d: \xe2\x80\x9cquoted\xe2\x80\x9d text\tand a tab.\n", i);
    write_text(dir.file("one.txt"), doc1);
    write_text(dir.file("two.txt"), doc2);
    const std::string out = dir.file("out");
    std::string output;
    const int rc = run_command(tool + " --input " + dir.file("one.txt") + " --input " + dir.file("two.txt") +
                                   " --out-dir " + out + " --name tiny --val-fraction 0.1 --shard-tokens 500",
                               &output);
    ASSERT_EQ(rc, 0) << output;
    EXPECT_CONTAINS(output, "train:");
    EXPECT_CONTAINS(output, "val:");

    const Tokenizer tokenizer = Tokenizer::load(out + "/tokenizer.bin");
    ASSERT_TRUE(tokenizer.is_byte_level());
    const std::string expected = std::string(kEndOfText) + doc1 + kEndOfText + doc2;
    const int64_t stream_tokens = 2 + static_cast<int64_t>(doc1.size() + doc2.size());

    // Train shards then val shards, concatenated, decode to exactly the input documents.
    const std::vector<std::string> train = expand_glob(out + "/tiny_train_*.bin");
    const std::vector<std::string> val = expand_glob(out + "/tiny_val_*.bin");
    ASSERT_GE(train.size(), 3u);   // ~1500 train tokens at 500 per shard
    ASSERT_EQ(val.size(), 1u);
    std::vector<int> ids;
    int64_t train_tokens = 0;
    for (const std::string& path : train) {
        const ShardInfo info = read_shard_header(path);
        EXPECT_EQ(info.token_bytes, 2);   // vocab 257: llm.c's uint16 format
        EXPECT_LE(info.num_tokens, 500);
        train_tokens += info.num_tokens;
        for (uint32_t t : read_shard(path))
            ids.push_back(static_cast<int>(t));
    }
    for (const std::string& path : val) {
        for (uint32_t t : read_shard(path))
            ids.push_back(static_cast<int>(t));
    }
    EXPECT_EQ(static_cast<int64_t>(ids.size()), stream_tokens);
    EXPECT_EQ(tokenizer.decode(ids), expected);
    EXPECT_EQ(ids[0], 256);
    EXPECT_EQ(static_cast<int64_t>(train.size()), (train_tokens + 499) / 500);   // all full but the last
    // The val split is about 10% of the stream and starts at the beginning of a line.
    const int64_t val_tokens = stream_tokens - train_tokens;
    EXPECT_NEAR(static_cast<double>(val_tokens), 0.1 * stream_tokens, 60.0);
    EXPECT_EQ(ids[train_tokens - 1], '\n');

    // DataLoader over the train glob: every sample is the stream's tokens at its offset.
    const int B = 2, T = 16;
    DataLoader loader(out + "/tiny_train_*.bin", B, T, 0, 1, false, 0, tokenizer.vocab_size());
    std::vector<int64_t> sample_offsets;   // stream offset of each sample's first token
    int64_t shard_offset = 0;
    for (const std::string& path : train) {
        const int64_t n = read_shard_header(path).num_tokens;
        for (int64_t k = 0; k < (n - 1) / T; k++)
            sample_offsets.push_back(shard_offset + k * T);
        shard_offset += n;
    }
    ASSERT_EQ(static_cast<int64_t>(sample_offsets.size()), loader.samples_per_epoch());
    std::string read_back;
    for (int64_t step = 0; step < loader.samples_per_epoch() / B; step++) {
        const Batch b = next(loader);
        for (int row = 0; row < B; row++) {
            const int64_t offset = sample_offsets[step * B + row];
            std::vector<int> in(b.inputs.begin() + row * T, b.inputs.begin() + (row + 1) * T);
            std::vector<int> tg(b.targets.begin() + row * T, b.targets.begin() + (row + 1) * T);
            EXPECT_EQ(tokenizer.decode(in),
                      tokenizer.decode(std::vector<int>(ids.begin() + offset, ids.begin() + offset + T)));
            EXPECT_EQ(tg, std::vector<int>(ids.begin() + offset + 1, ids.begin() + offset + T + 1));
            if (offset == 0) read_back = tokenizer.decode(in);
        }
    }
    EXPECT_EQ(read_back, std::string(kEndOfText) + doc1.substr(0, T - 1));
}

// Round 24: scripts/prepare_kjv.sh (run_default.sh's data step) said "data/kjv ready" over an
// empty shard, and train_gpt then refused it on every run, nothing saying how to mend it; a
// truncated kjv.txt was tokenised as it was. A damaged shard or text is made again.
TEST(DataLoaderPrepareText, PrepareKjvMakesADamagedShardOrTextAgain) {
    ScratchDir dir;   // a checkout of the script and the tool: the script works from its repo root
    make_dirs(dir.file("scripts"));
    make_dirs(dir.file("build"));
    ASSERT_EQ(std::system(("cp '" + repo_root() + "/scripts/prepare_kjv.sh' '" + dir.file("scripts") + "/'").c_str()),
              0);
    ASSERT_EQ(::symlink((build_dir() + "/prepare_text").c_str(), dir.file("build/prepare_text").c_str()), 0);
    const std::string script = dir.file("scripts/prepare_kjv.sh"), shard = dir.file("data/kjv/kjv_train_000000.bin");
    std::string out;
    ASSERT_EQ(run_command(script, &out), 0) << out;
    const ShardInfo made = read_shard_header(shard);
    write_text(shard, "");
    ASSERT_EQ(run_command(script, &out), 0) << out;
    EXPECT_CONTAINS(out,
                    "prepare_kjv: data/kjv/kjv_train_000000.bin is damaged (not a whole shard); making the "
                    "shards again");
    EXPECT_EQ(read_shard_header(shard).num_tokens, made.num_tokens);
    write_text(dir.file("data/kjv/kjv.txt"), "In the beginning\n");
    std::remove(dir.file("data/kjv/kjv_val_000000.bin").c_str());
    ASSERT_EQ(run_command(script, &out), 0) << out;
    EXPECT_CONTAINS(out, "prepare_kjv: data/kjv/kjv.txt is incomplete (17 bytes); making it again");
    EXPECT_EQ(read_shard_header(shard).num_tokens, made.num_tokens);
    EXPECT_CONTAINS(out, "data/kjv ready");
    // round 28: beside prepare_text's publishing marker (a run cut short while it put the shards in
    // place) it said "ready", and the trainer refused the shards on every run
    write_text(dir.file("data/kjv/kjv.publishing"), "prepare_text is replacing the dataset kjv here\n");
    ASSERT_EQ(run_command(script, &out), 0) << out;
    EXPECT_CONTAINS(out,
                    "prepare_kjv: data/kjv/kjv.publishing: an earlier preparation was cut short; making the "
                    "shards again");
    EXPECT_FALSE(file_exists(dir.file("data/kjv/kjv.publishing"))) << out;
    EXPECT_EQ(read_shard_header(shard).num_tokens, made.num_tokens);
}

TEST(DataLoaderPrepareText, RerunRemovesStaleShards) {
    const std::string tool = prepare_text_binary();
    ASSERT_EQ(access(tool.c_str(), X_OK), 0)
        << tool << " is missing or not executable: run make (it builds the tools before the tests)";
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 100; i++)
        text += "some words on a line\n";
    write_text(dir.file("t.txt"), text);
    std::string output;
    const std::string base = tool + " --input " + dir.file("t.txt") + " --out-dir " + dir.path;
    ASSERT_EQ(run_command(base + " --shard-tokens 300", &output), 0) << output;
    EXPECT_EQ(expand_glob(dir.file("data_train_*.bin")).size(), 7u);   // 1996 tokens / 300
    ASSERT_EQ(run_command(base, &output), 0) << output;
    EXPECT_EQ(expand_glob(dir.file("data_train_*.bin")).size(), 1u);
    EXPECT_CONTAINS(output, "removed stale shard");
}

// Round 25: a run over an earlier dataset of the same name, cut short while writing its shards (a
// full disk, a kill), left the new run's first shards beside the old run's last ones, which a glob
// read as one dataset without a word. The new shards take their names only once all are written.
TEST(DataLoaderPrepareText, ARunCutShortWhileWritingShardsLeavesTheEarlierDatasetWhole) {
    ScratchDir dir;
    std::string small, large;
    for (int i = 0; i < 100; i++)
        small += "some words on a line\n";
    for (int i = 0; i < 400; i++)
        large += format("other words, line %d\n", i);
    write_text(dir.file("small.txt"), small);
    write_text(dir.file("large.txt"), large);
    const std::string out = dir.file("out"), tool = prepare_text_binary() + " --out-dir " + out + " --shard-tokens 300";
    std::string output;
    ASSERT_EQ(run_command(tool + " --input " + dir.file("small.txt"), &output), 0) << output;
    auto dataset = [&] {
        std::map<std::string, std::string> files;
        for (const char* split : {"train", "val"}) {
            for (const std::string& path : expand_glob(out + "/data_" + split + "_*.bin"))
                files[path] = read_text(path);
        }
        return files;
    };
    const auto earlier = dataset();
    ASSERT_EQ(earlier.size(), 8u);   // 7 train shards, 1 val
    // the fourth shard of the new dataset cannot be written (its temporary names are directories)
    for (const char* blocker : {"data_train_000003.bin.tmp", "data_train_000003.bin.staged.tmp"})
        make_dirs(out + "/" + blocker + "/x");
    EXPECT_EQ(run_command(tool + " --input " + dir.file("large.txt"), &output), 1) << output;
    EXPECT_CONTAINS(output, "data_train_000003.bin");
    EXPECT_EQ(dataset(), earlier) << "the earlier dataset, whole";
    ASSERT_EQ(std::system(("rm -r '" + out + "'/*.tmp").c_str()), 0);
    write_text(out + "/data_train_000999.bin.staged", "of a run cut short");   // swept with the stale shards
    ASSERT_EQ(run_command(tool + " --input " + dir.file("large.txt"), &output), 0) << output;
    const auto later = dataset();
    EXPECT_GT(later.size(), earlier.size());
    for (const auto& [path, bytes] : later)
        EXPECT_NE(earlier.count(path) ? earlier.at(path) : "", bytes) << path << ": a shard of the new dataset";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(out, ec))
        EXPECT_EQ(entry.path().string().find(".staged"), std::string::npos) << entry.path();
    // round 26: cut short after the shards took their names (the tokenizer cannot be written: a full
    // disk), the directory held the new shards and the earlier ones' extras, which a trainer read as
    // one dataset; the marker prepare_text leaves until its last step refuses them
    make_dirs(out + "/tokenizer.bin.tmp/x");
    EXPECT_EQ(run_command(tool + " --input " + dir.file("small.txt"), &output), 1) << output;
    EXPECT_TRUE(file_exists(out + "/data.publishing"));
    const std::string train = train_gpt_binary() + " --device cpu -e d2 --n-embd 32 -b 2 -t 16 -x 1 -g 0 -v 0 -i '" +
                              out + "/data_train_*.bin' -j '' -o '" + dir.file("run") + "'";
    EXPECT_EQ(run_command(train, &output), 1) << output;
    EXPECT_CONTAINS(output, "error: " + out +
                                "/data.publishing: prepare_text was replacing the dataset data there and did not "
                                "finish (a full disk, a kill?)");
    EXPECT_CONTAINS(output, "run that prepare_text command again");
    ASSERT_EQ(std::system(("rm -r '" + out + "/tokenizer.bin.tmp'").c_str()), 0);
    ASSERT_EQ(run_command(tool + " --input " + dir.file("small.txt"), &output), 0) << output;
    EXPECT_FALSE(file_exists(out + "/data.publishing"));
    EXPECT_EQ(dataset(), earlier) << "the same input and flags: the same dataset";
    EXPECT_EQ(run_command(train, &output), 0) << output;
}

TEST(DataLoaderPrepareText, CommandLineErrors) {
    const std::string tool = prepare_text_binary();
    ASSERT_EQ(access(tool.c_str(), X_OK), 0)
        << tool << " is missing or not executable: run make (it builds the tools before the tests)";
    ScratchDir dir;
    write_text(dir.file("ok.txt"), "hello\n");
    write_text(dir.file("empty.txt"), "");
    std::string output;

    EXPECT_EQ(run_command(tool + " --input " + dir.file("missing.txt") + " --out-dir " + dir.path, &output), 1);
    EXPECT_CONTAINS(output, "error: cannot open " + dir.file("missing.txt"));

    EXPECT_EQ(run_command(tool + " --input " + dir.file("empty.txt") + " --out-dir " + dir.path, &output), 1);
    EXPECT_CONTAINS(output, "error: input " + dir.file("empty.txt") + " is empty");

    EXPECT_EQ(run_command(tool + " --input " + dir.file("ok.txt") + " --out-dir " + dir.path + " --val-fraction 1.5",
                          &output),
              1);
    EXPECT_CONTAINS(output, "error: --val-fraction must be in [0, 1)");

    // round 24: the BPE training's flags where no BPE trains (a byte-level dataset, without a word)
    EXPECT_EQ(run_command(tool + " --input " + dir.file("ok.txt") + " --out-dir " + dir.file("v") + " --vocab-size 500",
                          &output),
              1);
    EXPECT_CONTAINS(output,
                    "error: --vocab-size sets the BPE that --tokenizer bpe trains; --tokenizer byte trains none");
    EXPECT_FALSE(file_exists(dir.file("v")));
    EXPECT_EQ(run_command(tool + " --input " + dir.file("ok.txt") + " --out-dir " + dir.file("v") +
                              " --tokenizer bpe --vocab-size 300 --name first",
                          &output),
              0)
        << output;
    EXPECT_EQ(run_command(tool + " --input " + dir.file("ok.txt") + " --out-dir " + dir.file("v") +
                              " --tokenizer bpe --bpe-dir " + dir.file("v") + " --train-bytes 100 --name first",
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output, "prepare_text: notice: --train-bytes has no effect: the BPE of --bpe-dir " + dir.file("v") +
                                " is used as it is");

    EXPECT_EQ(run_command(tool + " --input " + dir.file("ok.txt") + " --out-dir " + dir.path + " --bogus 3", &output),
              1);
    EXPECT_CONTAINS(output, "error:");
    EXPECT_CONTAINS(output, "--bogus");

    EXPECT_EQ(run_command(tool + " --out-dir " + dir.path, &output), 1);
    EXPECT_CONTAINS(output, "--input");

    EXPECT_EQ(run_command(tool + " --help", &output), 0);
    EXPECT_CONTAINS(output, "--val-fraction");
    EXPECT_CONTAINS(output, "--shard-tokens");
    EXPECT_FALSE(file_exists(dir.file("tokenizer.bin")));   // no failed run wrote anything
}

TEST(DataLoader, VocabBoundaryIsExclusive) {
    ScratchDir dir;
    std::vector<uint32_t> tokens(9, 256);   // 256 = vocab - 1: the byte-level EOT, valid
    write_shard(dir.file("edge.bin"), tokens.data(), tokens.size(), 2);
    DataLoader ok(dir.file("edge.bin"), 2, 4, 0, 1, false, 0, 257);
    std::vector<int32_t> inputs(8), targets(8);
    ok.next_batch(inputs.data(), targets.data());
    EXPECT_EQ(inputs, std::vector<int32_t>(8, 256));
    EXPECT_EQ(targets, std::vector<int32_t>(8, 256));
    tokens[8] = 257;   // = vocab: the last target of the last sample
    write_shard(dir.file("edge.bin"), tokens.data(), tokens.size(), 2);
    // found when the loader is made (before a run writes anything), not when the token is read
    const std::string msg = error_of([&] { DataLoader bad(dir.file("edge.bin"), 2, 4, 0, 1, false, 0, 257); });
    EXPECT_CONTAINS(msg, dir.file("edge.bin"));
    EXPECT_CONTAINS(msg, "token 257 at position 8 is not below the vocabulary size 257");
}

// The scan at start is split over the ranks: rank r of W scans the r-th W-th of every shard, so
// together they scan each token once, and the rank whose share holds a bad token fails.
TEST(DataLoader, TheTokenScanIsSplitOverTheRanksAndCoversEveryToken) {
    ScratchDir dir;
    for (int64_t bad_at : {0, 4, 5, 6, 100, 101, 299}) {
        SCOPED_TRACE("bad token at " + std::to_string(bad_at));
        for (int token_bytes : {2, 4}) {
            std::vector<uint32_t> tokens(300, 7);
            tokens[bad_at] = token_bytes == 2 ? 65535 : 70000;
            write_shard(dir.file("s.bin"), tokens.data(), tokens.size(), token_bytes);
            const int vocab = token_bytes == 2 ? 1000 : 69999;
            int failed = 0;
            for (int rank = 0; rank < 3; rank++) {
                try {
                    DataLoader loader(dir.file("s.bin"), 2, 4, rank, 3, false, 0, vocab);
                } catch (const Error& e) {
                    failed++;
                    EXPECT_EQ(rank, (int)(bad_at * 3 / 300)) << "the rank whose share holds it";
                    EXPECT_CONTAINS(e.what(), format("at position %lld", (long long)bad_at));
                }
            }
            EXPECT_EQ(failed, 1);
        }
    }
    // the search itself: ranges, both widths, a limit above every uint16
    std::vector<uint16_t> narrow(200000, 3);
    narrow[150001] = 9;
    EXPECT_EQ(find_token_at_least(narrow.data(), 2, 0, 200000, 9), 150001);
    EXPECT_EQ(find_token_at_least(narrow.data(), 2, 0, 150001, 9), -1);
    EXPECT_EQ(find_token_at_least(narrow.data(), 2, 150001, 150002, 9), 150001);
    EXPECT_EQ(find_token_at_least(narrow.data(), 2, 0, 200000, 70000), -1);
    std::vector<uint32_t> wide(70000, 3);
    wide[65537] = 4000000000u;
    EXPECT_EQ(find_token_at_least(wide.data(), 4, 0, 70000, 50257), 65537);
    EXPECT_EQ(find_token_at_least(wide.data(), 4, 65538, 70000, 50257), -1);
}

// ---------------------------------------------------------------------------------------------
// prepare_text with BPE, JSONL, resumption and wide vocabularies.

namespace {

// Token stream of a prepared directory: NAME_train_* then NAME_val_*, concatenated.
std::vector<int> prepared_stream(const std::string& dir, const std::string& name) {
    std::vector<int> ids;
    for (const char* split : {"train", "val"}) {
        std::vector<std::string> paths;
        try {
            paths = expand_glob(dir + "/" + name + "_" + split + "_*.bin");
        } catch (const Error&) {   // no val split
        }
        for (const std::string& p : paths) {
            for (uint32_t t : read_shard(p))
                ids.push_back(static_cast<int>(t));
        }
    }
    return ids;
}

std::string tool_command(const std::string& args) { return build_dir() + "/prepare_text " + args; }

std::string jsonl_line(const std::string& text) { return nlohmann::json({{"text", text}, {"id", 7}}).dump() + "\n"; }

// Lines of English-like text with some non-ASCII: enough for a few hundred merges.
std::string sample_text(int lines) {
    const char* words[] = {"the",
                           "lord",
                           "said",
                           "unto",
                           "moses",
                           "and",
                           "caf\xc3\xa9",
                           "\xe6\x97\xa5\xe6\x9c\xac",
                           "it's",
                           "1234",
                           "\xf0\x9f\x98\x80",
                           "land",
                           "of",
                           "egypt"};
    std::string text;
    for (int i = 0; i < lines; i++) {
        for (int w = 0; w < 8; w++)
            text += std::string(w ? " " : "") + words[(i * 7 + w * 3 + i / 5) % 14];
        text += i % 9 == 8 ? ".\n\n" : ",\n";
    }
    return text;
}

}   // namespace

TEST(DataLoaderPrepareText, BpeShardsDecodeToTheDocumentsAndTrain) {
    ScratchDir dir;
    const std::string doc1 = sample_text(300);
    const std::vector<std::string> jdocs = {"First JSON document, na\xc3\xafve.",
                                            "Second:\n\"quoted\"\ttab \xf0\x9f\x8e\x89", sample_text(40)};
    write_text(dir.file("one.txt"), doc1);
    write_text(dir.file("more.jsonl"), jsonl_line(jdocs[0]) + "\n  \n" + jsonl_line(jdocs[1]) + jsonl_line(jdocs[2]));
    const std::string inputs = " --input " + dir.file("one.txt") + " --input " + dir.file("more.jsonl");
    std::string output;
    ASSERT_EQ(run_command(tool_command(inputs + " --out-dir " + dir.file("a") +
                                       " --name x --tokenizer bpe"
                                       " --vocab-size 320 --val-fraction 0.1 --threads 2 --chunk-bytes 3000"),
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output, "BPE, vocab 320, uint16 shards");
    EXPECT_CONTAINS(output, "tokenizing");
    EXPECT_CONTAINS(output, "trained BPE: vocab 320");
    EXPECT_FALSE(file_exists(dir.file("a/x.parts")));   // the resumable parts are gone once done

    const Tokenizer tok = Tokenizer::load(dir.file("a/tokenizer.bin"));
    ASSERT_NE(tok.bpe(), nullptr);   // encoder.json + vocab.bpe beside it
    EXPECT_EQ(tok.vocab_size(), 320);
    const int eot = tok.eot_token();
    std::vector<int> expected = {eot};
    for (int id : tok.encode(doc1))
        expected.push_back(id);
    for (const std::string& d : jdocs) {
        expected.push_back(eot);
        for (int id : tok.encode(d))
            expected.push_back(id);
    }
    const std::vector<int> stream = prepared_stream(dir.file("a"), "x");
    EXPECT_EQ(stream, expected);
    EXPECT_LT(stream.size() * 2, doc1.size());   // BPE: well under one token per byte
    std::string text = kEndOfText + doc1;
    for (const std::string& d : jdocs)
        text += kEndOfText + d;
    EXPECT_EQ(tok.decode(stream), text);
    const int64_t val = read_shard_header(dir.file("a/x_val_000000.bin")).num_tokens;
    EXPECT_NEAR(static_cast<double>(val), 0.1 * stream.size(), 0.05 * stream.size());

    // One thread and one part give the same files, and so does reusing the trained tokenizer.
    ASSERT_EQ(run_command(tool_command(inputs + " --out-dir " + dir.file("b") +
                                       " --name x --tokenizer bpe"
                                       " --vocab-size 320 --val-fraction 0.1 --threads 1"),
                          &output),
              0)
        << output;
    ASSERT_EQ(run_command(tool_command(inputs + " --out-dir " + dir.file("c") +
                                       " --name x --tokenizer bpe"
                                       " --bpe-dir " +
                                       dir.file("a") + " --val-fraction 0.1"),
                          &output),
              0)
        << output;
    for (const char* f : {"x_train_000000.bin", "x_val_000000.bin", "tokenizer.bin", "encoder.json", "vocab.bpe"}) {
        EXPECT_EQ(read_text(dir.file("b/") + f), read_text(dir.file("a/") + f)) << f;
        EXPECT_EQ(read_text(dir.file("c/") + f), read_text(dir.file("a/") + f)) << f;
    }

    // The engine trains on them and samples words.
    ASSERT_EQ(run_command(train_gpt_binary() + " -i '" + dir.file("a/x_train_*.bin") + "' -j '" +
                              dir.file("a/x_val_*.bin") + "' --tokenizer " + dir.file("a/tokenizer.bin") +
                              " -e d2 --n-embd 32 -b 2 -t 16 -m 1 -x 2 -v 0 -g 8 -o " + dir.file("run"),
                          &output),
              0)
        << output;
    EXPECT_CONTAINS(output, "step 2/2");
    EXPECT_CONTAINS(output, "sample");

    // Byte-level into the same directory removes the now stale merges.
    ASSERT_EQ(run_command(tool_command(inputs + " --out-dir " + dir.file("a") + " --name x"), &output), 0) << output;
    EXPECT_FALSE(file_exists(dir.file("a/encoder.json")));
    EXPECT_TRUE(Tokenizer::load(dir.file("a/tokenizer.bin")).is_byte_level());
}

TEST(DataLoaderPrepareText, Gpt2TokenizerGivesGpt2sIds) {
    ScratchDir dir;
    write_text(dir.file("hello.txt"), "Hello world");
    const std::string gpt2 = repo_root() + "/../shared/data/gpt2";
    std::string output;
    ASSERT_EQ(run_command(tool_command("--input " + dir.file("hello.txt") + " --out-dir " + dir.path +
                                       " --tokenizer gpt2 --bpe-dir " + gpt2 + " --val-fraction 0"),
                          &output),
              0)
        << output;
    EXPECT_EQ(prepared_stream(dir.path, "data"), (std::vector<int>{50256, 15496, 995}));
    EXPECT_EQ(read_shard_header(dir.file("data_train_000000.bin")).token_bytes, 2);   // llm.c's GPT-2 format
    EXPECT_EQ(Tokenizer::load(dir.file("tokenizer.bin")).vocab_size(), 50257);

    EXPECT_EQ(
        run_command(tool_command("--input " + dir.file("hello.txt") + " --out-dir " + dir.path + " --tokenizer gpt2"),
                    &output),
        1);
    EXPECT_CONTAINS(output, "error: --tokenizer gpt2 needs --bpe-dir");
    EXPECT_EQ(run_command(tool_command("--input " + dir.file("hello.txt") + " --out-dir " + dir.path +
                                       " --tokenizer bpe --bpe-dir " + dir.file("nowhere")),
                          &output),
              1);
    EXPECT_CONTAINS(output, "error: " + dir.file("nowhere") + ": expected a directory with encoder.json and vocab.bpe");
}

// The input of the resume tests, ~150 kB in 8 parts of ~20 kB, and the command that prepares it
// with a BPE (the output directory to be appended).
std::string resumable_input(const ScratchDir& dir) {
    write_text(dir.file("big.txt"), sample_text(3000));
    return tool_command("--input " + dir.file("big.txt") +
                        " --tokenizer bpe --vocab-size 300"
                        " --chunk-bytes 20000 --shard-tokens 10000 --out-dir ");
}

TEST(DataLoaderPrepareText, ResumesAnInterruptedRun) {
    ScratchDir dir;
    const std::string base = resumable_input(dir);
    std::string output;
    ASSERT_EQ(run_command(base + dir.file("clean"), &output), 0) << output;
    EXPECT_EQ(run_command(base + dir.file("r") + " --stop-after-parts 3", &output), 1);
    EXPECT_CONTAINS(output, "stopped after tokenizing 3 part(s)");
    EXPECT_EQ(expand_glob(dir.file("r/data.parts/part_*.bin")).size(), 3u);
    EXPECT_TRUE(file_exists(dir.file("r/data.parts/vocab.bpe")));   // the trained BPE is kept too
    ASSERT_EQ(run_command(base + dir.file("r"), &output), 0) << output;
    EXPECT_CONTAINS(output, "reusing the BPE trained by the interrupted run");
    EXPECT_CONTAINS(output, "(3 resumed)");
    EXPECT_EQ(prepared_stream(dir.file("r"), "data"), prepared_stream(dir.file("clean"), "data"));
    EXPECT_GT(expand_glob(dir.file("r/data_train_*.bin")).size(), 2u);
    EXPECT_FALSE(file_exists(dir.file("r/data.parts")));

    // Parts of another input are not reused.
    EXPECT_EQ(run_command(base + dir.file("s") + " --stop-after-parts 2", &output), 1);
    write_text(dir.file("big.txt"), sample_text(2900));
    ASSERT_EQ(run_command(base + dir.file("s"), &output), 0) << output;
    EXPECT_CONTAINS(output, "starting afresh");
    EXPECT_EQ(Tokenizer::load(dir.file("s/tokenizer.bin")).decode(prepared_stream(dir.file("s"), "data")),
              kEndOfText + sample_text(2900));

    // round 42: a plan.json far larger than its own (read whole: std::bad_alloc), or nested past
    // any of its own, is none of prepare_text's: it starts afresh
    for (const std::string& plan : {std::string("huge"), std::string("deep")}) {
        SCOPED_TRACE(plan);
        EXPECT_EQ(run_command(base + dir.file("p") + " --stop-after-parts 2", &output), 1);
        if (plan == "huge") {
            ASSERT_EQ(::truncate(dir.file("p/data.parts/plan.json").c_str(), (off_t)200 << 30), 0);   // sparse
        } else {
            write_text(dir.file("p/data.parts/plan.json"), std::string(100000, '[') + std::string(100000, ']'));
        }
        ASSERT_EQ(run_command(base + dir.file("p"), &output), 0) << output;
        EXPECT_CONTAINS(output, "starting afresh");
        EXPECT_EQ(prepared_stream(dir.file("p"), "data"), prepared_stream(dir.file("s"), "data"));
    }
}

// A resumed run reuses a saved part, or the trained BPE, only as it was written: each is checked
// against the checksum recorded beside it. Before: a part with other tokens (its header intact)
// went into shards stamped with the tokenizer's fingerprint.
TEST(DataLoaderPrepareText, AResumeRedoesPartsAndABpeThatDoNotMatchTheirChecksums) {
    ScratchDir dir;
    const std::string base = resumable_input(dir);
    std::string output;
    ASSERT_EQ(run_command(base + dir.file("clean"), &output), 0) << output;
    const std::vector<int> clean = prepared_stream(dir.file("clean"), "data");
    // an altered token in a saved part
    EXPECT_EQ(run_command(base + dir.file("r") + " --stop-after-parts 3", &output), 1);
    const std::string part = dir.file("r/data.parts/part_000001.bin");
    std::string bytes = read_text(part);
    bytes[bytes.size() - 2] ^= 1;
    write_text(part, bytes);
    ASSERT_EQ(run_command(base + dir.file("r"), &output), 0) << output;
    EXPECT_CONTAINS(output, part + " does not match the checksum recorded when it was written; tokenizing it again");
    EXPECT_CONTAINS(output, "(2 resumed)");
    EXPECT_EQ(prepared_stream(dir.file("r"), "data"), clean);
    // an altered trained BPE: trained again, and every part tokenised again
    EXPECT_EQ(run_command(base + dir.file("b") + " --stop-after-parts 3", &output), 1);
    const std::string merges = dir.file("b/data.parts/vocab.bpe");
    write_text(merges, read_text(merges) + "x y\n");
    ASSERT_EQ(run_command(base + dir.file("b"), &output), 0) << output;
    EXPECT_CONTAINS(output,
                    "does not match its recorded checksums; training it again, and tokenizing every part again");
    EXPECT_EQ(output.find("resumed)"), std::string::npos) << output;
    EXPECT_EQ(prepared_stream(dir.file("b"), "data"), clean);
    // round 16: two parts swapped with their checksums (each intact, in the other's place) are
    // redone, not spliced into the shards out of order: a checksum names its part
    EXPECT_EQ(run_command(base + dir.file("w") + " --stop-after-parts 3", &output), 1);
    const std::string p0 = dir.file("w/data.parts/part_000000.bin"), p1 = dir.file("w/data.parts/part_000001.bin");
    for (const std::string suffix : {"", ".sum"}) {
        ASSERT_EQ(std::rename((p0 + suffix).c_str(), (p0 + suffix + ".x").c_str()), 0);
        ASSERT_EQ(std::rename((p1 + suffix).c_str(), (p0 + suffix).c_str()), 0);
        ASSERT_EQ(std::rename((p0 + suffix + ".x").c_str(), (p1 + suffix).c_str()), 0);
    }
    ASSERT_EQ(run_command(base + dir.file("w"), &output), 0) << output;
    EXPECT_CONTAINS(output, p0 + " does not match the checksum recorded when it was written; tokenizing it again");
    EXPECT_CONTAINS(output, "(1 resumed)");
    EXPECT_EQ(prepared_stream(dir.file("w"), "data"), clean);
    // round 17: a part copied in with its checksum from another run's parts (other text, another
    // BPE) is redone: a checksum names the plan and the tokenizer that made its part
    write_text(dir.file("other.txt"), sample_text(2500).substr(1000));
    std::string other = base;
    other.replace(other.find(dir.file("big.txt")), dir.file("big.txt").size(), dir.file("other.txt"));
    EXPECT_EQ(run_command(other + dir.file("o") + " --stop-after-parts 2", &output), 1);
    EXPECT_EQ(run_command(base + dir.file("c") + " --stop-after-parts 3", &output), 1);
    for (const std::string suffix : {"", ".sum"}) {
        const std::string name = "/data.parts/part_000001.bin" + suffix;
        write_text(dir.file("c") + name, read_text(dir.file("o") + name));
    }
    ASSERT_EQ(run_command(base + dir.file("c"), &output), 0) << output;
    EXPECT_CONTAINS(output, dir.file("c/data.parts/part_000001.bin") + " does not match the checksum recorded");
    EXPECT_CONTAINS(output, "(2 resumed)");
    EXPECT_EQ(prepared_stream(dir.file("c"), "data"), clean);
}

// One prepare_text per --out-dir (round 17): a second one, a requeued job while the first still
// runs, would remove or rename the parts under it; it is refused naming the lock, and writes nothing.
TEST(DataLoaderPrepareText, ASecondRunInTheSameOutputDirIsRefused) {
    ScratchDir dir;
    const std::string base = resumable_input(dir);
    std::string output;
    ASSERT_EQ(run_command(base + dir.file("r") + " --stop-after-parts 2", &output), 1);
    // the lock held as the first run would hold it (flock(1) takes the same flock(2) lock)
    const std::string lock = dir.file("r/train_gpt.lock");
    ASSERT_TRUE(file_exists(lock));
    ASSERT_EQ(run_command("flock -n '" + lock + "' " + base + dir.file("r"), &output), 1) << output;
    EXPECT_CONTAINS(output, "in use");
    EXPECT_CONTAINS(output, lock);
    EXPECT_EQ(expand_glob(dir.file("r/data.parts/part_*.bin")).size(), 2u);
    EXPECT_FALSE(file_exists(dir.file("r/data_train_000000.bin")));
    ASSERT_EQ(run_command(base + dir.file("r"), &output), 0) << output;   // free again: it resumes
    EXPECT_CONTAINS(output, "(2 resumed)");
}

// Round 18: the stale-shard sweep was a glob of --out-dir and --name, so --name '[c]' removed the
// shards of dataset c beside it, and an --out-dir 'od[1]' removed none of its own stale shards
// (which then joined the next run's data). Glob characters in --name are refused; the sweep
// compares names literally; the printed command escapes the directory's glob characters.
TEST(DataLoaderPrepareText, GlobCharactersInNamesNeverReachOtherShards) {
    ScratchDir dir;
    write_text(dir.file("in.txt"), sample_text(200));
    write_text(dir.file("short.txt"), sample_text(20));
    const std::string od = dir.file("od[1]");
    std::string output;
    auto prepare = [&](const std::string& input, const std::string& args) {
        return run_command(tool_command("--input " + dir.file(input) + " --out-dir '" + od + "' " + args), &output);
    };
    ASSERT_EQ(prepare("in.txt", "--name c --shard-tokens 1000"), 0) << output;
    ASSERT_TRUE(file_exists(od + "/c_train_000002.bin"));
    EXPECT_EQ(prepare("short.txt", "--name '[c]'"), 1);
    EXPECT_CONTAINS(output, "contain none of / * ? [ ] \\");
    EXPECT_TRUE(file_exists(od + "/c_train_000002.bin")) << "dataset c untouched";
    // round 20: names that the printed command shows as another (DEL, C1 controls, U+202E), that
    // are no UTF-8, or that are the directory itself (.., printed as -o out/..)
    for (const char* name : {"'a\x7f'", "'a\xc2\x85'",
                             "'a\xe2\x80\xae"
                             "b'",
                             "'a\xff'", "..", "'a\xd8\x9c'", "'a\xe2\x80\x8b'", "'a\xef\xbb\xbf'", "'a\xe2\x80\xa8'"}) {
        SCOPED_TRACE(name);
        EXPECT_EQ(prepare("short.txt", std::string("--name ") + name), 1);
        EXPECT_CONTAINS(output, "--name must be non-empty UTF-8, not . or ..");
    }
    ASSERT_EQ(prepare("short.txt", "--name c --shard-tokens 1000"), 0) << output;
    EXPECT_CONTAINS(output, "removed stale shard " + od + "/c_train_000002.bin");
    EXPECT_FALSE(file_exists(od + "/c_train_000002.bin"));
    EXPECT_CONTAINS(output,
                    "next: " + trainer_beside_prepare_text() + " -i '" + dir.file("od\\[1\\]") + "/c_train_*.bin'");
}

// Round 19: datasets side by side in one --out-dir. --name a beside a_val: a's printed -j a_val_*.bin
// took a_val's shards too (HIGH: it trained and evaluated on them silently); a dataset of another
// tokenizer replaced the tokenizer.bin of the one beside it. Both are refused. And the printed
// command is quoted for a shell as a whole (a name with a quote or a ';' broke it, or ran commands).
TEST(DataLoaderPrepareText, DatasetsSideBySideNeverTakeEachOthersShardsOrTokenizer) {
    ScratchDir dir;
    write_text(dir.file("in.txt"), sample_text(40));
    const std::string two = dir.file("two");
    std::string output;
    auto prepare = [&](const std::string& args) {
        return run_command(tool_command("--input " + dir.file("in.txt") + " --out-dir '" + two + "' " + args), &output);
    };
    ASSERT_EQ(prepare("--name a"), 0) << output;
    const std::string tokenizer = read_text(two + "/tokenizer.bin");
    EXPECT_EQ(prepare("--name a_val"), 1);
    EXPECT_CONTAINS(output, "--name a_val beside the dataset a in " + two +
                                ": the globs of one (NAME_train_*.bin, NAME_val_*.bin) would match the other's shards");
    EXPECT_EQ(prepare("--name b --tokenizer bpe --vocab-size 300"), 1);
    EXPECT_CONTAINS(output, two + "/tokenizer.bin is the tokenizer of the dataset a beside this one");
    EXPECT_EQ(read_text(two + "/tokenizer.bin"), tokenizer) << "a's tokenizer, kept";
    ASSERT_EQ(prepare("--name b"), 0) << output;   // the same tokenizer: side by side
    // round 20: with tokenizer.bin removed, the other datasets' shards still record theirs (another
    // was written beside them, and a BPE dataset's encoder.json and vocab.bpe removed)
    ASSERT_EQ(std::remove((two + "/tokenizer.bin").c_str()), 0);
    EXPECT_EQ(prepare("--name c --tokenizer bpe --vocab-size 300"), 1);
    EXPECT_CONTAINS(output,
                    "the dataset a beside this one in " + two + " was made with another tokenizer (" + two + "/a_");
    EXPECT_FALSE(file_exists(two + "/tokenizer.bin")) << "none written";
    EXPECT_FALSE(file_exists(two + "/c_train_000000.bin"));
    // round 21: a damaged shard among them is no leave to write another tokenizer (only one was
    // read, and passed over where it could not be)
    const std::vector<std::string> shards = {"/a_train_000000.bin", "/a_val_000000.bin", "/b_train_000000.bin",
                                             "/b_val_000000.bin"};
    std::map<std::string, std::string> kept;
    for (const std::string& name : shards) {
        kept[name] = read_text(two + name);
        write_text(two + name, kept[name].substr(0, 100));
    }
    EXPECT_EQ(prepare("--name c --tokenizer bpe --vocab-size 300"), 1);
    EXPECT_CONTAINS(output, "beside this one in " + two + " has a shard whose tokenizer cannot be read");
    EXPECT_FALSE(file_exists(two + "/tokenizer.bin")) << "none written";
    for (const auto& [name, bytes] : kept)
        write_text(two + name, bytes);
    write_text(two + "/tokenizer.bin", tokenizer);
    // the printed command, pasted into a shell, gives the trainer these arguments
    ASSERT_EQ(run_command(tool_command("--input " + dir.file("in.txt") + " --out-dir '" + dir.file("q") +
                                       "' --name \"it's;x\""),
                          &output),
              0)
        << output;
    const std::string next = "next: " + trainer_beside_prepare_text() + " ";   // the trainer, from any cwd
    const size_t at = output.find(next);
    ASSERT_NE(at, std::string::npos) << output;
    const std::string args = output.substr(at + next.size(), output.find('\n', at) - at - next.size());
    write_text(dir.file("next.sh"), "printf '%s\\n' " + args + "\n");
    ASSERT_EQ(run_command("sh '" + dir.file("next.sh") + "'", &output), 0) << output;
    EXPECT_EQ(output, "-i\n" + dir.file("q") + "/it's;x_train_*.bin\n-j\n" + dir.file("q") +
                          "/it's;x_val_*.bin\n-o\nout/it's;x\n");
}

// Round 18: a <name>.parts directory of the user's (without prepare_text's plan) lost its files
// when the run removed its parts at the end; it is left alone, and the run refused.
TEST(DataLoaderPrepareText, APartsDirectoryItDidNotWriteIsLeftAlone) {
    ScratchDir dir;
    write_text(dir.file("in.txt"), sample_text(20));
    make_dirs(dir.file("o/data.parts"));
    write_text(dir.file("o/data.parts/mine.txt"), "the user's");
    std::string output;
    EXPECT_EQ(run_command(tool_command("--input " + dir.file("in.txt") + " --out-dir " + dir.file("o")), &output), 1);
    EXPECT_CONTAINS(output, dir.file("o/data.parts") + " holds " + dir.file("o/data.parts/mine.txt") +
                                ", which prepare_text did not write");
    EXPECT_EQ(read_text(dir.file("o/data.parts/mine.txt")), "the user's");
    EXPECT_FALSE(file_exists(dir.file("o/data_train_000000.bin")));
    // round 19 (B2): a symbolic link by that name, to an empty directory, is refused before any
    // work (it failed after writing the shards, "cannot remove ... Not a directory", every run)
    make_dirs(dir.file("elsewhere"));
    make_dirs(dir.file("p"));
    ASSERT_EQ(::symlink("../elsewhere", dir.file("p/data.parts").c_str()), 0);
    EXPECT_EQ(run_command(tool_command("--input " + dir.file("in.txt") + " --out-dir " + dir.file("p")), &output), 1);
    EXPECT_CONTAINS(output, dir.file("p/data.parts") + " is a symbolic link");
    EXPECT_FALSE(file_exists(dir.file("p/data_train_000000.bin")));
}

// Integer options are decimal (round 17: --shard-tokens 010 wrote 8-token shards, CLI11 reading
// a leading 0 as octal).
TEST(DataLoaderPrepareText, IntegerOptionsAreDecimal) {
    ScratchDir dir;
    write_text(dir.file("in.txt"), sample_text(50));
    std::string output;
    ASSERT_EQ(run_command(tool_command("--input " + dir.file("in.txt") + " --out-dir " + dir.file("o") +
                                       " --shard-tokens 0100 --val-fraction 0.5"),
                          &output),
              0)
        << output;
    EXPECT_EQ(read_shard_header(dir.file("o/data_train_000000.bin")).num_tokens, 100);
    EXPECT_EQ(
        run_command(tool_command("--input " + dir.file("in.txt") + " --out-dir " + dir.file("p") + " --threads 0x2"),
                    &output),
        1);
    EXPECT_CONTAINS(output, "--threads: '0x2' is not a decimal integer");
}

TEST(DataLoaderPrepareText, JsonlErrorsNameTheFileAndLine) {
    ScratchDir dir;
    std::string lines;
    for (int i = 1; i <= 60; i++)
        lines += i == 50 ? "{\"text\": \"broken\n" : jsonl_line(format("document %d", i));
    write_text(dir.file("bad.jsonl"), lines);
    write_text(dir.file("nofield.jsonl"), jsonl_line("ok") + "{\"body\": \"no text field\"}\n");
    write_text(dir.file("blank.jsonl"), "\n \n");
    // round 24: a NUL after a record ended the parse there, the rest of the line dropped silently
    write_text(dir.file("nul.jsonl"),
               jsonl_line("one") + std::string("{\"text\": \"two\"}\0{\"text\": \"lost\"}\n", 33));
    std::string output;
    for (const char* tokenizer : {"byte", "bpe"}) {   // tokenizing, and reading for BPE training
        EXPECT_EQ(run_command(tool_command("--input " + dir.file("nul.jsonl") + " --out-dir " + dir.file("o") +
                                           " --tokenizer " + tokenizer),
                              &output),
                  1);
        EXPECT_CONTAINS(output, "error: " + dir.file("nul.jsonl") + ":2: a NUL byte, which JSON text does not hold");
        EXPECT_EQ(run_command(tool_command("--input " + dir.file("bad.jsonl") + " --out-dir " + dir.file("o") +
                                           " --chunk-bytes 100 --tokenizer " + tokenizer),
                              &output),
                  1);
        EXPECT_CONTAINS(output, "error: " + dir.file("bad.jsonl") + ":50: invalid JSON");
        EXPECT_EQ(run_command(tool_command("--input " + dir.file("nofield.jsonl") + " --out-dir " + dir.file("o") +
                                           " --tokenizer " + tokenizer),
                              &output),
                  1);
        EXPECT_CONTAINS(output, "error: " + dir.file("nofield.jsonl") + ":2: no string field \"text\"");
        // round 43: a string torn at 200 kB was quoted whole by the parser's message
        write_text(dir.file("torn.jsonl"), "{\"text\": \"" + std::string(200000, 'A') + "\n");
        EXPECT_EQ(run_command(tool_command("--input " + dir.file("torn.jsonl") + " --out-dir " + dir.file("o") +
                                           " --tokenizer " + tokenizer),
                              &output),
                  1);
        EXPECT_CONTAINS(output, "error: " + dir.file("torn.jsonl") + ":1: invalid JSON");
        EXPECT_LT(output.size(), 2000u) << output.size();
    }
    EXPECT_EQ(run_command(tool_command("--input " + dir.file("blank.jsonl") + " --out-dir " + dir.file("o")), &output),
              1);
    EXPECT_CONTAINS(output, "error: input " + dir.file("blank.jsonl") + " has no documents");
    EXPECT_EQ(
        run_command(tool_command("--input " + dir.file("missing.jsonl") + " --out-dir " + dir.file("o")), &output), 1);
    EXPECT_CONTAINS(output, "error: cannot open " + dir.file("missing.jsonl"));

    // --jsonl-field picks another field; --format jsonl reads any extension.
    write_text(dir.file("body.txt"), "{\"body\": \"one\"}\n{\"body\": \"two\"}\n");
    ASSERT_EQ(run_command(tool_command("--input " + dir.file("body.txt") +
                                       " --format jsonl --jsonl-field body"
                                       " --val-fraction 0 --out-dir " +
                                       dir.file("j")),
                          &output),
              0)
        << output;
    EXPECT_EQ(Tokenizer::byte_level().decode(prepared_stream(dir.file("j"), "data")),
              std::string(kEndOfText) + "one" + kEndOfText + "two");
}

TEST(DataLoaderPrepareText, VocabularyAbove65535NeedsUint32Shards) {
    // A .tiktoken vocabulary of 70000 ranks: the 256 bytes, all 65536 byte pairs, 4208 triples.
    ScratchDir dir;
    auto b64 = [](const std::string& t) {
        static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        std::string out;
        for (size_t i = 0; i < t.size(); i += 3) {
            uint32_t v = static_cast<unsigned char>(t[i]) << 16;
            if (i + 1 < t.size()) v |= static_cast<unsigned char>(t[i + 1]) << 8;
            if (i + 2 < t.size()) v |= static_cast<unsigned char>(t[i + 2]);
            out += a[(v >> 18) & 63];
            out += a[(v >> 12) & 63];
            out += i + 1 < t.size() ? a[(v >> 6) & 63] : '=';
            out += i + 2 < t.size() ? a[v & 63] : '=';
        }
        return out;
    };
    std::string ranks;
    int rank = 0;
    for (int b = 0; b < 256; b++)
        ranks += b64(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
    for (int b = 0; b < 65536; b++) {
        ranks += b64({static_cast<char>(b >> 8), static_cast<char>(b & 255)}) + " " + std::to_string(rank++) + "\n";
    }
    for (int k = 0; rank < 70000; k++) {
        ranks += b64({static_cast<char>('a' + k / 676), static_cast<char>('a' + k / 26 % 26),
                      static_cast<char>('a' + k % 26)}) +
                 " " + std::to_string(rank++) + "\n";
    }
    write_text(dir.file("wide.tiktoken"), ranks);
    const std::string text = "the quick brown fox jumps over the lazy dog, caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\n";
    write_text(dir.file("t.txt"), text);
    const std::string base = tool_command("--input " + dir.file("t.txt") + " --tokenizer bpe --bpe-dir " +
                                          dir.file("wide.tiktoken") + " --val-fraction 0 --out-dir " + dir.file("o"));
    std::string output;
    EXPECT_EQ(run_command(base + " --token-bytes 2", &output), 1);
    EXPECT_CONTAINS(
        output, "error: --token-bytes 2 (uint16 shards) holds ids up to 65535, but the vocabulary has 70001 tokens");
    EXPECT_FALSE(file_exists(dir.file("o/data_train_000000.bin")));

    ASSERT_EQ(run_command(base, &output), 0) << output;
    EXPECT_CONTAINS(output, "uint32 shards");
    const ShardInfo info = read_shard_header(dir.file("o/data_train_000000.bin"));
    EXPECT_EQ(info.token_bytes, 4);   // shard version 2
    const Tokenizer tok = Tokenizer::load(dir.file("o/tokenizer.bin"));
    EXPECT_EQ(tok.vocab_size(), 70001);
    EXPECT_EQ(tok.eot_token(), 70000);
    const std::vector<int> stream = prepared_stream(dir.file("o"), "data");
    EXPECT_EQ(tok.decode(stream), kEndOfText + text);
    EXPECT_TRUE(std::any_of(stream.begin(), stream.end(), [](int id) { return id >= 65536; }));   // the triples
    // The engine's loader reads them against the vocabulary.
    DataLoader loader(dir.file("o/data_train_*.bin"), 1, 8, 0, 1, false, 0, tok.vocab_size());
    std::vector<int32_t> in(8), tg(8);
    loader.next_batch(in.data(), tg.data());
    EXPECT_EQ(std::vector<int>(in.begin(), in.end()), std::vector<int>(stream.begin(), stream.begin() + 8));
}
