// train/op_trace.cpp — the --trace-ops decorator (op_trace.h).
#include "train/op_trace.h"

#include "backend_decorator.h"
#include "utils.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <utility>

namespace train_gpt {

namespace {

struct Dim {
    const char* name;
    long long value;
};

class TracedBackend final : public BackendDecorator {
  public:
    TracedBackend(std::unique_ptr<Backend> inner, std::shared_ptr<OpTraceFile> file)
        : BackendDecorator(std::move(inner)), file_(std::move(file)) {}

    // --- memory ---
    void* alloc(size_t bytes) override {
        line("alloc", {{"bytes", (long long)bytes}});
        return k_->alloc(bytes);
    }
    void release(void* ptr) override {
        line("release", {});
        k_->release(ptr);
    }
    void copy_to_device(void* dst, const void* src, size_t bytes) override {
        line("copy_to_device", {{"bytes", (long long)bytes}});
        k_->copy_to_device(dst, src, bytes);
    }
    void copy_to_host(void* dst, const void* src, size_t bytes) override {
        line("copy_to_host", {{"bytes", (long long)bytes}});
        k_->copy_to_host(dst, src, bytes);
    }
    void zero(void* dst, size_t bytes) override {
        line("zero", {{"bytes", (long long)bytes}});
        k_->zero(dst, bytes);
    }
    void synchronize() override {
        line("synchronize", {});
        k_->synchronize();
    }
    void float_to_act(void* dst, const float* src, size_t n) override {
        line("float_to_act", {{"n", (long long)n}});
        k_->float_to_act(dst, src, n);
    }
    void act_to_float(float* dst, const void* src, size_t n) override {
        line("act_to_float", {{"n", (long long)n}});
        k_->act_to_float(dst, src, n);
    }

    // --- forward / backward ops ---
    void encoder_forward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int T,
                         int C) override {
        line("encoder_forward", {{"B", B}, {"T", T}, {"C", C}});
        k_->encoder_forward(out, tokens, wte, wpe, B, T, C);
    }
    void encoder_backward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int T,
                          int C) override {
        line("encoder_backward", {{"B", B}, {"T", T}, {"C", C}});
        k_->encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
    }
    void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                           int N, int C) override {
        line("layernorm_forward", {{"N", N}, {"C", C}});
        k_->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    }
    void layernorm_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                            const void* weight, const float* mean, const float* rstd, int N, int C,
                            float* dinp_sums) override {
        line("layernorm_backward", {{"N", N}, {"C", C}}, dinp_sums != nullptr ? "dinp_sums" : "");
        k_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dinp_sums);
    }
    void residual_layernorm_forward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                    const void* weight, const void* bias, int N, int C) override {
        line("residual_layernorm_forward", {{"N", N}, {"C", C}});
        k_->residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
    }
    void matmul_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                        int OC) override {
        line("matmul_forward", {{"N", N}, {"C", C}, {"OC", OC}}, bias != nullptr ? "bias" : "");
        k_->matmul_forward(out, inp, weight, bias, N, C, OC);
    }
    void matmul_backward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, int N, int C, int OC) override {
        line("matmul_backward", {{"N", N}, {"C", C}, {"OC", OC}}, dbias != nullptr ? "dbias" : "");
        k_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    }
    void matmul_forward_gelu(void* out, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                             int OC) override {
        line("matmul_forward_gelu", {{"N", N}, {"C", C}, {"OC", OC}}, bias != nullptr ? "bias" : "");
        k_->matmul_forward_gelu(out, pre, inp, weight, bias, N, C, OC);
    }
    void matmul_backward_dgelu(void* dinp, const void* dout, const void* weight, const void* pre, int N, int C,
                               int OC) override {
        line("matmul_backward_dgelu", {{"N", N}, {"C", C}, {"OC", OC}});
        k_->matmul_backward_dgelu(dinp, dout, weight, pre, N, C, OC);
    }
    void attention_forward(void* out, float* lse, const void* qkv, int B, int T, int C, int NH) override {
        line("attention_forward", {{"B", B}, {"T", T}, {"C", C}, {"NH", NH}});
        k_->attention_forward(out, lse, qkv, B, T, C, NH);
    }
    void attention_decode(void* out, const void* qkv, int pos, int n, int C, int NH) override {
        line("attention_decode", {{"pos", pos}, {"n", n}, {"C", C}, {"NH", NH}});
        k_->attention_decode(out, qkv, pos, n, C, NH);
    }
    void attention_backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse, int B,
                            int T, int C, int NH) override {
        line("attention_backward", {{"B", B}, {"T", T}, {"C", C}, {"NH", NH}});
        k_->attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
    }
    void gelu_forward(void* out, const void* inp, size_t n) override {
        line("gelu_forward", {{"n", (long long)n}});
        k_->gelu_forward(out, inp, n);
    }
    void gelu_backward(void* dinp, const void* inp, const void* dout, size_t n) override {
        line("gelu_backward", {{"n", (long long)n}});
        k_->gelu_backward(dinp, inp, dout, n);
    }
    void gelu_backward_bias(void* dinp, float* dbias, const void* inp, const void* dout, int rows, int cols) override {
        line("gelu_backward_bias", {{"rows", rows}, {"cols", cols}});
        k_->gelu_backward_bias(dinp, dbias, inp, dout, rows, cols);
    }
    void residual_forward(void* out, const void* a, const void* b, size_t n) override {
        line("residual_forward", {{"n", (long long)n}});
        k_->residual_forward(out, a, b, n);
    }
    void fused_classifier(void* dlogits, float* losses, const void* logits, const int32_t* targets, int N, int V,
                          int Vp, float dloss) override {
        line("fused_classifier", {{"N", N}, {"V", V}, {"Vp", Vp}}, dlogits != nullptr ? "dlogits" : "");
        k_->fused_classifier(dlogits, losses, logits, targets, N, V, Vp, dloss);
    }

    // --- optimizer ---
    double sum_squares(const float* g, size_t n) override {
        line("sum_squares", {{"n", (long long)n}});
        return k_->sum_squares(g, n);
    }
    void adamw_update(float* master, void* working, float* m, float* v, const float* grads, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) override {
        line("adamw_update", {{"n", (long long)n}, {"t", t}});
        k_->adamw_update(master, working, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    }

  private:
    // "op name=value ... [flag]"
    void line(const char* op, std::initializer_list<Dim> dims, const char* flag = "") {
        std::string text = op;
        for (const Dim& d : dims)
            text += " " + std::string(d.name) + "=" + std::to_string(d.value);
        if (*flag != '\0') text += " " + std::string(flag);
        file_->line(text + "\n");
    }

    std::shared_ptr<OpTraceFile> file_;
};

}   // namespace

