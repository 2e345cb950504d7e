// prepare_text — text / JSONL files -> token shards (llm.c format) and the tokenizer files.
//
//   build/prepare_text --input data/kjv/kjv.txt --out-dir data/kjv --name kjv --tokenizer bpe --vocab-size 2048
//   build/prepare_text --input fineweb.jsonl --out-dir data/fw --name fw --tokenizer gpt2 --bpe-dir ../shared/data/gpt2
//
// Documents: each text file is one document; each non-blank line of a JSONL file (--format, or
// the .jsonl extension) is one, its text in --jsonl-field. The token stream is, per document,
// the EOT token then the document's tokens. Tokenizers (--tokenizer):
//   byte  ids 0..255 = bytes, 256 = <|endoftext|> (vocab 257)
//   bpe   GPT-2-style byte-level BPE trained here on the first --train-bytes of the input to
//         --vocab-size ids, or reused from --bpe-dir (encoder.json + vocab.bpe, or a .tiktoken)
//   gpt2  GPT-2's own vocabulary from --bpe-dir (e.g. ../shared/data/gpt2), 50257 ids
// The last val-fraction of the stream (moved to the nearest line or document boundary within a
// small window, if there is one) is written to DIR/NAME_val_000000.bin, ...; the rest to
// DIR/NAME_train_000000.bin, ... with at most --shard-tokens tokens per shard. Shards are
// uint16 (llm.c version 1) whenever the vocabulary fits, else uint32 (version 2), and each
// records the tokenizer that made it (data/shard.h). DIR/tokenizer.bin is the decode table the
// trainer takes from beside the shards; a BPE also gets DIR/encoder.json and DIR/vocab.bpe
// (GPT-2's format), which Tokenizer::load picks up to encode prompts. Last, it prints the
// ./train_gpt command that trains on the shards.
//
// Large inputs, resumable: the inputs are cut into parts of about --chunk-bytes (at line
// boundaries where pre-tokens don't change), each tokenised on --threads threads and saved
// in DIR/NAME.parts/ with the plan (inputs with sizes and mtimes, options). An interrupted run,
// re-run with the same command, skips the parts already saved (and a trained BPE), each checked
// against the checksum recorded beside it when it was written (PATH.sum; a part that does not
// match is tokenised again, a BPE that does not match is trained again with every part); then the
// shards are cut from the parts and NAME.parts/ is removed.
//
// Invariant: decoding train shards then val shards, in order, gives back exactly
// "<|endoftext|>" + doc1 + "<|endoftext|>" + doc2 + ...; the tokens don't depend on --threads
// or --chunk-bytes.
#include "data/bpe.h"
#include "dev/data/bpe_train.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "train/run_lock.h"
#include "cli_decimal.h"
#include "utils.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <xxhash.h>   // Debian's libxxhash-dev

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace train_gpt;

namespace {

struct Options {
    std::vector<std::string> inputs;
    std::string out_dir;
    std::string name = "data";
    double val_fraction = 0.05;
    int64_t shard_tokens = 100000000;
    std::string tokenizer = "byte";
    int vocab_size = 8192;
    std::string bpe_dir;
    std::string format = "auto";
    std::string jsonl_field = "text";
    int threads = 0;
    int token_bytes = 0;
    int64_t train_bytes = int64_t(1) << 30;
    int64_t chunk_bytes = int64_t(64) << 20;
    int stop_after_parts = -1;             // testing: fail after tokenising this many parts
    std::string command;                   // this command line, recorded in the --out-dir lock
    std::string trainer = "./train_gpt";   // the trainer beside build/ (path_beside_program), for next:
    std::set<std::string> given;           // the flags on the command line ("--vocab-size", ...)
};

struct Input {
    std::string path;
    bool jsonl;
    int64_t size;
    int64_t mtime_ns;
};

struct Part {
    int input;
    int64_t begin, end;   // byte range of the input
};

std::string human_bytes(double b) {
    const char* unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000 && u < 4) {
        b /= 1000;
        u++;
    }
    return u == 0 ? format("%.0f %s", b, unit[u]) : format("%.1f %s", b, unit[u]);
}

// pread of exactly [begin, end) of a file.
std::string read_range(const std::string& path, int64_t begin, int64_t end) {
    const int fd = open_regular_file(path, O_RDONLY);
    std::string bytes(static_cast<size_t>(end - begin), '\0');
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t got = ::pread(fd, &bytes[done], bytes.size() - done, begin + static_cast<int64_t>(done));
        if (got <= 0) {
            ::close(fd);
            fail("%s: read error at byte %lld", path.c_str(), (long long)(begin + done));
        }
        done += static_cast<size_t>(got);
    }
    ::close(fd);
    return bytes;
}

// A part may end at byte i (the next part starting there) if the text before is a complete
// line and, for plain text, the pre-tokens can't change there (is_pretokenizer_cut).
bool is_cut(std::string_view text, size_t i, bool jsonl) {
    return jsonl ? i >= 1 && i < text.size() && text[i - 1] == '\n' : is_pretokenizer_cut(text, i);
}

std::vector<Part> plan_parts(const std::vector<Input>& inputs, int64_t chunk_bytes) {
    std::vector<Part> parts;
    for (int k = 0; k < static_cast<int>(inputs.size()); k++) {
        const Input& in = inputs[k];
        int64_t pos = 0;
        while (pos < in.size) {
            int64_t end = in.size;
            // First cut at or after pos + chunk_bytes, read in windows; none: the rest is one part.
            for (int64_t at = pos + chunk_bytes; at < in.size;) {
                const int64_t stop = std::min(in.size, at + (int64_t(1) << 16));
                const int64_t from = std::max<int64_t>(0, at - 2);
                const std::string w = read_range(in.path, from, stop);   // w[i] is byte from + i
                int64_t found = -1;
                for (size_t i = static_cast<size_t>(at - from); i < w.size(); i++) {
                    // at from = 0, w starts the file, so is_cut sees what is_pretokenizer_cut would
                    if (is_cut(w, i, in.jsonl)) {
                        found = from + static_cast<int64_t>(i);
                        break;
                    }
                }
                if (found >= 0) {
                    end = found;
                    break;
                }
                at = stop;
            }
            parts.push_back({k, pos, end});
            pos = end;
        }
    }
    return parts;
}

