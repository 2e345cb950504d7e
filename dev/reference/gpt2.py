"""gpt2.py — the PyTorch reference GPT-2 of train_gpt.

Two jobs, one model definition:

1. The *numerical* reference. `gpt2_forward` is a plain function of the parameter
   tensors, written in the engine's own layout (see PARAM_NAMES), so that
   `parity.py` can load the engine's parameters byte for byte and compare logits,
   gradients and whole training steps.

2. The *performance* peer. Run as a script, it trains the same model on the same
   llm.c token shards with AdamW, so the engine's tokens/s is always quoted as a
   ratio against PyTorch on the same machine:

       python3 dev/reference/gpt2.py --train-data 'data/kjv/kjv_train_*.bin' \\
           --n-layer 4 --n-embd 256 --n-head 4 --vocab-size 257 --seq-len 128 \\
           --batch-size 8 --steps 30 --lr 1e-3 --warmup-steps 5 \\
           --weight-decay 0.1 --grad-clip 1.0 --seed 0 --threads 2

   On a GPU: add `--device cuda --dtype bf16 --compile`.

The model is GPT-2: learned positions, pre-LayerNorm (eps 1e-5), tanh-GELU,
causal multi-head attention scaled by 1/sqrt(head_size), and an LM head tied
to the token embedding. The embedding has Vp >= V rows (V padded up to a
multiple of 128 for fast GEMMs); logits are computed against all Vp rows and
only the first V columns are used.

Works with torch 1.13 (Debian) and torch 2.x; 2.x-only features
(torch.compile, F.scaled_dot_product_attention, fused AdamW) are used only
when present.
"""

import argparse
import contextlib
import glob
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------
# Parameters: names, shapes, order and initialisation

# The engine's parameter tensors, in the order they are stored (params.bin,
# grads.bin, checkpoints' master weights). Per-layer tensors are stacked along a
# leading L dimension. Matrices follow nn.Linear: weight (out, in), y = x W^T + b.
PARAM_NAMES = (
    "wte",       # (Vp, C)      token embedding, also the LM head (tied)
    "wpe",       # (maxT, C)    position embedding
    "ln1w",      # (L, C)       LayerNorm before attention
    "ln1b",      # (L, C)
    "qkvw",      # (L, 3C, C)   output features are [q | k | v]
    "qkvb",      # (L, 3C)
    "attprojw",  # (L, C, C)    attention output projection
    "attprojb",  # (L, C)
    "ln2w",      # (L, C)       LayerNorm before the MLP
    "ln2b",      # (L, C)
    "fcw",       # (L, 4C, C)   MLP up-projection
    "fcb",       # (L, 4C)
    "fcprojw",   # (L, C, 4C)   MLP down-projection
    "fcprojb",   # (L, C)
    "lnfw",      # (C,)         final LayerNorm
    "lnfb",      # (C,)
)

# The per-layer tensors (leading dimension L): ln1w .. fcprojb.
LAYER_PARAMS = PARAM_NAMES[2:14]

# The 2-D weights: the only tensors that get AdamW weight decay.
DECAYED_PARAMS = ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw")

LN_EPS = 1e-5


