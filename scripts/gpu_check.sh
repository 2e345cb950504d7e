#!/usr/bin/env bash
# gpu_check.sh — the one command a session with a GPU runs (DESIGN §7): on an H200 lent for a
# few minutes, it checks the CUDA kernel set against the CPU twin and measures it against PyTorch,
# in under 8 minutes, and prints a short summary last.
#
#   scripts/gpu_check.sh --prepare   on the CPU machine (no GPU needed): build everything for
#                                    sm_90a and pack the binaries, with the shared libraries a
#                                    bare GPU image may lack, into build/gpu_check/bundle.tar.gz
#   scripts/gpu_check.sh             on the GPU machine: the check below
#
# With the device tool: run --prepare here, then run `scripts/gpu_check.sh` there with
# carry ["build/gpu_check"] and timeout_s 600. Without a bundle (or with a stale one: its
# source hash is compared with the tree's) the check builds with `make -j` on the GPU machine,
# which needs the project's build dependencies there and several of the 8 minutes.
#
# Steps, each with its own time limit inside a total budget (GPU_CHECK_BUDGET, 450 s):
#   1. binaries: the prepared bundle if it matches the sources, else make -j (sm_90a);
#   2. CPU side first: synthetic token shards (a Zipfian mix of fixed random "phrases" over
#      GPT-2's 50257 tokens: learnable, no download), and the CPU twin's short training runs,
#      started in the background while the GPU works;
#   3. build/test_cuda: every CUDA kernel and a whole training step per precision against the
#      CPU twin (a skipped test fails the check here: there is a GPU); then the tests of the lab's
#      wmma attention (dev/cuda/attention_wmma.cuh) in a process of their own;
#   4. tracking: 20 steps of d2 (C=128, B=8, T=256, lr 3e-3) in bf16 and fp8 on the CUDA kernel
#      set must track the CPU twin's losses (same seed, config, data): every step within
#      TRACK_TOL (1e-2 relative; fp8 2e-2), the first within 2^-9 (fp8 2^-7), and the loss
#      must fall;
#   5. compute-sanitizer --tool memcheck on 2 training steps of d2 in fp8 (skipped, with the
#      reason, where the tool is missing or refuses the device);
#   6. benchmark: d12, d24, d36, d48 at T=1024 in bf16 and fp8 (tokens/s, ms/step as the median
#      over steps ≥ 4, MFU with FLOPs/token = 6N + 6·L·C·T against 989 TFLOP/s, the engine's own
#      activation bytes, and the process's peak GPU memory from nvidia-smi every 200 ms); d12
#      also in fp8 with FP8 in the MLP GEMMs only and with --fp8-gemms auto (FP8 where it times
#      faster); d48 also with FP8 in the MLP GEMMs only;
#   6a. fp8 against bf16 over LOSS_STEPS (200) steps of d12 on the same data: the mean loss of
#      the last 10% of steps within 1%;
#   6c. the peer: the PyTorch reference (dev/reference/gpt2.py --dtype bf16 --compile) at d12;
#   6b. with LAB=1, the dev/cuda harnesses named in LAB_HARNESSES (output in lab.log);
#   7. summary: the results as a markdown block ready for docs/gpu-results.md, and a verdict.
# Results go to $OUT (the device tool collects it) or out/gpu_check/: gpu_results.md,
# gpu_check.log (everything), test_cuda.xml, bench.json. Exit status 0 when every check passed.
#
# Environment: GPU_CHECK_BUDGET (s), D12_B (16), D24_B (16), D36_B (8), D48_B (8), BENCH_STEPS_D12 (16),
# BENCH_STEPS_D48 (10, also d24 and d36), LOSS_STEPS (200), LAB_HARNESSES,
# TRACK_STEPS (20), PYTHON (python3), BENCH_TORCH (1; 0 skips the PyTorch rows), BENCH_MODELS
# ("d12 d24 d36 d48"), LAB (0; 1 runs the dev/cuda harnesses last, output in $OUT/lab.log).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-450}
RESULTS=${OUT:-$ROOT/out/gpu_check}
BUNDLE_DIR=$ROOT/build/gpu_check
PYTHON=${PYTHON:-python3}
D12_B=${D12_B:-16}
D24_B=${D24_B:-16}
D36_B=${D36_B:-8}
D48_B=${D48_B:-8}
LOSS_STEPS=${LOSS_STEPS:-200}
LAB_HARNESSES=${LAB_HARNESSES:-"attention matmul fp8_cast fp8_fused"}
BENCH_MODELS=${BENCH_MODELS:-"d12 d24 d36 d48"}
BENCH_STEPS_D12=${BENCH_STEPS_D12:-16}
BENCH_STEPS_D48=${BENCH_STEPS_D48:-10}
TRACK_STEPS=${TRACK_STEPS:-20}
BENCH_TORCH=${BENCH_TORCH:-1}
LAB=${LAB:-0}
V=50257
JOBS=${JOBS:-$(nproc)}

