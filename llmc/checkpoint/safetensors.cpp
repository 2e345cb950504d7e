// safetensors.cpp — see safetensors.h.
#include "checkpoint/safetensors.h"

#include "json_fields.h"
#include "precision/dtypes.h"
#include "utils.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace train_gpt {

namespace {

struct DTypeEntry {
    StDType type;
    const char* name;
    size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {StDType::F64, "F64", 8}, {StDType::F32, "F32", 4},   {StDType::F16, "F16", 2}, {StDType::BF16, "BF16", 2},
    {StDType::I64, "I64", 8}, {StDType::I32, "I32", 4},   {StDType::I16, "I16", 2}, {StDType::I8, "I8", 1},
    {StDType::U8, "U8", 1},   {StDType::BOOL, "BOOL", 1},
};

// A header larger than this is not a tensor file (Python's safetensors uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Product of the dims, or fail if it would overflow (a hostile header must not wrap around).
size_t checked_numel(const std::vector<int64_t>& shape, const std::string& path, const std::string& name) {
    size_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) fail("%s: tensor '%s' has a negative dimension", path.c_str(), name.c_str());
        if (d != 0 && n > SIZE_MAX / 16 / (size_t)d) {
            fail("%s: tensor '%s' has an impossibly large shape", path.c_str(), name.c_str());
        }
        n *= (size_t)d;
    }
    return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}   // namespace

const char* st_dtype_name(StDType t) {
    for (const auto& e : kDTypes)
        if (e.type == t) return e.name;
    return "?";
}

size_t st_dtype_size(StDType t) {
    for (const auto& e : kDTypes)
        if (e.type == t) return e.size;
    return 0;
}

size_t StTensorInfo::numel() const {
    size_t n = 1;
    for (int64_t d : shape)
        n *= (size_t)d;
    return n;
}

