#!/usr/bin/env bash
# check_kernel_sets.sh — the suites that compare numbers, under several of OpenBLAS's kernel sets,
# so that a tolerance that holds only for this machine's summation order fails here first.
#
#   scripts/check_kernel_sets.sh             (after make; scripts/test.sh runs it)
#   KERNEL_SETS='Haswell Zen' scripts/check_kernel_sets.sh
#
# Debian's libopenblas is built DYNAMIC_ARCH: it picks its kernels (and their blocking, hence the
# order in which a GEMM sums) by CPU at load time, and OPENBLAS_CORETYPE=NAME forces a set. For
# each of KERNEL_SETS (Prescott Haswell SkylakeX Cooperlake Zen) this script:
#   * checks that this CPU has the instructions the set needs (SSE3; AVX2 and FMA; AVX-512 F, BW,
#     DQ, VL; Cooperlake also AVX512_BF16); without them the set is SKIPPED, as it would fault
#     (another name given in KERNEL_SETS gets only OpenBLAS's own check);
#   * asks OpenBLAS which kernels it really loads (OPENBLAS_VERBOSE=2 prints "Core: NAME"): where
#     that is not the set asked for (OpenBLAS 0.3.21 does not accept the name "Cooperlake" and
#     autodetects: on a Cooperlake-class CPU, AVX-512 with BF16 such as this AMD EPYC, that is
#     Cooperlake anyway, and the run counts; on another CPU it is not, and the set is SKIPPED),
#     the set is SKIPPED with the name OpenBLAS used;
#   * runs build/test_cpu --gtest_filter=FILTER (below: the CPU kernels, attention, the chunked LM
#     head, recompute, generation, the precision modes, FP8 scaling, the loss scaler, the PyTorch
#     parity, and the numerical parts of the distributed suite: losses across world sizes and
#     bit-exact resumes; not the I/O-heavy through-the-binary suites, not the exhaustive dtype
#     tables, which use no BLAS). The trainer those tests start (also under mpirun) inherits
#     OPENBLAS_CORETYPE. It passes when every selected test ran and passed;
#   * runs build/test_mpi on 2 ranks (as scripts/test.sh does) where it loads OpenBLAS; where it
#     does not (ldd: it tests the MPI Comm, no GEMM), the kernel set cannot change what it
#     computes, and its check is SKIPPED with that reason.
# The rest of scripts/test.sh runs with the environment's kernel set (OPENBLAS_CORETYPE as set,
# else autodetected); the first line says which. A filter pattern that selects no test fails (a
# renamed suite would drop out silently).
# One check per (kernel set, binary): "check_kernel_sets: PASS|FAIL|SKIPPED SET BINARY ...", then
# the tests that failed under each set, and last "check_kernel_sets: P passed, F failed, S skipped"
# (scripts/test.sh counts it). About 25 s per kernel set on two cores.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

SETS=${KERNEL_SETS:-"Prescott Haswell SkylakeX Cooperlake Zen"}
FILTER_PATTERNS=(
    'CpuKernels.*'
    'AttentionTiled.*' 'AttentionTiling.*'
    'AllPrecisions/LmHeadChunks.*' 'LmHeadChunksApi.*' 'LmHeadChunksMemory.*' 'LmHeadChunksTrainer.*'
    'AllPrecisions/Recompute.*' 'RecomputeMemory.*' 'RecomputeCli.*'
    'Generate.*'
    'Precision.*' 'Fp8Kernels.*'
    'Fp8Scaling.*' 'Fp8Counters.*' 'Fp8ScaleSlots.*'
    'LossScaler.*'
    'ReferenceParity.*'
    'Distributed.OneTwoAndFourRanksGiveTheSameLossesWithAndWithoutZero'
    'Distributed.MixedPrecisionAgreesAcrossWorldSizes'
    'Distributed.ResumeIsBitExact*'
)
FILTER=$(IFS=:; echo "${FILTER_PATTERNS[*]}")

passed=0 failed=0 skipped=0
failures=()   # "SET: test, test, …"
pass() { echo "check_kernel_sets: PASS $*"; passed=$(( passed + 1 )); }
fail() { echo "check_kernel_sets: FAIL $*"; failed=$(( failed + 1 )); }
skip() { echo "check_kernel_sets: SKIPPED $*"; skipped=$(( skipped + 1 )); }
finish() {
    local f
    for f in "${failures[@]}"; do echo "check_kernel_sets: failed under $f"; done
    echo "check_kernel_sets: $passed passed, $failed failed, $skipped skipped"
    exit $(( failed > 0 ))
}

for bin in build/test_cpu build/test_mpi; do
    [[ -x $bin ]] || { fail "no $bin (build first: make tests)"; finish; }
