#!/usr/bin/env bash
# bench_cpu.sh — fp32 CPU training throughput of train_gpt vs the PyTorch reference.
#
#   make && scripts/bench_cpu.sh
#
# Trains the same small GPT-2 on the same KJV byte-level shards, first with the
# engine's CPU backend, then with dev/reference/gpt2.py (eager PyTorch), both in
# fp32 with the same number of threads, one after the other. Each side logs
# tokens/s per step; the figure is the mean over steps >= FIRST_TIMED_STEP
# (warm-up excluded). Prints a markdown table with the ratio.
#
# Overrides (environment): DEPTH (4), N_EMBD (64*DEPTH), N_HEAD (DEPTH), B (8),
# T (128), STEPS (30), THREADS (2), VOCAB (read from data/kjv/tokenizer.bin), FIRST_TIMED_STEP (3),
# PYTHON (/usr/bin/python3: needs torch).
set -euo pipefail
cd "$(dirname "$0")/.."

DEPTH=${DEPTH:-4}
N_EMBD=${N_EMBD:-$((64 * DEPTH))}
N_HEAD=${N_HEAD:-$DEPTH}
B=${B:-8}
T=${T:-128}
STEPS=${STEPS:-30}
THREADS=${THREADS:-2}
# the vocabulary size is header word 2 of llm.c's tokenizer.bin
VOCAB=${VOCAB:-$(od -An -t u4 -j 8 -N 4 data/kjv/tokenizer.bin 2>/dev/null | tr -d ' ')}
FIRST_TIMED_STEP=${FIRST_TIMED_STEP:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
TRAIN_GLOB='data/kjv/kjv_train_*.bin'
VAL_GLOB='data/kjv/kjv_val_*.bin'
TOKENIZER=data/kjv/tokenizer.bin

die() { echo "bench_cpu: error: $*" >&2; exit 1; }

# --- prerequisites ------------------------------------------------------------
[[ -x ./train_gpt ]] || die "./train_gpt not found or not executable; build it with 'make'"
compgen -G "$TRAIN_GLOB" > /dev/null || die "no training shards match $TRAIN_GLOB; prepare the KJV data first"
"$PYTHON" -c 'import torch' 2> /dev/null || die "$PYTHON cannot import torch (Debian: apt install python3-torch, or set PYTHON)"
(( STEPS >= FIRST_TIMED_STEP )) || die "STEPS=$STEPS leaves no timed steps (timing starts at step $FIRST_TIMED_STEP)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

config="d$DEPTH (L=$DEPTH, C=$N_EMBD, NH=$N_HEAD), V=$VOCAB, B=$B, T=$T"
echo "bench_cpu: $config, $STEPS steps, fp32, $THREADS threads" >&2

# --- the engine ---------------------------------------------------------------
engine_args=(-i "$TRAIN_GLOB" -e "d$DEPTH" -b "$B" -t "$T" -d $((B * T)) -x "$STEPS" -v 0 -g 0 -o "$tmp/engine")
if compgen -G "$VAL_GLOB" > /dev/null; then engine_args+=(-j "$VAL_GLOB"); fi
if [[ -f $TOKENIZER ]]; then engine_args+=(--tokenizer "$TOKENIZER"); fi
echo "bench_cpu: running ./train_gpt ${engine_args[*]}" >&2
if ! OMP_NUM_THREADS=$THREADS ./train_gpt "${engine_args[@]}" > "$tmp/engine.out" 2>&1; then
    tail -n 20 "$tmp/engine.out" >&2
    die "train_gpt failed (output above)"
fi
[[ -s $tmp/engine/log.jsonl ]] || die "train_gpt wrote no $tmp/engine/log.jsonl"

# --- the PyTorch reference ----------------------------------------------------
torch_args=(--train-data "$TRAIN_GLOB" --n-layer "$DEPTH" --n-embd "$N_EMBD" --n-head "$N_HEAD"
            --vocab-size "$VOCAB" --seq-len "$T" --batch-size "$B" --steps "$STEPS" --lr 1e-3 --warmup-steps 5
            --weight-decay 0.1 --grad-clip 1.0 --seed 0 --threads "$THREADS" --device cpu --dtype fp32
            --log "$tmp/torch.jsonl")
echo "bench_cpu: running dev/reference/gpt2.py ${torch_args[*]}" >&2
if ! OMP_NUM_THREADS=$THREADS "$PYTHON" dev/reference/gpt2.py "${torch_args[@]}" > "$tmp/torch.out" 2>&1; then
    tail -n 20 "$tmp/torch.out" >&2
    die "dev/reference/gpt2.py failed (output above)"
fi

# --- the table ----------------------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo 2> /dev/null | sed 's/.*: //' || true)
"$PYTHON" - "$tmp/engine/log.jsonl" "$tmp/torch.jsonl" "$FIRST_TIMED_STEP" "$config" "$THREADS" "${cpu:-unknown CPU}" <<'EOF'
import json, sys
import torch

engine_log, torch_log, first, config, threads, cpu = sys.argv[1:]
first = int(first)

def mean_tok_per_s(path):
    """Mean tok_per_s over step records with step >= first."""
    values = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            if rec.get("type") == "step" and rec["step"] >= first:
                values.append(float(rec["tok_per_s"]))
    if not values:
        sys.exit(f"bench_cpu: error: {path} has no step records with step >= {first}")
    return sum(values) / len(values), len(values)

eng, n_eng = mean_tok_per_s(engine_log)
ref, n_ref = mean_tok_per_s(torch_log)
print()
print(f"CPU training throughput, fp32, {threads} threads ({cpu}; PyTorch {torch.__version__} eager; "
      f"mean over steps >= {first}: {n_eng} engine / {n_ref} PyTorch steps)")
print()
print("| config | train_gpt tok/s | PyTorch tok/s | ratio |")
print("|---|---:|---:|---:|")
print(f"| {config} | {eng:.0f} | {ref:.0f} | {eng / ref:.2f}× |")
EOF