log() { echo "gpu_check: $*"; }
die() { echo "gpu_check: error: $*" >&2; exit 1; }
elapsed() { echo $(( $(date +%s) - START )); }

# A hash of every source the binaries are built from (the same on both machines; no git needed).
source_hash() {
    find train_gpt.cu Makefile llmc tests -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.cpp' \
        -o -name Makefile \) -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

# ================================ --prepare (CPU machine) ===================================
if [[ ${1:-} == --prepare ]]; then
    log "building for sm_90a with make -j$JOBS"
    make -j"$JOBS" all build/test_cuda || die "the build failed"
    make -C dev/cuda -j"$JOBS" || die "the dev/cuda build failed"
    stage=$BUNDLE_DIR/stage
    rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/lab"
    cp train_gpt build/test_cuda "$stage/"
    find build/dev/cuda -maxdepth 1 -type f -executable -exec cp {} "$stage/lab/" \;
    # shared libraries a bare image may lack; not the C/C++ runtime, and not the driver and CUDA
    # toolkit libraries, which must come from the GPU machine's own installation
    ldd train_gpt build/test_cuda | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
        case $(basename "$lib") in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
            libcuda.so*|libcudart.so*|libcublas*|libnccl.so*|libnvidia*) ;;
            *) cp -L "$lib" "$stage/lib/" ;;
        esac
    done
    source_hash > "$stage/SOURCE_HASH"
    tar -czf "$BUNDLE_DIR/bundle.tar.gz" -C "$stage" .
    rm -rf "$stage"
    size=$(du -m "$BUNDLE_DIR/bundle.tar.gz" | cut -f1)
    log "wrote $BUNDLE_DIR/bundle.tar.gz (${size} MB, source hash $(source_hash))"
    (( size < 60 )) || log "warning: over the device tool's 64 MiB carry limit with the tree"
    log "next, on the GPU machine: scripts/gpu_check.sh   (device tool: carry [\"build/gpu_check\"], timeout_s 600)"
    exit 0
fi

# ================================ the check (GPU machine) ===================================
mkdir -p "$RESULTS"
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
LOG=$RESULTS/gpu_check.log
: > "$LOG"
declare -A RESULT NOTE     # per check: PASS | FAIL | SKIPPED, and a one-line note
ORDER=()
record() {   # record CHECK STATUS NOTE
    RESULT[$1]=$2 NOTE[$1]=$3
    [[ " ${ORDER[*]} " == *" $1 "* ]] || ORDER+=("$1")
    log "$1: $2 — $3"
    echo "== $1: $2 — $3" >> "$LOG"
}
# limit CAP: seconds a phase may take, within the budget (10 s kept for the summary)
limit() {
    local left=$(( BUDGET - $(elapsed) - 10 ))
    (( left < $1 )) && echo "$left" || echo "$1"
}
# run_logged NAME SECONDS COMMAND…: run with a time limit, output to $WORK/NAME.out and the log
run_logged() {
    local name=$1 secs=$2 rc=0
    shift 2
    if (( secs < 5 )); then
        echo "out of time budget" > "$WORK/$name.out"
        echo "== $name: not run, out of time budget" >> "$LOG"
        return 124
    fi
    echo "== $name (limit ${secs}s): $*" >> "$LOG"
    timeout --kill-after=10 "$secs" "$@" > "$WORK/$name.out" 2>&1 || rc=$?
    cat "$WORK/$name.out" >> "$LOG"
    echo "== $name: exit $rc after $(elapsed)s total" >> "$LOG"
    return $rc
}
last_lines() { tail -n "${2:-5}" "$WORK/$1.out" 2>/dev/null | sed 's/^/    /'; }

# ---- 0. the machine -----------------------------------------------------------------------
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
CUDA_VER=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
TORCH_VER=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
[[ -n $(git status --porcelain 2>/dev/null) ]] && COMMIT="$COMMIT+changes"
SRC_HASH=$(source_hash)
log "${GPU_NAME:-no GPU seen by nvidia-smi} | driver ${DRIVER:-?} | nvcc ${CUDA_VER:-?} | torch ${TORCH_VER:-?} | $JOBS CPUs | commit $COMMIT, sources $SRC_HASH"

# ---- 1. binaries --------------------------------------------------------------------------
TRAIN=$ROOT/train_gpt TEST=$ROOT/build/test_cuda BUILD_NOTE=""
if [[ -f $BUNDLE_DIR/bundle.tar.gz ]]; then
    mkdir -p "$WORK/bundle" && tar -xzf "$BUNDLE_DIR/bundle.tar.gz" -C "$WORK/bundle"
    bundle_hash=$(cat "$WORK/bundle/SOURCE_HASH" 2>/dev/null)
    if [[ $bundle_hash == "$SRC_HASH" ]]; then
        TRAIN=$WORK/bundle/train_gpt TEST=$WORK/bundle/test_cuda
        export LD_LIBRARY_PATH="$WORK/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        BUILD_NOTE="prepared bundle (built with --prepare, sm_90a)"
    else
        log "the bundle is stale (sources $bundle_hash, tree $SRC_HASH): building here"
    fi
