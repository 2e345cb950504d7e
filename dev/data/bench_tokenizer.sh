#!/usr/bin/env bash
# bench_tokenizer.sh — BPE encoding throughput of llmc/data/bpe.cpp vs tiktoken, and training time.
#
#   make && scripts/prepare_kjv.sh && dev/data/bench_tokenizer.sh
#
# Both sides encode the same text (data/kjv/kjv.txt, 4.1 MB, as one string) on one thread,
# one after the other, with the same vocabulary: GPT-2's (../shared/data/gpt2) and the KJV BPE
# (data/kjv, vocab 2048). Each figure is the best of REPEAT runs; ours starts each run with an
# empty pre-token cache. Then it times training a BPE of 8192 tokens on the same text with
# THREADS threads. Prints a markdown table. Needs tiktoken in /usr/bin/python3
# (scripts/setup.sh --test installs it).
#
# Overrides (environment): TEXT (data/kjv/kjv.txt), REPEAT (3), THREADS (2), TRAIN_VOCAB (8192).
set -euo pipefail
cd "$(dirname "$0")/../.."

TEXT=${TEXT:-data/kjv/kjv.txt}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-2}
TRAIN_VOCAB=${TRAIN_VOCAB:-8192}
PYTHON=/usr/bin/python3

die() { echo "bench_tokenizer: error: $*" >&2; exit 1; }
[[ -x build/bench_tokenizer ]] || die "build/bench_tokenizer is missing; run make"
[[ -f $TEXT ]] || die "$TEXT is missing; run scripts/prepare_kjv.sh"
"$PYTHON" -c 'import tiktoken' 2>/dev/null || die "$PYTHON cannot import tiktoken (scripts/setup.sh --test installs it)"

field() { "$PYTHON" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

vocabs=("../shared/data/gpt2" "data/kjv")
echo "| vocabulary | tokens | train_gpt tok/s | tiktoken tok/s | ratio |"
echo "|---|---:|---:|---:|---:|"
for dir in "${vocabs[@]}"; do
    if [[ ! -f $dir/encoder.json ]]; then echo "bench_tokenizer: skipping $dir (no encoder.json)" >&2; continue; fi
    ours=$(build/bench_tokenizer --input "$TEXT" --bpe-dir "$dir" --repeat "$REPEAT")
    theirs=$("$PYTHON" dev/data/tiktoken_oracle.py bench --bpe-dir "$dir" --input "$TEXT" --repeat "$REPEAT")
    n_ours=$(field "$ours" tokens)
    n_theirs=$(field "$theirs" tokens)
    [[ $n_ours == "$n_theirs" ]] || die "token counts differ on $dir: $n_ours vs $n_theirs"
    "$PYTHON" - "$dir" "$ours" "$theirs" <<'EOF'
import json, sys
d, a, b = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"| {d} | {a['tokens']} | {a['tokens_per_s']/1e6:.2f}M | {b['tokens_per_s']/1e6:.2f}M | "
      f"{a['tokens_per_s']/b['tokens_per_s']:.2f}x |")
EOF
done
train=$(build/bench_tokenizer --input "$TEXT" --train-vocab "$TRAIN_VOCAB" --threads "$THREADS")
echo
echo "training vocab $(field "$train" vocab) on $TEXT with $THREADS threads: $(field "$train" train_seconds) s"
