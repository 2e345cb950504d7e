#!/usr/bin/env bash
# gpu_check.sh — the one prepared run for a lent GPU (DESIGN §7). In one window on an H200 it first
# proves the default path (what ./train_gpt runs: its CUDA tests, a bf16 training run against the
# CPU twin and timed against run 3, a memcheck, a run with validation and a sample), then validates
# and times what has never run on a GPU (the flash, fused and tuned paths, FP8, the rest). Every
# step runs in processes of its own within its own cap, the caps add up to within one budget, and
# the summary is rewritten after every step: a run cut short at any moment leaves the results so
# far, with every step a row (PASS, FAIL, SKIPPED and why, "not reached" where the budget ran out).
#
#   scripts/gpu_check.sh --prepare   here, no GPU needed: build everything for sm_90a, pack
#                                    build/gpu_check/bundle.tar.gz, print the device-tool call
#   scripts/gpu_check.sh             on the GPU machine: the steps below, 9 minutes at most
#   scripts/gpu_check.sh --dry-run   here (scripts/test.sh): the same steps with no GPU and no
#                                    build; a step that needs the GPU checks its wiring instead
#                                    (trainer runs shrunk to 2 CPU steps of d2, the test groups'
#                                    filters, the scripts parsed) and reports SKIPPED (no GPU). It
#                                    prints the steps' order and caps, and fails where the caps add
#                                    up to more than the budget. Its last line, "gpu_check_dry_run:
#                                    P passed, F failed, S skipped", counts each GPU step as
#                                    skipped, and as passed only what ran here: a wiring check that
#                                    ran a command (ID.wiring), the build and data steps, the caps'
#                                    sum, the report's selftest
#
# Results, in $OUT (the device tool brings it back) or out/gpu_check/ (out/gpu_check_dry/ for the
# dry run): gpu_results.md (the block for docs/gpu-results.md: targets, steps, attention and
# throughput tables, the profiled run's shares), bench.json (all of it), bench.tsv (one row per
# training run), gpu_check.log (every command's output, its first and last LOG_KEEP_KIB KiB, the
# whole log within about LOG_MAX_MIB MiB), lab.log (the dev/cuda harnesses, capped alike); five
# files, of the eight the device tool brings back. Exit status 0 when no step failed.
#
# Knobs (none changes what the trainer computes): GPU_CHECK_BUDGET (seconds, 540),
# GPU_CHECK_ONLY (step-id globs such as 'test.* d48.*': other steps are SKIPPED; build, machine,
# data and fp8_probe always run; the only way to run an extra step), LAB (1; 0 skips the
# harnesses), LAB_HARNESSES, PYTHON, JOBS.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)

# The steps, in the order they run. cap: the seconds a step may take, each command of it a process
# of its own under `timeout` within what is left of the cap (so a kernel fault, whose sticky CUDA
# error ends only its own process, or a hang costs at most that step). STEPS' caps add up to
# within the budget less RESERVE (the dry run fails otherwise), so a run that starts from the
# bundle reaches every step; a step starts only with at least half its cap left (else "not
# reached": a make -j that ate the budget). Why this order:
#   a. what every later step stands on (seconds with a prepared bundle; make -j when it is stale);
#   b. the default path, proven first and each part in its own processes, so that nothing newer
#      can hide its verdict: `default`, the CUDA tests of the ops the default run calls (the dtype
#      ops but FP8's, the GEMM attention, the fp32/bf16/fp16 training steps, the unfused forms of
#      the fusable ops); a bf16 d12 run with the default kernel flags timed against run 3; 20 bf16
#      steps of d2 against the CPU twin; compute-sanitizer memcheck on 2 bf16 steps; then a run
#      with the trainer's defaults, validation and a 256-token sample at its end, the one part of
#      every default run that has never run on a GPU (attention_decode), and the decoding tests;
#   c. the never-run paths, newest first: the flash attention (its tests, whole steps, d12
#      timed), the fused kernels and GEMM epilogues, recompute, the GEMM autotuner (tests, a d12
#      run with both), FP8 (the probe, the casts, GEMMs, scaling state and fused casts, a d12
#      run, the tracking of the CPU twin with the flash attention), then the rest of
#      build/test_cuda and the one run with --profile (its per-op breakdown; every timed run goes
#      without it).
# EXTRA_STEPS run only where GPU_CHECK_ONLY names them (a rerun on the still-warm machine, the next
# window): their caps do not fit the budget. Training runs: model, batch, precision (fp8-auto:
# --fp8-gemms auto, FP8 where it times faster; fp8-mlp: FP8 in the MLP's GEMMs only), attention
# ('-' the trainer's default), options ('-', or a comma list of fused for --fused-kernels true,
# tuned for --gemm-autotune, r1 and r2 for --recompute 1|2, hN for --lm-head-chunks N, prof for
# --profile, epi for --gemm-epilogues true, wide for --flash-backward wide; a run whose flag the trainer lacks is SKIPPED), and an optional baseline ms/step. A
# run's verdict fails on a skipped step, a non-finite loss, a loss that does not fall
# (gpu_check_report.py loss_health) and, with a baseline, on a time over 1.10× it.
# The default path's CUDA tests (GoogleTest filter: positive patterns, then '-' and the excluded)
DEFAULT_TESTS='*CudaDTypeTest.*:*CudaAttentionGemmTest.*:*CudaModelTest.TrainingStepMatchesCpuTwin/fp32'
DEFAULT_TESTS+=':*CudaModelTest.TrainingStepMatchesCpuTwin/bf16:*CudaModelTest.TrainingStepMatchesCpuTwin/fp16'
DEFAULT_TESTS+=':*CudaTest.CopiesToTheDevice*'   # every copy_to_device of the default path (pinned staging)
DEFAULT_TESTS+=':*CudaFusedOpsTest.*_separate-*AttentionDecode*:*Fp8*:*Amax*'
RUN3_D12_BF16_MS=63.1   # docs/gpu-results.md, run 3 (373fc63): d12 bf16 B=16 T=1024, GEMM attention, 259,640 tok/s
STEPS=(
#  id                            cap  function        arguments
   "build                         15  step_build"     # MAKE_CAP when it must build
   "machine                       10  step_machine"
   "data                          15  step_data"
   "default                       40  step_tests      $DEFAULT_TESTS"
#                                                     model B   precision attention options baseline
   "default.d12                   30  step_bench      d12  16  bf16      -         -       $RUN3_D12_BF16_MS"
#                                                     attention precisions
   "default.track                 30  step_track      -         bf16"
#                                                     precision attention options
   "default.memcheck              40  step_memcheck   bf16      -         -"
#                                                     model B
   "default.sample                30  step_sample     d12  4"
   "test.decode                   20  step_tests      *AttentionDecode*:*CudaGenerateTest*"
   "test.flash                    25  step_tests      *AttentionFlash*"
   "test.step_flash               20  step_tests      *TrainingStepMatchesCpuTwin/*_flash"
   "d12.bf16.flash                25  step_bench      d12  16  bf16      flash     -"
   "test.fused                    20  step_tests      *CudaFusedOpsTest.*_fused:*FusedKernels*:*CudaEpilogueTest*"
   "test.recompute                15  step_tests      *Recompute*"
   "test.gemm_autotune            20  step_tests      *GemmAutotune*"
   "d12.bf16.flash.fused.tuned    30  step_bench      d12  16  bf16      flash     fused,tuned"
   "fp8_probe                     15  step_fp8_probe"
   "test.fp8                      30  step_tests      *Fp8*:*Amax*:*VectorisedCast*:*TrainingStepMatchesCpuTwin/fp8"
   "d12.fp8.flash.fused           25  step_bench      d12  16  fp8       flash     fused"
   "track.flash                   30  step_track      flash     bf16,fp8"
   "test.rest                     25  step_tests      rest"
   "profile.d12.bf16.flash.fused  20  step_bench      d12  16  bf16      flash     fused,prof"
)
EXTRA_STEPS=(
   "attn.ours                     60  step_attention_ours"
   "attn.sdpa                     60  step_attention_sdpa"
   "torch.d12                    120  step_torch      d12  16"
   "d48.bf16.gemm                 75  step_bench      d48  8   bf16      gemm      -"
   "d48.bf16.flash                75  step_bench      d48  8   bf16      flash     -"
   "d12.bf16.flash.fused          45  step_bench      d12  16  bf16      flash     fused"
   "d48.bf16.flash.fused.tuned    90  step_bench      d48  8   bf16      flash     fused,tuned"
   "d12.fp8-auto.flash.fused      45  step_bench      d12  16  fp8-auto  flash     fused"
   "track.fp8                     60  step_track      -         fp8"
   "memcheck.fp8                  60  step_memcheck   fp8       -         -"
   "memcheck.flash.fused.r2       90  step_memcheck   fp8       flash     fused,r2"
   "loss200                       90  step_loss       200 flash fused"
   "d12.bf16.flash.fused.h16      45  step_bench      d12  16  bf16      flash     fused,h16"
   "d12.fp8.flash.fused.h16       45  step_bench      d12  16  fp8       flash     fused,h16"
   "d48.bf16.flash.fused          75  step_bench      d48  8   bf16      flash     fused"
   "d48.fp8.flash.fused           75  step_bench      d48  8   fp8       flash     fused"
   "d24.bf16.flash.fused          50  step_bench      d24  16  bf16      flash     fused"
   "d24.fp8.flash.fused           50  step_bench      d24  16  fp8       flash     fused"
   "d48.bf16.flash.fused.r2.b16   90  step_bench      d48  16  bf16      flash     fused,r2"
   "d48.fp8.flash.fused.r2.b16    90  step_bench      d48  16  fp8       flash     fused,r2"
   "torch.d48                    120  step_torch      d48  8"
   "d12.fp8-mlp.flash.fused       45  step_bench      d12  16  fp8-mlp   flash     fused"
   "d48.fp8-mlp.flash.fused       75  step_bench      d48  8   fp8-mlp   flash     fused"
   "d36.bf16.flash.fused          60  step_bench      d36  8   bf16      flash     fused"
   "d36.fp8.flash.fused           60  step_bench      d36  8   fp8       flash     fused"
   "d12.fp8.gemm                  45  step_bench      d12  16  fp8       gemm      -"
   "d12.bf16.epi                  45  step_bench      d12  16  bf16      -         epi"
   "d12.bf16.cudnn                45  step_bench      d12  16  bf16      cudnn     -"
   "d12.bf16.flash.wide           45  step_bench      d12  16  bf16      flash     wide"
   "d12.bf16.flash.fused.epi      45  step_bench      d12  16  bf16      flash     fused,epi"
   "test.wmma                     45  step_tests      *Wmma*"
   "lab                          120  step_lab"
)
ALWAYS="build machine data fp8_probe"       # run whatever GPU_CHECK_ONLY and the budget say
MAKE_CAP=300                                # seconds for make -j where the bundle is stale or missing
LOG_KEEP_KIB=32                             # of each command's output, the first and the last 32 KiB go into the log
LOG_MAX_MIB=8                               # past 8 MiB of log, only the last 2 KiB of each command's output
# model: layers, width, heads (head size 64 at every size); benchmark steps per run
declare -A SHAPE=([d2]="2 128 2" [d12]="12 768 12" [d24]="24 1024 16" [d36]="36 1280 20" [d48]="48 1600 25")
bench_steps() { [[ $1 == d12 ]] && echo 20 || echo 10; }   # timed: the median over steps ≥ 4

