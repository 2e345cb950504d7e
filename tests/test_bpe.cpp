// test_bpe.cpp — byte-level BPE (llmc/data/bpe.h) against tiktoken (PyPI) as the oracle: identical
// ids on every document of the KJV (Debian's bible-kjv) plus non-ASCII and random Unicode text,
// with GPT-2's own vocabulary (../shared/data/gpt2) and with one trained here; round trips,
// invalid UTF-8, training by hand on a tiny corpus, determinism, and the vocabulary files.
#include "checkpoint/hf_tokenizer.h"
#include "data/bpe.h"
#include "dev/data/bpe_train.h"
#include "test_util.h"
#include "data/tokenizer.h"
#include "utils.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

std::string gpt2_dir() { return repo_root() + "/../shared/data/gpt2"; }

// Text that exercises the pattern: accents, CJK, emoji (with ZWJ and modifiers), other scripts,
// every kind of Unicode whitespace, contractions, digits of other scripts, long runs.
const std::vector<std::string> kUnicodeDocs = {
    "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xe2\x80\x94 \xe2\x80\x9cquoted\xe2\x80\x9d "
    "\xe2\x80\x98single\xe2\x80\x99, "
    "\xc3\x85ngstr\xc3\xb6m, \xc3\x9f, \xc5\x93uvre.",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88\xe3\x80\x82"
    "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6\xe3\x80\x82 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xe3\x80\x80"
    "full-width space",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd family "
    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 flag \xf0\x9f\x87\xac\xf0\x9f\x87\xa7",
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd0\xbc\xd0\xb8\xd1\x80, \xce\x93\xce\xb5\xce\xb9\xce\xac, "
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xd9\xa1\xd9\xa2\xd9\xa3, "
    "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d"
    "\xe0\xa4\xa4\xe0\xa5\x87 \xe0\xa5\xa7\xe0\xa5\xa8, \xe2\x85\xa7 \xc2\xbd \xc2\xb2",
    "tabs\t\tand  spaces   \n\n\n  x\r\n\r\ny \x0b\x0c end   ",
    "I'll we've they're it's 'S 'LL don't O'Neil's '''' 'd'm",
    "nel\xc2\x85nbsp\xc2\xa0mvs\xe1\xa0\x8ezwsp\xe2\x80\x8bideo\xe3\x80\x80ls\xe2\x80\xa8ps\xe2\x80\xa9nnbsp\xe2\x80"
    "\xaf"
    "mmsp\xe2\x81\x9f bom\xef\xbb\xbf fs\x1c us\x1f ogham\xe1\x9a\x80x",
    std::string(300, 'a') + " " + std::string(500, '1') + " " + std::string(200, '!') + std::string(100, '\n'),
    "   ",
    "x",
    "<|endoftext|> is ordinary text here",
    "1234567890 3.14159 2,718 0x1F -42 1e-9 2024-05-20",
};

