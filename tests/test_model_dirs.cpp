// test_model_dirs.cpp — checkpoints as Hugging Face model directories, and transformers
// directories as models to start from, through the real binaries and transformers (Debian's
// python3-torch, pip's transformers; scripts/setup.sh --test):
//   * a step directory is a complete model: AutoTokenizer encodes as the engine does, pipeline
//     ("text-generation") runs, and greedy decoding with the engine's KV cache gives the tokens of
//     transformers' full forward;
//   * --init-from takes a checkpoint root, a step directory or a transformers directory (as
//     GPT2LMHeadModel and as GPT2Model save it), and -x 0 evaluates it without training data;
//   * what the engine cannot compute is refused, naming the file and field.
// Python is required: these tests fail, never skip, when it cannot run.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model_test_util.h"
#include "tests/tolerances.h"

#include <nlohmann/json.hpp>

#include <sstream>

using namespace train_gpt;
using namespace train_gpt::test;

namespace {

// The last line of output that parses as a JSON object.
nlohmann::json last_json(const std::string& output) {
    std::istringstream in(output);
    nlohmann::json found;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] != '{') continue;
        try {
            found = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception&) {
        }
    }
    return found;
}

const char* kText = "And God said, Let there be light: and there was light.\n";

}   // namespace

TEST(ModelDirs, AStepDirectoryIsACompleteTransformersModelWithItsTokenizer) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 80; i++)
        text += kText + std::string("And the evening and the morning were the first day.\n");
    write_text(dir.file("book.txt"), text);
    std::string out;
    ASSERT_EQ(run_command(build_dir() + "/prepare_text --input '" + dir.file("book.txt") + "' --out-dir '" +
                              dir.file("d") + "' --name d --tokenizer bpe --vocab-size 300",
                          &out),
              0)
        << out;
    // bf16 without master weights: the checkpoint's weights are exactly its BF16 safetensors, so
    // the engine (FP32 from them) and transformers compute on identical parameters
    ASSERT_EQ(
        run_command(train_gpt_binary() + " -i '" + dir.file("d/d_train_*.bin") +
                        "' -j '' -e d2 --n-embd 32 -b 2 "
                        "-t 16 -x 6 -l 3e-3 -p bf16 --master-weights false --checkpoint-every 6 -g 0 --threads 1 -o '" +
                        dir.file("out") + "'",
                    &out),
        0)
        << out;
    const std::string step = dir.file("out/checkpoints/step_00000006");
    for (const char* f :
         {"tokenizer.bin", "vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
        EXPECT_TRUE(file_exists(step + "/" + f)) << f;
    }
    const std::string prompt = "And God said";
    write_text(dir.file("hf.py"),
               "import json, sys, torch\n"
               "from transformers import AutoTokenizer, GPT2LMHeadModel, pipeline\n"
               "step, text, prompt = sys.argv[1], sys.argv[2], sys.argv[3]\n"
               "tok = AutoTokenizer.from_pretrained(step)\n"
               "ids = tok(text)['input_ids']\n"
               "slow = AutoTokenizer.from_pretrained(step, use_fast=False)(text)['input_ids']\n"
               "gen = pipeline('text-generation', model=step, tokenizer=step)\n"
               "piped = gen(prompt, max_new_tokens=8, do_sample=False)[0]['generated_text']\n"
               "model = GPT2LMHeadModel.from_pretrained(step, torch_dtype=torch.float32).eval()\n"
               "seq = tok(prompt)['input_ids']\n"
               "with torch.no_grad():\n"
               "    for _ in range(12):   # greedy by full forwards, no stopping at <|endoftext|>\n"
               "        seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))\n"
               "print(json.dumps({'ids': ids, 'slow_ids': slow, 'piped': piped, 'greedy': tok.decode(seq),\n"
               "                  'eos': tok.eos_token_id, 'decoded': tok.decode(ids)}))\n");
    ASSERT_EQ(
        run_command(python_binary() + " '" + dir.file("hf.py") + "' '" + step + "' '" + kText + "' '" + prompt + "'",
                    &out),
        0)
        << "transformers is required (scripts/setup.sh --test): " << out;
    const nlohmann::json hf = last_json(out);
    const Tokenizer ours = Tokenizer::load(step + "/tokenizer.bin");
    EXPECT_EQ(hf["ids"].get<std::vector<int>>(), ours.encode(kText)) << "AutoTokenizer (fast) encodes as the engine";
    EXPECT_EQ(hf["slow_ids"].get<std::vector<int>>(), ours.encode(kText)) << "GPT2Tokenizer encodes as the engine";
    EXPECT_EQ(hf["decoded"], kText);
    EXPECT_EQ(hf["eos"].get<int>(), ours.eot_token());
    EXPECT_EQ(hf["piped"].get<std::string>().rfind(prompt, 0), 0u) << hf["piped"];

    // the engine's greedy sample through its KV cache: transformers' tokens
    ASSERT_EQ(
        run_command(train_gpt_binary() + " --init-from '" + step + "' -x 0 --temperature 0 -g 12 --sample-prompt '" +
                        prompt + "' -o '" + dir.file("sample") + "'",
                    &out),
        0)
        << out;
    const auto samples = log_records(dir.file("sample/log.jsonl"), "sample");
    ASSERT_EQ(samples.size(), 1u);
    EXPECT_EQ(samples[0]["text"], hf["greedy"]);
}

