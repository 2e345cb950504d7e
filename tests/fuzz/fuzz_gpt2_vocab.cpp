// fuzz_gpt2_vocab.cpp — GPT-2's vocabulary files (data/bpe.h: Bpe::load_gpt2): the input is
// encoder.json, a NUL byte, then vocab.bpe (no NUL: all of it is encoder.json, vocab.bpe empty).
// Invariant of a vocabulary that loads: it encodes text (some fixed, and the input itself) into
// ids below its size that decode back to the text.
#include "data/bpe.h"
#include "fuzz_util.h"

#include <cstring>

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile encoder("encoder.json"), merges("vocab.bpe");
    const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
    const size_t split = nul != nullptr ? (size_t)(nul - data) : size;
    const std::string& encoder_path = encoder.write(data, split);
    const std::string& merges_path = merges.write(data + std::min(size, split + 1), size - std::min(size, split + 1));
    try {
        const Bpe bpe = Bpe::load_gpt2(encoder_path, merges_path);
        const std::string texts[] = {"Hello world, it's 2024!\n\n  caf\xc3\xa9 \xf0\x9f\x98\x80",
                                     std::string(reinterpret_cast<const char*>(data), size)};
        for (const std::string& text : texts) {
            const std::vector<int> ids = bpe.encode(text);
            for (int id : ids) {
                if (id < 0 || id >= bpe.vocab_size()) invariant_broken("an id outside the vocabulary");
            }
            if (bpe.decode(ids) != text) invariant_broken("decode(encode(text)) != text");
        }
    } catch (const Error&) {
    }
    return 0;
}
