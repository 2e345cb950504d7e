// hellaswag_data.cpp — see hellaswag_data.h.
#include "eval/hellaswag_data.h"

#include "json_fields.h"
#include "utils.h"

#include <nlohmann/json.hpp>

namespace train_gpt {

std::vector<HellaSwagExample> load_hellaswag(const std::string& path, const Tokenizer& tokenizer, int limit) {
    if (!tokenizer.can_encode()) {
        fail("HellaSwag needs a tokenizer that encodes text; %s has no BPE merges", tokenizer.origin().c_str());
    }
    // HellaSwag's val set is 11 MB, its train set 47 MB: a file beyond 1 GiB is another one, refused
    // by its size before it is read
    const std::string text = read_file_text(path, size_t(1) << 30, "a HellaSwag jsonl");
    std::vector<HellaSwagExample> examples;
    int line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        line_no++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        HellaSwagExample ex;
        ex.source = path + ":" + std::to_string(line_no);
        // JSON's parser stops at a NUL, so the rest of the line would go unread (round 27)
        if (line.find('\0') != std::string::npos) {
            fail("%s: a NUL byte, which JSON text does not hold (a binary file, or records joined by NULs?)",
                 ex.source.c_str());
        }
        check_json_depth(line, ex.source, "a HellaSwag example");
        try {
            const nlohmann::json j = nlohmann::json::parse(line);
            const auto& endings = j.at("endings");
            if (!endings.is_array() || endings.size() != 4) fail("\"endings\" is not an array of four");
            const nlohmann::json& label = j.at("label");
            if (!label.is_number_integer() || label.get<int64_t>() < 0 || label.get<int64_t>() > 3) {
                fail("\"label\" %s is not 0..3", json_excerpt(label).c_str());
            }
            ex.label = (int)label.get<int64_t>();
            ex.context = tokenizer.encode(j.at("ctx").get<std::string>());
            for (int e = 0; e < 4; e++) {
                ex.endings[e] = tokenizer.encode(" " + endings[e].get<std::string>());
                if (ex.endings[e].empty()) fail("ending %d is empty", e);
            }
            if (ex.context.empty()) fail("\"ctx\" is empty");
        } catch (const nlohmann::json::exception& e) {
            fail("%s:%d: not a HellaSwag example (%s)", path.c_str(), line_no, cut_text(e.what()).c_str());
        } catch (const Error& e) {
            fail("%s:%d: %s", path.c_str(), line_no, e.what());
        }
        examples.push_back(std::move(ex));
        if (limit > 0 && (int)examples.size() == limit) break;
    }
    if (examples.empty()) fail("%s holds no HellaSwag examples", path.c_str());
    return examples;
}

void check_hellaswag_fits(const std::vector<HellaSwagExample>& examples, int max_T, int position_table) {
    for (const HellaSwagExample& ex : examples) {
        for (int e = 0; e < 4; e++) {
            if ((int)ex.endings[e].size() >= max_T + 1) {
                const std::string advice =
                    max_T < position_table
                        ? format("give a larger -t (the model takes up to %d, its position table)", position_table)
                        : format("-t %d is already the model's position table", max_T);
                fail(
                    "%s: ending %d has %zu tokens, which do not fit the model's window of %d positions with the "
                    "context before them: %s, or leave the example out (--hellaswag-examples)",
                    ex.source.c_str(), e, ex.endings[e].size(), max_T, advice.c_str());
            }
        }
    }
}

}   // namespace train_gpt
