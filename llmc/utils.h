// utils.h — errors and checked I/O shared by every host file.
//
// Invariant: nothing in the library calls exit(). A bad input raises
// train_gpt::Error with a message that names the file, flag or value at
// fault; main() catches it, prints "error: <message>" and exits non-zero.
// That keeps every failure path testable in-process.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace train_gpt {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vformat(const char* fmt, va_list args);

// Throw train_gpt::Error with a printf-style message.
[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// fopen(path, mode) for regular files only. Fails with "cannot open <path> for <reading|writing>:
// <strerror>", or, for a directory, FIFO, socket or device, "...: it is a FIFO (named pipe), not
// a regular file". The open never blocks: a FIFO is refused, not waited on.
FILE* open_file(const std::string& path, const char* mode);
// The same check for a file descriptor: open(2) with `flags` (O_RDONLY, O_WRONLY | O_CREAT ...),
// failing as open_file does unless `path` is a regular file. The caller closes it.
int open_regular_file(const std::string& path, int flags);
// fread/fwrite of exactly `count` items or fail naming `path`.
void read_exact(void* dst, size_t size, size_t count, FILE* f, const std::string& path);
void write_exact(const void* src, size_t size, size_t count, FILE* f, const std::string& path);

// The whole of a regular file (open_file's checks and messages). With `max_bytes`, a larger file is
// refused before anything is read or allocated, naming it, its size and `what` it should be ("a
// vocab.bpe"): a reader whose format bounds the file states that bound.
std::string read_file_text(const std::string& path, size_t max_bytes = SIZE_MAX, const char* what = nullptr);
// How deep the JSON of a file the engine reads may nest. None of them nests more than a few
// levels; far deeper (a hostile or garbage file: [[[[...]]]] 100000 deep) would overflow the stack
// in the recursive functions nlohmann's values are printed, compared and copied with (round 41: a
// segfault where an error quoted the value). So every JSON text read from a file is checked first.
constexpr int kMaxJsonDepth = 64;
// Whether `text`'s arrays and objects nest at most max_depth deep (brackets inside strings do
// not count); a linear scan, before any parse.
bool json_depth_within(std::string_view text, int max_depth = kMaxJsonDepth);
// Fails, naming `where` (a file, or file:line) and `what` it should be ("a config.json"), unless
// json_depth_within(text).
void check_json_depth(std::string_view text, const std::string& where, const char* what);
// read_file_text(path, max_bytes, what), then check_json_depth: every JSON file's reader.
std::string read_json_file_text(const std::string& path, size_t max_bytes, const char* what);
// `text` cut to at most max_bytes (on a UTF-8 character's boundary, "..." marking the cut): what
// an error quotes of a file, or of a parser's message that quotes the file (nlohmann's repeats a
// torn string whole: round 43, 200 kB of error).
std::string cut_text(const std::string& text, size_t max_bytes = 200);
// XXH3_64bits (seed 0) of a whole file, read in 1 MiB blocks; its size into *bytes.
uint64_t hash_file(const std::string& path, uint64_t* bytes);
// XXH3_64bits (seed 0) of `size` bytes in memory.
uint64_t hash_bytes(const void* data, size_t size);

// write(2) all of `bytes` to fd, or fail naming `path` and the reason (a full disk: "No space left
// on device"; a file-size limit: "File too large").
void write_all(int fd, const void* bytes, size_t size, const std::string& path);

// Write `bytes` to `path` atomically: into path + ".tmp", fsync, then rename. A crash leaves
// either the old file or the complete new one, never a torn one; a failed write (a full disk)
// removes the .tmp file again and fails naming it and the reason. A file replaced keeps its
// permission bits (plus its owner's write bit).
void write_file_atomic(const std::string& path, const void* bytes, size_t size);

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
// its code points appended to *code_points (when not null).
bool decode_utf8(const std::string& s, std::vector<uint32_t>* code_points = nullptr);
inline bool valid_utf8(const std::string& s) { return decode_utf8(s); }

// The exit status of a command that has printed what it was asked for (--help) on stdout: `rc`,
// or 1, said on stderr, where stdout cannot take it (a full device, a closed pipe).
int exit_status_after_printing(int rc);

bool file_exists(const std::string& path);
// path made absolute with its existing part resolved (symlinks, ..): two names of one file compare
// equal (std::filesystem::path's text, as a string); "" for "" (no path)
std::string resolved_path(const std::string& path);

// `text` as one word of a POSIX shell command: as it is when it has only letters, digits and
// _ . / - + = : , @ %, else in single quotes (a quote inside written '\''), so a printed command can
// be pasted.
std::string shell_quoted(const std::string& text);
// A file of the repository the running program belongs to, as a command typed where the user is
// can name it: `relative` (e.g. "scripts/plot_run.py", "../train_gpt") taken from the directory of
// `program` (argv[0]), lexically normalised, with "./" before a bare name ("./train_gpt"); `fallback`
// where argv[0] has no directory (found on PATH) or nothing is there.
std::string path_beside_program(const std::string& program, const std::string& relative, const std::string& fallback);
// `text` with the glob characters * ? [ ] \ escaped by a backslash: a directory's name as the
// literal start of a glob (expand_glob).
std::string glob_escaped(const std::string& text);
// mkdir -p; fails naming the path if it cannot be created or exists as something other than a
// directory (a file, a FIFO).
void make_dirs(const std::string& path);

}   // namespace train_gpt