def padded_vocab_size(vocab_size, multiple=128):
    """Round the vocabulary up to a multiple of `multiple` (GPT-2: 50257 -> 50304)."""
    return ((vocab_size + multiple - 1) // multiple) * multiple


@dataclass
class GPTConfig:
    n_layer: int            # L
    n_head: int             # NH
    n_embd: int             # C
    vocab_size: int         # V, the real vocabulary
    padded_vocab_size: int  # Vp >= V, rows of wte
    max_seq_len: int        # maxT, rows of wpe

    @property
    def head_size(self):
        return self.n_embd // self.n_head

    def validate(self):
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if self.padded_vocab_size < self.vocab_size:
            raise ValueError(f"padded_vocab_size {self.padded_vocab_size} < vocab_size {self.vocab_size}")


def param_shapes(cfg):
    """[(name, shape)] for every parameter tensor, in PARAM_NAMES order."""
    L, C, Vp, maxT = cfg.n_layer, cfg.n_embd, cfg.padded_vocab_size, cfg.max_seq_len
    shapes = {
        "wte": (Vp, C), "wpe": (maxT, C),
        "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
        "attprojw": (L, C, C), "attprojb": (L, C),
        "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
        "lnfw": (C,), "lnfb": (C,),
    }
    return [(name, shapes[name]) for name in PARAM_NAMES]


def num_params(cfg):
    """Total number of parameter elements (padded wte rows included)."""
    return sum(math.prod(shape) for _, shape in param_shapes(cfg))


def init_params(cfg, seed=0):
    """GPT-2 initialisation, as a dict name -> float32 CPU tensor.

    N(0, 0.02) for embeddings and weight matrices, except the two projections
    that write into the residual stream (attprojw, fcprojw): std 0.02/sqrt(2L).
    Biases 0, LayerNorm weights 1. Padded wte rows (V..Vp-1) are zero so they
    never influence the logits that are used.
    Uses its own CPU generator: the same seed gives the same weights on any device.
    """
    gen = torch.Generator().manual_seed(seed)
    residual_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    params = {}
    for name, shape in param_shapes(cfg):
        if name in ("ln1w", "ln2w", "lnfw"):
            t = torch.ones(shape)
        elif name in ("attprojw", "fcprojw"):
            t = torch.randn(shape, generator=gen) * residual_std
        elif name in DECAYED_PARAMS:  # wte, wpe, qkvw, fcw
            t = torch.randn(shape, generator=gen) * 0.02
        else:  # biases
            t = torch.zeros(shape)
        params[name] = t
    params["wte"][cfg.vocab_size:].zero_()
    return params


def params_from_flat(cfg, flat):
    """Split a flat 1-D tensor (params.bin order) into a dict of views."""
    expected = num_params(cfg)
    if flat.numel() != expected:
        raise ValueError(f"flat parameter buffer has {flat.numel()} elements, config needs {expected}")
    params, offset = {}, 0
    for name, shape in param_shapes(cfg):
        n = math.prod(shape)
        params[name] = flat[offset:offset + n].view(shape)
        offset += n
    return params


def flatten(tensors_by_name):
    """Concatenate tensors in PARAM_NAMES order into one flat 1-D tensor."""
    return torch.cat([tensors_by_name[name].reshape(-1) for name in PARAM_NAMES])


# ----------------------------------------------------------------------------
# The model, as a function of its parameters

def has_sdpa():
    """torch >= 2.0 ships a fused scaled-dot-product attention."""
    return hasattr(F, "scaled_dot_product_attention")


def causal_self_attention(x, w, b, n_head, use_sdpa=False):
    """Multi-head causal self-attention, without the output projection.

    x: (B, T, C) -> (B, T, C). w: (3C, C), b: (3C,). Head h reads features
    h*hs:(h+1)*hs of q, k and v, and writes the same features of the output.
    """
    B, T, C = x.shape
    hs = C // n_head
    qkv = F.linear(x, w, b)                      # (B, T, 3C)
    q, k, v = qkv.split(C, dim=2)                # 3 x (B, T, C)
    q = q.view(B, T, n_head, hs).transpose(1, 2)  # (B, NH, T, hs)
    k = k.view(B, T, n_head, hs).transpose(1, 2)  # (B, NH, T, hs)
    v = v.view(B, T, n_head, hs).transpose(1, 2)  # (B, NH, T, hs)
    if use_sdpa:
        # torch 2.x fused kernel; its default scale is 1/sqrt(hs), same maths.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, NH, T, hs)
    else:
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))      # (B, NH, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf"))                 # key t' > query t: masked
        att = F.softmax(att, dim=-1)                                  # over keys
        y = att @ v                                                   # (B, NH, T, hs)
    return y.transpose(1, 2).contiguous().view(B, T, C)              # heads side by side


