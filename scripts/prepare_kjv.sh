#!/usr/bin/env bash
# prepare_kjv.sh — build the default training corpus, the King James Bible, with no download.
#
#   make && scripts/prepare_kjv.sh
#
# Text comes from Debian's bible-kjv package (`bible`); each verse's leading reference
# ("Ge1:1 ", "1Chr3:4 ", "SSol1:1 ") is stripped so the text is plain prose, one verse a line,
# and every 20th chapter is moved to the end, where the 5% validation split is cut.
# build/prepare_text then trains a GPT-2-style byte-level BPE of 2048 tokens on it (under a
# second) and writes its shards:
#   data/kjv/kjv.txt                the text (4.1 MB)
#   data/kjv/encoder.json, vocab.bpe the trained BPE, GPT-2's file format (the cache)
#   data/kjv/tokenizer.bin          its decode table (vocab 2048, <|endoftext|> = 2047)
#   data/kjv/kjv_train_000000.bin   ~95% of the tokens (~1.1M)
#   data/kjv/kjv_val_000000.bin     the last ~5%: every 20th chapter
# 2048 keeps the default model's LM head small for the one-minute CPU run.
# Idempotent: if those files exist (the shards whole) it says so and does nothing; if only the
# shards are missing or damaged, the cached BPE is reused (--bpe-dir) rather than retrained; a
# kjv.txt cut short is made again. A byte-level data/kjv from an earlier version (no
# encoder.json) is rebuilt.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."   # the repo root, wherever this is called from

out=data/kjv
vocab=2048
# a shard in llm.c's format: the magic 20240520 first, then the 1024-byte header and the tokens
# its header counts (uint16 each: the KJV's vocabulary fits), no more, no less. One damaged outside
# the tool (prepare_text writes atomically) is made again rather than called ready.
shard_ok() {
    [[ -f $1 ]] || return 1
    local header size
    header=($(od -An -t d4 -N12 "$1" 2>/dev/null)) || return 1
    size=$(stat -c %s "$1")
    [[ ${#header[@]} == 3 && ${header[0]} == 20240520 ]] && (( size == 1024 + 2 * header[2] ))
}
# prepare_text's marker: a run cut short while it put the shards in place (whole, but maybe of two
# preparations); the trainer refuses them, so they are made again (prepare_text finishes the job)
if [[ -e $out/kjv.publishing ]]; then
    echo "prepare_kjv: $out/kjv.publishing: an earlier preparation was cut short; making the shards again"
elif [[ -f $out/tokenizer.bin && -f $out/encoder.json && -f $out/vocab.bpe ]] &&
   shard_ok "$out/kjv_train_000000.bin" && shard_ok "$out/kjv_val_000000.bin"; then
    echo "data/kjv ready"
    exit 0
fi
for shard in "$out"/kjv_train_000000.bin "$out"/kjv_val_000000.bin; do
    if [[ -e $shard ]] && ! shard_ok "$shard"; then
        echo "prepare_kjv: $shard is damaged (not a whole shard); making the shards again"
        rm -f "$out"/kjv_train_*.bin "$out"/kjv_val_*.bin
    fi
done
# the text is 4.1 MB: a shorter kjv.txt was cut short (a full disk, a killed run) and is made again
if [[ -f $out/kjv.txt ]] && (( $(stat -c %s "$out/kjv.txt") < 4000000 )); then
    echo "prepare_kjv: $out/kjv.txt is incomplete ($(stat -c %s "$out/kjv.txt") bytes); making it again"
    rm -f "$out/kjv.txt"
fi

if [[ ! -x build/prepare_text ]]; then
    echo "error: build/prepare_text is missing; run make first" >&2
    exit 1
fi

mkdir -p "$out"
if [[ ! -s $out/kjv.txt ]]; then
    if ! command -v bible >/dev/null 2>&1; then
        echo "error: the 'bible' command is missing; install the Debian package bible-kjv" >&2
        exit 1
    fi
    reference='^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ '
    # Every 20th chapter is moved to the end of the text, so that the validation split (the last
    # 5%) samples the whole book rather than being Revelation alone.
    bible -f "Gen1:1-Rev22:21" | awk '
        /^[1-3]?[A-Za-z]+[0-9]+:1 / { chapter++ }
        { line = $0; sub(/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ /, "", line)
          if (chapter % 20 == 0) held = held line "\n"; else print line }
        END { printf "%s", held }' > "$out/kjv.txt.tmp"
    if [[ ! -s $out/kjv.txt.tmp ]]; then
        echo "error: bible printed nothing" >&2
        exit 1
    fi
    if grep -qE "$reference" "$out/kjv.txt.tmp"; then
        echo "error: verse references left in $out/kjv.txt.tmp; the bible output format changed" >&2
        exit 1
    fi
    mv "$out/kjv.txt.tmp" "$out/kjv.txt"
fi

if [[ -f $out/encoder.json && -f $out/vocab.bpe ]]; then
    tokenizer=(--tokenizer bpe --bpe-dir "$out")            # the cached BPE
else
    tokenizer=(--tokenizer bpe --vocab-size "$vocab")       # train it (first run)
fi
build/prepare_text --input "$out/kjv.txt" --out-dir "$out" --name kjv --val-fraction 0.05 "${tokenizer[@]}"
echo "data/kjv ready"