// Random strings over ASCII, whitespace and code points up to U+2FFFF (no surrogates);
// long runs of one class reach the heap-based merge path (pre-tokens over 64 bytes).
std::vector<std::string> random_unicode_docs(int count) {
    std::mt19937 rng(1234);
    auto utf8 = [](uint32_t cp) {
        std::string s;
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else if (cp < 0x800) {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            s += static_cast<char>(0xE0 | (cp >> 12));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            s += static_cast<char>(0xF0 | (cp >> 18));
            s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        return s;
    };
    const uint32_t spaces[] = {' ',    '\t',   '\n',   '\r',   0x85,   0xA0,  0x1680,
                               0x2000, 0x200A, 0x2028, 0x3000, 0x180E, 0x200B};
    std::vector<std::string> docs;
    for (int d = 0; d < count; d++) {
        std::string doc;
        const int n = 1 + static_cast<int>(rng() % 80);
        for (int i = 0; i < n; i++) {
            const uint32_t r = rng() % 100;
            if (r < 25) {
                doc += utf8(spaces[rng() % (sizeof(spaces) / sizeof(spaces[0]))]);
            } else if (r < 50) {
                doc += static_cast<char>(0x20 + rng() % 95);
            } else if (r < 52) {
                const std::string run = "!#$%&()*+,-./0123456789:;<=>?@[]^_{|}~";
                for (int k = 0, len = 60 + static_cast<int>(rng() % 120); k < len; k++)
                    doc += run[rng() % run.size()];
            } else {
                uint32_t cp = 0x80 + rng() % (0x30000 - 0x80);
                if (cp >= 0xD800 && cp <= 0xDFFF) cp -= 0x800;
                doc += utf8(cp);
            }
        }
        docs.push_back(doc);
    }
    for (const std::string alphabet : {"abcdefghij", "!@#$%^&*()[]{};:,.<>?/", " \t\n"}) {   // long pre-tokens
        std::string doc;
        for (int k = 0; k < 5000; k++)
            doc += alphabet[rng() % alphabet.size()];
        docs.push_back(doc + "z");
    }
    return docs;
}

// The test corpus: the KJV in documents of 50 lines (the first kjv_docs), then the Unicode and
// random documents.
struct Corpus {
    std::vector<std::string> docs;
    size_t kjv_docs = 0;
};

const Corpus& test_corpus() {
    static const Corpus corpus = [] {
        Corpus c;
        std::string kjv;
        const int rc = run_command("bible -f 'Gen1:1-Rev22:21'", &kjv);
        if (rc != 0 || kjv.size() < 4000000) {
            ADD_FAILURE() << "the 'bible' command (Debian bible-kjv, scripts/setup.sh installs it) failed: rc " << rc;
            return c;
        }
        std::istringstream lines(kjv);
        std::string line, doc;
        for (int n = 1; std::getline(lines, line); n++) {
            doc += line + "\n";
            if (n % 50 == 0) {
                c.docs.push_back(doc);
                doc.clear();
            }
        }
        if (!doc.empty()) c.docs.push_back(doc);
        c.kjv_docs = c.docs.size();
        c.docs.insert(c.docs.end(), kUnicodeDocs.begin(), kUnicodeDocs.end());
        for (const std::string& r : random_unicode_docs(300))
            c.docs.push_back(r);
        return c;
    }();
    return corpus;
}

const std::vector<std::string>& corpus() { return test_corpus().docs; }

// tiktoken's ids for each document, from dev/data/tiktoken_oracle.py (a failure if it can't run).
std::vector<std::vector<int>> tiktoken_ids(const std::string& bpe_dir, const std::vector<std::string>& docs) {
    ScratchDir dir;
    std::string jsonl;
    for (const std::string& doc : docs)
        jsonl += nlohmann::json({{"text", doc}}).dump() + "\n";
    write_text(dir.file("docs.jsonl"), jsonl);
    std::string output;
    const int rc =
        run_command("/usr/bin/python3 '" + repo_root() + "/dev/data/tiktoken_oracle.py' encode --bpe-dir '" + bpe_dir +
                        "' --input " + dir.file("docs.jsonl") + " --output " + dir.file("ids.jsonl"),
                    &output);
    if (rc != 0) {
        ADD_FAILURE() << "tiktoken_oracle.py failed (rc " << rc << "):\n" << output;
        return {};
    }
    std::vector<std::vector<int>> ids;
    std::istringstream in(read_text(dir.file("ids.jsonl")));
    for (std::string line; std::getline(in, line);)
        ids.push_back(nlohmann::json::parse(line).get<std::vector<int>>());
    return ids;
}

void expect_same_ids_as_tiktoken(const Bpe& bpe, const std::string& bpe_dir) {
    const std::vector<std::string>& docs = corpus();
    ASSERT_GT(docs.size(), 900u);   // 623 of the KJV, 315 more
    const std::vector<std::vector<int>> expected = tiktoken_ids(bpe_dir, docs);
    ASSERT_EQ(expected.size(), docs.size());
    BpeEncoder encoder(bpe);   // one cache across documents, as prepare_text uses it
    int64_t tokens = 0;
    int mismatches = 0;
    for (size_t i = 0; i < docs.size(); i++) {
        std::vector<uint32_t> ids;
        encoder.encode(docs[i], &ids);
        tokens += static_cast<int64_t>(ids.size());
        if (std::vector<int>(ids.begin(), ids.end()) != expected[i] && mismatches++ < 5) {
            ADD_FAILURE() << "document " << i
                          << " encodes differently from tiktoken: " << printable(docs[i].substr(0, 200));
        }
        EXPECT_EQ(bpe.encode(docs[i]), expected[i]) << "document " << i << " (encode without the cache)";
        EXPECT_EQ(bpe.decode(expected[i]), docs[i]) << "document " << i;
    }
    EXPECT_EQ(mismatches, 0) << "of " << docs.size() << " documents";
    EXPECT_GT(tokens, 900000);
}

const Bpe& gpt2() {
    static const Bpe bpe = Bpe::load(gpt2_dir());
    return bpe;
}

}   // namespace

