// fuzz_bpe_encode.cpp — arbitrary bytes (any UTF-8, valid or not) encoded with GPT-2's own
// vocabulary (data/bpe.h), loaded once from $TRAIN_GPT_FUZZ_GPT2_DIR (scripts/fuzz.sh sets it to
// ../shared/data/gpt2). Invariants (bpe.h): every id is in the vocabulary; decode(encode(x)) == x;
// and encoding x in pieces cut where pretokenizer_cuts allows gives the same ids as encoding it
// whole (prepare_text tokenises in such pieces, on several threads).
#include "data/bpe.h"
#include "fuzz_util.h"

#include <cstdlib>

using namespace train_gpt;
using namespace train_gpt::fuzz;

namespace {

const Bpe& gpt2() {
    static const Bpe bpe = [] {
        const char* dir = std::getenv("TRAIN_GPT_FUZZ_GPT2_DIR");
        if (dir == nullptr)
            invariant_broken("set TRAIN_GPT_FUZZ_GPT2_DIR to the directory of GPT-2's encoder.json and vocab.bpe");
        return Bpe::load(dir);
    }();
    return bpe;
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Bpe& bpe = gpt2();
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::vector<int> ids = bpe.encode(text);
    for (int id : ids) {
        if (id < 0 || id >= bpe.vocab_size()) invariant_broken("an id outside the vocabulary");
    }
    if (bpe.decode(ids) != text) invariant_broken("decode(encode(text)) != text");
    // in pieces of about 8 bytes, cut only where the pre-tokens cannot change
    std::vector<int> pieces;
    size_t start = 0;
    std::vector<size_t> cuts = pretokenizer_cuts(text, 8);
    cuts.push_back(text.size());
    for (size_t cut : cuts) {
        const std::vector<int> part = bpe.encode(std::string_view(text).substr(start, cut - start));
        pieces.insert(pieces.end(), part.begin(), part.end());
        start = cut;
    }
    if (pieces != ids) invariant_broken("encoding in pieces differs from encoding the whole");
    return 0;
}
