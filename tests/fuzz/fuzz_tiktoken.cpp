// fuzz_tiktoken.cpp — tiktoken's ranks file (data/bpe.h: Bpe::load_tiktoken), "base64 rank" per
// line. Invariant of a vocabulary that loads: it has its ranks plus <|endoftext|>, and encodes the
// input itself into ids that decode back to it.
#include "data/bpe.h"
#include "fuzz_util.h"

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile file("ranks.tiktoken");
    const std::string& path = file.write(data, size);
    try {
        const Bpe bpe = Bpe::load_tiktoken(path);
        if (bpe.token_bytes(bpe.eot_token()) != kEndOfText) invariant_broken("the last id is not <|endoftext|>");
        const std::string text(reinterpret_cast<const char*>(data), size);
        const std::vector<int> ids = bpe.encode(text);
        if (bpe.decode(ids) != text) invariant_broken("decode(encode(text)) != text");
    } catch (const Error&) {
    }
    return 0;
}
