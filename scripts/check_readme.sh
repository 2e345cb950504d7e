#!/usr/bin/env bash
# check_readme.sh — the README's commands, run as written (step counts shortened where a long
# run would be), in a scratch directory that links the built tools and the prepared KJV corpus,
# so that nothing in the repository is written. Every command is first looked up, verbatim, in
# README.md: a command edited there without this script failing is not possible.
#
#   scripts/check_readme.sh        (after make; prepares data/kjv if needed)
#
# Shortened: training runs get -x, -n, -m (val batches) and -g (sample tokens) on top (the later
# flag wins); as root, mpirun gets --allow-run-as-root (the README says to add it).
# Not run: scripts/test.sh (it runs this),
# the GPU check (needs a GPU), the multi-node and Slurm lines (need a cluster), the downloads
# of dev/data (need internet: their scripts are checked for syntax) and the FineWeb run (needs
# the download; its glob is checked against the names fineweb.sh writes).
# Prints "check_readme: ok NAME" or "check_readme: FAIL NAME" per command run; for the FineWeb
# run and the download scripts, which cannot run here, "check_readme: SKIPPED NAME" when their
# static check (the glob against fineweb.sh's names; bash -n) holds, FAIL when it does not; and
# last "check_readme: P passed, F failed, S skipped" (scripts/test.sh counts these): passed = the
# README commands that ran and printed what they should, skipped = the two checked, not run.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
[[ -x ./train_gpt && -x build/prepare_text ]] || { echo "check_readme: build first (make)"; echo "check_readme: 0 passed, 1 failed, 0 skipped"; exit 1; }
scripts/prepare_kjv.sh >/dev/null || { echo "check_readme: scripts/prepare_kjv.sh failed"; echo "check_readme: 0 passed, 1 failed, 0 skipped"; exit 1; }

base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
work=$base/work   # the README's "repository root"
mkdir -p "$work/data"
ln -s "$repo/train_gpt" "$work/train_gpt"
for d in build scripts dev; do ln -s "$repo/$d" "$work/$d"; done
ln -s "$repo/data/kjv" "$work/data/kjv"
ln -s "$repo/../shared" "$base/shared"   # ../shared/data/gpt2, as beside a clone
head -c 300000 "$repo/data/kjv/kjv.txt" > "$work/book.txt"
tail -c 100000 "$repo/data/kjv/kjv.txt" > "$work/more.txt"
/usr/bin/python3 -c 'import json; [print(json.dumps({"text": l})) for l in open("'"$work"'/more.txt") if l.strip()]' > "$work/docs.jsonl"
root_flag=()
(( $(id -u) == 0 )) && root_flag=(--allow-run-as-root)
export PATH="/usr/bin:$PATH"   # the python3 the setup installed transformers into

passed=0 failed=0 skipped=0
log=$base/last.log
# check NAME README_TEXT [EXPECTED_OUTPUT] -- COMMAND...: README_TEXT must be in README.md; COMMAND
# (README_TEXT, shortened where noted) must exit 0 and print EXPECTED_OUTPUT (if given).
check() {
    local name=$1 text=$2 expect=$3
    shift 4
    if ! grep -qF -- "$text" README.md; then
        echo "check_readme: FAIL $name: not in README.md: $text"
        failed=$(( failed + 1 ))
        return
    fi
    local start=$SECONDS
    if (cd "$work" && "$@") > "$log" 2>&1 && { [[ -z $expect ]] || grep -qF -- "$expect" "$log"; }; then
        echo "check_readme: ok $name ($(( SECONDS - start ))s)"
        passed=$(( passed + 1 ))
    else
        echo "check_readme: FAIL $name: $*"
        [[ -n $expect ]] && echo "    expected in the output: $expect"
        tail -15 "$log" | sed 's/^/    /'
        failed=$(( failed + 1 ))
    fi
}

# not_run NAME README_TEXT WHY -- COMMAND...: README_TEXT must be in README.md and cannot run here
# (WHY); COMMAND, a static check of it, must exit 0. Counted as skipped (the README command did
# not run), or as failed where the check fails.
not_run() {
    local name=$1 text=$2 why=$3
    shift 4
    if ! grep -qF -- "$text" README.md; then
        echo "check_readme: FAIL $name: not in README.md: $text"
        failed=$(( failed + 1 ))
    elif (cd "$work" && "$@") > "$log" 2>&1; then
        echo "check_readme: SKIPPED $name: not run, $why"
        skipped=$(( skipped + 1 ))
    else
        echo "check_readme: FAIL $name: the static check failed: $*"
        tail -15 "$log" | sed 's/^/    /'
        failed=$(( failed + 1 ))
    fi
}

check "the default run (run_default.sh, in the repository: it builds there)" "scripts/run_default.sh" "---- run summary ----" -- \
    bash -c "cd '$repo' && scripts/run_default.sh -x 4 -m 4 -g 32 -o '$base/default_out'"