MODE=${1:-}
BUDGET=${GPU_CHECK_BUDGET:-540}
RESERVE=5                                  # seconds kept back for the last summary
RESULTS=${OUT:-$ROOT/out/gpu_check$([[ $MODE == --dry-run ]] && echo _dry)}
BUNDLE=$ROOT/build/gpu_check/bundle.tar.gz
PYTHON=${PYTHON:-python3}
PY=("$PYTHON" "$ROOT/scripts/gpu_check_report.py")
LAB=${LAB:-1}
LAB_HARNESSES=${LAB_HARNESSES:-"fp8_cast fp8_fused matmul matmul_epilogues layernorm attention"}
JOBS=${JOBS:-$(nproc)}
V=50257                                    # GPT-2's vocabulary; the dry run's shard uses 256
[[ $MODE == --dry-run ]] && V=256

log() { echo "gpu_check: $*"; }
die() { echo "gpu_check: error: $*" >&2; exit 1; }

# A hash of every source the binaries are built from (the same on both machines; no git needed).
source_hash() {
    find train_gpt.cu Makefile llmc tests dev/cuda -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \
        -o -name '*.cpp' -o -name Makefile \) -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

# ================================ --prepare (CPU machine) ===================================
if [[ $MODE == --prepare ]]; then
    log "building for sm_90a with make -j$JOBS"
    make -j"$JOBS" all build/test_cuda || die "the build failed"
    make -C dev/cuda -j"$JOBS" || die "the dev/cuda build failed"
    stage=$ROOT/build/gpu_check/stage
    rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/lab"
    cp train_gpt build/test_cuda "$stage/"
    find build/dev/cuda -maxdepth 1 -type f -executable -exec cp {} "$stage/lab/" \;
    # shared libraries a bare image may lack; not the C/C++ runtime, and not the driver's and the
    # CUDA toolkit's, which must come from the GPU machine's own installation
    ldd train_gpt build/test_cuda "$stage"/lab/* | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
        case $(basename "$lib") in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
            libcuda.so*|libcudart.so*|libcublas*|libnccl.so*|libnvidia*) ;;
            *) cp -L "$lib" "$stage/lib/" ;;
        esac
    done
    source_hash > "$stage/SOURCE_HASH"
    tar -czf "$BUNDLE" -C "$stage" .
    rm -rf "$stage"
    bundle_mib=$(du -m "$BUNDLE" | cut -f1)
    tree_mib=$(( ( $(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null \
                     | awk '{s += $1} END {print s + 0}') >> 20 ) + 1 ))
    log "wrote $BUNDLE: ${bundle_mib} MiB (sources $(source_hash)); with the tree (${tree_mib} MiB) $(( bundle_mib + tree_mib )) of the 64 MiB the device tool carries"
    (( bundle_mib + tree_mib < 64 )) || log "warning: over the device tool's 64 MiB"
    cat <<EOF
gpu_check: the device-tool call (the script ends itself within GPU_CHECK_BUDGET=$BUDGET s; with the
gpu_check: machine's start, 1-2 minutes, that leaves 3-4 of the 15 minutes for one rerun):
    run(command="scripts/gpu_check.sh", carry=["build/gpu_check"], timeout_s=600)
gpu_check: a rerun, at once (a machine stays warm 30 s after a call), of steps not reached or of
gpu_check: EXTRA_STEPS (the main run's caps fill the budget; extra steps run only when named):
    run(command="GPU_CHECK_BUDGET=150 GPU_CHECK_ONLY='<step ids or globs>' scripts/gpu_check.sh", carry=["build/gpu_check"], timeout_s=180)
gpu_check: then give_back(). The results come back from \$OUT: gpu_results.md, bench.json, bench.tsv, gpu_check.log, lab.log.
EOF
    exit 0
fi
[[ -z $MODE || $MODE == --dry-run ]] || die "unknown argument $MODE (--prepare, --dry-run or nothing)"

# ================================ the check ==================================================
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
mkdir -p "$RESULTS"
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
LOG=$RESULTS/gpu_check.log
: > "$LOG"
rm -f "$RESULTS/lab.log"
DATA=$WORK/data
TRAIN="" TEST="" LAB_DIR="" NO_GPU="" TORCH_VER=""
BG_PIDS=()                                 # background processes this script started
declare -A CPU_PID META=([budget]=$BUDGET [finished]=0 [mode]=${MODE#--})
: > "$WORK/runs.tsv"

# ---- the step runner ------------------------------------------------------------------------
declare -A STATUS NOTE SECS CAP EXTRA    # per step id
IDS=() TEST_GROUPS=()
CUR="" DEADLINE=0 STEP_BAD=""
ALL_STEPS=("${STEPS[@]}" "${EXTRA_STEPS[@]}")

record() { STATUS[$CUR]=$1 NOTE[$CUR]=$2; }   # record STATUS NOTE: the current step's outcome
# verdict STATUS NOTE: an outcome measured on the GPU. Without one, the step ran only its wiring
# check: SKIPPED when every command it ran exited 0, else FAIL with the command that did not.
verdict() {
    if [[ -z $NO_GPU ]]; then record "$1" "$2"
    elif [[ -n $STEP_BAD ]]; then record FAIL "dry run: $STEP_BAD"
    else record SKIPPED "$NO_GPU"; fi
}
# need binaries|data: false (and the step recorded SKIPPED) when that is missing
need() {
    case $1 in
        binaries) [[ -n $TRAIN ]] || { record SKIPPED "no binaries (see the build step)"; return 1; } ;;
        data) [[ -f $DATA/synth_train_000000.bin ]] || { record SKIPPED "no data (see the data step)"; return 1; } ;;
    esac
}
# selected ID: the step runs. Without GPU_CHECK_ONLY, every step of STEPS (and in the dry run, whose
# wiring checks cost seconds, every extra step too); with it, those it names and ALWAYS.
selected() {
    local p pats
    [[ " $ALWAYS " == *" $1 "* ]] && return 0
    [[ -z ${GPU_CHECK_ONLY:-} ]] && { [[ -z ${EXTRA[$1]:-} || $MODE == --dry-run ]]; return; }
    read -r -a pats <<< "$GPU_CHECK_ONLY"
    # shellcheck disable=SC2053  # $p is a glob
    for p in "${pats[@]}"; do [[ $1 == $p ]] && return 0; done
    return 1
}
# write_state: the state files, then the summary (gpu_results.md, bench.json, bench.tsv) from them
write_state() {
    local id k note
    META[elapsed]=$(elapsed)
    for id in "${IDS[@]}"; do
        note=${NOTE[$id]:-}
        note=${note//$'\t'/ }
        printf '%s\t%s\t%s\t%s\t%s\n' "$id" "${STATUS[$id]}" "${SECS[$id]:-}" "${CAP[$id]}" "${note//$'\n'/ }"
    done > "$WORK/steps.tsv"
    for k in "${!META[@]}"; do printf '%s\t%s\n' "$k" "${META[$k]}"; done > "$WORK/meta.tsv"
    "${PY[@]}" summary "$WORK" "$RESULTS" >> "$LOG" 2>&1 || log "warning: the summary could not be written (see gpu_check.log)"
}
# run_steps: every step of STEPS in turn, within its cap and the budget; the summary after each
run_steps() {
    local line f id cap left t0 n=0
    for line in "${ALL_STEPS[@]}"; do
        read -r -a f <<< "$line"
        IDS+=("${f[0]}") CAP[${f[0]}]=${f[1]} STATUS[${f[0]}]="not reached"
        (( n++ < ${#STEPS[@]} )) || EXTRA[${f[0]}]=1
        [[ ${f[2]} == step_tests && ${f[3]} != rest ]] && TEST_GROUPS+=("${f[3]}")
    done
    write_state
    for line in "${ALL_STEPS[@]}"; do
        read -r -a f <<< "$line"
        id=${f[0]} cap=${f[1]} CUR=${f[0]} STEP_BAD=""
        if ! selected "$id"; then
            if [[ -n ${EXTRA[$id]:-} && -z ${GPU_CHECK_ONLY:-} ]]; then
                record SKIPPED "an extra step, beyond the budget: GPU_CHECK_ONLY='$id' runs it"
            else
                record SKIPPED "not selected (GPU_CHECK_ONLY)"
            fi
            write_state; continue
        fi
        left=$(budget_left)
        [[ " $ALWAYS " == *" $id "* ]] && (( left < cap )) && left=$cap   # every other step needs them
        if (( 2 * left < cap )); then
            NOTE[$id]="the budget had ${left} s left; the step needs ≥ $(( (cap + 1) / 2 ))"
            write_state
            continue
        fi
        DEADLINE=$(( $(date +%s) + (cap < left ? cap : left) ))
        STATUS[$id]=running
        # the summary names the step under way, so that a run killed now says where it stopped
        # (not in a dry run, whose steps take a second: it keeps scripts/test.sh fast)
        [[ $MODE == --dry-run ]] || write_state
        echo "==== $id (cap $(( DEADLINE - $(date +%s) )) s) at $(elapsed) s" >> "$LOG"
        t0=$(date +%s)
        "${f[2]}" "${f[@]:3}"
        SECS[$id]=$(( $(date +%s) - t0 ))
        [[ ${STATUS[$id]} == running ]] && record FAIL "the step recorded no outcome (a bug in gpu_check.sh)"
        log "$id: ${STATUS[$id]} (${SECS[$id]} s) — ${NOTE[$id]}"
        write_state
    done
}
budget_left() { echo $(( BUDGET - $(elapsed) - RESERVE )); }
# caps_order [extra]: STEPS (or EXTRA_STEPS) in order as "id cap, …" in CAPS_TEXT, their caps' sum
# in CAPS_SUM
caps_order() {
    local line f list
    if [[ ${1:-} == extra ]]; then list=("${EXTRA_STEPS[@]}"); else list=("${STEPS[@]}"); fi
    CAPS_SUM=0 CAPS_TEXT=""
    for line in "${list[@]}"; do
        read -r -a f <<< "$line"
        CAPS_TEXT+="${CAPS_TEXT:+, }${f[0]} ${f[1]}" CAPS_SUM=$(( CAPS_SUM + f[1] ))
    done
}
# extend_deadline SECONDS: the current step may run that long from now, within the budget
extend_deadline() { local left; left=$(budget_left); DEADLINE=$(( $(date +%s) + ($1 < left ? $1 : left) )); }
# run_logged NAME COMMAND…: run within the step's time left; output in $WORK/NAME.out and the log
run_logged() {
    local name=$1 rc=0 left=$(( DEADLINE - $(date +%s) ))
    shift
    if (( left < 3 )); then
        echo "not run: the step's time is up" > "$WORK/$name.out"
        [[ -n $STEP_BAD ]] || STEP_BAD="$name: not run, the step's time was up"
        return 124
    fi
    echo "== $name (${left} s): $*" >> "$LOG"
    timeout -k 5 "$left" "$@" > "$WORK/$name.out" 2>&1 || rc=$?
    append_capped "$WORK/$name.out" "$LOG"
    echo "== $name: exit $rc at $(elapsed) s" >> "$LOG"
    if (( rc != 0 )) && [[ -z $STEP_BAD ]]; then
        STEP_BAD="$name exited $rc: $(grep -v '^\s*$' "$WORK/$name.out" | tail -1 | cut -c1-200)"
    fi
    return $rc
}
# append_capped FILE LOG: FILE's text onto LOG, its first and last LOG_KEEP_KIB KiB where it is longer
# (the middle replaced by a line that says how much was left out); once LOG holds LOG_MAX_MIB MiB,
# only the last 2 KiB. So the ~60 commands of a run that reaches every step, extra ones included,
# leave a log of at most ~4 MiB, never near the 16 MiB the device tool brings back in one file.
append_capped() {
    local size first=$(( LOG_KEEP_KIB * 1024 )) last=$(( LOG_KEEP_KIB * 1024 ))
    size=$(stat -c %s "$1" 2>/dev/null || echo 0)
    (( $(stat -c %s "$2" 2>/dev/null || echo 0) < LOG_MAX_MIB << 20 )) || { first=0 last=2048; }
    if (( size <= first + last )); then cat "$1" >> "$2"; return; fi
    {
        head -c "$first" "$1"
        echo
        echo "[gpu_check: $(( size - first - last )) of this output's $size bytes left out here (the log keeps the first $first and the last $last)]"
        tail -c "$last" "$1"
    } >> "$2"
}
# trainer_argv NAME DEVICE MODEL B T STEPS FLAGS…: the trainer's command line in TRAINER_ARGV (logs
# in $WORK/NAME/), with EVAL's flags (no validation, no sample; step_sample sets its own). Without
# a GPU every run is shrunk to at most 2 steps of d2 at B=2, T=64 on the CPU, one thread: the flags
# and the reading of the output are checked, nothing is measured. RAN_* say what runs.
EVAL=(-j '' -v 0 -g 0)
trainer_argv() {
    local name=$1 device=$2; shift 2
    RAN_MODEL=$1 RAN_B=$2 RAN_T=$3 RAN_STEPS=$4
    shift 4
    [[ -n $NO_GPU ]] && device=cpu RAN_MODEL=d2 RAN_B=2 RAN_T=64 RAN_STEPS=$(( RAN_STEPS < 2 ? RAN_STEPS : 2 ))
    TRAINER_ARGV=("$TRAIN" -i "$DATA/synth_train_*.bin" --tokenizer '' --vocab-size "$V" "${EVAL[@]}"
        --log-every 5 -e "$RAN_MODEL" -b "$RAN_B" -t "$RAN_T" -x "$RAN_STEPS" --device "$device" -o "$WORK/$name" "$@")
    [[ -z $NO_GPU ]] || TRAINER_ARGV+=(--threads 1)   # small runs beside the background ones
}
trainer() { local name=$1; trainer_argv "$@"; run_logged "$name" "${TRAINER_ARGV[@]}"; }
# the GPU memory the next command takes: nvidia-smi every 200 ms, the peak above the start (GiB)
mem_poll_start() {
    MEM_PID="" MEM_BASE=""
    [[ -z $NO_GPU ]] && command -v nvidia-smi > /dev/null || return 0
    MEM_BASE=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 > "$WORK/mem.txt" 2>/dev/null &
    MEM_PID=$!
}
mem_poll_stop() {
    local peak
    [[ -n $MEM_PID ]] || { echo n/a; return; }
    kill "$MEM_PID" 2>/dev/null; wait "$MEM_PID" 2>/dev/null
    peak=$(grep -E '^[0-9]+$' "$WORK/mem.txt" | sort -n | tail -1)
    [[ -n $peak ]] && awk -v p="$peak" -v b="${MEM_BASE:-0}" 'BEGIN { printf "%.1f", (p - b) / 1024 }' || echo n/a
}
# add_run KIND L C PREC OPTIONS RC LOG PEAK [BASELINE_MS]: the current step's training run into
# runs.tsv, and its verdict (gpu_check_report.py run_row: its losses, its time against the baseline)
add_run() {
    local out status
    out=$("${PY[@]}" run-row "$CUR" "$1" "$RAN_MODEL" "$2" "$3" "$V" "$RAN_B" "$RAN_T" "$4" "$5" "$6" "$7" \
          "$WORK/$CUR.out" "$8" ${9:+"$9"} 2>> "$LOG")
    if [[ $out != *$'\n'* ]]; then record FAIL "could not read the run's output (gpu_check_report.py run-row)"; return; fi
    echo "${out%%$'\n'*}" >> "$WORK/runs.tsv"
    status=${out#*$'\n'}
    verdict "${status%%$'\t'*}" "${status#*$'\t'}"
}
# wait_pid PID: wait for a background process within the step's time (124 when it is up)
wait_pid() {
    while kill -0 "$1" 2>/dev/null; do (( $(date +%s) < DEADLINE )) || return 124; sleep 1; done
    wait "$1"
}
parses() { "$PYTHON" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$1" 2>> "$LOG" || STEP_BAD="$1 does not parse"; }

# ---- a. what everything stands on -------------------------------------------------------------
use_binaries() {   # DIR (a bundle) or nothing (the tree's build)
    if [[ -n ${1:-} ]]; then TRAIN=$1/train_gpt TEST=$1/test_cuda LAB_DIR=$1/lab
    else TRAIN=$ROOT/train_gpt TEST=$ROOT/build/test_cuda LAB_DIR=$ROOT/build/dev/cuda; fi
}
# binaries_run: they load and start here (shared libraries found, instructions this CPU has);
# CUDA libraries this machine keeps outside the loader's path (pip's nvidia-* packages) are added
binaries_run() {
    local lib found site
    site=$("$PYTHON" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
    for lib in $(ldd "$TRAIN" "$TEST" 2>/dev/null | awk '/not found/{print $1}' | sort -u); do
        found=$(find /usr/local /opt /usr/lib ${site:+"$site"} -maxdepth 9 -name "$lib" -print -quit 2>/dev/null)
        [[ -n $found ]] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$found")"
    done
    BIN_ERROR=$(ldd "$TRAIN" "$TEST" 2>&1 | awk '/not found/{print $1}' | sort -u | tr '\n' ' ')
    [[ -z $BIN_ERROR ]] || { BIN_ERROR="shared libraries not found: $BIN_ERROR"; return 1; }
    timeout 30 "$TRAIN" --help > "$WORK/help.txt" 2>&1 || { BIN_ERROR="train_gpt --help exited $?: $(tail -1 "$WORK/help.txt")"; return 1; }
    timeout 30 "$TEST" --gtest_list_tests > /dev/null 2>&1 || { BIN_ERROR="test_cuda --gtest_list_tests exited $?"; return 1; }
}
step_build() {
    local hash bundle_hash why=""
    hash=$(source_hash)
    META[sources]=$hash
    META[commit]=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
    if [[ -f $BUNDLE ]]; then
        bundle_hash=$(tar -xzOf "$BUNDLE" ./SOURCE_HASH 2>/dev/null)
        if [[ $bundle_hash == "$hash" ]]; then
            mkdir -p "$WORK/bundle" && tar -xzf "$BUNDLE" -C "$WORK/bundle"
            use_binaries "$WORK/bundle"
            export LD_LIBRARY_PATH="$WORK/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            if binaries_run; then META[binaries]="the prepared bundle (sm_90a)"; record PASS "${META[binaries]}, sources $hash"; return; fi
            why="the bundle's binaries do not run here ($BIN_ERROR)"
        else
            why="the bundle is stale (sources ${bundle_hash:-?}, tree $hash)"
        fi
    else
        why="no bundle (scripts/gpu_check.sh --prepare makes one)"
    fi
    use_binaries
    if [[ $MODE == --dry-run ]]; then
        META[binaries]="the tree's build (dry run; $why)"
    elif extend_deadline "$MAKE_CAP" && run_logged make make -j"$JOBS" all build/test_cuda \
         && run_logged make_lab make -C dev/cuda -j"$JOBS"; then
        META[binaries]="make -j$JOBS here ($why)"
    else
        TRAIN=""
        record FAIL "$why; make failed here: $(tail -1 "$WORK/make.out" "$WORK/make_lab.out" 2>/dev/null | grep -v '^\s*$' | tail -1)"
        return
    fi
    if binaries_run; then record PASS "${META[binaries]}"; else record FAIL "${META[binaries]}: $BIN_ERROR"; TRAIN=""; fi
}
step_machine() {
    local gpu
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
    META[gpu]=${gpu%%,*} META[driver]=$(echo "$gpu" | cut -d, -f3 | tr -d ' ')
    META[cuda]=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    TORCH_VER=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
    META[torch]=${TORCH_VER:-not installed} META[cpus]=$JOBS
    local what="${gpu:-no GPU seen by nvidia-smi}; nvcc ${META[cuda]:-?}; torch ${META[torch]}; $JOBS CPUs"
    if [[ $MODE == --dry-run ]]; then NO_GPU="no GPU (dry run)"
    elif [[ -z $gpu ]]; then NO_GPU="no GPU (nvidia-smi lists none)"; fi
    [[ -z $NO_GPU ]] && record PASS "$what" || record SKIPPED "$NO_GPU: $what"
}
# cuBLASLt runs FP8 GEMMs natively or the engine falls back to 16-bit GEMMs on widened operands
# (same numbers, not FP8 speed, with a warning). The FP8 GEMM test is tried with the library the
# binaries find; only where that one refuses, with each other libcublasLt.so.13 on the machine
# (pip's nvidia-cublas, say): the first that runs it goes first on LD_LIBRARY_PATH from here on.
step_fp8_probe() {
    local probe='AllDTypes/CudaDTypeTest.MatmulForwardFp8/bf16' dir dirs=("") site n=0
    need binaries || return
    if [[ -n $NO_GPU ]]; then
        "$TEST" --gtest_list_tests --gtest_filter="$probe" 2>/dev/null | grep -q '^  ' || STEP_BAD="no test $probe"
        verdict SKIPPED ""; return
    fi
    while true; do
        for dir in "${dirs[@]}"; do
            n=$(( n + 1 ))
            run_logged "fp8_probe.$n" env LD_LIBRARY_PATH="${dir:+$dir:}${LD_LIBRARY_PATH:-}" "$TEST" --gtest_color=no \
                --gtest_filter="$probe"
            if grep -q 'no CUDA device' "$WORK/fp8_probe.$n.out"; then   # the GPU steps check wiring only
                NO_GPU="no GPU ($(grep -m1 -o 'no CUDA device.*' "$WORK/fp8_probe.$n.out"))"
                record FAIL "nvidia-smi lists a GPU that CUDA cannot use: $NO_GPU"; return
            fi
            if grep -q '^\[  PASSED  \] 1 test' "$WORK/fp8_probe.$n.out" && ! grep -q 'refused the FP8 GEMM' "$WORK/fp8_probe.$n.out"; then
                [[ -n $dir ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                META[fp8_gemm]="native, libcublasLt ${dir:-(the default)}"
                record PASS "${META[fp8_gemm]}"; return
            fi
        done
        (( n == 1 )) || break
        site=$("$PYTHON" -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)
        mapfile -t dirs < <(find /usr/local /opt /usr/lib ${site:+"$site"} -maxdepth 9 -name 'libcublasLt.so.13' \
                            -printf '%h\n' 2>/dev/null | sort -u)
        (( ${#dirs[@]} )) || break
    done
    META[fp8_gemm]="refused by every cuBLASLt tried ($n): FP8 GEMMs run through the 16-bit fallback"
    record FAIL "${META[fp8_gemm]}; last: $(grep -m1 -E 'refused|FAILED|rror' "$WORK/fp8_probe.$n.out" | cut -c1-160)"
}
# Synthetic llm.c token shards (a Zipfian mix of fixed random "phrases": learnable, no download; a
# validation shard of the same phrases, drawn apart), then the CPU twin's runs of the tracking
# checks, in the background while the GPU works (4 threads each: the bf16 one is waited for early).
step_data() {
    local p n=$(( V > 256 ? 1 << 22 : 1 << 16 )) threads=()
    need binaries || return
    [[ -n $NO_GPU ]] || threads=(--threads 4)
    mkdir -p "$DATA"
    "$PYTHON" - "$DATA" "$V" "$n" <<'EOF' 2>> "$LOG" || { record FAIL "could not write the shards"; return; }
import random, struct, sys
from array import array
data, V, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1234)
phrases = [[rng.randrange(V) for _ in range(rng.randint(4, 12))] for _ in range(20000)]
weights = [1.0 / (r + 1) ** 1.1 for r in range(len(phrases))]
for name, size in (("train", n), ("val", n // 16)):
    tokens = array("H")
    while len(tokens) < size:
        for pid in rng.choices(range(len(phrases)), weights=weights, k=100000):
            tokens.extend(phrases[pid])
    del tokens[size:]
    with open(f"{data}/synth_{name}_000000.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
        tokens.tofile(f)
EOF
    for p in bf16 fp8; do
        trainer_argv "track.cpu.$p" cpu d2 8 256 20 -p "$p" -l 3e-3 -u 2 --seed 1337 "${threads[@]}"
        nice -n 10 timeout 400 "${TRAINER_ARGV[@]}" > "$WORK/track.cpu.$p.out" 2>&1 &
        CPU_PID[$p]=$! BG_PIDS+=($!)
    done
    record PASS "$n training and $(( n / 16 )) validation tokens over a vocabulary of $V; the CPU twin's tracking runs started"
}

# ---- b. the CUDA tests, one process per group ---------------------------------------------------
# list_tests FILTER: the full names of the tests test_cuda runs under that GoogleTest filter
list_tests() {
    "$TEST" --gtest_list_tests --gtest_filter="$1" 2>/dev/null | awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }'
}
# step_tests FILTER: one GoogleTest process ('rest': every test that no other group, of STEPS or
# EXTRA_STEPS, selects, named one by one: a group's filter may hold negative patterns). A test
# SKIPPED on a GPU machine fails. The rest step also checks that no test is in two groups.
step_tests() {
    local filter=$1 rc=0 v g grouped twice rest
    need binaries || return
    if [[ $filter == rest ]]; then
        grouped=$(for g in "${TEST_GROUPS[@]}"; do list_tests "$g"; done | grep -v '^$' | LC_ALL=C sort)
        twice=$(uniq -d <<< "$grouped")
        [[ -z $twice ]] || { record FAIL "tests in two groups: $(head -5 <<< "$twice" | tr '\n' ' ')"; return; }
        rest=$(LC_ALL=C comm -23 <(list_tests '*' | LC_ALL=C sort) <(echo "$grouped"))
        [[ -n $rest ]] || { record SKIPPED "every test is in a group of its own"; return; }
        filter=$(paste -sd: <<< "$rest")
    fi
    run_logged "$CUR" env CUBLASLT_LOG_LEVEL=1 "$TEST" --gtest_color=no --gtest_filter="$filter" || rc=$?
    v=$("${PY[@]}" tests "$WORK/$CUR.out" "$rc")
    case ${v%%$'\t'*} in
        PASS) verdict PASS "${v#*$'\t'}" ;;
        NOGPU) if [[ -n $NO_GPU ]]; then record SKIPPED "$NO_GPU: ${v#*$'\t'}"
               else record FAIL "skipped on a GPU machine: ${v#*$'\t'}"; fi ;;
        *) record FAIL "${v#*$'\t'}" ;;
    esac
    grep -E '^(fp32|bf16|fp16|fp8)(_flash)? cuda vs cpu' "$WORK/$CUR.out" | sed 's/^/    /'
}

# ---- c. the attention lab against PyTorch SDPA ---------------------------------------------------
attn_note() {   # the `attn impl=$1` lines of $2, briefly
    awk -v impl="$1" '$2 == "impl=" impl {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%s%s·%s: fwd %s ms (%s TFLOP/s), bwd %s ms (%s)", sep, v["B"], v["NH"], v["fwd_ms"], v["fwd_tflops"], v["bwd_ms"], v["bwd_tflops"]; sep = "; " }' "$2"
}
# harnesses_missing NAME…: the dev/cuda harnesses not built (without a GPU: without a source; the
# tree's build in scripts/test.sh does not make them)
harnesses_missing() {
    local h
    for h in "$@"; do
        if [[ -n $NO_GPU ]]; then [[ -f dev/cuda/$h.cu ]] || echo -n " dev/cuda/$h.cu"
        else [[ -x $LAB_DIR/$h ]] || echo -n " $LAB_DIR/$h"; fi
    done
}
step_attention_ours() {
    local h=$LAB_DIR/attention_flash rc=0 missing
    need binaries || return
    missing=$(harnesses_missing attention_flash)
    [[ -z $missing ]] || { record FAIL "no$missing (make -C dev/cuda; --prepare bundles it)"; return; }
    [[ -n $NO_GPU ]] && { verdict SKIPPED ""; return; }
    run_logged "$CUR" "$h" --dtype bf16 --reps 30 || rc=$?
    if (( rc == 0 )) && (( $(grep -c '^attn impl=flash ' "$WORK/$CUR.out") == 2 )) &&
        (( $(grep -c '^attn impl=flash-wide ' "$WORK/$CUR.out") == 2 )); then
        record PASS "checked against the CPU twin; $(attn_note flash "$WORK/$CUR.out"); wide backward: $(attn_note flash-wide "$WORK/$CUR.out")"
    else
        record FAIL "exit $rc: $(grep -m3 -E 'FAILED|error' "$WORK/$CUR.out" | tr '\n' ' ')$(tail -1 "$WORK/$CUR.out")"
    fi
}
step_attention_sdpa() {
    local rc=0
    parses dev/cuda/attention_sdpa.py
    [[ -n $NO_GPU ]] && { verdict SKIPPED ""; return; }
    [[ -n $TORCH_VER ]] || { record SKIPPED "PyTorch is not installed"; return; }
    run_logged "$CUR" env PYTHONUNBUFFERED=1 "$PYTHON" dev/cuda/attention_sdpa.py --dtype bf16 --reps 30 || rc=$?
    if (( rc == 0 )) && (( $(grep -c '^attn impl=sdpa_flash' "$WORK/$CUR.out") == 2 )); then
        record PASS "torch $TORCH_VER; $(attn_note sdpa_flash "$WORK/$CUR.out")"
    elif grep -qiE 'no available kernel|flash.*(not|unavailable|disabled)' "$WORK/$CUR.out"; then
        record SKIPPED "PyTorch $TORCH_VER has no SDPA flash backend here: $(grep -v '^\s*$' "$WORK/$CUR.out" | tail -1 | cut -c1-160)"
    else
        record FAIL "exit $rc: $(grep -v '^\s*$' "$WORK/$CUR.out" | tail -1 | cut -c1-200)"
    fi
}

# ---- d, e. training runs ------------------------------------------------------------------------
# option_flags OPTIONS: the trainer's flags for a run's options (see STEPS) in OPTION_FLAGS; false,
# and the step SKIPPED, where the trainer lacks one (its --help, read by the build step)
option_flags() {
    local o f
    OPTION_FLAGS=()
    for o in ${1//,/ }; do
        case $o in
            fused) OPTION_FLAGS+=(--fused-kernels true) ;;
            tuned) OPTION_FLAGS+=(--gemm-autotune) ;;
            r[0-2]) OPTION_FLAGS+=(--recompute "${o#r}") ;;
            h[0-9]*) OPTION_FLAGS+=(--lm-head-chunks "${o#h}") ;;
            prof) OPTION_FLAGS+=(--profile) ;;
            epi) OPTION_FLAGS+=(--gemm-epilogues true) ;;
            wide) OPTION_FLAGS+=(--flash-backward wide) ;;
            -) ;;
            *) record FAIL "unknown option $o (a bug in gpu_check.sh's STEPS)"; return 1 ;;
        esac
    done
    for f in "${OPTION_FLAGS[@]}"; do
        [[ $f != --* ]] || grep -q -- "$f" "$WORK/help.txt" || { record SKIPPED "the trainer has no $f yet"; return 1; }
    done
}
# attention_flags ATTENTION: ATTN_FLAGS=(--attention ATTENTION), or none for '-' (the trainer's default)
attention_flags() { ATTN_FLAGS=(); [[ $1 == - ]] || ATTN_FLAGS=(--attention "$1"); }
# step_bench MODEL B PRECISION ATTENTION OPTIONS [BASELINE_MS]: one timed run of the trainer (with
# --profile only where OPTIONS name prof); its verdict from its losses and, given one, the baseline
step_bench() {
    local model=$1 B=$2 prec=$3 attn=$4 opts=$5 base=${6:-} flags rc=0 peak L C NH
    need binaries && need data && option_flags "$opts" || return
    attention_flags "$attn"
    flags=(-p "${prec%%-*}" "${ATTN_FLAGS[@]}" -l 6e-4 -u 0 "${OPTION_FLAGS[@]}")
    case $prec in
        fp8-auto) flags+=(--fp8-gemms auto) ;;
        fp8-mlp) flags+=(--fp8-gemms fc,fcproj) ;;
    esac
    mem_poll_start
    trainer "$CUR" cuda "$model" "$B" 1024 "$(bench_steps "$model")" "${flags[@]}" || rc=$?
    peak=$(mem_poll_stop)
    read -r L C NH <<< "${SHAPE[$RAN_MODEL]}"
    add_run engine "$L" "$C" "$prec" "$opts" "$rc" "$WORK/$CUR" "$peak" "$base"
    grep -m1 'fp8 GEMMs: auto' "$WORK/$CUR.out" | sed 's/^/    /'
    if [[ ,$opts, == *,prof,* ]]; then   # the per-op budget with its measured column (docs/op-budget.md)
        "$PYTHON" "$ROOT/scripts/op_budget.py" --model "$RAN_MODEL" -B "$RAN_B" -T "$RAN_T" --precision "${prec%%-*}" \
            --vocab "$V" --profile "$WORK/$CUR.out" --steps "${RAN_STEPS:-1}" > "$RESULTS/op_budget.$CUR.md" 2>> "$LOG" \
            || echo "    op_budget.py failed (see gpu_check.log)"
    fi
}
# step_torch MODEL B: the PyTorch peer (dev/reference/gpt2.py, bf16 autocast, torch.compile, SDPA)
step_torch() {
    local model=$1 B=$2 rc=0 peak L C NH
    read -r L C NH <<< "${SHAPE[$model]}"
    parses dev/reference/gpt2.py
    [[ -n $NO_GPU ]] && { verdict SKIPPED ""; return; }
    need data || return
    [[ -n $TORCH_VER ]] || { record SKIPPED "PyTorch is not installed"; return; }
    RAN_MODEL=$model RAN_B=$B RAN_T=1024
    mem_poll_start
    run_logged "$CUR" env PYTHONUNBUFFERED=1 "$PYTHON" dev/reference/gpt2.py --train-data "$DATA/synth_train_*.bin" \
        --n-layer "$L" --n-embd "$C" --n-head "$NH" --vocab-size "$V" --seq-len 1024 --batch-size "$B" \
        --steps "$(bench_steps "$model")" --lr 6e-4 --device cuda --dtype bf16 --compile --log "$WORK/$CUR.jsonl" || rc=$?
    peak=$(mem_poll_stop)
    add_run torch "$L" "$C" bf16 - "$rc" "$WORK/$CUR.jsonl" "$peak"
}
# step_loss STEPS ATTENTION OPTIONS: fp8 against bf16 on the same data, d12 B=8
step_loss() {
    local p v
    need binaries && need data && option_flags "$3" || return
    for p in bf16 fp8; do
        trainer "$CUR.$p" cuda d12 8 1024 "$1" -p "$p" --attention "$2" "${OPTION_FLAGS[@]}" -l 6e-4 -u 20 --seed 1337
    done
    v=$("${PY[@]}" loss "$WORK/$CUR.bf16/log.jsonl" "$WORK/$CUR.fp8/log.jsonl" "$RAN_STEPS" "$WORK/loss.json" 2>> "$LOG")
    [[ $v == PASS* || $v == FAIL* ]] || { STEP_BAD="the loss verdict failed (gpu_check_report.py loss)"; v="FAIL $STEP_BAD"; }
    verdict "${v%% *}" "d12 B=8 T=1024, --attention $2 ${OPTION_FLAGS[*]}: ${v#* }"
}
# step_track ATTENTION PRECISIONS: 20 steps of d2 (C=128, B=8, T=256, lr 3e-3) on the GPU in each
# precision of the comma list, against the CPU twin's runs (same seed, config, data; started by the
# data step); the verdict (gpu_check_report.py track) also fails a skipped step or a non-finite loss
step_track() {
    local attn=$1 precs=${2//,/ } p v rc notes="" status=PASS
    need binaries && need data || return
    attention_flags "$attn"
    for p in $precs; do
        trainer "$CUR.$p" cuda d2 8 256 20 -p "$p" "${ATTN_FLAGS[@]}" -l 3e-3 -u 2 --seed 1337
    done
    for p in $precs; do
        rc=0
        if [[ -n ${CPU_PID[$p]:-} ]]; then wait_pid "${CPU_PID[$p]}" || rc=$?; else rc=1; fi
        (( rc == 0 )) || [[ -n $STEP_BAD ]] || STEP_BAD="the CPU twin's $p run: exit $rc"
        v=$("${PY[@]}" track "$WORK/track.cpu.$p/log.jsonl" "$WORK/$CUR.$p/log.jsonl" "$p" "$RAN_STEPS" 2>> "$LOG")
        [[ $v == PASS* ]] || status=FAIL
        [[ $v == PASS* || $v == FAIL* ]] || STEP_BAD="the tracking verdict failed (gpu_check_report.py track)"
        notes+="${notes:+; }${v#* }"
    done
    verdict "$status" "attention ${attn/#-/the default}; $notes"
}
# step_memcheck PRECISION ATTENTION OPTIONS: compute-sanitizer memcheck on 2 training steps of d2
step_memcheck() {
    local prec=$1 san rc=0 summary
    need binaries && need data && option_flags "$3" || return
    attention_flags "$2"
    trainer_argv "$CUR" cuda d2 4 64 2 -p "$prec" "${ATTN_FLAGS[@]}" "${OPTION_FLAGS[@]}"
    [[ -n $NO_GPU ]] && { run_logged "$CUR" "${TRAINER_ARGV[@]}"; verdict SKIPPED ""; return; }
    san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    [[ -n $san ]] || { record SKIPPED "compute-sanitizer is not installed"; return; }
    run_logged "$CUR" "$san" --tool memcheck --leak-check no --error-exitcode 99 "${TRAINER_ARGV[@]}" || rc=$?
    summary=$(grep -m1 -o 'ERROR SUMMARY.*' "$WORK/$CUR.out")
    if grep -qiE 'device not supported|unable to (attach|initialize)|not supported on this' "$WORK/$CUR.out"; then
        record SKIPPED "compute-sanitizer refused the device: $(grep -m1 -iE 'not supported|unable to' "$WORK/$CUR.out")"
    elif [[ $summary == *"ERROR SUMMARY: 0 errors"* ]] && (( rc == 0 )); then
        record PASS "2 $prec steps of d2, attention ${2/#-/the default}${OPTION_FLAGS[*]:+ ${OPTION_FLAGS[*]}}: $summary"
    else
        record FAIL "${summary:-no error summary} (exit $rc): $(grep -m2 -E '^========= (Invalid|Program hit)' "$WORK/$CUR.out" | tr '\n' ' ')"
    fi
}
# step_sample MODEL B: the trainer with its own defaults (precision, attention, kernels, learning
# rate; no flag but the data's and the shape's), 10 steps at T=1024 with validation every 5 (2
# batches) and its default sample of 256 tokens at the end: the KV-cache decoding
# (attention_decode) every default run ends with. The verdict (gpu_check_report.py sample): it
# finished, healthy losses, finite val losses, a sample of 256 token ids.
step_sample() {
    local rc=0 v
    need binaries && need data || return
    EVAL=(-j "$DATA/synth_val_*.bin" -v 5 -m 2)
    trainer "$CUR" cuda "$1" "$2" 1024 10 || rc=$?
    EVAL=(-j '' -v 0 -g 0)
    v=$("${PY[@]}" sample "$WORK/$CUR" "$rc" 256 "$V" 2>> "$LOG")
    [[ $v == PASS* || $v == FAIL* ]] || { STEP_BAD="the sample verdict failed (gpu_check_report.py sample)"; v="FAIL"$'\t'"$STEP_BAD"; }
    verdict "${v%%$'\t'*}" "$1 B=$2 T=$RAN_T, $RAN_STEPS steps, the trainer's defaults: ${v#*$'\t'}"
}
# step_lab: the dev/cuda harnesses of LAB_HARNESSES (each checks against the CPU twin and times),
# output in lab.log
step_lab() {
    local h failed="" missing
    (( LAB )) || { record SKIPPED "LAB=0"; return; }
    need binaries || return
    # shellcheck disable=SC2086  # a list of names
    missing=$(harnesses_missing $LAB_HARNESSES)
    [[ -z $missing ]] || { record FAIL "no$missing (make -C dev/cuda; --prepare bundles them)"; return; }
    [[ -n $NO_GPU ]] && { verdict SKIPPED ""; return; }
    for h in $LAB_HARNESSES; do
        run_logged "lab.$h" "$LAB_DIR/$h" --reps 20 --dtype bf16 || failed+=" $h"
        append_capped "$WORK/lab.$h.out" "$RESULTS/lab.log"
    done
    [[ -z $failed ]] && record PASS "$LAB_HARNESSES: checks OK (timings in lab.log)" || record FAIL "failed or timed out:$failed (lab.log)"
}

# ---- the run --------------------------------------------------------------------------------------
cleanup() {
    local pid
    for pid in "${BG_PIDS[@]}" ${MEM_PID:-}; do kill "$pid" 2>/dev/null; done
    rm -rf "$WORK"
}
on_signal() {
    [[ -n $CUR && ${STATUS[$CUR]:-} == running ]] && STATUS[$CUR]="cut short" NOTE[$CUR]="stopped by a signal at $(elapsed) s"
    write_state
    exit 143
}
trap cleanup EXIT
trap on_signal TERM INT
log "budget $BUDGET s; results in $RESULTS${MODE:+ ($MODE)}"
caps_order; ORDER=$CAPS_TEXT MAIN_SUM=$CAPS_SUM
caps_order extra; EXTRA_ORDER=$CAPS_TEXT EXTRA_SUM=$CAPS_SUM
log "the steps in order (id, cap in s): $ORDER; caps $MAIN_SUM s of the $(( BUDGET - RESERVE )) s the budget leaves" | tee -a "$LOG"
log "extra steps, run only where GPU_CHECK_ONLY names them: $EXTRA_ORDER ($EXTRA_SUM s)" | tee -a "$LOG"
(( MAIN_SUM <= BUDGET - RESERVE )) || log "warning: the caps add up to more than the budget: the last steps may be not reached" | tee -a "$LOG"
run_steps
META[finished]=1
write_state
cat "$RESULTS/gpu_results.md" >> "$LOG"
echo
echo "==================== gpu_check summary ($RESULTS/gpu_results.md) ===================="
sed '/^Where the GPU time goes/,/^$/d' "$RESULTS/gpu_results.md"
echo "Targets again (the full summary, --profile shares included, is in gpu_results.md):"
sed -n '/^| target |/,/^$/p' "$RESULTS/gpu_results.md"
if [[ $MODE == --dry-run ]]; then
    # What the dry run proved, counted as what it is (scripts/test.sh adds it up). passed: what ran
    # here and was checked: a step that PASSed here (build: the binaries load; data: the shard),
    # the wiring check of a GPU step where it ran a command (the trainer with the step's flags on
    # 2 CPU steps, a test filter run, the probe test listed), and the report's selftest. skipped:
    # every GPU step, which could not run (its wiring check, where it has one, counted apart).
    # failed: a step that FAILed (a wiring command that exited non-zero), or was not reached.
    passed=0 failed=0 skipped=0 wired=0
    declare -A SAME=()
    # The plan: the order and the caps, which must fit the budget with the default group first
    echo "gpu_check_dry_run: the run's order (id cap/s): $ORDER"
    echo "gpu_check_dry_run: extra steps (only where GPU_CHECK_ONLY names them): $EXTRA_ORDER"
    read -r -a first <<< "$(for line in "${STEPS[@]}"; do read -r -a f <<< "$line"; echo -n "${f[0]} "; done)"
    if (( MAIN_SUM <= BUDGET - RESERVE )) && [[ "${first[*]:0:4}" == "build machine data default" ]]; then
        passed=$(( passed + 1 ))
        echo "gpu_check_dry_run: PASS caps: the ${#STEPS[@]} steps' caps add up to $MAIN_SUM s, within the $(( BUDGET - RESERVE )) s of the $BUDGET s budget less $RESERVE s kept for the last summary; the default group first after setup (extra steps: $EXTRA_SUM s)"
    else
        failed=$(( failed + 1 ))
        echo "gpu_check_dry_run: FAIL caps: the ${#STEPS[@]} steps' caps add up to $MAIN_SUM s against the $(( BUDGET - RESERVE )) s of the budget less $RESERVE s, or the default group is not first after setup (${first[*]:0:4})"
    fi
    # The log's caps, on made-up output: a long output keeps its first and last LOG_KEEP_KIB KiB,
    # and past LOG_MAX_MIB MiB of log only the last 2 KiB of each command
    t=$WORK/capcheck
    head -c $(( 300 << 10 )) /dev/urandom | base64 > "$t.out"
    : > "$t.log"; append_capped "$t.out" "$t.log"
    small=$(stat -c %s "$t.log")
    truncate -s $(( LOG_MAX_MIB << 20 )) "$t.full"; append_capped "$t.out" "$t.full"
    over=$(( $(stat -c %s "$t.full") - (LOG_MAX_MIB << 20) ))
    if (( small <= 2 * LOG_KEEP_KIB * 1024 + 300 && over <= 2048 + 300 )) && grep -q '^\[gpu_check: .* left out here' "$t.log" \
       && cmp -s <(head -c 4096 "$t.out") <(head -c 4096 "$t.log") && cmp -s <(tail -c 4096 "$t.out") <(tail -c 4096 "$t.log"); then
        passed=$(( passed + 1 ))
        echo "gpu_check_dry_run: PASS log caps: $(stat -c %s "$t.out") bytes of output leave $small in the log (its first and last $LOG_KEEP_KIB KiB), $over past $LOG_MAX_MIB MiB of log; this run's log: $(stat -c %s "$LOG") bytes"
    else
        failed=$(( failed + 1 ))
        echo "gpu_check_dry_run: FAIL log caps: $(stat -c %s "$t.out") bytes of output left $small bytes in the log, $over past $LOG_MAX_MIB MiB"
    fi
    rm -f "$t".*
    for line in "${ALL_STEPS[@]}"; do
        read -r -a f <<< "$line"
        id=${f[0]} fn=${f[2]}
        # the commands the step ran, each of which exited 0 (run_logged's lines in the log), and
        # what they were (their output directory left out): a step whose wiring ran the very
        # commands of an earlier one's (d12 and d48 both shrink to d2) is not counted again
        ran=$(awk -v id="$id" '$1 == "====" { in_step = ($2 == id) } in_step && /^== .*: exit 0 at [0-9]+ s$/ { n++ }
                              END { print n + 0 }' "$LOG")
        cmds=$(awk -v id="$id" '$1 == "====" { in_step = ($2 == id) }
                                in_step && /^== [^ ]+ \([0-9]+ s\): / { sub(/^== [^ ]+ \([0-9]+ s\): /, ""); gsub(/-o [^ ]+/, "-o OUT"); print }' "$LOG")
        case $fn in
            step_fp8_probe) what="its probe test is in test_cuda's list"
                            [[ ${STATUS[$id]} == SKIPPED && ${NOTE[$id]} == "$NO_GPU" ]] && ran=1 ;;
            step_tests) what="test_cuda run with its filter (its tests SKIPPED without a GPU)"
                        [[ ${f[3]} == rest ]] && what+="; the groups split the suite" ;;
            step_bench) what="the trainer with the step's flags, 2 CPU steps of d2, its output read" ;;
            step_loss) what="bf16 and fp8 trainer runs of 2 CPU steps, the loss verdict computed" ;;
            step_track) what="2 CPU steps in the step's precisions beside the CPU twin's runs, compared" ;;
            step_memcheck) what="the trainer's command, 2 CPU steps in the step's precision (without compute-sanitizer)" ;;
            step_sample) what="the trainer with its defaults, validation and a 256-token sample, 2 CPU steps of d2, the sample verdict computed" ;;
            step_attention_ours|step_lab) what="checked, not run: the harness sources exist"; ran=0 ;;
            step_attention_sdpa|step_torch) what="checked, not run: the Python script parses"; ran=0 ;;
            *) what="nothing to check without a GPU"; ran=0 ;;
        esac
        case ${STATUS[$id]} in
            PASS) passed=$(( passed + 1 )); echo "gpu_check_dry_run: PASS $id (ran here: ${NOTE[$id]})" ;;
            SKIPPED)
                skipped=$(( skipped + 1 ))
                if (( ran > 0 )) && [[ -n ${SAME[$fn$cmds]:-} ]]; then
                    echo "gpu_check_dry_run: SKIPPED $id: ${NOTE[$id]} (wiring: the same commands as ${SAME[$fn$cmds]}.wiring, not counted again)"
                elif (( ran > 0 )); then
                    passed=$(( passed + 1 )) wired=$(( wired + 1 )) SAME[$fn$cmds]=$id
                    echo "gpu_check_dry_run: PASS $id.wiring ($what); SKIPPED $id: ${NOTE[$id]}"
                else
                    echo "gpu_check_dry_run: SKIPPED $id: ${NOTE[$id]} (wiring: $what)"
                fi ;;
            *) failed=$(( failed + 1 )); echo "gpu_check_dry_run: FAIL $id: ${STATUS[$id]}: ${NOTE[$id]:-}" ;;
        esac
    done
    # the summary's arithmetic on made-up figures
    if "${PY[@]}" selftest; then passed=$(( passed + 1 )); else failed=$(( failed + 1 )); fi
    echo "gpu_check_dry_run: passed = the caps' and the log caps' checks, the steps that passed here, $wired GPU steps' wiring checks that ran commands (distinct ones), the report's selftest; skipped = the GPU steps (no GPU)"
    echo "gpu_check_dry_run: $passed passed, $failed failed, $skipped skipped"
    exit $(( failed > 0 ))
fi
for id in "${IDS[@]}"; do [[ ${STATUS[$id]} == FAIL ]] && exit 1; done
exit 0
