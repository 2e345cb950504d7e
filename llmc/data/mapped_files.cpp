// mapped_files.cpp — see mapped_files.h.
#include "data/mapped_files.h"

#include "utils.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace train_gpt {

namespace {

constexpr int kMaxMappedFiles = 4096;

struct Mapping {
    std::atomic<const char*> begin{nullptr};
    const char* end = nullptr;
    const char* path = nullptr;   // strdup'ed at registration, never freed while registered
};
Mapping g_mappings[kMaxMappedFiles];

void write_str(const char* s) {
    for (size_t n = std::strlen(s); n > 0;) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

void on_bus_error(int sig, siginfo_t* info, void*) {
    const char* at = static_cast<const char*>(info->si_addr);
    for (const Mapping& m : g_mappings) {
        const char* begin = m.begin.load();
        if (begin == nullptr || at < begin || at >= m.end) continue;
        write_str("error: ");
        write_str(m.path);
        write_str(
            " was truncated or changed while the run read it (a bus error reading its mapped pages); its data "
            "cannot be trusted: restore the file, then --resume\n");
        _exit(1);
    }
    ::signal(sig, SIG_DFL);   // not a mapped shard: the default action, once the handler returns
    ::raise(sig);
}

}   // namespace

void register_mapped_file(const void* base, size_t bytes, const std::string& path) {
    for (Mapping& m : g_mappings) {
        if (m.begin.load() != nullptr) continue;
        m.end = static_cast<const char*>(base) + bytes;
        m.path = ::strdup(path.c_str());
        m.begin.store(static_cast<const char*>(base));
        return;
    }
}

void unregister_mapped_file(const void* base) {
    for (Mapping& m : g_mappings) {
        if (m.begin.load() != base) continue;
        m.begin.store(nullptr);
        std::free(const_cast<char*>(m.path));
        m.path = nullptr;
        return;
    }
}

void install_bus_error_handler() {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus_error;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO;
    if (::sigaction(SIGBUS, &action, nullptr) != 0)
        fail("cannot install a handler for SIGBUS: %s", std::strerror(errno));
}

}   // namespace train_gpt
