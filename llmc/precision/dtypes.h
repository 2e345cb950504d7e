// dtypes.h — the 16- and 8-bit storage types (bf16, fp16, fp8 E4M3, fp8 E5M2) and their
// conversions to and from float, written with integer bit manipulation so that the CPU kernel
// set and the CUDA kernel set (TG_HD: host and device) round every value the same way.
//
// The formats. Every one is sign · 2^(e − bias) · 1.m for a normal value (biased exponent field
// e ≥ 1) and sign · 2^(1 − bias) · 0.m for a subnormal one (e = 0), so near zero the spacing
// stays 2^(1 − bias − mbits) instead of jumping to 0:
//
//   format  bits  e  m  bias  largest finite        smallest normal  smallest subnormal  inf / NaN
//   fp32     32   8 23  127   3.40e38               2^-126           2^-149              e all ones
//   bf16     16   8  7  127   3.39e38 (0x7f7f)      2^-126           2^-133              e all ones
//   fp16     16   5 10   15   65504   (0x7bff)      2^-14            2^-24               e all ones
//   E4M3      8   4  3    7   448     (0x7e)        2^-6             2^-9                no inf; S.1111.111 is NaN
//   E5M2      8   5  2   15   57344   (0x7b)        2^-14            2^-16               e all ones (IEEE-like)
//
// bf16 is the top half of an fp32 (same range, 8 significant bits); E5M2 is the top byte of an
// fp16. E4M3 gives up inf and all NaNs but one per sign to reach 448 instead of 240.
//
// Rounding. float → narrower rounds to nearest, ties to even (RNE): keep the top bits, look at
// the dropped bits r against half an ulp h: round up if r > h, or r == h and the kept last bit is
// odd. Carrying out of the mantissa into the exponent is correct by construction (1.111…1 + ulp
// = 2.0 is the next binade). Values that round below half the smallest subnormal become ±0
// (sign kept); values between subnormals round the same way on the subnormal grid.
//
// Overflow. bf16 / fp16 are IEEE: a value at or above max + ½ulp becomes ±inf, inf stays inf.
// FP8 saturates ("satfinite", CUDA's __NV_SATFINITE, PTX cvt.rn.satfinite): anything whose
// magnitude rounds above the largest finite — including ±inf — becomes ±448 (E4M3) or ±57344
// (E5M2). E4M3 has no inf to go to; for E5M2 saturation is the FP8-training convention (an inf
// in a GEMM operand would poison the whole output tile).
//
// NaN. float → bf16/fp16 gives the canonical quiet NaN 0x7fff; float → FP8 gives 0x7f for
// either format, sign dropped — exactly the bits CUDA's conversions produce. Back to float:
// bf16 is a shift (payload kept, as in CUDA); fp16 / E4M3 / E5M2 NaNs become the canonical
// 0x7fffffff, as CUDA's host conversions do.
//
// The types are trivially copyable, standard-layout wrappers of the bits, so a buffer of them
// has the layout of the CUDA types (__nv_bfloat16, __half, __nv_fp8_e4m3, __nv_fp8_e5m2).
// In a kernel loop templated on the storage type T (float included):
//   float v = to_float(x[i]);  y[i] = from_float<T>(v);
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define TG_HD __host__ __device__
#else
#define TG_HD
#endif

namespace train_gpt {

// Bits of a float and back (memcpy is the well-defined type pun, and compiles to a move).
TG_HD inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}
TG_HD inline float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
// NaN test on the bits: unaffected by -ffast-math, usable in device code.
TG_HD inline bool is_nan_f32(float f) { return (float_bits(f) & 0x7fffffffu) > 0x7f800000u; }
TG_HD inline bool is_finite_f32(float f) { return (float_bits(f) & 0x7f800000u) != 0x7f800000u; }

// f rounded to TF32, the tensor cores' FP32 input format (fp32's 8-bit exponent, a 10-bit
// fraction), kept in a float: the 13 low fraction bits cleared after adding half of them — to
// nearest, ties away from zero, as PTX cvt.rna.tf32.f32 (the magnitude bits round, the sign
// stays). u = 2^-11. Inf and NaN pass unchanged; a carry out of the largest binade gives inf.
TG_HD inline float tf32_round(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return f;
    return bits_float((u + 0x1000u) & 0xffffe000u);
}

