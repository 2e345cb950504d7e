// test_checkpoint.cpp — the safetensors reader/writer and the checkpoint format (DESIGN §5):
// round trips of the file format (and Python's safetensors reading ours, ours reading Python's);
// the Hugging Face layout (names, transposes, V rows of wte) round trip; state slices saved by
// 1, 2 and 4 writers read back as any range; latest / prune / tmp handling; every bad input
// failing with the file named and nothing deleted; and transformers' GPT2LMHeadModel loading a
// checkpoint unchanged and computing the engine's loss.
//
// Python (Debian's python3-torch plus pip's transformers / safetensors, scripts/setup.sh --test)
// is required: those tests fail, never skip, when it cannot run.
#include "checkpoint/checkpoint.h"
#include "precision/dtypes.h"
#include "model/gpt.h"
#include "rng.h"
#include "checkpoint/safetensors.h"
#include "test_util.h"
#include "tests/tolerances.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

using namespace train_gpt;
using namespace train_gpt::test;
namespace fs = std::filesystem;

namespace {

float bf16_round(float x) { return bf16::from_float(x).to_float(); }

// A small model whose shapes exercise everything: V = 77 (so Vp = 128 has padding rows),
// rectangular matrices, 2 layers.
GPTConfig small_config() { return gpt_config_from_spec("d2", 77, 20, 32, 2); }

size_t num_params(const GPTConfig& cfg) {
    size_t n = 0;
    for (size_t s : param_tensor_sizes(cfg))
        n += s;
    return n;
}

size_t offset_of(const GPTConfig& cfg, int tensor) {
    auto sizes = param_tensor_sizes(cfg);
    size_t off = 0;
    for (int i = 0; i < tensor; i++)
        off += sizes[i];
    return off;
}

std::vector<float> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<float> v(n);
    for (float& x : v)
        x = (float)(scale * rng.normal());
    return v;
}

// A complete save as the trainer does it, with `world` ranks run one after the other; rank r's
// ZeRO range is the r-th of `world` near-equal parts of the flat vector.
struct State {
    std::vector<float> master, m, v;
};
State random_state(const GPTConfig& cfg, uint64_t seed) {
    const size_t n = num_params(cfg);
    return {random_vector(n, seed), random_vector(n, seed + 1), random_vector(n, seed + 2)};
}

std::string save(const std::string& out, int64_t step, const GPTConfig& cfg, const std::vector<float>& weights,
                 const State& state, int world, CheckpointManifest manifest = {}) {
    const std::string tmp = begin_checkpoint(out, step);
    const size_t n = num_params(cfg);
    for (int r = 0; r < world; r++) {
        write_weight_shards(tmp, cfg, weights.data(), r, world);
        const size_t b = n * r / world, e = n * (r + 1) / world;
        write_state_shard(tmp, cfg, r, b, e - b, state.master.data() + b, state.m.data() + b, state.v.data() + b);
    }
    manifest.step = step;
    manifest.model = cfg;
    manifest.world_size = world;
    finalize_checkpoint(tmp, checkpoint_dir(out, step), manifest);
    return checkpoint_dir(out, step);
}

// A handcrafted safetensors file: header text (not padded) and data bytes.
void write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; i++)
        bytes[i] = (char)((uint64_t)header.size() >> (8 * i));
    write_text(path, bytes + header + data);
}

}   // namespace

// ---- safetensors ------------------------------------------------------------------------------

TEST(Safetensors, RoundTripsF32AndBF16WithMetadata) {
    ScratchDir dir;
    const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-8f, -7.0f};   // (2, 3)
    std::vector<bf16> b;
    for (float x : {0.1f, -0.2f, 300.0f, 1.0f})
        b.push_back(bf16::from_float(x));
    const float scalar = 42.0f;
    write_safetensors(dir.file("t.safetensors"),
                      {{"a", StDType::F32, {2, 3}, a.data()},
                       {"b.bf16", StDType::BF16, {4}, b.data()},
                       {"empty", StDType::F32, {0, 5}, nullptr},
                       {"scalar", StDType::F32, {}, &scalar}},
                      {{"format", "pt"}, {"note", "hello"}});

    const std::string raw = read_text(dir.file("t.safetensors"));
    uint64_t header_len = 0;
    for (int i = 0; i < 8; i++)
        header_len |= (uint64_t)(uint8_t)raw[i] << (8 * i);
    EXPECT_EQ(header_len % 8, 0u) << "the data must start 8-byte aligned";
    EXPECT_EQ(raw.size(), 8 + header_len + 6 * 4 + 4 * 2 + 4);
    auto header = nlohmann::json::parse(raw.substr(8, header_len));
    EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({0, 24}));
    EXPECT_EQ(header["b.bf16"]["dtype"], "BF16");
    EXPECT_EQ(header["__metadata__"]["note"], "hello");

    SafetensorsFile f(dir.file("t.safetensors"));
    ASSERT_EQ(f.tensors().size(), 4u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.at("a").shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(f.at("a").dtype, StDType::F32);
    EXPECT_EQ(f.read_floats("a"), a);
    const std::vector<float> bf = f.read_floats("b.bf16");
    for (size_t i = 0; i < b.size(); i++)
        EXPECT_EQ(bf[i], b[i].to_float());
    EXPECT_EQ(f.at("empty").numel(), 0u);
    EXPECT_TRUE(f.read("empty").empty());
    EXPECT_EQ(f.read_floats("scalar"), std::vector<float>{42.0f});
    float part[2];
    f.read_bytes(part, f.at("a"), 2 * sizeof(float), sizeof(part));
    EXPECT_EQ(part[0], 3.25f);
    EXPECT_EQ(part[1], 0.0f);
    EXPECT_EQ(f.find("nope"), nullptr);
    EXPECT_CONTAINS(error_of([&] { f.at("nope"); }), "t.safetensors: no tensor 'nope'");
}

