#!/usr/bin/env bash
# check_ptx.sh — the default CUDA path still compiles to the PTX recorded in
# tests/data/default_path_ptx.txt, names aside.
#
#   scripts/check_ptx.sh                       the check
#   scripts/check_ptx.sh --diff-against COMMIT the check, diffs of a changed function against COMMIT
#   scripts/check_ptx.sh --record              rewrite the record from this tree (tags kept)
#   scripts/check_ptx.sh --dump DIR            also write every normalised function body into DIR
#
# Compiles the trainer's CUDA translation units (train_gpt.cu, llmc/**/*.cu) to PTX for
# compute_90a with the Makefile's flags (-O3; the Makefile has no -lineinfo or -G, and .loc / .file
# lines are dropped anyway), splits the PTX into its functions (.entry kernels, .func device
# functions) and hashes each one's body with names aside (scripts/ptx_functions.py normalises:
# the function's own name, its parameters' and every mangled identifier become numbered
# placeholders; comments, labels' module numbering and linkage go). Every function tagged
# "default" in the record (what ./train_gpt runs with default flags; the record's header says how
# the tags were chosen) must still be compiled from somewhere: matching is by hash, so a kernel
# renamed or moved to another file or namespace passes. A default function whose hash is gone
# fails, with a unified diff of its normalised body against the same-named function now, the old
# one rebuilt from the commit that last changed the record (or --diff-against COMMIT). "other"
# functions that changed or went, and functions new to the record, are notes.
#
# Not covered: cuBLASLt's GEMMs (matmul, the attention's batched GEMMs) are library code, not in
# this PTX; the host code that configures them (cuda/matmul.cuh) is covered by reading and by
# gpu_check's default group. Which kernel an op launches, and with which grid, block and dynamic
# shared memory, is host code too; __launch_bounds__ is in the PTX (.maxntid) and so is checked.
#
# The hashes depend on the nvcc that made them (the record names it): under another nvcc the
# reference is the record's commit rebuilt here (tags from the record), which needs that commit.
# No GPU is needed. Prints, last, "check_ptx: P passed, F failed": one check per default function
# in the record, plus one failure per source that does not compile (or no nvcc); scripts/test.sh
# counts these.
#
# Environment: NVCC, CUDA_HOME, PTX_ARCH (default compute_90a), NVCC_PTX_FLAGS (extra flags),
# JOBS (parallel compilations, default nproc), PTX_RECORD (the record), PTX_DIFF_LINES (most diff
# lines per function, default 400).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc 2>/dev/null || echo "$CUDA_HOME/bin/nvcc")}
PTX_ARCH=${PTX_ARCH:-compute_90a}
JOBS=${JOBS:-$(nproc)}
RECORD=${PTX_RECORD:-tests/data/default_path_ptx.txt}
py=(python3 "$repo/scripts/ptx_functions.py")

mode=check diff_against="" dump_dir=""
while (( $# > 0 )); do
    case $1 in
        --record) mode=record ;;
        --diff-against) diff_against=${2:?--diff-against needs a commit}; shift ;;
        --dump) dump_dir=${2:?--dump needs a directory}; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "check_ptx: unknown argument $1 (--record, --diff-against COMMIT, --dump DIR)"
           echo "check_ptx: 0 passed, 1 failed"; exit 1 ;;
    esac
    shift
done
[[ -x $NVCC ]] || { echo "check_ptx: nvcc not found (PATH or \$CUDA_HOME/bin)"; echo "check_ptx: 0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "check_ptx: python3 not found"; echo "check_ptx: 0 passed, 1 failed"; exit 1; }
nvcc_version=$("$NVCC" --version | sed -n 's/.*\(release [0-9.]*, V[0-9.]*\).*/\1/p')

# The Makefile's CPPFLAGS and NVCCFLAGS (its GENCODE's virtual architecture; no -MMD: no .d files).
# shellcheck disable=SC2054,SC2206  # -fopenmp,-Wall is one argument; NVCC_PTX_FLAGS a list of flags
flags=(-std=c++17 -O3 -arch="$PTX_ARCH" --ptx -I. -Illmc -I"$CUDA_HOME/include"
       -I/usr/include/x86_64-linux-gnu/openblas-pthread -Xcompiler -fopenmp,-Wall ${NVCC_PTX_FLAGS:-})

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# compile_tree ROOT OUT: ROOT's train_gpt.cu and llmc/**/*.cu to OUT/<n>.ptx, in parallel, then
# OUT/index.json (scripts/ptx_functions.py index). Prints each source that does not compile and
# returns how many.
compile_tree() {
    local root=$1 out=$2 i running=0 bad=0 specs=() srcs=()
    mkdir -p "$out"
    mapfile -t srcs < <(cd "$root" && { ls train_gpt.cu 2>/dev/null; find llmc -name '*.cu' 2>/dev/null; } | sort -u)
    for i in "${!srcs[@]}"; do
        ( cd "$root" && rc=0 && "$NVCC" "${flags[@]}" "${srcs[$i]}" -o "$out/$i.ptx" > "$out/$i.log" 2>&1 || rc=$?
          echo "$rc" > "$out/$i.rc" ) &
        running=$(( running + 1 ))
        if (( running >= JOBS )); then wait -n || true; running=$(( running - 1 )); fi
    done
    wait
    for i in "${!srcs[@]}"; do
        if [[ $(cat "$out/$i.rc") != 0 ]]; then
            echo "check_ptx: FAIL ${srcs[$i]} does not compile ($root):"
            sed 's/^/    /' "$out/$i.log" | head -20
            bad=$(( bad + 1 ))
        else
            specs+=("${srcs[$i]}=$out/$i.ptx")
        fi
    done
    echo "${#srcs[@]}" > "$out/count"
    if (( bad == 0 )) && ! "${py[@]}" index "$out/index.json" "${specs[@]}"; then
        echo "check_ptx: FAIL scripts/ptx_functions.py could not read the PTX of $root"
        bad=1
    fi
    return "$bad"
}

t0=$SECONDS
bad=0
compile_tree "$repo" "$tmp/cur" || bad=$?
if (( bad > 0 )); then
    echo "check_ptx: not compared"
    echo "check_ptx: 0 passed, $bad failed"
    exit 1
fi
[[ -n $dump_dir ]] && "${py[@]}" dump "$tmp/cur/index.json" "$dump_dir" && echo "check_ptx: normalised bodies in $dump_dir"

if [[ $mode == record ]]; then
    commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo "?")
    if [[ -n $(git status --porcelain -- train_gpt.cu llmc 2>/dev/null) ]]; then
        commit+=" plus uncommitted changes to train_gpt.cu / llmc (commit them with this file)"
    fi
    mkdir -p "$(dirname "$RECORD")"
    "${py[@]}" record "$RECORD" "$tmp/cur/index.json" --nvcc "$nvcc_version" --commit "$commit"
    echo "check_ptx: $(cat "$tmp/cur/count") source(s), $PTX_ARCH, $nvcc_version, $(( SECONDS - t0 )) s"
    exit 0
