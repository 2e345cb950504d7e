#!/usr/bin/env bash
# test.sh — on a fresh machine: install, build everything (CUDA sources for sm_90a included),
# and run the GoogleTest suites and the check scripts. CUDA suites report SKIPPED where there is
# no GPU. The totals count as passed only what ran here and held; what could not run (a CUDA test
# without a GPU, a GPU step of gpu_check's dry run, a kernel set this CPU lacks) counts as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
start_all=$SECONDS
scripts/setup.sh --test
make -j"$(nproc)" all tests
build_seconds=$(( SECONDS - start_all ))

status=0
total_passed=0 total_failed=0 total_skipped=0
summaries=()
# run_suite NAME COMMAND…: run one GoogleTest binary, echo its output, and add its counts to the
# totals. A run that fails without a GoogleTest failure count (crash, hang, MPI abort) counts as
# one failure.
run_suite() {
    local name=$1 rc=0 log passed failed skipped t0=$SECONDS
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
    summaries+=("$name: $passed passed, $failed_note failed, $skipped skipped   ($(( SECONDS - t0 )) s)")
    total_passed=$(( total_passed + passed ))
    total_failed=$(( total_failed + failed ))
    total_skipped=$(( total_skipped + skipped ))
}

# run_check NAME COMMAND…: run a check script whose last line is "NAME: P passed, F failed" or
# "NAME: P passed, F failed, S skipped" (passed: what ran and held; skipped: what could not run
# here), echo its output, and add its counts to the totals. A run without that line counts as one
# failure (and as nothing passed); so does a non-zero exit without a failure count.
run_check() {
    local name=$1 rc=0 log line passed=0 failed=0 skipped=0 t0=$SECONDS
    shift
    log=$(mktemp)
    "$@" 2>&1 | tee "$log" || rc=$?
    line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?\$" "$log" | tail -1)
    rm -f "$log"
    if [[ $line =~ ^$name:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
        passed=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]} skipped=${BASH_REMATCH[4]:-0}
    fi
    local failed_note=$failed
    if [[ -z $line ]]; then
        failed=$(( failed + 1 )); failed_note="$failed (no summary line)"
        (( rc != 0 )) || rc=1
    fi
    if (( rc != 0 )); then
        status=$rc
        if (( failed == 0 )); then failed=1; failed_note="1 (exit $rc)"; fi
    fi
    summaries+=("$name: $passed passed, $failed_note failed, $skipped skipped   ($(( SECONDS - t0 )) s)")
    total_passed=$(( total_passed + passed ))
    total_failed=$(( total_failed + failed ))
    total_skipped=$(( total_skipped + skipped ))
}

run_suite test_cpu build/test_cpu
# The MPI Comm on 1, 2 and 4 ranks of this machine (oversubscribed: fine on two cores).
for np in 1 2 4; do
    run_suite "test_mpi -np $np" timeout 300 mpirun --oversubscribe --allow-run-as-root -np "$np" \
        build/test_mpi --gtest_color=no
done

# The CUDA kernel set against its CPU twin: every test that needs a GPU reports SKIPPED (with the
# reason) where there is none, and counts as skipped here; only its host-side tests run and
# count as passed.
run_suite test_cuda build/test_cuda --gtest_color=no
# No CUDA kernel may spill registers (sm_90a, every CUDA source; one check per compiled function).
run_check check_spills scripts/check_spills.sh
# The default CUDA path (fp32, bf16, fp16 with default flags) still compiles to the PTX recorded in
# tests/data/default_path_ptx.txt, names aside: one check per default function; about 15 s.
run_check check_ptx scripts/check_ptx.sh
# Every C++ and CUDA source follows .clang-format (one check per file).
run_check check_format scripts/check_format.sh
# The trainer computes what its reference commit computes, bit for bit (built here the same way;
# tests/data/fingerprint_reference.txt names how the reference moves); about two minutes.
run_check check_fingerprint scripts/check_fingerprint.sh
# The code references in docs/walkthrough.md and README.md name files and functions that exist.
run_check check_docs python3 scripts/check_docs.py
# gpu_check.sh's steps without a GPU: every GPU step counts as skipped; passed counts what ran
# here: each distinct wiring check that ran a command (trainer flags on 2 CPU steps, a test filter
# run; a script only parsed or a source only found is not one), the build and data steps, and
# the summary's arithmetic (the report's selftest).
run_check gpu_check_dry_run scripts/gpu_check.sh --dry-run
# The suites that compare numbers, under OpenBLAS's Prescott, Haswell, SkylakeX, Cooperlake and
# Zen kernel sets (each a different summation order), where this CPU and OpenBLAS can run them;
# one check per (kernel set, binary), about 2 minutes.
run_check check_kernel_sets scripts/check_kernel_sets.sh
# The PyTorch reference itself (dev/reference/selftest.py: gradcheck, an independent model, a
# hand-written AdamW); about 10 s.
run_check selftest /usr/bin/python3 dev/reference/selftest.py
# Every loader of a file the trainer or the data tool reads, fuzzed under ASan + UBSan for 20 s
# (tests/fuzz/README.md); one check per harness, failed by a finding or by fewer than 1000 inputs.
run_check fuzz scripts/fuzz.sh 20
# The README's commands, run as written (shortened) in a scratch directory; the two that cannot
# run here (the FineWeb run, the downloads) count as skipped, their static checks failing them.
run_check check_readme scripts/check_readme.sh
# The build's behaviour: quiet output, and a CPU-only trainer where there is no nvcc.
run_check check_build scripts/check_build.sh

echo
printf '%s\n' "${summaries[@]}"
echo "setup and build: $build_seconds s; all: $(( SECONDS - start_all )) s"
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit "$status"