TEST(Safetensors, RejectsMalformedFilesNamingFileAndTensor) {
    ScratchDir dir;
    const std::string p = dir.file("bad.safetensors");
    const std::string data(16, 'x');
    auto err = [&](const std::string& header, const std::string& d) {
        write_raw_safetensors(p, header, d);
        return error_of([&] { SafetensorsFile f(p); });
    };
    const std::string good = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
    write_raw_safetensors(p, good, data);
    EXPECT_NO_THROW(SafetensorsFile f(p));

    std::string e = err(good, data.substr(0, 15));   // truncated
    EXPECT_CONTAINS(e, p);
    EXPECT_CONTAINS(e, "'w'");
    EXPECT_CONTAINS(e, "truncated");
    EXPECT_CONTAINS(err(good, data + "extra"), "the tensors hold 16 bytes of data but the file has 21");
    EXPECT_CONTAINS(err(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", data),
                    "tensor 'w': data_offsets [0, 16] do not hold F32 [2, 3]");
    EXPECT_CONTAINS(err(R"({"w":{"dtype":"Q4","shape":[2,2],"data_offsets":[0,16]}})", data),
                    "tensor 'w' has unsupported dtype");
    EXPECT_CONTAINS(err(R"({"w":{"dtype":"F32","shape":[2,2]}})", data), "tensor 'w' lacks");
    EXPECT_CONTAINS(err(R"({"w":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]}})", data.substr(0, 16)),
                    "starts at byte 8 of the data, expected 0 (hole)");
    EXPECT_CONTAINS(err(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        data),
                    "overlap");
    EXPECT_CONTAINS(err("{not json", data), "header is not valid JSON");
    EXPECT_CONTAINS(err("[1,2]", data), "header is not a JSON object");

    write_text(p, "abc");
    EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "too short for a safetensors file");
    write_text(p, std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8) + "{}");
    EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "header length 16777215 does not fit the file");
    EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(dir.file("missing.safetensors")); }),
                    "cannot open " + dir.file("missing.safetensors"));
    EXPECT_CONTAINS(error_of([&] {
                        write_safetensors(p, {{"__metadata__", StDType::F32, {0}, nullptr}});
                    }),
                    "invalid or duplicate tensor name");
}

// A zero-element tensor reads back as empty (with no copy from or to a null pointer, which UBSan
// reports: scripts/sanitize.sh); numbers beyond int64 in the header are refused, not wrapped.
TEST(Safetensors, ZeroElementTensorsAndHugeNumbers) {
    ScratchDir dir;
    const std::string p = dir.file("zero.safetensors");
    write_safetensors(p, {{"empty", StDType::F32, {0, 4}, nullptr}, {"scalar", StDType::BF16, {}, "\x80\x3f"}});
    const SafetensorsFile f(p);
    EXPECT_TRUE(f.read_floats("empty").empty());
    EXPECT_TRUE(f.read("empty").empty());
    EXPECT_EQ(f.read_floats("scalar"), std::vector<float>{1.0f});
    const std::string huge = "18446744073709551615";   // 2^64 - 1
    write_raw_safetensors(p, R"({"w":{"dtype":"F32","shape":[)" + huge + R"(],"data_offsets":[0,0]}})", "");
    EXPECT_CONTAINS(error_of([&] { SafetensorsFile g(p); }),
                    "\"w.shape\" must be an integer in [0, 9223372036854775807]");
    write_raw_safetensors(p, R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[)" + huge + "," + huge + "]}}", "");
    EXPECT_CONTAINS(error_of([&] { SafetensorsFile g(p); }), "\"w.data_offsets\" must be an integer");
}

