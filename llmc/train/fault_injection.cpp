// train/fault_injection.cpp — the --inject-nonfinite-step decorator (fault_injection.h).
#include "train/fault_injection.h"

#include "backend_decorator.h"

#include <cmath>
#include <utility>

namespace train_gpt {

namespace {

class InjectedNonfinite final : public BackendDecorator {
  public:
    InjectedNonfinite(std::unique_ptr<Backend> inner, const TrainConfig& cfg, const int64_t& first_step)
        : BackendDecorator(std::move(inner)), cfg_(cfg), first_step_(first_step) {}
    double sum_squares(const float* g, size_t n) override {
        const double sum = k_->sum_squares(g, n);
        const int64_t step = first_step_ + calls_++;
        return cfg_.injects_nonfinite_at((int)step) ? INFINITY : sum;
    }

  private:
    const TrainConfig& cfg_;
    const int64_t& first_step_;
    int64_t calls_ = 0;
};

}   // namespace

std::unique_ptr<Backend> with_injected_nonfinite(std::unique_ptr<Backend> inner, const TrainConfig& cfg,
                                                 const int64_t& first_step) {
    return std::make_unique<InjectedNonfinite>(std::move(inner), cfg, first_step);
}

}   // namespace train_gpt