// Cuts of a part's text into about n pieces for the threads (at is_cut places).
std::vector<std::string_view> pieces_for_threads(std::string_view text, bool jsonl, size_t n) {
    std::vector<std::string_view> pieces;
    const size_t target = std::max<size_t>(text.size() / std::max<size_t>(n, 1), 1 << 16);
    size_t start = 0;
    for (size_t at = target; at < text.size();) {
        size_t i = at;
        while (i < text.size() && !is_cut(text, i, jsonl))
            i++;
        if (i >= text.size()) break;
        pieces.push_back(text.substr(start, i - start));
        start = i;
        at = i + target;
    }
    pieces.push_back(text.substr(start));
    return pieces;
}

// Line number (1-based) of byte `offset` of a file: counts the newlines before it.
int64_t line_of(const std::string& path, int64_t offset) {
    int64_t line = 1;
    for (int64_t pos = 0; pos < offset;) {
        const int64_t end = std::min(offset, pos + (int64_t(1) << 20));
        const std::string block = read_range(path, pos, end);
        line += std::count(block.begin(), block.end(), '\n');
        pos = end;
    }
    return line;
}

// Calls f(text_of_document, byte offset of its line in `chunk`) for each JSONL document in
// chunk; throws {offset, message} for a bad line.
struct LineError {
    int64_t offset;
    std::string message;
};

template <typename F>
void for_each_jsonl_document(std::string_view chunk, const std::string& field, F&& f) {
    size_t pos = 0;
    while (pos < chunk.size()) {
        size_t eol = chunk.find('\n', pos);
        if (eol == std::string_view::npos) eol = chunk.size();
        const std::string_view line = chunk.substr(pos, eol - pos);
        const size_t line_start = pos;
        pos = eol + 1;
        if (std::all_of(line.begin(), line.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); })) {
            continue;   // blank lines separate nothing
        }
        // JSON text holds no raw NUL, and nlohmann's parser takes one for the end of its input: what
        // followed it on the line (another record) was dropped without a word
        if (line.find('\0') != std::string_view::npos) {
            throw LineError{static_cast<int64_t>(line_start + line.find('\0')),
                            "a NUL byte, which JSON text does not hold (a binary file, or records joined by NULs?)"};
        }
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line.begin(), line.end());
        } catch (const nlohmann::json::exception& e) {
            throw LineError{static_cast<int64_t>(line_start), "invalid JSON: " + cut_text(e.what())};
        }
        auto it = j.is_object() ? j.find(field) : j.end();
        if (it == j.end() || !it->is_string()) {
            throw LineError{static_cast<int64_t>(line_start),
                            format("no string field \"%s\" (set it with --jsonl-field)", field.c_str())};
        }
        f(it->get_ref<const std::string&>());
    }
}

// Tokenises with the byte-level table or a BPE; one per thread.
struct Encoder {
    std::unique_ptr<BpeEncoder> bpe;   // null: byte-level
    void encode(std::string_view text, std::vector<uint32_t>* out) {
        if (bpe) {
            bpe->encode(text, out);
        } else {
            for (char c : text)
                out->push_back(static_cast<unsigned char>(c));
        }
    }
};

class Progress {
  public:
    Progress(const char* what, int64_t total)
        : what_(what), total_(total), tty_(isatty(2) != 0), start_(std::chrono::steady_clock::now()) {}
    void update(int64_t done, const std::string& extra, bool last) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        const double rate = s > 0 ? done / s : 0;
        std::string line =
            format("%s: %s / %s (%.0f%%)%s", what_, human_bytes(done).c_str(), human_bytes(total_).c_str(),
                   total_ > 0 ? 100.0 * done / total_ : 100.0, extra.c_str());
        if (rate > 0 && !last) line += format(", %s/s, ETA %.0fs", human_bytes(rate).c_str(), (total_ - done) / rate);
        if (last) line += format(" in %.1fs", s);
        if (tty_) {
            std::fprintf(stderr, "\r%-100s%s", line.c_str(), last ? "\n" : "");
        } else if (last || s - last_print_ >= 5.0) {
            std::fprintf(stderr, "%s\n", line.c_str());
            last_print_ = s;
        }
        std::fflush(stderr);
    }

  private:
    const char* what_;
    int64_t total_;
    bool tty_;
    std::chrono::steady_clock::time_point start_;
    double last_print_ = 0;
};