done
env_core=$(OPENBLAS_VERBOSE=2 build/test_cpu --gtest_list_tests 2>&1 | sed -n 's/^Core: \([A-Za-z0-9_]*\).*/\1/p' | tail -1)
echo "check_kernel_sets: the environment's kernel set: ${env_core:-unknown} (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset})"

# the tests the filter selects; each pattern must select one at least
selected=$(build/test_cpu --gtest_list_tests --gtest_filter="$FILTER" | grep -c '^  ')
for p in "${FILTER_PATTERNS[@]}"; do
    (( $(build/test_cpu --gtest_list_tests --gtest_filter="$p" | grep -c '^  ') > 0 )) ||
        fail "the filter pattern $p selects no test of build/test_cpu"
done
echo "check_kernel_sets: the filter selects $selected of $(build/test_cpu --gtest_list_tests | grep -c '^  ') tests of build/test_cpu"

mpi_blas=$(ldd build/test_mpi 2>/dev/null | grep -c 'libopenblas')
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
# needs SET: the /proc/cpuinfo flags the kernel set's instructions need
needs() {
    case $1 in
        Prescott) echo "sse3" ;;   # /proc/cpuinfo calls SSE3 pni
        Haswell|Zen) echo "avx2 fma" ;;
        SkylakeX) echo "avx512f avx512bw avx512dq avx512vl" ;;
        Cooperlake) echo "avx512f avx512bw avx512dq avx512vl avx512_bf16" ;;
        *) ;;   # another name of KERNEL_SETS: OpenBLAS's own check only
    esac
}

# run_gtest SET BINARY COMMAND…: one check; passes when the command exits 0 and its PASSED count is
# every test it selected
run_gtest() {
    local set=$1 name=$2 log rc=0 t0 ran ok bad
    shift 2
    log=$(mktemp)
    t0=$SECONDS
    OPENBLAS_CORETYPE=$set "$@" > "$log" 2>&1 || rc=$?
    ran=$(grep -c '^\[ RUN      \]' "$log")
    ok=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    bad=$(awk '/^\[  FAILED  \] / && $5 != "tests," && $5 != "test," { sub(/,$/, "", $4); print $4 }' "$log" | sort -u | tr '\n' ' ')
    bad=${bad% }
    if (( rc == 0 )) && [[ -n $ok ]] && (( ok == ran && ran > 0 )); then
        pass "$set $name: $ok tests ($(( SECONDS - t0 )) s)"
    else
        fail "$set $name: exit $rc, ${ok:-0} of $ran tests passed ($(( SECONDS - t0 )) s)${bad:+; failed: $bad}"
        # each failed test's messages (at most 12 lines of each, 40 in all)
        awk '/^\[ RUN      \]/ { n = 0; block = "" } { if (n++ < 12) block = block "\n" $0 }
             /^\[  FAILED  \] .*\([0-9]+ ms\)$/ { printf "%s\n", block }' "$log" | sed '/^$/d' | head -40 | sed 's/^/    /'
        [[ -n $bad ]] || tail -15 "$log" | sed 's/^/    /'
        failures+=("$set: ${bad:-$name exited $rc}")
    fi
    rm -f "$log"
}

for set in $SETS; do
    missing=""
    for f in $(needs "$set"); do
        [[ $flags == *" ${f/sse3/pni} "* ]] || missing+=" $f"
    done
    if [[ -n $missing ]]; then
        skip "$set build/test_cpu: this CPU lacks$missing"
        skip "$set build/test_mpi: this CPU lacks$missing"
        continue
    fi
    probe=$(OPENBLAS_CORETYPE=$set OPENBLAS_VERBOSE=2 build/test_cpu --gtest_list_tests 2>&1 | head -5)
    core=$(sed -n 's/^Core: \([A-Za-z0-9_]*\).*/\1/p' <<< "$probe" | tail -1)
    how=""
    grep -q "^Core not found: $set" <<< "$probe" && how=" (by autodetection: this OpenBLAS does not accept OPENBLAS_CORETYPE=$set)"
    if [[ $core != "$set" ]]; then
        why="OpenBLAS loaded the ${core:-unnamed} kernels instead${how:+ (it does not accept OPENBLAS_CORETYPE=$set and autodetected)}"
        skip "$set build/test_cpu: $why"
        skip "$set build/test_mpi: $why"
        continue
    fi
    echo "check_kernel_sets: $set: OpenBLAS loads the $core kernels$how"
    run_gtest "$set" build/test_cpu build/test_cpu --gtest_color=no --gtest_filter="$FILTER"
    if (( mpi_blas > 0 )); then
        run_gtest "$set" "build/test_mpi -np 2" timeout 300 mpirun --oversubscribe --allow-run-as-root -np 2 \
            -x OPENBLAS_CORETYPE build/test_mpi --gtest_color=no
    else
        skip "$set build/test_mpi: it does not load OpenBLAS (ldd), so the kernel set changes nothing it computes"
    fi
done
finish