fi
if [[ -z $BUILD_NOTE ]]; then
    if run_logged build "$(limit 300)" make -j"$JOBS" all build/test_cuda; then
        BUILD_NOTE="make -j$JOBS here (sm_90a)"
    else
        record build FAIL "make failed here (last lines below); run scripts/gpu_check.sh --prepare on the CPU machine and carry build/gpu_check"
        last_lines build 15
    fi
fi
# CUDA libraries the binaries link (cuBLASLt, NCCL) that this machine keeps outside the loader's
# path, e.g. in pip's nvidia-* packages: add the directory of each one that is missing, only.
if [[ -z ${RESULT[build]:-} ]]; then
    for lib in $(ldd "$TRAIN" "$TEST" 2>/dev/null | awk '/not found/{print $1}' | sort -u); do
        found=$(find /usr/local /opt /usr/lib "$("$PYTHON" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)" \
                -maxdepth 9 -name "$lib" -print -quit 2>/dev/null)
        if [[ -n $found ]]; then
            export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$found")"
            log "using $found"
        fi
    done
    missing=$(ldd "$TRAIN" "$TEST" 2>/dev/null | awk '/not found/{print $1}' | sort -u | tr '\n' ' ')
    if [[ -n $missing ]]; then
        record build FAIL "shared libraries not found: $missing"
    else
        record build PASS "$BUILD_NOTE"
    fi
fi
BUILD_OK=0; [[ ${RESULT[build]} == PASS ]] && BUILD_OK=1

# ---- 1b. cuBLASLt: a library whose FP8 GEMMs run natively --------------------------------------
# The engine falls back to 16-bit GEMMs on widened FP8 operands when cuBLASLt refuses an FP8 GEMM
# (same numbers, not FP8 speed; it prints a warning). Each libcublasLt.so.13 on this machine (the
# one the binaries find first, then e.g. pip's nvidia-cublas) is tried on the FP8 GEMM test; the
# first that runs it natively is put first on LD_LIBRARY_PATH for everything below.
cublaslt_version() {   # the version number of the libcublasLt.so.13 in directory $1 (or the default)
    "$PYTHON" - "${1:+$1/}libcublasLt.so.13" <<'PYEOF' 2>/dev/null || echo "?"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.cublasLtGetVersion.restype = ctypes.c_size_t
print(lib.cublasLtGetVersion())
PYEOF
}
FP8_GEMM_NOTE="not probed"
if (( BUILD_OK )); then
    candidates=("")
    site=$("$PYTHON" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
    while read -r dir; do [[ -n $dir ]] && candidates+=("$dir"); done < <(find /usr/local /opt /usr/lib ${site:+"$site"} \
        -maxdepth 9 -name 'libcublasLt.so.13' -printf '%h\n' 2>/dev/null | sort -u)
    FP8_GEMM_NOTE="refused by every cuBLASLt found (${#candidates[@]} tried): FP8 GEMMs run through the 16-bit fallback"
    for dir in "${candidates[@]}"; do
        out=$(LD_LIBRARY_PATH="${dir:+$dir:}${LD_LIBRARY_PATH:-}" timeout 60 "$TEST" --gtest_color=no \
              --gtest_filter='AllDTypes/CudaDTypeTest.MatmulForwardFp8/bf16' 2>&1)
        rc=$?
        echo "== cublaslt probe ${dir:-(default)}: exit $rc" >> "$LOG"
        echo "$out" | tail -5 >> "$LOG"
        if (( rc == 0 )) && ! grep -q "refused the FP8 GEMM" <<< "$out" && grep -q '^\[  PASSED  \] 1 test' <<< "$out"; then
            [[ -n $dir ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            FP8_GEMM_NOTE="native, libcublasLt ${dir:-(default)} version $(LD_LIBRARY_PATH="${dir:+$dir:}${LD_LIBRARY_PATH:-}" cublaslt_version "$dir")"
            break
        fi
        grep -q "no CUDA device" <<< "$out" && { FP8_GEMM_NOTE="no GPU"; break; }
    done
    case $FP8_GEMM_NOTE in
        native*) record fp8_gemm PASS "$FP8_GEMM_NOTE" ;;
        "no GPU") record fp8_gemm SKIPPED "no GPU" ;;
        *) record fp8_gemm FAIL "$FP8_GEMM_NOTE" ;;
    esac
fi

# ---- 2. CPU side first: data, and the CPU twin's runs in the background --------------------
DATA=$WORK/data
mkdir -p "$DATA"
"$PYTHON" - "$DATA/synth_train_000000.bin" "$V" <<'EOF' || die "could not write the synthetic shard"
# Synthetic llm.c shard: 2^22 uint16 tokens, a Zipfian mix of 20000 fixed random phrases of
# 4..12 tokens over the vocabulary (most next tokens are predictable: the loss falls fast).
import random, struct, sys
from array import array
path, V = sys.argv[1], int(sys.argv[2])
rng = random.Random(1234)
phrases = [[rng.randrange(V) for _ in range(rng.randint(4, 12))] for _ in range(20000)]
weights = [1.0 / (r + 1) ** 1.1 for r in range(len(phrases))]
tokens = array("H")
while len(tokens) < (1 << 22):
    for pid in rng.choices(range(len(phrases)), weights=weights, k=100000):
        tokens.extend(phrases[pid])