// Runs f(thread index, item index) over items on `threads` threads; rethrows the error of the
// lowest failing item (so errors don't depend on scheduling).
template <typename F>
void parallel_for(int threads, size_t items, F&& f) {
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(items);
    auto worker = [&](int t) {
        for (size_t k; (k = next.fetch_add(1)) < items;) {
            try {
                f(t, k);
            } catch (...) {
                errors[k] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; t++)
        pool.emplace_back(worker, t);
    worker(0);
    for (std::thread& th : pool)
        th.join();
    for (const std::exception_ptr& e : errors) {
        if (e) std::rethrow_exception(e);
    }
}

// The token stream of one part: [EOT if it starts a text document] + tokens.
std::vector<uint32_t> tokenize_part(const Input& in, const Part& part, std::vector<Encoder>& encoders, uint32_t eot,
                                    const std::string& field) {
    const std::string text = read_range(in.path, part.begin, part.end);
    const int threads = static_cast<int>(encoders.size());
    const std::vector<std::string_view> pieces = pieces_for_threads(text, in.jsonl, 4 * threads);
    std::vector<std::vector<uint32_t>> out(pieces.size());
    try {
        parallel_for(threads, pieces.size(), [&](int t, size_t k) {
            if (in.jsonl) {
                try {
                    for_each_jsonl_document(pieces[k], field, [&](const std::string& doc) {
                        if (doc.empty()) return;
                        out[k].push_back(eot);
                        encoders[t].encode(doc, &out[k]);
                    });
                } catch (LineError& e) {
                    e.offset += part.begin + (pieces[k].data() - text.data());
                    throw;
                }
            } else {
                encoders[t].encode(pieces[k], &out[k]);
            }
        });
    } catch (const LineError& e) {
        fail("%s:%lld: %s", in.path.c_str(), (long long)line_of(in.path, e.offset), e.message.c_str());
    }
    std::vector<uint32_t> tokens;
    size_t n = part.begin == 0 && !in.jsonl ? 1 : 0;
    for (const auto& o : out)
        n += o.size();
    tokens.reserve(n);
    if (part.begin == 0 && !in.jsonl) tokens.push_back(eot);   // every document is preceded by EOT
    for (const auto& o : out)
        tokens.insert(tokens.end(), o.begin(), o.end());
    return tokens;
}

// Up to `budget` bytes of documents from the start of the inputs, for training a BPE.
std::vector<std::string> training_documents(const std::vector<Input>& inputs, const std::string& field,
                                            int64_t budget) {
    std::vector<std::string> docs;
    for (const Input& in : inputs) {
        if (budget <= 0) break;
        const int64_t take = std::min(budget, in.size);
        std::string text = read_range(in.path, 0, take);
        if (!in.jsonl) {
            budget -= take;
            docs.push_back(std::move(text));
            continue;
        }
        if (take < in.size) text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
        try {
            for_each_jsonl_document(text, field, [&](const std::string& doc) {
                budget -= static_cast<int64_t>(doc.size());
                docs.push_back(doc);
            });
        } catch (const LineError& e) {
            fail("%s:%lld: %s", in.path.c_str(), (long long)line_of(in.path, e.offset), e.message.c_str());
        }
    }
    return docs;
}

// Reads token ranges of the whole stream across the part files.
class PartStream {
  public:
    PartStream(std::vector<std::string> paths) : paths_(std::move(paths)) {
        starts_.push_back(0);
        for (const std::string& p : paths_)
            starts_.push_back(starts_.back() + read_shard_header(p).num_tokens);
    }
    int64_t size() const { return starts_.back(); }
    int64_t part_tokens(size_t k) const { return starts_[k + 1] - starts_[k]; }
    void read(int64_t begin, int64_t end, std::vector<uint32_t>* out) {   // tokens [begin, end)
        out->clear();
        for (size_t k = 0; k < paths_.size() && begin < end; k++) {
            if (starts_[k + 1] <= begin) continue;
            if (loaded_ != static_cast<int64_t>(k)) {
                tokens_ = read_shard(paths_[k]);
                loaded_ = static_cast<int64_t>(k);
            }
            const int64_t b = begin - starts_[k], e = std::min(end, starts_[k + 1]) - starts_[k];
            out->insert(out->end(), tokens_.begin() + b, tokens_.begin() + e);
            begin = starts_[k] + e;
        }
    }

  private:
    std::vector<std::string> paths_;
    std::vector<int64_t> starts_;   // (parts + 1,): stream offset of each part
    std::vector<uint32_t> tokens_;
    int64_t loaded_ = -1;
};

// Index where the val split starts: about `val_tokens` from the end, moved to the nearest
// boundary (just after a token ending in '\n', or at an EOT) within `window` tokens if there is
// one. Result in [1, n - 1] so both splits are non-empty.
int64_t choose_val_start(PartStream& stream, int64_t val_tokens, const Tokenizer& tok) {
    const int64_t n = stream.size();
    const int64_t target = n - val_tokens;
    const int64_t window = std::min<int64_t>(4096, std::max<int64_t>(val_tokens / 2, 1));
    const int64_t lo = std::max<int64_t>(0, target - window - 1), hi = std::min<int64_t>(n, target + window + 1);
    std::vector<uint32_t> t;   // tokens [lo, hi)
    stream.read(lo, hi, &t);
    const uint32_t eot = static_cast<uint32_t>(tok.eot_token());
    auto is_boundary = [&](int64_t i) {
        if (i < 1 || i > n - 1 || i - 1 < lo || i >= hi) return false;
        const uint32_t prev = t[i - 1 - lo];
        return t[i - lo] == eot || (prev != eot && tok.token_bytes(static_cast<int>(prev)).back() == '\n');
    };
    for (int64_t d = 0; d <= window; d++) {   // nearest first; ties go to the larger val split
        if (is_boundary(target - d)) return target - d;
        if (is_boundary(target + d)) return target + d;
    }
    return target;
}

// A shard written beside its final name, which no glob of the dataset matches, until every shard of
// the dataset is written (stage_split, publish_shards).
std::string staged_name(const std::string& path) { return path + ".staged"; }

// Writes stream[begin, end) as DIR/NAME_split_000000.bin, ... of at most shard_tokens each, each
// recording the tokenizer that made it, under their staged names; returns the final names.
std::vector<std::string> stage_split(const Options& opt, const std::string& split, PartStream& stream, int64_t begin,
                                     int64_t end, int token_bytes, const ShardTokenizer& made_by) {
    std::vector<std::string> paths;
    std::vector<uint32_t> tokens;
    for (int64_t start = begin, index = 0; start < end; start += opt.shard_tokens, index++) {
        const int64_t count = std::min(opt.shard_tokens, end - start);
        const std::string path =
            format("%s/%s_%s_%06lld.bin", opt.out_dir.c_str(), opt.name.c_str(), split.c_str(), (long long)index);
        stream.read(start, start + count, &tokens);
        write_shard(staged_name(path), tokens.data(), count, token_bytes, made_by);
        paths.push_back(path);
    }
    return paths;
}

// The staged shards take their names, replacing an earlier dataset's of the same name only once
// the whole new one is written: a run cut short (a full disk, a kill) leaves the earlier dataset
// whole, never some shards of each (before: a glob read both, as one dataset, without a word).
void publish_shards(const std::vector<std::string>& paths) {
    for (const std::string& path : paths) {
        if (std::rename(staged_name(path).c_str(), path.c_str()) != 0) {
            fail("cannot rename %s to %s: %s", staged_name(path).c_str(), path.c_str(), std::strerror(errno));
        }
    }
}

// A file of the parts directory and its checksum: written into PATH.sum ("<bytes> <xxh3> <name>
// <made-by>") after the file is complete, so that a resumed run reuses a part (or the BPE) only as
// it was written, in its own place and by this plan: the name binds it to its index (a part
// renamed with its .sum to another index is redone, not spliced into the shards out of order), and
// `made_by` (the plan's hash, and for a part the tokenizer's fingerprint) to what made it (a part
// copied in with its .sum from another run's parts is redone).
std::string base_name(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}
std::string sum_line(const std::string& path, const std::string& made_by) {
    uint64_t bytes = 0;
    const uint64_t h = hash_file(path, &bytes);
    return format("%llu %016llx %s %s\n", (unsigned long long)bytes, (unsigned long long)h, base_name(path).c_str(),
                  made_by.c_str());
}
void record_sum(const std::string& path, const std::string& made_by) {
    const std::string text = sum_line(path, made_by);
    write_file_atomic(path + ".sum", text.data(), text.size());
}
bool matches_its_sum(const std::string& path, const std::string& made_by) {
    std::error_code ec;   // a sum is one short line: a longer file is no sum of this part
    const auto sum_bytes = std::filesystem::file_size(path + ".sum", ec);
    return !ec && sum_bytes <= 4096 && read_file_text(path + ".sum") == sum_line(path, made_by);
}

// The names prepare_text writes into its parts directory: plan.json, part_NNNNNN.bin, encoder.json,
// vocab.bpe, each with its .sum, and the .tmp of any of them (write_file_atomic's).
bool written_by_prepare_text(std::string name) {
    for (const char* suffix : {".tmp", ".sum"}) {
        const size_t n = std::strlen(suffix);
        if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) name.resize(name.size() - n);
    }
    if (name == "plan.json" || name == "encoder.json" || name == "vocab.bpe") return true;
    return name.size() == 15 && name.rfind("part_", 0) == 0 && name.compare(11, 4, ".bin") == 0 &&
           name.substr(5, 6).find_first_not_of("0123456789") == std::string::npos;
}

// The entries of the parts directory prepare_text did not write (none if it does not exist).
std::vector<std::string> foreign_files(const std::string& dir) {
    std::vector<std::string> foreign;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n != "." && n != ".." && !written_by_prepare_text(n)) foreign.push_back(n);
        }
        ::closedir(d);
    }
    return foreign;
}