// Python's safetensors (what transformers uses) reads our file, and we read a file it wrote.
TEST(Safetensors, InteroperatesWithPythonSafetensors) {
    ScratchDir dir;
    std::vector<float> a = {1.0f, -2.5f, 3.0f, 4.0f, 5.0f, 6.5f};
    std::vector<bf16> b;
    for (float x : {0.15625f, -1.75f, 1024.0f})
        b.push_back(bf16::from_float(x));
    write_safetensors(dir.file("ours.safetensors"),
                      {{"a", StDType::F32, {3, 2}, a.data()}, {"b", StDType::BF16, {3}, b.data()}}, {{"format", "pt"}});
    const std::string script =
        "import json, sys, torch\n"
        "from safetensors import safe_open\n"
        "from safetensors.torch import load_file, save_file\n"
        "t = load_file(sys.argv[1])\n"
        "with safe_open(sys.argv[1], framework='pt') as f: meta = f.metadata()\n"
        "save_file({'x': torch.arange(12, dtype=torch.float32).reshape(3, 4) / 4,\n"
        "           'y': torch.tensor([0.5, -3.0], dtype=torch.bfloat16)}, sys.argv[2], metadata={'k': 'v'})\n"
        "print(json.dumps({'a': t['a'].tolist(), 'a_dtype': str(t['a'].dtype), 'b': t['b'].float().tolist(),\n"
        "                  'b_dtype': str(t['b'].dtype), 'meta': meta}))\n";
    write_text(dir.file("interop.py"), script);
    std::string out;
    const int rc = run_command(python_binary() + " " + dir.file("interop.py") + " " + dir.file("ours.safetensors") +
                                   " " + dir.file("theirs.safetensors"),
                               &out);
    ASSERT_EQ(rc, 0) << "Python's safetensors is required (scripts/setup.sh --test): " << out;
    const auto j = nlohmann::json::parse(out.substr(out.rfind("\n{") == std::string::npos ? 0 : out.rfind("\n{") + 1));
    EXPECT_EQ(j["a"], nlohmann::json({{1.0, -2.5}, {3.0, 4.0}, {5.0, 6.5}}));
    EXPECT_EQ(j["a_dtype"], "torch.float32");
    EXPECT_EQ(j["b"], nlohmann::json({0.15625, -1.75, 1024.0}));
    EXPECT_EQ(j["b_dtype"], "torch.bfloat16");
    EXPECT_EQ(j["meta"]["format"], "pt");

    SafetensorsFile theirs(dir.file("theirs.safetensors"));
    EXPECT_EQ(theirs.metadata().at("k"), "v");
    EXPECT_EQ(theirs.at("x").shape, (std::vector<int64_t>{3, 4}));
    std::vector<float> x = theirs.read_floats("x");
    for (int i = 0; i < 12; i++)
        EXPECT_EQ(x[i], i / 4.0f);
    EXPECT_EQ(theirs.at("y").dtype, StDType::BF16);
    EXPECT_EQ(theirs.read_floats("y"), (std::vector<float>{0.5f, -3.0f}));
}

// ---- checkpoint: Hugging Face layout ----------------------------------------------------------

