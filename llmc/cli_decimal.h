// cli_decimal.h — integer command-line values read in decimal, for every tool's CLI11 options.
//
// CLI11 converts integers as C's strtoll with base 0 does: "010" is octal 8 and "0x10" is 16. A
// zero-padded value (a sweep's `--seed $(printf %03d $i)`) then runs with another number than the
// one typed, and "08" fails to convert. decimal_integer<T>() reads the text as people do: an
// optional '-' (signed T only) and decimal digits, leading zeros dropped, within T's range; it
// fails on anything else ("1e3", "0x10", "12abc") naming the value. Added with
// Option::transform, it runs before the option's other checks, so they see the decimal text.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

namespace train_gpt {

template <class T>
CLI::Validator decimal_integer() {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
    return CLI::Validator(
        [](std::string& text) -> std::string {
            const bool negative = !text.empty() && text[0] == '-';
            const std::string digits = text.substr(negative ? 1 : 0);
            if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
                (negative && !std::is_signed_v<T>)) {
                return "'" + text + "' is not a decimal integer" + (std::is_signed_v<T> ? "" : " >= 0");
            }
            const size_t first = digits.find_first_not_of('0');
            const std::string decimal =
                (negative ? "-" : "") + (first == std::string::npos ? "0" : digits.substr(first));
            errno = 0;
            bool fits;
            if constexpr (std::is_signed_v<T>) {
                const long long v = std::strtoll(decimal.c_str(), nullptr, 10);
                fits = errno != ERANGE && v >= (long long)std::numeric_limits<T>::min() &&
                       v <= (long long)std::numeric_limits<T>::max();
            } else {
                const unsigned long long v = std::strtoull(decimal.c_str(), nullptr, 10);
                fits = errno != ERANGE && v <= (unsigned long long)std::numeric_limits<T>::max();
            }
            if (!fits) {
                return "'" + text + "' is out of range (" + std::to_string(std::numeric_limits<T>::min()) + " to " +
                       std::to_string(std::numeric_limits<T>::max()) + ")";
            }
            text = decimal == "-0" ? "0" : decimal;
            return "";
        },
        "", "DECIMAL");
}

// app.add_option for an integer field, its value read in decimal
template <class T>
CLI::Option* add_decimal_option(CLI::App& app, const std::string& names, T& field, const std::string& help) {
    return app.add_option(names, field, help)->transform(decimal_integer<T>());
}

}   // namespace train_gpt
