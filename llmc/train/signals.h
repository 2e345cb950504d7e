// signals.h — stopping a run cleanly on a signal (what a scheduler sends before it preempts a job).
//
// While the training loop runs (a StopSignals object lives):
//   SIGTERM, SIGUSR1   finish the current step, write a checkpoint (when --checkpoint-every is
//                      set), exit kStopExitCode (75). Slurm sends SIGTERM on preemption and at the
//                      time limit, and SIGUSR1 ahead of time with sbatch --signal=USR1@SECONDS.
//   SIGINT (Ctrl-C)    finish the current step and exit 130, without a checkpoint; a second SIGINT
//                      ends the process at once.
// Before the first step (reading data, verifying a checkpoint, the evaluations and sample at the
// start step) and after the last, the three keep their default action: there is no step to
// finish, and the process ends at once. A signal the handlers record is said on stderr at once.
// An evaluation or sample due between two steps runs to its end before the next step, after
// which the run stops.
// Always (ignore_output_signals, at start): SIGXFSZ is ignored, so a write past a file-size
// limit (ulimit -f) fails with "File too large" and stops the run with the file named, instead of
// killing it; and SIGPIPE, so a closed stdout (the run piped into `head`) is a failed write the
// trainer reports once (flush_stdout_or_warn) while the run goes on, not a kill without a
// checkpoint.
//
// A handler only records the signal; the trainer asks at the end of every step. Under MPI the
// ranks may see a signal at different steps (or only some of them), so the trainer reduces the
// request over the ranks (stop_request_of_all) and every rank stops after the same step.
#pragma once

#include <csignal>
#include <cstdio>
#include <string>

namespace train_gpt {

class Comm;

constexpr int kStopExitCode = 75;         // EX_TEMPFAIL: stopped by SIGTERM / SIGUSR1; resume to continue
constexpr int kInterruptExitCode = 130;   // 128 + SIGINT: stopped by Ctrl-C

enum class StopRequest {
    None = 0,
    Interrupt = 1,    // SIGINT: stop, no checkpoint
    Checkpoint = 2,   // SIGTERM / SIGUSR1: checkpoint, then stop
};

// SIGXFSZ ignored, for the whole process (call it before MPI_Init, which may write files too).
void ignore_output_signals();
// First thing in main: a standard descriptor (0, 1, 2) the trainer was started without is opened
// on /dev/null, so the trainer's own files (the locks, log.jsonl) never take one of them (before:
// with stderr closed, log.jsonl became fd 2 and warnings landed in it). True where stdout was
// closed: a run says so once on stderr (warn_that_stdout_is_closed), as a failed write to it is,
// and --help, whose text would be lost, fails.
bool keep_standard_descriptors_open();
// `log_kept`: the run writes log.jsonl, its record where stdout is lost: a warning, and the run
// goes on. Without one (-x 0 without -o, -o ''), stdout is the run's only record (its samples, its
// val loss): an error, the run fails.
void warn_that_stdout_is_closed(bool log_kept);
// stdout flushed; once, where it could not be written (closed, a full device), said as above.
// Call after the step lines are printed.
void flush_stdout_or_warn(bool log_kept);
// Why `stream` failed, seen when it is flushed ("" where it has not): "it was closed" (EPIPE),
// the flush's own error, or "an earlier write failed" when only an earlier write did (its errno
// is long gone).
std::string flush_failure(std::FILE* stream);

// SIGTERM, SIGUSR1 and SIGINT recorded instead of ending the process, for as long as it lives;
// the dispositions before it come back when it dies. One at a time.
class StopSignals {
  public:
    StopSignals();
    ~StopSignals();
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

  private:
    struct sigaction previous_[3];
};

// What the signals received so far ask for on this rank (the strongest of them).
StopRequest stop_request();
// The strongest request of any rank (a collective: every rank calls it at the same point).
StopRequest stop_request_of_all(Comm& comm);
// The signal behind this rank's stop_request() ("SIGTERM"), or "another rank's signal" when this
// rank received none.
const char* stop_signal_name();

}   // namespace train_gpt
