#!/usr/bin/env bash
# test.sh — on a fresh machine: install, build everything (CUDA sources for sm_90a included),
# and run the GoogleTest suites. CUDA suites report SKIPPED where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
make -j"$(nproc)" all tests

status=0
log=$(mktemp)
build/test_cpu 2>&1 | tee "$log" || status=$?
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*, listed below:/\1/p' "$log" | tail -1)
skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
rm -f "$log"
echo
echo "test_cpu: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
exit "$status"