fi

if [[ ! -f $RECORD ]]; then
    echo "check_ptx: FAIL no record $RECORD (make it: scripts/check_ptx.sh --record)"
    echo "check_ptx: 0 passed, 1 failed"
    exit 1
fi

# The baseline for diffs (and the reference under another nvcc): --diff-against, else the commit
# that last changed the record, when the record is committed as it is.
baseline="" baseline_name=""
if [[ -n $diff_against ]]; then
    baseline=$(git rev-parse --verify "$diff_against^{commit}" 2>/dev/null) ||
        { echo "check_ptx: FAIL --diff-against $diff_against: no such commit"; echo "check_ptx: 0 passed, 1 failed"; exit 1; }
    baseline_name="commit $(git rev-parse --short=12 "$baseline")"
elif git ls-files --error-unmatch "$RECORD" >/dev/null 2>&1 && git diff --quiet HEAD -- "$RECORD" 2>/dev/null; then
    baseline=$(git log -1 --format=%H -- "$RECORD")
    baseline_name="the record's commit $(git rev-parse --short=12 "$baseline")"
fi
build_baseline() {
    [[ -n $baseline ]] || return 1
    [[ -f $tmp/base/index.json ]] && return 0
    mkdir -p "$tmp/base_tree"
    git archive "$baseline" | tar -x -C "$tmp/base_tree" || return 1
    echo "check_ptx: rebuilding $baseline_name: $1"
    compile_tree "$tmp/base_tree" "$tmp/base" > "$tmp/base.log" 2>&1 || { cat "$tmp/base.log"; return 1; }
}

check_args=()
no_baseline="no commit to rebuild (the record is not committed as it is; --diff-against COMMIT names one)"
recorded_nvcc=$(sed -n 's/^# nvcc: //p' "$RECORD")
if [[ $recorded_nvcc != "$nvcc_version" ]]; then
    echo "check_ptx: note: the record's hashes are nvcc $recorded_nvcc's, this is nvcc $nvcc_version: the reference is the record's commit rebuilt here"
    if ! build_baseline "the reference under this nvcc"; then
        echo "check_ptx: FAIL ${baseline_name:-$no_baseline}${baseline_name:+ cannot be rebuilt}: nothing to compare with; record again with this nvcc (scripts/check_ptx.sh --record on the record's commit)"
        echo "check_ptx: 0 passed, 1 failed"
        exit 1
    fi
    check_args+=(--reference "$tmp/base/index.json")
fi
[[ -n $diff_against ]] && { build_baseline "the diffs" || echo "check_ptx: note: $baseline_name does not build: no diffs"; }

run_check() {
    "${py[@]}" check "$RECORD" "$tmp/cur/index.json" "${check_args[@]}" --counts "$tmp/counts" \
        --diff-lines "${PTX_DIFF_LINES:-400}" "$@"
}
run_check > "$tmp/check.out"
read -r passed failed < "$tmp/counts"
if (( failed > 0 )) && [[ ! -f $tmp/base/index.json ]]; then
    build_baseline "the diffs" || echo "check_ptx: note: no diffs: ${baseline_name:-$no_baseline}${baseline_name:+ cannot be rebuilt}"
fi
if [[ -f $tmp/base/index.json ]]; then
    run_check --baseline "$tmp/base/index.json" --baseline-name "$baseline_name" > "$tmp/check.out"
    read -r passed failed < "$tmp/counts"
fi
cat "$tmp/check.out"
echo "check_ptx: $(cat "$tmp/cur/count") source(s), $PTX_ARCH, $nvcc_version, $(( SECONDS - t0 )) s"
echo "check_ptx: $passed passed, $failed failed"
(( failed == 0 ))
