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
# allocation above 1 GiB (a size field trusted before it was checked). A finding is saved in
# build/fuzz/findings/NAME/ (reproduce: build/fuzz/fuzz_NAME FILE) and becomes a regression test.
# The last line is "fuzz: P passed, F failed" (scripts/test.sh counts it).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
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
        passed=$((passed + 1))
        echo "  $name ok: $(grep -m1 '^stat::number_of_executed_units' "$log" | sed 's/.*: *//') inputs," \
             "$(grep -o 'cov: [0-9]*' "$log" | tail -1) edges"
    else
        failed=$((failed + 1))
        echo "  $name FAILED: a finding in $findings/ (the log: $log); its report:"
        grep -E -A25 '^==[0-9]+==ERROR|runtime error|invariant broken|uncaught|deadly signal|out-of-memory|timeout' "$log" \
            | head -40 | sed 's/^/    /'
    fi
done
echo "fuzz: $passed passed, $failed failed"
(( failed == 0 ))
