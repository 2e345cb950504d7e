#!/usr/bin/python3
"""plot_run.py — a PNG of a train_gpt run from its log: loss and val loss, learning rate,
gradient norm, and where present the fp16 loss scale and the FP8 telemetry (per-tensor amax and
the fraction of values that saturated).

    scripts/plot_run.py out/log.jsonl                 writes out/log.png
    scripts/plot_run.py out/log.jsonl -o run.png

The log is the trainer's JSONL (one record per line: "start", "step", "val", "fp8", "sample", "resume",
"checkpoint", "summary"); a resume is drawn as a dashed vertical line. config.json beside the log,
when there, titles the figure. After the PNG's path it prints what each panel holds, read back
from the figure's own lines ("plot_run: panel loss: train loss 8, val loss 3 | 1 resume"): every
series with its number of finite points drawn, so that a test can check the picture against the
log. Needs matplotlib (Debian's python3-matplotlib; scripts/setup.sh
--test installs it).
"""
import argparse
import json
import math
import os
import signal
import sys
from collections import defaultdict


# The largest files read, as the trainer bounds them: a log.jsonl it resumes, a run's config.json.
MAX_LOG_BYTES = 4 << 30
MAX_CONFIG_BYTES = 16 << 20


def plain(text):
    """Text drawn as it is: matplotlib reads $...$ as mathematics (a run directory named
    'lr_$LR_$SEED' by a sweep's single-quoted -o: a traceback, round 42), and a lone surrogate
    from JSON cannot be drawn."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("$", r"\$")


def read_log(path):
    """The log's records. A torn last line (a run killed mid-write; the trainer cuts it off when it
    resumes) is left out with a warning; a bad line before the last is an error."""
    try:
        if os.path.getsize(path) > MAX_LOG_BYTES:
            sys.exit(f"plot_run: {path}: {os.path.getsize(path)} bytes, larger than any log.jsonl the trainer "
                     f"reads ({MAX_LOG_BYTES} bytes): not a run's log?")
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [(n, line.strip()) for n, line in enumerate(f, 1) if line.strip()]
    except OSError as e:
        sys.exit(f"plot_run: {path}: {e.strerror}")
    except MemoryError:
        sys.exit(f"plot_run: {path}: out of memory reading it")
    records = []
    for i, (n, line) in enumerate(lines):
        try:
            r = json.loads(line)
        except (ValueError, RecursionError) as e:   # JSONDecodeError, an integer past Python's digit limit, nesting
            if i == len(lines) - 1:
                print(f"plot_run: warning: {path}:{n}: the last line is not a whole record (a run killed while "
                      "writing it?): left out", file=sys.stderr)
                break
            sys.exit(f"plot_run: {path}:{n}: not a JSON record ({e})")
        if not isinstance(r, dict):
            sys.exit(f"plot_run: {path}:{n}: not a record (a JSON object), but {line[:40]}")
        # the records drawn at a step must name it; their values may be missing (drawn as gaps)
        step = r.get("step")
        if r.get("type") in ("step", "val", "resume", "fp8") and not (isinstance(step, int) and abs(step) < 2**63):
            sys.exit(f"plot_run: {path}:{n}: a {r['type']} record without an integer \"step\" (of 64 bits)")
        records.append(r)
    return records


FLT_MAX = 3.4028234663852886e38   # the largest finite value the trainer logs: it computes in FP32


def number(x):
    """A log value as a float; the trainer writes inf/NaN as strings. A finite value beyond FP32's
    range is none of the trainer's, and is a gap (round 43: a span past a double's range, 1e308 and
    -1e308, was a matplotlib traceback)."""
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):   # OverflowError: an integer beyond a double's range
        return math.nan
    return math.nan if math.isfinite(v) and abs(v) > FLT_MAX else v


def title_of(log_path):
    config = os.path.join(os.path.dirname(os.path.abspath(log_path)), "config.json")
    try:
        if os.path.getsize(config) > MAX_CONFIG_BYTES:   # not the trainer's: the title is the log's path
            return log_path
        with open(config, encoding="utf-8") as f:
            c = json.load(f)
        if not isinstance(c, dict):
            return log_path
        return (f"{c.get('model')} ({c.get('n_layer')}L, {c.get('n_embd')}C), {c.get('precision')}, "
                f"B={c.get('batch_size')} T={c.get('seq_len')}, {c.get('tokens_per_step')} tokens/step — {log_path}")
    except (OSError, ValueError, RecursionError):
        return log_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="the run's log.jsonl")
    ap.add_argument("-o", "--output", help="PNG to write (default: the log's path with .png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_run: needs matplotlib: apt-get install python3-matplotlib (scripts/setup.sh --test installs it)")

    records = read_log(args.log)
    steps = [r for r in records if r.get("type") == "step"]
    vals = [r for r in records if r.get("type") == "val"]
    fp8 = [r for r in records if r.get("type") == "fp8"]
    resumes = [r["step"] for r in records if r.get("type") == "resume"]
    if not steps and not vals:
        sys.exit(f"plot_run: {args.log} has no step or val records")

    x = [r["step"] for r in steps]
    panels = ["loss", "lr", "norm"]
    if any("loss_scale" in r for r in steps):
        panels.append("scale")
    if fp8:
        panels += ["amax", "saturated"]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.6 * len(panels)), sharex=True, squeeze=False)
    axes = {name: ax for name, ax in zip(panels, axes[:, 0])}

    ax = axes["loss"]
    if steps:
        ax.plot(x, [number(r.get("loss")) for r in steps], lw=0.8, label="train loss")
    if vals:
        ax.plot([r["step"] for r in vals], [number(r.get("loss")) for r in vals], "o-", ms=3, label="val loss")
    skipped = [r for r in steps if r.get("skipped")]
    if skipped:
        # a skipped step's loss is often inf or NaN, which draws nothing: its marker then sits at the
        # last finite train loss before it (or the lowest one, for the first steps)
        finite = [(r["step"], number(r.get("loss"))) for r in steps if math.isfinite(number(r.get("loss")))]

        def marker_y(r):
            y = number(r.get("loss"))
            if math.isfinite(y):
                return y
            before = [v for s, v in finite if s < r["step"]]
            return before[-1] if before else (min(v for _, v in finite) if finite else 0.0)
        ax.plot([r["step"] for r in skipped], [marker_y(r) for r in skipped], "rx", label="skipped step")
    ax.set_ylabel("loss")
    ax.legend(loc="upper right")

    axes["lr"].plot(x, [number(r.get("lr")) for r in steps], lw=0.8, label="lr")
    axes["lr"].set_ylabel("learning rate")
    axes["norm"].plot(x, [number(r.get("grad_norm")) for r in steps], lw=0.8, label="grad norm")
    axes["norm"].set_ylabel("grad norm")
    axes["norm"].set_yscale("log")
    if "scale" in axes:
        axes["scale"].plot(x, [number(r.get("loss_scale")) for r in steps], lw=0.8, label="loss scale")
        axes["scale"].set_ylabel("fp16 loss scale")
        axes["scale"].set_yscale("log")
    if fp8:
        by_tensor = defaultdict(list)
        for r in fp8:
            by_tensor[str(r.get("tensor"))].append(r)
        # a tensor is "h<layer>.<gemm>.<operand>": the colour says the operand, the line style the
        # GEMM, so one legend of both reads every layer's lines
        colours = {"x": "C0", "w": "C1", "dy": "C2"}
        styles = {"qkv": "-", "attproj": "--", "fc": ":", "fcproj": "-."}
        for name, rs in sorted(by_tensor.items()):
            xs = [r["step"] for r in rs]
            parts = name.split(".")
            gemm, operand = (parts[1], parts[2]) if len(parts) == 3 else ("", "")
            look = dict(lw=0.6, color=colours.get(operand), ls=styles.get(gemm, "-"), label=plain(name))
            axes["amax"].plot(xs, [number(r.get("amax")) for r in rs], **look)
            axes["saturated"].plot(xs, [number(r.get("saturated")) for r in rs], **look)
        axes["amax"].set_ylabel("FP8 amax")
        axes["amax"].set_yscale("log")
        axes["saturated"].set_ylabel("FP8 saturated fraction")
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], color=c, lw=1.2, label=op) for op, c in colours.items()]
        handles += [Line2D([], [], color="gray", ls=ls, lw=1.2, label=g) for g, ls in styles.items()]
        for panel in ("amax", "saturated"):
            axes[panel].legend(handles=handles, loc="upper right", fontsize=6, ncol=2)

    for a in axes.values():
        for step in resumes:
            a.axvline(step, color="gray", ls="--", lw=0.8, label="_resume")
        a.grid(alpha=0.3)
    axes[panels[-1]].set_xlabel("step" + ("   (dashed: resumed)" if resumes else ""))
    fig.suptitle(plain(title_of(args.log)), fontsize=9)
    fig.tight_layout()
    stem = os.path.basename(args.log[:-len(".jsonl")] if args.log.endswith(".jsonl") else args.log)
    out = args.output or os.path.join(os.path.dirname(args.log), stem + ".png")
    if out.endswith(os.sep) or os.path.isdir(out):   # a directory: the plot goes into it, named for the log
        out = os.path.join(out, stem + ".png")
    formats = fig.canvas.get_supported_filetypes()
    extension = os.path.splitext(out)[1][1:].lower()
    if not extension:
        out += ".png"   # what matplotlib writes for a name without an extension: said as written
    elif extension not in formats:
        sys.exit(f"plot_run: cannot write {out}: matplotlib writes {', '.join(sorted(formats))}, not {extension}")
    try:
        fig.savefig(out, dpi=110)
    except OSError as e:
        sys.exit(f"plot_run: cannot write {out}: {e.strerror}")
    print(f"plot_run: {out}")
    for name in panels:
        lines = axes[name].get_lines()
        series = [f"{line.get_label()} {sum(1 for y in line.get_ydata() if math.isfinite(y))}"
                  for line in lines if line.get_label() != "_resume"]
        drawn_resumes = sum(1 for line in lines if line.get_label() == "_resume")
        legend = axes[name].get_legend()
        keys = f" | legend: {', '.join(t.get_text() for t in legend.get_texts())}" if legend else ""
        print(f"plot_run: panel {name}: {', '.join(series)} | {drawn_resumes} resume{'s' if drawn_resumes != 1 else ''}{keys}")


if __name__ == "__main__":
    # stdout into a reader that stops early (| head): end quietly, as command-line tools do (round
    # 30: a BrokenPipeError traceback)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