def gpt2_forward(p, idx, cfg, targets=None, use_sdpa=False):
    """The GPT-2 forward pass.

    p:       dict name -> tensor in the engine's layout (PARAM_NAMES).
    idx:     (B, T) int64 token ids, T <= maxT.
    targets: (B, T) int64 next-token ids, or None.
    Returns (logits, loss): logits (B, T, V) — only the real vocabulary columns
    (a view into the (B, T, Vp) product) — and the mean cross-entropy over all
    B*T positions (None without targets).
    """
    B, T = idx.shape
    V = cfg.vocab_size
    if T > cfg.max_seq_len:
        raise ValueError(f"sequence length {T} exceeds max_seq_len {cfg.max_seq_len}")
    pos = torch.arange(T, device=idx.device)
    x = F.embedding(idx, p["wte"]) + F.embedding(pos, p["wpe"])  # (B, T, C)
    C = x.shape[-1]

    # Per-layer views of the stacked (L, ...) tensors. unbind (rather than
    # indexing p[name][l] in the loop) makes the backward one stack per tensor
    # instead of L full-size zero-fill-and-add gradient buffers.
    layer = {name: p[name].unbind(0) for name in LAYER_PARAMS}

    for l in range(cfg.n_layer):
        w = {name: layer[name][l] for name in layer}
        # attention sub-block: x = x + attproj(attn(ln1(x)))
        h = F.layer_norm(x, (C,), w["ln1w"], w["ln1b"], eps=LN_EPS)           # (B, T, C)
        h = causal_self_attention(h, w["qkvw"], w["qkvb"], cfg.n_head, use_sdpa)
        x = x + F.linear(h, w["attprojw"], w["attprojb"])                     # (B, T, C)
        # MLP sub-block: x = x + fcproj(gelu(fc(ln2(x))))
        h = F.layer_norm(x, (C,), w["ln2w"], w["ln2b"], eps=LN_EPS)           # (B, T, C)
        h = F.gelu(F.linear(h, w["fcw"], w["fcb"]), approximate="tanh")       # (B, T, 4C)
        x = x + F.linear(h, w["fcprojw"], w["fcprojb"])                       # (B, T, C)

    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=LN_EPS)  # (B, T, C)
    logits = F.linear(x, p["wte"])[..., :V]                    # (B, T, Vp) -> (B, T, V)

    loss = None
    if targets is not None:
        # The softmax and its mean run over the real vocabulary only, in at
        # least float32 (bf16 logits under autocast are upcast; fp64 stays fp64).
        logits_2d = logits.reshape(B * T, V)
        logits_2d = logits_2d.to(torch.promote_types(logits_2d.dtype, torch.float32))
        loss = F.cross_entropy(logits_2d, targets.reshape(B * T))
    return logits, loss


class GPT(nn.Module):
    """GPT-2 as an nn.Module: one nn.Parameter per engine tensor, forward = gpt2_forward.

    The module exists so that optimizers, .to(device) and torch.compile work as
    usual; the maths lives in gpt2_forward.
    """

    def __init__(self, cfg, params, use_sdpa=False):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.use_sdpa = use_sdpa
        for name, shape in param_shapes(cfg):
            if tuple(params[name].shape) != shape:
                raise ValueError(f"{name}: shape {tuple(params[name].shape)}, expected {shape}")
            self.register_parameter(name, nn.Parameter(params[name].detach().clone()))

    def params(self):
        """dict name -> nn.Parameter, in PARAM_NAMES order."""
        return {name: getattr(self, name) for name in PARAM_NAMES}

    def forward(self, idx, targets=None):
        return gpt2_forward(self.params(), idx, self.cfg, targets, self.use_sdpa)


# ----------------------------------------------------------------------------
# Optimizer and schedule

