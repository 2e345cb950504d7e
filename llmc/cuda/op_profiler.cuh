// cuda/op_profiler.cuh — --profile: the GPU time of every Backend op, summed by op.
//
// Each op of the CUDA kernel set runs inside a Scope that records a CUDA event on the backend's
// stream before and after it. The pairs are read (cudaEventElapsedTime) when the backend is
// destroyed, or after a synchronisation once 32768 are pending, so profiling adds no work to the
// GPU and no wait to a step: a few µs of host time per op, which runs ahead of the GPU, and the
// events (reused after each read). Back-to-back ops on one stream: the times add up to the
// stream's busy time, launch gaps included. When the backend is destroyed the table is printed, every
// line starting "profile:": per op its calls, total ms and share, and the shares per category
// (GEMM, attention, FP8 cast, layernorm, elementwise, classifier, optimizer, fill, copy).
// Scopes nest: one opened inside another (an FP8 op that runs the 16-bit op and then a cast, an
// op of CudaBackendWithOptions that falls back to its base) is part of the outer op and is not
// timed on its own, so no time is counted twice and the shares add up to the stream's busy time.
#pragma once

#include "cuda/common.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace train_gpt::cuda {

// Which scope of a nest times: the outermost. enter() and leave() say whether this scope is it.
struct ScopeNesting {
    int depth = 0;
    bool enter() { return depth++ == 0; }
    bool leave() { return --depth == 0; }
};

class OpProfiler {
  public:
    explicit OpProfiler(bool enabled) : enabled_(enabled) {}
    ~OpProfiler() {
        for (const Pending& p : pending_) {
            cudaEventDestroy(p.start);
            cudaEventDestroy(p.stop);
        }
        for (cudaEvent_t e : free_)
            cudaEventDestroy(e);
    }
    OpProfiler(const OpProfiler&) = delete;
    OpProfiler& operator=(const OpProfiler&) = delete;
    bool enabled() const { return enabled_; }
    size_t events_created() const { return events_created_; }   // (tests: no scope leaks its events)

    // The time from its construction to its destruction, as op `name` (a string literal).
    class Scope {
      public:
        Scope(OpProfiler* p, const char* name, cudaStream_t s) : p_(p), s_(s) {
            if (p_ != nullptr) p_->begin(name, s_);
        }
        ~Scope() {
            if (p_ != nullptr) p_->end(s_);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

      private:
        OpProfiler* p_;
        cudaStream_t s_;
    };

    // After the stream was synchronised: every recorded pair is complete; add them up.
    // (The backend calls it when it is destroyed; end() when kMaxPending pairs wait.)
    void drain() {
        for (const Pending& p : pending_) {
            float ms = 0.0f;
            if (cudaEventElapsedTime(&ms, p.start, p.stop) == cudaSuccess) {
                Total& t = totals_[p.name];
                t.calls++;
                t.ms += ms;
            } else {
                cudaGetLastError();   // an unfinished pair (should not happen): dropped
            }
            free_.push_back(p.start);
            free_.push_back(p.stop);
        }
        pending_.clear();
    }

    void print(FILE* out) const {
        double total = 0;
        for (const auto& [name, t] : totals_)
            total += t.ms;
        if (total <= 0) return;
        std::vector<std::pair<std::string, Total>> ops(totals_.begin(), totals_.end());
        std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
        std::fprintf(out, "profile: GPU time in Backend ops (--profile), all steps: %.1f ms\n", total);
        std::fprintf(out, "profile: %-28s %8s %11s %6s %10s\n", "op", "calls", "ms", "share", "us/call");
        for (const auto& [name, t] : ops) {
            std::fprintf(out, "profile: %-28s %8lld %11.2f %5.1f%% %10.1f\n", name.c_str(), t.calls, t.ms,
                         100.0 * t.ms / total, 1000.0 * t.ms / (double)t.calls);
        }
        std::map<std::string, double> by_category;
        for (const auto& [name, t] : ops)
            by_category[category(name)] += t.ms;
        std::string line = "profile: categories:";
        for (const auto& [c, ms] : by_category) {
            char buf[96];
            std::snprintf(buf, sizeof(buf), " %s %.1f%%", c.c_str(), 100.0 * ms / total);
            line += buf;
        }
        std::fprintf(out, "%s\n", line.c_str());
    }

  private:
    struct Pending {
        const char* name;
        cudaEvent_t start, stop;
    };
    struct Total {
        long long calls = 0;
        double ms = 0;
    };
    static constexpr size_t kMaxPending = 1 << 15;   // then drain at the op's end (one synchronisation)

    cudaEvent_t event() {
        if (free_.empty()) {
            cudaEvent_t e;
            cudaCheck(cudaEventCreate(&e));
            events_created_++;
            return e;
        }
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
    }
    void begin(const char* name, cudaStream_t s) {
        if (!nesting_.enter()) return;   // inside another op's scope: part of that op
        current_ = Pending{name, event(), event()};
        cudaCheck(cudaEventRecord(current_.start, s));
    }
    void end(cudaStream_t s) {
        if (!nesting_.leave()) return;
        if (cudaEventRecord(current_.stop, s) != cudaSuccess) {   // in a destructor: no throwing
            cudaGetLastError();
            return;
        }
        pending_.push_back(current_);
        if (pending_.size() >= kMaxPending && cudaStreamSynchronize(s) == cudaSuccess) drain();
    }
    // The op's family, for the summary line.
    static std::string category(const std::string& op) {
        auto has = [&](const char* s) { return op.find(s) != std::string::npos; };
        if (has("matmul")) return "gemm";
        if (has("attention")) return "attention";
        if (has("layernorm")) return has("e4m3") ? "fp8-cast(layernorm)" : "layernorm";
        if (has("adamw")) return has("e4m3") ? "optimizer+fp8-cast" : "optimizer";
        if (has("quantize") || has("e4m3") || has("e5m2") || has("amax") || has("fp8")) return "fp8-cast";
        if (has("classifier")) return "classifier";
        if (has("zero")) return "fill";
        if (has("copy")) return "copy";
        if (has("sum_squares")) return "optimizer";
        return "elementwise";
    }

    bool enabled_;
    ScopeNesting nesting_;
    Pending current_{};   // the open outermost scope
    std::vector<Pending> pending_;
    std::vector<cudaEvent_t> free_;
    std::map<std::string, Total> totals_;
    size_t events_created_ = 0;
};

}   // namespace train_gpt::cuda
