// test_hellaswag.cpp — HellaSwag as llm.c evaluates it (eval/hellaswag.h), through the real binary,
// against the PyTorch computation (dev/reference/hellaswag.py: transformers' GPT-2, tiktoken's
// GPT-2 BPE) on the same random GPT-2-vocabulary model and a fixture in the official jsonl format
// (tests/data/hellaswag_fixture.jsonl, 16 examples): the same acc_norm choice (lowest mean loss)
// and the same acc choice (lowest summed loss) for every example, and the same acc_norm and acc,
// with rows that fit, with rows cut to a short window, and split over 2 ranks. In five examples
// the correct ending is the shortest, so summed loss can pick it and acc is a real comparison (in
// the other eleven it is the longest or close to it).
// The two sides differ only in FP32 summation order: a loss summed over n ≤ 128 terms, each
// within a few ulps, moves by at most ~n·2^-24 relative (< 1e-5); the reference prints how far
// its choices are from a tie (min_gap, min_gap_acc), which must be above 1e-4 for the comparison
// to mean anything. Python is required: these tests fail, never skip, without it.
#include "data/tokenizer.h"
#include "eval/hellaswag.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <sstream>
#include <utility>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

std::string fixture() { return repo_root() + "/tests/data/hellaswag_fixture.jsonl"; }
std::string gpt2_dir() { return repo_root() + "/../shared/data/gpt2"; }

nlohmann::json last_json_line(const std::string& output) {
    std::istringstream in(output);
    nlohmann::json found;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] == '{') found = nlohmann::json::parse(line);
    }
    return found;
}

}   // namespace

TEST(HellaSwag, ReadsTheOfficialFormatAndTokenisesEndingsWithALeadingSpace) {
    const Tokenizer gpt2 = Tokenizer::from_bpe(std::make_shared<const Bpe>(Bpe::load(gpt2_dir())));
    const std::vector<HellaSwagExample> all = load_hellaswag(fixture(), gpt2);
    ASSERT_EQ(all.size(), 16u);
    EXPECT_EQ(all[0].label, 2);
    EXPECT_EQ(all[0].context, gpt2.encode("A baker dusts the counter with flour. She"));
    EXPECT_EQ(all[0].endings[2],
              gpt2.encode(" kneads the dough, folding it over and pressing it down with her palms."));
    EXPECT_EQ(load_hellaswag(fixture(), gpt2, 3).size(), 3u);

    ScratchDir dir;
    const std::string bad = dir.file("bad.jsonl");
    auto error_for = [&](const std::string& line) {
        write_text(bad, read_text(fixture()).substr(0, read_text(fixture()).find('\n') + 1) + line + "\n");
        return error_of([&] { load_hellaswag(bad, gpt2); });
    };
    EXPECT_CONTAINS(error_for(R"({"ctx": "x", "label": 0, "endings": ["a", "b", "c"]})"),
                    bad + ":2: \"endings\" is not an array of four");
    EXPECT_CONTAINS(error_for(R"({"ctx": "x", "label": 4, "endings": ["a", "b", "c", "d"]})"),
                    bad + ":2: \"label\" 4 is not 0..3");
    EXPECT_CONTAINS(error_for(R"({"ctx": "x", "endings": ["a", "b", "c", "d"]})"), bad + ":2: not a HellaSwag example");
    // a label no int holds, an ending that is not a string
    EXPECT_CONTAINS(error_for(R"({"ctx": "x", "label": 2.5e126, "endings": ["a", "b", "c", "d"]})"), "is not 0..3");
    EXPECT_CONTAINS(error_for(R"({"ctx": "x", "label": 1, "endings": ["a", 7, "c", "d"]})"),
                    bad + ":2: not a HellaSwag example");
    EXPECT_CONTAINS(error_for("not json"), bad + ":2: not a HellaSwag example");
    write_text(bad, "\n");
    EXPECT_CONTAINS(error_of([&] { load_hellaswag(bad, gpt2); }), "holds no HellaSwag examples");
    gpt2.save(dir.file("tokenizer.bin"));   // the table alone, without its merges: cannot encode
    EXPECT_CONTAINS(error_of([&] { load_hellaswag(fixture(), Tokenizer::load(dir.file("tokenizer.bin"))); }),
                    "needs a tokenizer that encodes text");
}

