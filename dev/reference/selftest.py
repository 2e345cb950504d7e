"""selftest.py — checks that the reference itself is right, before anyone trusts it.

    /usr/bin/python3 dev/reference/selftest.py      (about 10 s on 1 CPU core; scripts/test.sh runs it)

1. gradcheck: gpt2_forward's autograd gradients match finite differences
   (double precision, tiny model).
2. An independent second implementation (nn.LayerNorm / nn.Linear, a per-head
   attention loop, hand-written tanh-GELU and log-softmax) gives the same
   logits, loss and gradients as gpt2_forward, in double precision.
3. parity.py on small bundles written here with numpy (with and without
   clipping): output sizes, step-0 loss ~ ln(V), zero gradients for padded wte
   rows and unused wpe rows, logits/grads equal to the independent
   implementation, and the final parameters equal to a hand-written AdamW +
   clipping loop (the exact update the engine must implement).
4. gpt2.py trains a few steps on a synthetic llm.c shard (uint16 and uint32).

Prints "  ok  WHAT" or "  FAIL  WHAT" per check (a test that raises counts as one failure and
the rest still run), and last "selftest: P passed, F failed"; exits 1 on any failure.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt2  # noqa: E402
from gpt2 import PARAM_NAMES, DECAYED_PARAMS, GPTConfig, gpt2_forward, param_shapes  # noqa: E402

PY = sys.executable
COUNTS = {"passed": 0, "failed": 0}


def check(cond, msg):
    if cond:
        COUNTS["passed"] += 1
        print(f"  ok  {msg}")
    else:
        COUNTS["failed"] += 1
        print(f"  FAIL  {msg}")


# ----------------------------------------------------------------------------
# Bundles, written the way the engine writes them

def random_params_np(cfg, rng):
    """GPT-2-like random parameters as a dict of float32 numpy arrays.

    LayerNorm weights and biases get random values too (not 1 and 0), so that a
    mix-up between them would show.
    """
    p = {}
    for name, shape in param_shapes(cfg):
        if name in ("ln1w", "ln2w", "lnfw"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name in DECAYED_PARAMS:
            a = 0.02 * rng.standard_normal(shape)
        else:
            a = 0.01 * rng.standard_normal(shape)
        p[name] = a.astype(np.float32)
    p["wte"][cfg.vocab_size:] = 0.0
    return p


def write_bundle(path, cfg, B, T, lrs, grad_clip, seed=0, weight_decay=0.1):
    """Write config.json, params.bin and tokens.bin; return (params dict, tokens)."""
    rng = np.random.default_rng(seed)
    os.makedirs(path, exist_ok=True)
    params = random_params_np(cfg, rng)
    tokens = rng.integers(0, cfg.vocab_size, size=(len(lrs), 2, B, T), dtype=np.int32)
    conf = {"n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_embd": cfg.n_embd,
            "vocab_size": cfg.vocab_size, "padded_vocab_size": cfg.padded_vocab_size,
            "max_seq_len": cfg.max_seq_len, "B": B, "T": T, "steps": len(lrs), "lrs": list(lrs),
            "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": weight_decay, "grad_clip": grad_clip}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(conf, f)
    np.concatenate([params[n].ravel() for n in PARAM_NAMES]).astype("<f4").tofile(os.path.join(path, "params.bin"))
    tokens.astype("<i4").tofile(os.path.join(path, "tokens.bin"))
    return conf, params, tokens


# ----------------------------------------------------------------------------
# An independent implementation of the same model

class IndependentGPT2(nn.Module):
    """GPT-2 from stock modules, written separately from gpt2_forward."""

    def __init__(self, cfg, p):
        super().__init__()
        self.cfg = cfg
        C, L = cfg.n_embd, cfg.n_layer
        t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float64)  # noqa: E731
        self.wte = nn.Parameter(t(p["wte"]))
        self.wpe = nn.Parameter(t(p["wpe"]))
        self.blocks = nn.ModuleList()
        for l in range(L):
            blk = nn.Module()
            blk.ln1, blk.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
            blk.qkv, blk.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            blk.fc, blk.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            for mod, w, b in ((blk.ln1, "ln1w", "ln1b"), (blk.qkv, "qkvw", "qkvb"), (blk.proj, "attprojw", "attprojb"),
                              (blk.ln2, "ln2w", "ln2b"), (blk.fc, "fcw", "fcb"), (blk.fcproj, "fcprojw", "fcprojb")):
                mod.weight = nn.Parameter(t(p[w][l]))
                mod.bias = nn.Parameter(t(p[b][l]))
            self.blocks.append(blk)
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        self.lnf.weight, self.lnf.bias = nn.Parameter(t(p["lnfw"])), nn.Parameter(t(p["lnfb"]))

    @staticmethod
    def gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def attention(self, x, blk):
        B, T, C = x.shape
        NH = self.cfg.n_head
        hs = C // NH
        qkv = blk.qkv(x)
        mask = torch.full((T, T), float("-inf"), dtype=x.dtype).triu(1)  # -inf above the diagonal
        heads = []
        for h in range(NH):
            q = qkv[:, :, h * hs:(h + 1) * hs]
            k = qkv[:, :, C + h * hs:C + (h + 1) * hs]
            v = qkv[:, :, 2 * C + h * hs:2 * C + (h + 1) * hs]
            s = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(hs) + mask
            s = s - s.max(dim=-1, keepdim=True).values
            w = s.exp() / s.exp().sum(dim=-1, keepdim=True)
            heads.append(torch.einsum("bts,bsd->btd", w, v))
        return torch.cat(heads, dim=-1)

    def forward(self, idx, targets):
        B, T = idx.shape
        V = self.cfg.vocab_size
        x = self.wte[idx] + self.wpe[:T].unsqueeze(0)
        for blk in self.blocks:
            x = x + blk.proj(self.attention(blk.ln1(x), blk))
            x = x + blk.fcproj(self.gelu(blk.fc(blk.ln2(x))))
        logits = (self.lnf(x) @ self.wte.t())[:, :, :V]
        logz = torch.logsumexp(logits, dim=-1)
        picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return logits, (logz - picked).mean()

    def grads(self):
        """Gradients in the engine's layout (dict name -> tensor)."""
        g = {"wte": self.wte.grad, "wpe": self.wpe.grad, "lnfw": self.lnf.weight.grad, "lnfb": self.lnf.bias.grad}
        for attr, w, b in (("ln1", "ln1w", "ln1b"), ("qkv", "qkvw", "qkvb"), ("proj", "attprojw", "attprojb"),
                           ("ln2", "ln2w", "ln2b"), ("fc", "fcw", "fcb"), ("fcproj", "fcprojw", "fcprojb")):
            g[w] = torch.stack([getattr(blk, attr).weight.grad for blk in self.blocks])
            g[b] = torch.stack([getattr(blk, attr).bias.grad for blk in self.blocks])
        return g


