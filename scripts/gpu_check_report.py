#!/usr/bin/env python3
"""gpu_check_report.py — the arithmetic and the summary of scripts/gpu_check.sh.

gpu_check.sh runs things and keeps its state in plain files of its work folder; this file turns
them into verdicts and tables. Subcommands (each prints to stdout):

  tests OUT RC                 a GoogleTest run's output → "PASS|FAIL|NOGPU<TAB>note"
  run-row ID KIND MODEL L C V B T PREC OPTIONS RC RUNDIR OUT PEAK [BASELINE_MS]
                               one training run → its row of runs.tsv (RUN_FIELDS), then
                               "PASS|FAIL<TAB>note" on a second line; FAIL when its losses are
                               unhealthy (loss_health) or, with BASELINE_MS, when its ms/step is
                               over BASELINE_SLOWER times the baseline's
  track CPU_LOG CUDA_LOG PREC STEPS     → "PASS|FAIL note": the GPU run tracks the CPU twin
  loss BF16_LOG FP8_LOG STEPS JSON      → "PASS|FAIL note", and the figures into JSON
  sample RUNDIR RC TOKENS V    a run with validation and a sample → "PASS|FAIL<TAB>note"
  summary WORK RESULTS         writes RESULTS/gpu_results.md, bench.json, bench.tsv from WORK's
                               meta.tsv, steps.tsv, runs.tsv, attn_*.out, loss.json
  selftest                     the summary and the targets on made-up figures (scripts/test.sh)

MFU = tokens/s · (6N + 6·L·C·T) / 989 TFLOP/s (H100/H200 dense bf16, for fp8 runs too), N the
parameters with the vocabulary padded to a multiple of 128.
"""
import json
import math
import os
import re
import statistics
import sys
import tempfile
from datetime import datetime, timezone

PEAK_FLOPS = 989e12
RUN_FIELDS = ["id", "kind", "model", "B", "T", "prec", "attention", "options", "status", "ms", "tok_s", "mfu",
              "act_gib", "peak_gib", "fp8_gemms", "profile"]
ATTN_SHAPES = [(16, 12), (8, 25)]   # B·NH of the attention lab, T = 1024, hs 64, bf16
LOSS_FALL = 0.01        # a healthy run's last quarter of steps averages ≥ 1% under its first step's loss
BASELINE_SLOWER = 1.10  # a run timed against a baseline fails when its ms/step is over 1.10× the baseline's


# ---------------------------------------------------------------------------------------------
# GoogleTest output


def gtest_verdict(text, rc):
    """(PASS | FAIL | NOGPU, note) of one GoogleTest process's output and exit status."""
    def count(pattern):
        m = re.findall(pattern, text, re.M)
        return int(m[-1]) if m else 0
    passed = count(r"^\[  PASSED  \] (\d+) test")
    failed = count(r"^\[  FAILED  \] (\d+) tests?, listed below")
    skipped = count(r"^\[  SKIPPED \] (\d+) test")
    names = sorted(set(re.findall(r"^\[  FAILED  \] ([A-Za-z0-9_/.]+)", text, re.M)))
    no_device = re.search(r"no CUDA device: (.*)", text)
    note = f"{passed} passed, {failed} failed, {skipped} skipped"
    if names:
        note += ": " + ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
    if rc in (124, 137):
        return "FAIL", note + f"; timed out (exit {rc})"
    if not re.search(r"^\[==========\] \d+ tests? from .* ran", text, re.M):
        return "FAIL", f"no GoogleTest summary (exit {rc}: a crash?); " + note
    if passed + failed + skipped == 0:
        return "FAIL", "the filter selected no test"
    if failed or rc != 0:
        return "FAIL", note + (f" (exit {rc})" if rc else "")
    if skipped:
        reason = no_device.group(1).strip() if no_device else "see the log"
        if no_device:
            return "NOGPU", note + f" (no CUDA device: {reason})"
        return "FAIL", note + f": skipped on a GPU machine ({reason})"
    return "PASS", note


# ---------------------------------------------------------------------------------------------
# Training runs