void write_safetensors(const std::string& path, const std::vector<StTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::vector<size_t> sizes;
    uint64_t offset = 0;
    for (const StTensorView& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__" || header.contains(t.name)) {
            fail("%s: invalid or duplicate tensor name '%s'", path.c_str(), t.name.c_str());
        }
        const size_t bytes = checked_numel(t.shape, path, t.name) * st_dtype_size(t.dtype);
        if (bytes > 0 && t.data == nullptr) fail("%s: tensor '%s' has no data", path.c_str(), t.name.c_str());
        header[t.name] = {
            {"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        sizes.push_back(bytes);
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');   // the data section starts 8-byte aligned
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)text.size() >> (8 * i));   // little-endian

    FILE* f = open_file(path, "wb");
    write_exact(len, 1, 8, f, path);
    write_exact(text.data(), 1, text.size(), f, path);
    for (size_t i = 0; i < tensors.size(); i++) {
        if (sizes[i] > 0) write_exact(tensors[i].data, 1, sizes[i], f, path);
    }
    if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) {
        std::fclose(f);
        fail("%s: flush failed: %s", path.c_str(), std::strerror(errno));
    }
    if (std::fclose(f) != 0) fail("%s: close failed: %s", path.c_str(), std::strerror(errno));
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const char* p = path.c_str();
    struct stat st;
    if (::stat(p, &st) != 0) fail("cannot open %s for reading: %s", p, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("%s: not a regular file", p);
    const uint64_t file_size = (uint64_t)st.st_size;
    if (file_size < 8) fail("%s: %llu bytes, too short for a safetensors file", p, (unsigned long long)file_size);

    FILE* f = open_file(path, "rb");
    uint8_t len[8];
    std::string text;
    try {
        read_exact(len, 1, 8, f, path);
        uint64_t n = 0;
        for (int i = 0; i < 8; i++)
            n |= (uint64_t)len[i] << (8 * i);
        if (n > kMaxHeaderBytes || n > file_size - 8) {
            fail("%s: header length %llu does not fit the file (%llu bytes): not a safetensors file, or truncated", p,
                 (unsigned long long)n, (unsigned long long)file_size);
        }
        text.resize(n);
        read_exact(text.data(), 1, n, f, path);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
    data_start_ = 8 + text.size();
    const uint64_t data_size = file_size - data_start_;

    check_json_depth(text, path_, "a safetensors header");
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("%s: header is not valid JSON (%s)", p, cut_text(e.what()).c_str());
    }
    if (!header.is_object()) fail("%s: header is not a JSON object", p);

    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const nlohmann::json& v = it.value();
        const char* tn = name.c_str();
        if (name == "__metadata__") {
            if (!v.is_object()) fail("%s: __metadata__ is not an object", p);
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string()) fail("%s: __metadata__ value '%s' is not a string", p, m.key().c_str());
                metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
            fail("%s: tensor '%s' lacks dtype, shape or data_offsets", p, tn);
        }
        StTensorInfo t;
        t.name = name;
        const nlohmann::json& dt = v["dtype"];
        const DTypeEntry* entry = nullptr;
        if (dt.is_string()) {
            for (const auto& e : kDTypes)
                if (dt.get<std::string>() == e.name) entry = &e;
        }
        if (entry == nullptr) fail("%s: tensor '%s' has unsupported dtype %s", p, tn, json_excerpt(dt).c_str());
        t.dtype = entry->type;
        const nlohmann::json& shape = v["shape"];
        if (!shape.is_array()) fail("%s: tensor '%s': shape is not an array", p, tn);
        for (const auto& d : shape) {
            if (!d.is_number_integer())
                fail("%s: tensor '%s': shape %s is not a list of integers", p, tn, json_excerpt(shape).c_str());
            t.shape.push_back(json_integer(d, 0, INT64_MAX, path, name + ".shape"));
        }
        const size_t bytes = checked_numel(t.shape, path, name) * entry->size;
        const nlohmann::json& off = v["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
            fail("%s: tensor '%s': data_offsets %s is not [begin, end]", p, tn, json_excerpt(off).c_str());
        }
        t.begin = (uint64_t)json_integer(off[0], 0, INT64_MAX, path, name + ".data_offsets");
        t.end = (uint64_t)json_integer(off[1], 0, INT64_MAX, path, name + ".data_offsets");
        if (t.end < t.begin || t.end - t.begin != bytes) {
            fail("%s: tensor '%s': data_offsets [%llu, %llu] do not hold %s %s (%zu bytes)", p, tn,
                 (unsigned long long)t.begin, (unsigned long long)t.end, entry->name, shape_str(t.shape).c_str(),
                 bytes);
        }
        if (t.end > data_size) {
            fail("%s: tensor '%s' ends at byte %llu of the data, which has only %llu bytes (truncated file?)", p, tn,
                 (unsigned long long)t.end, (unsigned long long)data_size);
        }
        tensors_.push_back(std::move(t));
    }
    // The tensors must tile the data section: no holes, no overlaps, nothing after the last one.
    std::sort(tensors_.begin(), tensors_.end(), [](const StTensorInfo& a, const StTensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expect = 0;
    for (const StTensorInfo& t : tensors_) {
        if (t.begin != expect) {
            fail("%s: tensor '%s' starts at byte %llu of the data, expected %llu (%s)", p, t.name.c_str(),
                 (unsigned long long)t.begin, (unsigned long long)expect, t.begin < expect ? "overlap" : "hole");
        }
        expect = t.end;
    }
    if (expect != data_size) {
        fail("%s: the tensors hold %llu bytes of data but the file has %llu after the header", p,
             (unsigned long long)expect, (unsigned long long)data_size);
    }
    for (size_t i = 0; i < tensors_.size(); i++)
        index_[tensors_[i].name] = i;
}

const StTensorInfo* SafetensorsFile::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const StTensorInfo& SafetensorsFile::at(const std::string& name) const {
    const StTensorInfo* t = find(name);
    if (t == nullptr) fail("%s: no tensor '%s'", path_.c_str(), name.c_str());
    return *t;
}

void SafetensorsFile::read_bytes(void* dst, const StTensorInfo& t, size_t byte_offset, size_t count) const {
    if (byte_offset > t.nbytes() || count > t.nbytes() - byte_offset) {
        fail("%s: tensor '%s': bytes [%zu, %zu) are outside its %zu bytes", path_.c_str(), t.name.c_str(), byte_offset,
             byte_offset + count, t.nbytes());
    }
    if (count == 0) return;
    FILE* f = open_file(path_, "rb");
    const uint64_t pos = data_start_ + t.begin + byte_offset;
    if (fseeko(f, (off_t)pos, SEEK_SET) != 0) {
        std::fclose(f);
        fail("%s: cannot seek to tensor '%s': %s", path_.c_str(), t.name.c_str(), std::strerror(errno));
    }
    try {
        read_exact(dst, 1, count, f, path_ + " (tensor '" + t.name + "')");
    } catch (...) {
        std::fclose(f);
        throw;
    }
    std::fclose(f);
}

std::vector<uint8_t> SafetensorsFile::read(const std::string& name) const {
    const StTensorInfo& t = at(name);
    std::vector<uint8_t> bytes(t.nbytes());
    read_bytes(bytes.data(), t, 0, bytes.size());
    return bytes;
}

std::vector<float> SafetensorsFile::read_floats(const std::string& name) const {
    const StTensorInfo& t = at(name);
    const std::vector<uint8_t> bytes = read(name);
    std::vector<float> out(t.numel());
    switch (t.dtype) {
        case StDType::F32:
            if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());   // empty: both null
            break;
        case StDType::BF16:
            for (size_t i = 0; i < out.size(); i++) {
                bf16 x;
                std::memcpy(&x, bytes.data() + 2 * i, 2);
                out[i] = to_float(x);
            }
            break;
        case StDType::F16:
            for (size_t i = 0; i < out.size(); i++) {
                fp16 x;
                std::memcpy(&x, bytes.data() + 2 * i, 2);
                out[i] = to_float(x);
            }
            break;
        default:
            fail("%s: tensor '%s' is %s; the weights are read as F32, F16 or BF16 (convert the model to one of them)",
                 path_.c_str(), name.c_str(), st_dtype_name(t.dtype));
    }
    return out;
}

}   // namespace train_gpt
