// fuzz_hellaswag.cpp — a HellaSwag jsonl (eval/hellaswag_data.h: load_hellaswag), tokenised with the
// byte-level tokenizer, as ./train_gpt --hellaswag reads it.
// Invariants of a file that loads: at least one example, every label in 0..3, a non-empty
// context and four non-empty endings, every id in the vocabulary.
#include "data/tokenizer.h"
#include "eval/hellaswag_data.h"
#include "fuzz_util.h"

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile file("hellaswag.jsonl");
    static const Tokenizer bytes = Tokenizer::byte_level();
    const std::string& path = file.write(data, size);
    try {
        const std::vector<HellaSwagExample> examples = load_hellaswag(path, bytes);
        if (examples.empty()) invariant_broken("no examples, yet no error");
        for (const HellaSwagExample& ex : examples) {
            if (ex.label < 0 || ex.label > 3) invariant_broken("a label outside 0..3");
            if (ex.context.empty()) invariant_broken("an empty context");
            for (const std::vector<int>& ending : ex.endings) {
                if (ending.empty()) invariant_broken("an empty ending");
                for (int id : ending) {
                    if (id < 0 || id >= bytes.vocab_size()) invariant_broken("an id outside the vocabulary");
                }
            }
        }
    } catch (const Error&) {
    }
    return 0;
}