def read_jsonl(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def step_losses(path):
    return [as_float(r.get("loss")) for r in read_jsonl(path) if r.get("type") == "step"]


def as_float(x):
    """A logged number as a float: the trainer logs a non-finite value as a string ("nan", "inf"),
    PyTorch's json as NaN; None where it is neither (missing, not a number)."""
    try:
        return float(x) if not isinstance(x, bool) else None
    except (TypeError, ValueError):
        return None


def loss_health(records):
    """None where a run's step records are healthy, else why not: a step that was skipped (it skips
    AdamW, so it also reports more tokens/s), a loss that is not a finite number, or a loss that does
    not fall (the mean over the last quarter of the steps, at least one, not LOSS_FALL under the
    first step's loss)."""
    steps = [r for r in records if r.get("type") == "step"]
    if not steps:
        return "no step records in its log"
    skipped = [r.get("step", i + 1) for i, r in enumerate(steps) if r.get("skipped")]
    if skipped:
        return f"{len(skipped)} of {len(steps)} steps skipped (first: step {skipped[0]})"
    losses = [as_float(r.get("loss")) for r in steps]
    bad = [(r.get("step", i + 1), r.get("loss")) for i, (r, x) in enumerate(zip(steps, losses))
           if x is None or not math.isfinite(x)]
    if bad:
        return f"a non-finite loss at step {bad[0][0]} ({bad[0][1]}; {len(bad)} of {len(steps)} steps)"
    if len(losses) < 2:
        return "one step: whether the loss falls cannot be told"
    k = max(1, (len(losses) + 3) // 4)
    tail = sum(losses[-k:]) / k
    if not tail <= (1 - LOSS_FALL) * losses[0]:
        return (f"the loss does not fall: {losses[0]:.4f} at step 1, {tail:.4f} over the last {k} "
                f"(needs ≤ {(1 - LOSS_FALL) * losses[0]:.4f})")
    return None


def flops_per_token(L, C, V, T):
    Vp = (V + 127) // 128 * 128
    N = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return N, 6 * N + 6 * L * C * T


def run_row(argv):
    """One row of runs.tsv from a finished (or cut) training run: the median ms/step over steps
    ≥ 4 (over all steps where there are fewer), tokens/s, MFU, the engine's activation bytes and
    --profile's categories (from its output), the attention and FP8 GEMMs that ran (config.json).
    Its verdict: PASS only for a run that finished with healthy losses (loss_health; else its
    status names why, and the summary's targets leave it out) and, given a baseline ms/step, was
    not over BASELINE_SLOWER times slower."""
    (rid, kind, model, L, C, V, B, T, prec, options, rc, rundir, out, peak) = argv[:14]
    baseline = fnum(argv[14]) if len(argv) > 14 else None
    L, C, V, B, T, rc = int(L), int(C), int(V), int(B), int(T), int(rc)
    log = os.path.join(rundir, "log.jsonl") if os.path.isdir(rundir) else rundir
    records = read_jsonl(log)
    ms = [r["ms"] for r in records if r.get("type") == "step"]
    ms = [m for i, m in enumerate(ms) if i >= 3] or ms
    try:
        text = open(out, errors="replace").read()
    except OSError:
        text = ""
    try:
        config = json.load(open(os.path.join(rundir, "config.json")))
    except (OSError, ValueError):
        config = {}
    act = re.search(r"^memory: activations ([0-9.]+) GiB", text, re.M)
    prof = re.search(r"^profile: categories:(.*)$", text, re.M)
    row = dict.fromkeys(RUN_FIELDS, "")
    row.update(id=rid, kind=kind, model=model, B=B, T=T, prec=prec, options=options,
               attention=config.get("attention", "sdpa" if kind == "torch" else "?"),
               fp8_gemms=config.get("fp8_gemms", "") if prec.startswith("fp8") else "",
               act_gib=act.group(1) if act else "", peak_gib=peak if peak != "n/a" else "",
               profile=prof.group(1).strip() if prof else "")
    health = loss_health(records)
    if ms and rc == 0:
        m = statistics.median(ms)
        tok = B * T / (m / 1000)
        row.update(status="ok" if health is None else f"bad losses: {health}", ms=f"{m:.2f}", tok_s=f"{tok:.0f}",
                   mfu=f"{100 * tok * flops_per_token(L, C, V, T)[1] / PEAK_FLOPS:.1f}")
    elif rc in (124, 137):
        row["status"] = f"timed out after {len(ms)} steps"
    else:
        row["status"] = f"failed (exit {rc})"
    if row["ms"]:
        note = f"{float(row['tok_s']):,.0f} tok/s, MFU {row['mfu']}%, {float(row['ms']):.1f} ms/step"
        verdict = "PASS" if row["status"] == "ok" else "FAIL"
        if row["status"] != "ok":
            note = f"{row['status']}; {note}"
        if baseline:
            x = float(row["ms"]) / baseline
            note += f", {x:.2f}× the baseline's {baseline:g} ms/step"
            if x > BASELINE_SLOWER:
                verdict, note = "FAIL", note + f" (slower than {BASELINE_SLOWER:.2f}×)"
    else:
        last = [line for line in text.splitlines() if line.strip()][-2:]
        note, verdict = row["status"] + (": " + " / ".join(last) if last else ""), "FAIL"
    if row["act_gib"]:
        note += f", activations {row['act_gib']} GiB"
    if row["peak_gib"]:
        note += f", peak {row['peak_gib']} GiB"
    if row["fp8_gemms"] and prec == "fp8-auto":
        note += f", FP8 in {row['fp8_gemms']}"
    return "\t".join(str(row[k]) for k in RUN_FIELDS) + f"\n{verdict}\t{note}"


def track_verdict(cpu_log, cuda_log, prec, steps):
    """The GPU run tracks the CPU twin: every step within 1e-2 relative (fp8 2e-2), the first within
    2^-9 (fp8 2^-7), and the loss falls by 0.5 or more."""
    tol, first = (1e-2, 2.0 ** -9) if prec != "fp8" else (2e-2, 2.0 ** -7)
    c, g = step_losses(cpu_log), step_losses(cuda_log)
    if len(c) < steps:
        return f"FAIL {prec}: the CPU twin's run did not finish ({len(c)} of {steps} steps)"
    if len(g) < steps:
        return f"FAIL {prec}: the GPU run did not finish ({len(g)} of {steps} steps)"
    for who, path in (("the GPU run", cuda_log), ("the CPU twin's run", cpu_log)):
        health = loss_health(read_jsonl(path))
        if health:   # a NaN compares false with every bound: judge it before the comparisons
            return f"FAIL {prec}: {who}: {health}"
    rel = [abs(a - b) / abs(b) for a, b in zip(g, c)]
    worst = max(range(len(rel)), key=lambda i: rel[i])
    ok = rel[0] <= first and rel[worst] <= tol and g[-1] < g[0] - 0.5
    return (("PASS" if ok else "FAIL") + f" {prec}: loss {g[0]:.4f} → {g[-1]:.4f} (CPU twin {c[0]:.4f} → {c[-1]:.4f});"
            f" step 1 {rel[0]:.1e} (≤ {first:.1e}), worst step {worst + 1} {rel[worst]:.1e} (≤ {tol:.0e})")


def loss_verdict(bf16_log, fp8_log, steps, json_path):
    """fp8 against bf16 on the same data: the mean loss of the last 10% of steps within 1%."""
    b, f = step_losses(bf16_log), step_losses(fp8_log)
    if len(b) < steps or len(f) < steps:
        return f"FAIL runs incomplete (bf16 {len(b)}, fp8 {len(f)} of {steps} steps)"
    for who, path in (("bf16", bf16_log), ("fp8", fp8_log)):
        health = loss_health(read_jsonl(path))
        if health:
            return f"FAIL the {who} run: {health}"
    tail = max(1, steps // 10)
    mb, mf = sum(b[-tail:]) / tail, sum(f[-tail:]) / tail
    rel = abs(mf - mb) / mb
    worst = max(abs(x - y) / y for x, y in zip(f, b))
    with open(json_path, "w") as out:
        json.dump({"steps": steps, "tail": tail, "bf16": mb, "fp8": mf, "rel": rel, "worst_step": worst}, out)
    return (("PASS" if rel <= 0.01 else "FAIL") + f" mean loss of the last {tail} steps: fp8 {mf:.4f}, bf16 {mb:.4f},"
            f" {100 * rel:.2f}% apart (≤ 1%); both from {b[0]:.3f}; worst single step {100 * worst:.2f}%")


def sample_verdict(rundir, rc, tokens, V):
    """A run with validation and a sample at its end (attention_decode): it finished, its losses are
    healthy, it logged two or more val losses, all finite, and one sample of TOKENS token ids in
    [0, V) (without a tokenizer the trainer prints ids)."""
    records = read_jsonl(os.path.join(rundir, "log.jsonl"))
    try:
        config = json.load(open(os.path.join(rundir, "config.json")))
    except (OSError, ValueError):
        config = {}
    what = f"precision {config.get('precision', '?')}, attention {config.get('attention', '?')}"
    if rc != 0:
        return "FAIL", f"exit {rc} ({what})"
    health = loss_health(records)
    if health:
        return "FAIL", f"{health} ({what})"
    val = [as_float(r.get("loss")) for r in records if r.get("type") == "val"]
    if len(val) < 2 or not all(x is not None and math.isfinite(x) for x in val):
        return "FAIL", f"val losses {val} (two or more, finite, expected; {what})"
    samples = [r.get("text", "") for r in records if r.get("type") == "sample"]
    if not samples:
        return "FAIL", f"no sample in its log ({what})"
    ids = samples[-1].split()
    if len(ids) != tokens or not all(t.isdigit() and int(t) < V for t in ids):
        return "FAIL", f"the sample has {len(ids)} tokens, not {tokens} ids in [0, {V}): {samples[-1][:80]!r} ({what})"
    steps = [as_float(r.get("loss")) for r in records if r.get("type") == "step"]
    return "PASS", (f"{what}: loss {steps[0]:.4f} → {steps[-1]:.4f}, val {val[0]:.4f} → {val[-1]:.4f} "
                    f"({len(val)} evaluations), a sample of {len(ids)} tokens")


# ---------------------------------------------------------------------------------------------
# The summary


def read_tsv(path, fields=None):
    try:
        with open(path) as f:
            lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    except OSError:
        return []
    if fields is None:
        fields, lines = lines[0], lines[1:]
    return [dict(zip(fields, line + [""] * (len(fields) - len(line)))) for line in lines]


def attention_lines(paths):
    """{(impl, B, NH): {fwd_ms: …, …}} from `attn impl=…` lines (bf16 only)."""
    found = {}
    for path in paths:
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        for line in text.splitlines():
            if not line.startswith("attn impl="):
                continue
            kv = dict(item.split("=", 1) for item in line.split()[1:] if "=" in item)
            if kv.get("dtype") != "bf16":
                continue
            found[(kv["impl"], int(kv["B"]), int(kv["NH"]))] = {k: float(v) for k, v in kv.items()
                                                              if k.endswith(("_ms", "_tflops"))}
    return found


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def ok_runs(runs, **match):
    return [r for r in runs if r["status"] == "ok" and all(str(r[k]) == str(v) for k, v in match.items())]


def best(runs):
    return max(runs, key=lambda r: float(r["tok_s"])) if runs else None


def label(r):
    extra = f", {r['options']}" if r["options"] not in ("", "-") else ""
    return f"{r['prec']}, {r['attention']}, B={r['B']}{extra}"


def targets(runs, attn, loss):
    """[(target, measured, met)] for the targets of issues 13 and 16; met is 'met', 'not met' or
    'not measured'."""
    def verdict(ok):
        return "not measured" if ok is None else ("met" if ok else "not met")
    runs = [r for r in runs if "prof" not in r["options"].split(",")]   # timed with the profiler's events
    out = []
    for d, name in (("fwd", "forward"), ("bwd", "backward")):
        pairs = [(B, NH, attn[("flash", B, NH)][f"{d}_ms"], attn[("sdpa_flash", B, NH)][f"{d}_ms"])
                 for B, NH in ATTN_SHAPES if ("flash", B, NH) in attn and ("sdpa_flash", B, NH) in attn]
        measured = "; ".join(f"{B}·{NH}: {o:.3f} vs {s:.3f} ms ({s / o:.2f}× SDPA's speed)" for B, NH, o, s in pairs)
        ok = all(o < s for *_, o, s in pairs) if len(pairs) == len(ATTN_SHAPES) else None
        out.append((f"attention {name} faster than PyTorch SDPA (flash backend), bf16, T=1024, B·NH 16·12 and 8·25",
                    measured or "—", verdict(ok)))

    t12 = best(ok_runs(runs, kind="torch", model="d12"))
    e12 = best(ok_runs(runs, kind="engine", model="d12", prec="bf16", **({"B": t12["B"]} if t12 else {})))
    ratio = float(e12["tok_s"]) / float(t12["tok_s"]) if e12 and t12 else None
    out.append(("d12 bf16 ≥ 1.3× PyTorch torch.compile tokens/s",
                f"{ratio:.2f}× ({float(e12['tok_s']):,.0f} vs {float(t12['tok_s']):,.0f} tok/s; {label(e12)})"
                if ratio else "—", verdict(None if ratio is None else ratio >= 1.3)))
    out.append(("d12 bf16 MFU ≥ 50%", f"{e12['mfu']}% ({label(e12)})" if e12 else "—",
                verdict(None if not e12 else float(e12["mfu"]) >= 50)))
    e48 = best(ok_runs(runs, kind="engine", model="d48", prec="bf16"))
    out.append(("d48 bf16 MFU ≥ 55%", f"{e48['mfu']}% ({label(e48)})" if e48 else "—",
                verdict(None if not e48 else float(e48["mfu"]) >= 55)))

    def fp8_vs_bf16(model):   # -p fp8 with all block GEMMs in FP8 or --fp8-gemms auto's choice
        f = best([r for r in ok_runs(runs, kind="engine", model=model) if r["prec"] in ("fp8", "fp8-auto")])
        b = best(ok_runs(runs, kind="engine", model=model, prec="bf16"))
        if not f or not b:
            return None, "—"
        x = float(f["tok_s"]) / float(b["tok_s"])
        return x, f"{x:.2f}× (fastest fp8: {float(f['tok_s']):,.0f} tok/s, {label(f)}; fastest bf16: " \
                  f"{float(b['tok_s']):,.0f}, {label(b)})"
    x, text = fp8_vs_bf16("d48")
    out.append(("fp8 ≥ 1.35× bf16 tokens/s at d48", text, verdict(None if x is None else x >= 1.35)))
    x, text = fp8_vs_bf16("d12")
    out.append(("fp8 not slower than bf16 at d12 (--fp8-gemms auto allowed)", text,
                verdict(None if x is None else x >= 1.0)))

    # per size, the pair (same B, attention and options) where fp8 keeps the smallest share: with
    # --lm-head-chunks (h16) the logits, the same in both modes, no longer dilute the ratio at d12
    parts, oks = [], []
    for model in ("d12", "d24", "d48"):
        ratios = []
        for f in ok_runs(runs, kind="engine", model=model, prec="fp8"):
            for b in ok_runs(runs, kind="engine", model=model, prec="bf16", B=f["B"], attention=f["attention"],
                             options=f["options"]):
                if fnum(f["act_gib"]) and fnum(b["act_gib"]):
                    ratios.append((float(f["act_gib"]) / float(b["act_gib"]), f["options"]))
        if ratios:
            r, opts = min(ratios)
            parts.append(f"{model} {r:.2f}× (options {opts})")
            oks.append(r <= 0.75)
        else:
            parts.append(f"{model} —")
            oks.append(None)
    ok = None if None in oks else all(oks)
    if ok is None and False in oks:
        ok = False
    out.append(("fp8 activation memory ≤ 0.75× bf16 at every size (engine's count, same B and options)",
                "; ".join(parts), verdict(ok)))
    out.append(("fp8 within 1% of bf16's loss over 200 steps (d12, mean of the last 20)",
                f"{100 * loss['rel']:.2f}% (fp8 {loss['fp8']:.4f}, bf16 {loss['bf16']:.4f}, {loss['steps']} steps)"
                if loss else "—", verdict(None if not loss else loss["rel"] <= 0.01)))
    return out


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def summary(work, results):
    meta = {r["key"]: r["value"] for r in read_tsv(os.path.join(work, "meta.tsv"), ["key", "value"])}
    steps = read_tsv(os.path.join(work, "steps.tsv"), ["id", "status", "seconds", "cap", "note"])
    runs = read_tsv(os.path.join(work, "runs.tsv"), RUN_FIELDS)
    attn = attention_lines([os.path.join(work, f) for f in ("attn.ours.out", "attn.sdpa.out")])
    try:
        loss = json.load(open(os.path.join(work, "loss.json")))
    except (OSError, ValueError):
        loss = None
    dry = meta.get("mode") == "dry-run"
    tgt = [(t, "—", "dry run: nothing measured") for t, _, _ in targets([], {}, None)] if dry else targets(runs, attn, loss)
    counts = {s: sum(1 for x in steps if x["status"] == s) for s in ("PASS", "FAIL", "SKIPPED", "not reached")}
    running = [x["id"] for x in steps if x["status"] == "running"]
    cut = [x["id"] for x in steps if x["status"] == "cut short"]

    L = []
    L.append(f"### GPU check {datetime.now(timezone.utc):%Y-%m-%d} — {meta.get('gpu', 'no GPU')}")
    L.append("")
    L.append(f"Sources {meta.get('sources', '?')} (commit {meta.get('commit', '?')}); driver {meta.get('driver', '?')}, "
             f"CUDA {meta.get('cuda', '?')}, PyTorch {meta.get('torch', '?')}; {meta.get('cpus', '?')} CPUs; "
             f"binaries: {meta.get('binaries', 'none')}. FP8 GEMMs: {meta.get('fp8_gemm', 'not probed')}.")
    state = ("finished" if meta.get("finished") == "1" else f"cut short during {', '.join(cut)}" if cut else
             f"unfinished: written when {', '.join(running)} started (a run cut short ends here)" if running
             else "unfinished")
    L.append(f"`scripts/gpu_check.sh`{' ' + meta['mode'] if meta.get('mode') else ''}: budget {meta.get('budget', '?')} s, "
             f"{meta.get('elapsed', '?')} s used, {state}. Steps: {counts['PASS']} passed, {counts['FAIL']} failed, "
             f"{counts['SKIPPED']} skipped, {counts['not reached']} not reached.")
    if dry:
        L.append("Dry run (no GPU): each step checked its wiring only; the training runs below are 2 CPU steps "
                 "of d2 at B=2, T=64, whatever their names say.")
    L.append("")
    L.append("Targets (issues 13 and 16), measured in this run:")
    L.append("")
    L.append("| target | measured | |")
    L.append("|---|---|---|")
    for t, m, v in tgt:
        L.append(f"| {md_escape(t)} | {md_escape(m)} | {v} |")
    L.append("")
    L.append("| # | step | result | s | detail |")
    L.append("|---:|---|---|---:|---|")
    for i, s in enumerate(steps, 1):
        L.append(f"| {i} | {s['id']} | {s['status']} | {s['seconds']} | {md_escape(s['note'])} |")
    if attn:
        L.append("")
        L.append("Attention, bf16, T = 1024, hs 64, causal (FLOPs: forward 4·B·NH·T²·hs/2, backward 2.5×; median, "
                 "L2 flushed): ours = dev/cuda/attention_flash (the trainer's `--attention flash` kernel), gemm = "
                 "the GEMM attention, SDPA = dev/cuda/attention_sdpa.py (PyTorch, flash backend forced).")
        L.append("")
        L.append("| B·NH | pass | ours ms | TFLOP/s | SDPA ms | TFLOP/s | SDPA ms / ours | gemm ms |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for B, NH in ATTN_SHAPES:
            for d in ("fwd", "bwd", "fwdbwd"):
                o, s, g = (attn.get((i, B, NH)) for i in ("flash", "sdpa_flash", "gemm"))
                cells = [f"{x[f'{d}_ms']:.3f} | {x[f'{d}_tflops']:.0f}" if x else "— | —" for x in (o, s)]
                ratio = f"{s[f'{d}_ms'] / o[f'{d}_ms']:.2f}×" if o and s else "—"
                L.append(f"| {B}·{NH} | {d} | {cells[0]} | {cells[1]} | {ratio} | "
                         f"{g[f'{d}_ms']:.3f} |" if g else f"| {B}·{NH} | {d} | {cells[0]} | {cells[1]} | {ratio} | — |")
    if runs:
        L.append("")
        L.append("Training, T = 1024, synthetic tokens over GPT-2's vocabulary: median ms/step over steps ≥ 4; "
                 "MFU = tok/s · (6N + 6·L·C·T) / 989 TFLOP/s (fp8 too); act = the engine's activation bytes "
                 "(its `memory: activations` line); peak = the process's GPU memory (nvidia-smi every 200 ms); "
                 "engine runs without `--profile` but for the one whose options name prof (its per-op "
                 "breakdown; left out of the targets); a run with bad losses (a skipped step, a non-finite loss, "
                 "a loss that does not fall) is listed by its status, never timed; "
                 "PyTorch = dev/reference/gpt2.py --dtype bf16 --compile.")
        L.append("")
        L.append("| run | tok/s | MFU | ms/step | act GiB | peak GiB | vs PyTorch | vs bf16 (speed, act) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in runs:
            if r["status"] != "ok":
                L.append(f"| {r['id']} | {md_escape(r['status'])} | | | {r['act_gib']} | {r['peak_gib']} | | |")
                continue
            t = best(ok_runs(runs, kind="torch", model=r["model"], B=r["B"])) if r["kind"] == "engine" else None
            vs_t = f"{float(r['tok_s']) / float(t['tok_s']):.2f}×" if t else ""
            vs_b = ""
            if r["kind"] == "engine" and r["prec"].startswith("fp8"):
                b = best(ok_runs(runs, kind="engine", model=r["model"], prec="bf16", B=r["B"],
                                 attention=r["attention"], options=r["options"]))
                if b:
                    act = (f", {float(r['act_gib']) / float(b['act_gib']):.2f}×"
                           if fnum(r["act_gib"]) and fnum(b["act_gib"]) else "")
                    vs_b = f"{float(r['tok_s']) / float(b['tok_s']):.2f}×{act}"
            name = r["id"] + (f" ({r['fp8_gemms']})" if r["prec"] == "fp8-auto" and r["fp8_gemms"] else "")
            L.append(f"| {name} | {float(r['tok_s']):,.0f} | {r['mfu']}% | {float(r['ms']):.1f} | {r['act_gib']} | "
                     f"{r['peak_gib']} | {vs_t} | {vs_b} |")
        prof = [r for r in runs if r["profile"]]
        if prof:
            L.append("")
            L.append("Where the GPU time goes (`--profile` categories, all steps; per-op tables in gpu_check.log):")
            L.append("")
            for r in prof:
                L.append(f"- {r['id']}: {r['profile']}")
    L.append("")
    failed = [s["id"] for s in steps if s["status"] == "FAIL"]
    L.append("Verdict: " + ("PASS" if not failed else f"FAIL ({', '.join(failed)})")
             + (f"; not reached: {counts['not reached']} step(s)" if counts["not reached"] else "")
             + ("" if meta.get("finished") == "1" else f"; {state}"))

    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, "gpu_results.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    with open(os.path.join(results, "bench.tsv"), "w") as f:
        f.write("\t".join(RUN_FIELDS) + "\n")
        for r in runs:
            f.write("\t".join(str(r[k]) for k in RUN_FIELDS) + "\n")
    with open(os.path.join(results, "bench.json"), "w") as f:
        json.dump({"meta": meta, "steps": steps, "runs": runs, "loss": loss,
                   "attention": [dict(impl=i, B=B, NH=NH, **v) for (i, B, NH), v in sorted(attn.items())],
                   "targets": [dict(target=t, measured=m, verdict=v) for t, m, v in tgt]}, f, indent=1)


# ---------------------------------------------------------------------------------------------
# Self-test: made-up figures through the summary; the targets must come out as computed by hand.
# Then the verdicts on made-up logs: each bad run judged FAIL for its own reason, the healthy ones PASS.


def verdict_cases(work):
    """[(name, verdict, expected, note)] of run_row, track_verdict, loss_verdict and sample_verdict on
    logs written as the trainer writes them (a non-finite number as a string, a skipped step as
    "skipped": 1) and as dev/reference/gpt2.py does (NaN, no "skipped")."""
    def run_dir(name, losses, skipped=(), ms=60.0, extra=(), sample=None, torch=False):
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "log.jsonl"), "w") as f:
            for i, x in enumerate(losses):
                r = {"type": "step", "step": i + 1, "loss": x, "ms": ms}
                if not torch:
                    r["skipped"] = 1 if i + 1 in skipped else 0
                    if isinstance(x, float) and not math.isfinite(x):
                        r["loss"] = f"{x}"   # the trainer's form: "nan", "inf"
                f.write(json.dumps(r) + "\n")
            for r in extra:
                f.write(json.dumps(r) + "\n")
            if sample is not None:
                f.write(json.dumps({"type": "sample", "step": len(losses), "text": sample}) + "\n")
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"attention": "gemm", "precision": "bf16"}, f)
        with open(os.path.join(d, "out.txt"), "w") as f:
            f.write("memory: activations 6.469 GiB for B=16, T=1024 (per rank)\n")
        return d

    falling = [10.99 - 0.2 * i for i in range(20)]            # 10.99 → 7.19
    flat = [10.99 + 0.004 * (-1) ** i for i in range(20)]       # no update would look like this
    cases = []

    def judge(name, want, fn, *args):   # an exception is a wrong verdict too
        try:
            status, note = fn(*args)
        except Exception as e:   # noqa: BLE001 (any error of the verdict code)
            status, note = "error", f"{type(e).__name__}: {e}"
        cases.append((name, status, note, want))

    def row(d, kind="engine", baseline=None):
        argv = [os.path.basename(d), kind, "d12", "12", "768", "50257", "16", "1024", "bf16", "-", "0", d,
                os.path.join(d, "out.txt"), "n/a"] + ([str(baseline)] if baseline is not None else [])
        return run_row(argv).split("\n")[1].split("\t", 1)

    def words(v):   # "PASS|FAIL note" → (status, note)
        return v.split(" ", 1)

    judge("run-row: a healthy run", "PASS", row, run_dir("healthy", falling))
    judge("run-row: one skipped step", "FAIL", row, run_dir("skipped", falling, skipped={5}))
    judge("run-row: a NaN loss (the trainer's \"nan\"), not marked skipped", "FAIL", row,
          run_dir("nan", falling[:6] + [float("nan")] + falling[7:]))
    judge("run-row: an inf loss (\"inf\") at step 12", "FAIL", row,
          run_dir("inf", falling[:11] + [float("inf")] + falling[12:]))
    judge("run-row: PyTorch's log (no \"skipped\") with a NaN loss", "FAIL", row,
          run_dir("torch_nan", falling[:3] + [float("nan")] + falling[4:], torch=True), "torch")
    judge("run-row: d48-like, every step NaN and skipped (fewer than --max-skipped-steps)", "FAIL", row,
          run_dir("all_nan", [float("nan")] * 10, skipped=set(range(1, 11))))
    judge("run-row: a loss that does not fall", "FAIL", row, run_dir("flat", flat))
    judge("run-row: a rising loss", "FAIL", row, run_dir("rising", [10.99 + 0.1 * i for i in range(20)]))
    judge("run-row: 64 ms against a 63.1 ms baseline", "PASS", row, run_dir("baseline_ok", falling, ms=64.0), "engine",
          63.1)
    judge("run-row: 70 ms against a 63.1 ms baseline (1.11×)", "FAIL", row, run_dir("baseline_slow", falling, ms=70.0),
          "engine", 63.1)

    cpu = run_dir("track_cpu", falling)
    gpu_ok = run_dir("track_gpu", [x * (1 + 1e-4) for x in falling])
    gpu_nan = run_dir("track_gpu_nan", falling[:9] + [float("nan")] + falling[10:])
    gpu_skip = run_dir("track_gpu_skip", falling, skipped={3})
    for name, g, want in (("a GPU run within its bounds", gpu_ok, "PASS"),
                          ("a GPU run with a NaN at step 10", gpu_nan, "FAIL"),
                          ("a GPU run with a skipped step", gpu_skip, "FAIL")):
        judge(f"track: {name}", want, lambda g=g: words(track_verdict(os.path.join(cpu, "log.jsonl"),
                                                                      os.path.join(g, "log.jsonl"), "bf16", 20)))
    for name, f, want in (("fp8 0.01% from bf16", gpu_ok, "PASS"), ("fp8 with a skipped step", gpu_skip, "FAIL")):
        judge(f"loss: {name}", want, lambda f=f: words(loss_verdict(os.path.join(cpu, "log.jsonl"),
                                                                    os.path.join(f, "log.jsonl"), 20,
                                                                    os.path.join(work, "loss_case.json"))))

    val = [{"type": "val", "step": 0, "loss": 10.98}, {"type": "val", "step": 20, "loss": 7.3}]
    ids = " ".join(str(i * 97 % 50257) for i in range(256)) + " "
    for name, d, want in (
            ("validation and a 256-token sample", run_dir("sample_ok", falling, extra=val, sample=ids), "PASS"),
            ("no sample", run_dir("sample_none", falling, extra=val), "FAIL"),
            ("a sample of 255 tokens", run_dir("sample_short", falling, extra=val, sample=ids[:ids.rindex(" ", 0, -1)]),
             "FAIL"),
            ("a NaN val loss", run_dir("sample_nan", falling, extra=[val[0], dict(val[1], loss="nan")], sample=ids),
             "FAIL"),
            ("a skipped step", run_dir("sample_skip", falling, skipped={2}, extra=val, sample=ids), "FAIL")):
        judge(f"sample: {name}", want, sample_verdict, d, 0, 256, 50257)
    return cases


def selftest():
    with tempfile.TemporaryDirectory() as work:
        def write(name, text):
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        write("meta.tsv", "gpu\tTest GPU\nbudget\t540\nelapsed\t12\n")
        write("steps.tsv", "build\tPASS\t3\t300\tbundle\nd12.bf16.flash\trunning\t\t45\t\nlab\tnot reached\t\t120\t\n")
        line = "attn impl={} dtype=bf16 B={} NH={} T=1024 hs=64 fwd_ms={} fwd_tflops=1 bwd_ms={} bwd_tflops=1 " \
               "fwdbwd_ms=1 fwdbwd_tflops=1\n"
        write("attn.ours.out", line.format("flash", 16, 12, 0.5, 1.0) + line.format("flash", 8, 25, 0.5, 1.0)
              + line.format("gemm", 16, 12, 2, 3) + line.format("flash", 16, 12, 9, 9).replace("bf16", "fp16"))
        write("attn.sdpa.out", line.format("sdpa_flash", 16, 12, 0.6, 0.9) + line.format("sdpa_flash", 8, 25, 0.6, 1.1))
        rows = [  # the RUN_FIELDS of each run
            ["d12.bf16.flash", "engine", "d12", 16, 1024, "bf16", "flash", "-", "ok", 30, 546133, 41.0, 4.0, 8, "", ""],
            ["d12.bf16.gemm", "engine", "d12", 16, 1024, "bf16", "gemm", "-", "ok", 60, 273067, 20.5, 6.0, 9, "", ""],
            ["torch.d12", "torch", "d12", 16, 1024, "bf16", "sdpa", "-", "ok", 40, 409600, 30.7, "", 13, "", ""],
            ["d12.fp8.flash", "engine", "d12", 16, 1024, "fp8", "flash", "-", "ok", 31, 528516, 39.7, 3.0, 7, "all", ""],
            ["d12.fp8-auto.flash", "engine", "d12", 16, 1024, "fp8-auto", "flash", "-", "ok", 29, 564966, 42.4, 3.2, 7,
             "fc", ""],
            ["d48.bf16.flash", "engine", "d48", 8, 1024, "bf16", "flash", "-", "ok", 200, 40960, 56.0, 20, 40, "", ""],
            ["d48.fp8.flash", "engine", "d48", 8, 1024, "fp8", "flash", "-", "failed (exit 1)", "", "", "", 14, "", "", ""],
            # left out of the targets: a run with bad losses (its speed is no speed), the profiled run
            ["d48.bf16.gemm", "engine", "d48", 8, 1024, "bf16", "gemm", "-", "bad losses: 10 of 10 steps skipped", 100,
             81920, 91.0, 20, 40, "", ""],
            ["profile.d12", "engine", "d12", 16, 1024, "bf16", "flash", "fused,prof", "ok", 20, 819200, 61.5, 4.0, 8,
             "", "gemm 50%"],
        ]
        write("runs.tsv", "".join("\t".join(map(str, r)) + "\n" for r in rows))
        write("loss.json", json.dumps({"steps": 200, "tail": 20, "bf16": 2.0, "fp8": 2.03, "rel": 0.015,
                                       "worst_step": 0.05}))
        summary(work, work)
        got = [t["verdict"] for t in json.load(open(os.path.join(work, "bench.json")))["targets"]]
        md = open(os.path.join(work, "gpu_results.md")).read()
        cases = verdict_cases(work)
    want = ["met", "not met",          # attention: forward faster on both shapes; backward slower at 16·12
            "met", "not met",          # d12: 546133 / 409600 = 1.33× PyTorch; MFU 41%
            "met",                     # d48 MFU 56%
            "not measured",            # d48 fp8 failed
            "met",                     # d12: fp8-auto 564966 ≥ bf16 546133
            "not measured",            # act: d12 3.0 / 4.0 = 0.75×, d24 and d48 not run
            "not met"]                 # loss 1.5% apart
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w] + ([(len(got), got, want)] if len(got) != len(want) else [])
    checks = [("targets", not bad), ("unfinished", "written when d12.bf16.flash started" in md),
              ("ratio vs PyTorch", "| 1.33× |" in md), ("fp8 vs bf16", "0.97×, 0.75×" in md),
              ("fp16 lines ignored", "9.000" not in md), ("failed run listed", "failed (exit 1)" in md),
              ("the profiled run left out of the targets", "1.33× (546,133 vs 409,600" in md),
              ("a run with bad losses left out of the targets", "| d48 bf16 MFU ≥ 55% | 56.0% (" in md),
              ("a run with bad losses listed by its status", "| d48.bf16.gemm | bad losses: 10 of 10 steps skipped |" in md)]
    failed = [name for name, ok in checks if not ok]
    for i, g, w in bad:
        print(f"selftest: target {i + 1}: {g}, expected {w}")
    for name in failed:
        print(f"selftest: {name}: wrong in\n{md}")
    wrong = [(name, got, note, want) for name, got, note, want in cases if got != want]
    for name, got, note, want in wrong:
        print(f"selftest: verdict {name}: {got}, expected {want} ({note})")
    print(f"gpu_check_report selftest: {len(checks) - len(failed)} of {len(checks)} summary checks, "
          f"{len(cases) - len(wrong)} of {len(cases)} verdict cases right: {'ok' if not failed and not wrong else 'FAILED'}")
    return 1 if failed or wrong else 0


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "tests":
        status, note = gtest_verdict(open(args[0], errors="replace").read(), int(args[1]))
        print(f"{status}\t{note}")
    elif cmd == "run-row":
        print(run_row(args))
    elif cmd == "track":
        print(track_verdict(args[0], args[1], args[2], int(args[3])))
    elif cmd == "loss":
        print(loss_verdict(args[0], args[1], int(args[2]), args[3]))
    elif cmd == "sample":
        status, note = sample_verdict(args[0], int(args[1]), int(args[2]), int(args[3]))
        print(f"{status}\t{note}")
    elif cmd == "summary":
        summary(args[0], args[1])
    elif cmd == "selftest":
        return selftest()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
