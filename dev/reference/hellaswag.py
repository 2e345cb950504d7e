#!/usr/bin/env python3
"""hellaswag.py — the PyTorch computation of HellaSwag as llm.c evaluates it, for a transformers
GPT-2 directory: the reference the engine's evaluator (llmc/eval/hellaswag.h) is tested against.

    python3 dev/reference/hellaswag.py MODEL_DIR FILE.jsonl --bpe-dir ../shared/data/gpt2 [--max-T 1024]

MODEL_DIR is loaded with GPT2LMHeadModel.from_pretrained (float32, CPU); the text is tokenised by
tiktoken built from --bpe-dir's encoder.json + vocab.bpe (no download; dev/data/tiktoken_oracle.py).
Each example gives four rows, encode(ctx) + encode(" " + ending); an ending's score is the mean
cross-entropy of its tokens given what precedes them; the prediction is the ending of lowest mean
(acc_norm; acc: lowest sum), the first on ties (torch.argmin). A row longer than max_T + 1 tokens
keeps its ending and the last context tokens that fit.

Prints one JSON line: {"examples", "acc_norm", "acc", "choices": acc_norm choices as a string of
digits, "choices_acc": acc choices likewise, "min_gap" and "min_gap_acc": the smallest difference,
relative to the loss, between the best and the second-best mean (summed) loss of an example (how
far the choices are from a tie)}.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from tiktoken_oracle import load_encoding  # noqa: E402


def rows_of(example, enc, max_T):
    ctx = enc.encode_ordinary(example["ctx"])
    rows = []
    for ending in example["endings"]:
        end = enc.encode_ordinary(" " + ending)
        keep = min(len(ctx), max_T + 1 - len(end))
        if keep < 0:
            sys.exit(f"hellaswag.py: an ending of {len(end)} tokens does not fit max_T {max_T}")
        context = ctx[len(ctx) - keep:]
        rows.append((context + end, len(context)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("file")
    ap.add_argument("--bpe-dir", required=True)
    ap.add_argument("--max-T", type=int, default=1024)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    from transformers import GPT2LMHeadModel
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    model = GPT2LMHeadModel.from_pretrained(args.model_dir, torch_dtype=torch.float32).eval()
    enc = load_encoding(args.bpe_dir)

    examples = [json.loads(line) for line in open(args.file, encoding="utf-8") if line.strip()]
    if args.limit:
        examples = examples[:args.limit]
    choices, choices_acc, correct, correct_norm = "", "", 0, 0
    min_gap, min_gap_acc = float("inf"), float("inf")
    with torch.no_grad():
        for ex in examples:
            sums, means = [], []
            for tokens, start in rows_of(ex, enc, args.max_T):
                t = torch.tensor([tokens])
                logits = model(t[:, :-1]).logits[0]                               # (n-1, V)
                losses = F.cross_entropy(logits, t[0, 1:], reduction="none")       # position p predicts p+1
                ending = losses[start - 1:]
                sums.append(ending.sum().item())
                means.append(ending.mean().item())
            norm = int(torch.tensor(means).argmin())
            plain = int(torch.tensor(sums).argmin())
            choices += str(norm)
            choices_acc += str(plain)
            correct_norm += norm == ex["label"]
            correct += plain == ex["label"]
            ordered = sorted(means)
            min_gap = min(min_gap, (ordered[1] - ordered[0]) / abs(ordered[0]))
            ordered = sorted(sums)
            min_gap_acc = min(min_gap_acc, (ordered[1] - ordered[0]) / abs(ordered[0]))
    n = len(examples)
    print(json.dumps({"examples": n, "acc_norm": correct_norm / n, "acc": correct / n, "choices": choices,
                      "choices_acc": choices_acc, "min_gap": min_gap, "min_gap_acc": min_gap_acc}))


if __name__ == "__main__":
    main()
