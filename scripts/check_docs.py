#!/usr/bin/env python3
"""check_docs.py — the code references in the docs are true.

   scripts/check_docs.py [FILE.md ...]      (default: docs/walkthrough.md and README.md)

A reference is `path: name` (a file of the repository, then a function, type or symbol it
defines or calls), `path` alone, or `Class::member` next to a file reference. Each path must
exist, and each name must occur in that file.

The walkthrough's step is also checked against what a step runs: ./train_gpt --trace-ops
(llmc/train/op_trace.h) on a tiny byte corpus, one step of d2 on the CPU kernel set, lists every
kernel-set op the run calls. Every op of the step (from encoder_forward to the last adamw_update)
must be named in the walkthrough's section 2; every op of its forward table must be one the
forward calls; scripts/op_budget.py's model of the step must be the trace's step, line for line
(ops, order, shapes); and the bf16 step must call the same ops, in the same order, as the fp32 one
(section 3: "nothing in train_gpt.cu, gpt.cpp or block_ops.cpp changes"). Without ./train_gpt
(not built) these checks fail.

Prints one line per failure and, last, "check_docs: P passed, F failed" (scripts/test.sh counts
these).
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = r"((?:llmc|tests|dev|scripts|docs)/[A-Za-z0-9_./-]+\.(?:cuh|cpp|cu|h|py|sh|md)|train_gpt\.cu)"
# "path: name" or "path: `name`" (name: an identifier, possibly Class::member)
REF = re.compile(PATH + r":\s*`?([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)`?")
BARE = re.compile(PATH)
QUALIFIED = re.compile(r"`([A-Z][A-Za-z0-9]*)::([a-z_][A-Za-z0-9_]*)`")


def main(files):
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"check_docs: {what}")

    for doc in files:
        text = open(os.path.join(ROOT, doc)).read()
        for path in sorted(set(BARE.findall(text))):
            path = path.rstrip(".")
            check(os.path.exists(os.path.join(ROOT, path)), f"{doc}: {path} does not exist")
        for path, name in sorted(set(REF.findall(text))):
            full = os.path.join(ROOT, path)
            if not os.path.isfile(full):
                continue   # reported above
            member = name.split("::")[-1]
            check(re.search(r"\b" + re.escape(member) + r"\b", open(full).read()) is not None,
                  f"{doc}: {name} is not in {path}")
        # Class::member: the class and the member appear together in some file of llmc/ or train_gpt.cu
        sources = []
        for base, _, names in os.walk(os.path.join(ROOT, "llmc")):
            sources += [os.path.join(base, n) for n in names]
        sources.append(os.path.join(ROOT, "train_gpt.cu"))
        blobs = [open(s, errors="replace").read() for s in sources]
        # every code name in backticks (an identifier with an underscore or a camel hump) is in the code
        blob = "\n".join(blobs + [open(os.path.join(base, n), errors="replace").read()
                                   for d in ("scripts", "tests", "dev")
                                   for base, _, names in os.walk(os.path.join(ROOT, d))
                                   for n in names if n.endswith((".h", ".cpp", ".cu", ".cuh", ".py", ".sh"))])
        for name in sorted(set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text))):
            if "_" in name.strip("_") or re.search(r"[a-z][A-Z]", name):
                check(re.search(r"\b" + re.escape(name) + r"\b", blob) is not None,
                      f"{doc}: `{name}` is named, but no source defines or uses it")
        for cls, member in sorted(set(QUALIFIED.findall(text))):
            pattern = re.compile(r"\b" + cls + r"::" + member + r"\b|\b" + member + r"\s*\(")
            found = any(re.search(r"\b(class|struct)\s+" + cls + r"\b", b) and pattern.search(b) for b in blobs) or \
                any(re.search(r"\b" + cls + r"::" + member + r"\b", b) for b in blobs)
            check(found, f"{doc}: {cls}::{member} is not defined")
        if os.path.basename(doc) == "walkthrough.md":
            check_step(text, check)
    print(f"check_docs: {passed} passed, {failed} failed")
    return 1 if failed else 0


def step_trace(precision):
    """The ops (first word of each --trace-ops line) of a one-step d2 run on a byte corpus, CPU."""
    with tempfile.TemporaryDirectory() as d:
        tokens = [(i * 7 + i // 13) % 256 for i in range(4096)]
        header = [20240520, 1, len(tokens)] + [0] * 253   # shard.h: magic, version 1 (uint16), N
        with open(os.path.join(d, "t_train_000000.bin"), "wb") as f:
            f.write(struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens))
        trace = os.path.join(d, "trace.txt")
        cmd = [os.path.join(ROOT, "train_gpt"), "-i", os.path.join(d, "t_train_*.bin"), "-j", "", "--vocab-size",
               "256", "-e", "d2", "--n-embd", "32", "-b", "2", "-t", "16", "-x", "1", "-v", "0", "-g", "0",
               "--device", "cpu", "--threads", "1", "-p", precision, "-o", os.path.join(d, "out"), "--trace-ops",
               trace]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except OSError as e:
            return None, f"{cmd[0]}: {e}", None
        if run.returncode != 0:
            return None, f"{' '.join(cmd)}: exit {run.returncode}: {run.stdout[-400:]}{run.stderr[-400:]}", None
        lines = [line.strip() for line in open(trace) if line.strip()]
        return [line.split()[0] for line in lines], "", lines


def section(text, start, end):
    a = text.find(start)
    b = text.find(end, a + 1) if a >= 0 else -1
    return text[a:b] if a >= 0 and b > a else ""


def step_of(ops):
    """The step's part of a run's ops: from its first encoder_forward to its last adamw_update."""
    first = ops.index("encoder_forward") if "encoder_forward" in ops else 0
    last = len(ops) - 1 - ops[::-1].index("adamw_update") if "adamw_update" in ops else len(ops) - 1
    return ops[first:last + 1]


def check_step(text, check):
    ops, why, lines = step_trace("fp32")
    check(ops is not None, f"walkthrough.md: the step's trace (--trace-ops) did not run: {why}")
    if ops is None:
        return
    step = step_of(ops)
    first = ops.index(step[0]) if step else 0
    step_lines = lines[first:first + len(step)]
    forward = step[:step.index("fused_classifier") + 1] if "fused_classifier" in step else step
    two = section(text, "## 2. The step", "## 3.")
    named = set(re.findall(r"`(?:[A-Za-z]+::)?([a-z_][a-z0-9_]*)`", two))
    for op in sorted(set(step)):
        check(op in named, f"walkthrough.md: the step calls {op} (--trace-ops), section 2 does not name it")
    table = section(two, "| what | op |", "\n\n")
    for row in table.splitlines()[2:]:
        cells = row.split("|")
        if len(cells) < 3:
            continue
        for op in re.findall(r"`([a-z_][a-z0-9_]*)`", cells[2]):
            check(op in forward, f"walkthrough.md: the forward table names {op}, the forward does not call it")
    # the per-op budget's model of the step (scripts/op_budget.py) is the step the trainer runs
    budget = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "op_budget.py"), "--trace-lines",
                             "--model", "d2", "--n-embd", "32", "--n-head", "2", "-B", "2", "-T", "16", "--vocab",
                             "256", "--precision", "fp32"], capture_output=True, text=True)
    check(budget.returncode == 0 and budget.stdout.split("\n")[:-1] == step_lines,
          "scripts/op_budget.py's step is not the step --trace-ops shows (its ops, their order or shapes): " +
          budget.stderr[-300:])
    # and its measured column reads a --profile table (cuda/op_profiler.cuh's lines) per step
    with tempfile.NamedTemporaryFile("w", suffix=".out", delete=False) as f:
        f.write("profile: op                              calls          ms  share    us/call\n"
                "profile: matmul_forward                    490       12.34  45.0%       25.2\n")
    measured = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "op_budget.py"), "--model", "d2",
                               "--profile", f.name, "--steps", "10"], capture_output=True, text=True)
    os.unlink(f.name)
    row = [line for line in measured.stdout.splitlines() if line.startswith("| matmul_forward |")]
    check(len(row) == 1 and "| 1.234 |" in row[0],
          f"scripts/op_budget.py --profile: matmul_forward's measured ms per step is not 12.34 / 10: {row}")
    bf16, why, _ = step_trace("bf16")   # (the set-up differs: bf16 allocates and uploads master weights)
    check(bf16 is not None and step_of(bf16) == step,
          "walkthrough.md: the bf16 step does not call the fp32 step's ops in the same order" +
          (f": {why}" if bf16 is None else ""))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["docs/walkthrough.md", "README.md"]))
