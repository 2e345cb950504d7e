#!/usr/bin/env bash
# check_fingerprint.sh — the trainer computes what its reference commit computes, bit for bit: a
# refactor changes nothing (issue 22's rule for code that no GPU can re-validate, on the CPU).
#
#   scripts/check_fingerprint.sh      (after make: ./train_gpt and build/prepare_text)
#
# The reference is the last commit that changed tests/data/fingerprint_reference.txt (a commit that
# changes behaviour on purpose adds a line there, and becomes the reference). Its tree is built
# here, in a scratch directory, the way this one is (the same machine, compiler and flags: a
# fingerprint depends on -march=native and the OpenBLAS kernels), and scripts/fingerprint.sh (this
# tree's) runs on both under OPENBLAS_CORETYPE=Haswell; the outputs must be identical. About two
# minutes (the reference's build, then two fingerprints of 25 s).
# Prints "check_fingerprint: P passed, F failed, S skipped" last (one check; skipped where this
# tree is the reference, with nothing changed since, or the reference cannot be built here).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
record=tests/data/fingerprint_reference.txt
say() { echo "check_fingerprint: $*"; }
finish() { say "$1 passed, $2 failed, $3 skipped"; exit $(( $2 > 0 )); }
[[ -x ./train_gpt && -x build/prepare_text ]] || { say "build first (make)"; finish 0 1 0; }
reference=$(git log -1 --format=%H -- "$record" 2>/dev/null)
[[ -n $reference ]] || { say "no commit has $record (a clone without history?)"; finish 0 1 0; }
if [[ $(git rev-parse HEAD) == "$reference" ]] && git diff --quiet HEAD -- . ':!docs' ':!*.md'; then
    say "SKIPPED: this tree is the reference ($reference): nothing to compare"
    finish 0 0 1
fi
scripts/prepare_kjv.sh >/dev/null || { say "scripts/prepare_kjv.sh failed"; finish 0 1 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/reference"
git archive "$reference" | tar -x -C "$work/reference"
ln -s "$repo/data" "$work/reference/data"   # the same corpus
cp scripts/fingerprint.sh "$work/reference/scripts/fingerprint.sh"   # one script's output format for both
start=$SECONDS
if ! (cd "$work/reference" && make -j"$(nproc)" train_gpt build/prepare_text) > "$work/build.log" 2>&1; then
    say "SKIPPED: the reference ${reference:0:12} does not build here:"
    tail -5 "$work/build.log" | sed 's/^/    /'
    finish 0 0 1
fi
export OPENBLAS_CORETYPE=Haswell
(cd "$work/reference" && scripts/fingerprint.sh) > "$work/reference.txt" 2> "$work/reference.err" ||
    { say "FAIL: the reference's fingerprint failed"; tail -5 "$work/reference.err"; finish 0 1 0; }
scripts/fingerprint.sh > "$work/here.txt" 2> "$work/here.err" ||
    { say "FAIL: this tree's fingerprint failed"; tail -5 "$work/here.err"; finish 0 1 0; }
if diff -q "$work/reference.txt" "$work/here.txt" > /dev/null; then
    say "ok: $(wc -l < "$work/here.txt") facts identical to the reference ${reference:0:12} ($(( SECONDS - start )) s)"
    finish 1 0 0
fi
say "FAIL: the trainer computes something else than the reference ${reference:0:12} (first differences below;"
say "      a change on purpose adds a line to $record)"
diff "$work/reference.txt" "$work/here.txt" | head -20 | sed 's/^/    /'
finish 0 1 0
