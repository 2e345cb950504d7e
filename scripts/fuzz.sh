#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp; `make fuzzers`: clang with ASan
# and UBSan, in build/fuzz/) and run each for a fixed time, starting from its committed seed
# corpus tests/fuzz/corpus/NAME/ (what a run adds is kept in build/fuzz/corpus/NAME/).
#
#   scripts/fuzz.sh                 every harness, 20 s each (as many at once as there are cores)
#   scripts/fuzz.sh 300 manifest    one harness, 5 minutes
#
# A harness passes when it runs its time with no finding: no sanitizer report, crash, uncaught
# exception (the loaders may only throw train_gpt::Error), input slower than 10 s, or single
# allocation above 1 GiB (a size field trusted before it was checked); and when it ran enough
# inputs: at least FUZZ_MIN_EXEC_PER_S (50) per second of its time, 1000 in scripts/test.sh's
# 20 s (libFuzzer's stat::number_of_executed_units). Under ASan, two harnesses side by side on
# two cores, the slowest (state: 26 KB state files) ran 260 inputs a second over 20 s, the others
# 2,700 to 28,000; a harness that averages 20 ms an input or more is broken (a vocabulary loaded
# per input, a hang until -timeout, a start-up that eats the run) and has fuzzed little beyond
# its seeds, so it fails with its count. A finding is saved in build/fuzz/findings/NAME/ (reproduce:
# build/fuzz/fuzz_NAME FILE) and becomes a regression test.
# The last line is "fuzz: P passed, F failed" (scripts/test.sh counts it).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
min_per_s=${FUZZ_MIN_EXEC_PER_S:-50}
min_units=$(( min_per_s * seconds ))
names=("$@")
if (( ${#names[@]} == 0 )); then
    for src in tests/fuzz/fuzz_*.cpp; do
        name=$(basename "$src" .cpp)
        names+=("${name#fuzz_}")
    done
fi

make -j"$(nproc)" fuzzers

# fuzz_bpe_encode encodes with GPT-2's own vocabulary, beside the repository as for the tests.
export TRAIN_GPT_FUZZ_GPT2_DIR=${TRAIN_GPT_FUZZ_GPT2_DIR:-$(cd .. && pwd)/shared/data/gpt2}
export UBSAN_OPTIONS=print_stacktrace=1

# one harness: its log in build/fuzz/NAME.log, its exit status the verdict
run_one() {
    local name=$1 work=build/fuzz/corpus/$1 findings=build/fuzz/findings/$1
    mkdir -p "$work" "$findings"
    build/fuzz/fuzz_"$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$findings/" "$work" "tests/fuzz/corpus/$name" > "build/fuzz/$name.log" 2>&1
}

# the harnesses run side by side, one per core (each is single-threaded)
jobs=$(nproc)
declare -A pid_of
for name in "${names[@]}"; do
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
    echo "fuzz: $name for ${seconds}s"
    run_one "$name" &
    pid_of[$name]=$!
done

passed=0 failed=0
for name in "${names[@]}"; do
    log=build/fuzz/$name.log findings=build/fuzz/findings/$name
    if wait "${pid_of[$name]}"; then
        units=$(grep -m1 '^stat::number_of_executed_units' "$log" | sed 's/.*: *//')
        if [[ ! $units =~ ^[0-9]+$ ]]; then
            failed=$((failed + 1))
            echo "  $name FAILED: its log ($log) has no stat::number_of_executed_units: how many inputs ran is unknown"
        elif (( units < min_units )); then
            failed=$((failed + 1))
            echo "  $name FAILED: ran $units inputs in ${seconds}s, fewer than $min_units" \
                 "(FUZZ_MIN_EXEC_PER_S=$min_per_s a second; the log: $log)"
        else
            passed=$((passed + 1))
            echo "  $name ok: $units inputs ($(( units / seconds ))/s)," \
                 "$(grep -o 'cov: [0-9]*' "$log" | tail -1) edges"
        fi
    else
        failed=$((failed + 1))
        echo "  $name FAILED: a finding in $findings/ (the log: $log); its report:"
        grep -E -A25 '^==[0-9]+==ERROR|runtime error|invariant broken|uncaught|deadly signal|out-of-memory|timeout' "$log" \
            | head -40 | sed 's/^/    /'
    fi
done
echo "fuzz: $passed passed, $failed failed"
(( failed == 0 ))
