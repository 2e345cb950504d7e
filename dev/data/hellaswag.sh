#!/usr/bin/env bash
# hellaswag.sh — download HellaSwag's validation set (the file llm.c evaluates, 10042 examples)
# for ./train_gpt --hellaswag. Needs internet access and curl; run from anywhere.
#
#   dev/data/hellaswag.sh          # data/hellaswag/hellaswag_val.jsonl
#
# Then, e.g. GPT-2 124M from a transformers directory (acc_norm about 0.2955, as llm.c reports):
#   ./train_gpt --init-from gpt2_dir -x 0 --hellaswag data/hellaswag/hellaswag_val.jsonl -b 4 -g 0
# or during training, every 250 steps:   --hellaswag data/hellaswag/hellaswag_val.jsonl --eval-every 250
#
# Overrides (environment): OUT (data/hellaswag), URL (the file in the HellaSwag repository).
set -euo pipefail
# a path given (OUT, GPT2_DIR) is where the script is started; the defaults are the repository's
[[ -n ${OUT:-} && $OUT != /* ]] && OUT=$PWD/$OUT
cd "$(dirname "$0")/../.."

OUT=${OUT:-data/hellaswag}
URL=${URL:-https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl}
file=$OUT/hellaswag_val.jsonl

die() { echo "hellaswag: error: $*" >&2; exit 1; }
# a run that fails leaves no empty output directory behind (rmdir removes only an empty one), one
# it made: not one the user made beforehand (round 43)
out_existed=0
[[ -e $OUT || -L $OUT ]] && out_existed=1
trap '[[ $out_existed == 1 ]] || rmdir "$OUT" 2>/dev/null || true' EXIT
mkdir -p "$OUT"
if [[ ! -s $file ]]; then
    command -v curl >/dev/null || die "curl is missing (apt-get install curl)"
    echo "hellaswag: downloading $file"
    curl -L --fail -o "$file.part" "$URL" || {
        rm -f "$file.part"
        die "the download of $URL failed. Offline, tests/data/hellaswag_fixture.jsonl (16 examples in HellaSwag's format) tries --hellaswag out"
    }
    mv "$file.part" "$file"
fi
lines=$(grep -c . "$file" || true)   # grep -c exits 1 on no match
[[ $lines == 10042 ]] || die "$file has $lines examples; the validation set has 10042 (a partial download? remove it and re-run)"
echo "hellaswag: $file ready (10042 examples)"
