"""report.py — the precision study's table and plot, from train_gpt's JSONL logs.

    python3 dev/precision/report.py OUT_MD OUT_PNG LABEL=LOG.jsonl [LABEL=LOG.jsonl ...]

The first LABEL is the baseline (fp32). Writes a markdown table (final val loss, its difference
from the baseline, skipped steps) to OUT_MD and a PNG of the train (smoothed) and val loss
curves to OUT_PNG. Prints the table too.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def read_log(path):
    steps, losses, val_steps, val_losses, skipped = [], [], [], [], 0
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == "step":
                loss = r["loss"]
                if isinstance(loss, (int, float)):
                    steps.append(r["step"])
                    losses.append(loss)
                skipped += int(r.get("skipped", 0))
            elif r["type"] == "val":
                val_steps.append(r["step"])
                val_losses.append(r["loss"])
    if not val_losses:
        sys.exit(f"report.py: {path} has no val records (run with -v)")
    return steps, losses, val_steps, val_losses, skipped


def smooth(xs, k=10):
    out, acc = [], []
    for x in xs:
        acc.append(x)
        if len(acc) > k:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out_md, out_png = sys.argv[1], sys.argv[2]
    runs = [arg.split("=", 1) for arg in sys.argv[3:]]
    logs = {label: read_log(path) for label, path in runs}
    base_label = runs[0][0]
    base = logs[base_label][3][-1]

    lines = ["| run | val loss at step 0 | final val loss | vs " + base_label + " | skipped steps |",
             "|---|---:|---:|---:|---:|"]
    for label, _ in runs:
        _, _, _, val_losses, skipped = logs[label]
        final = val_losses[-1]
        lines.append(f"| {label} | {val_losses[0]:.4f} | {final:.4f} | {100 * (final - base) / base:+.2f}% | {skipped} |")
    table = "\n".join(lines) + "\n"
    with open(out_md, "w") as f:
        f.write(table)
    print(table)

    fig, (ax_train, ax_val) = plt.subplots(1, 2, figsize=(12, 4.5))
    # zoom past the first tenth of training, where every run drops from ln(V) alike
    last_step = max(logs[label][0][-1] for label, _ in runs)
    late = [x for label, _ in runs for s_, x in zip(logs[label][0], smooth(logs[label][1])) if s_ >= last_step / 10]
    late_val = [x for label, _ in runs for s_, x in zip(logs[label][2], logs[label][3]) if s_ >= last_step / 10]
    for label, _ in runs:
        steps, losses, val_steps, val_losses, _ = logs[label]
        ax_train.plot(steps, smooth(losses), label=label, linewidth=1.2)
        ax_val.plot(val_steps, val_losses, marker="o", markersize=3, label=label, linewidth=1.2)
    ax_train.set(title="train loss (10-step mean)", xlabel="step", ylabel="loss",
                 ylim=(min(late) - 0.05, max(late) + 0.05))
    ax_val.set(title="val loss", xlabel="step", ylabel="loss", ylim=(min(late_val) - 0.05, max(late_val) + 0.05))
    for ax in (ax_train, ax_val):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    main()