def make_adamw(model, lr, beta1, beta2, eps, weight_decay, deterministic=True, device_type="cpu"):
    """torch.optim.AdamW with decay only on the 2-D weights (DECAYED_PARAMS).

    deterministic=True uses the plain per-tensor loop (foreach and fused off),
    which is what parity.py compares against. Otherwise the fused CUDA kernel
    is used where this torch has it (2.x), as a fair performance peer.
    """
    params = model.params()
    groups = [
        {"params": [params[n] for n in PARAM_NAMES if n in DECAYED_PARAMS], "weight_decay": weight_decay},
        {"params": [params[n] for n in PARAM_NAMES if n not in DECAYED_PARAMS], "weight_decay": 0.0},
    ]
    kwargs = {"lr": lr, "betas": (beta1, beta2), "eps": eps}
    accepted = inspect.signature(torch.optim.AdamW.__init__).parameters
    if deterministic:
        kwargs["foreach"] = False
        if "fused" in accepted:
            kwargs["fused"] = False
    elif device_type == "cuda" and "fused" in accepted:
        kwargs["fused"] = True
    return torch.optim.AdamW(groups, **kwargs)


def lr_at(step, max_lr, warmup_steps, total_steps, min_lr_frac=0.1):
    """Linear warmup over `warmup_steps`, then cosine decay to min_lr_frac * max_lr."""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    decay_steps = max(1, total_steps - warmup_steps)
    ratio = min(1.0, (step - warmup_steps) / decay_steps)
    min_lr = min_lr_frac * max_lr
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


# ----------------------------------------------------------------------------
# Data: llm.c token shards

SHARD_MAGIC = 20240520
SHARD_HEADER_INTS = 256


def open_shard(path):
    """Memory-map one llm.c shard: 256 int32 header, then the tokens.

    Header: [0] magic 20240520, [1] version (1: uint16 tokens, 2: uint32),
    [2] number of tokens. Returns a 1-D numpy memmap of the tokens.
    """
    header = np.fromfile(path, dtype="<i4", count=SHARD_HEADER_INTS)
    if header.size != SHARD_HEADER_INTS or header[0] != SHARD_MAGIC:
        raise ValueError(f"{path}: not an llm.c token shard (bad magic)")
    version, ntok = int(header[1]), int(header[2])
    if version not in (1, 2):
        raise ValueError(f"{path}: unsupported shard version {version}")
    dtype = np.dtype("<u2") if version == 1 else np.dtype("<u4")
    expected_bytes = 4 * SHARD_HEADER_INTS + ntok * dtype.itemsize
    if os.path.getsize(path) < expected_bytes:
        raise ValueError(f"{path}: header says {ntok} tokens but the file is too short")
    return np.memmap(path, dtype=dtype, mode="r", offset=4 * SHARD_HEADER_INTS, shape=(ntok,))


class ShardLoader:
    """Sequential batches from a glob of shards.

    A batch is one window of B*T+1 consecutive tokens: sample k of the batch
    covers tokens [kT, kT+T] of the window (inputs [kT, kT+T), targets shifted
    by one). The window advances by B*T; when the current shard cannot hold
    another window, the loader moves to the next shard (wrapping around).
    """

    def __init__(self, pattern, B, T):
        self.files = sorted(glob.glob(pattern))
        if not self.files:
            raise SystemExit(f"error: no token shards match {pattern!r}")
        self.shards = [open_shard(f) for f in self.files]
        for f, s in zip(self.files, self.shards):
            if len(s) < B * T + 1:
                raise SystemExit(f"error: {f} has {len(s)} tokens, a batch needs B*T+1 = {B * T + 1}")
        self.B, self.T = B, T
        self.shard, self.pos = 0, 0

    def next_batch(self):
        """(inputs, targets), each a (B, T) int64 CPU tensor."""
        B, T = self.B, self.T
        if self.pos + B * T + 1 > len(self.shards[self.shard]):
            self.shard = (self.shard + 1) % len(self.shards)
            self.pos = 0
        window = np.asarray(self.shards[self.shard][self.pos:self.pos + B * T + 1], dtype=np.int64)
        self.pos += B * T
        window = torch.from_numpy(window)
        return window[:-1].view(B, T), window[1:].view(B, T)


