#!/usr/bin/env bash
# check_build.sh — the build's own behaviour, after `make`:
#   * quiet by default: one short line per file, the whole command with V=1;
#   * without nvcc, `make` builds a CPU-only trainer (here into build/cpu_only/, beside the real
#     one) and says so; it links no CUDA library, trains on the CPU, and --device cuda stops with
#     the reason;
#   * a second make has nothing to do for the data tools (their objects are not deleted).
# Prints "check_build: ok NAME" or "check_build: FAIL NAME" per check, and last
# "check_build: P passed, F failed" (scripts/test.sh counts these).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/prepare_kjv.sh >/dev/null || { echo "check_build: scripts/prepare_kjv.sh failed"; echo "check_build: 0 passed, 1 failed"; exit 1; }
passed=0 failed=0
out=$(mktemp)
trap 'rm -f "$out"; rm -rf "$scratch"' EXIT
scratch=$(mktemp -d)
# result NAME CONDITION-EXIT-CODE: count and report one check, with the last output on failure
result() {
    if (( $2 == 0 )); then
        echo "check_build: ok $1"
        passed=$(( passed + 1 ))
    else
        echo "check_build: FAIL $1"
        tail -15 "$out" | sed 's/^/    /'
        failed=$(( failed + 1 ))
    fi
}

make -B build/llmc/utils.o > "$out" 2>&1
[[ $(cat "$out") == "  CXX   llmc/utils.cpp" ]]
result "quiet by default: one short line per file" $?
make -B V=1 build/llmc/utils.o > "$out" 2>&1
grep -q -- "-c llmc/utils.cpp -o build/llmc/utils.o" "$out" && ! grep -q "^  CXX" "$out"
result "V=1: the whole command" $?

cpu_only=build/cpu_only/train_gpt
make -j"$(nproc)" NVCC=/nonexistent TRAIN_GPT=$cpu_only $cpu_only > "$out" 2>&1 &&
    grep -q "notice: no nvcc at /nonexistent: building a CPU-only trainer" "$out"
result "no nvcc: a CPU-only trainer, with a notice" $?
! ldd $cpu_only 2>&1 | grep -qiE "cuda|cublas|nccl" > "$out"
result "no nvcc: no CUDA library linked" $?
$cpu_only -x 2 -m 2 -g 8 --threads 1 -o "$scratch/out" > "$out" 2>&1 &&
    grep -q "built without CUDA (no nvcc at build time)); training on the CPU kernel set" "$out" &&
    grep -q "step 2/2 | loss" "$out"
result "no nvcc: trains on the CPU, saying why" $?
! $cpu_only --device cuda -x 1 -o "$scratch/out2" > "$out" 2>&1 &&
    grep -q "error: --device cuda: no usable GPU (this train_gpt was built without CUDA" "$out"
result "no nvcc: --device cuda stops with the reason" $?

# a second make after a build from nothing has nothing to do: the tools' objects are kept (before:
# make deleted them as intermediates, and compiled them again every time)
rm -f build/dev/data/prepare_text.o build/dev/data/prepare_text.d build/prepare_text   # as after a clean build
make build/prepare_text > "$out" 2>&1 && [[ -f build/dev/data/prepare_text.o ]] &&
    make -q build/prepare_text >> "$out" 2>&1
result "a built tool is up to date: its object is kept" $?

echo "check_build: $passed passed, $failed failed"
(( failed == 0 ))