namespace detail {

constexpr uint32_t kF32CanonicalNaN = 0x7fffffffu;

// m >> shift rounded to nearest even (shift ≥ 1). Naive equivalent: llrint(m / 2^shift) under
// the default rounding mode.
TG_HD inline uint32_t shift_rne(uint32_t m, uint32_t shift) {
    const uint32_t kept = m >> shift;
    const uint32_t dropped = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
}

// |f| (a positive, finite, non-NaN float's bits `a`) → a narrow format with `mbits` mantissa
// bits and exponent bias `bias`, RNE, no overflow handling (callers clip first). Returns the
// magnitude bits; a result one past the largest finite is possible and the caller decides.
//   normal:    re-bias the exponent, drop 23 − mbits mantissa bits with RNE
//   subnormal: restore the implicit 1, shift onto the 2^(1 − bias − mbits) grid with RNE
TG_HD inline uint32_t narrow_magnitude(uint32_t a, uint32_t mbits, uint32_t bias) {
    const uint32_t drop = 23u - mbits;
    const uint32_t min_normal_exp = 127u + 1u - bias;   // float biased exponent of 2^(1 − bias)
    const uint32_t e = a >> 23;
    if (e >= min_normal_exp) {
        // exponent field: e − 127 + bias; subtracting (127 − bias) << 23 re-biases in place
        return shift_rne(a - ((127u - bias) << 23), drop);
    }
    // a = 1.m · 2^(e − 127) (e ≥ 1 here: float subnormals are < every format's half-subnormal
    // and are caught by the caller); the target grid step is 2^(1 − bias − mbits), so the value
    // in grid units is (1.m · 2^23) · 2^(e − 127 − 23 − (1 − bias − mbits)).
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 127u + 23u + 1u - bias - mbits - e;   // ≥ drop + 1
    return shift >= 32u ? 0u : shift_rne(m, shift);
}

}   // namespace detail

// ---- bf16: 1 sign, 8 exponent (bias 127), 7 mantissa -------------------------------------
struct bf16 {
    uint16_t bits;
    static constexpr float max_finite = 3.38953139e38f;   // 0x7f7f

    TG_HD static bf16 from_float(float f) {
        const uint32_t u = float_bits(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{0x7fff};
        // RNE on the low 16 bits: add 0x7fff plus the kept lsb, then truncate. Overflow carries
        // into the exponent and lands exactly on inf (0x7f80); the sign bit is never reached.
        return bf16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
    }
    TG_HD float to_float() const { return bits_float(uint32_t(bits) << 16); }
};

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa --------------------------------------
struct fp16 {
    uint16_t bits;
    static constexpr float max_finite = 65504.0f;   // 0x7bff

    TG_HD static fp16 from_float(float f) {
        const uint32_t u = float_bits(f);
        const uint32_t sign = (u >> 16) & 0x8000u;
        const uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return fp16{0x7fff};                      // NaN
        if (a >= 0x477ff000u) return fp16{uint16_t(sign | 0x7c00u)};   // ≥ 65520 = max + ½ulp, or inf
        if (a <= 0x33000000u) return fp16{uint16_t(sign)};             // ≤ 2^-25 = ½ smallest subnormal
        return fp16{uint16_t(sign | detail::narrow_magnitude(a, 10, 15))};
    }
    TG_HD float to_float() const {
        const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
        const uint32_t e = (bits >> 10) & 0x1fu;
        const uint32_t m = bits & 0x3ffu;
        if (e == 0x1fu) return bits_float(m ? detail::kF32CanonicalNaN : (sign | 0x7f800000u));
        if (e == 0u) return bits_float(sign | float_bits(float(m) * 0x1p-24f));   // m · 2^-24, exact
        return bits_float(sign | ((e + 112u) << 23) | (m << 13));                 // re-bias 15 → 127
    }
};

// ---- fp8 E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa; no inf; 0x7f / 0xff are NaN -------
struct fp8e4m3 {
    uint8_t bits;
    static constexpr float max_finite = 448.0f;   // 0x7e = 1.75 · 2^8

