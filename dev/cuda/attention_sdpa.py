#!/usr/bin/env python3
"""attention_sdpa.py — PyTorch's causal attention, the yardstick of dev/cuda/attention_flash.cu.

torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) with the flash backend
forced (torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION): it fails rather than fall back
to another backend), on the harness's shapes: B*NH = 16*12 and 8*25, T = 1024, hs = 64, bf16 (or
fp16). q, k, v are strided views of one qkv (B, T, 3C) tensor, as a GPT's attention layer makes
them and as train_gpt's kernel reads them.

Timed with CUDA events around the calls alone, each repetition after an L2 flush (a write of twice
the L2 size, as harness.cuh does); the median of --reps is reported:
  fwd     out = sdpa(q, k, v)                      (with autograd on: the flash forward saves lse)
  bwd     torch.autograd.grad(out, (q, k, v), dout) on a forward done beforehand
  fwdbwd  both
FLOPs counted as attention_flash.cu counts them: forward 4*B*NH*T^2*hs/2, backward 2.5x forward.
One line per shape, in attention_flash.cu's format, so the two can be joined on (dtype, B, NH, T):
  attn impl=sdpa_flash dtype=bf16 B=16 NH=12 T=1024 hs=64 fwd_ms=... fwd_tflops=... bwd_ms=...
       bwd_tflops=... fwdbwd_ms=... fwdbwd_tflops=...
Needs a CUDA GPU and PyTorch with CUDA; exits 1 without them.

Usage: python3 dev/cuda/attention_sdpa.py [--reps N] [--dtype bf16|fp16|all] [--B N --NH N --T N]
"""
import argparse
import statistics
import sys

HS = 64


def sdpa_flash_only():
    """The context manager that restricts SDPA to the flash backend."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # PyTorch >= 2.3
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:
        import torch
        return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)


def median_ms(torch, fn, reps, flush):
    """Median time (ms) of fn() over reps runs, each after an L2 flush; 3 warm-up runs first."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(reps):
        flush.fill_(i & 0xFF)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def run_shape(torch, F, dtype_name, dtype, B, NH, T, reps, flush):
    C = NH * HS
    gen = torch.Generator(device="cuda").manual_seed(1234)
    qkv = (1.5 * torch.randn(B, T, 3 * C, device="cuda", generator=gen)).to(dtype).requires_grad_(True)
    q, k, v = (x.transpose(1, 2) for x in qkv.view(B, T, 3, NH, HS).unbind(2))   # (B, NH, T, hs) views
    dout = torch.randn(B, NH, T, HS, device="cuda", dtype=dtype, generator=gen)

    with sdpa_flash_only():
        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        out = fwd()

        def bwd():
            return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

        def fwdbwd():
            o = fwd()
            return torch.autograd.grad(o, (q, k, v), dout)

        fwd_ms = median_ms(torch, fwd, reps, flush)
        bwd_ms = median_ms(torch, bwd, reps, flush)
        fwdbwd_ms = median_ms(torch, fwdbwd, reps, flush)

    fwd_flops = 4.0 * B * NH * T * T * HS / 2
    bwd_flops = 2.5 * fwd_flops
    print(f"attn impl=sdpa_flash dtype={dtype_name} B={B} NH={NH} T={T} hs={HS} "
          f"fwd_ms={fwd_ms:.4f} fwd_tflops={fwd_flops / (fwd_ms * 1e-3) / 1e12:.1f} "
          f"bwd_ms={bwd_ms:.4f} bwd_tflops={bwd_flops / (bwd_ms * 1e-3) / 1e12:.1f} "
          f"fwdbwd_ms={fwdbwd_ms:.4f} fwdbwd_tflops={(fwd_flops + bwd_flops) / (fwdbwd_ms * 1e-3) / 1e12:.1f}",
          flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--dtype", choices=["bf16", "fp16", "all"], default="bf16")
    p.add_argument("--B", type=int)
    p.add_argument("--NH", type=int)
    p.add_argument("--T", type=int)
    a = p.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("attention_sdpa: PyTorch is not installed", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("attention_sdpa: no CUDA device", file=sys.stderr)
        return 1
    shapes = [(16, 12, 1024), (8, 25, 1024)]
    if a.B or a.NH or a.T:
        shapes = [(a.B or 16, a.NH or 12, a.T or 1024)]
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    names = ["bf16", "fp16"] if a.dtype == "all" else [a.dtype]
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name} | torch {torch.__version__} | SDPA flash backend, causal | median of {a.reps}", flush=True)
    flush = torch.empty(max(2 * props.L2_cache_size, 64 << 20) if hasattr(props, "L2_cache_size") else 128 << 20,
                        dtype=torch.uint8, device="cuda")
    for name in names:
        for B, NH, T in shapes:
            run_shape(torch, F, name, dtypes[name], B, NH, T, a.reps, flush)
    return 0


if __name__ == "__main__":
    sys.exit(main())
