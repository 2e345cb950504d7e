#!/usr/bin/env bash
# run_gpt2_124M.sh — GPT-2 small (124M, -e d12) on one node: one rank per GPU.
#
#   scripts/run_gpt2_124M.sh [NUM_GPUS] [extra train_gpt flags...]
#
# Data: GPT-2-tokenised FineWeb shards (dev/data/fineweb.sh prepares them into data/fineweb/).
# 0.5M tokens per step (B=64 × T=1024 × ranks × accumulation), 10B tokens ≈ 19k steps, bf16,
# ZeRO-1, a checkpoint every 1000 steps. After a crash or a SIGUSR1 / SIGTERM stop (exit 75, a
# checkpoint written): the same command with --resume (a fresh run into out/gpt2_124M is refused).
# A SIGTERM or SIGINT to this script (or Ctrl-C in its terminal) reaches the ranks as SIGUSR1
# (scripts/stoppable.sh): they checkpoint and exit 75, and so does the script. The ranks start in
# the repository: a relative path among the extra flags (-o, -i, ...) is the repository's.
set -euo pipefail
cd "$(dirname "$0")/.."
# NUM_GPUS is the first argument where it is a number; otherwise 8, and every argument is a flag
# (the restart "scripts/run_gpt2_124M.sh --resume" of a start without NUM_GPUS)
gpus=8
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
    # decimal, without leading zeros (bash reads 08 as octal)
    [[ $1 =~ ^[1-9][0-9]{0,3}$ ]] || { echo "run_gpt2_124M.sh: NUM_GPUS=$1: expected 1 to 9999" >&2; exit 1; }
    gpus=$1; shift
fi
make -j"$(nproc)" all
# Open MPI refuses to start as root (containers, cloud images) unless told it may
as_root=(); [[ $(id -u) == 0 ]] && as_root=(--allow-run-as-root)
source scripts/stoppable.sh
run_stoppable mpirun "${as_root[@]}" -np "$gpus" --bind-to none ./train_gpt \
    -e d12 -p bf16 --zero 1 \
    -i 'data/fineweb/fw_train_*.bin' -j 'data/fineweb/fw_val_*.bin' \
    --tokenizer data/fineweb/tokenizer.bin \
    -b 64 -t 1024 -d 524288 -l 6e-4 -u 700 -x 19073 --final-lr-frac 0.0 -c 0.1 \
    -v 250 -m 20 -g 144 --checkpoint-every 1000 -o out/gpt2_124M "$@"