TEST(ModelDirs, InitFromTakesATransformersDirectoryAndEvaluatesItWithoutTraining) {
    ScratchDir dir;
    // byte-level val data with the tokenizer beside it, and its first 2 batches of B=2 windows
    // of T+1 = 17 tokens as the val loader cuts them, for transformers
    std::string text;
    for (int i = 0; i < 40; i++)
        text += kText;
    std::vector<uint32_t> tokens(text.begin(), text.end());
    make_dirs(dir.file("d"));
    write_shard(dir.file("d/val_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    Tokenizer::byte_level().save(dir.file("d/tokenizer.bin"));
    std::vector<int32_t> windows;
    for (int k = 0; k < 4; k++)
        windows.insert(windows.end(), tokens.begin() + k * 16, tokens.begin() + k * 16 + 17);
    FILE* f = open_file(dir.file("windows.bin"), "wb");
    write_exact(windows.data(), 4, windows.size(), f, dir.file("windows.bin"));
    std::fclose(f);
    // a random GPT-2 with every tensor perturbed, saved as GPT2LMHeadModel and as GPT2Model
    write_text(dir.file("make.py"),
               "import sys, torch\n"
               "from transformers import GPT2Config, GPT2LMHeadModel\n"
               "torch.manual_seed(0)\n"
               "cfg = GPT2Config(vocab_size=257, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=256,\n"
               "                 eos_token_id=256)\n"
               "m = GPT2LMHeadModel(cfg)\n"
               "with torch.no_grad():\n"
               "    for p in m.parameters(): p.add_(0.05 * torch.randn_like(p))\n"
               "m.save_pretrained(sys.argv[1])\n"
               "m.transformer.save_pretrained(sys.argv[2])\n"
               "cfg.activation_function = 'relu'\n"
               "GPT2LMHeadModel(cfg).save_pretrained(sys.argv[3])\n");
    std::string out;
    ASSERT_EQ(run_command(python_binary() + " '" + dir.file("make.py") + "' '" + dir.file("lm") + "' '" +
                              dir.file("base") + "' '" + dir.file("relu") + "'",
                          &out),
              0)
        << "transformers is required: " << out;
    ASSERT_EQ(run_command(python_binary() + " " + repo_root() + "/dev/reference/hf_eval.py '" + dir.file("lm") + "' '" +
                              dir.file("windows.bin") + "' 2 16",
                          &out),
              0)
        << out;
    const double hf_loss = last_json(out)["loss"].get<double>();
    const double bound = fp32_loss_bound(gpt_config_from_spec("d2", 257, 64, 32, 2), 16,
                                         last_json(out)["max_abs_logit"].get<double>(), hf_loss);
    // FP32 on both sides on the same F32 weights: tests/tolerances.h's fp32_loss_bound
    for (const char* model : {"lm", "base"}) {
        SCOPED_TRACE(model);
        const std::string run = dir.file(std::string("eval_") + model);
        ASSERT_EQ(run_command("cd '" + dir.path + "' && " + train_gpt_binary() + " --init-from '" + dir.file(model) +
                                  "' -x 0 -j '" + dir.file("d/val_*.bin") + "' -b 2 -t 16 -m 2 -g 0 -o '" + run + "'",
                              &out),
                  0)
            << out;
        EXPECT_CONTAINS(out, "initialised from the weights of transformers model " + dir.file(model));
        const auto vals = log_records(run + "/log.jsonl", "val");
        ASSERT_EQ(vals.size(), 1u);
        const double loss = vals[0]["loss"].get<double>();
        EXPECT_NEAR(loss, hf_loss, bound * hf_loss) << "engine " << loss << ", transformers " << hf_loss;
        const auto config = nlohmann::json::parse(read_text(run + "/config.json"));
        EXPECT_EQ(config["n_embd"].get<int>(), 32);
        EXPECT_EQ(config["max_seq_len"].get<int>(), 64);
    }
    // fine-tuning from it: two steps of training
    ASSERT_EQ(run_command(train_gpt_binary() + " --init-from '" + dir.file("lm") + "' -x 2 -i '" +
                              dir.file("d/val_*.bin") + "' -j '' -b 2 -t 16 -g 0 -o '" + dir.file("tune") + "'",
                          &out),
              0)
        << out;
    EXPECT_EQ(log_records(dir.file("tune/log.jsonl"), "step").size(), 2u);
    // what the engine cannot compute, and what is not a model
    EXPECT_NE(run_command(train_gpt_binary() + " --init-from '" + dir.file("relu") + "' -x 0 -g 0", &out), 0);
    EXPECT_CONTAINS(out, dir.file("relu") + "/config.json: activation_function \"relu\"");
    // a field of the wrong type
    std::string config = read_text(dir.file("relu/config.json"));
    config.replace(config.find("\"relu\""), 6, "0.1");
    write_text(dir.file("relu/config.json"), config);
    EXPECT_NE(run_command(train_gpt_binary() + " --init-from '" + dir.file("relu") + "' -x 0 -g 0", &out), 0);
    EXPECT_CONTAINS(out, dir.file("relu") + "/config.json: activation_function must be a string, got 0.1");
    EXPECT_NE(run_command(train_gpt_binary() + " --init-from '" + dir.file("d") + "' -x 0 -g 0", &out), 0);
    EXPECT_CONTAINS(out, "--init-from " + dir.file("d") + ": not a checkpoint");
    EXPECT_NE(run_command(train_gpt_binary() + " --init-from '" + dir.file("lm") + "' -e d4 -x 0 -g 0", &out), 0);
    EXPECT_CONTAINS(out,
                    "--model: the model the run starts from (" + dir.file("lm") + ") has n_layer 2, the flags make 4");
}

// The shape a config.json or a manifest claims is checked against the weights' headers before a
// model of that shape is allocated: n_positions 8000000 (before: 6 GB and 35 s, then a shape
// refusal), 2^31 − 1 (before: "out of host memory", naming no file), fewer layers than the
// weights hold (before: accepted, the extra layers ignored), a manifest's max_seq_len altered.
TEST(ModelDirs, AConfigsShapeIsCheckedAgainstTheWeightsBeforeAnythingIsAllocated) {
    ScratchDir dir;
    std::string text;
    for (int i = 0; i < 60; i++)
        text += kText;
    const std::vector<uint32_t> tokens(text.begin(), text.end());
    make_dirs(dir.file("d"));
    write_shard(dir.file("d/t_train_000000.bin"), tokens.data(), (int64_t)tokens.size(), 2);
    Tokenizer::byte_level().save(dir.file("d/tokenizer.bin"));
    std::string out;
    ASSERT_EQ(run_command(train_gpt_binary() + " -i '" + dir.file("d/t_train_*.bin") +
                              "' -j '' -e d2 --n-embd 32 -b 2 "
                              "-t 16 -x 2 --checkpoint-every 2 -g 0 --threads 1 -o '" +
                              dir.file("out") + "'",
                          &out),
              0)
        << out;
    const std::string step = dir.file("out/checkpoints/step_00000002");
    // a transformers directory: the step's config.json and weights without its manifest
    const std::string hf = dir.file("hf");
    ASSERT_EQ(
        run_command("mkdir '" + hf + "' && cp '" + step + "'/config.json '" + step + "'/model* '" + hf + "/'", &out), 0)
        << out;
    const nlohmann::json config = nlohmann::json::parse(read_text(hf + "/config.json"));
    auto init_from = [&](const std::string& model) {
        return run_timed("timeout 300 " + train_gpt_binary() + " --init-from '" + model + "' -x 0 -g 4 --threads 1");
    };
    ASSERT_EQ(init_from(hf).rc, 0) << "the directory as saved loads";
    // round 19 (B13): another tool's manifest.json beside it: the refusal says why and what to do
    write_text(hf + "/manifest.json", "{\"name\": \"foo\", \"version\": \"1.0\"}");
    expect_refused(init_from(hf), {hf + "/manifest.json: not a train_gpt checkpoint manifest",
                                   "to load the transformers model of its config.json and weights, move "
                                   "manifest.json out of it"});
    ASSERT_EQ(std::remove((hf + "/manifest.json").c_str()), 0);
    // round 20: model.safetensors beside an index: transformers loads the one, this engine loaded
    // the other's files (two models under one name); refused, naming both
    ASSERT_EQ(run_command("cp '" + hf + "/model-00001-of-00001.safetensors' '" + hf + "/model.safetensors'", &out), 0);
    expect_refused(init_from(hf), {hf + " holds both model.safetensors and model.safetensors.index.json"});
    ASSERT_EQ(std::remove((hf + "/model.safetensors").c_str()), 0);
    for (auto [field, value, named] :
         {std::tuple{"n_positions", 8000000, "tensor transformer.wpe.weight has shape [16, 32]"},
          {"n_layer", 1, "holds tensor transformer.h.1."},
          // round 19 (B9): more layers than the weights: the config is what differs (it blamed
          // the weights' index, "no file for tensor")
          {"n_layer", 3, "holds 2 layers, but"}}) {
        SCOPED_TRACE(std::string(field) + " " + std::to_string(value));
        nlohmann::json altered = config;
        altered[field] = value;
        write_text(hf + "/config.json", altered.dump(2));
        expect_refused(init_from(hf), {hf + "/model", named, hf + "/config.json describes",
                                       std::string(field) + " " + std::to_string(value)});
    }
    // Round 16: a width or a size past the bounds of check_model_shape (model/layout.h) is refused
    // as such, naming the file and the field (before: n_embd 2147483646 overflowed the int shapes,
    // and the wrapped parameter count was only refused because it still did not fit in memory)
    for (auto [field, value] : {std::pair{"n_positions", 2147483647}, {"n_embd", 2147483646}, {"n_layer", 70000}}) {
        SCOPED_TRACE(field);
        nlohmann::json altered = config;
        altered[field] = value;
        if (field == std::string("n_embd")) altered["n_head"] = 2;
        write_text(hf + "/config.json", altered.dump(2));
        expect_refused(init_from(hf),
                       {"error: " + hf + "/config.json: " + field + " " + std::to_string(value) + " is outside 1.."});
    }
    nlohmann::json wide = config;
    wide["n_embd"] = 262144;   // within the width bound; 2 layers of it are 1.6e12 parameters
    wide["n_head"] = 2;
    write_text(hf + "/config.json", wide.dump(2));
    expect_refused(init_from(hf), {"error: " + hf + "/config.json: 2 layers of width 262144",
                                   "make more than 1099511627776 parameters"});
    write_text(hf + "/config.json", config.dump(2));
    expect_refused(
        run_timed("timeout 300 " + train_gpt_binary() + " -i '" + dir.file("d/t_train_*.bin") +
                  "' -j '' -e d2 --n-embd 2147483646 --n-head 2 -x 1 -g 0 --threads 1 -o '" + dir.file("wide") + "'"),
        {"error: --model d2 --n-embd 2147483646 --n-head 2: n_embd 2147483646 is outside 1..1048576"});
    nlohmann::json manifest = nlohmann::json::parse(read_text(step + "/manifest.json"));
    manifest["model"]["n_embd"] = 2147483646;
    manifest["model"]["n_head"] = 2;
    write_text(step + "/manifest.json", manifest.dump(1));
    expect_refused(init_from(step), {step + "/manifest.json (\"model\"): n_embd 2147483646 is outside 1..1048576"});
    manifest = nlohmann::json::parse(read_text(step + "/manifest.json"));
    manifest["model"]["n_embd"] = 32;
    manifest["model"]["max_seq_len"] = 8000000;
    write_text(step + "/manifest.json", manifest.dump(1));
    expect_refused(init_from(step), {step + "/model", "tensor transformer.wpe.weight has shape [16, 32]",
                                     step + "/manifest.json describes", "n_positions 8000000"});
}
