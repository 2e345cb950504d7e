// fuzz_hf_config.cpp — a transformers config.json (checkpoint/init_from.h: gpt_config_from_hf), as
// ./train_gpt --init-from reads one.
// Invariants of a config that loads: every dimension positive, n_embd a multiple of n_head, the
// padded vocabulary V rounded up to a multiple of 128.
#include "checkpoint/init_from.h"
#include "fuzz_util.h"

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile file("config.json");
    const std::string& path = file.write(data, size);
    try {
        const GPTConfig cfg = gpt_config_from_hf(path);
        if (cfg.n_layer < 1 || cfg.n_head < 1 || cfg.n_embd < 1 || cfg.vocab_size < 1 || cfg.max_seq_len < 1) {
            invariant_broken("a dimension below 1");
        }
        if (cfg.n_embd % cfg.n_head != 0) invariant_broken("n_embd not a multiple of n_head");
        if (cfg.padded_vocab_size < cfg.vocab_size || cfg.padded_vocab_size % 128 != 0 ||
            cfg.padded_vocab_size - cfg.vocab_size >= 128) {
            invariant_broken("the padded vocabulary is not V rounded up to 128");
        }
    } catch (const Error&) {
    }
    return 0;
}