TEST(Bpe, ByteAlphabetIsGpt2s) {
    EXPECT_EQ(gpt2_byte_char(' '), "\xc4\xa0");    // "Ġ" = U+0120
    EXPECT_EQ(gpt2_byte_char('\n'), "\xc4\x8a");   // "Ċ" = U+010A
    EXPECT_EQ(gpt2_byte_char('A'), "A");
    EXPECT_EQ(gpt2_byte_char(0xAD), "\xc5\x83");   // the soft hyphen is not printable: U+0143
    EXPECT_EQ(gpt2_byte_rank('!'), 0);
    EXPECT_EQ(gpt2_byte_rank(0), 188);
    std::string bytes;
    EXPECT_TRUE(gpt2_decode_chars("\xc4\xa0the", &bytes));
    EXPECT_EQ(bytes, " the");
    EXPECT_FALSE(gpt2_decode_chars("\xe2\x82\xac", &bytes));   // "€" is not in the alphabet
    EXPECT_FALSE(gpt2_decode_chars(" ", &bytes));              // nor is a raw space
    // GPT-2's encoder.json agrees on every single byte.
    const Bpe& g = gpt2();
    ASSERT_EQ(g.vocab_size(), 50257);
    EXPECT_EQ(g.eot_token(), 50256);
    EXPECT_EQ(g.token_bytes(50256), kEndOfText);
    for (int b = 0; b < 256; b++)
        EXPECT_EQ(g.token_bytes(gpt2_byte_rank(static_cast<uint8_t>(b))), std::string(1, static_cast<char>(b)));
    EXPECT_EQ(g.merges().size(), 50000u);
    EXPECT_EQ(g.token_bytes(256), " t");   // the first merge "Ġ t"
}

TEST(Bpe, Gpt2VocabularyMatchesTiktokenOnEveryDocument) { expect_same_ids_as_tiktoken(gpt2(), gpt2_dir()); }

TEST(Bpe, TrainedVocabularyMatchesTiktokenOnEveryDocument) {
    ScratchDir dir;
    std::vector<std::string_view> kjv;
    for (size_t i = 0; i < test_corpus().kjv_docs; i++)
        kjv.push_back(corpus()[i]);
    const Bpe trained = train_bpe(kjv, 1024, 2);
    ASSERT_EQ(trained.vocab_size(), 1024);
    trained.save_gpt2(dir.path);   // tiktoken reads these with its own data-gym loader
    expect_same_ids_as_tiktoken(trained, dir.path);
    // The files load back to the same vocabulary.
    const Bpe loaded = Bpe::load(dir.path);
    EXPECT_EQ(loaded.tokens(), trained.tokens());
    EXPECT_EQ(loaded.merges(), trained.merges());
}