TEST(Checkpoint, HfLayoutRoundTripsWithTransposesAndVRowsOfWte) {
    const GPTConfig cfg = small_config();
    const int L = cfg.n_layer, C = cfg.n_embd, V = cfg.vocab_size;
    std::vector<float> w = random_vector(num_params(cfg), 5);   // padding rows of wte non-zero on purpose
    for (int world : {1, 3}) {
        ScratchDir dir;
        for (int r = 0; r < world; r++)
            write_weight_shards(dir.path, cfg, w.data(), r, world);

        // The index names every HF tensor, and each lies in the shard it names, once.
        const auto index = nlohmann::json::parse(read_text(dir.file("model.safetensors.index.json")));
        const auto tensors = hf_tensors(cfg, world);
        EXPECT_EQ(tensors.size(), (size_t)(4 + 12 * L));
        EXPECT_EQ(index["weight_map"].size(), tensors.size());
        std::map<std::string, int> seen;
        for (int s = 0; s < world; s++) {
            const std::string name = hf_shard_name(s, world);
            EXPECT_EQ(name, format("model-%05d-of-%05d.safetensors", s + 1, world));
            SafetensorsFile f(dir.file(name));
            EXPECT_EQ(f.metadata().at("format"), "pt") << "transformers requires it";
            EXPECT_FALSE(f.tensors().empty());
            for (const auto& t : f.tensors()) {
                EXPECT_EQ(t.dtype, StDType::BF16);
                EXPECT_EQ(index["weight_map"][t.name], name);
                seen[t.name]++;
            }
        }
        EXPECT_EQ(seen.size(), tensors.size());
        for (const auto& [name, count] : seen)
            EXPECT_EQ(count, 1) << name;
        EXPECT_EQ(seen.count("lm_head.weight"), 0u) << "tied: not stored";

        // Element checks straight from the files: wte has V rows; c_attn of layer 1 is qkvw[1]ᵀ.
        SafetensorsFile wte(dir.file(index["weight_map"]["transformer.wte.weight"].get<std::string>()));
        EXPECT_EQ(wte.at("transformer.wte.weight").shape, (std::vector<int64_t>{V, C}));
        const std::string attn = "transformer.h.1.attn.c_attn.weight";
        SafetensorsFile qf(dir.file(index["weight_map"][attn].get<std::string>()));
        EXPECT_EQ(qf.at(attn).shape, (std::vector<int64_t>{C, 3 * C}));
        const std::vector<float> hf = qf.read_floats(attn);                          // (in C, out 3C)
        const float* qkvw1 = w.data() + offset_of(cfg, kQkvw) + (size_t)3 * C * C;   // (out 3C, in C)
        for (int o : {0, 5, 3 * C - 1})
            for (int i : {0, 7, C - 1})
                EXPECT_EQ(hf[(size_t)i * 3 * C + o], bf16_round(qkvw1[(size_t)o * C + i]));
        SafetensorsFile pf(dir.file(index["weight_map"]["transformer.h.0.mlp.c_proj.weight"].get<std::string>()));
        EXPECT_EQ(pf.at("transformer.h.0.mlp.c_proj.weight").shape, (std::vector<int64_t>{4 * C, C}));

        // Back to the engine layout: bf16-rounded, padding rows zero.
        const std::vector<float> back = read_weights(dir.path, cfg);
        ASSERT_EQ(back.size(), w.size());
        const size_t pad_begin = offset_of(cfg, kWte) + (size_t)V * C, pad_end = offset_of(cfg, kWpe);
        for (size_t k = 0; k < w.size(); k++) {
            const float want = (k >= pad_begin && k < pad_end) ? 0.0f : bf16_round(w[k]);
            ASSERT_EQ(back[k], want) << "element " << k;
        }

        const auto config = nlohmann::json::parse(read_text(dir.file("config.json")));
        EXPECT_EQ(config["model_type"], "gpt2");
        EXPECT_EQ(config["architectures"], nlohmann::json({"GPT2LMHeadModel"}));
        EXPECT_EQ(config["vocab_size"], V);
        EXPECT_EQ(config["n_positions"], cfg.max_seq_len);
        EXPECT_EQ(config["n_layer"], L);
        EXPECT_EQ(config["n_head"], cfg.n_head);
        EXPECT_EQ(config["n_embd"], C);
        EXPECT_EQ(config["eos_token_id"], V - 1);
        EXPECT_EQ(config["activation_function"], "gelu_new");
        EXPECT_TRUE(config["tie_word_embeddings"].get<bool>());
    }
}

TEST(Checkpoint, ShardsAreWholeTensorsBalancedByBytes) {
    const GPTConfig cfg = gpt_config_from_spec("d12", 50257, 1024);
    for (int world : {1, 2, 8, 200}) {
        const int n = hf_num_shards(cfg, world);
        EXPECT_EQ(n, std::min(world, 4 + 12 * 12));
        std::vector<size_t> bytes(n, 0);
        size_t largest = 0;
        for (const auto& t : hf_tensors(cfg, world)) {
            size_t b = 2;
            for (int64_t d : t.shape)
                b *= (size_t)d;
            bytes[t.shard] += b;
            largest = std::max(largest, b);
        }
        const size_t lo = *std::min_element(bytes.begin(), bytes.end());
        const size_t hi = *std::max_element(bytes.begin(), bytes.end());
        EXPECT_GT(lo, 0u) << "world " << world << ": an empty shard";
        EXPECT_LE(hi, lo + largest) << "world " << world;   // the greedy (LPT) bound
    }
}

// ---- checkpoint: resharding the training state ------------------------------------------------