TEST(HellaSwag, ChoicesAndAccNormAreThoseOfThePyTorchComputation) {
    ScratchDir dir;
    const std::string model = dir.file("gpt2_random");
    // a random GPT-2 (its vocabulary, 2 layers, 64 wide, 128 positions), every tensor perturbed so
    // that the endings' losses differ, with GPT-2's tokenizer files beside it
    write_text(dir.file("make.py"),
               "import shutil, sys, torch\n"
               "from transformers import GPT2Config, GPT2LMHeadModel\n"
               "torch.manual_seed(1)\n"
               "m = GPT2LMHeadModel(GPT2Config(n_positions=128, n_embd=64, n_layer=2, n_head=2))\n"
               "with torch.no_grad():\n"
               "    for p in m.parameters(): p.add_(0.2 * torch.randn_like(p))\n"
               "m.save_pretrained(sys.argv[1])\n"
               "shutil.copy(sys.argv[2] + '/encoder.json', sys.argv[1] + '/vocab.json')\n"
               "shutil.copy(sys.argv[2] + '/vocab.bpe', sys.argv[1] + '/merges.txt')\n");
    std::string out;
    ASSERT_EQ(run_command("/usr/bin/python3 '" + dir.file("make.py") + "' '" + model + "' '" + gpt2_dir() + "'", &out),
              0)
        << "transformers is required (scripts/setup.sh --test): " << out;

    // window T: 128 (every row fits) and 24 (the longer rows keep their ending and the context's end)
    for (int T : {128, 24}) {
        SCOPED_TRACE("T = " + std::to_string(T));
        ASSERT_EQ(run_command("/usr/bin/python3 " + repo_root() + "/dev/reference/hellaswag.py '" + model + "' '" +
                                  fixture() + "' --bpe-dir '" + gpt2_dir() + "' --max-T " + std::to_string(T),
                              &out),
                  0)
            << out;
        const nlohmann::json ref = last_json_line(out);
        ASSERT_EQ(ref["examples"].get<int>(), 16) << out;
        std::printf(
            "T %d: PyTorch acc_norm %.4f, choices %s (closest call %.2e of the loss); acc %.4f, choices %s "
            "(closest call %.2e)\n",
            T, ref["acc_norm"].get<double>(), ref["choices"].get<std::string>().c_str(), ref["min_gap"].get<double>(),
            ref["acc"].get<double>(), ref["choices_acc"].get<std::string>().c_str(), ref["min_gap_acc"].get<double>());
        EXPECT_GT(ref["min_gap"].get<double>(), 1e-4) << "no near-tie: FP32 reordering (< 1e-5) cannot flip a choice";
        EXPECT_GT(ref["min_gap_acc"].get<double>(), 1e-4) << "no near-tie in the summed losses either";
        EXPECT_NE(ref["choices"], ref["choices_acc"])
            << "acc and acc_norm choose alike: the fixture does not tell them apart";
        EXPECT_GT(ref["acc"].get<double>(), 0.0)
            << "acc must not be 0 = 0: the fixture has examples whose correct ending is the shortest";
        for (int ranks : {1, 2}) {
            const std::string run = dir.file("run" + std::to_string(T) + "_" + std::to_string(ranks));
            const std::string launch = ranks > 1 ? "mpirun --oversubscribe --allow-run-as-root -np 2 " : "";
            ASSERT_EQ(
                run_command(launch + train_gpt_binary() + " --init-from '" + model + "' -x 0 --hellaswag '" +
                                fixture() + "' -t " + std::to_string(T) + " -b 3 -g 0 --threads 1 -o '" + run + "'",
                            &out),
                0)
                << out;
            EXPECT_CONTAINS(out, "| hellaswag acc_norm");
            if (T == 24) {
                EXPECT_CONTAINS(out, "cut to T = 24");
            }
            nlohmann::json ours;
            std::istringstream log(read_text(run + "/log.jsonl"));
            for (std::string line; std::getline(log, line);) {
                auto j = nlohmann::json::parse(line);
                if (j["type"] == "hellaswag") ours = j;
            }
            ASSERT_FALSE(ours.is_null()) << out;
            EXPECT_EQ(ours["choices"], ref["choices"]) << ranks << " rank(s)";
            EXPECT_EQ(ours["choices_acc"], ref["choices_acc"]) << ranks << " rank(s)";
            EXPECT_EQ(ours["acc_norm"].get<double>(), ref["acc_norm"].get<double>());
            EXPECT_EQ(ours["acc"].get<double>(), ref["acc"].get<double>());
            EXPECT_EQ(ours["examples"].get<int>(), 16);
        }
    }
}

