#!/usr/bin/env bash
# tinystories.sh — download TinyStories (V2, GPT-4 generated) and tokenise it into shards.
# Needs internet access (huggingface.co) and curl; run from anywhere, after `make`.
#
#   dev/data/tinystories.sh                          # GPT-2 tokens -> data/tinystories/
#   TOKENIZER=bpe VOCAB=4096 dev/data/tinystories.sh # a BPE trained on the stories instead
#
# Steps (each skipped if its output is already there, so a re-run resumes):
#   1. data/tinystories/TinyStoriesV2-GPT4-{train,valid}.txt  (~2.2 GB + 22 MB, curl -C -)
#   2. ... .jsonl: one story a line (the text files separate stories with <|endoftext|>)
#   3. build/prepare_text: train shards, then the val shards from the end of the stream, i.e.
#      from the official valid split (~1% of the tokens); resumable if interrupted.
# Then train, e.g.:
#   ./train_gpt -e d6 -i 'data/tinystories/ts_train_*.bin' -j 'data/tinystories/ts_val_*.bin' \
#       --tokenizer data/tinystories/tokenizer.bin -b 32 -t 512 -x 5000
#
# Overrides (environment): OUT (data/tinystories), TOKENIZER (gpt2 | bpe), VOCAB (4096, bpe
# only), GPT2_DIR (../shared/data/gpt2), THREADS (all cores), URL (the dataset on huggingface.co).
set -euo pipefail
# a path given (OUT, GPT2_DIR) is where the script is started; the defaults are the repository's
[[ -n ${OUT:-} && $OUT != /* ]] && OUT=$PWD/$OUT
[[ -n ${GPT2_DIR:-} && $GPT2_DIR != /* ]] && GPT2_DIR=$PWD/$GPT2_DIR
cd "$(dirname "$0")/../.."

OUT=${OUT:-data/tinystories}
TOKENIZER=${TOKENIZER:-gpt2}
VOCAB=${VOCAB:-4096}
GPT2_DIR=${GPT2_DIR:-../shared/data/gpt2}
THREADS=${THREADS:-0}
URL=${URL:-https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main}

die() { echo "tinystories: error: $*" >&2; exit 1; }
# a run that fails leaves no empty output directory behind (rmdir removes only an empty one), one
# it made: not one the user made beforehand (round 43)
out_existed=0
[[ -e $OUT || -L $OUT ]] && out_existed=1
trap '[[ $out_existed == 1 ]] || rmdir "$OUT" 2>/dev/null || true' EXIT
[[ -x build/prepare_text ]] || die "build/prepare_text is missing; run make"
# the tokenizer is checked before the 2.2 GB download, not after it
case $TOKENIZER in
    gpt2) tok=(--tokenizer gpt2 --bpe-dir "$GPT2_DIR")
          [[ ( -f $GPT2_DIR/encoder.json && -f $GPT2_DIR/vocab.bpe ) || ( -f $GPT2_DIR && $GPT2_DIR == *.tiktoken ) ]] ||
              die "GPT2_DIR=$GPT2_DIR: expected a directory with encoder.json and vocab.bpe, or a .tiktoken file" ;;
    bpe)  tok=(--tokenizer bpe --vocab-size "$VOCAB") ;;
    *)    die "TOKENIZER must be gpt2 or bpe, got $TOKENIZER" ;;
esac
# decimal, without leading zeros (bash reads 08 as octal), and short enough not to wrap round
[[ $THREADS =~ ^(0|[1-9][0-9]{0,3})$ ]] && (( THREADS <= 1024 )) ||
    die "THREADS=$THREADS: expected a number of threads, 0 to 1024 (0: all cores)"
[[ $TOKENIZER != bpe ]] || { [[ $VOCAB =~ ^[1-9][0-9]{2,8}$ ]] && (( VOCAB >= 257 )); } ||
    die "VOCAB=$VOCAB: expected a vocabulary size of 257 (256 bytes and <|endoftext|>) to 999999999"
mkdir -p "$OUT"

for split in train valid; do
    txt=$OUT/TinyStoriesV2-GPT4-$split.txt
    if [[ ! -s $txt ]]; then
        command -v curl >/dev/null || die "curl is missing (apt-get install curl)"
        echo "tinystories: downloading $txt"
        curl -L --fail -C - -o "$txt.part" "$URL/TinyStoriesV2-GPT4-$split.txt" || {
            [[ -s $txt.part ]] || rm -f "$txt.part"   # a partial download is kept: curl -C - resumes it
            die "download of $split failed"
        }
        mv "$txt.part" "$txt"
    fi
    jsonl=$OUT/$split.jsonl
    if [[ ! -s $jsonl ]]; then
        echo "tinystories: $txt -> $jsonl"
        /usr/bin/python3 - "$txt" "$jsonl.tmp" <<'EOF'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
n = 0
with open(src, encoding="utf-8", errors="replace") as f, open(dst, "w", encoding="utf-8") as out:
    story = []
    for line in f:
        if line.strip() == "<|endoftext|>":
            text = "".join(story).strip()
            if text:
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                n += 1
            story = []
        else:
            story.append(line)
    text = "".join(story).strip()
    if text:
        out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        n += 1
print(f"tinystories: {n} stories", file=sys.stderr)
EOF
        mv "$jsonl.tmp" "$jsonl"
    fi
done

build/prepare_text --input "$OUT/train.jsonl" --input "$OUT/valid.jsonl" --out-dir "$OUT" --name ts \
    --val-fraction 0.01 --threads "$THREADS" "${tok[@]}"