TEST(Checkpoint, StateSavedByAnyWorldSizeReadsBackAsAnyRange) {
    const GPTConfig cfg = small_config();
    const size_t n = num_params(cfg);
    const std::vector<float> weights = random_vector(n, 1, 0.02);
    const State state = random_state(cfg, 9);
    ScratchDir out;
    const size_t qkvw = offset_of(cfg, kQkvw);
    // ranges: all; within a tensor; across tensor boundaries; each part of a 3-way and a 5-way split
    std::vector<std::pair<size_t, size_t>> ranges = {
        {0, n}, {qkvw + 3, qkvw + 100}, {qkvw - 7, qkvw + 7}, {n - 1, n}, {5, 5}};
    for (int m : {3, 5})
        for (int r = 0; r < m; r++)
            ranges.push_back({n * r / m, n * (r + 1) / m});
    int64_t step = 1;
    for (int world : {1, 2, 4}) {
        const std::string dir = save(out.path, step++, cfg, weights, state, world);
        EXPECT_EQ(read_manifest(dir).world_size, world);
        for (const auto& [b, e] : ranges) {
            const std::vector<float>* want[3] = {&state.master, &state.m, &state.v};
            const StateTensor kinds[3] = {StateTensor::Master, StateTensor::M, StateTensor::V};
            for (int k = 0; k < 3; k++) {
                const std::vector<float> got = read_state_range(dir, cfg, kinds[k], b, e);
                ASSERT_EQ(got.size(), e - b);
                for (size_t i = 0; i < got.size(); i++) {
                    ASSERT_EQ(got[i], (*want[k])[b + i])
                        << "world " << world << " " << state_tensor_name(kinds[k]) << " element " << b + i;
                }
            }
        }
    }

    // Slices are keyed by tensor name and offset, cut at tensor boundaries.
    SafetensorsFile f(checkpoint_dir(out.path, 2) + "/state-00001.safetensors");   // rank 1 of 2: [n/2, n)
    const size_t half = n / 2;
    int t = 0;
    while (offset_of(cfg, t + 1) <= half)
        t++;
    EXPECT_NE(f.find(format("master/%s@%zu", param_tensor_name(t), half - offset_of(cfg, t))), nullptr);
    EXPECT_NE(f.find("v/lnfb@0"), nullptr);
    EXPECT_EQ(f.find("m/wte@0"), nullptr);

    // A range nobody saved is an error, not zeros.
    const std::string tmp = begin_checkpoint(out.path, 99);
    write_weight_shards(tmp, cfg, weights.data(), 0, 1);
    write_state_shard(tmp, cfg, 0, 0, 1000, state.master.data(), state.m.data(), state.v.data());
    write_state_shard(tmp, cfg, 1, 2000, n - 2000, state.master.data() + 2000, state.m.data() + 2000,
                      state.v.data() + 2000);
    CheckpointManifest man;
    man.step = 99;
    man.model = cfg;
    const uint64_t written = finalize_checkpoint(tmp, checkpoint_dir(out.path, 99), man);
    uint64_t bytes = 0;   // the identity the run's log records: the manifest's hash, from the text written
    EXPECT_EQ(written, hash_file(checkpoint_dir(out.path, 99) + "/manifest.json", &bytes));
    EXPECT_EQ(read_state_range(checkpoint_dir(out.path, 99), cfg, StateTensor::M, 2000, n)[0], state.m[2000]);
    EXPECT_CONTAINS(error_of([&] { read_state_range(checkpoint_dir(out.path, 99), cfg, StateTensor::M, 500, 2500); }),
                    "no m state for parameters [1000, 2500)");
    EXPECT_CONTAINS(error_of([&] { read_state_range(checkpoint_dir(out.path, 99), cfg, StateTensor::M, 0, n + 1); }),
                    "outside the model's");
    // a slice offset with more digits than 64 bits hold is refused as a bad name
    const std::string odd = save(out.path, 101, cfg, weights, state, 1);
    const float one = 1.0f;
    write_safetensors(odd + "/state-00000.safetensors", {{"m/wte@99999999999999999999", StDType::F32, {1}, &one}});
    EXPECT_CONTAINS(error_of([&] { read_state_range(odd, cfg, StateTensor::M, 0, n); }),
                    "tensor 'm/wte@99999999999999999999' is not a state slice");
    // an empty ZeRO slice (a rank past the end) may start anywhere
    EXPECT_NO_THROW(write_state_shard(begin_checkpoint(out.path, 100), cfg, 7, n + 5, 0, nullptr, nullptr, nullptr));
    EXPECT_CONTAINS(error_of([&] { write_state_shard(tmp, cfg, 0, n - 1, 2, nullptr, nullptr, nullptr); }),
                    "outside the model's");
}

// ---- checkpoint: manifest, latest, prune ------------------------------------------------------

