#!/usr/bin/env bash
# test.sh — on a fresh machine: install, build everything (CUDA sources for sm_90a included),
# and run the GoogleTest suites. CUDA suites report SKIPPED where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
make -j"$(nproc)" all tests

status=0
total_passed=0 total_failed=0 total_skipped=0
summaries=()
# run_suite NAME COMMAND…: run one GoogleTest binary, echo its output, and add its counts to the
# totals. A run that fails without a GoogleTest failure count (crash, hang, MPI abort) counts as
# one failure.
run_suite() {
    local name=$1 rc=0 log passed failed skipped
    shift
    log=$(mktemp)
    "$@" 2>&1 | tee "$log" || rc=$?
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*, listed below:/\1/p' "$log" | tail -1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    rm -f "$log"
    passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0}
    local failed_note=$failed
    if (( rc != 0 )); then
        status=$rc
        if (( failed == 0 )); then failed=1; failed_note="1 (exit $rc)"; fi
    fi
    summaries+=("$name: $passed passed, $failed_note failed, $skipped skipped")
    total_passed=$(( total_passed + passed ))
    total_failed=$(( total_failed + failed ))
    total_skipped=$(( total_skipped + skipped ))
}

# run_check NAME COMMAND…: run a check script whose last line is "NAME: P passed, F failed"
# (scripts/check_spills.sh), echo its output, and add its counts to the totals; a non-zero exit
# without a failure count counts as one failure.
run_check() {
    local name=$1 rc=0 log passed failed
    shift
    log=$(mktemp)
    "$@" 2>&1 | tee "$log" || rc=$?
    passed=$(sed -n "s/^$name: \([0-9]*\) passed, [0-9]* failed\$/\1/p" "$log" | tail -1)
    failed=$(sed -n "s/^$name: [0-9]* passed, \([0-9]*\) failed\$/\1/p" "$log" | tail -1)
    rm -f "$log"
    passed=${passed:-0} failed=${failed:-0}
    local failed_note=$failed
    if (( rc != 0 )); then
        status=$rc
        if (( failed == 0 )); then failed=1; failed_note="1 (exit $rc)"; fi
    fi
    summaries+=("$name: $passed passed, $failed_note failed, 0 skipped")
    total_passed=$(( total_passed + passed ))
    total_failed=$(( total_failed + failed ))
}

run_suite test_cpu build/test_cpu
# The MPI Comm on 1, 2 and 4 ranks of this machine (oversubscribed: fine on two cores).
for np in 1 2 4; do
    run_suite "test_mpi -np $np" timeout 300 mpirun --oversubscribe --allow-run-as-root -np "$np" \
        build/test_mpi --gtest_color=no
done

# The CUDA kernel set against its CPU twin: every test reports SKIPPED (with the reason) where
# there is no GPU, and counts as skipped here.
run_suite test_cuda build/test_cuda --gtest_color=no
# No CUDA kernel may spill registers (sm_90a, every CUDA source; one check per compiled function).
run_check check_spills scripts/check_spills.sh
# The code references in docs/walkthrough.md and README.md name files and functions that exist.
run_check check_docs python3 scripts/check_docs.py
# gpu_check.sh's steps without a GPU: each GPU step checks its wiring (trainer flags on 2 CPU
# steps, test filters, scripts) and reports SKIPPED; the summary and its targets are computed.
run_check gpu_check_dry_run scripts/gpu_check.sh --dry-run
# Every loader of a file the trainer or the data tool reads, fuzzed under ASan + UBSan for 20 s
# (tests/fuzz/README.md); one check per harness.
run_check fuzz scripts/fuzz.sh 20
# The README's commands, run as written (shortened) in a scratch directory.
run_check check_readme scripts/check_readme.sh
# The build's behaviour: quiet output, and a CPU-only trainer where there is no nvcc.
run_check check_build scripts/check_build.sh

echo
printf '%s\n' "${summaries[@]}"
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit "$status"