    // Saturating: |f| ≥ 448 (inf included) → ±448; NaN → 0x7f.
    TG_HD static fp8e4m3 from_float(float f) {
        const uint32_t u = float_bits(f);
        const uint32_t sign = (u >> 24) & 0x80u;
        const uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return fp8e4m3{0x7f};
        if (a >= 0x43e00000u) return fp8e4m3{uint8_t(sign | 0x7eu)};   // ≥ 448 (all of (448, 464] rounds to 448 anyway)
        if (a <= 0x3a800000u) return fp8e4m3{uint8_t(sign)};           // ≤ 2^-10 = ½ smallest subnormal
        return fp8e4m3{uint8_t(sign | detail::narrow_magnitude(a, 3, 7))};
    }
    TG_HD float to_float() const {
        const uint32_t sign = uint32_t(bits & 0x80u) << 24;
        const uint32_t e = (bits >> 3) & 0xfu;
        const uint32_t m = bits & 0x7u;
        if ((bits & 0x7fu) == 0x7fu) return bits_float(detail::kF32CanonicalNaN);
        if (e == 0u) return bits_float(sign | float_bits(float(m) * 0x1p-9f));   // m · 2^-9, exact
        return bits_float(sign | ((e + 120u) << 23) | (m << 20));                // re-bias 7 → 127
    }
};

// ---- fp8 E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa; IEEE-like inf / NaN ---------------
struct fp8e5m2 {
    uint8_t bits;
    static constexpr float max_finite = 57344.0f;   // 0x7b = 1.75 · 2^15

    // Saturating: |f| ≥ 57344 (inf included) → ±57344; NaN → 0x7f.
    TG_HD static fp8e5m2 from_float(float f) {
        const uint32_t u = float_bits(f);
        const uint32_t sign = (u >> 24) & 0x80u;
        const uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return fp8e5m2{0x7f};
        if (a >= 0x47600000u) return fp8e5m2{uint8_t(sign | 0x7bu)};   // ≥ 57344
        if (a <= 0x37000000u) return fp8e5m2{uint8_t(sign)};           // ≤ 2^-17 = ½ smallest subnormal
        return fp8e5m2{uint8_t(sign | detail::narrow_magnitude(a, 2, 15))};
    }
    // E5M2 is the top byte of an fp16.
    TG_HD float to_float() const { return fp16{uint16_t(bits << 8)}.to_float(); }
};

// ---- generic spelling for kernels templated on the storage type ---------------------------
TG_HD inline float to_float(float x) { return x; }
TG_HD inline float to_float(bf16 x) { return x.to_float(); }
TG_HD inline float to_float(fp16 x) { return x.to_float(); }
TG_HD inline float to_float(fp8e4m3 x) { return x.to_float(); }
TG_HD inline float to_float(fp8e5m2 x) { return x.to_float(); }

template <class T>
TG_HD inline T from_float(float f) {
    return T::from_float(f);
}
template <>
TG_HD inline float from_float<float>(float f) {
    return f;
}

// Buffers of these types must have the CUDA types' layout: same size, no padding, no
// constructors that would make copies anything but a byte copy.
static_assert(sizeof(bf16) == 2 && sizeof(fp16) == 2, "16-bit storage types must be 2 bytes");
static_assert(sizeof(fp8e4m3) == 1 && sizeof(fp8e5m2) == 1, "FP8 storage types must be 1 byte");
static_assert(std::is_trivially_copyable<bf16>::value && std::is_standard_layout<bf16>::value, "bf16 must be POD-like");
static_assert(std::is_trivially_copyable<fp16>::value && std::is_standard_layout<fp16>::value, "fp16 must be POD-like");
static_assert(std::is_trivially_copyable<fp8e4m3>::value && std::is_standard_layout<fp8e4m3>::value,
              "fp8e4m3 must be POD-like");
static_assert(std::is_trivially_copyable<fp8e5m2>::value && std::is_standard_layout<fp8e5m2>::value,
              "fp8e5m2 must be POD-like");

}   // namespace train_gpt
