#!/usr/bin/env bash
# fingerprint.sh — what the trainer computes, as one line per fact, so that a refactor can be
# shown to change nothing: run it before and after, and diff the two outputs.
#
#   scripts/fingerprint.sh > before.txt      (on the old commit; needs make and data/kjv)
#   scripts/fingerprint.sh > after.txt       (on the new one)
#   diff before.txt after.txt                (no output: bit-identical behaviour)
#
# For fp32, bf16, fp16 and fp8 on the CPU kernel set (--device cpu, also on a GPU machine), on 1
# rank and on 2 ranks (mpirun, ZeRO-1), it trains d2 for 8 steps with gradient accumulation, val
# loss, a checkpoint at steps 4 and 8, FP8 telemetry and a sample, then resumes from step 4 for 4
# steps. Then, on 1 rank and without the resume, the flagged CPU paths: --recompute 1 and 2 (fp32,
# bf16), --lm-head-chunks 3 (fp32, fp16), fp8 with --fp8-gemms qkv,fc and none; and
# --fused-kernels true and --attention flash (bf16), which the CPU kernel set does not read (they
# choose CUDA kernels; the CPU runs its one exact attention): they are run to show that, and each
# flagged run's section ends with whether its hashes equal the default run's in that precision.
# It prints the hash of every log.jsonl record with its wall-clock fields (ms, tok_per_s, and any
# time field), paths and the run's identity removed (and its start and resume records, which hold
# nothing else), and the manifest's state (step, data position, loss-scale and FP8 state, counters;
# not the embedded config.json, whose rendering is not behaviour, nor the run's flags or identity)
# and the XXH3 checksum of every weight and state file.
#
# What it promises: the hashes are of this machine's CPU kernel set with this machine's OpenBLAS
# kernels. OpenBLAS (Debian's is DYNAMIC_ARCH) picks its GEMM kernels, and so the order in which a
# GEMM sums, by CPU or by OPENBLAS_CORETYPE: Haswell, SkylakeX, Cooperlake, Zen and Prescott give
# different low bits, and so different hashes. The first line names the kernel set; compare a
# before and an after made on the same machine with the same OPENBLAS_CORETYPE (and the same
# OpenBLAS), never two machines' outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x ./train_gpt ]] || { echo "fingerprint: build ./train_gpt first (make)" >&2; exit 1; }
scripts/prepare_kjv.sh >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=/usr/bin/python3

# the log records without the fields that measure time, one hash per record
log_digest() {
    "$python" - "$1" <<'EOF'
import hashlib, json, sys
# and the run's identity and directory (drawn per run, and where the run was started: not computed)
drop = {"ms", "tok_per_s", "elapsed_s", "eta_s", "mfu", "time", "wall_time", "unix_time", "path", "run_id",
        "output_dir", "manifest"}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") in ("resume", "start") or r.get("kind") == "resume":
        continue
    r = {k: v for k, v in r.items() if k not in drop}
    text = json.dumps(r, sort_keys=True)
    print(hashlib.sha256(text.encode()).hexdigest()[:16], text[:60])
EOF
}

ckpt_digest() {
    "$python" - "$1" <<'EOF'
import hashlib, json, os, sys
root = sys.argv[1]
for step in sorted(d for d in os.listdir(root) if d.startswith("step_")):   # not train_gpt.lock
    m = json.load(open(os.path.join(root, step, "manifest.json")))
    # (and its own checksum, which covers the wall time and identity dropped below)
    state = {k: v for k, v in m.items() if k not in ("train_config", "files", "manifest_xxh3")}
    if isinstance(state.get("extra"), dict):
        state["extra"].pop("seconds", None)   # wall time
        state["extra"].pop("flags", None)     # the run's flags (paths of this script's scratch directory)
        state["extra"].pop("run_id", None)    # the run's identity, drawn when it starts
        state["extra"].pop("path_dirs", None)     # where its relative paths are (this script's scratch directory)
        state["extra"].pop("working_dir", None)   # the same, as the reference commit records it
    print(step, "manifest", hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16])
    for name, rec in sorted(m["files"].items()):
        if name.startswith("tokenizer") or name in ("vocab.json", "merges.txt", "special_tokens_map.json", "config.json"):
            continue
        print(step, name, rec["bytes"], rec["xxh3_64"])