# ----------------------------------------------------------------------------
# Training CLI: the performance peer

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Train the PyTorch reference GPT-2 (the engine's performance peer).")
    ap.add_argument("--train-data", required=True, help="glob of llm.c token shards")
    ap.add_argument("--n-layer", type=int, required=True)
    ap.add_argument("--n-embd", type=int, required=True)
    ap.add_argument("--n-head", type=int, required=True)
    ap.add_argument("--vocab-size", type=int, required=True, help="real vocabulary V (padded to a multiple of 128)")
    ap.add_argument("--seq-len", type=int, required=True, help="T")
    ap.add_argument("--max-seq-len", type=int, default=None, help="rows of wpe (default: T)")
    ap.add_argument("--batch-size", type=int, required=True, help="B")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, default=3e-4, help="peak learning rate")
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="global-norm clip; 0 disables")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: autocast(bfloat16) with fp32 master weights")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch >= 2.0)")
    ap.add_argument("--log", default=None, help="write one JSON object per step to this file")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but torch sees no GPU")

    cfg = GPTConfig(
        n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
        vocab_size=args.vocab_size, padded_vocab_size=padded_vocab_size(args.vocab_size),
        max_seq_len=args.max_seq_len or args.seq_len,
    )
    B, T = args.batch_size, args.seq_len
    model = GPT(cfg, init_params(cfg, args.seed), use_sdpa=has_sdpa()).to(device)
    optimizer = make_adamw(model, args.lr, args.beta1, args.beta2, args.eps, args.weight_decay,
                           deterministic=False, device_type=device.type)
    loader = ShardLoader(args.train_data, B, T)

    forward = model
    if args.compile:
        if hasattr(torch, "compile"):
            forward = torch.compile(model)
        else:
            print(f"note: torch {torch.__version__} has no torch.compile; running eagerly", file=sys.stderr)
    if args.dtype == "bf16":
        autocast = lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)  # noqa: E731
    else:
        autocast = contextlib.nullcontext

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    n_params = num_params(cfg)
    print(f"reference GPT-2: L={cfg.n_layer} C={cfg.n_embd} NH={cfg.n_head} V={cfg.vocab_size} "
          f"Vp={cfg.padded_vocab_size} maxT={cfg.max_seq_len} | B={B} T={T} | {n_params} params | "
          f"torch {torch.__version__} {device.type} {args.dtype} threads={torch.get_num_threads()} "
          f"sdpa={model.use_sdpa} compile={forward is not model}", flush=True)
    log = open(args.log, "w") if args.log else None

    all_params = list(model.parameters())
    times_ms = []
    for step in range(args.steps):
        sync()
        t0 = time.perf_counter()
        x, y = loader.next_batch()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        lr = lr_at(step, args.lr, args.warmup_steps, args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast():
            _, loss = forward(x, y)
        loss.backward()
        if args.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(all_params, args.grad_clip)
        else:
            grad_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in all_params]))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value, grad_norm = loss.item(), grad_norm.item()  # .item() waits for the GPU
        sync()
        ms = 1000.0 * (time.perf_counter() - t0)
        times_ms.append(ms)
        tok_per_s = B * T / (ms / 1000.0)
        # Steps are numbered from 1, like the engine's log.
        print(f"step {step + 1} | loss {loss_value:.6f} | {ms:.1f} ms | {tok_per_s:.0f} tok/s", flush=True)
        if log:
            log.write(json.dumps({"type": "step", "step": step + 1, "loss": loss_value, "lr": lr,
                                  "grad_norm": grad_norm, "ms": ms, "tok_per_s": tok_per_s}) + "\n")
            log.flush()

    # Throughput excludes the first 2 steps (allocator warm-up, compilation).
    timed = times_ms[2:] if len(times_ms) > 2 else times_ms
    mean_ms = sum(timed) / len(timed) if timed else float("nan")
    summary = {"tok_per_s": sum(B * T / (ms / 1000.0) for ms in timed) / len(timed) if timed else None,
               "ms_per_step": mean_ms, "steps": args.steps, "params": n_params}
    if device.type == "cuda":
        summary["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(summary), flush=True)
    if log:
        log.close()


if __name__ == "__main__":
    main()
