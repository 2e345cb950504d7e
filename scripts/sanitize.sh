#!/usr/bin/env bash
# sanitize.sh — the CPU test suite once under AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   scripts/sanitize.sh [GTEST FLAGS...]      e.g. --gtest_filter='Checkpoint.*'
#
# `make sanitize` builds the host library, the data tools, the trainer and the CPU tests with
# g++'s -fsanitize=address -fsanitize=undefined into build/sanitize/, and build/sanitize/test_cpu
# runs; the train_gpt and prepare_text it starts (also under mpirun) are the sanitized ones.
# Any report (memory error, leak, undefined behaviour) ends its process with an error; in
# test_cpu itself that stops the run, and from a command a test runs it fails that test
# (test_util.h's run_command looks for reports in the command's output, so a report fails even
# a test that expects the command to fail). A clean run is every test passing. The last lines
# are GoogleTest's summary, then "sanitize: N report(s)" counted in the run's own output.
# Not instrumented: the CUDA kernel set and the NCCL Comm (llmc/**/*.cu, compiled by nvcc for
# the device), linked in from the usual build; their suite, build/test_cuda, does not run here
# (it needs a GPU), nor does build/test_mpi (the MPI Comm on its own; test_cpu's distributed
# tests run the sanitized trainer under mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."

make -j"$(nproc)" sanitize

# abort_on_error: a report ends its process with an error status. fast_unwind_on_malloc=0: full
# allocation stacks, so that what Open MPI's unloaded plugins leak is traced to Open MPI
# (scripts/lsan.supp); it makes the run about twice as slow. protect_shadow_gap=0: the CUDA
# runtime maps memory in ASan's shadow gap when a GPU is present.
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:fast_unwind_on_malloc=0:protect_shadow_gap=0
export UBSAN_OPTIONS=print_stacktrace=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0

log=build/sanitize/test_cpu.log
status=0
build/sanitize/test_cpu --gtest_color=no "$@" 2>&1 | tee "$log" || status=$?
reports=$(grep -c -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: ' "$log" || true)
echo "sanitize: $reports report(s)"
(( status == 0 && reports == 0 ))
