#!/usr/bin/env bash
# run_multinode.sh — one training run across several nodes with Open MPI: one rank per GPU.
#
#   HOSTFILE=hosts.txt GPUS_PER_NODE=8 scripts/run_multinode.sh -e d48 -p bf16 --zero 1 ...
#
# hosts.txt lists one node per line as `hostname slots=GPUS_PER_NODE`. Every node needs the same
# checkout (a shared filesystem, or the same path on each) with ./train_gpt built, and the data
# and output directories on a filesystem all nodes see (checkpoints are written by every rank).
# Ranks are placed node by node; each rank uses the GPU of its local rank (rank within the node).
# A SIGTERM or SIGINT to this script (or Ctrl-C in its terminal) reaches the ranks as SIGUSR1
# (scripts/stoppable.sh): they checkpoint and exit 75, and so does the script.
# HOSTFILE is read where the script is started; the ranks start in the repository, so a relative
# path among the flags (-i, -o, ...) is the repository's, as it is for run_gpt2_124M.sh.
set -euo pipefail
: "${HOSTFILE:?set HOSTFILE to an Open MPI hostfile}"
[[ -f $HOSTFILE ]] || { echo "run_multinode.sh: HOSTFILE $HOSTFILE is not a file (from $(pwd))" >&2; exit 1; }
HOSTFILE=$(realpath "$HOSTFILE")
cd "$(dirname "$0")/.."
gpus_per_node=${GPUS_PER_NODE:-8}
# decimal, without leading zeros (bash reads 08 as octal)
[[ $gpus_per_node =~ ^[1-9][0-9]{0,3}$ ]] ||
    { echo "run_multinode.sh: GPUS_PER_NODE=$gpus_per_node: expected a number of GPUs per node, 1 to 9999" >&2; exit 1; }
nodes=$(grep -cv '^\s*\(#\|$\)' "$HOSTFILE" || true)
(( nodes > 0 )) || { echo "run_multinode.sh: HOSTFILE $HOSTFILE lists no host" >&2; exit 1; }
# Open MPI refuses to start as root (containers, cloud images) unless told it may
as_root=(); [[ $(id -u) == 0 ]] && as_root=(--allow-run-as-root)
source scripts/stoppable.sh
run_stoppable mpirun "${as_root[@]}" -np $((nodes * gpus_per_node)) --hostfile "$HOSTFILE" --map-by ppr:"$gpus_per_node":node \
    --bind-to none -x PATH -x LD_LIBRARY_PATH ./train_gpt "$@"
