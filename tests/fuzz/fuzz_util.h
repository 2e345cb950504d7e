// fuzz_util.h — what the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp, scripts/fuzz.sh) share.
//
// Each harness feeds its input to a loader as a file and accepts exactly two outcomes: the
// loader succeeds (and its result then holds its invariants), or it throws train_gpt::Error,
// the library's "bad input, named" failure. Anything else is a finding: a sanitizer report, a
// crash, another exception (libFuzzer reports it as uncaught), a hang past -timeout, or an
// allocation above -malloc_limit_mb (a size field trusted before it was checked).
#pragma once

#include "utils.h"

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace train_gpt::fuzz {

// A memory-backed regular file (memfd) whose contents are replaced by each input; loaders open
// it by path, /proc/self/fd/N, as they would any file.
class MemoryFile {
  public:
    explicit MemoryFile(const char* name) : fd_(memfd_create(name, 0)) {
        if (fd_ < 0) {
            std::perror("memfd_create");
            std::abort();
        }
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    // Replaces the contents with data[0, size) and returns the path.
    const std::string& write(const uint8_t* data, size_t size) {
        if (ftruncate(fd_, 0) != 0 || pwrite_all(data, size) != size) {
            std::perror("memfd write");
            std::abort();
        }
        return path_;
    }

  private:
    size_t pwrite_all(const uint8_t* data, size_t size) {
        size_t done = 0;
        while (done < size) {
            const ssize_t n = pwrite(fd_, data + done, size - done, (off_t)done);
            if (n <= 0) break;
            done += (size_t)n;
        }
        return done;
    }
    int fd_;
    std::string path_;
};

// Stops the run with a message: an invariant of a successfully loaded file does not hold.
[[noreturn]] inline void invariant_broken(const char* what) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
}

}   // namespace train_gpt::fuzz