std::unique_ptr<Backend> traced_kernel_set(std::unique_ptr<Backend> inner, std::shared_ptr<OpTraceFile> file) {
    return std::make_unique<TracedBackend>(std::move(inner), std::move(file));
}

OpTraceFile::~OpTraceFile() {
    if (out_ != nullptr) std::fclose(out_);
}

void OpTraceFile::line(const std::string& text) {
    if (out_ == nullptr) {
        pending_ += text;
        return;
    }
    write(text);
}

void OpTraceFile::write(const std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), out_) != text.size()) {
        fail("--trace-ops %s: write failed: %s", path_.c_str(), std::strerror(errno));
    }
}

void OpTraceFile::open(const std::string& path) {
    path_ = path;
    // O_NONBLOCK: a FIFO that no process reads is refused (ENXIO) instead of waited on; one with a
    // reader (a shell's >(...)) is written, blocking as usual once open
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) {
        const int err = errno;
        fail("--trace-ops %s: cannot open it for writing: %s", path.c_str(),
             err == ENXIO ? "it is a FIFO that no process reads" : std::strerror(err));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    out_ = ::fdopen(fd, "w");
    if (out_ == nullptr) {
        const int err = errno;
        ::close(fd);
        fail("--trace-ops %s: cannot open it for writing: %s", path.c_str(), std::strerror(err));
    }
    write(pending_);
    pending_.clear();
}

void OpTraceFile::finish() {
    if (out_ == nullptr) return;
    std::FILE* f = out_;
    out_ = nullptr;
    const bool flushed = std::fflush(f) == 0 && !std::ferror(f);
    const int flush_errno = errno;
    const bool closed = std::fclose(f) == 0;
    if (!flushed || !closed) {
        fail("--trace-ops %s: the trace could not be written whole: %s", path_.c_str(),
             std::strerror(flushed ? errno : flush_errno));
    }
}

namespace {
std::filesystem::path resolved(const std::string& p) { return resolved_path(p); }
bool is_under(const std::filesystem::path& p, const std::filesystem::path& dir) {
    auto d = dir.begin(), q = p.begin();
    for (; d != dir.end() && !d->empty(); ++d, ++q) {
        if (q == p.end() || *q != *d) return false;
    }
    return true;
}
}   // namespace

void check_trace_path(const std::string& path, const RunDirs& dirs) {
    namespace fs = std::filesystem;
    const fs::path p = resolved(path);
    if (!dirs.checkpoints.empty() && is_under(p, resolved(dirs.checkpoints))) {
        fail(
            "--trace-ops %s: the path is in the checkpoint directory %s, which the run's checkpoints own "
            "(rotation deletes its entries); give a path outside it",
            path.c_str(), dirs.checkpoints.c_str());
    }
    if (!dirs.output.empty()) {
        for (const char* own : {"log.jsonl", "config.json", "train_gpt.lock"}) {
            if (p == resolved(dirs.output + "/" + own)) {
                fail("--trace-ops %s: that is the run's own %s; give another name", path.c_str(), own);
            }
        }
    }
    // where it cannot be written: said now, before the run makes (and locks) its directories
    std::error_code ec;
    const fs::path parent = p.parent_path();
    if (fs::is_directory(p, ec)) fail("--trace-ops %s: that is a directory; give a file's path", path.c_str());
    // -o itself, which the run makes (and checks: check_run_dirs), may not exist yet
    const bool in_output_dir = !dirs.output.empty() && parent == resolved(dirs.output);
    if (in_output_dir && !fs::exists(parent, ec)) return;
    if (!fs::is_directory(parent, ec)) {
        fail("--trace-ops %s: %s %s", path.c_str(), parent.c_str(),
             fs::exists(parent, ec) ? "is not a directory" : "does not exist");
    }
    const bool exists = fs::exists(p, ec);
    if (::access(exists ? p.c_str() : parent.c_str(), W_OK) != 0) {
        fail("--trace-ops %s: cannot write %s: %s", path.c_str(), exists ? "it" : ("in " + parent.string()).c_str(),
             std::strerror(errno));
    }
    if (fs::is_regular_file(p, ec) && fs::file_size(p, ec) > 0) {
        std::FILE* f = std::fopen(p.c_str(), "rb");
        char head[64] = {};
        const size_t got = f != nullptr ? std::fread(head, 1, sizeof(head) - 1, f) : 0;
        if (f != nullptr) std::fclose(f);
        if (std::string(head, got).rfind("alloc bytes=", 0) != 0) {
            fail(
                "--trace-ops %s: the file exists and is not a trace (a trace starts with \"alloc bytes=\"); "
                "nothing was written: give a new path, or the path of an earlier trace to replace it",
                path.c_str());
        }
    }
}

}   // namespace train_gpt
