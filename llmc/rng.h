// rng.h — deterministic random numbers for initialisation, shuffling and sampling.
//
// std::mt19937_64's output sequence is fixed by the C++ standard, so it is the same with every
// compiler; std::uniform_*_distribution and std::normal_distribution are not, so the conversions
// to floats are written here. Same seed → same weights, same samples, on every machine.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>

namespace train_gpt {

class Rng {
  public:
    explicit Rng(uint64_t seed) : engine_(seed) {}

    uint64_t next_u64() { return engine_(); }
    // uniform in [0, 1) with 53 random bits
    double uniform() { return (double)(engine_() >> 11) * 0x1.0p-53; }
    // standard normal by Box–Muller (one value per call; the pair's second half is discarded so
    // that the stream position is a function of the number of calls alone)
    double normal() {
        double u1 = 1.0 - uniform();   // (0, 1]: log is finite
        double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    // uniform integer in [0, n), n > 0, without modulo bias (rejection sampling)
    uint64_t below(uint64_t n) {
        uint64_t limit = UINT64_MAX - UINT64_MAX % n;
        uint64_t x;
        do {
            x = engine_();
        } while (x >= limit);
        return x % n;
    }

    // The stream's position as text (the standard's textual form of the engine: it continues the
    // same on every machine), for a checkpoint; set_state takes it back, false (and unchanged) for
    // a text that is no such state.
    std::string state() const {
        std::ostringstream out;
        out << engine_;
        return out.str();
    }
    bool set_state(const std::string& text) {
        std::istringstream in(text);
        std::mt19937_64 e;
        in >> e;
        if (in.fail() || !(in >> std::ws).eof()) return false;
        engine_ = e;
        return true;
    }

  private:
    std::mt19937_64 engine_;
};

}   // namespace train_gpt