def independent_logits_grads(cfg, p_np, inputs, targets):
    model = IndependentGPT2(cfg, p_np)
    logits, loss = model(torch.as_tensor(inputs, dtype=torch.long), torch.as_tensor(targets, dtype=torch.long))
    loss.backward()
    return logits.detach(), loss.item(), model.grads()


# ----------------------------------------------------------------------------
# A hand-written AdamW, the update the engine implements

def manual_training(cfg, p_np, tokens, conf):
    """Run conf['steps'] steps with hand-written clipping and AdamW, in float64."""
    p = {n: torch.tensor(p_np[n], dtype=torch.float64) for n in PARAM_NAMES}
    m = {n: torch.zeros_like(p[n]) for n in PARAM_NAMES}
    v = {n: torch.zeros_like(p[n]) for n in PARAM_NAMES}
    b1, b2, eps, wd, clip = conf["beta1"], conf["beta2"], conf["eps"], conf["weight_decay"], conf["grad_clip"]
    losses, norms = [], []
    for step, lr in enumerate(conf["lrs"]):
        leaves = {n: t.clone().requires_grad_(True) for n, t in p.items()}
        _, loss = gpt2_forward(leaves, torch.as_tensor(tokens[step, 0], dtype=torch.long), cfg,
                               torch.as_tensor(tokens[step, 1], dtype=torch.long))
        loss.backward()
        g = {n: leaves[n].grad for n in PARAM_NAMES}
        norm = math.sqrt(sum(float((g[n] ** 2).sum()) for n in PARAM_NAMES))
        scale = min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0  # clip_grad_norm_'s formula
        t = step + 1
        for n in PARAM_NAMES:
            gn = g[n] * scale
            if n in DECAYED_PARAMS:
                p[n] = p[n] * (1.0 - lr * wd)          # decoupled weight decay, before the Adam step
            m[n] = b1 * m[n] + (1 - b1) * gn
            v[n] = b2 * v[n] + (1 - b2) * gn * gn
            mhat = m[n] / (1 - b1 ** t)
            denom = (v[n] / (1 - b2 ** t)).sqrt() + eps  # eps outside the sqrt, after bias correction
            p[n] = p[n] - lr * mhat / denom
        losses.append(loss.item())
        norms.append(norm)
    return p, losses, norms


# ----------------------------------------------------------------------------
# The tests

