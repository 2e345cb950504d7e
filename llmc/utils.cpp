// utils.cpp — see utils.h.
#include "utils.h"

#include <xxhash.h>   // Debian's libxxhash-dev; link -lxxhash

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <memory>
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

namespace {

// What a non-regular file is, for messages.
const char* file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "a special file";
}

const char* access_name(int flags) { return (flags & O_ACCMODE) == O_RDONLY ? "reading" : "writing"; }

}   // namespace

int open_regular_file(const std::string& path, int flags) {
    const char* p = path.c_str();
    // O_NONBLOCK: opening a FIFO would otherwise wait for its other end before it can be refused.
    const int fd = ::open(p, flags | O_NONBLOCK | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0) {
        const int err = errno;
        // A FIFO opened for writing without a reader fails (ENXIO): name what it is instead.
        if (::stat(p, &st) == 0 && !S_ISREG(st.st_mode)) {
            fail("cannot open %s for %s: it is %s, not a regular file", p, access_name(flags), file_kind(st.st_mode));
        }
        fail("cannot open %s for %s: %s", p, access_name(flags), std::strerror(err));
    }
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail("cannot open %s for %s: cannot stat it: %s", p, access_name(flags), std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("cannot open %s for %s: it is %s, not a regular file", p, access_name(flags), file_kind(st.st_mode));
    }
    // Regular files ignore O_NONBLOCK; clear it all the same, so the descriptor is an ordinary one.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

FILE* open_file(const std::string& path, const char* mode) {
    // fopen's modes as open(2) flags: r, w, a, each optionally with + (and b, which is a no-op).
    const bool plus = std::strchr(mode, '+') != nullptr;
    int flags;
    switch (mode[0]) {
        case 'r': flags = plus ? O_RDWR : O_RDONLY; break;
        case 'w': flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC; break;
        case 'a': flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND; break;
        default: fail("open_file(%s): unsupported mode \"%s\"", path.c_str(), mode);
    }
    const int fd = open_regular_file(path, flags);
    FILE* f = ::fdopen(fd, mode);
    if (!f) {
        const int err = errno;
        ::close(fd);
        fail("cannot open %s for %s: %s", path.c_str(), access_name(flags), std::strerror(err));
    }
    return f;
}

void read_exact(void* dst, size_t size, size_t count, FILE* f, const std::string& path) {
    if (size == 0 || count == 0) return;   // nothing to read (and dst may be null)
    size_t got = std::fread(dst, size, count, f);
    if (got != count) {
        fail("%s: unexpected end of file (wanted %zu items of %zu bytes, got %zu)", path.c_str(), count, size, got);
    }
}

void write_exact(const void* src, size_t size, size_t count, FILE* f, const std::string& path) {
    if (size == 0 || count == 0) return;   // nothing to write (and src may be null)
    if (std::fwrite(src, size, count, f) != count) {
        fail("%s: write failed: %s", path.c_str(), std::strerror(errno));
    }
}

std::string read_file_text(const std::string& path, size_t max_bytes, const char* what) {
    FILE* f = open_file(path, "rb");
    struct stat st;
    if (max_bytes != SIZE_MAX && ::fstat(fileno(f), &st) == 0 && static_cast<uint64_t>(st.st_size) > max_bytes) {
        std::fclose(f);
        fail("%s: %lld bytes, more than %s can hold (at most %zu): a damaged or another file", path.c_str(),
             (long long)st.st_size, what ? what : "the file", max_bytes);
    }
    std::string text;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
        text.append(buf, got);
    const bool error = std::ferror(f) != 0;
    std::fclose(f);
    if (error) fail("read error in %s", path.c_str());
    return text;
}

void write_all(int fd, const void* bytes, size_t size, const std::string& path) {
    const char* p = static_cast<const char*>(bytes);
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, p + done, size - done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0 || errno != EINTR) {
            fail("%s: write failed: %s (%zu of %zu bytes written)", path.c_str(),
                 n < 0 ? std::strerror(errno) : "no progress", done, size);
        }
    }
}

void write_file_atomic(const std::string& path, const void* bytes, size_t size) {
    const std::string tmp = path + ".tmp";
    const int fd = open_regular_file(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    try {
        // a file replaced keeps who may read it (round 27: a private log.jsonl cut back on a resume
        // became world-readable); its owner may still write it (the run appends to it)
        if (struct stat old{}; ::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) &&
                               ::fchmod(fd, (old.st_mode & 0777) | S_IWUSR) != 0) {
            fail("%s: cannot give it the mode of %s: %s", tmp.c_str(), path.c_str(), std::strerror(errno));
        }
        write_all(fd, bytes, size, tmp);
        if (::fsync(fd) != 0) fail("%s: fsync failed: %s", tmp.c_str(), std::strerror(errno));
    } catch (const Error&) {
        ::close(fd);
        ::unlink(tmp.c_str());   // the partial file goes; `path` is as it was
        throw;
    }
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail("%s: close failed: %s", tmp.c_str(), std::strerror(err));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(err));
    }
}