# The default run's summary points to its checkpoint: the "next:" commands it printed, run as
# printed (sampling from the checkpoint with -g shortened, then training on).
mapfile -t next_cmds < <(sed -n 's/^\(next: \|    \) *\(\.\/train_gpt .*[^ ]\)   (.*$/\2/p' "$log")
if (( ${#next_cmds[@]} < 2 )); then
    echo "check_readme: FAIL the default run's next: commands: its summary printed ${#next_cmds[@]} (expected 2: sample, train on)"
    failed=$(( failed + 1 ))
fi
for cmd in "${next_cmds[@]}"; do
    start=$SECONDS
    if (cd "$repo" && eval "${cmd/-g 200/-g 16}") > "$base/next.log" 2>&1 && grep -qF -- "---- run summary ----" "$base/next.log"; then
        echo "check_readme: ok the default run's printed command: $cmd ($(( SECONDS - start ))s)"
        passed=$(( passed + 1 ))
    else
        echo "check_readme: FAIL the default run's printed command: $cmd"
        tail -15 "$base/next.log" | sed 's/^/    /'
        failed=$(( failed + 1 ))
    fi
done
check "--help" "./train_gpt --help" "--init-from" -- ./train_gpt --help
check "prepare_text, byte-level" "build/prepare_text --input book.txt --out-dir data/mine --name mine" \
    "next: ./train_gpt -i 'data/mine/mine_train_*.bin' -j 'data/mine/mine_val_*.bin' -o out/mine" -- \
    build/prepare_text --input book.txt --out-dir data/mine --name mine
check "the command prepare_text prints" "./train_gpt -i 'data/mine/mine_train_*.bin' -j 'data/mine/mine_val_*.bin' -o out/mine" \
    "(beside the training shards)" -- \
    ./train_gpt -i 'data/mine/mine_train_*.bin' -j 'data/mine/mine_val_*.bin' -o out/mine -x 4 -m 4 -g 32
not_run "the FineWeb run" "-i 'data/fineweb/fw_train_*.bin' -j 'data/fineweb/fw_val_*.bin'" \
    "it needs dev/data/fineweb.sh's download (checked: its globs are the names fineweb.sh writes)" -- \
    bash -c 'grep -q -- "--name fw" dev/data/fineweb.sh && grep -q "OUT=\${OUT:-data/fineweb}" dev/data/fineweb.sh &&
             grep -qF "data/fineweb/fw_train_*.bin" scripts/run_gpt2_124M.sh'
check "mpirun, 4 ranks, ZeRO-1, checkpoints" "mpirun --oversubscribe -np 4 ./train_gpt -b 2 --zero 1 -n 50 -o out/mpi" \
    "checkpoint: out/mpi/checkpoints/step_00000004" -- \
    mpirun "${root_flag[@]}" --oversubscribe -np 4 ./train_gpt -b 2 --zero 1 -n 50 -o out/mpi -x 4 -n 2 -m 4 -g 8
check "mpirun, resume on 2 ranks" "mpirun --oversubscribe -np 2 ./train_gpt --resume -o out/mpi -b 4 -x 150" \
    "--batch-size 4 (the checkpoint's run: 2)" -- \
    mpirun "${root_flag[@]}" --oversubscribe -np 2 ./train_gpt --resume -o out/mpi -b 4 -x 150 -x 6
check "sample a checkpoint" "./train_gpt --init-from out/mpi/checkpoints -x 0 -g 64 --sample-prompt 'And God said' --top-k 50" \
    "---- sample (64 tokens, step 0) ----" -- \
    ./train_gpt --init-from out/mpi/checkpoints -x 0 -g 64 --sample-prompt 'And God said' --top-k 50
check "evaluate a checkpoint" "./train_gpt --init-from out/mpi/checkpoints -x 0 -g 0 -j 'data/kjv/kjv_val_*.bin'" \
    "step 0/0 | val loss" -- ./train_gpt --init-from out/mpi/checkpoints -x 0 -g 0 -j 'data/kjv/kjv_val_*.bin'
check "plot the log" "scripts/plot_run.py out/mpi/log.jsonl" "plot_run: out/mpi/log.png" -- scripts/plot_run.py out/mpi/log.jsonl
pipeline="python3 -c \"import glob; from transformers import pipeline; step = sorted(p for p in glob.glob('out/mpi/checkpoints/step_*') if p.rsplit('_', 1)[1].isdigit())[-1]; print(pipeline('text-generation', step)('And God said', max_new_tokens=20)[0]['generated_text'])\""
check "transformers' pipeline on a step directory" "$pipeline" "And God said" -- bash -c "$pipeline"
check "prepare_text, a BPE" "build/prepare_text --input book.txt --out-dir data/bpe --tokenizer bpe --vocab-size 4096" \
    "BPE, vocab 4096" -- build/prepare_text --input book.txt --out-dir data/bpe --tokenizer bpe --vocab-size 4096
check "prepare_text, reusing it" "build/prepare_text --input more.txt --out-dir data/more --tokenizer bpe --bpe-dir data/bpe" \
    "BPE, vocab 4096" -- build/prepare_text --input more.txt --out-dir data/more --tokenizer bpe --bpe-dir data/bpe
check "prepare_text, GPT-2's vocabulary" \
    "build/prepare_text --input docs.jsonl --out-dir data/g --tokenizer gpt2 --bpe-dir ../shared/data/gpt2" \
    "BPE, vocab 50257" -- build/prepare_text --input docs.jsonl --out-dir data/g --tokenizer gpt2 --bpe-dir ../shared/data/gpt2
not_run "the download scripts (dev/data/*.sh)" "dev/data/hellaswag.sh" "they need the internet (checked: bash -n parses them)" -- \
    bash -c 'for f in dev/data/hellaswag.sh dev/data/fineweb.sh dev/data/tinystories.sh; do bash -n "$f" || exit 1; done'

echo "check_readme: $passed passed, $failed failed, $skipped skipped"
(( failed == 0 ))
