// fuzz_shard.cpp — a token shard (llm.c's header + tokens, data/shard.h) through
// read_shard_header, read_shard and the DataLoader that maps it.
// Invariants of a shard that loads: the file is exactly 1024 + N * token_bytes bytes, read_shard
// gives N tokens (each < 65536 in a version-1 shard), and the loader's batches are its tokens.
#include "data/dataloader.h"
#include "data/shard.h"
#include "fuzz_util.h"

#include <vector>

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile file("shard");
    const std::string& path = file.write(data, size);
    try {
        const ShardInfo info = read_shard_header(path);
        if (kShardHeaderBytes + info.num_tokens * info.token_bytes != (int64_t)size) {
            invariant_broken("a shard that passes the header check has another size");
        }
        const std::vector<uint32_t> tokens = read_shard(path);
        if ((int64_t)tokens.size() != info.num_tokens) invariant_broken("read_shard gave another token count");
        for (uint32_t t : tokens) {
            if (info.token_bytes == 2 && t > 65535) invariant_broken("a uint16 shard gave a token above 65535");
        }
        // B = 1 sample of T = 3 tokens (+1) per batch; ids must be below the vocabulary
        const int T = 3;
        if ((info.num_tokens - 1) / T < 1) return 0;
        DataLoader loader(path, 1, T, 0, 1, /*shuffle=*/true, /*seed=*/7, /*vocab_size=*/300);
        int32_t inputs[T], targets[T];
        for (int step = 0; step < 4; step++) {
            loader.next_batch(inputs, targets);
            for (int t = 0; t + 1 < T; t++) {
                if (targets[t] != inputs[t + 1]) invariant_broken("targets are not the inputs shifted by one");
            }
        }
    } catch (const Error&) {
    }
    return 0;
}
