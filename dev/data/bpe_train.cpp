// bpe_train.cpp — see bpe_train.h.
#include "dev/data/bpe_train.h"

#include "utils.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace train_gpt {

namespace {
uint64_t pair_key(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }
// tokenizer.bin holds tokens of at most 255 bytes: a longer one is never merged
constexpr size_t kMaxTokenBytes = 255;
}   // namespace

Bpe train_bpe(const std::vector<std::string_view>& documents, int vocab_size, int threads) {
    // Work items: documents, the long ones cut where pre-tokens don't change (~1 MB each).
    std::vector<std::string_view> items;
    for (std::string_view doc : documents) {
        size_t start = 0;
        for (size_t cut : pretokenizer_cuts(doc, 1 << 20)) {
            items.push_back(doc.substr(start, cut - start));
            start = cut;
        }
        items.push_back(doc.substr(start));
    }
    threads = std::max(1, std::min<int>(threads, static_cast<int>(items.size())));
    std::vector<std::unordered_map<std::string, int64_t>> counts(threads);
    std::atomic<size_t> next_item{0};
    std::vector<std::string> errors(threads);
    auto worker = [&](int t) {
        try {
            Pretokenizer pretokenizer;
            for (size_t k; (k = next_item.fetch_add(1)) < items.size();) {
                const std::string_view text = items[k];
                pretokenizer.split(text, [&](size_t b, size_t e) {
                    // a pre-token longer than a token can be (a line of DNA, of random letters) is
                    // counted in pieces of kMaxTokenBytes + 1: a merge inside one never spans more,
                    // and its training time and memory stay those of ordinary words
                    for (; e - b >= 2; b = std::min(e, b + kMaxTokenBytes + 1))   // 1 byte: no pairs
                        counts[t][std::string(text.substr(b, std::min(e - b, kMaxTokenBytes + 1)))]++;
                });
            }
        } catch (const std::exception& e) {
            errors[t] = e.what();
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; t++)
        pool.emplace_back(worker, t);
    worker(0);
    for (std::thread& th : pool)
        th.join();
    for (const std::string& e : errors) {
        if (!e.empty()) throw Error(e);
    }
    for (int t = 1; t < threads; t++) {
        for (auto& [word, c] : counts[t])
            counts[0][word] += c;
        counts[t].clear();
    }
    std::vector<std::pair<std::string, int64_t>> words(counts[0].begin(), counts[0].end());
    counts[0].clear();
    return train_bpe_from_counts(std::move(words), vocab_size);
}

Bpe train_bpe_from_counts(std::vector<std::pair<std::string, int64_t>> word_counts, int vocab_size) {
    if (vocab_size < 257) fail("BPE vocab size must be at least 257 (256 bytes + <|endoftext|>), got %d", vocab_size);
    std::sort(word_counts.begin(), word_counts.end());   // word order, hence everything below, is deterministic

    std::vector<std::string> tokens(256);   // id -> bytes; ids 0..255 in GPT-2's byte order
    for (int b = 0; b < 256; b++)
        tokens[gpt2_byte_rank(static_cast<uint8_t>(b))] = std::string(1, static_cast<char>(b));
    std::unordered_map<std::string, int> id_of;
    for (int id = 0; id < 256; id++)
        id_of[tokens[id]] = id;
    std::vector<std::pair<int, int>> merges;

    struct Word {
        std::vector<int> symbols;
        int64_t count;
    };
    std::vector<Word> words;
    words.reserve(word_counts.size());
    for (auto& [text, count] : word_counts) {
        if (text.size() < 2 || count <= 0) continue;
        Word w{{}, count};
        for (char c : text)
            w.symbols.push_back(gpt2_byte_rank(static_cast<uint8_t>(c)));
        words.push_back(std::move(w));
    }
    word_counts.clear();

    std::unordered_map<uint64_t, int64_t> pair_count;           // pair -> occurrences in the corpus
    std::unordered_map<uint64_t, std::vector<int32_t>> where;   // pair -> words that (may) contain it
    for (size_t w = 0; w < words.size(); w++) {
        const std::vector<int>& s = words[w].symbols;
        for (size_t i = 0; i + 1 < s.size(); i++) {
            const uint64_t k = pair_key(s[i], s[i + 1]);
            pair_count[k] += words[w].count;
            std::vector<int32_t>& list = where[k];
            if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
        }
    }
    // Max-heap of (count, pair): highest count first, then the smaller (left, right). Entries go
    // stale when a count changes; every change pushes the new count, stale ones are skipped.
    struct Entry {
        int64_t count;
        uint64_t key;
        bool operator<(const Entry& o) const { return count != o.count ? count < o.count : key > o.key; }
    };
    std::priority_queue<Entry> heap;
    for (const auto& [k, c] : pair_count)
        heap.push({c, k});

    std::vector<int> seen(words.size(), -1);       // last merge step that rewrote the word
    std::vector<int> merged;                       // scratch: a word's new symbols
    std::vector<uint64_t> changed;                 // scratch: pairs whose count changed this step
    std::unordered_map<uint64_t, int64_t> delta;   // scratch: a word's change of each pair's count
    for (int step = 0; static_cast<int>(tokens.size()) < vocab_size - 1; step++) {
        Entry top{0, 0};
        bool found = false;
        while (!heap.empty()) {
            top = heap.top();
            heap.pop();
            auto it = pair_count.find(top.key);
            if (it != pair_count.end() && it->second == top.count) {
                found = true;
                break;
            }
        }
        if (!found) break;   // no pair left: the corpus is exhausted
        const int a = static_cast<int>(top.key >> 32), b = static_cast<int>(top.key & 0xFFFFFFFFu);
        const std::string bytes = tokens[a] + tokens[b];
        if (bytes.size() > kMaxTokenBytes) continue;   // never merged
        int z;
        if (auto it = id_of.find(bytes); it != id_of.end()) {
            z = it->second;   // already a token (made by another split): merge without a new id
        } else {
            z = static_cast<int>(tokens.size());
            tokens.push_back(bytes);
            id_of.emplace(bytes, z);
            merges.push_back({a, b});
        }
        std::vector<int32_t> list = std::move(where[top.key]);
        where.erase(top.key);
        changed.clear();
        for (int32_t w : list) {
            if (seen[w] == step) continue;
            seen[w] = step;
            std::vector<int>& s = words[w].symbols;
            merged.clear();
            for (size_t i = 0; i < s.size(); i++) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    merged.push_back(z);
                    i++;
                } else {
                    merged.push_back(s[i]);
                }
            }
            if (merged.size() == s.size()) continue;   // a stale entry of where[]
            // the word's pairs before and after: only those whose number changed (next to a merge)
            // change the counts and go on the heap, not every pair of a long word at every merge
            const int64_t c = words[w].count;
            delta.clear();
            for (size_t i = 0; i + 1 < s.size(); i++)
                delta[pair_key(s[i], s[i + 1])] -= c;
            for (size_t i = 0; i + 1 < merged.size(); i++) {
                const uint64_t k = pair_key(merged[i], merged[i + 1]);
                delta[k] += c;
                if (merged[i] == z || merged[i + 1] == z) {
                    std::vector<int32_t>& l = where[k];
                    if (l.empty() || l.back() != w) l.push_back(w);
                }
            }
            for (const auto& [k, d] : delta) {
                if (d == 0) continue;
                auto it = pair_count.emplace(k, 0).first;
                if ((it->second += d) == 0) pair_count.erase(it);
                changed.push_back(k);
            }
            s.swap(merged);
        }
        std::sort(changed.begin(), changed.end());
        changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
        for (uint64_t k : changed) {
            auto it = pair_count.find(k);
            if (it != pair_count.end()) heap.push({it->second, k});
        }
    }
    tokens.push_back(kEndOfText);
    return Bpe::from_tables(std::move(tokens), std::move(merges), "trained BPE");
}

}   // namespace train_gpt