EOF
}

# the OpenBLAS kernel set these hashes are of (OPENBLAS_VERBOSE=2 names it as the library loads)
core=$(OPENBLAS_VERBOSE=2 ./train_gpt --help 2>&1 | sed -n 's/^Core: \([A-Za-z0-9_]*\).*/\1/p' | tail -1)
echo "== OpenBLAS kernel set: ${core:-unknown} (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset})"

common=(--device cpu -e d2 -b 4 -t 64 -x 8 -l 1e-3 -u 2 -v 4 -m 2 -g 12 --checkpoint-every 4 --keep-checkpoints 5
        --fp8-telemetry-every 3 --threads 1 --seed 7)
for precision in fp32 bf16 fp16 fp8; do
    for np in 1 2; do
        out=$work/$precision-$np
        launch=(./train_gpt)
        extra=(-d $((4 * 64 * 2 * np)))   # two micro-batches per step
        if (( np > 1 )); then
            launch=(mpirun --oversubscribe --allow-run-as-root -np "$np" ./train_gpt)
            extra+=(--zero 1)
        fi
        "${launch[@]}" "${common[@]}" "${extra[@]}" -p "$precision" -o "$out" >"$out.stdout" 2>&1 ||
            { echo "fingerprint: $precision np=$np failed:" >&2; tail -20 "$out.stdout" >&2; exit 1; }
        echo "== $precision np=$np log"
        log_digest "$out/log.jsonl" | tee "$out.digest"
        echo "== $precision np=$np checkpoints"
        ckpt_digest "$out/checkpoints" | tee -a "$out.digest"
        # resume from step 4 in a copy: the steps after it must repeat the first run's
        cp -r "$out" "$out-resume"
        rm -rf "$out-resume/checkpoints/step_00000008" "$out-resume/log.jsonl"
        "${launch[@]}" "${common[@]}" "${extra[@]}" -p "$precision" -o "$out-resume" \
            --checkpoint-dir "$out-resume/checkpoints" --resume >"$out-resume.stdout" 2>&1 ||
            { echo "fingerprint: $precision np=$np resume failed:" >&2; tail -20 "$out-resume.stdout" >&2; exit 1; }
        echo "== $precision np=$np resumed log"
        log_digest "$out-resume/log.jsonl"
    done
done

# The flagged CPU paths: 1 rank, the same run as the default's above (no resume), and whether it
# computes what the default run of its precision computes.
flagged=(
    "fp32 --recompute 1" "bf16 --recompute 1"
    "fp32 --recompute 2" "bf16 --recompute 2"
    "fp32 --lm-head-chunks 3" "fp16 --lm-head-chunks 3"
    "fp8 --fp8-gemms qkv,fc" "fp8 --fp8-gemms none"
    "bf16 --fused-kernels true" "bf16 --attention flash"
)
for run in "${flagged[@]}"; do
    read -r precision flags <<< "$run"
    out=$work/$precision-1-${flags//[ ,-]/_}
    # shellcheck disable=SC2086  # $flags: the flag and its value
    ./train_gpt "${common[@]}" -d $((4 * 64 * 2)) -p "$precision" $flags -o "$out" >"$out.stdout" 2>&1 ||
        { echo "fingerprint: $precision $flags failed:" >&2; tail -20 "$out.stdout" >&2; exit 1; }
    echo "== $precision np=1 $flags log"
    log_digest "$out/log.jsonl" | tee "$out.digest"
    echo "== $precision np=1 $flags checkpoints"
    ckpt_digest "$out/checkpoints" | tee -a "$out.digest"
    if cmp -s "$out.digest" "$work/$precision-1.digest"; then
        echo "== $precision np=1 $flags: every hash equals the default run's"
    else
        echo "== $precision np=1 $flags: differs from the default run"
    fi
done
