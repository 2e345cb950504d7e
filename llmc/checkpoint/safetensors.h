// safetensors.h — reading and writing the safetensors format (Hugging Face's tensor file).
//
// The format: an unsigned 64-bit little-endian N, then N bytes of UTF-8 JSON, then the data.
//   {"__metadata__": {"format": "pt"},                               (optional, string → string)
//    "wte": {"dtype": "BF16", "shape": [V, C], "data_offsets": [0, 2·V·C]}, ...}
// data_offsets are [begin, end) in bytes from the start of the data section (8 + N); the
// tensors tile the data section exactly, without holes or overlaps; each tensor is row-major,
// little-endian. The header is padded with spaces to a multiple of 8 bytes so that the data
// starts aligned. Python's safetensors and transformers read what this writes (with
// __metadata__ {"format": "pt"}, which transformers requires).
//
// Reading validates all of that against the file's size before any data is read; every error
// names the file and, where there is one, the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace train_gpt {

// The element types of the format that this project reads. Writes use F32 and BF16.
enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };
const char* st_dtype_name(StDType t);   // "F32", "BF16", ...
size_t st_dtype_size(StDType t);        // bytes per element

// A tensor to write: a view of `data` (row-major, numel(shape) · st_dtype_size(dtype) bytes),
// which must stay alive for the duration of the write.
struct StTensorView {
    std::string name;
    StDType dtype = StDType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;
};

// Writes `tensors` in the given order to `path` and fsyncs it. Names must be unique and must not
// be "__metadata__"; `metadata` goes into the header's __metadata__ (omitted when empty).
void write_safetensors(const std::string& path, const std::vector<StTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// One tensor of a file as its header describes it.
struct StTensorInfo {
    std::string name;
    StDType dtype = StDType::F32;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;   // byte range within the data section
    size_t numel() const;
    size_t nbytes() const { return (size_t)(end - begin); }
};

// A safetensors file with its header parsed and validated (open() reads only the header;
// the data is read on demand).
class SafetensorsFile {
  public:
    explicit SafetensorsFile(const std::string& path);

    const std::string& path() const { return path_; }
    const std::vector<StTensorInfo>& tensors() const { return tensors_; }   // in data order
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // The tensor called `name`: find() returns null when absent, at() fails naming the file.
    const StTensorInfo* find(const std::string& name) const;
    const StTensorInfo& at(const std::string& name) const;

    // All of a tensor's bytes, or `count` bytes starting `byte_offset` bytes into it.
    std::vector<uint8_t> read(const std::string& name) const;
    void read_bytes(void* dst, const StTensorInfo& t, size_t byte_offset, size_t count) const;
    // The tensor converted to float (F32, BF16 and F16 only; fails naming the tensor otherwise).
    std::vector<float> read_floats(const std::string& name) const;

  private:
    std::string path_;
    uint64_t data_start_ = 0;   // 8 + header length
    std::vector<StTensorInfo> tensors_;
    std::map<std::string, size_t> index_;
    std::map<std::string, std::string> metadata_;
};

}   // namespace train_gpt
