// fuzz_state.cpp — a checkpoint's optimizer-state file (state-00000.safetensors: slices keyed
// "<master|m|v>/<tensor>@<offset>") assembled by read_state_range, as a resume does, for a tiny
// model (d1, C = 8, V = 11, T = 4). The checkpoint directory, with a fixed manifest, is in the
// system's temporary directory; the input is the state file.
// Invariant of a state that reads: read_state_range gives exactly the range asked for.
#include "checkpoint/checkpoint.h"
#include "fuzz_util.h"

#include <cstdlib>
#include <filesystem>

using namespace train_gpt;
using namespace train_gpt::fuzz;

namespace {

const GPTConfig& config() {
    static const GPTConfig cfg = gpt_config_from_spec("d1", 11, 4, 8, 2);
    return cfg;
}

std::string g_scratch;   // the temporary directory, removed at exit

// The checkpoint directory, made once: a manifest for config() listing only the state file.
const std::string& checkpoint() {
    static const std::string dir = [] {
        const char* tmp = std::getenv("TMPDIR");
        std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/fuzz_state_XXXXXX";
        if (mkdtemp(templ.data()) == nullptr) invariant_broken("mkdtemp failed");
        g_scratch = templ;
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(g_scratch, ec);
        });
        const std::string step = templ + "/step_00000001";
        make_dirs(step);
        const GPTConfig& c = config();
        const std::string manifest = format(
            R"({"format": "train_gpt checkpoint", "version": 1, "step": 1, "world_size": 1,)"
            R"( "model": {"n_layer": %d, "n_head": %d, "n_embd": %d, "vocab_size": %d, "padded_vocab_size": %d,)"
            R"( "max_seq_len": %d}, "train_config": null, "data_position": 0, "rng_state": "", "loss_scaler": null,)"
            R"( "fp8": [], "extra": null, "files": {"state-00000.safetensors": {"bytes": 0, "xxh3_64": "0000000000000000"}}})",
            c.n_layer, c.n_head, c.n_embd, c.vocab_size, c.padded_vocab_size, c.max_seq_len);
        write_file_atomic(step + "/manifest.json", manifest.data(), manifest.size());
        return step;
    }();
    return dir;
}

size_t num_parameters() {
    size_t n = 0;
    for (size_t s : param_tensor_sizes(config()))
        n += s;
    return n;
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = checkpoint() + "/state-00000.safetensors";
    FILE* f = open_file(path, "wb");
    write_exact(data, 1, size, f, path);
    std::fclose(f);
    const size_t n = num_parameters();
    for (StateTensor which : {StateTensor::Master, StateTensor::M, StateTensor::V}) {
        for (const auto& [begin, end] : {std::pair<size_t, size_t>{0, n}, {n / 3, n / 2}, {n - 1, n}}) {
            try {
                if (read_state_range(checkpoint(), config(), which, begin, end).size() != end - begin) {
                    invariant_broken("read_state_range gave another length");
                }
            } catch (const Error&) {
            }
        }
    }
    return 0;
}