del tokens[1 << 22:]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    tokens.tofile(f)
EOF
common=(-i "$DATA/synth_train_*.bin" -j '' --tokenizer '' --vocab-size "$V" -v 0 -g 0 --log-every 5)
track_args=("${common[@]}" -e d2 -b 8 -t 256 -x "$TRACK_STEPS" -l 3e-3 -u 2 --seed 1337)
declare -A CPU_PID
NO_GPU=""
if (( BUILD_OK )); then
    for p in bf16 fp8; do
        timeout 240 "$TRAIN" "${track_args[@]}" -p "$p" --device cpu --threads $(( JOBS > 2 ? JOBS / 2 : 1 )) \
            -o "$WORK/track_cpu_$p" > "$WORK/track_cpu_$p.out" 2>&1 &
        CPU_PID[$p]=$!
    done
fi

# ---- 3. the CUDA tests ----------------------------------------------------------------------
if (( BUILD_OK )); then
    rc=0
    # CUBLASLT_LOG_LEVEL=2: cuBLASLt prints why it refuses a problem (into the log)
    # the lab's wmma attention runs in its own process below: a kernel fault there (a sticky
    # CUDA error) must not take the rest of the tests with it
    run_logged test_cuda "$(limit 180)" env CUBLASLT_LOG_LEVEL="${CUBLASLT_LOG_LEVEL:-1}" "$TEST" --gtest_color=no \
        --gtest_filter='-*Wmma*' --gtest_output="xml:$RESULTS/test_cuda.xml" || rc=$?
    out=$WORK/test_cuda.out
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
    failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*, listed below:/\1/p' "$out" | tail -1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
    passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0}
    counts="$passed passed, $failed failed, $skipped skipped"
    if (( rc == 0 && failed == 0 && skipped == 0 && passed > 0 )); then
        record test_cuda PASS "$counts"
    else
        (( rc == 124 || rc == 137 )) && counts="$counts; timed out"
        (( skipped > 0 )) && counts="$counts ($(grep -m1 'no CUDA device' "$out" || echo 'skipped on a GPU machine'))"
        record test_cuda FAIL "$counts (exit $rc)"
        grep -E '^\[  FAILED  \] [A-Z]' "$out" | head -20 | sed 's/^/    /'
    fi
    grep -E '^(fp32|bf16|fp16|fp8) cuda vs cpu' "$WORK/test_cuda.out" | sed 's/^/    /'
    # every test skipped: this machine has no usable GPU; the GPU steps below cannot run
    if (( passed == 0 && skipped > 0 )); then
        NO_GPU=$(grep -m1 -o 'no CUDA device.*' "$out")
        for p in "${!CPU_PID[@]}"; do kill "${CPU_PID[$p]}" 2>/dev/null; wait "${CPU_PID[$p]}" 2>/dev/null; done
        CPU_PID=()
    fi
else
    record test_cuda SKIPPED "no binaries"
