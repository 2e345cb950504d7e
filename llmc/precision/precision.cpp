// precision.cpp — see precision.h.
#include "precision/precision.h"

#include "utils.h"

namespace train_gpt {

Precision parse_precision(const std::string& name) {
    if (name == "fp32") return Precision::FP32;
    if (name == "tf32") return Precision::TF32;
    if (name == "bf16") return Precision::BF16;
    if (name == "fp16") return Precision::FP16;
    if (name == "fp8") return Precision::FP8;
    fail("unknown precision '%s' (expected fp32, tf32, bf16, fp16 or fp8)", name.c_str());
}

const char* precision_name(Precision p) {
    switch (p) {
        case Precision::FP32: return "fp32";
        case Precision::TF32: return "tf32";
        case Precision::BF16: return "bf16";
        case Precision::FP16: return "fp16";
        case Precision::FP8: return "fp8";
    }
    return "?";
}

DType activation_dtype(Precision p) {
    switch (p) {
        case Precision::FP32:
        case Precision::TF32: return DType::F32;
        case Precision::FP16: return DType::F16;
        default: return DType::BF16;
    }
}

size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }

const char* dtype_name(DType d) {
    switch (d) {
        case DType::F32: return "fp32";
        case DType::BF16: return "bf16";
        case DType::F16: return "fp16";
    }
    return "?";
}

}   // namespace train_gpt
