// test_util.h — helpers shared by the test suites: scratch directories, running the built
// binaries, capturing a train_gpt::Error's message, and comparing float arrays.
#pragma once

#include "utils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace train_gpt::test {

// A fresh directory under /tmp, removed with everything in it when the object dies.
struct ScratchDir {
    std::string path;
    ScratchDir() {
        char name[] = "/tmp/train_gpt_test_XXXXXX";
        if (!mkdtemp(name)) throw std::runtime_error("mkdtemp failed");
        path = name;
    }
    ~ScratchDir() { std::system(("rm -rf '" + path + "'").c_str()); }
    std::string file(const std::string& name) const { return path + "/" + name; }
};

// The message of the train_gpt::Error that f throws (a test failure if it throws none).
inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a train_gpt::Error";
    return "";
}

#define EXPECT_CONTAINS(text, part) \
    EXPECT_NE(std::string(text).find(part), std::string::npos) << "expected '" << (part) << "' in: " << (text)

// Directory of the running test binary (build/), where the Makefile puts the tools.
inline std::string build_dir() {
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return "build";
    self[n] = '\0';
    std::string dir(self);
    return dir.substr(0, dir.rfind('/'));
}

// The repository root: the nearest directory above build_dir() that holds train_gpt.cu (build/
// for the usual build, build/sanitize/ for scripts/sanitize.sh's).
inline std::string repo_root() {
    std::string dir = build_dir();
    while (dir.rfind('/') != std::string::npos) {
        dir = dir.substr(0, dir.rfind('/'));
        if (access((dir + "/train_gpt.cu").c_str(), F_OK) == 0) return dir;
    }
    return "..";
}

// The trainer under test: the one beside the test binary where there is one (scripts/sanitize.sh
// builds it there), else the repository's ./train_gpt.
inline std::string train_gpt_binary() {
    const std::string beside = build_dir() + "/train_gpt";
    return access(beside.c_str(), X_OK) == 0 ? beside : repo_root() + "/train_gpt";
}

// The trainer as prepare_text's `next:` line names it: the one beside prepare_text's build/
// directory (the repository's ./train_gpt for the usual build), else ./train_gpt.
inline std::string trainer_beside_prepare_text() {
    const std::string parent = build_dir().substr(0, build_dir().rfind('/'));
    return access((parent + "/train_gpt").c_str(), X_OK) == 0 ? parent + "/train_gpt" : "./train_gpt";
}

// The Python the oracle scripts run with: $TRAIN_GPT_PYTHON, else Debian's (where setup.sh
// installs torch, transformers and safetensors).
inline std::string python_binary() {
    const char* env = std::getenv("TRAIN_GPT_PYTHON");
    return env != nullptr ? env : "/usr/bin/python3";
}

// Runs a shell command; returns its exit code and leaves its stdout+stderr in *output.
inline int run_command(const std::string& command, std::string* output) {
    char name[] = "/tmp/train_gpt_cmd_XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    close(fd);
    const int status = std::system((command + " > '" + name + "' 2>&1").c_str());
    output->clear();
    if (FILE* f = std::fopen(name, "rb")) {
        char buf[4096];
        size_t got;
        while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
            output->append(buf, got);
        std::fclose(f);
    }
    std::remove(name);
#if defined(__SANITIZE_ADDRESS__)
    // A sanitizer build (scripts/sanitize.sh): a report from the command fails the calling test,
    // even one that expects the command to fail.
    for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: "}) {
        if (output->find(report) != std::string::npos) {
            ADD_FAILURE() << "sanitizer report (" << report << ") from: " << command << "\n" << *output;
        }
    }
#endif
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A command's exit code, its stdout+stderr and its wall time.
struct CommandResult {
    int rc = 0;
    std::string output;
    double seconds = 0;
};

inline CommandResult run_timed(const std::string& command) {
    CommandResult r;
    const auto t0 = std::chrono::steady_clock::now();
    r.rc = run_command(command, &r.output);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

// A refusal: an error exit (1..123: not `timeout`'s 124, not 128 + N for a signal, not -1 for a
// shell killed by one), with every part in the output.
inline void expect_refused(const CommandResult& r, const std::vector<std::string>& parts) {
    EXPECT_TRUE(r.rc >= 1 && r.rc <= 123)
        << "exit " << r.rc << " (124: hung or blocked until the timeout; 128 + N or -1: killed by signal N)\n"
        << r.output;
    for (const std::string& part : parts)
        EXPECT_CONTAINS(r.output, part);
}

inline void write_text(const std::string& path, const std::string& bytes) {
    FILE* f = open_file(path, "wb");
    write_exact(bytes.data(), 1, bytes.size(), f, path);
    std::fclose(f);
}

inline std::string read_text(const std::string& path) {
    std::string out;
    FILE* f = open_file(path, "rb");
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
        out.append(buf, got);
    std::fclose(f);
    return out;
}

// Every file and directory under `dir` (nothing if it does not exist), a file as its size and a
// hash of its bytes: for "nothing written, deleted or overwritten" checks.
inline std::map<std::string, std::string> directory_snapshot(const std::string& dir) {
    namespace fs = std::filesystem;
    std::map<std::string, std::string> files;
    std::error_code ec;
    if (!fs::exists(dir, ec)) return files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file()) {
            files[e.path().string()] = "<dir>";
            continue;
        }
        const std::string bytes = read_text(e.path().string());
        files[e.path().string()] =
            std::to_string(bytes.size()) + " bytes, hash " + std::to_string(std::hash<std::string>()(bytes));
    }
    return files;
}

// Normwise relative error max_i |a_i − b_i| / max_i |b_i|: the error measure for tensors whose
// small elements are rounding noise (an element-wise relative error would divide by ~0 there).
template <typename A, typename B>
double max_rel_error(const A* a, const B* b, size_t n) {
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < n; i++) {
        max_diff = std::max(max_diff, std::fabs((double)a[i] - (double)b[i]));
        max_ref = std::max(max_ref, std::fabs((double)b[i]));
    }
    return max_ref == 0 ? max_diff : max_diff / max_ref;
}

}   // namespace train_gpt::test
