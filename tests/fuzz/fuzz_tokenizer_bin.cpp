// fuzz_tokenizer_bin.cpp — llm.c's tokenizer.bin (data/tokenizer.h: Tokenizer::load), then
// every id decoded and made printable, as the trainer does with its samples.
// Invariants of a table that loads: every id has 1..255 bytes, the EOT id is in range, and
// decoding all ids gives their bytes in order.
#include "data/tokenizer.h"
#include "fuzz_util.h"

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile file("tokenizer.bin");
    const std::string& path = file.write(data, size);
    try {
        const Tokenizer tok = Tokenizer::load(path);
        if (tok.eot_token() < 0 || tok.eot_token() >= tok.vocab_size()) invariant_broken("EOT outside the vocabulary");
        std::vector<int> ids(tok.vocab_size());
        size_t bytes = 0;
        for (int id = 0; id < tok.vocab_size(); id++) {
            ids[id] = id;
            const size_t n = tok.token_bytes(id).size();
            if (n < 1 || n > 255) invariant_broken("a token of 0 or more than 255 bytes");
            bytes += n;
        }
        const std::string text = tok.decode(ids);
        if (text.size() != bytes) invariant_broken("decode() lost or added bytes");
        printable(text);
        if (tok.is_byte_level()) {
            if (tok.decode(tok.encode(text)) != text) invariant_broken("byte-level encode does not round-trip");
        }
    } catch (const Error&) {
    }
    return 0;
}
