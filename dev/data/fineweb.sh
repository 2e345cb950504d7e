#!/usr/bin/env bash
# fineweb.sh — download a FineWeb sample (Hugging Face) and tokenise it with GPT-2's vocabulary,
# as llm.c's GPT-2 reproductions do. Needs internet access and the Python package `datasets`
# (pip install --break-system-packages datasets); run from anywhere, after `make`.
#
#   dev/data/fineweb.sh                    # sample-10BT: ~10B GPT-2 tokens, ~45 GB of JSONL
#   MAX_DOCS=100000 dev/data/fineweb.sh    # a quick slice: 100k documents, ~70M tokens
#   DATASET=HuggingFaceFW/fineweb-edu dev/data/fineweb.sh
#
# Steps, each resumable:
#   1. data/fineweb/fineweb_NNNNN.jsonl: documents streamed from the hub, up to FILE_DOCS per
#      file; files are renamed into place when closed, and a re-run keeps them and skips
#      their documents in the stream (which streams them again, unsaved). data/fineweb/source
#      records DATASET and SAMPLE: a re-run that names another is refused (it would append
#      the new stream to the saved documents of the old); give it another OUT.
#   2. build/prepare_text --tokenizer gpt2: shards of 100M tokens (uint16, llm.c's format, so
#      llm.c reads them too), the last VAL_FRACTION of the stream as val; an interrupted run
#      resumes from its saved parts.
# Then train GPT-2 124M:
#   ./train_gpt -e d12 -b 16 -t 1024 -d 524288 -l 6e-4 -x 19073 -u 700 \
#       -i 'data/fineweb/fw_train_*.bin' -j 'data/fineweb/fw_val_*.bin'
#
# Overrides (environment): OUT (data/fineweb), DATASET (HuggingFaceFW/fineweb), SAMPLE
# (sample-10BT; sample-100BT, ...), MAX_DOCS (all), FILE_DOCS (1000000), VAL_FRACTION (0.01),
# GPT2_DIR (../shared/data/gpt2), THREADS (all cores).
set -euo pipefail
# a path given (OUT, GPT2_DIR) is where the script is started; the defaults are the repository's
[[ -n ${OUT:-} && $OUT != /* ]] && OUT=$PWD/$OUT
[[ -n ${GPT2_DIR:-} && $GPT2_DIR != /* ]] && GPT2_DIR=$PWD/$GPT2_DIR
cd "$(dirname "$0")/../.."

OUT=${OUT:-data/fineweb}
DATASET=${DATASET:-HuggingFaceFW/fineweb}
SAMPLE=${SAMPLE:-sample-10BT}
MAX_DOCS=${MAX_DOCS:-0}
FILE_DOCS=${FILE_DOCS:-1000000}
VAL_FRACTION=${VAL_FRACTION:-0.01}
GPT2_DIR=${GPT2_DIR:-../shared/data/gpt2}
THREADS=${THREADS:-0}

die() { echo "fineweb: error: $*" >&2; exit 1; }
# a run that fails leaves no empty output directory behind (rmdir removes only an empty one), one
# it made: not one the user made beforehand (round 43)
out_existed=0
[[ -e $OUT || -L $OUT ]] && out_existed=1
trap '[[ $out_existed == 1 ]] || rmdir "$OUT" 2>/dev/null || true' EXIT
[[ -x build/prepare_text ]] || die "build/prepare_text is missing; run make"
# what prepare_text will be given is checked before the download (tens of GB), not after it
[[ ( -f $GPT2_DIR/encoder.json && -f $GPT2_DIR/vocab.bpe ) || ( -f $GPT2_DIR && $GPT2_DIR == *.tiktoken ) ]] ||
    die "GPT2_DIR=$GPT2_DIR: expected a directory with encoder.json and vocab.bpe, or a .tiktoken file"
[[ $VAL_FRACTION =~ ^(0(\.[0-9]+)?|\.[0-9]+)$ ]] && awk -v f="$VAL_FRACTION" 'BEGIN { exit !(f > 0 && f < 1) }' ||
    die "VAL_FRACTION=$VAL_FRACTION: expected a fraction between 0 and 1 (0.01)"
# decimal, without leading zeros (bash reads 08 as octal), and short enough not to wrap round
[[ $THREADS =~ ^(0|[1-9][0-9]{0,3})$ ]] && (( THREADS <= 1024 )) ||
    die "THREADS=$THREADS: expected a number of threads, 0 to 1024 (0: all cores)"
[[ $MAX_DOCS =~ ^(0|[1-9][0-9]{0,17})$ ]] || die "MAX_DOCS=$MAX_DOCS: expected a number of documents, 0 for all"
[[ $FILE_DOCS =~ ^[1-9][0-9]{0,17}$ ]] || die "FILE_DOCS=$FILE_DOCS: expected a positive number of documents"
/usr/bin/python3 -c 'import datasets' 2>/dev/null ||
    die "python3 cannot import datasets: /usr/bin/python3 -m pip install --break-system-packages datasets"
mkdir -p "$OUT"

/usr/bin/python3 - "$OUT" "$DATASET" "$SAMPLE" "$MAX_DOCS" "$FILE_DOCS" <<'EOF'
import json, os, sys
from datasets import load_dataset
out, dataset, sample, max_docs, file_docs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def die(message):
    print(f"fineweb: error: {message}", file=sys.stderr)
    sys.exit(1)
files = sorted(p for p in os.listdir(out) if p.startswith("fineweb_") and p.endswith(".jsonl"))
# the saved documents' source: a re-run streams on from where they end, so only from the same one
source_path, source = os.path.join(out, "source"), f"{dataset} {sample}\n"
saved_source = open(source_path, encoding="utf-8").read() if os.path.isfile(source_path) else None
if files and saved_source != source:
    if saved_source:
        die(f"{out} holds {len(files)} file(s) of documents of {saved_source.strip()}; DATASET={dataset} "
            f"SAMPLE={sample} would be appended to them as one dataset: give another OUT, or remove "
            f"{out}/fineweb_*.jsonl")
    die(f"{out} holds {len(files)} file(s) of documents whose source it does not record (a download before "
        f"{source_path} was written): if they are of DATASET={dataset} SAMPLE={sample}, write that line "
        f"(printf '%s %s\\n' {dataset} {sample} > {source_path}) and run again; else give another OUT")
if not files and saved_source not in (None, source):
    os.remove(source_path)   # the record of documents no longer there
def close_file(f, path):   # into place, the source recorded with the first
    f.close()
    if not os.path.isfile(source_path):
        with open(source_path + ".tmp", "w", encoding="utf-8") as s:
            s.write(source)
        os.rename(source_path + ".tmp", source_path)
    os.rename(path + ".part", path)
done = 0
for p in files:
    with open(os.path.join(out, p), "rb") as f:
        done += sum(1 for _ in f)
if max_docs and done >= max_docs:
    sys.exit(0)
f, n, index, in_file, path = None, done, len(files), 0, None
try:
    stream = load_dataset(dataset, name=sample, split="train", streaming=True)
    if done:
        print(f"fineweb: {done} documents already saved in {len(files)} file(s); skipping them", file=sys.stderr)
        stream = stream.skip(done)
    for doc in stream:
        if max_docs and n >= max_docs:
            break
        if f is None:
            path = os.path.join(out, f"fineweb_{index:05d}.jsonl")
            f = open(path + ".part", "w", encoding="utf-8", errors="replace")
            index, in_file = index + 1, 0
        f.write(json.dumps({"text": doc["text"]}, ensure_ascii=False) + "\n")
        n, in_file = n + 1, in_file + 1
        if in_file == file_docs:
            close_file(f, path); f = None
            print(f"fineweb: {n} documents", file=sys.stderr)
except KeyboardInterrupt:   # Ctrl-C: the files closed so far stay, and a re-run goes on after them
    die(f"interrupted after {n} documents; run again to go on")
except Exception as e:   # offline, a hub error, a mistyped DATASET or SAMPLE: the files closed so far stay
    die(f"the download of {dataset} ({sample}) failed after {n} documents: {type(e).__name__}: {e}")
if f is not None:
    close_file(f, path)
print(f"fineweb: {n} documents in {out}", file=sys.stderr)
EOF

inputs=()
for f in "$OUT"/fineweb_*.jsonl; do inputs+=(--input "$f"); done
(( ${#inputs[@]} > 0 )) || die "no documents were downloaded"
build/prepare_text "${inputs[@]}" --out-dir "$OUT" --name fw --tokenizer gpt2 --bpe-dir "$GPT2_DIR" \
    --val-fraction "$VAL_FRACTION" --threads "$THREADS"
