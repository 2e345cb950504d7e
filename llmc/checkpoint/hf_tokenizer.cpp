// hf_tokenizer.cpp — see hf_tokenizer.h.
#include "checkpoint/hf_tokenizer.h"

#include "data/bpe.h"
#include "utils.h"

#include <nlohmann/json.hpp>

namespace train_gpt {

namespace {

// A token's bytes in GPT-2's byte alphabet (vocab.json's keys, merges.txt's halves).
std::string in_gpt2_alphabet(const std::string& bytes) {
    std::string chars;
    for (unsigned char b : bytes)
        chars += gpt2_byte_char(b);
    return chars;
}

void write_text_file(const std::string& path, const std::string& text) {
    write_file_atomic(path, text.data(), text.size());
}

}   // namespace

bool hf_tokenizer_writable(const Tokenizer& tok) {
    const Bpe* bpe = tok.bpe();
    return (bpe != nullptr && !bpe->merges().empty()) || tok.is_byte_level();
}

bool write_hf_tokenizer(const std::string& dir, const Tokenizer& tok, int model_max_length) {
    tok.save(dir + "/tokenizer.bin");
    const Bpe* bpe = tok.bpe();
    const bool has_merges = bpe != nullptr && !bpe->merges().empty();
    if (!hf_tokenizer_writable(tok)) return false;
    const int V = tok.vocab_size(), eot = tok.eot_token();
    const std::string eot_text = tok.token_bytes(eot);

    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    for (int id = 0; id < V; id++) {
        const std::string key = id == eot ? eot_text : in_gpt2_alphabet(tok.token_bytes(id));
        if (vocab.contains(key))
            fail("%s: tokens %d and %d are the same text in vocab.json", tok.origin().c_str(), vocab[key].get<int>(),
                 id);
        vocab[key] = id;
    }
    write_text_file(dir + "/vocab.json", vocab.dump() + "\n");

    std::string merges = "#version: 0.2\n";
    if (has_merges) {
        for (const auto& [left, right] : bpe->merges()) {
            merges += in_gpt2_alphabet(tok.token_bytes(left)) + " " + in_gpt2_alphabet(tok.token_bytes(right)) + "\n";
        }
    }
    write_text_file(dir + "/merges.txt", merges);

    nlohmann::ordered_json special = {{"bos_token", eot_text}, {"eos_token", eot_text}, {"unk_token", eot_text}};
    write_text_file(dir + "/special_tokens_map.json", special.dump(2) + "\n");
    nlohmann::ordered_json config = {{"tokenizer_class", "GPT2Tokenizer"},
                                     {"model_max_length", model_max_length},
                                     {"bos_token", eot_text},
                                     {"eos_token", eot_text},
                                     {"unk_token", eot_text},
                                     {"add_prefix_space", false},
                                     {"add_bos_token", false},
                                     {"errors", "replace"},
                                     {"clean_up_tokenization_spaces", false}};
    write_text_file(dir + "/tokenizer_config.json", config.dump(2) + "\n");
    return true;
}

std::optional<Tokenizer> read_model_tokenizer(const std::string& dir) {
    if (file_exists(dir + "/tokenizer.bin")) return Tokenizer::load(dir + "/tokenizer.bin");
    if (file_exists(dir + "/vocab.json") && file_exists(dir + "/merges.txt")) {
        auto bpe = std::make_shared<const Bpe>(Bpe::load_gpt2(dir + "/vocab.json", dir + "/merges.txt"));
        return Tokenizer::from_bpe(std::move(bpe), dir + "/vocab.json");
    }
    return std::nullopt;
}

}   // namespace train_gpt
