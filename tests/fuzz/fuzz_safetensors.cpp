// fuzz_safetensors.cpp — a safetensors file (checkpoint/safetensors.h): the header parsed and
// checked against the file, then every tensor read back, whole and as floats where it is one.
// Invariants of a file that opens: the tensors tile the data section exactly, and each reads
// back as numel · dtype size bytes (numel floats).
#include "checkpoint/safetensors.h"
#include "fuzz_util.h"

using namespace train_gpt;
using namespace train_gpt::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static MemoryFile file("safetensors");
    const std::string& path = file.write(data, size);
    try {
        const SafetensorsFile f(path);
        uint64_t data_bytes = 0;
        for (const StTensorInfo& t : f.tensors()) {
            data_bytes += t.nbytes();
            if (t.numel() * st_dtype_size(t.dtype) != t.nbytes())
                invariant_broken("a tensor's bytes do not match its shape");
            if (f.read(t.name).size() != t.nbytes()) invariant_broken("read() gave another size");
            if (t.dtype == StDType::F32 || t.dtype == StDType::BF16 || t.dtype == StDType::F16) {
                if (f.read_floats(t.name).size() != t.numel()) invariant_broken("read_floats() gave another count");
            }
            if (t.nbytes() > 0) {
                uint8_t last;
                f.read_bytes(&last, t, t.nbytes() - 1, 1);
            }
        }
        if (data_bytes > size) invariant_broken("the tensors hold more bytes than the file");
    } catch (const Error&) {
    }
    return 0;
}
