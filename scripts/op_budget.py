#!/usr/bin/env python3
"""op_budget.py — the per-op budget of one training step: each kernel-set op's FLOPs and bytes,
its roofline time on an H200, and, from a --profile run, its measured time beside it.

   scripts/op_budget.py [--model d12] [-B 16] [-T 1024] [--precision bf16] [--vocab 50257]
                        [--profile TRAINER_OUTPUT --steps S]        a markdown table on stdout
   scripts/op_budget.py --trace-lines ...                           the step's ops as --trace-ops writes them

The step is the one GPT::forward, GPT::backward and GPT::update run for one micro-batch (no
gradient accumulation, one rank, the default flags: no recompute, one LM-head chunk), written
out here op by op in the order the model calls them, with the shapes ./train_gpt --trace-ops
prints; scripts/check_docs.py checks this list against a real trace, line for line.

Costs are the least any kernel for the op must do, so the roofline is a floor:
  * FLOPs: the GEMMs' 2·M·N·K (the backward's two products 4·N·C·OC); attention's causal products
    only (forward 2: QKᵀ and PV, 2·B·T²·C; backward 5: S again, dP, dV, dQ, dK, 5·B·T²·C: the GEMM
    attention computes the full T×T, twice these); element-wise ops a few per element, which
    never decide their time.
  * bytes: every tensor the op must read and write once, in its dtype (activations a = 2 bytes
    in bf16/fp16/fp8, 4 in fp32/tf32; parameter gradients, Adam state, master weights 4); no
    re-reads, no T×T scratch.
  * roofline time = max(FLOPs / peak FLOP/s, bytes / peak bandwidth), H200 SXM: 989 TFLOP/s dense
    bf16/fp16 tensor cores (494 TF32, 67 fp32 without tensor cores), 4.8 TB/s HBM3e. GEMMs and
    attention's products at the tensor-core peak of the precision, the rest at the fp32 peak.
Measured: a trainer run with --profile prints per op its calls and total ms over all its steps
(cuda/op_profiler.cuh); divided by --steps, beside the roofline, and their ratio. gpu_check's
profiled bench writes this table next to its log.
"""
import argparse
import collections
import os
import re
import sys

SHAPES = {"d12": (12, 768, 12), "d24": (24, 1024, 16), "d36": (36, 1280, 20), "d48": (48, 1600, 25)}
PEAK_TENSOR = {"fp32": 67e12, "tf32": 494e12, "bf16": 989e12, "fp16": 989e12, "fp8": 989e12}  # fp8: bf16 GEMMs here
PEAK_FP32 = 67e12
PEAK_BW = 4.8e12
ACT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}


def shape_of(model):
    if model in SHAPES:
        return SHAPES[model]
    n = int(model[1:])
    return n, 64 * n, n


def step_ops(L, C, NH, V, B, T, max_T=None, act_bytes=2):
    """The step's ops in call order: (trace line, op name, flops, bytes-as-a-function-of-a)."""
    max_T = max_T or T
    Vp = (V + 127) // 128 * 128
    N = B * T
    ops = []

    def op(line, flops, nbytes):   # nbytes: bytes for activation size a
        ops.append((line, line.split()[0], flops, nbytes))

    def matmul_forward(c, oc, bias=True):
        op(f"matmul_forward N={N} C={c} OC={oc}" + (" bias" if bias else ""), 2 * N * c * oc,
           lambda a: a * (N * c + oc * c + N * oc) + (a * oc if bias else 0))

    def matmul_backward(c, oc, dbias=False):
        op(f"matmul_backward N={N} C={c} OC={oc}" + (" dbias" if dbias else ""), 4 * N * c * oc,
           lambda a: a * (N * oc + oc * c + N * c + N * c) + 8 * oc * c + (8 * oc if dbias else 0))

    def layernorm_backward(sums):
        op(f"layernorm_backward N={N} C={C}" + (" dinp_sums" if sums else ""), 15 * N * C,
           lambda a: a * 4 * N * C + 8 * N + 16 * C)

    att_flops = 2 * B * T * T * C  # two causal products of B·NH·T²/2·hs multiply-adds, 2 FLOPs each
    op(f"encoder_forward B={B} T={T} C={C}", N * C, lambda a: a * (2 * N * C + T * C))
    op(f"layernorm_forward N={N} C={C}", 7 * N * C, lambda a: a * 2 * N * C + 8 * N)
    for l in range(L):
        matmul_forward(C, 3 * C)
        op(f"attention_forward B={B} T={T} C={C} NH={NH}", att_flops, lambda a: a * 4 * N * C + 4 * B * NH * T)
        matmul_forward(C, C)
        op(f"residual_layernorm_forward N={N} C={C}", 8 * N * C, lambda a: a * 4 * N * C + 8 * N)
        matmul_forward(C, 4 * C)
        op(f"gelu_forward n={N * 4 * C}", 10 * N * 4 * C, lambda a: a * 2 * N * 4 * C)
        matmul_forward(4 * C, C)
        op(f"residual_layernorm_forward N={N} C={C}", 8 * N * C, lambda a: a * 4 * N * C + 8 * N)
    matmul_forward(C, Vp, bias=False)
    op(f"fused_classifier N={N} V={V} Vp={Vp} dlogits", 5 * N * V, lambda a: a * 2 * N * Vp + 8 * N)
    matmul_backward(C, Vp)
    op(f"copy_to_host bytes={4 * N}", 0, lambda a: 4 * N)
    op(f"zero bytes={act_bytes * N * C}", 0, lambda a: a * N * C)  # the residual stream's gradient
    layernorm_backward(True)
    for l in reversed(range(L)):
        matmul_backward(4 * C, C)
        op(f"gelu_backward_bias rows={N} cols={4 * C}", 20 * N * 4 * C, lambda a: a * 3 * N * 4 * C + 8 * 4 * C)
        matmul_backward(C, 4 * C)
        layernorm_backward(True)
        matmul_backward(C, C)
        op(f"attention_backward B={B} T={T} C={C} NH={NH}", att_flops * 5 // 2,
           lambda a: a * 8 * N * C + 4 * B * NH * T)
        matmul_backward(C, 3 * C, dbias=True)
        layernorm_backward(l > 0)
    op(f"encoder_backward B={B} T={T} C={C}", N * C, lambda a: a * N * C + 8 * N * C + 8 * T * C)
    sizes = [Vp * C, max_T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
             L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C]
    total = sum(sizes)
    op(f"sum_squares n={total}", 2 * total, lambda a: 4 * total)
    for n in sizes:  # grads, m, v, master read (16n), m, v, master written (12n), the working weights (a·n)
        op(f"adamw_update n={n} t=1", 12 * n, lambda a, n=n: 28 * n + a * n)
    return ops