// Offline, the download scripts fail naming what failed, leave no empty directory, and
// hellaswag.sh points to the bundled fixture (before: an empty data/hellaswag/ and no pointer).
// Round 28: fineweb.sh with a stand-in for the datasets package (PYTHONPATH), which streams
// "<dataset>:<sample> document i" for i < 50 (skip() honoured), and fails for the dataset "offline".
// A re-run naming another DATASET appended its stream to the saved documents of the first, as one
// dataset, exit 0; a failed download ended in a Python traceback.
TEST(HellaSwag, FinewebRefusesToAppendAnotherSourceAndFailsCleanlyOffline) {
    ScratchDir dir;
    make_dirs(dir.file("stub/datasets"));
    write_text(dir.file("stub/datasets/__init__.py"),
               "class _Stream:\n"
               "    def __init__(self, name, start=0): self.name, self.start = name, start\n"
               "    def skip(self, n): return _Stream(self.name, self.start + n)\n"
               "    def __iter__(self):\n"
               "        for i in range(self.start, 50): yield {'text': f'{self.name} document {i}'}\n"
               "def load_dataset(dataset, name=None, split=None, streaming=False):\n"
               "    if dataset == 'offline': raise ConnectionError(\"Couldn't reach 'offline' on the Hub\")\n"
               "    return _Stream(f'{dataset}:{name}')\n");
    const std::string fw = dir.file("fw");
    const std::string env = "PYTHONPATH='" + dir.file("stub") + "' OUT='" + fw + "' GPT2_DIR='" + repo_root() +
                            "/../shared/data/gpt2' FILE_DOCS=10 THREADS=1 ";
    const std::string script = repo_root() + "/dev/data/fineweb.sh";
    std::string output;
    ASSERT_EQ(run_command(env + "MAX_DOCS=20 " + script, &output), 0) << output;
    EXPECT_EQ(read_text(fw + "/source"), "HuggingFaceFW/fineweb sample-10BT\n");
    ASSERT_EQ(run_command(env + "MAX_DOCS=30 " + script, &output), 0) << output;   // the same source: on
    EXPECT_CONTAINS(read_text(fw + "/fineweb_00002.jsonl"), "HuggingFaceFW/fineweb:sample-10BT document 20");
    for (const std::string& other :
         {std::string("DATASET=HuggingFaceFW/fineweb-edu"), std::string("SAMPLE=sample-100BT")}) {
        SCOPED_TRACE(other);
        EXPECT_EQ(run_command(env + other + " " + script, &output), 1) << output;
        EXPECT_CONTAINS(
            output, "fineweb: error: " + fw + " holds 3 file(s) of documents of HuggingFaceFW/fineweb sample-10BT;");
        EXPECT_FALSE(file_exists(fw + "/fineweb_00003.jsonl")) << "nothing appended";
    }
    // round 29: a download from before the source was recorded says how to record it
    std::filesystem::remove(fw + "/source");
    EXPECT_EQ(run_command(env + script, &output), 1) << output;
    EXPECT_CONTAINS(output, "whose source it does not record");
    EXPECT_CONTAINS(output, "printf '%s %s\\n' HuggingFaceFW/fineweb sample-10BT > " + fw + "/source");
    const std::string off = dir.file("off");
    EXPECT_EQ(run_command(env + "OUT='" + off + "' DATASET=offline " + script, &output), 1) << output;
    EXPECT_CONTAINS(output,
                    "fineweb: error: the download of offline (sample-10BT) failed after 0 documents: "
                    "ConnectionError: Couldn't reach 'offline' on the Hub");
    EXPECT_EQ(output.find("Traceback"), std::string::npos) << output;
    EXPECT_FALSE(file_exists(off)) << "no empty directory left";
}

