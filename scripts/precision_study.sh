#!/usr/bin/env bash
# precision_study.sh — the same small GPT trained on the bundled corpus in every precision,
# then tables and loss-curve plots in docs/ from the JSONL logs.
#
#   scripts/precision_study.sh [modes|ablation|all]     (default all; ~25 minutes on 2 CPU cores)
#
# modes:    fp32 (baseline), tf32 (the GEMM operands rounded to TF32), bf16, fp16 (loss scaling),
#           fp8 delayed, fp8 current, and fp16 with
#           neither FP32 master weights nor loss scaling, 200 steps of 1024 tokens
#           → docs/precision-table.md, docs/precision-losses.png
# ablation: fp32, fp16 and fp16 without masters or loss scaling at a pretraining-like batch of
#           16k tokens per step (gradients per token 16× smaller), 40 steps
#           → docs/precision-ablation-table.md, docs/precision-ablation-losses.png
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case $what in   # before anything is installed or built (round 43: a typo ran nothing, exit 0)
    modes | ablation | all) ;;
    *) echo "precision_study.sh: '$what' is not a study: give modes, ablation or all" >&2; exit 2 ;;
esac
if [[ $# -gt 1 ]]; then
    echo "precision_study.sh: one argument (modes, ablation or all), got $#" >&2
    exit 2
fi
scripts/setup.sh --study
make -j"$(nproc)" all
scripts/prepare_kjv.sh
out=out/precision
mkdir -p "$out"
run() {   # label, flags...
    local label=$1; shift
    echo "== $label: ./train_gpt $*"
    ./train_gpt "$@" -o "$out/$label" | grep -E 'val loss' | tail -1
}
report=(/usr/bin/python3 dev/precision/report.py)

if [[ $what == modes || $what == all ]]; then
    common=(-x 200 -v 25 -g 0 --seed 1337)
    run fp32 "${common[@]}" -p fp32
    run tf32 "${common[@]}" -p tf32
    run bf16 "${common[@]}" -p bf16
    run fp16 "${common[@]}" -p fp16
    run fp8-delayed "${common[@]}" -p fp8 --fp8-recipe delayed
    run fp8-current "${common[@]}" -p fp8 --fp8-recipe current
    run fp16-naive "${common[@]}" -p fp16 --master-weights false --loss-scaling false
    "${report[@]}" docs/precision-table.md docs/precision-losses.png \
        fp32="$out/fp32/log.jsonl" tf32="$out/tf32/log.jsonl" bf16="$out/bf16/log.jsonl" \
        fp16="$out/fp16/log.jsonl" \
        "fp8 delayed=$out/fp8-delayed/log.jsonl" "fp8 current=$out/fp8-current/log.jsonl" \
        "fp16, no master, no loss scaling=$out/fp16-naive/log.jsonl"
fi
if [[ $what == ablation || $what == all ]]; then
    common=(-x 40 -b 16 -t 128 -d 16384 -v 5 -m 8 -g 0 --seed 1337 -u 5)
    run big-fp32 "${common[@]}" -p fp32
    run big-fp16 "${common[@]}" -p fp16
    run big-fp16-naive "${common[@]}" -p fp16 --master-weights false --loss-scaling false
    "${report[@]}" docs/precision-ablation-table.md docs/precision-ablation-losses.png \
        fp32="$out/big-fp32/log.jsonl" "fp16 (masters, loss scaling)=$out/big-fp16/log.jsonl" \
        "fp16, no master, no loss scaling=$out/big-fp16-naive/log.jsonl"
fi
