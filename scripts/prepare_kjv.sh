#!/usr/bin/env bash
# prepare_kjv.sh — build the default training corpus, the King James Bible, with no download.
#
#   make && scripts/prepare_kjv.sh
#
# Text comes from Debian's bible-kjv package (`bible`); each verse's leading reference
# ("Ge1:1 ", "1Chr3:4 ", "SSol1:1 ") is stripped so the text is plain prose, one verse a line.
# build/prepare_text then writes byte-level shards:
#   data/kjv/kjv_train_000000.bin   ~95% of the tokens
#   data/kjv/kjv_val_000000.bin     the last ~5% (from Revelation)
#   data/kjv/tokenizer.bin          byte-level tokenizer, vocab 257
# Idempotent: if those files exist it says so and does nothing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."   # the repo root, wherever this is called from

out=data/kjv
if [[ -f $out/tokenizer.bin && -f $out/kjv_train_000000.bin && -f $out/kjv_val_000000.bin ]]; then
    echo "data/kjv ready"
    exit 0
fi

if [[ ! -x build/prepare_text ]]; then
    echo "error: build/prepare_text is missing; run make first" >&2
    exit 1
fi
if ! command -v bible >/dev/null 2>&1; then
    echo "error: the 'bible' command is missing; install the Debian package bible-kjv" >&2
    exit 1
fi

mkdir -p "$out"
reference='^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ '
bible -f "Gen1:1-Rev22:21" | sed -E "s/$reference//" > "$out/kjv.txt.tmp"
if [[ ! -s $out/kjv.txt.tmp ]]; then
    echo "error: bible printed nothing" >&2
    exit 1
fi
if grep -qE "$reference" "$out/kjv.txt.tmp"; then
    echo "error: verse references left in $out/kjv.txt.tmp; the bible output format changed" >&2
    exit 1
fi
mv "$out/kjv.txt.tmp" "$out/kjv.txt"

build/prepare_text --input "$out/kjv.txt" --out-dir "$out" --name kjv --val-fraction 0.05
echo "data/kjv ready"