fi
GPU_OK=$(( BUILD_OK && ${#NO_GPU} == 0 ))
# the lab's wmma attention, in a process of its own
if (( GPU_OK )); then
    rc=0
    run_logged test_cuda_wmma "$(limit 60)" "$TEST" --gtest_color=no --gtest_filter='*Wmma*' || rc=$?
    counts=$(grep -E '^\[  (PASSED|FAILED) ' "$WORK/test_cuda_wmma.out" | head -2 | tr '\n' ' ')
    if (( rc == 0 )); then record test_cuda_wmma PASS "${counts:-no summary}"; else record test_cuda_wmma FAIL "${counts:-no summary} (exit $rc)"; fi
fi

# ---- 4. training tracks the CPU twin --------------------------------------------------------
if (( GPU_OK )); then
    for p in bf16 fp8; do
        run_logged "track_cuda_$p" "$(limit 90)" "$TRAIN" "${track_args[@]}" -p "$p" --device cuda -o "$WORK/track_cuda_$p"
    done
    for p in bf16 fp8; do
        wait "${CPU_PID[$p]}" 2>/dev/null
        if [[ $p == bf16 ]]; then tol=1e-2 first=0.001953125; else tol=2e-2 first=0.0078125; fi
        verdict=$("$PYTHON" - "$WORK/track_cpu_$p/log.jsonl" "$WORK/track_cuda_$p/log.jsonl" "$tol" "$first" "$TRACK_STEPS" <<'EOF'
import json, sys
cpu_log, cuda_log, tol, first_tol, steps = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
def losses(path):
    try:
        with open(path) as f:
            recs = [json.loads(l) for l in f if l.strip()]
    except OSError:
        return None
    return [r["loss"] for r in recs if r.get("type") == "step"]
c, g = losses(cpu_log), losses(cuda_log)
if c is None or len(c) < steps:
    print(f"FAIL the CPU twin's run did not finish ({0 if c is None else len(c)} of {steps} steps)"); sys.exit()
if g is None or len(g) < steps:
    print(f"FAIL the CUDA run did not finish ({0 if g is None else len(g)} of {steps} steps)"); sys.exit()
rel = [abs(a - b) / abs(b) for a, b in zip(g, c)]
worst = max(range(len(rel)), key=lambda i: rel[i])
ok = rel[0] <= first_tol and rel[worst] <= tol and g[-1] < g[0] - 0.5
print(("PASS" if ok else "FAIL") +
      f" loss {g[0]:.4f} -> {g[-1]:.4f} (cpu {c[0]:.4f} -> {c[-1]:.4f}); step 1 diff {rel[0]:.1e} (bound {first_tol:.1e}),"
      f" worst step {worst + 1} diff {rel[worst]:.1e} (bound {tol:.0e})")
EOF
)
        record "track_$p" "${verdict%% *}" "${verdict#* }"
        [[ ${verdict%% *} == PASS ]] || { last_lines "track_cuda_$p" 4; last_lines "track_cpu_$p" 2; }
    done
else
    why=$( (( BUILD_OK )) && echo "${NO_GPU}" || echo "no binaries")
    record track_bf16 SKIPPED "$why"
    record track_fp8 SKIPPED "$why"
fi

# ---- 5. compute-sanitizer memcheck on 2 training steps ---------------------------------------
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if (( ! GPU_OK )); then
    record memcheck SKIPPED "$( (( BUILD_OK )) && echo "${NO_GPU}" || echo "no binaries")"
elif [[ -z $SANITIZER ]]; then
    record memcheck SKIPPED "compute-sanitizer not installed"
elif (( $(limit 150) < 40 )); then
    record memcheck SKIPPED "out of time budget"
else
    rc=0
    run_logged memcheck "$(limit 150)" "$SANITIZER" --tool memcheck --leak-check no --error-exitcode 99 \
        "$TRAIN" "${common[@]}" -e d2 -b 4 -t 64 -x 2 -p fp8 --device cuda -o "$WORK/memcheck" || rc=$?
    summary=$(grep -m1 'ERROR SUMMARY' "$WORK/memcheck.out")
    if grep -qiE 'device not supported|unable to (attach|initialize)|not supported on this' "$WORK/memcheck.out"; then
        record memcheck SKIPPED "compute-sanitizer refused the device: $(grep -m1 -iE 'not supported|unable to' "$WORK/memcheck.out")"
    elif [[ $summary == *"ERROR SUMMARY: 0 errors"* && $rc == 0 ]]; then
        record memcheck PASS "2 steps of d2 fp8: $summary"
    elif (( rc == 124 || rc == 137 )); then
        record memcheck FAIL "timed out (exit $rc)"
    else
        record memcheck FAIL "${summary:-no error summary} (exit $rc)"
        grep -m6 -E '^========= (Invalid|Program hit|  at|Address)' "$WORK/memcheck.out" | sed 's/^/    /'
        last_lines memcheck 3
    fi
fi

# ---- 6. benchmark: bf16 and fp8 at d12 … d48, and the PyTorch reference at d12 ---------------
MEM_PID=""
mem_poll_start() {
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 > "$1" 2>/dev/null &
    MEM_PID=$!
}
mem_poll_stop() {   # prints the peak GiB above the baseline (MiB) $2, or "n/a"
    [[ -n $MEM_PID ]] && kill "$MEM_PID" 2>/dev/null && wait "$MEM_PID" 2>/dev/null
    MEM_PID=""
    local peak
    peak=$(grep -E '^[0-9]+$' "$1" | sort -n | tail -1)
    if [[ -n $peak ]]; then awk -v p="$peak" -v b="$2" 'BEGIN { printf "%.1f", (p - b) / 1024 }'; else echo n/a; fi
}
BENCH=$WORK/bench.tsv
: > "$BENCH"
# bench NAME SIDE PREC LAYERS C NH B STEPS SECONDS: one run, one line
#   "name side prec status ms tok_s peak_GiB activation_GiB"
bench() {
    local name=$1 side=$2 prec=$3 L=$4 C=$5 NH=$6 B=$7 steps=$8 secs rc=0 base mem jsonl tag=${1}_${2}_${3} act
    secs=$(limit "$9")
    if (( ! GPU_OK )); then echo -e "$name\t$side\t$prec\tnot run" >> "$BENCH"; return; fi
    if [[ $side == torch && $BENCH_TORCH == 0 ]]; then echo -e "$name\t$side\t$prec\tnot run (BENCH_TORCH=0)" >> "$BENCH"; return; fi
    if (( secs < 30 )); then echo -e "$name\t$side\t$prec\tout of time budget" >> "$BENCH"; return; fi
    base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
    mem_poll_start "$WORK/mem_$tag.txt"
    if [[ $side == engine ]]; then
        jsonl=$WORK/bench_$tag/log.jsonl
        local pflags=(-p "$prec")
        [[ $prec == fp8-mlp ]] && pflags=(-p fp8 --fp8-gemms fc,fcproj)   # FP8 in the MLP's GEMMs only
        [[ $prec == fp8-auto ]] && pflags=(-p fp8 --fp8-gemms auto)       # FP8 where it times faster
        # --profile: the GPU time per op, printed at exit (events only: no synchronisation)
        run_logged "bench_$tag" "$secs" "$TRAIN" "${common[@]}" -e "$name" --profile \
            -b "$B" -t 1024 -x "$steps" -l 6e-4 -u 0 "${pflags[@]}" --device cuda -o "$WORK/bench_$tag" || rc=$?
    else
        jsonl=$WORK/bench_$tag.jsonl
        run_logged "bench_$tag" "$secs" env PYTHONUNBUFFERED=1 "$PYTHON" dev/reference/gpt2.py \
            --train-data "$DATA/synth_train_*.bin" --n-layer "$L" --n-embd "$C" --n-head "$NH" --vocab-size "$V" \
            --seq-len 1024 --batch-size "$B" --steps "$steps" --lr 6e-4 --device cuda --dtype "$prec" --compile \
            --log "$jsonl" || rc=$?
    fi
    mem=$(mem_poll_stop "$WORK/mem_$tag.txt" "${base:-0}")
    act=$(sed -n 's/^memory: activations \([0-9.]*\) GiB.*/\1/p' "$WORK/bench_$tag.out" | head -1)
    "$PYTHON" - "$jsonl" "$name" "$side" "$prec" "$rc" "$mem" "$B" "${act:-n/a}" >> "$BENCH" <<'PYEOF'
import json, statistics, sys
path, name, side, prec, rc, mem, B, act = sys.argv[1:9]
rc, B = int(rc), int(B)
try:
    with open(path) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    ms = [r["ms"] for r in recs if r.get("type") == "step" and r["step"] >= 4]
except (OSError, ValueError, KeyError):
    ms = []
if not ms:
    print(f"{name}\t{side}\t{prec}\t{'timed out' if rc in (124, 137) else f'failed (exit {rc})'}")
else:
    m = statistics.median(ms)
    print(f"{name}\t{side}\t{prec}\tok\t{m:.1f}\t{B * 1024 / (m / 1000):.0f}\t{mem}\t{act}")
PYEOF
    if [[ $(tail -1 "$BENCH" | cut -f4) != ok ]]; then echo "    $name $side $prec:"; last_lines "bench_$tag" 4; fi
}
want_model() { [[ " $BENCH_MODELS " == *" $1 "* ]]; }
#      name side   prec L  C    NH B        steps              seconds
want_model d12 && bench d12 engine bf16 12 768  12 "$D12_B" "$BENCH_STEPS_D12" 45
want_model d12 && bench d12 engine fp8  12 768  12 "$D12_B" "$BENCH_STEPS_D12" 45
want_model d12 && bench d12 engine fp8-mlp 12 768 12 "$D12_B" "$BENCH_STEPS_D12" 45
want_model d12 && bench d12 engine fp8-auto 12 768 12 "$D12_B" "$BENCH_STEPS_D12" 45
want_model d24 && bench d24 engine bf16 24 1024 16 "$D24_B" "$BENCH_STEPS_D48" 50
want_model d24 && bench d24 engine fp8  24 1024 16 "$D24_B" "$BENCH_STEPS_D48" 50
want_model d36 && bench d36 engine bf16 36 1280 20 "$D36_B" "$BENCH_STEPS_D48" 60
want_model d36 && bench d36 engine fp8  36 1280 20 "$D36_B" "$BENCH_STEPS_D48" 60
want_model d48 && bench d48 engine bf16 48 1600 25 "$D48_B" "$BENCH_STEPS_D48" 70
want_model d48 && bench d48 engine fp8  48 1600 25 "$D48_B" "$BENCH_STEPS_D48" 70
want_model d48 && bench d48 engine fp8-mlp 48 1600 25 "$D48_B" "$BENCH_STEPS_D48" 70
# what --fp8-gemms auto chose at d12, and the timings it chose by
AUTO_NOTE=$(grep -m1 'fp8 GEMMs: auto' "$WORK/bench_d12_engine_fp8-auto.out" 2>/dev/null)
engine_ok=1
while IFS=$'\t' read -r name side prec st _; do
    [[ $side == engine && $st != ok && $st != "out of time budget" ]] && engine_ok=0
done < "$BENCH"
bench_note=$(awk -F'\t' '$2 == "engine" {printf "%s %s %s; ", $1, $3, ($4 == "ok" ? $6 " tok/s" : $4)}' "$BENCH")
if (( ! GPU_OK )); then record benchmark SKIPPED "$( (( BUILD_OK )) && echo "${NO_GPU}" || echo "no binaries")"
elif (( engine_ok )); then record benchmark PASS "${bench_note%; }"
else record benchmark FAIL "${bench_note%; }"; fi

# ---- 6a. fp8 vs bf16 over LOSS_STEPS steps on the same data (d12): within 1% -----------------
if (( GPU_OK )) && (( LOSS_STEPS > 0 )) && (( $(limit 80) >= 40 )); then
    loss_args=("${common[@]}" -e d12 -b 8 -t 1024 -x "$LOSS_STEPS" -l 6e-4 -u 20 --seed 1337 --device cuda)
    for p in bf16 fp8; do
        run_logged "loss_$p" "$(limit 60)" "$TRAIN" "${loss_args[@]}" -p "$p" -o "$WORK/loss_$p" || true
    done
    verdict=$("$PYTHON" - "$WORK/loss_bf16/log.jsonl" "$WORK/loss_fp8/log.jsonl" "$LOSS_STEPS" <<'PYEOF'
import json, sys
def losses(path):
    try:
        with open(path) as f:
            return [r["loss"] for r in map(json.loads, filter(str.strip, f)) if r.get("type") == "step"]
    except OSError:
        return []
b, f, steps = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3])
if len(b) < steps or len(f) < steps:
    print(f"FAIL runs incomplete (bf16 {len(b)}, fp8 {len(f)} of {steps} steps)"); sys.exit()
tail = max(1, steps // 10)   # the mean over the last 10% of steps: one step's loss is noisy
mb, mf = sum(b[-tail:]) / tail, sum(f[-tail:]) / tail
worst = max(abs(x - y) / y for x, y in zip(f, b))
rel = abs(mf - mb) / mb
print(("PASS" if rel <= 0.01 else "FAIL") + f" last-{tail}-step mean loss fp8 {mf:.4f} vs bf16 {mb:.4f}: {100 * rel:.2f}%"
      f" (bound 1%); from {b[0]:.3f}; worst single step {100 * worst:.2f}%")
PYEOF
)
    record loss_fp8_vs_bf16 "${verdict%% *}" "d12 B=8 T=1024, $LOSS_STEPS steps: ${verdict#* }"
else
    record loss_fp8_vs_bf16 SKIPPED "$( (( ! GPU_OK )) && echo "no GPU" || { (( LOSS_STEPS > 0 )) && echo "out of time budget" || echo "LOSS_STEPS=0"; })"
fi

# ---- 6c. the peer: the PyTorch reference at d12, bf16, torch.compile (after the checks above) --
want_model d12 && bench d12 torch  bf16 12 768  12 "$D12_B" "$BENCH_STEPS_D12" 100


# ---- 6b. the kernel lab (dev/cuda harnesses), when asked for ------------------------------------
if (( GPU_OK && LAB )) && [[ -d $WORK/bundle/lab ]]; then
    for h in $LAB_HARNESSES; do
        [[ -x $WORK/bundle/lab/$h ]] || continue
        run_logged "lab_$h" "$(limit 40)" "$WORK/bundle/lab/$h" --reps 20 --dtype bf16 || true
        cat "$WORK/lab_$h.out" >> "$RESULTS/lab.log"
    done
    log "kernel lab: $(grep -c FAILED "$RESULTS/lab.log") harness(es) FAILED; details in lab.log"
fi

# ---- 7. summary -----------------------------------------------------------------------------
MD=$RESULTS/gpu_results.md
"$PYTHON" - "$BENCH" "$RESULTS/bench.json" "$V" > "$WORK/bench_table.md" <<'PYEOF'
import json, sys
bench_path, json_path, V = sys.argv[1], sys.argv[2], int(sys.argv[3])
shapes = {"d12": (12, 768), "d24": (24, 1024), "d36": (36, 1280), "d48": (48, 1600)}
rows = {}
with open(bench_path) as f:
    for line in f:
        p = line.rstrip("\n").split("\t")
        rows[(p[0], p[1], p[2])] = p[3:]
T, Vp, peak = 1024, (V + 127) // 128 * 128, 989e12

def run(r, fpt):
    """(cells, tok/s, activation GiB) of one run."""
    if r is None:
        return ["—"] * 5, None, None
    if r[0] != "ok":
        return [r[0], "", "", "", ""], None, None
    ms, tok, mem, act = float(r[1]), float(r[2]), r[3], r[4]
    actf = float(act) if act not in ("n/a", "") else None
    return [f"{tok:,.0f}", f"{100 * tok * fpt / peak:.1f}%", f"{ms:.1f}", act, mem], tok, actf

out = {}
print("| model | bf16 tok/s | MFU | ms/step | act GiB | peak GiB | fp8 tok/s | MFU | ms/step | act GiB | peak GiB "
      "| fp8/bf16 speed | fp8/bf16 act mem |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, (L, C) in shapes.items():
    N = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C   # parameters, padded vocabulary
    fpt = 6 * N + 6 * L * C * T                              # FLOPs per token
    bcells, btok, bact = run(rows.get((name, "engine", "bf16")), fpt)
    fcells, ftok, fact = run(rows.get((name, "engine", "fp8")), fpt)
    speed = f"{ftok / btok:.2f}×" if ftok and btok else "—"
    mem = f"{fact / bact:.2f}×" if fact and bact else "—"
    print(f"| {name} ({N / 1e6:.0f}M) | " + " | ".join(bcells + fcells) + f" | {speed} | {mem} |")
    out[name] = {"params": N, "flops_per_token": fpt, "T": T,
                 "bf16": rows.get((name, "engine", "bf16")), "fp8": rows.get((name, "engine", "fp8"))}
variants = [(name, v, rows.get((name, "engine", v)), rows.get((name, "engine", "bf16")))
            for v in ("fp8-mlp", "fp8-auto") for name in shapes]
variants = [(n, v, m, b) for n, v, m, b in variants if m is not None]
if variants:
    print()
    print("FP8 in some GEMMs only: fp8-mlp = --fp8-gemms fc,fcproj (qkv and attproj in bf16); fp8-auto = "
          "--fp8-gemms auto (the GEMMs that time faster in FP8 at start, listed in the log):")
    print()
    print("| model | variant | tok/s | ms/step | act GiB | peak GiB | vs bf16 speed | vs bf16 act mem |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, v, m, b in variants:
        if m[0] != "ok":
            print(f"| {name} | {v} | {m[0]} | | | | | |")
            continue
        sp = f"{float(m[2]) / float(b[2]):.2f}×" if b and b[0] == "ok" else "—"
        am = f"{float(m[4]) / float(b[4]):.2f}×" if b and b[0] == "ok" and m[4] != "n/a" and b[4] != "n/a" else "—"
        print(f"| {name} | {v} | {float(m[2]):,.0f} | {float(m[1]):.1f} | {m[4]} | {m[3]} | {sp} | {am} |")
        out[name][v] = m
t = rows.get(("d12", "torch", "bf16"))
e = rows.get(("d12", "engine", "bf16"))
if t is not None:
    print()
    if t[0] == "ok" and e is not None and e[0] == "ok":
        print(f"PyTorch reference, d12 bf16 (torch.compile), same batch: {float(t[2]):,.0f} tok/s, {float(t[1]):.1f} "
              f"ms/step, peak {t[3]} GiB; train_gpt bf16 / PyTorch = {float(e[2]) / float(t[2]):.2f}×")
    else:
        print(f"PyTorch reference, d12 bf16: {t[0]}")
    out["torch_d12"] = t
with open(json_path, "w") as f:
    json.dump(out, f, indent=1)
PYEOF

failed=0
for c in "${ORDER[@]}"; do [[ ${RESULT[$c]} == FAIL ]] && failed=$(( failed + 1 )); done
verdict=$([[ $failed == 0 ]] && echo "PASS" || echo "FAIL ($failed check(s))")
{
    echo "### GPU check $(date -u +%Y-%m-%d) — ${GPU_NAME:-no GPU}"
    echo
    echo "Commit $COMMIT (sources $SRC_HASH); driver ${DRIVER:-?}, CUDA ${CUDA_VER:-?}, PyTorch ${TORCH_VER:-?}; $JOBS CPUs;"
    echo "binaries: ${BUILD_NOTE:-none}; $(elapsed) s in all. Produced by \`scripts/gpu_check.sh\`."
    echo "FP8 GEMMs: $FP8_GEMM_NOTE."
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
    for c in "${ORDER[@]}"; do echo "| $c | ${RESULT[$c]} | ${NOTE[$c]//|/\\|} |"; done
    echo
    echo "Training throughput, T = 1024, synthetic GPT-2-vocabulary tokens, batch B: d12 $D12_B, d24 $D24_B, d36 $D36_B,"
    echo "d48 $D48_B; median ms/step over steps ≥ 4; MFU = tok/s · (6N + 6·L·C·T) / 989 TFLOP/s (the dense bf16 peak, for"
    echo "fp8 too); act GiB = the engine's activation buffers (its own count); peak GiB = the process's GPU memory"
    echo "(nvidia-smi, sampled every 200 ms). PyTorch: dev/reference/gpt2.py --device cuda --dtype bf16 --compile."
    echo
    cat "$WORK/bench_table.md"
    [[ -n $AUTO_NOTE ]] && { echo; echo "d12, $AUTO_NOTE"; }
    echo
    echo "Where the GPU time goes (--profile: per-op CUDA events over all steps of each run;"
    echo "the per-op tables are in gpu_check.log):"
    echo
    for f in "$WORK"/bench_*_engine_*.out; do
        cats=$(grep -m1 'profile: categories:' "$f" 2>/dev/null)
        [[ -n $cats ]] && echo "- $(basename "$f" .out | sed 's/^bench_//; s/_engine_/ /'):${cats#profile: categories:}"
    done
    echo
    echo "Verdict: $verdict"
} > "$MD"
cat "$MD" >> "$LOG"
cp "$BENCH" "$RESULTS/bench.tsv" 2>/dev/null
rm -rf "$WORK"

echo
echo "==================== gpu_check summary (also $MD) ===================="
cat "$MD"
[[ $failed == 0 ]]