def test_gradcheck():
    print("gradcheck (double precision, L=2 C=8 NH=2 V=5 Vp=8 maxT=6, B=2 T=4)")
    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=8, vocab_size=5, padded_vocab_size=8, max_seq_len=6)
    p_np = random_params_np(cfg, np.random.default_rng(1))
    inputs = tuple(torch.tensor(p_np[n], dtype=torch.float64, requires_grad=True) for n in PARAM_NAMES)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 5, (2, 4), generator=g)
    tgt = torch.randint(0, 5, (2, 4), generator=g)

    def loss_fn(*tensors):
        return gpt2_forward(dict(zip(PARAM_NAMES, tensors)), idx, cfg, tgt)[1]

    def logits_fn(*tensors):
        return gpt2_forward(dict(zip(PARAM_NAMES, tensors)), idx, cfg)[0]

    check(torch.autograd.gradcheck(loss_fn, inputs, eps=1e-6, atol=1e-8, rtol=1e-6),
          "loss gradients w.r.t. all 16 parameter tensors match finite differences")
    # The logits' Jacobian for a few parameter tensors (the full one is slow).
    few = (PARAM_NAMES.index("qkvw"), PARAM_NAMES.index("lnfb"))
    def logits_some(*sub):
        full = list(inputs)
        for i, t in zip(few, sub):
            full[i] = t
        return logits_fn(*full)
    check(torch.autograd.gradcheck(logits_some, tuple(inputs[i] for i in few), eps=1e-6, atol=1e-8, rtol=1e-6),
          "logits Jacobian w.r.t. qkvw and lnfb matches finite differences")


