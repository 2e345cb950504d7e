// signals.cpp — see signals.h.
#include "train/signals.h"

#include "distributed/comm.h"
#include "utils.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace train_gpt {

namespace {

constexpr int kStopSignals[3] = {SIGTERM, SIGUSR1, SIGINT};

std::atomic<int> g_request{0};   // a StopRequest
std::atomic<int> g_signal{0};    // the signal behind it

// What a recorded signal does, said on stderr when it arrives (a step may take a while): write(2)
// of a constant, which a handler may call.
template <size_t N>
void say(const char (&message)[N]) {
    const ssize_t ignored = ::write(STDERR_FILENO, message, N - 1);
    (void)ignored;
}

// The handlers run with the three stop signals blocked, so they never interleave.
void on_signal(int sig) {
    const int request = sig == SIGINT ? (int)StopRequest::Interrupt : (int)StopRequest::Checkpoint;
    if (request > g_request.load()) {
        g_request.store(request);
        g_signal.store(sig);
        if (sig == SIGINT)
            say("\nSIGINT: stopping after this step, with a checkpoint only if one is due then (Ctrl-C again ends the "
                "run at once, abandoning a save in progress)\n");
        else if (sig == SIGTERM)
            say("\nSIGTERM: stopping after this step, with a checkpoint of it if --checkpoint-every is set\n");
        else
            say("\nSIGUSR1: stopping after this step, with a checkpoint of it if --checkpoint-every is set\n");
    }
}

void install(int sig, void (*handler)(int), int flags, struct sigaction* previous) {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    for (int blocked : kStopSignals)
        sigaddset(&action.sa_mask, blocked);
    action.sa_flags = SA_RESTART | flags;   // reads and writes in progress carry on
    if (::sigaction(sig, &action, previous) != 0)
        fail("cannot install a handler for signal %d: %s", sig, std::strerror(errno));
}

}   // namespace

void ignore_output_signals() {
    install(SIGXFSZ, SIG_IGN, 0, nullptr);
    install(SIGPIPE, SIG_IGN, 0, nullptr);
}

bool keep_standard_descriptors_open() {
    bool stdout_closed = false;
    for (int fd = 0; fd <= 2; fd++) {
        if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        // the lowest free descriptor, so fd itself (the ones below it are open by now)
        const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (opened != fd) fail("descriptor %d is closed and /dev/null cannot stand in for it", fd);
        stdout_closed |= fd == 1;
    }
    return stdout_closed;
}

namespace {
// stdout lost (`what` happened to it): a warning where log.jsonl keeps the run's records, else an
// error
void stdout_lost(const std::string& what, bool log_kept) {
    if (!log_kept) {
        fail(
            "%s, and this run writes no log.jsonl (no -o): what it samples and evaluates would go nowhere. Give "
            "-o DIR to keep its records there",
            what.c_str());
    }
    std::fprintf(stderr, "warning: %s; the run goes on, and its records are in log.jsonl\n", what.c_str());
}
}   // namespace

void warn_that_stdout_is_closed(bool log_kept) { stdout_lost("stdout is closed", log_kept); }

std::string flush_failure(std::FILE* stream) {
    // errno is read only where this flush failed: a write that failed inside an earlier printf
    // left the stream's error flag, but errno has been overwritten since (a stat, an open)
    errno = 0;
    const bool failed_now = std::fflush(stream) == EOF;
    const int failure = errno;
    if (!std::ferror(stream)) return "";
    if (!failed_now || failure == 0) return "an earlier write failed";
    return failure == EPIPE ? "it was closed" : std::strerror(failure);
}

void flush_stdout_or_warn(bool log_kept) {
    static bool warned = false;
    const std::string failure = flush_failure(stdout);
    if (warned || failure.empty()) return;
    warned = true;
    stdout_lost(format("writing to stdout failed (%s)", failure.c_str()), log_kept);
}

StopSignals::StopSignals() {
    static_assert(std::atomic<int>::is_always_lock_free, "the handlers touch only lock-free atomics");
    for (int i = 0; i < 3; i++) {
        // a second Ctrl-C: the default action, at once
        install(kStopSignals[i], on_signal, kStopSignals[i] == SIGINT ? SA_RESETHAND : 0, &previous_[i]);
    }
}

StopSignals::~StopSignals() {
    for (int i = 0; i < 3; i++)
        ::sigaction(kStopSignals[i], &previous_[i], nullptr);
}

StopRequest stop_request() { return (StopRequest)g_request.load(); }

StopRequest stop_request_of_all(Comm& comm) {
    if (comm.world_size() == 1) return stop_request();
    float request = (float)stop_request();
    comm.all_reduce_max(&request, 1);   // host scalar: the trainer's MPI Comm
    return (StopRequest)(int)request;
}

const char* stop_signal_name() {
    switch (g_signal.load()) {
        case SIGTERM: return "SIGTERM";
        case SIGUSR1: return "SIGUSR1";
        case SIGINT: return "SIGINT";
        default: return "another rank's signal";
    }
}

}   // namespace train_gpt
