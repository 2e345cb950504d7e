// fp8_autotune.cpp — see fp8_autotune.h.
#include "precision/fp8_autotune.h"
#include "precision/fp8_state.h"

#include "checkpoint/checkpoint.h"
#include "rng.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>

namespace train_gpt {

namespace {

// Device buffers of one timing, released together.
class Buffers {
  public:
    explicit Buffers(Backend& k) : k_(k) {}
    ~Buffers() {
        for (void* p : owned_)
            k_.release(p);
    }
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;
    template <typename P = void>
    P* zeros(size_t bytes) {
        void* p = k_.alloc(bytes);   // zero-initialised
        owned_.push_back(p);
        return static_cast<P*>(p);
    }
    // n activation-dtype values, normal(0, stddev)
    void* random_act(size_t n, double stddev, Rng& rng) {
        std::vector<float> host(n);
        for (float& x : host)
            x = (float)(stddev * rng.normal());
        float* staging = static_cast<float*>(k_.alloc(n * sizeof(float)));
        k_.copy_to_device(staging, host.data(), n * sizeof(float));
        void* out = zeros(n * dtype_size(k_.act_dtype()));
        k_.float_to_act(out, staging, n);
        k_.synchronize();
        k_.release(staging);
        return out;
    }

  private:
    Backend& k_;
    std::vector<void*> owned_;
};

// Median milliseconds of `reps` runs of f (after two warm-up runs: the GEMM heuristics, scratch).
template <typename F>
double median_ms(Backend& k, int reps, F&& f) {
    f();
    f();
    k.synchronize();
    std::vector<double> ms;
    for (int i = 0; i < reps; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        k.synchronize();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}   // namespace

std::vector<Fp8GemmTiming> time_fp8_gemms(Backend& k, const GPTConfig& cfg, int B, int T, int reps) {
    if (reps < 1) fail("time_fp8_gemms: reps must be positive (got %d)", reps);
    const int C = cfg.n_embd, N = B * T;
    const size_t A = dtype_size(k.act_dtype());
    Rng rng(20261130);
    std::vector<Fp8GemmTiming> out;
    for (const BlockGemmInfo& gemm : kBlockGemms) {
        struct Shape {
            const char* name;
            int c_in, c_out;
        };
        const Shape s{gemm.name, gemm.in * C, gemm.out * C};
        Buffers buf(k);
        const size_t nx = (size_t)N * s.c_in, ny = (size_t)N * s.c_out, nw = (size_t)s.c_out * s.c_in;
        void* x = buf.random_act(nx, 1.0, rng);     // (N, c_in)
        void* w = buf.random_act(nw, 0.02, rng);    // (c_out, c_in)
        void* dy = buf.random_act(ny, 1e-3, rng);   // (N, c_out)
        void* bias = buf.zeros(s.c_out * A);
        void* y = buf.zeros(ny * A);
        void* dx = buf.zeros(nx * A);
        float* dw = buf.zeros<float>(nw * sizeof(float));
        float* db = buf.zeros<float>(s.c_out * sizeof(float));
        fp8e4m3* xq = buf.zeros<fp8e4m3>(nx);
        fp8e4m3* xt = buf.zeros<fp8e4m3>(nx);
        fp8e4m3* wq = buf.zeros<fp8e4m3>(nw);
        fp8e4m3* wt = buf.zeros<fp8e4m3>(nw);
        fp8e5m2* dyq = buf.zeros<fp8e5m2>(ny);
        fp8e5m2* dyt = buf.zeros<fp8e5m2>(ny);
        // scales for the random inputs' ranges (values only: the timings do not depend on them)
        Fp8ScaleSlot* slots = buf.zeros<Fp8ScaleSlot>(3 * sizeof(Fp8ScaleSlot));
        const Fp8ScaleSlot host[3] = {
            {1 / 64.0f, 64.0f, 0, {}}, {1 / 4096.0f, 4096.0f, 0, {}}, {1 / 4096.0f, 4096.0f, 0, {}}};   // X, W, dY
        k.copy_to_device(slots, host, sizeof(host));
        Fp8Counters* counters = buf.zeros<Fp8Counters>(sizeof(Fp8Counters));
        fp8_ops_of(k).quantize_transpose_e4m3(wq, wt, w, s.c_out, s.c_in, &slots[1], counters);

        Fp8GemmTiming t;
        t.name = s.name;
        t.n = N;
        t.c_in = s.c_in;
        t.c_out = s.c_out;
        t.ms_16bit = median_ms(k, reps, [&] {
            k.matmul_forward(y, x, w, bias, N, s.c_in, s.c_out);
            k.matmul_backward(dx, dw, db, dy, x, w, N, s.c_in, s.c_out);
        });
        t.ms_fp8 = median_ms(k, reps, [&] {
            fp8_ops_of(k).quantize_transpose_e4m3(xq, xt, x, N, s.c_in, &slots[0], counters);
            fp8_ops_of(k).matmul_forward_fp8(y, xq, &slots[0], wq, &slots[1], bias, N, s.c_in, s.c_out);
            fp8_ops_of(k).quantize_transpose_e5m2(dyq, dyt, dy, N, s.c_out, &slots[2], counters);
            fp8_ops_of(k).matmul_backward_fp8(dx, dw, db, dyq, dyt, &slots[2], dy, xt, &slots[0], wt, &slots[1], N,
                                              s.c_in, s.c_out);
        });
        t.fp8 = t.ms_fp8 < t.ms_16bit;
        out.push_back(t);
    }
    return out;
}

unsigned fp8_gemms_from_timings(const std::vector<Fp8GemmTiming>& timings) {
    unsigned mask = 0;
    for (size_t g = 0; g < timings.size() && g < (size_t)kNumBlockGemms; g++) {
        if (timings[g].fp8) mask |= 1u << g;
    }
    return mask;
}

Fp8AutoChoice choose_fp8_gemms_auto(Backend& backend, const GPTConfig& cfg, int B, int T,
                                    const std::optional<std::string>& resume_checkpoint, Comm& comm) {
    Fp8AutoChoice choice;
    if (resume_checkpoint) {
        // the list the checkpoint's run resolved; a run in another precision recorded none ("-")
        const CheckpointManifest manifest = read_manifest(*resume_checkpoint);
        const auto config = nlohmann::json::parse(manifest.train_config_json, nullptr, false);
        const std::string list =
            !config.is_discarded() && config.contains("fp8_gemms") && config["fp8_gemms"].is_string()
                ? config["fp8_gemms"].get<std::string>()
                : "";
        if (list != "" && list != "-" && list != "auto") {
            choice.gemms = parse_fp8_gemms(list);
            choice.how = "fp8 GEMMs: auto → " + list + " (as the checkpoint trained)";
            return choice;
        }
    }
    if (fp8_ops_of(backend).emulates_fp8()) {
        std::string name = backend.name();
        for (char& c : name)
            c = (char)std::toupper((unsigned char)c);
        choice.how = format("fp8 GEMMs: auto → all (the %s kernel set emulates FP8: nothing to time)", name.c_str());
        return choice;
    }
    const int multiple = fp8_ops_of(backend).fp8_gemm_multiple();
    if (cfg.n_embd % multiple != 0 || (B * T) % multiple != 0) {   // shapes its FP8 GEMMs cannot take
        choice.gemms = 0;
        choice.how = format("fp8 GEMMs: auto → none (n_embd %d and B·T %d must be multiples of %d for FP8 GEMMs)",
                            cfg.n_embd, B * T, multiple);
        return choice;
    }
    const std::vector<Fp8GemmTiming> timings = time_fp8_gemms(backend, cfg, B, T);
    choice.gemms = fp8_gemms_from_timings(timings);
    comm.broadcast(&choice.gemms, sizeof(choice.gemms), 0);   // every rank runs rank 0's choice
    choice.how =
        "fp8 GEMMs: auto → " + fp8_gemms_name(choice.gemms) + " (forward + backward, 16-bit vs FP8 with its casts:";
    for (const Fp8GemmTiming& t : timings) {
        choice.how += format(" %s %.3f vs %.3f ms%s", t.name.c_str(), t.ms_16bit, t.ms_fp8, t.fp8 ? " FP8," : ",");
    }
    choice.how.back() = ')';
    return choice;
}

}   // namespace train_gpt