TEST(Bpe, GreetingEncodesToGpt2sKnownIds) {
    // "Hello world" is [15496, 995] in GPT-2 (as in every GPT-2 tokenizer tutorial).
    EXPECT_EQ(gpt2().encode("Hello world"), (std::vector<int>{15496, 995}));
    EXPECT_EQ(gpt2().encode(""), std::vector<int>{});
    EXPECT_EQ(gpt2().decode({15496, 995, 50256}), "Hello world<|endoftext|>");
}

TEST(Bpe, InvalidUtf8IsEncodedByteByByteAndRoundTrips) {
    const Bpe& g = gpt2();
    const std::vector<std::string> bad = {
        "\xff\xfe",        "x\xe2\x82",
        "\xe2\x82y",       "\xc0\xaf",
        "\xed\xa0\x80",    "\xf4\x90\x80\x80",
        "\x80\x80\x80",    std::string("nul\0byte", 8),
        "caf\xe9 au lait", "\xe2\x82\xac ok \xe2\x82 \xf0\x9f\x98",
        "   \xff   ",      std::string(1000, '\xff'),
    };
    for (const std::string& s : bad) {
        const std::vector<int> ids = g.encode(s);
        EXPECT_EQ(g.decode(ids), s) << printable(s);
    }
    // An invalid byte is its own single-byte token; the valid text around it encodes as usual.
    auto byte_id = [](unsigned char b) { return gpt2_byte_rank(b); };
    std::vector<int> expected = g.encode("caf");
    expected.push_back(byte_id(0xE9));
    for (int id : g.encode(" au lait"))
        expected.push_back(id);
    EXPECT_EQ(g.encode("caf\xe9 au lait"), expected);
    EXPECT_EQ(g.encode("\xff\xfe"), (std::vector<int>{byte_id(0xFF), byte_id(0xFE)}));
    // Random bytes: always a round trip, with the GPT-2 vocabulary and a trained one.
    std::mt19937 rng(7);
    const std::string first = corpus().empty() ? std::string() : corpus()[0];
    const Bpe trained = train_bpe({first}, 400);
    for (int k = 0; k < 200; k++) {
        std::string s(rng() % 200, '\0');
        for (char& c : s)
            c = static_cast<char>(rng() % 256);
        EXPECT_EQ(g.decode(g.encode(s)), s);
        EXPECT_EQ(trained.decode(trained.encode(s)), s);
    }
}

