#!/usr/bin/env bash
# precision_study.sh — the same small GPT trained on the bundled corpus in every precision,
# then docs/precision-table.md and docs/precision-losses.png from the JSONL logs.
#
#   scripts/precision_study.sh            (about 10 minutes on 2 CPU cores)
#
# Runs: fp32 (baseline), bf16, fp16 (loss scaling), fp8 delayed, fp8 current, and the ablation
# fp16 with neither FP32 master weights nor loss scaling. Extra arguments go to every run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --study
make -j"$(nproc)" all
scripts/prepare_kjv.sh
out=out/precision
mkdir -p "$out"
common=(-x "${STEPS:-200}" -v 25 -g 0 --seed 1337 "$@")
run() {   # label, flags...
    local label=$1; shift
    echo "== $label: ./train_gpt ${common[*]} $*"
    ./train_gpt "${common[@]}" "$@" -o "$out/$label" | grep -E 'val loss' | tail -1
}
run fp32 -p fp32
run bf16 -p bf16
run fp16 -p fp16
run fp8-delayed -p fp8 --fp8-recipe delayed
run fp8-current -p fp8 --fp8-recipe current
run fp16-naive -p fp16 --master-weights false --loss-scaling false
/usr/bin/python3 dev/precision/report.py docs/precision-table.md docs/precision-losses.png \
    fp32="$out/fp32/log.jsonl" bf16="$out/bf16/log.jsonl" fp16="$out/fp16/log.jsonl" \
    "fp8 delayed=$out/fp8-delayed/log.jsonl" "fp8 current=$out/fp8-current/log.jsonl" \
    "fp16, no master, no loss scaling=$out/fp16-naive/log.jsonl"
