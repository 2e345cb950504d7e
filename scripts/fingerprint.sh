#!/usr/bin/env bash
# fingerprint.sh — what the trainer computes, as one line per fact, so that a refactor can be
# shown to change nothing: run it before and after, and diff the two outputs.
#
#   scripts/fingerprint.sh > before.txt      (on the old commit; needs make and data/kjv)
#   scripts/fingerprint.sh > after.txt       (on the new one)
#   diff before.txt after.txt                (no output: bit-identical behaviour)
#
# For fp32, bf16, fp16 and fp8 on the CPU kernel set, on 1 rank and on 2 ranks (mpirun, ZeRO-1),
# it trains d2 for 8 steps with gradient accumulation, val loss, a checkpoint at steps 4 and 8,
# FP8 telemetry and a sample, then resumes from step 4 for 4 steps. It prints the hash of every
# log.jsonl record with its wall-clock fields (ms, tok_per_s, and any time field) and paths removed, and the
# manifest's state (step, data position, loss-scale and FP8 state, counters; not the embedded
# config.json, whose rendering is not behaviour) and the XXH3 checksum of every weight and state file.
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
drop = {"ms", "tok_per_s", "elapsed_s", "eta_s", "mfu", "time", "wall_time", "unix_time", "path"}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "resume" or r.get("kind") == "resume":
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
    state = {k: v for k, v in m.items() if k not in ("train_config", "files")}
    if isinstance(state.get("extra"), dict):
        state["extra"].pop("seconds", None)   # wall time
        state["extra"].pop("flags", None)     # the run's flags (paths of this script's scratch directory)
    print(step, "manifest", hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16])
    for name, rec in sorted(m["files"].items()):
        if name.startswith("tokenizer") or name in ("vocab.json", "merges.txt", "special_tokens_map.json", "config.json"):
            continue
        print(step, name, rec["bytes"], rec["xxh3_64"])
EOF
}

common=(-e d2 -b 4 -t 64 -x 8 -l 1e-3 -u 2 -v 4 -m 2 -g 12 --checkpoint-every 4 --keep-checkpoints 5
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
        log_digest "$out/log.jsonl"
        echo "== $precision np=$np checkpoints"
        ckpt_digest "$out/checkpoints"
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