TEST(Bpe, TrainingATinyCorpusGivesTheHandComputedMerges) {
    // Pair counts:       u g 20, p u 17, u n 16, h u 15, g s 5, b u 4  -> merge "ug"
    // then u n 16, h ug 15, p u 12, p ug 5, ug s 5, b u 4               -> "un"
    // then h ug 15, p un 12, p ug 5, ug s 5, b un 4                     -> "hug"
    // then p un 12, p ug 5, hug s 5, b un 4                             -> "pun"
    // then a tie at 5: (p, ug) has the smaller left id (79 < 258)       -> "pug", then "hugs"
    // then b un 4                                                       -> "bun"; no pair left.
    const Bpe bpe = train_bpe_from_counts({{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}}, 300);
    ASSERT_EQ(bpe.vocab_size(), 256 + 7 + 1);   // the corpus ran out of pairs before 300
    std::vector<std::string> learned;
    for (int id = 256; id < bpe.eot_token(); id++)
        learned.push_back(bpe.token_bytes(id));
    EXPECT_EQ(learned, (std::vector<std::string>{"ug", "un", "hug", "pun", "pug", "hugs", "bun"}));
    const int p = gpt2_byte_rank('p'), h = gpt2_byte_rank('h'), u = gpt2_byte_rank('u');
    EXPECT_EQ(bpe.merges()[0], std::make_pair(u, gpt2_byte_rank('g')));
    EXPECT_EQ(bpe.merges()[2], std::make_pair(h, 256));
    EXPECT_EQ(bpe.merges()[4], std::make_pair(p, 256));
    EXPECT_EQ(bpe.token_bytes(bpe.eot_token()), kEndOfText);
    EXPECT_EQ(bpe.encode("hugs"), (std::vector<int>{261}));
    EXPECT_EQ(bpe.encode("bugs"), (std::vector<int>{gpt2_byte_rank('b'), 256, gpt2_byte_rank('s')}));

    // vocab_size caps the merges: 258 = 256 bytes + "ug" + <|endoftext|>.
    EXPECT_EQ(train_bpe_from_counts({{"hug", 10}, {"pug", 5}}, 258).vocab_size(), 258);

    // Merges don't overlap: "aaaa" has three (a, a) pairs but becomes "aa" "aa", then "aaaa".
    const Bpe aaaa = train_bpe({"aaaa"}, 1000);
    ASSERT_EQ(aaaa.vocab_size(), 259);
    EXPECT_EQ(aaaa.token_bytes(256), "aa");
    EXPECT_EQ(aaaa.token_bytes(257), "aaaa");
    // From text, pre-tokens are counted first: " hug" and "hug" are different words.
    const Bpe text = train_bpe({"hug hug hug"}, 1000);
    EXPECT_EQ(text.token_bytes(256), "hu");   // (h,u) 3 beats (u,g) 3 on the smaller left id; (' ',h) has 2
    EXPECT_CONTAINS(error_of([] { train_bpe({"x"}, 256); }), "at least 257");
}

TEST(Bpe, TrainingIsDeterministicAndThreadCountFree) {
    std::vector<std::string_view> docs;
    for (size_t i = 0; i < 300 && i < corpus().size(); i++)
        docs.push_back(corpus()[i]);
    ASSERT_EQ(docs.size(), 300u);
    const Bpe a = train_bpe(docs, 700, 1);
    const Bpe b = train_bpe(docs, 700, 2);
    const Bpe c = train_bpe(docs, 700, 2);
    EXPECT_EQ(a.vocab_size(), 700);
    EXPECT_EQ(a.tokens(), b.tokens());
    EXPECT_EQ(a.merges(), b.merges());
    EXPECT_EQ(b.tokens(), c.tokens());
    EXPECT_EQ(a.fingerprint(), c.fingerprint());
    // A document cut where pre-tokens can't change trains the same as the whole.
    std::string whole;
    for (std::string_view d : docs)
        whole += d;
    const Bpe w = train_bpe({whole}, 700, 2);
    std::vector<std::string_view> pieces;
    size_t start = 0;
    for (size_t cut : pretokenizer_cuts(whole, 5000)) {
        pieces.push_back(std::string_view(whole).substr(start, cut - start));
        start = cut;
    }
    pieces.push_back(std::string_view(whole).substr(start));
    EXPECT_GT(pieces.size(), 10u);
    EXPECT_EQ(train_bpe(pieces, 700, 2).tokens(), w.tokens());
}