TEST(Checkpoint, ManifestRoundTripsEveryField) {
    const GPTConfig cfg = small_config();
    ScratchDir out;
    CheckpointManifest m;
    m.train_config_json = R"({"lr":0.002,"model":"d2"})";
    m.data_position = 123456789012;
    Rng sampler(5489);
    sampler.next_u64();
    m.rng_state = sampler.state();   // a real state: the reader refuses text that is none
    m.loss_scaler_json = R"({"scale":65536.0,"clean_streak":17,"floor_streak":0,"skipped":2})";
    m.fp8_json = R"([{"x":{"scale":2.0,"history":[1.5,2.5],"steps":3},"w":{"scale":4.0,"history":[],"steps":0},)"
                 R"("dy":{"scale":8.0,"history":[0.5],"steps":1}}])";
    m.extra_json = "";
    const std::string dir = save(out.path, 1000, cfg, random_vector(num_params(cfg), 2), random_state(cfg, 3), 2, m);
    EXPECT_EQ(dir, out.path + "/step_00001000");
    EXPECT_FALSE(file_exists(checkpoint_tmp_dir(out.path, 1000)));

    const CheckpointManifest r = open_checkpoint(dir, cfg);
    EXPECT_EQ(r.step, 1000);
    EXPECT_EQ(r.world_size, 2);
    EXPECT_EQ(r.model.n_layer, cfg.n_layer);
    EXPECT_EQ(r.model.padded_vocab_size, cfg.padded_vocab_size);
    EXPECT_EQ(nlohmann::json::parse(r.train_config_json), nlohmann::json::parse(m.train_config_json));
    EXPECT_EQ(r.data_position, m.data_position);
    EXPECT_EQ(r.rng_state, m.rng_state);
    EXPECT_EQ(nlohmann::json::parse(r.loss_scaler_json), nlohmann::json::parse(m.loss_scaler_json));
    EXPECT_EQ(nlohmann::json::parse(r.fp8_json), nlohmann::json::parse(m.fp8_json));
    EXPECT_EQ(r.extra_json, "");
    // every file but the manifest is recorded
    std::vector<std::string> names;
    for (const auto& [name, rec] : r.files)
        names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                               "state-00000.safetensors", "state-00001.safetensors"}));
    EXPECT_EQ(r.files.at("config.json").bytes, read_text(dir + "/config.json").size());

    CheckpointManifest bad;
    bad.fp8_json = "{oops";
    const std::string tmp = begin_checkpoint(out.path, 2000);
    EXPECT_CONTAINS(error_of([&] { finalize_checkpoint(tmp, checkpoint_dir(out.path, 2000), bad); }),
                    "fp8_json is not valid JSON");

    // every rank's shards must be there: here rank 1 of 2 wrote none
    const std::string partial = begin_checkpoint(out.path, 3000);
    const std::vector<float> w = random_vector(num_params(cfg), 4);
    const State s = random_state(cfg, 5);
    write_weight_shards(partial, cfg, w.data(), 0, 2);
    write_state_shard(partial, cfg, 0, 0, num_params(cfg) / 2, s.master.data(), s.m.data(), s.v.data());
    CheckpointManifest two;
    two.model = cfg;
    two.world_size = 2;
    two.step = 3000;
    EXPECT_CONTAINS(error_of([&] { finalize_checkpoint(partial, checkpoint_dir(out.path, 3000), two); }),
                    "lacks state-00001.safetensors, written by rank 1 of 2 (and 1 other file)");
    EXPECT_FALSE(file_exists(checkpoint_dir(out.path, 3000)));
    write_weight_shards(partial, cfg, w.data(), 1, 2);   // then rank 1's files: it saves
    write_state_shard(partial, cfg, 1, num_params(cfg) / 2, num_params(cfg) - num_params(cfg) / 2,
                      s.master.data() + num_params(cfg) / 2, s.m.data() + num_params(cfg) / 2,
                      s.v.data() + num_params(cfg) / 2);
    finalize_checkpoint(partial, checkpoint_dir(out.path, 3000), two);
    EXPECT_EQ(list_checkpoints(out.path), (std::vector<int64_t>{1000, 3000}));
}

// latest_checkpoint sees every step directory, damaged ones included (so that resuming names what
// is wrong with it); listing and pruning count only complete ones, and never delete another.
TEST(Checkpoint, LatestSeesEveryStepDirectoryPruneOnlyCompleteOnes) {
    const GPTConfig cfg = small_config();
    const std::vector<float> w = random_vector(num_params(cfg), 4, 0.02);
    const State s = random_state(cfg, 5);
    ScratchDir out;
    EXPECT_EQ(latest_checkpoint(out.path), std::nullopt);
    EXPECT_EQ(latest_checkpoint(out.file("does-not-exist")), std::nullopt);

    for (int64_t step : {100, 200, 300})
        save(out.path, step, cfg, w, s, 1);
    // a crashed save of a later step (tmp), a stale tmp of an earlier one, a step dir without a
    // manifest, and an unrelated directory
    const std::string crashed = begin_checkpoint(out.path, 400);
    write_weight_shards(crashed, cfg, w.data(), 0, 1);
    make_dirs(checkpoint_tmp_dir(out.path, 50));
    make_dirs(out.file("step_00000500"));
    make_dirs(out.file("notes"));
    write_text(out.file("notes/keep.txt"), "mine");

    EXPECT_EQ(list_checkpoints(out.path), (std::vector<int64_t>{100, 200, 300}));
    EXPECT_EQ(latest_checkpoint(out.path), out.file("step_00000500")) << "the newest step directory, damaged or not";
    EXPECT_EQ(checkpoint_step_dirs(out.path).size(), 4u);

    prune_checkpoints(out.path, 2);
    EXPECT_EQ(list_checkpoints(out.path), (std::vector<int64_t>{200, 300}));
    EXPECT_FALSE(file_exists(checkpoint_dir(out.path, 100)));
    EXPECT_FALSE(file_exists(checkpoint_tmp_dir(out.path, 50))) << "stale tmp of an older step";
    EXPECT_TRUE(file_exists(crashed + "/config.json")) << "tmp of a newer step: not ours to judge";
    EXPECT_TRUE(file_exists(out.file("step_00000500")));
    EXPECT_TRUE(file_exists(out.file("notes/keep.txt")));
    EXPECT_CONTAINS(error_of([&] { prune_checkpoints(out.path, 0); }), "keep_last must be at least 1");

    // Nothing is overwritten; a new save of a crashed step starts from an empty tmp directory.
    EXPECT_CONTAINS(error_of([&] { begin_checkpoint(out.path, 300); }), "step_00000300 already exists");
    const std::string again = begin_checkpoint(out.path, 400);
    EXPECT_TRUE(fs::is_empty(again));
    save(out.path, 600, cfg, w, s, 1);
    EXPECT_EQ(latest_checkpoint(out.path), checkpoint_dir(out.path, 600));
    EXPECT_TRUE(file_exists(out.file("step_00000500"))) << "never pruned: not a complete checkpoint";
    // the newest checkpoint that `healthy` accepts stays, beyond keep_last
    prune_checkpoints(out.path, 1, [](const CheckpointManifest& m) { return m.step <= 200; });
    EXPECT_EQ(list_checkpoints(out.path), (std::vector<int64_t>{200, 600}));
    prune_checkpoints(out.path, 1, [](const CheckpointManifest& m) { return m.step == 600; });
    EXPECT_EQ(list_checkpoints(out.path), (std::vector<int64_t>{600}));
    const std::string tmp = begin_checkpoint(out.path, 700);
    EXPECT_CONTAINS(error_of([&] { finalize_checkpoint(tmp, checkpoint_dir(out.path, 600), {}); }), "already exists");
}

