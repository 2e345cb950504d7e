#!/usr/bin/env python3
"""hf_eval.py — load a train_gpt checkpoint with Hugging Face transformers and compute its loss.

    python3 dev/reference/hf_eval.py CKPT_DIR TOKENS.bin B T

CKPT_DIR is a checkpoint directory (step_XXXXXXXX/) as llmc/checkpoint/checkpoint.h writes it; it is loaded
unchanged with GPT2LMHeadModel.from_pretrained (float32, CPU). TOKENS.bin is int32 tokens of shape
(n_batches, B, T+1): each window's first T tokens are the inputs, its last T the targets.

Prints one JSON line: {"loss": mean cross-entropy over all positions, "losses": per batch,
"max_abs_logit": the largest |logit| (what a loss comparison's bound scales with), "n_params": ...}. Fails (non-zero exit) if any checkpoint tensor is missing, unexpected or of the
wrong shape: a silently re-initialised tensor must not pass for a loaded one.
"""
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import transformers
from transformers import GPT2LMHeadModel


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ckpt, tokens_path, B, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)

    model, info = GPT2LMHeadModel.from_pretrained(ckpt, torch_dtype=torch.float32, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if k != "lm_head.weight"]   # lm_head is tied to wte
    if missing or info["unexpected_keys"] or info["mismatched_keys"] or info.get("error_msgs"):
        sys.exit(f"hf_eval: {ckpt} did not load cleanly: {info}")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        sys.exit("hf_eval: lm_head is not tied to wte")
    model.eval()

    tokens = np.fromfile(tokens_path, dtype=np.int32)
    if tokens.size == 0 or tokens.size % (B * (T + 1)) != 0:
        sys.exit(f"hf_eval: {tokens_path} holds {tokens.size} tokens, not a multiple of B*(T+1) = {B * (T + 1)}")
    windows = torch.from_numpy(tokens.reshape(-1, B, T + 1).astype(np.int64))

    losses, max_abs_logit = [], 0.0
    with torch.no_grad():
        for batch in windows:
            logits = model(batch[:, :T]).logits   # (B, T, V)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
            losses.append(loss.item())
            max_abs_logit = max(max_abs_logit, logits.abs().max().item())
    print(json.dumps({"loss": float(np.mean(losses)), "losses": losses, "max_abs_logit": max_abs_logit,
                      "n_params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