def test_independent():
    print("independent implementation vs gpt2_forward (double precision)")
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=32, vocab_size=65, padded_vocab_size=128, max_seq_len=16)
    p_np = random_params_np(cfg, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    idx, tgt = rng.integers(0, 65, (3, 12)), rng.integers(0, 65, (3, 12))
    ref_logits, ref_loss, ref_grads = independent_logits_grads(cfg, p_np, idx, tgt)

    leaves = {n: torch.tensor(p_np[n], dtype=torch.float64, requires_grad=True) for n in PARAM_NAMES}
    logits, loss = gpt2_forward(leaves, torch.as_tensor(idx), cfg, torch.as_tensor(tgt))
    loss.backward()
    check(torch.allclose(logits, ref_logits, rtol=0, atol=1e-12), "logits agree to 1e-12")
    check(abs(loss.item() - ref_loss) < 1e-12, "loss agrees to 1e-12")
    worst = max(float((leaves[n].grad - ref_grads[n]).abs().max()) for n in PARAM_NAMES)
    check(worst < 1e-12, f"every gradient agrees to 1e-12 (worst {worst:.1e})")


def test_parity(tmp, grad_clip):
    print(f"parity.py on a numpy-written bundle (grad_clip={grad_clip})")
    cfg = GPTConfig(n_layer=2, n_head=4, n_embd=32, vocab_size=65, padded_vocab_size=128, max_seq_len=16)
    B, T = 2, 8  # T < max_seq_len: wpe rows T.. get no gradient
    lrs = [1e-3, 2e-3, 3e-3, 1e-3]
    bundle = os.path.join(tmp, f"bundle_clip{grad_clip}")
    conf, p_np, tokens = write_bundle(bundle, cfg, B, T, lrs, grad_clip)
    outs = {}
    for dtype in ("fp32", "fp64"):
        out = os.path.join(tmp, f"out_clip{grad_clip}_{dtype}")
        subprocess.run([PY, os.path.join(HERE, "parity.py"), bundle, out, "--dtype", dtype], check=True)
        outs[dtype] = out

    out = outs["fp32"]
    V = cfg.vocab_size
    n = gpt2.num_params(cfg)
    logits = np.fromfile(os.path.join(out, "logits.bin"), dtype="<f4")
    grads = np.fromfile(os.path.join(out, "grads.bin"), dtype="<f4")
    final = np.fromfile(os.path.join(out, "final_params.bin"), dtype="<f4")
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    check(logits.size == B * T * V and grads.size == n and final.size == n, "output sizes match the layout")
    check(len(res["losses"]) == len(lrs) == len(res["grad_norms"]) and res["loss"] == res["losses"][0],
          "results.json has one loss and grad norm per step; loss == losses[0]")
    check(abs(res["loss"] - math.log(V)) < 0.05, f"step-0 loss {res['loss']:.4f} ~ ln(V) = {math.log(V):.4f}")

    g = gpt2.params_from_flat(cfg, torch.from_numpy(grads))
    check(float(g["wte"][V:].abs().max()) == 0.0, "padded wte rows have exactly zero gradient")
    check(float(g["wpe"][T:].abs().max()) == 0.0, "wpe rows >= T have exactly zero gradient")
    fp = gpt2.params_from_flat(cfg, torch.from_numpy(final))
    check(float(fp["wte"][V:].abs().max()) == 0.0, "padded wte rows stay zero after training")

    ref_logits, ref_loss, ref_grads = independent_logits_grads(cfg, p_np, tokens[0, 0], tokens[0, 1])
    dl = float((torch.from_numpy(logits).view(B, T, V).double() - ref_logits).abs().max())
    check(dl < 1e-5, f"fp32 logits vs independent fp64 model: max abs diff {dl:.1e}")
    ref_flat = gpt2.flatten(ref_grads)
    dg = float((torch.from_numpy(grads).double() - ref_flat).abs().max() / ref_flat.abs().max())
    check(dg < 1e-4, f"fp32 grads vs independent fp64 model: max abs diff / max |grad| = {dg:.1e}")
    check(abs(res["loss"] - ref_loss) < 1e-5, "fp32 step-0 loss matches the independent model")

    # fp64 training vs the hand-written AdamW loop.
    manual, losses, norms = manual_training(cfg, p_np, tokens, conf)
    with open(os.path.join(outs["fp64"], "results.json")) as f:
        res64 = json.load(f)
    final64 = torch.from_numpy(np.fromfile(os.path.join(outs["fp64"], "final_params.bin"), dtype="<f4")).double()
    dp = float((final64 - gpt2.flatten(manual)).abs().max())
    check(dp < 1e-6, f"fp64 parity final params vs hand-written AdamW: max abs diff {dp:.1e}")
    check(max(abs(a - b) for a, b in zip(res64["losses"], losses)) < 1e-10, "fp64 losses match the hand-written loop")
    check(max(abs(a - b) / b for a, b in zip(res64["grad_norms"], norms)) < 1e-10,
          "fp64 grad norms match the hand-written loop")
    if grad_clip > 0:
        check(all(nm > grad_clip for nm in norms), f"clipping was active (norms {min(norms):.3f}.. > {grad_clip})")
    dl32 = max(abs(a - b) for a, b in zip(res["losses"], res64["losses"]))
    df32 = float((torch.from_numpy(final).double() - final64).abs().max())
    check(dl32 < 1e-5 and df32 < 1e-4, f"fp32 vs fp64 training: losses within {dl32:.1e}, params within {df32:.1e}")


def write_shard(path, tokens, version):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = 20240520, version, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2" if version == 1 else "<u4").tobytes())


def test_training_cli(tmp):
    print("gpt2.py trains on synthetic llm.c shards")
    rng = np.random.default_rng(4)
    # Two tiny "languages" with structure, so the loss visibly falls.
    text = np.tile(np.arange(40), 200) + rng.integers(0, 2, 8000)
    write_shard(os.path.join(tmp, "syn_train_000000.bin"), text[:5000], version=1)
    write_shard(os.path.join(tmp, "syn_train_000001.bin"), text[5000:], version=2)
    log = os.path.join(tmp, "train.jsonl")
    cmd = [PY, os.path.join(HERE, "gpt2.py"), "--train-data", os.path.join(tmp, "syn_train_*.bin"),
           "--n-layer", "2", "--n-embd", "32", "--n-head", "4", "--vocab-size", "41", "--seq-len", "32",
           "--batch-size", "4", "--steps", "40", "--lr", "3e-3", "--warmup-steps", "5", "--weight-decay", "0.1",
           "--grad-clip", "1.0", "--seed", "0", "--threads", "1", "--log", log]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
    summary = json.loads(out[-1])
    with open(log) as f:
        steps = [json.loads(line) for line in f]
    check(len(steps) == 40 and steps[0]["step"] == 1, "40 step records, numbered from 1")
    check(summary["steps"] == 40 and summary["tok_per_s"] > 0 and summary["params"] > 0,
          f"summary line {out[-1]}")
    check(steps[-1]["loss"] < steps[0]["loss"] - 1.0,
          f"loss falls: {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}")


def run(test, *args):
    """Run one test; an exception (a crashed subprocess, a missing file) is one failure."""
    try:
        test(*args)
    except Exception as e:  # noqa: BLE001 — reported and counted, the other tests still run
        COUNTS["failed"] += 1
        print(f"  FAIL  {test.__name__}{args[1:] if len(args) > 1 else ''} raised {type(e).__name__}: {e}")


def main():
    torch.set_num_threads(1)
    run(test_gradcheck)
    run(test_independent)
    with tempfile.TemporaryDirectory() as tmp:
        run(test_parity, tmp, 0.05)
        run(test_parity, tmp, 0.0)
        run(test_training_cli, tmp)
    print(f"selftest: {COUNTS['passed']} passed, {COUNTS['failed']} failed")
    return 1 if COUNTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