// ---- checkpoint: bad inputs -------------------------------------------------------------------

TEST(Checkpoint, BadCheckpointsFailNamingTheFileAndDeleteNothing) {
    const GPTConfig cfg = small_config();
    ScratchDir out;
    const std::string dir = save(out.path, 10, cfg, random_vector(num_params(cfg), 6, 0.02), random_state(cfg, 7), 2);
    EXPECT_NO_THROW(open_checkpoint(dir, cfg));
    const std::string shard = dir + "/model-00002-of-00002.safetensors";
    const std::string state = dir + "/state-00001.safetensors";
    const std::string original_shard = read_text(shard), original_state = read_text(state);

    auto expect_error = [&](const std::function<void()>& f, std::vector<std::string> parts) {
        const auto before = directory_snapshot(out.path);
        const std::string e = error_of(f);
        for (const auto& part : parts)
            EXPECT_CONTAINS(e, part);
        EXPECT_EQ(directory_snapshot(out.path), before) << "a failed load must delete or change nothing";
    };
    // truncated shard
    write_text(shard, original_shard.substr(0, original_shard.size() - 10));
    expect_error([&] { open_checkpoint(dir, cfg); }, {shard, "checksum mismatch", "truncated"});
    expect_error([&] { read_weights(dir, cfg); }, {shard});   // the reader alone also notices
    // one altered byte, same size
    std::string altered = original_shard;
    altered[altered.size() / 2] ^= 0x01;
    write_text(shard, altered);
    expect_error([&] { open_checkpoint(dir, cfg); }, {shard, "checksum mismatch", "altered"});
    write_text(shard, original_shard);
    altered = original_state;
    altered[altered.size() - 3] ^= 0x40;
    write_text(state, altered);
    expect_error([&] { open_checkpoint(dir, cfg); }, {state, "checksum mismatch"});
    write_text(state, original_state);
    EXPECT_NO_THROW(open_checkpoint(dir, cfg));

    // another model
    GPTConfig other = cfg;
    other.n_layer = 3;
    expect_error([&] { open_checkpoint(dir, other); }, {dir, "another model", "n_layer is 2 there, 3 in this run"});
    other = cfg;
    other.vocab_size = 50;
    expect_error([&] { open_checkpoint(dir, other); }, {"vocab_size is 77 there, 50 in this run"});
    other = small_config();
    other.n_embd = 64;
    expect_error([&] { read_weights(dir, other); },
                 {"transformer.wte.weight has shape [77, 32], but", "n_embd 64", "that needs [77, 64]"});

    // a missing file
    fs::rename(state, out.file("moved"));
    expect_error([&] { open_checkpoint(dir, cfg); }, {state, "missing"});
    fs::rename(out.file("moved"), state);

    // not a checkpoint: a tmp directory, an empty directory, a file, nothing, a broken manifest
    const std::string tmp = begin_checkpoint(out.path, 20);
    expect_error([&] { open_checkpoint(tmp, cfg); }, {tmp, "is not a checkpoint", "no manifest.json"});
    expect_error([&] { read_manifest(out.path); }, {out.path, "is not a checkpoint"});
    expect_error([&] { read_manifest(shard); }, {shard, "not a directory"});
    expect_error([&] { read_manifest(out.file("step_00000099")); }, {"step_00000099 does not exist"});
    const std::string manifest = read_text(dir + "/manifest.json");
    write_text(dir + "/manifest.json", manifest.substr(0, manifest.size() / 2));
    expect_error([&] { open_checkpoint(dir, cfg); }, {dir + "/manifest.json", "not valid JSON"});
    EXPECT_EQ(latest_checkpoint(out.path), dir) << "a broken manifest is still the newest step directory";
    EXPECT_TRUE(list_checkpoints(out.path).empty()) << "but not a complete checkpoint";
    write_text(dir + "/manifest.json", R"({"format": "something else"})");
    expect_error([&] { read_manifest(dir); }, {"not a train_gpt checkpoint manifest"});
    auto j = nlohmann::json::parse(manifest);
    j.erase("step");
    write_text(dir + "/manifest.json", j.dump());
    expect_error([&] { read_manifest(dir); }, {dir + "/manifest.json", "\"step\" is missing"});
    write_text(dir + "/manifest.json", manifest);
    EXPECT_NO_THROW(open_checkpoint(dir, cfg));
}

