#!/usr/bin/env bash
# check_spills.sh — no CUDA kernel may spill registers to local memory.
#
#   scripts/check_spills.sh            every CUDA source: train_gpt.cu, llmc/**/*.cu, tests/cuda/*.cu, dev/cuda/*.cu
#   scripts/check_spills.sh FILE.cu…   just those
#
# Compiles each source's device code for sm_90a (nvcc --cubin: no host compilation, nothing is
# linked or kept) with `-Xptxas -v`, and reads ptxas's report of every function it compiled:
#     ptxas info    : Function properties for _Z…attention_forward_kernel…
#         0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
# A spill store or load in any function (a kernel, or a device function the compiler did not
# inline) fails the check, listing the function (demangled), its file and the byte counts.
# A stack frame without spills (a local array indexed at run time) is listed as a note.
# No GPU is needed. Prints, last, "check_spills: P passed, F failed": one check per function,
# plus one failure per source that does not compile; scripts/test.sh counts these.
#
# Environment: NVCC, CUDA_HOME, GENCODE (default sm_90a), NVCC_SPILL_FLAGS (extra flags),
# JOBS (parallel compilations, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc 2>/dev/null || echo "$CUDA_HOME/bin/nvcc")}
GENCODE=${GENCODE:--gencode=arch=compute_90a,code=sm_90a}
JOBS=${JOBS:-$(nproc)}
[[ -x $NVCC ]] || { echo "check_spills: nvcc not found (PATH or \$CUDA_HOME/bin)"; echo "check_spills: 0 passed, 1 failed"; exit 1; }

if (( $# > 0 )); then
    sources=("$@")
else
    mapfile -t sources < <( { ls train_gpt.cu 2>/dev/null; find llmc tests/cuda dev/cuda -name '*.cu' 2>/dev/null; } | sort -u)
fi
if (( ${#sources[@]} == 0 )); then
    echo "check_spills: no CUDA sources"
    echo "check_spills: 0 passed, 0 failed"
    exit 0
fi

# The project's include paths (Makefile CPPFLAGS) and MPI's, for sources that include <mpi.h>.
flags=(-std=c++17 -O3 $GENCODE --cubin -Xptxas -v -I. -Illmc -I"$CUDA_HOME/include"
       -I/usr/include/x86_64-linux-gnu/openblas-pthread $(mpicxx --showme:compile 2>/dev/null || true)
       ${NVCC_SPILL_FLAGS:-})

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# compile SOURCE: ptxas's report to $tmp/<n>.log, the exit status to $tmp/<n>.rc
compile_one() {
    local i=$1 src=$2
    local rc=0
    "$NVCC" "${flags[@]}" "$src" -o "$tmp/$i.cubin" > "$tmp/$i.log" 2>&1 || rc=$?
    echo "$rc" > "$tmp/$i.rc"
}
running=0
for i in "${!sources[@]}"; do
    compile_one "$i" "${sources[$i]}" &
    running=$(( running + 1 ))
    if (( running >= JOBS )); then wait -n || true; running=$(( running - 1 )); fi
done
wait

demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }

passed=0 failed=0
for i in "${!sources[@]}"; do
    src=${sources[$i]} log=$tmp/$i.log
    if [[ $(cat "$tmp/$i.rc") != 0 ]]; then
        echo "check_spills: FAIL $src does not compile:"
        sed 's/^/    /' "$log" | grep -v '^    ptxas info' | head -20
        failed=$(( failed + 1 ))
        continue
    fi
    # pairs "function<TAB>stack<TAB>stores<TAB>loads"
    awk '
        /Function properties for / { fn = $NF; next }
        /bytes stack frame/ && fn != "" {
            stack = $1; stores = $5; loads = $9
            printf "%s\t%s\t%s\t%s\n", fn, stack, stores, loads
            fn = ""
        }' "$log" > "$tmp/$i.tsv"
    while IFS=$'\t' read -r fn stack stores loads; do
        name=$(printf '%s\n' "$fn" | demangle)
        if (( stores > 0 || loads > 0 )); then
            echo "check_spills: FAIL $src: $name: $stores bytes spill stores, $loads bytes spill loads ($stack bytes stack frame)"
            failed=$(( failed + 1 ))
        else
            if (( stack > 0 )); then echo "check_spills: note $src: $name: $stack bytes stack frame, no spills"; fi
            passed=$(( passed + 1 ))
        fi
    done < "$tmp/$i.tsv"
    echo "check_spills: $src: $(wc -l < "$tmp/$i.tsv") function(s)"
done

echo "check_spills: ${#sources[@]} source(s), sm_90a"
echo "check_spills: $passed passed, $failed failed"
(( failed == 0 ))