void remove_dir(const std::string& dir) {   // the parts directory: only files we wrote
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (written_by_prepare_text(n)) std::remove((dir + "/" + n).c_str());
        }
        ::closedir(d);
    }
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) fail("cannot remove %s: %s", dir.c_str(), std::strerror(errno));
}

// The datasets beside this one in --out-dir: the NAME of every NAME_train_N.bin / NAME_val_N.bin
// there other than `name`'s own, with its shards.
std::map<std::string, std::vector<std::string>> other_datasets(const std::string& out_dir, const std::string& name) {
    std::map<std::string, std::vector<std::string>> names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(out_dir, ec)) {
        const std::string file = entry.path().filename().string();
        if (file.size() < 5 || file.compare(file.size() - 4, 4, ".bin") != 0) continue;
        for (const char* split : {"_train_", "_val_"}) {
            const size_t at = file.rfind(split);
            if (at == std::string::npos || at == 0) continue;
            const std::string digits = file.substr(at + std::strlen(split), file.size() - 4 - at - std::strlen(split));
            if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
            if (file.substr(0, at) != name) names[file.substr(0, at)].push_back(entry.path().string());
        }
    }
    return names;
}

// Whether the globs of dataset `a` (a_train_*.bin, a_val_*.bin) match the shards of dataset `b`.
bool globs_match_shards_of(const std::string& a, const std::string& b) {
    const std::string shard = b + "_";
    return shard.rfind(a + "_train_", 0) == 0 || shard.rfind(a + "_val_", 0) == 0;
}