TEST(Bpe, PretokenizerCutsKeepTheTokens) {
    // Cuts only after a '\n' between ASCII non-spaces: not before " three" (a space follows), not
    // before "five" ("  \n\n" ends the first piece differently), not after "\xc3\xa9\n".
    const std::string text = "one two\n three\nfour  \n\nfive\n\xc3\xa9t\xc3\xa9\n6 seven\nend.\n'tis\n";
    std::vector<std::string> starts;
    for (size_t c : pretokenizer_cuts(text, 1))
        starts.push_back(text.substr(c, 4));
    EXPECT_EQ(starts, (std::vector<std::string>{"four", "end.", "'tis"}));
    // Random texts over spaces, newlines, letters, punctuation and a non-ASCII letter and space:
    // encoding the pieces between cuts gives the same ids as encoding the whole.
    const std::vector<std::string> alphabet = {" ", "\n", "\n", "a", "b", ".", "'", "\t", "\xc3\xa9", "\xc2\xa0", "1"};
    std::mt19937 rng(3);
    for (int k = 0; k < 300; k++) {
        std::string t;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 60); i < n; i++)
            t += alphabet[rng() % alphabet.size()];
        std::vector<int> joined;
        size_t start = 0;
        for (size_t c : pretokenizer_cuts(t, 1 + rng() % 4)) {
            EXPECT_TRUE(is_pretokenizer_cut(t, c));
            for (int id : gpt2().encode(t.substr(start, c - start)))
                joined.push_back(id);
            start = c;
        }
        for (int id : gpt2().encode(t.substr(start)))
            joined.push_back(id);
        EXPECT_EQ(joined, gpt2().encode(t)) << printable(t);
    }
}

TEST(Bpe, TiktokenFileLoadsTheSameVocabulary) {
    ScratchDir dir;
    gpt2().save_tiktoken(dir.file("gpt2.tiktoken"));
    const Bpe t = Bpe::load(dir.file("gpt2.tiktoken"));
    EXPECT_EQ(t.tokens(), gpt2().tokens());
    EXPECT_TRUE(t.merges().empty());
    for (size_t i = 0; i < corpus().size(); i += 97)
        EXPECT_EQ(t.encode(corpus()[i]), gpt2().encode(corpus()[i]));
    EXPECT_CONTAINS(error_of([&] { t.save_gpt2(dir.file("x")); }), "no merge list");
    // tiktoken itself agrees on the file (a few documents are enough here).
    const std::vector<std::string> docs(kUnicodeDocs.begin(), kUnicodeDocs.end());
    const std::vector<std::vector<int>> expected = tiktoken_ids(dir.file("gpt2.tiktoken"), docs);
    ASSERT_EQ(expected.size(), docs.size());
    for (size_t i = 0; i < docs.size(); i++)
        EXPECT_EQ(t.encode(docs[i]), expected[i]) << i;
}

TEST(Bpe, SavedFilesAreGpt2sFormat) {
    ScratchDir dir;
    const Bpe bpe = train_bpe_from_counts({{"hug", 10}, {" hug", 3}}, 300);
    bpe.save_gpt2(dir.path);
    const std::string vocab = read_text(dir.file("vocab.bpe"));
    EXPECT_EQ(vocab.substr(0, 14), "#version: 0.2\n");
    EXPECT_CONTAINS(vocab, "\nh u\nhu g\n");    // (h, u) and (u, g) tie at 13: the smaller left id
    EXPECT_CONTAINS(vocab, "\xc4\xa0 hug\n");   // "Ġ hug": the space written as Ġ
    const nlohmann::json encoder = nlohmann::json::parse(read_text(dir.file("encoder.json")));
    EXPECT_EQ(encoder.size(), static_cast<size_t>(bpe.vocab_size()));
    EXPECT_EQ(encoder["!"].get<int>(), 0);
    EXPECT_EQ(encoder["\xc4\xa0hug"].get<int>(), bpe.vocab_size() - 2);
    EXPECT_EQ(encoder["<|endoftext|>"].get<int>(), bpe.eot_token());
}