// ---- transformers loads the checkpoint and agrees with the engine -----------------------------
//
// The engine runs on the BF16-rounded weights that the checkpoint holds, so both sides compute
// with identical parameters in FP32 and differ only in summation order (GEMM blocking, layernorm
// and softmax sums) and in their libm functions: tests/tolerances.h's fp32_loss_bound.
TEST(Checkpoint, TransformersLoadsItAndComputesTheEngineLoss) {
    const GPTConfig cfg = small_config();
    const int B = 2, T = 16, n_batches = 2;
    std::unique_ptr<Backend> backend = make_cpu_backend();
    GPT model(cfg, *backend, B, T);
    model.init_weights(21);
    // perturb everything (biases and layernorm too) so that every tensor and transpose matters
    std::vector<float> w = model.weights();
    const std::vector<float> noise = random_vector(w.size(), 22, 0.05);
    const size_t pad_begin = offset_of(cfg, kWte) + (size_t)cfg.vocab_size * cfg.n_embd, pad_end = offset_of(cfg, kWpe);
    for (size_t k = 0; k < w.size(); k++)
        if (k < pad_begin || k >= pad_end) w[k] += noise[k];

    ScratchDir out;
    const std::string dir = save(out.path, 5, cfg, w, random_state(cfg, 23), 2);
    const std::vector<float> loaded = read_weights(dir, cfg);   // = bf16(w), padding zero
    model.set_weights(loaded);

    Rng rng(24);
    std::vector<int32_t> tokens((size_t)n_batches * B * (T + 1));
    for (int32_t& t : tokens)
        t = (int32_t)rng.below(cfg.vocab_size);
    double engine_loss = 0;
    for (int nb = 0; nb < n_batches; nb++) {
        std::vector<int32_t> inputs, targets;
        for (int b = 0; b < B; b++) {
            const int32_t* window = tokens.data() + ((size_t)nb * B + b) * (T + 1);
            inputs.insert(inputs.end(), window, window + T);
            targets.insert(targets.end(), window + 1, window + T + 1);
        }
        engine_loss += model.forward(inputs.data(), targets.data(), B, T) / n_batches;
    }
    FILE* f = open_file(out.file("tokens.bin"), "wb");
    write_exact(tokens.data(), sizeof(int32_t), tokens.size(), f, out.file("tokens.bin"));
    std::fclose(f);

    std::string output;
    const int rc = run_command(python_binary() + " " + repo_root() + "/dev/reference/hf_eval.py " + dir + " " +
                                   out.file("tokens.bin") + " " + std::to_string(B) + " " + std::to_string(T),
                               &output);
    ASSERT_EQ(rc, 0) << "transformers is required (scripts/setup.sh --test): " << output;
    const size_t line = output.rfind("{\"loss\"");
    ASSERT_NE(line, std::string::npos) << output;
    const auto result = nlohmann::json::parse(output.substr(line));
    const double hf_loss = result["loss"].get<double>();
    const double rel = std::fabs(hf_loss - engine_loss) / std::fabs(engine_loss);
    std::printf("engine loss %.8f, transformers loss %.8f, relative difference %.2e\n", engine_loss, hf_loss, rel);
    // FP32 on both sides on the same weights: tests/tolerances.h's fp32_loss_bound
    EXPECT_LT(rel, fp32_loss_bound(cfg, T, result["max_abs_logit"].get<double>(), hf_loss));
    EXPECT_GT(engine_loss, 1.0) << "a real, untrained-model loss";
    // HF counts the tied lm_head once: V·C + maxT·C + blocks + ln_f, no padding rows
    const size_t hf_params = num_params(cfg) - (size_t)(cfg.padded_vocab_size - cfg.vocab_size) * cfg.n_embd;
    EXPECT_EQ(result["n_params"].get<size_t>(), hf_params);
}