void run(const Options& opt) {
    if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0)) {
        fail("--val-fraction must be in [0, 1), got %g", opt.val_fraction);
    }
    if (opt.shard_tokens < 1 || opt.shard_tokens > INT32_MAX) {
        fail("--shard-tokens must be in [1, %d], got %lld", INT32_MAX, (long long)opt.shard_tokens);
    }
    // the shards are found by glob (the trainer's -i, the stale-shard sweep): a name with glob
    // characters would match other datasets' shards
    // and the printed command shows it on a terminal: no control characters (C0, DEL, C1), no
    // characters that reorder, hide or break text (bidi controls: U+202E showed another name;
    // zero-width ones, the BOM, line and paragraph separators), UTF-8 only
    std::vector<uint32_t> code_points;
    const bool utf8 = decode_utf8(opt.name, &code_points);
    const bool hidden = std::any_of(code_points.begin(), code_points.end(), [](uint32_t cp) {
        return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
               cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) ||
               cp == 0xfeff;
    });
    if (opt.name.empty() || !utf8 || hidden || opt.name == "." || opt.name == ".." ||
        opt.name.find_first_of("/*?[]\\") != std::string::npos) {
        fail(
            "--name must be non-empty UTF-8, not . or .., and contain none of / * ? [ ] \\, control or "
            "bidirectional-text characters (shards are found by glob, and the printed command is read on a "
            "terminal), got %s",
            printable(opt.name).c_str());
    }
    if (opt.chunk_bytes < 1 || opt.chunk_bytes > (int64_t(1) << 30)) {
        fail("--chunk-bytes must be in [1, 2^30], got %lld", (long long)opt.chunk_bytes);
    }
    if (opt.tokenizer == "gpt2" && opt.bpe_dir.empty()) {
        fail(
            "--tokenizer gpt2 needs --bpe-dir: a directory with GPT-2's encoder.json and vocab.bpe "
            "(e.g. ../shared/data/gpt2) or a .tiktoken file");
    }
    if (opt.tokenizer == "byte" && !opt.bpe_dir.empty()) fail("--bpe-dir needs --tokenizer bpe or gpt2");
    // the BPE training's own flags: an error where nothing trains a BPE (--tokenizer byte is the
    // default: a forgotten --tokenizer bpe made a byte-level dataset), a notice where one is reused
    for (const char* flag : {"--vocab-size", "--train-bytes"}) {
        if (!opt.given.count(flag)) continue;
        if (opt.tokenizer != "bpe") {
            fail("%s sets the BPE that --tokenizer bpe trains; --tokenizer %s trains none (%s)", flag,
                 opt.tokenizer.c_str(),
                 opt.tokenizer == "byte" ? "257 tokens: the bytes and <|endoftext|>"
                                         : "GPT-2's vocabulary, from --bpe-dir");
        }
        if (!opt.bpe_dir.empty()) {
            std::fprintf(stderr, "prepare_text: notice: %s has no effect: the BPE of --bpe-dir %s is used as it is\n",
                         flag, opt.bpe_dir.c_str());
        }
    }
    if (opt.vocab_size < 257)
        fail("--vocab-size must be at least 257 (256 bytes + <|endoftext|>), got %d", opt.vocab_size);
    if (opt.train_bytes < 1) fail("--train-bytes must be at least 1, got %lld", (long long)opt.train_bytes);
    const int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());

    // Inputs: every one readable and non-empty before anything is written, none given twice, and
    // none a file this run writes or removes in --out-dir (shards, tokenizer files, parts).
    std::vector<Input> inputs;
    std::set<std::filesystem::path> seen;
    std::set<std::pair<dev_t, ino_t>> seen_files;
    std::filesystem::path out_dir = resolved_path(opt.out_dir);
    if (out_dir.filename().empty()) out_dir = out_dir.parent_path();   // "dir/"
    for (const std::string& path : opt.inputs) {
        const std::filesystem::path p = resolved_path(path);
        if (!seen.insert(p).second) fail("input %s is given twice (--input)", path.c_str());
        const std::string file = p.filename().string();
        auto is_shard = [&](const char* split) {
            const std::string prefix = opt.name + split;
            return file.rfind(prefix, 0) == 0 && file.size() > 4 && file.compare(file.size() - 4, 4, ".bin") == 0;
        };
        const bool in_out_dir = p.parent_path() == out_dir;
        if ((in_out_dir && (is_shard("_train_") || is_shard("_val_") || file == "tokenizer.bin" ||
                            file == "encoder.json" || file == "vocab.bpe" || file == "train_gpt.lock")) ||
            p.parent_path() == out_dir / (opt.name + ".parts")) {
            fail(
                "input %s is a file this run writes or removes in --out-dir %s; it would be overwritten: move it, "
                "or give another --out-dir or --name",
                path.c_str(), opt.out_dir.c_str());
        }
        std::fclose(open_file(path, "rb"));   // "cannot open PATH ...: No such file or directory"
        struct stat st;
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
            fail("input %s is not a regular file", path.c_str());
        // one file under two names that no path resolution joins: hard links
        if (!seen_files.insert({st.st_dev, st.st_ino}).second)
            fail("input %s is given twice (--input): it is another name (a hard link) of an input before it",
                 path.c_str());
        if (st.st_size == 0) fail("input %s is empty", path.c_str());
        const bool jsonl = opt.format == "jsonl" ||
                           (opt.format == "auto" && path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0);
        inputs.push_back({path, jsonl, static_cast<int64_t>(st.st_size),
                          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
    }

    // A vocabulary given by file is loaded before the plan (its fingerprint is part of it).
    std::shared_ptr<const Bpe> bpe;
    if (!opt.bpe_dir.empty()) bpe = std::make_shared<const Bpe>(Bpe::load(opt.bpe_dir));

    // The plan: what the parts depend on. A saved plan that differs means start afresh.
    const std::vector<Part> parts = plan_parts(inputs, opt.chunk_bytes);
    nlohmann::json plan;
    plan["version"] = 1;
    for (const Input& in : inputs) {
        plan["inputs"].push_back(
            {{"path", in.path}, {"jsonl", in.jsonl}, {"size", in.size}, {"mtime_ns", in.mtime_ns}});
    }
    plan["jsonl_field"] = opt.jsonl_field;
    for (const Part& p : parts)
        plan["parts"].push_back({p.input, p.begin, p.end});
    plan["tokenizer"] = opt.tokenizer;
    if (bpe) plan["bpe"] = format("%016llx", (unsigned long long)bpe->fingerprint());
    if (opt.tokenizer == "bpe" && !bpe) {
        plan["vocab_size"] = opt.vocab_size;
        plan["train_bytes"] = opt.train_bytes;
    }
    const std::string plan_text = plan.dump();
    const std::string plan_hash =
        format("plan:%016llx", (unsigned long long)XXH3_64bits(plan_text.data(), plan_text.size()));
    // a model directory (a checkpoint's step, a transformers model) holds the model's tokenizer:
    // shards and a tokenizer.bin written there would replace it
    if (file_exists(opt.out_dir + "/manifest.json") ||
        (file_exists(opt.out_dir + "/config.json") && (file_exists(opt.out_dir + "/model.safetensors") ||
                                                       file_exists(opt.out_dir + "/model.safetensors.index.json")))) {
        fail(
            "--out-dir %s is a model directory (a checkpoint step or a transformers model): its tokenizer would be "
            "replaced; give another --out-dir",
            opt.out_dir.c_str());
    }
    make_dirs(opt.out_dir);
    // one prepare_text (or trainer) per --out-dir: a second one, a requeued job while the first
    // still runs, would remove or rename the parts under it
    std::string lock_warning;
    const std::unique_ptr<DirLock> lock = DirLock::acquire(opt.out_dir, opt.command, &lock_warning);
    if (!lock_warning.empty()) std::fprintf(stderr, "prepare_text: warning: %s\n", lock_warning.c_str());
    // datasets side by side: neither's globs may match the other's shards (--name a beside a_val:
    // a's -j a_val_*.bin took a_val's shards too)
    const std::map<std::string, std::vector<std::string>> beside = other_datasets(opt.out_dir, opt.name);
    for (const auto& [other, shards] : beside) {
        if (globs_match_shards_of(opt.name, other) || globs_match_shards_of(other, opt.name)) {
            fail(
                "--name %s beside the dataset %s in %s: the globs of one (NAME_train_*.bin, NAME_val_*.bin) would "
                "match the other's shards; give another --name or --out-dir",
                opt.name.c_str(), other.c_str(), opt.out_dir.c_str());
        }
    }
    const std::string parts_dir = format("%s/%s.parts", opt.out_dir.c_str(), opt.name.c_str());
    // the parts directory is prepare_text's, removed when it starts afresh and when it is done:
    // one holding anything else (a directory of the user's by that name) is left alone, and so is
    // a symbolic link by that name (one to an empty directory failed after all the work, every run)
    if (struct stat link; ::lstat(parts_dir.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        fail(
            "%s is a symbolic link; prepare_text keeps its resumable parts in a directory of its own by that name "
            "and removes it when done: remove the link, or give another --name or --out-dir",
            parts_dir.c_str());
    }
    if (const std::vector<std::string> foreign = foreign_files(parts_dir); !foreign.empty()) {
        fail(
            "%s holds %s, which prepare_text did not write; it keeps its resumable parts there and removes the "
            "directory when done: move that away, or give another --name or --out-dir",
            parts_dir.c_str(), (parts_dir + "/" + foreign[0]).c_str());
    }
    const std::string plan_path = parts_dir + "/plan.json";
    bool resuming = false;
    if (file_exists(plan_path)) {
        struct stat st;
        // a plan of its own is this plan's size; far larger is none of prepare_text's (round 42: read
        // whole, std::bad_alloc), and nor is JSON nested deeper than any of its own
        const int64_t bytes = ::stat(plan_path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
        const int64_t bound = static_cast<int64_t>(plan.dump(1).size()) + 4096;
        try {
            if (bytes <= bound) {
                const std::string text = read_range(plan_path, 0, bytes);
                resuming = json_depth_within(text) && nlohmann::json::parse(text) == plan;
            }
        } catch (const nlohmann::json::exception&) {
        }
        if (!resuming) {
            std::fprintf(stderr, "prepare_text: %s is from another command or other inputs; starting afresh\n",
                         parts_dir.c_str());
            remove_dir(parts_dir);
        }
    }
    make_dirs(parts_dir);
    if (!resuming) {
        const std::string text = plan.dump(1) + "\n";
        write_file_atomic(plan_path, text.data(), text.size());
    }

    // The tokenizer: a BPE trained by the interrupted run is reused only if its files are the ones
    // it wrote (their checksums recorded beside them); else it is trained again, and the parts,
    // which it tokenised, are all redone.
    bool parts_valid = true;
    if (opt.tokenizer == "bpe" && !bpe) {
        const std::string encoder = parts_dir + "/encoder.json", merges = parts_dir + "/vocab.bpe";
        const bool saved = resuming && file_exists(encoder) && file_exists(merges);
        if (saved && matches_its_sum(encoder, plan_hash) && matches_its_sum(merges, plan_hash)) {
            bpe = std::make_shared<const Bpe>(Bpe::load(parts_dir));
            std::fprintf(stderr, "prepare_text: reusing the BPE trained by the interrupted run (vocab %d)\n",
                         bpe->vocab_size());
        } else {
            if (saved) {
                std::fprintf(stderr,
                             "prepare_text: the BPE the interrupted run trained (%s) does not match its "
                             "recorded checksums; training it again, and tokenizing every part again\n",
                             parts_dir.c_str());
                parts_valid = false;
            }
            const auto t0 = std::chrono::steady_clock::now();
            const std::vector<std::string> docs = training_documents(inputs, opt.jsonl_field, opt.train_bytes);
            std::vector<std::string_view> views(docs.begin(), docs.end());
            int64_t bytes = 0;
            for (const std::string& d : docs)
                bytes += static_cast<int64_t>(d.size());
            std::fprintf(stderr, "prepare_text: training BPE to vocab %d on %s (%d threads)...\n", opt.vocab_size,
                         human_bytes(static_cast<double>(bytes)).c_str(), threads);
            bpe = std::make_shared<const Bpe>(train_bpe(views, opt.vocab_size, threads));
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "prepare_text: trained BPE: vocab %d (%d merges) in %.2fs%s\n", bpe->vocab_size(),
                         bpe->num_merges(), s,
                         bpe->vocab_size() < opt.vocab_size ? " (the corpus ran out of pairs)" : "");
            bpe->save_gpt2(parts_dir);
            record_sum(encoder, plan_hash);
            record_sum(merges, plan_hash);
        }
    }
    const Tokenizer tokenizer = bpe ? Tokenizer::from_bpe(bpe) : Tokenizer::byte_level();
    // one tokenizer.bin per directory: another dataset's beside this one must be this tokenizer
    // (before, it was replaced, and that dataset's shards no longer matched the tokenizer beside them)
    if (!beside.empty() && file_exists(opt.out_dir + "/tokenizer.bin")) {
        const Tokenizer there = Tokenizer::load(opt.out_dir + "/tokenizer.bin");
        if (there.fingerprint() != tokenizer.fingerprint()) {
            fail(
                "%s/tokenizer.bin is the tokenizer of the dataset %s beside this one, and this run's is another "
                "(vocab %d, fingerprint %016llx; there: vocab %d, %016llx): a directory holds one tokenizer; give "
                "another --out-dir",
                opt.out_dir.c_str(), beside.begin()->first.c_str(), tokenizer.vocab_size(),
                (unsigned long long)tokenizer.fingerprint(), there.vocab_size(),
                (unsigned long long)there.fingerprint());
        }
    }
    // ... and the tokenizer its shards record, tokenizer.bin there or not (round 20: with it
    // removed, another was written beside that dataset, and its BPE files, the last copy, removed)
    // Every shard's header (1 KB each): one that cannot be read does not tell its tokenizer, and is
    // no leave to write another (round 21: one damaged shard passed the check)
    for (const auto& [other, shards] : beside) {
        for (const std::string& shard : shards) {
            ShardTokenizer made_with;
            try {
                made_with = read_shard_header(shard).tokenizer;
            } catch (const Error& e) {
                fail(
                    "the dataset %s beside this one in %s has a shard whose tokenizer cannot be read (%s): a "
                    "directory holds one tokenizer; fix or remove that shard, or give another --out-dir",
                    other.c_str(), opt.out_dir.c_str(), e.what());
            }
            if (made_with.recorded() && made_with.fingerprint != tokenizer.fingerprint()) {
                fail(
                    "the dataset %s beside this one in %s was made with another tokenizer (%s records vocab %d, "
                    "fingerprint %016llx; this run's: vocab %d, %016llx): a directory holds one tokenizer; give "
                    "another --out-dir",
                    other.c_str(), opt.out_dir.c_str(), shard.c_str(), made_with.vocab_size,
                    (unsigned long long)made_with.fingerprint, tokenizer.vocab_size(),
                    (unsigned long long)tokenizer.fingerprint());
            }
        }
    }
    const uint32_t eot = static_cast<uint32_t>(tokenizer.eot_token());
    const int vocab_bytes = token_bytes_for_vocab(tokenizer.vocab_size());
    if (opt.token_bytes == 2 && vocab_bytes > 2) {
        fail(
            "--token-bytes 2 (uint16 shards) holds ids up to 65535, but the vocabulary has %d tokens; "
            "use --token-bytes 4 (uint32 shards) or leave it at auto",
            tokenizer.vocab_size());
    }
    const int token_bytes = opt.token_bytes != 0 ? opt.token_bytes : vocab_bytes;
    const std::string part_made_by =
        format("%s tokenizer:%016llx", plan_hash.c_str(), (unsigned long long)tokenizer.fingerprint());

    // Tokenise the parts not yet saved.
    std::vector<Encoder> encoders(threads);
    if (bpe) {
        for (Encoder& e : encoders)
            e.bpe = std::make_unique<BpeEncoder>(*bpe);
    }
    int64_t total_bytes = 0, done_bytes = 0;
    for (const Input& in : inputs)
        total_bytes += in.size;
    std::vector<std::string> part_paths;
    int reused = 0, tokenised = 0;
    Progress progress("prepare_text: tokenizing", total_bytes);
    for (size_t k = 0; k < parts.size(); k++) {
        const Part& p = parts[k];
        const std::string path = format("%s/part_%06zu.bin", parts_dir.c_str(), k);
        part_paths.push_back(path);
        bool done = false;
        if (resuming && parts_valid && file_exists(path)) {
            if (matches_its_sum(path, part_made_by)) {
                done = true;
                reused++;
            } else {   // torn, altered or foreign: redo it
                std::fprintf(stderr,
                             "prepare_text: %s does not match the checksum recorded when it was written; "
                             "tokenizing it again\n",
                             path.c_str());
            }
        }
        if (!done) {
            if (opt.stop_after_parts >= 0 && tokenised == opt.stop_after_parts) {
                fail("stopped after tokenizing %d part(s) (--stop-after-parts); re-run to resume", tokenised);
            }
            const std::vector<uint32_t> tokens = tokenize_part(inputs[p.input], p, encoders, eot, opt.jsonl_field);
            write_shard(path, tokens.data(), static_cast<int64_t>(tokens.size()), token_bytes);
            record_sum(path, part_made_by);
            tokenised++;
        }
        done_bytes += p.end - p.begin;
        progress.update(
            done_bytes,
            format(", part %zu/%zu%s", k + 1, parts.size(), reused ? format(" (%d resumed)", reused).c_str() : ""),
            k + 1 == parts.size());
    }
    PartStream stream(part_paths);
    for (size_t k = 0, first = 0; k < inputs.size(); k++) {   // a JSONL file of blank lines only
        int64_t n = 0;
        size_t j = first;
        for (; j < parts.size() && parts[j].input == static_cast<int>(k); j++)
            n += stream.part_tokens(j);
        first = j;
        if (n == 0) fail("input %s has no documents", inputs[k].path.c_str());
    }
    const int64_t n = stream.size();
    if (n < 2) fail("the inputs make only %lld token(s); need at least 2", (long long)n);

    int64_t val_start = n;
    if (opt.val_fraction > 0.0) {
        int64_t val_tokens = std::llround(opt.val_fraction * static_cast<double>(n));
        val_tokens = std::clamp<int64_t>(val_tokens, 1, n - 1);
        val_start = choose_val_start(stream, val_tokens, tokenizer);
    }

    const ShardTokenizer made_by{tokenizer.vocab_size(), tokenizer.fingerprint()};
    const std::vector<std::string> train = stage_split(opt, "train", stream, 0, val_start, token_bytes, made_by);
    const std::vector<std::string> val = stage_split(opt, "val", stream, val_start, n, token_bytes, made_by);
    // from the first rename to the last removal the directory holds the two datasets' shards: the
    // marker says so to a trainer (and is this run's to remove, or a rerun's)
    const std::string marker = publishing_marker(opt.out_dir, opt.name);
    const std::string marker_text =
        "prepare_text is replacing the dataset " + opt.name + " here: " + opt.command + "\n";
    write_file_atomic(marker, marker_text.data(), marker_text.size());
    publish_shards(train);
    publish_shards(val);
    const std::string tokenizer_path = opt.out_dir + "/tokenizer.bin";
    tokenizer.save(tokenizer_path);
    // The merges beside tokenizer.bin (Tokenizer::load picks them up), or none: stale ones
    // beside a byte-level table would not match it.
    for (const char* f : {"/encoder.json", "/vocab.bpe"})
        std::remove((opt.out_dir + f).c_str());
    if (bpe && !bpe->merges().empty()) bpe->save_gpt2(opt.out_dir);
    // Shards left by an earlier run with more shards would silently join the split's glob.
    for (const std::string split : {"train", "val"}) {
        const std::vector<std::string>& written = split == "train" ? train : val;
        // NAME_SPLIT_<digits>.bin, compared literally (--out-dir may hold glob characters: runs[1])
        const std::string prefix = opt.name + "_" + split + "_";
        std::vector<std::string> existing;
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(opt.out_dir, ec)) {
            std::string file = entry.path().filename().string();
            // and the staged shards of an earlier run cut short, which this one did not write again
            const bool staged = file.size() > 7 && file.compare(file.size() - 7, 7, ".staged") == 0;
            if (staged) file.resize(file.size() - 7);
            const std::string digits = file.size() > prefix.size() + 4 && file.rfind(prefix, 0) == 0 &&
                                               file.compare(file.size() - 4, 4, ".bin") == 0
                                           ? file.substr(prefix.size(), file.size() - prefix.size() - 4)
                                           : "";
            if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
            const std::string path = format("%s/%s", opt.out_dir.c_str(), file.c_str());
            if (staged) {
                std::remove(staged_name(path).c_str());
            } else {
                existing.push_back(path);
            }
        }
        std::sort(existing.begin(), existing.end());
        for (const std::string& path : existing) {
            if (std::find(written.begin(), written.end(), path) != written.end()) continue;
            if (std::remove(path.c_str()) != 0) fail("cannot remove stale shard %s", path.c_str());
            std::printf("  removed stale shard %s\n", path.c_str());
        }
    }
    if (std::remove(marker.c_str()) != 0) fail("cannot remove %s: %s", marker.c_str(), std::strerror(errno));
    remove_dir(parts_dir);

    const std::string kind =
        bpe ? format("BPE, vocab %d", tokenizer.vocab_size()) : std::string("byte-level, vocab 257");
    std::printf("prepare_text: %zu input(s), %lld bytes -> %lld tokens (%s, uint%d shards)\n", inputs.size(),
                (long long)total_bytes, (long long)n, kind.c_str(), 8 * token_bytes);
    std::printf("  train: %12lld tokens in %zu shard(s): %s%s\n", (long long)val_start, train.size(),
                train.empty() ? "-" : train.front().c_str(), train.size() > 1 ? " ..." : "");
    std::printf("  val:   %12lld tokens in %zu shard(s): %s%s\n", (long long)(n - val_start), val.size(),
                val.empty() ? "-" : val.front().c_str(), val.size() > 1 ? " ..." : "");
    std::printf("  tokenizer: %s%s, recorded in every shard\n", tokenizer_path.c_str(),
                bpe && !bpe->merges().empty() ? " (+ encoder.json, vocab.bpe)" : "");
    // the trainer takes the tokenizer beside the shards by itself; the run's output goes to a
    // directory named for the data (a trainer run does not replace another run's log): the --name
    // given, else the last name of --out-dir (datasets that keep the default name "data" differ there)
    std::string run_name = opt.name;
    if (opt.name == "data") {
        std::string dir = opt.out_dir;
        while (dir.size() > 1 && dir.back() == '/')
            dir.pop_back();
        const std::string last = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
        if (!last.empty() && last != "." && last != "..") run_name = last;
    }
    // the directory's own glob characters escaped, so that the globs name its shards only
    const std::string dir_glob = glob_escaped(opt.out_dir);
    const std::string val_glob = val.empty() ? "" : format("%s/%s_val_*.bin", dir_glob.c_str(), opt.name.c_str());
    // quoted for a shell as a whole, so that it can be pasted whatever the names hold
    std::printf("next: %s -i %s -j %s -o %s\n", shell_quoted(opt.trainer).c_str(),
                shell_quoted(format("%s/%s_train_*.bin", dir_glob.c_str(), opt.name.c_str())).c_str(),
                shell_quoted(val_glob).c_str(), shell_quoted("out/" + run_name).c_str());
}

}   // namespace