TEST(Bpe, BadVocabularyFilesNameTheFileAndLine) {
    ScratchDir dir;
    const Bpe bpe = train_bpe_from_counts({{"hug", 10}, {"pug", 5}}, 300);   // merges "ug", "hug", "pug"
    bpe.save_gpt2(dir.path);
    const std::string encoder = dir.file("encoder.json"), vocab = dir.file("vocab.bpe");
    const std::string good_vocab = read_text(vocab), good_encoder = read_text(encoder);

    write_text(vocab, "#version: 0.2\nu g\nh ug\nhug\n");
    std::string msg = error_of([&] { Bpe::load(dir.path); });
    EXPECT_CONTAINS(msg, vocab + ":4:");
    EXPECT_CONTAINS(msg, "left right");

    write_text(vocab, "#version: 0.2\nu g\np ug\nh ug\n");   // merges out of id order
    msg = error_of([&] { Bpe::load(dir.path); });
    EXPECT_CONTAINS(msg, vocab + ":3:");
    EXPECT_CONTAINS(msg, "must make id 257");

    write_text(vocab, "#version: 0.2\nu g\nh ug\n");
    EXPECT_CONTAINS(error_of([&] { Bpe::load(dir.path); }), "2 merges");

    // round 42: a line of megabytes was quoted whole; an id of 2^64 - 1 was said to be -1
    write_text(vocab, "#version: 0.2\n" + std::string(1 << 20, 'x') + "\n");
    msg = error_of([&] { Bpe::load(dir.path); });
    EXPECT_CONTAINS(msg, "got \"" + std::string(57, 'x') + "...\"");
    EXPECT_LT(msg.size(), 300u);
    write_text(vocab, good_vocab);
    nlohmann::json huge = nlohmann::json::parse(good_encoder);
    huge["h"] = 18446744073709551615ull;
    write_text(encoder, huge.dump());
    EXPECT_CONTAINS(error_of([&] { Bpe::load(dir.path); }), "token \"h\" has id 18446744073709551615 outside [0, 260)");
    write_text(encoder, good_encoder);

    write_text(vocab, good_vocab);
    write_text(encoder, "{\"a\": 0");
    msg = error_of([&] { Bpe::load(dir.path); });
    EXPECT_CONTAINS(msg, encoder);
    EXPECT_CONTAINS(msg, "invalid JSON");

    nlohmann::json e = nlohmann::json::parse(good_encoder);
    e.erase("<|endoftext|>");
    write_text(encoder, e.dump());
    EXPECT_CONTAINS(error_of([&] { Bpe::load(dir.path); }), "no <|endoftext|>");

    EXPECT_CONTAINS(error_of([&] { Bpe::load(dir.file("nowhere")); }), "encoder.json and vocab.bpe");
    EXPECT_CONTAINS(error_of([&] { Bpe::load(dir.file("missing.tiktoken")); }),
                    "cannot open " + dir.file("missing.tiktoken"));

    const std::string tk = dir.file("bad.tiktoken");
    write_text(tk, "IQ== 0\nIg== 1\n*** 2\n");
    msg = error_of([&] { Bpe::load(tk); });
    EXPECT_CONTAINS(msg, tk + ":3:");
    EXPECT_CONTAINS(msg, "invalid base64");
    write_text(tk, "IQ== 0\nIg== 2\n");
    EXPECT_CONTAINS(error_of([&] { Bpe::load(tk); }), "rank 1 is missing");
}

// A BPE read from a .tiktoken file has no merges list, so a checkpoint gets tokenizer.bin alone,
// not transformers' files; the run's summary says so (round 18: it said "weights and tokenizer").
TEST(Bpe, ATiktokenVocabularyHasNoTransformersTokenizerFiles) {
    ScratchDir dir;
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string ranks;
    for (int b = 0; b < 256; b++) {   // one byte: two base64 digits and "=="
        ranks += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
    }
    ranks += "dGg= 256\naGU= 257\n";   // "th", "he": merges that only the ranks hold
    write_text(dir.file("v.tiktoken"), ranks);
    const Tokenizer tiktoken =
        Tokenizer::from_bpe(std::make_shared<const Bpe>(Bpe::load_tiktoken(dir.file("v.tiktoken"))));
    EXPECT_FALSE(hf_tokenizer_writable(tiktoken));
    EXPECT_FALSE(write_hf_tokenizer(dir.path, tiktoken, 64));
    EXPECT_TRUE(hf_tokenizer_writable(Tokenizer::byte_level()));
}
