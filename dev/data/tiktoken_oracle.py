#!/usr/bin/env python3
"""tiktoken_oracle.py — tiktoken (PyPI) as the oracle for llmc/data/bpe.cpp: encodings and speed.

tiktoken is built from the vocabulary files with GPT-2's pre-tokenisation pattern and no
download (tiktoken.Encoding with custom mergeable ranks):

  encode:  one JSON document per input line ({"text": ...}) -> one JSON array of ids per line
      tiktoken_oracle.py encode --bpe-dir ../shared/data/gpt2 --input docs.jsonl --output ids.jsonl
  bench:   tokens/s of encode_ordinary on a text file, one thread, best of --repeat runs
      tiktoken_oracle.py bench --bpe-dir data/kjv --input data/kjv/kjv.txt --repeat 3

--bpe-dir DIR reads DIR/encoder.json + DIR/vocab.bpe (tiktoken's own data-gym loader, which
checks the two against each other); --bpe-dir FILE.tiktoken reads a tiktoken ranks file.
Exits 2 (a failure, never a skip) if tiktoken cannot be imported.
"""
import argparse
import json
import os
import sys
import time

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def load_encoding(bpe_dir):
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the files every time: no stale cache by path
    try:
        import tiktoken
        import tiktoken.load
    except ImportError as e:
        print(f"tiktoken_oracle: error: cannot import tiktoken ({e}); install it with "
              f"'{sys.executable} -m pip install --break-system-packages tiktoken' "
              f"(scripts/setup.sh --test does)", file=sys.stderr)
        sys.exit(2)
    if bpe_dir.endswith(".tiktoken"):
        ranks = tiktoken.load.load_tiktoken_bpe(bpe_dir)
    else:
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=os.path.join(bpe_dir, "vocab.bpe"),
            encoder_json_file=os.path.join(bpe_dir, "encoder.json"))
    return tiktoken.Encoding(name="oracle", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["encode", "bench"])
    parser.add_argument("--bpe-dir", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", default="-")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    enc = load_encoding(args.bpe_dir)

    if args.mode == "encode":
        out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
        with open(args.input, encoding="utf-8") as f:
            for line in f:
                ids = enc.encode_ordinary(json.loads(line)["text"])
                out.write(json.dumps(ids) + "\n")
        if out is not sys.stdout:
            out.close()
        return

    with open(args.input, encoding="utf-8") as f:
        text = f.read()
    best = float("inf")
    n = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        n = len(enc.encode_ordinary(text))
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"bytes": len(text.encode("utf-8")), "tokens": n, "seconds": best,
                      "tokens_per_s": n / best}))


if __name__ == "__main__":
    main()