def profile_ms(path):
    """{op: total ms} from the 'profile: OP CALLS MS SHARE US' lines of a --profile run's output."""
    out = {}
    for line in open(path, errors="replace"):
        m = re.match(r"^profile: (\w+)\s+(\d+)\s+([\d.]+)\s+[\d.]+%", line)
        if m:
            out[m.group(1)] = float(m.group(3))
    return out


def table(args):
    L, C, NH = shape_of(args.model)
    a = ACT_BYTES[args.precision]
    tensor_peak = PEAK_TENSOR[args.precision]
    per = collections.OrderedDict()
    for line, name, flops, nbytes in step_ops(L, C, NH, args.vocab, args.B, args.T, act_bytes=a):
        byts = nbytes(a)
        products = name.startswith("matmul") or name.startswith("attention")
        t = max(flops / (tensor_peak if products else PEAK_FP32), byts / PEAK_BW)
        e = per.setdefault(name, [0, 0.0, 0.0, 0.0, 0.0])  # calls, flops, bytes, roofline s, compute-bound s
        e[0] += 1
        e[1] += flops
        e[2] += byts
        e[3] += t
        e[4] += t if flops / (tensor_peak if products else PEAK_FP32) >= byts / PEAK_BW else 0
    measured = profile_ms(args.profile) if args.profile else {}
    steps = args.steps or 1
    total_roof = sum(e[3] for e in per.values())
    print(f"**{args.model}** (L={L}, C={C}, NH={NH}), B={args.B}, T={args.T}, {args.precision}, vocab {args.vocab}: "
          f"one step's roofline {total_roof * 1e3:.2f} ms "
          f"({args.B * args.T / total_roof / 1e3:.0f}k tok/s)" +
          (f"; measured over {steps} profiled steps" if measured else ""))
    print()
    print("| op | calls | GFLOP | MB | bound | roofline ms | measured ms | measured / roofline |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for name, (calls, flops, byts, t, tc) in sorted(per.items(), key=lambda kv: -kv[1][3]):
        bound = "compute" if tc >= t / 2 else "memory"
        got = measured.get(name)
        got_s = f"{got / steps:.3f}" if got is not None else "—"
        ratio = f"{got / steps / (t * 1e3):.1f}×" if got is not None and t > 0 else "—"
        print(f"| {name} | {calls} | {flops / 1e9:.1f} | {byts / 1e6:.1f} | {bound} | {t * 1e3:.3f} | {got_s} | {ratio} |")
    if measured:
        rest = sorted(set(measured) - set(per))
        if rest:
            print(f"\nMeasured ops outside the step's budget: " +
                  ", ".join(f"{n} {measured[n] / steps:.3f} ms" for n in rest))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="d12")
    p.add_argument("-B", type=int, default=16)
    p.add_argument("-T", type=int, default=1024)
    p.add_argument("--max-seq-len", type=int, default=0)
    p.add_argument("--n-embd", type=int, default=0)
    p.add_argument("--n-head", type=int, default=0)
    p.add_argument("--precision", default="bf16", choices=sorted(ACT_BYTES))
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--profile", help="a --profile run's output: its per-op totals fill the measured column")
    p.add_argument("--steps", type=int, default=0, help="the profiled run's steps (its totals are over all of them)")
    p.add_argument("--trace-lines", action="store_true", help="print the step's ops as --trace-ops writes them")
    args = p.parse_args()
    # round 44: bad values were tracebacks, or tables of zeros
    if args.model not in SHAPES and not re.fullmatch(r"d[1-9][0-9]{0,3}", args.model):
        p.error(f"--model {args.model}: expected d<layers> (d12) or one of {', '.join(sorted(SHAPES))}")
    for flag, value in (("-B", args.B), ("-T", args.T), ("--vocab", args.vocab)):
        if value < 1:
            p.error(f"{flag} {value}: expected a positive number")
    if args.steps < 0 or args.n_embd < 0 or args.n_head < 0 or args.max_seq_len < 0:
        p.error("--steps, --n-embd, --n-head and --max-seq-len are 0 (the default) or positive")
    if (args.n_embd or args.n_head) and not args.trace_lines:
        p.error("--n-embd and --n-head apply with --trace-lines only")
    if args.profile and not os.path.isfile(args.profile):
        p.error(f"--profile {args.profile}: no such file")
    if args.trace_lines:
        L, C, NH = shape_of(args.model)
        C, NH = args.n_embd or C, args.n_head or NH
        for line, *_ in step_ops(L, C, NH, args.vocab, args.B, args.T, args.max_seq_len or args.T,
                                 ACT_BYTES[args.precision]):
            print(line)
        return 0
    if args.profile and not args.steps:
        p.error("--profile needs --steps (the run's totals are over all its steps)")
    table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