int main(int argc, char** argv) {
    Options opt;
    CLI::App app{
        "prepare_text: text / JSONL files -> token shards (llm.c format), tokenizer.bin "
        "and, for BPE, encoder.json + vocab.bpe"};
    // an empty value (a script's unset variable) names no file: refused naming the flag
    const CLI::Validator a_path(
        [](const std::string& text) { return text.empty() ? std::string("an empty value names no file") : ""; },
        "PATH");
    app.add_option("--input", opt.inputs, "text file (one document) or JSONL file (one per line); repeatable")
        ->required()
        ->check(a_path);
    app.add_option("--out-dir", opt.out_dir, "output directory (created if missing)")->required()->check(a_path);
    app.add_option("--name", opt.name, "shard name prefix: NAME_train_000000.bin, ...")->capture_default_str();
    app.add_option("--val-fraction", opt.val_fraction,
                   "fraction of the token stream, taken from its end, for validation; 0 = none")
        ->capture_default_str();
    add_decimal_option(app, "--shard-tokens", opt.shard_tokens, "maximum tokens per shard")->capture_default_str();
    app.add_option("--tokenizer", opt.tokenizer,
                   "byte (vocab 257) | bpe (train, or reuse --bpe-dir) | gpt2 (GPT-2's vocabulary from --bpe-dir)")
        ->check(CLI::IsMember({"byte", "bpe", "gpt2"}))
        ->capture_default_str();
    add_decimal_option(app, "--vocab-size", opt.vocab_size,
                       "bpe: vocabulary size to train (256 bytes + merges + <|endoftext|>)")
        ->capture_default_str();
    app.add_option(
        "--bpe-dir", opt.bpe_dir,
        "bpe/gpt2: directory with encoder.json + vocab.bpe, or a .tiktoken file, to use instead of training");
    add_decimal_option(app, "--train-bytes", opt.train_bytes,
                       "bpe: train on this many bytes from the start of the inputs")
        ->capture_default_str();
    app.add_option("--format", opt.format, "auto (.jsonl files are JSONL) | text | jsonl")
        ->check(CLI::IsMember({"auto", "text", "jsonl"}))
        ->capture_default_str();
    app.add_option("--jsonl-field", opt.jsonl_field, "JSONL: the field holding each document's text")
        ->capture_default_str();
    add_decimal_option(app, "--threads", opt.threads, "tokenizer threads, at most 1024 (0 = all cores)")
        ->check(CLI::Range(0, 1024))
        ->capture_default_str();
    add_decimal_option(app, "--token-bytes", opt.token_bytes,
                       "shard token width: 0 = auto (uint16 if the vocabulary fits), 2, 4")
        ->check(CLI::IsMember({0, 2, 4}))
        ->capture_default_str();
    add_decimal_option(app, "--chunk-bytes", opt.chunk_bytes, "input bytes per resumable part")->capture_default_str();
    add_decimal_option(app, "--stop-after-parts", opt.stop_after_parts, "testing: fail after tokenizing N parts")
        ->group("");
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return exit_status_after_printing(app.exit(e));   // prints the help text, exit 0
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", printable(e.what()).c_str());
        return 1;
    }
    for (int i = 0; i < argc; i++)
        opt.command += (i ? " " : "") + std::string(argv[i]);
    opt.trainer = path_beside_program(argv[0], "../train_gpt", opt.trainer);   // build/prepare_text
    for (const CLI::Option* option : app.get_options()) {
        if (option->count() > 0) opt.given.insert(option->get_name());
    }
    try {
        run(opt);
    } catch (const std::exception& e) {   // train_gpt::Error (fail()) and anything else: never an abort
        std::fprintf(stderr, "error: %s\n", printable(e.what()).c_str());
        return 1;
    }
    return 0;
}
