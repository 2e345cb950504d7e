"""parity.py — PyTorch's answer for an engine-written parity bundle.

    python3 dev/reference/parity.py BUNDLE_DIR OUT_DIR [--dtype fp32|fp64]

BUNDLE_DIR (written by the engine):
    config.json  {"n_layer", "n_head", "n_embd", "vocab_size", "padded_vocab_size",
                  "max_seq_len", "B", "T", "steps", "lrs": [lr per step],
                  "beta1", "beta2", "eps", "weight_decay", "grad_clip"}
    params.bin   float32 LE, every parameter tensor concatenated in PARAM_NAMES order
    tokens.bin   int32 LE, shape (steps, 2, B, T): per step the inputs, then the targets

OUT_DIR (written here; every .bin is float32 little-endian):
    logits.bin        (B, T, V): logits of the initial weights on step 0's inputs
    grads.bin         d(step-0 mean loss)/d(params) at the initial weights, params.bin layout
    results.json      {"loss": step-0 loss,
                       "losses": [loss of each training step],
                       "grad_norms": [pre-clip global grad norm of each step]}
    final_params.bin  the parameters after `steps` AdamW updates, params.bin layout

Each training step: forward + backward on that step's batch, global-norm clipping
(torch.nn.utils.clip_grad_norm_, when grad_clip > 0), then torch.optim.AdamW with
that step's lr (decay only on the 2-D weights). Everything runs on the CPU in
one thread with deterministic algorithms; --dtype fp64 computes in double
precision (outputs are still float32), which removes PyTorch's own float32
rounding from a comparison.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2 import GPT, GPTConfig, flatten, make_adamw, num_params, params_from_flat  # noqa: E402

CONFIG_KEYS = ("n_layer", "n_head", "n_embd", "vocab_size", "padded_vocab_size", "max_seq_len",
               "B", "T", "steps", "lrs", "beta1", "beta2", "eps", "weight_decay", "grad_clip")


def read_bundle(bundle_dir):
    """Load and validate a bundle. Returns (config dict, GPTConfig, flat params float32, tokens)."""
    with open(os.path.join(bundle_dir, "config.json")) as f:
        conf = json.load(f)
    missing = [k for k in CONFIG_KEYS if k not in conf]
    if missing:
        raise SystemExit(f"error: {bundle_dir}/config.json lacks {', '.join(missing)}")
    cfg = GPTConfig(conf["n_layer"], conf["n_head"], conf["n_embd"], conf["vocab_size"],
                    conf["padded_vocab_size"], conf["max_seq_len"])
    cfg.validate()
    B, T, steps = conf["B"], conf["T"], conf["steps"]
    if len(conf["lrs"]) != steps:
        raise SystemExit(f"error: config has steps={steps} but {len(conf['lrs'])} lrs")
    if steps < 1:
        raise SystemExit("error: a bundle needs at least one step")
    if T > cfg.max_seq_len:
        raise SystemExit(f"error: T={T} exceeds max_seq_len={cfg.max_seq_len}")

    params = np.fromfile(os.path.join(bundle_dir, "params.bin"), dtype="<f4")
    if params.size != num_params(cfg):
        raise SystemExit(f"error: params.bin has {params.size} floats, the config needs {num_params(cfg)}")
    tokens = np.fromfile(os.path.join(bundle_dir, "tokens.bin"), dtype="<i4")
    if tokens.size != steps * 2 * B * T:
        raise SystemExit(f"error: tokens.bin has {tokens.size} ints, expected steps*2*B*T = {steps * 2 * B * T}")
    tokens = tokens.reshape(steps, 2, B, T)
    if tokens.min() < 0 or tokens.max() >= cfg.vocab_size:
        raise SystemExit(f"error: tokens.bin holds ids outside [0, {cfg.vocab_size})")
    return conf, cfg, params, tokens


def write_f32(path, tensor):
    """Write a tensor as raw float32 little-endian."""
    tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4", copy=False).tofile(path)


def global_grad_norm(params):
    """sqrt(sum of squares of every gradient), as clip_grad_norm_ computes it."""
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))


def run(bundle_dir, out_dir, dtype=torch.float32):
    conf, cfg, flat_params, tokens = read_bundle(bundle_dir)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    init = params_from_flat(cfg, torch.from_numpy(flat_params).to(dtype))
    model = GPT(cfg, init, use_sdpa=False)  # explicit softmax attention: the textbook maths
    optimizer = make_adamw(model, conf["lrs"][0], conf["beta1"], conf["beta2"], conf["eps"],
                           conf["weight_decay"], deterministic=True)
    params = list(model.parameters())
    tok = torch.from_numpy(tokens.astype(np.int64))  # (steps, 2, B, T)

    os.makedirs(out_dir, exist_ok=True)
    losses, grad_norms = [], []
    for step in range(conf["steps"]):
        optimizer.zero_grad(set_to_none=True)
        logits, loss = model(tok[step, 0], tok[step, 1])  # logits (B, T, V)
        loss.backward()
        if step == 0:
            # The initial weights' logits and raw (unclipped) gradients.
            write_f32(os.path.join(out_dir, "logits.bin"), logits)
            write_f32(os.path.join(out_dir, "grads.bin"), flatten({n: p.grad for n, p in model.params().items()}))
        if conf["grad_clip"] > 0:
            # Scales every gradient by min(1, clip / (norm + 1e-6)); returns the pre-clip norm.
            norm = torch.nn.utils.clip_grad_norm_(params, conf["grad_clip"])
        else:
            norm = global_grad_norm(params)
        for group in optimizer.param_groups:
            group["lr"] = conf["lrs"][step]
        optimizer.step()
        losses.append(loss.item())
        grad_norms.append(norm.item())
        if not (math.isfinite(losses[-1]) and math.isfinite(grad_norms[-1])):
            print(f"warning: step {step}: loss {losses[-1]}, grad norm {grad_norms[-1]}", file=sys.stderr)

    write_f32(os.path.join(out_dir, "final_params.bin"), flatten(model.params()))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"loss": losses[0], "losses": losses, "grad_norms": grad_norms}, f, indent=1)
    return losses, grad_norms


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compute PyTorch's logits, gradients and training steps for a bundle.")
    ap.add_argument("bundle_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32",
                    help="compute precision (outputs are always float32)")
    args = ap.parse_args(argv)
    dtype = torch.float64 if args.dtype == "fp64" else torch.float32
    losses, norms = run(args.bundle_dir, args.out_dir, dtype)
    print(f"parity: {len(losses)} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}, "
          f"grad norm {norms[0]:.6f} -> {norms[-1]:.6f}; wrote {args.out_dir}")


if __name__ == "__main__":
    main()
