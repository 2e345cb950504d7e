// utils.cpp — see utils.h.
#include "utils.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace train_gpt {

std::string vformat(const char* fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::vector<char> buf(static_cast<size_t>(n) + 1);
    std::vsnprintf(buf.data(), buf.size(), fmt, args);
    return std::string(buf.data(), static_cast<size_t>(n));
}

std::string format(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    return s;
}

void fail(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string s = vformat(fmt, args);
    va_end(args);
    throw Error(s);
}

FILE* open_file(const std::string& path, const char* mode) {
    FILE* f = std::fopen(path.c_str(), mode);
    if (!f) {
        fail("cannot open %s for %s: %s", path.c_str(),
             mode[0] == 'r' ? "reading" : "writing", std::strerror(errno));
    }
    return f;
}

void read_exact(void* dst, size_t size, size_t count, FILE* f, const std::string& path) {
    size_t got = std::fread(dst, size, count, f);
    if (got != count) {
        fail("%s: unexpected end of file (wanted %zu items of %zu bytes, got %zu)",
             path.c_str(), count, size, got);
    }
}

void write_exact(const void* src, size_t size, size_t count, FILE* f, const std::string& path) {
    if (std::fwrite(src, size, count, f) != count) {
        fail("%s: write failed: %s", path.c_str(), std::strerror(errno));
    }
}

void write_file_atomic(const std::string& path, const void* bytes, size_t size) {
    std::string tmp = path + ".tmp";
    FILE* f = open_file(tmp, "wb");
    write_exact(bytes, 1, size, f, tmp);
    if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) {
        std::fclose(f);
        fail("%s: flush failed: %s", tmp.c_str(), std::strerror(errno));
    }
    std::fclose(f);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        fail("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(errno));
    }
}

bool file_exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

void make_dirs(const std::string& path) {
    if (path.empty()) return;
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        partial = path.substr(0, pos);
        if (partial.empty()) continue;
        if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
            fail("cannot create directory %s: %s", partial.c_str(), std::strerror(errno));
        }
    }
}

}  // namespace train_gpt