TEST(HellaSwag, TheDownloadScriptsFailCleanlyOffline) {
    ScratchDir dir;
    std::string output;
    const std::string out = dir.file("hs");
    EXPECT_NE(
        run_command("OUT='" + out + "' URL=http://127.0.0.1:9/none " + repo_root() + "/dev/data/hellaswag.sh", &output),
        0)
        << output;
    EXPECT_CONTAINS(output, "hellaswag: error: the download of http://127.0.0.1:9/none failed");
    EXPECT_CONTAINS(output, "tests/data/hellaswag_fixture.jsonl");
    EXPECT_FALSE(file_exists(out)) << "no empty directory left";
    // round 28: a relative OUT is where the script is started (it was the repository's), and a file
    // of blank lines is counted (grep -c's exit 1 on no match ended the script without a word)
    make_dirs(dir.file("rel"));
    std::string lines;
    for (int i = 0; i < 10042; i++)
        lines += "{}\n";
    write_text(dir.file("rel/hellaswag_val.jsonl"), lines);
    ASSERT_EQ(run_command("cd '" + dir.path + "' && OUT=rel " + repo_root() + "/dev/data/hellaswag.sh", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "hellaswag: " + dir.file("rel/hellaswag_val.jsonl") + " ready (10042 examples)");
    write_text(dir.file("rel/hellaswag_val.jsonl"), "\n\n");
    EXPECT_EQ(run_command("OUT='" + dir.file("rel") + "' " + repo_root() + "/dev/data/hellaswag.sh", &output), 1);
    EXPECT_CONTAINS(output, "hellaswag_val.jsonl has 0 examples; the validation set has 10042");
    const std::string ts = dir.file("ts");
    EXPECT_NE(
        run_command("OUT='" + ts + "' URL=http://127.0.0.1:9 " + repo_root() + "/dev/data/tinystories.sh", &output), 0)
        << output;
    EXPECT_CONTAINS(output, "tinystories: error:");
    EXPECT_FALSE(file_exists(ts)) << "no empty directory left";
    // ... but one the user made stays (round 43: removed by the failed run's clean-up)
    make_dirs(dir.file("mine"));
    for (const char* script : {"tinystories.sh", "hellaswag.sh"}) {
        EXPECT_NE(run_command("OUT='" + dir.file("mine") + "' URL=http://127.0.0.1:9/none " + repo_root() +
                                  "/dev/data/" + script,
                              &output),
                  0);
        EXPECT_TRUE(file_exists(dir.file("mine"))) << script;
    }
    // a mistyped tokenizer is named before the 2.2 GB download, not after it
    EXPECT_NE(run_command(
                  "TOKENIZER=gtp2 OUT='" + ts + "' URL=http://127.0.0.1:9 " + repo_root() + "/dev/data/tinystories.sh",
                  &output),
              0);
    EXPECT_CONTAINS(output, "tinystories: error: TOKENIZER must be gpt2 or bpe, got gtp2");
    EXPECT_EQ(output.find("download"), std::string::npos) << output;
    EXPECT_NE(run_command("GPT2_DIR=/nonexistent OUT='" + ts + "' URL=http://127.0.0.1:9 " + repo_root() +
                              "/dev/data/tinystories.sh",
                          &output),
              0);
    EXPECT_CONTAINS(output, "tinystories: error: GPT2_DIR=/nonexistent: expected a directory with encoder.json");
    // ... and so are THREADS and a BPE's VOCAB (round 16: they were checked by prepare_text, after it)
    for (const auto& [env, says] :
         {std::pair<std::string, std::string>{"THREADS=-3", "tinystories: error: THREADS=-3: expected a number"},
          {"TOKENIZER=bpe VOCAB=100", "tinystories: error: VOCAB=100: expected a vocabulary size of 257"},
          // round 24: numbers that wrapped round in bash's arithmetic, or were octal to it
          {"TOKENIZER=bpe VOCAB=99999999999", "tinystories: error: VOCAB=99999999999: expected a vocabulary size"},
          {"THREADS=18446744073709551621", "tinystories: error: THREADS=18446744073709551621: expected a number"},
          {"THREADS=08", "tinystories: error: THREADS=08: expected a number"}}) {
        EXPECT_NE(
            run_command(env + " OUT='" + ts + "' URL=http://127.0.0.1:9 " + repo_root() + "/dev/data/tinystories.sh",
                        &output),
            0)
            << env;
        EXPECT_CONTAINS(output, says);
        EXPECT_EQ(output.find("download"), std::string::npos) << output;
    }
    // fineweb.sh too, before its tens of GB (and before it asks for the datasets package)
    const std::string fw = dir.file("fw");
    for (const auto& [env, says] :
         {std::pair<std::string, std::string>{"GPT2_DIR=/nonexistent",
                                              "fineweb: error: GPT2_DIR=/nonexistent: expected a directory"},
          {"VAL_FRACTION=abc", "fineweb: error: VAL_FRACTION=abc: expected a fraction between 0 and 1"},
          {"THREADS=-3", "fineweb: error: THREADS=-3: expected a number of threads"},
          {"MAX_DOCS=abc", "fineweb: error: MAX_DOCS=abc: expected a number of documents"},
          {"THREADS=08", "fineweb: error: THREADS=08: expected a number of threads"},
          {"FILE_DOCS=18446744073709551617", "fineweb: error: FILE_DOCS=18446744073709551617: expected a positive"}}) {
        EXPECT_NE(run_command(env + " OUT='" + fw + "' " + repo_root() + "/dev/data/fineweb.sh", &output), 0) << env;
        EXPECT_CONTAINS(output, says);
        EXPECT_FALSE(file_exists(fw)) << "no empty directory left";
    }
}