int exit_status_after_printing(int rc) {
    if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return rc;
    std::fprintf(stderr, "error: cannot write to stdout: %s\n", std::strerror(errno));
    return rc == 0 ? 1 : rc;
}

bool file_exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

std::string resolved_path(const std::string& path) {
    if (path.empty()) return "";   // no path (std::filesystem::absolute throws on it)
    std::error_code ec;
    const std::filesystem::path r = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
    return (ec ? std::filesystem::absolute(path).lexically_normal() : r).string();
}

void make_dirs(const std::string& path) {
    if (path.empty()) return;
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        partial = path.substr(0, pos);
        if (partial.empty()) continue;
        if (::mkdir(partial.c_str(), 0755) == 0) continue;
        if (errno != EEXIST) fail("cannot create directory %s: %s", partial.c_str(), std::strerror(errno));
        struct stat st;
        if (::stat(partial.c_str(), &st) != 0) {   // a link to nothing (mkdir does not follow it)
            char target[PATH_MAX + 1] = {0};
            if (::readlink(partial.c_str(), target, PATH_MAX) > 0) {
                fail("cannot create directory %s: it is a link to %s, which does not exist", partial.c_str(), target);
            }
        }
        if (::stat(partial.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            fail("cannot create directory %s: it exists and is not a directory", partial.c_str());
        }
    }
}

std::string cut_text(const std::string& text, size_t max_bytes) {
    if (text.size() <= max_bytes) return text;
    size_t end = max_bytes >= 3 ? max_bytes - 3 : 0;
    while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80)   // not inside a character
        end--;
    return text.substr(0, end) + "...";
}

bool json_depth_within(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return false;
        } else if (c == ']' || c == '}') {
            depth--;   // unbalanced text is the parser's to refuse
        }
    }
    return true;
}

void check_json_depth(std::string_view text, const std::string& where, const char* what) {
    if (!json_depth_within(text)) {
        fail("%s: JSON nested deeper than %d levels, which %s never is (a damaged or hostile file)", where.c_str(),
             kMaxJsonDepth, what);
    }
}

std::string read_json_file_text(const std::string& path, size_t max_bytes, const char* what) {
    std::string text = read_file_text(path, max_bytes, what);
    check_json_depth(text, path, what);
    return text;
}

uint64_t hash_bytes(const void* data, size_t size) { return XXH3_64bits(data, size); }

uint64_t hash_file(const std::string& path, uint64_t* bytes) {
    FILE* f = open_file(path, "rb");
    std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(), XXH3_freeState);
    if (!state) {
        std::fclose(f);
        fail("out of memory hashing %s", path.c_str());
    }
    XXH3_64bits_reset(state.get());
    std::vector<char> buf(1 << 20);
    size_t got;
    *bytes = 0;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
        XXH3_64bits_update(state.get(), buf.data(), got);
        *bytes += got;
    }
    const bool err = std::ferror(f);
    std::fclose(f);
    if (err) fail("%s: read error while computing its checksum", path.c_str());
    return XXH3_64bits_digest(state.get());
}

std::string glob_escaped(const std::string& text) {
    std::string escaped;
    for (const char ch : text) {
        if (std::strchr("*?[]\\", ch)) escaped += '\\';
        escaped += ch;
    }
    return escaped;
}

std::string path_beside_program(const std::string& program, const std::string& relative, const std::string& fallback) {
    const size_t slash = program.find_last_of('/');
    if (slash == std::string::npos) return fallback;
    std::string path = (std::filesystem::path(program.substr(0, slash + 1)) / relative).lexically_normal().string();
    if (!file_exists(path)) return fallback;
    if (path.find('/') == std::string::npos) path = "./" + path;
    return path;
}

std::string shell_quoted(const std::string& text) {
    const bool plain = !text.empty() && text.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_./-+=:,@%") == std::string::npos;
    if (plain) return text;
    std::string quoted = "'";
    for (char c : text)
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

bool decode_utf8(const std::string& s, std::vector<uint32_t>* code_points) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || i + len > n) return false;
        unsigned cp = len == 1 ? c : c & (0x7f >> len);
        for (int k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        static const unsigned kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        if (code_points) code_points->push_back(cp);
        i += len;
    }
    return true;
}

}   // namespace train_gpt
