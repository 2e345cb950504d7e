#!/usr/bin/env python3
"""ptx_functions.py — the PTX side of scripts/check_ptx.sh: split PTX into functions, normalise
each body so that names do not matter, hash it, and compare the hashes with the recorded list
tests/data/default_path_ptx.txt (or rewrite that list).

  ptx_functions.py index OUT.json SOURCE=FILE.ptx…         split, normalise, hash, demangle
  ptx_functions.py check RECORD CUR.json [--reference BASE.json] [--baseline BASE.json]
                   [--baseline-name WHAT] [--counts FILE]   the check (check_ptx.sh prints the total)
  ptx_functions.py record RECORD CUR.json --nvcc V --commit C   rewrite the record
  ptx_functions.py dump CUR.json DIR                        the normalised bodies, one file each

A function's normalised body ("names aside"):
  * comments, blank lines, .loc / .file and debug-only labels dropped; whitespace runs collapsed;
  * linkage (.visible, .weak, .extern) dropped: moving a kernel into or out of an anonymous
    namespace changes only that;
  * every symbol — the function's own name (and so its _param_N names), every mangled identifier
    (_Z…: called functions, shared-memory arrays _ZZ…, globals) and every other name the module
    defines ($str, __cudart_… tables) — replaced by sym0, sym1, … in order of first appearance
    (sym0 is the function itself); basic-block labels lose the function's index in the module
    ($L__BB12_3 → $L__BB_3), as does the local-memory depot;
  * the declarations of the variables it uses (its own demoted .shared arrays, and the module's
    .shared / .global / .const ones, with their sizes and initialisers) moved to the end, in
    placeholder order: a variable that ptxas demotes into a kernel when only that kernel uses it,
    or keeps in the module when two do, reads the same.
The hash is the first 16 hex digits of the normalised body's sha256.
"""
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

# ---- the tag rules: which functions the default path reaches --------------------------------------
# "default" = what ./train_gpt runs on a GPU with default flags in fp32, bf16 and fp16: --fused-kernels
# false, --attention gemm, no --gemm-autotune, no FP8, --recompute 0, --lm-head-chunks 1, validation
# and sampling (attention_decode), ZeRO 0 and 1 (the NCCL Comm). Read from cuda/backend_cuda.cu (what
# each Backend op launches when fused_kernels and flash_attention are false), model/gpt.cpp (which ops
# the model calls outside FP8) and the .cuh launchers (which instantiations each one launches; both
# the vectorised and the scalar kernel of an op are reachable, by alignment at run time).
# The first rule whose pattern matches (re.search) the demangled name gives a new function its tag;
# --record keeps the tag of a function already in the record. No rule: "other", listed by --record.
TAG_RULES = [
    # FP8 (-p fp8): the casts, amax, the scale state, the FP8 GEMMs' widening fallback and FP32 bias,
    # the fused FP8 producers (their Source / Sink / Cast template arguments), the NCCL NaN-max
    # all-reduce (only the FP8 amaxes reduce over ranks on the device)
    (r"Fp8|fp8|quantize_|amax_kernel|add_bias_kernel|nan_max_kernel|LayerNormBackwardCast", "other"),
    # --attention flash
    (r"attention_flash_detail::", "other"),
    # --fused-kernels: the residual add fused into the layernorm (kResidual = true), the bias
    # gradient summed by layernorm backward (kSums = true, three partials) and by GELU backward
    (r"layernorm_forward_kernel<\d+, true,", "other"),
    (r"layernorm_backward_kernel<\d+, true,", "other"),
    (r"layernorm_param_reduce_kernel<\d+, 3>", "other"),
    (r"GeluBackwardColumns<", "other"),
    # the default path, op by op (backend_cuda.cu)
    (r"\(anonymous namespace\)::(float_to_act|act_to_float|probe)_kernel", "default"),  # weights in/out; the GENCODE probe
    (r"::(encoder_forward|encoder_backward_wpe|encoder_backward_wte|iota)_kernel<", "default"),
    (r"^void cub::", "default"),  # encoder_backward's stable radix sort (CUB picks its kernels at run time)
    (r"::layernorm_forward_kernel<\d+, false,", "default"),
    (r"::layernorm_backward_kernel<\d+, false, [^,]+, train_gpt::cuda::NoSink>", "default"),
    (r"::layernorm_param_reduce_kernel<\d+, 2>", "default"),
    (r"::column_partial_sums_kernel<train_gpt::cuda::TensorColumns<", "default"),  # bias gradients
    (r"::column_sums_reduce_kernel<", "default"),
    (r"::(gelu_forward|gelu_backward|residual_forward|fused_classifier|adamw)_kernel<", "default"),
    (r"::attention_gemm_detail::", "default"),  # --attention gemm (between its cuBLASLt GEMMs)
    (r"::attention_decode_kernel<", "default"),  # sampling
    (r"::(sum_squares_partial|sum_partials)_kernel<", "default"),  # the gradient norm
]


def rule_tag(name):
    for pattern, tag in TAG_RULES:
        if re.search(pattern, name):
            return tag
    return None


# ---- splitting ------------------------------------------------------------------------------------

LINKAGE = r"(?:(?:\.visible|\.weak|\.extern|\.common)\s+)*"
FUNC_START = re.compile(r"^" + LINKAGE + r"\.(entry|func)\b")
FUNC_NAME = re.compile(r"\.(?:entry|func)\s*(?:\([^)]*\))?\s*([A-Za-z_$%][\w$]*)")
VAR_DECL = re.compile(r"^" + LINKAGE + r"\.(shared|global|const)\b")
TOKEN = re.compile(r"[A-Za-z_$%][\w$]*")
PARAM = re.compile(r"^(.*)_param_(\d+)$")
DEBUG_LABEL = re.compile(r"^\$L__(tmp|func_begin|func_end)\d+:$")


def clean_lines(text):
    """PTX lines without comments, debug line info or surrounding whitespace; none empty."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.split("\n"):
        line = line.split("//", 1)[0].strip()
        if not line or line.startswith(".loc") or line.startswith(".file") or DEBUG_LABEL.match(line):
            continue
        out.append(re.sub(r"\s+", " ", line))
    return out


def var_name(decl):
    """The name a variable declaration declares: `.shared .align 4 .b8 NAME[128];` → NAME."""
    d = decl.split("=", 1)[0]
    d = re.sub(r"\[[^\]]*\]", "", d).rstrip("; ")
    return d.split()[-1]


def brace_delta(line):
    return line.count("{") - line.count("}")


def split_module(text):
    """(functions, module variables): functions as dicts kind, name, header, body (lists of lines);
    variables as {name: declaration}."""
    lines = clean_lines(text)
    functions, variables, defined = [], {}, set()
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if FUNC_START.match(line):
            header = [line]
            i += 1
            # the header runs to '{' (a definition) or to a line ending in ';' (a prototype)
            while i < n and lines[i] != "{" and not header[-1].endswith(";"):
                header.append(lines[i])
                i += 1
            joined = " ".join(header)
            name = FUNC_NAME.search(joined).group(1)
            if header[-1].endswith(";") or i >= n:
                continue  # a prototype
            body, depth = [], 0
            while i < n:
                body.append(lines[i])
                depth += brace_delta(lines[i])
                i += 1
                if depth == 0:
                    break
            kind = "entry" if re.search(r"\.entry\b", header[0]) else "func"
            functions.append({"kind": kind, "name": name, "header": header, "body": body})
            defined.add(name)
            continue
        if VAR_DECL.match(line):
            decl = line
            while not decl.endswith(";") and i + 1 < n:
                i += 1
                decl += " " + lines[i]
            variables[var_name(decl)] = decl
            i += 1
            continue
        if line.startswith(".section"):  # debug sections (-G / -lineinfo): skip the block
            depth = brace_delta(line)
            i += 1
            while i < n and (depth > 0 or lines[i] == "{"):
                depth += brace_delta(lines[i])
                i += 1
            continue
        i += 1
    return functions, variables, defined


def strip_linkage(line):
    return re.sub(r"^" + LINKAGE, "", line)


def normalise(fn, module_vars, defined):
    """The function's normalised body (see the module docstring)."""
    local_decls = {}
    kept = []
    for line in fn["body"]:
        if VAR_DECL.match(line):
            local_decls[var_name(line)] = line
        else:
            kept.append(line)
    symbols = set(module_vars) | set(defined) | set(local_decls)
    mapping = {fn["name"]: "sym0"}

    def placeholder(sym):
        if sym not in mapping:
            mapping[sym] = "sym%d" % len(mapping)
        return mapping[sym]

    def is_symbol(tok):
        return tok.startswith("_Z") or tok in symbols

    def repl(m):
        tok = m.group(0)
        p = PARAM.match(tok)
        if p and is_symbol(p.group(1)):
            return placeholder(p.group(1)) + "_param_" + p.group(2)
        return placeholder(tok) if is_symbol(tok) else tok

    def subst(line):
        line = re.sub(r"\$L__BB\d+_", "$L__BB_", line)
        line = re.sub(r"__local_depot\d+", "__local_depot", line)
        return TOKEN.sub(repl, line)

    out = [subst(strip_linkage(fn["header"][0]))] + [subst(l) for l in fn["header"][1:]]
    out += [subst(l) for l in kept]
    # declarations of the variables used, in placeholder order (an initialiser may name another)
    decls, done = [], set()
    while True:
        pending = [s for s in mapping if s not in done and (s in local_decls or s in module_vars)]
        if not pending:
            break
        for s in pending:
            done.add(s)
            decls.append((mapping[s], subst(strip_linkage(local_decls.get(s) or module_vars[s]))))
    if decls:
        out.append("// variables")
        out += [d for _, d in sorted(decls, key=lambda kv: int(kv[0][3:]))]
    return "\n".join(out) + "\n"


def demangle(names):
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None or not names:
        shown = list(names)
    else:
        r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
        shown = r.stdout.split("\n")[: len(names)]
    out = []
    for s in shown:
        s = re.sub(r"_GLOBAL__N_\w*", "(anonymous namespace)", s)
        s = re.sub(r"_INTERNAL_\w*", "(internal)", s)  # nvcc's per-file prefix of internal names
        out.append(s)
    return out


def index(out_path, sources):
    entries = []
    for spec in sources:
        source, path = spec.split("=", 1)
        with open(path) as f:
            functions, variables, defined = split_module(f.read())
        for fn in functions:
            body = normalise(fn, variables, defined)
            entries.append({
                "hash": hashlib.sha256(body.encode()).hexdigest()[:16],
                "kind": fn["kind"],
                "mangled": fn["name"],
                "source": source,
                "body": body,
                "calls": sorted({t for t in TOKEN.findall(" ".join(fn["body"])) if t in defined and t != fn["name"]}),
            })
    for e, name in zip(entries, demangle([e["mangled"] for e in entries])):
        e["name"] = name
    with open(out_path, "w") as f:
        json.dump(entries, f)


def load_index(path):
    with open(path) as f:
        return json.load(f)


# ---- the record -----------------------------------------------------------------------------------

def read_record(path):
    """(header lines, entries as dicts hash, tag, name)."""
    header, entries = [], []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or not line.strip():
                header.append(line)
                continue
            h, tag, name = line.split(None, 2)
            entries.append({"hash": h, "tag": tag, "name": name})
    return header, entries


def record_field(header, key):
    for line in header:
        m = re.match(r"#\s*" + re.escape(key) + r":\s*(.*)$", line)
        if m:
            return m.group(1).strip()
    return None


def unique_functions(entries):
    """One per (hash, name): a template instantiated in two translation units compiles twice."""
    seen, out = set(), []
    for e in entries:
        if (e["hash"], e["name"]) not in seen:
            seen.add((e["hash"], e["name"]))
            out.append(e)
    return out


RECORD_HEADER = """\
# default_path_ptx.txt — what the trainer's CUDA translation units (train_gpt.cu, llmc/**/*.cu)
# compile to, one line per PTX function (.entry kernel or .func device function):
#     hash  tag  demangled-name
# hash: sha256 (16 hex digits) of the function's PTX body with names aside (scripts/ptx_functions.py
# says how it is normalised); tag: "default" for what ./train_gpt's default path launches or calls
# (fp32, bf16 and fp16 with default flags: --fused-kernels false, --attention gemm, no
# --gemm-autotune, no FP8, validation, sampling, ZeRO 0 and 1), "other" for the rest (FP8, flash
# attention, the fused kernels). scripts/check_ptx.sh fails when a default hash is no longer
# compiled; other changes are notes. The tags were chosen by reading cuda/backend_cuda.cu,
# model/gpt.cpp and the .cuh launchers, per template instantiation (a layernorm with the FP8 sink is
# other, with NoSink default), conservatively (unsure: default); TAG_RULES in
# scripts/ptx_functions.py spells them out and tags functions new to the record.
# Made by scripts/check_ptx.sh --record (keeps each function's tag: by name, else by hash; edit a
# tag by hand if the rules do not fit). Diffs on a failure rebuild the commit that last changed
# this file: commit it together with the sources it was recorded from.
"""


def sort_key(e):
    return (re.sub(r"^void ", "", e["name"]), e["hash"])


def cmd_record(record_path, cur_path, nvcc, commit):
    cur = unique_functions(load_index(cur_path))
    try:
        _, old = read_record(record_path)
    except FileNotFoundError:
        old = []
    by_name, by_hash = {}, {}
    for e in old:
        by_name.setdefault(e["name"], e)
        by_hash.setdefault(e["hash"], []).append(e)
    cur_names = {e["name"] for e in cur}

    def renamed_from(e):
        """The recorded function of e's hash that e likely was: one whose name went, the most alike."""
        gone = [o for o in by_hash[e["hash"]] if o["name"] not in cur_names] or by_hash[e["hash"]]
        return max(gone, key=lambda o: difflib.SequenceMatcher(None, o["name"], e["name"]).ratio())
    kept_name = kept_hash = 0
    ruled, unruled, renamed, changed = [], [], [], []
    lines = []
    for e in sorted(cur, key=sort_key):
        if e["name"] in by_name:
            tag = by_name[e["name"]]["tag"]
            kept_name += 1
            if by_name[e["name"]]["hash"] != e["hash"]:
                changed.append((tag, e["name"]))
        elif e["hash"] in by_hash:
            was = renamed_from(e)
            tag = was["tag"]
            kept_hash += 1
            renamed.append((tag, was["name"], e["name"]))
        else:
            tag = rule_tag(e["name"])
            if tag is None:
                tag = "other"
                unruled.append(e["name"])
            else:
                ruled.append((tag, e["name"]))
        e["tag"] = tag
        lines.append("%s  %s  %s" % (e["hash"], tag, e["name"]))
    # a device function called from a default function is default (its body is hashed apart)
    tags = {e["mangled"]: e for e in cur}
    frontier = [e for e in cur if e["tag"] == "default"]
    promoted = []
    while frontier:
        e = frontier.pop()
        for callee in e.get("calls", []):
            c = tags.get(callee)
            if c is not None and c["tag"] != "default":
                c["tag"] = "default"
                promoted.append(c["name"])
                frontier.append(c)
    if promoted:
        lines = ["%s  %s  %s" % (e["hash"], e["tag"], e["name"]) for e in sorted(cur, key=sort_key)]
    dropped = sorted({e["name"] for e in old if e["name"] not in cur_names} -
                     {old_name for _, old_name, _ in renamed})
    with open(record_path, "w") as f:
        f.write(RECORD_HEADER)
        f.write("# nvcc: %s\n" % nvcc)
        f.write("# recorded from: %s\n" % commit)
        f.write("\n".join(lines) + "\n")
    n_default = sum(1 for e in cur if e["tag"] == "default")
    print("check_ptx: wrote %s: %d functions, %d default, %d other" % (record_path, len(cur), n_default,
                                                                       len(cur) - n_default))
    print("check_ptx: tags kept by name: %d; by hash (renamed or moved): %d; from the rules: %d; "
          "no rule (other): %d" % (kept_name, kept_hash, len(ruled), len(unruled)))
    for tag, name in changed:
        print("check_ptx:   new hash (%s): %s" % (tag, name))
    for tag, was, now in renamed:
        print("check_ptx:   renamed (%s): %s -> %s" % (tag, was, now))
    for tag, name in ruled if old else []:   # a first record: every function is new
        print("check_ptx:   new, by the rules (%s): %s" % (tag, name))
    for name in unruled:
        print("check_ptx:   new, no rule matches (other; set the tag by hand if the default path reaches it): %s" % name)
    for name in promoted:
        print("check_ptx:   default, called from a default function: %s" % name)
    for name in dropped:
        print("check_ptx:   dropped (no longer compiled): %s" % name)


# ---- the check ------------------------------------------------------------------------------------

def diff_lines(old, new, old_label, new_label, limit):
    d = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_label, new_label, lineterm="", n=3))
    if len(d) > limit:
        d = d[:limit] + ["... (%d more diff lines; scripts/check_ptx.sh --dump DIR writes the bodies)" % (len(d) - limit)]
    return d


def cmd_check(record_path, cur_path, reference_path, baseline_path, baseline_name, counts_path, diff_limit):
    header, record = read_record(record_path)
    cur = unique_functions(load_index(cur_path))
    cur_hashes = {e["hash"] for e in cur}
    cur_by_name = {}
    for e in cur:
        cur_by_name.setdefault(e["name"], []).append(e)
    record_hashes = {e["hash"] for e in record}
    record_names = {e["name"] for e in record}
    baseline_by_name = {}
    if baseline_path:
        for e in unique_functions(load_index(baseline_path)):
            baseline_by_name.setdefault(e["name"], []).append(e)
    # --reference: the record's commit rebuilt by this nvcc (the record was made by another): each
    # recorded function's hash is the rebuilt one of its name
    if reference_path:
        ref_by_name = {}
        for e in unique_functions(load_index(reference_path)):
            ref_by_name.setdefault(e["name"], []).append(e["hash"])
        expected = []
        for r in record:
            for h in ref_by_name.get(r["name"], [None]):
                expected.append(dict(r, hash=h))
        record_hashes = {e["hash"] for e in expected if e["hash"]}
    else:
        expected = record

    passed = failed = 0
    new_names = [e for e in cur if e["hash"] not in record_hashes and e["name"] not in record_names]
    for r in expected:
        found = r["hash"] is not None and r["hash"] in cur_hashes
        if r["tag"] == "default":
            if found:
                passed += 1
                continue
            failed += 1
            if r["hash"] is None:
                print("check_ptx: FAIL %s: not in the rebuilt %s, so no hash to look for" % (r["name"], baseline_name))
                continue
            now = cur_by_name.get(r["name"], [])
            if not now:
                # renamed and changed? the new function whose name is the most alike
                alike = sorted(new_names, key=lambda e: -difflib.SequenceMatcher(None, e["name"], r["name"]).ratio())
                alike = [e for e in alike[:1] if difflib.SequenceMatcher(None, e["name"], r["name"]).ratio() >= 0.6]
                print("check_ptx: FAIL %s: no function compiles to its recorded PTX (%s), and none has its name now%s"
                      % (r["name"], r["hash"], "; the likeliest rename: %s (%s)" % (alike[0]["name"], alike[0]["hash"])
                                                if alike else ""))
                if not alike:
                    continue
                now = alike
            else:
                print("check_ptx: FAIL %s: its PTX changed (recorded %s, now %s)"
                      % (r["name"], r["hash"], ", ".join(e["hash"] for e in now)))
            old = baseline_by_name.get(r["name"], [])
            old = [e for e in old if e["hash"] == r["hash"]] or old
            if not baseline_path:
                print("check_ptx:     (no diff: no baseline to rebuild; scripts/check_ptx.sh --diff-against COMMIT)")
            elif not old:
                print("check_ptx:     (no diff: %s has no function of that name)" % baseline_name)
            else:
                if old[0]["hash"] != r["hash"] and not reference_path:
                    print("check_ptx:     note: %s compiles it to %s here, not to the recorded %s"
                          % (baseline_name, old[0]["hash"], r["hash"]))
                for line in diff_lines(old[0]["body"], now[0]["body"], "%s (%s)" % (baseline_name, old[0]["hash"]),
                                       "now (%s)" % now[0]["hash"], diff_limit):
                    print("    " + line)
        elif not found:
            now = cur_by_name.get(r["name"], [])
            if now:
                print("check_ptx: note: other function changed: %s" % r["name"])
            else:
                print("check_ptx: note: other function no longer compiled (or renamed and changed): %s" % r["name"])
    # renamed or moved, same code
    for e in cur:
        if e["hash"] in record_hashes and e["name"] not in record_names:
            was = [r["name"] for r in expected if r["hash"] == e["hash"]]
            was = max(was, key=lambda n: difflib.SequenceMatcher(None, n, e["name"]).ratio())   # the likeliest
            print("check_ptx: note: %s has the recorded PTX of %s (renamed or moved)" % (e["name"], was))
    for e in new_names:
        print("check_ptx: note: new %s, not in the record: %s (%s)" % (e["kind"], e["name"], e["hash"]))
    n_default = sum(1 for r in record if r["tag"] == "default")
    print("check_ptx: %d functions compiled now; the record (%s): %d functions, %d default"
          % (len(cur), record_field(header, "recorded from") or "?", len(record), n_default))
    with open(counts_path, "w") as f:
        f.write("%d %d\n" % (passed, failed))


def cmd_dump(cur_path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for i, e in enumerate(load_index(cur_path)):
        safe = re.sub(r"[^\w.-]+", "_", e["name"])[:120]
        with open(os.path.join(out_dir, "%s_%s.ptx" % (e["hash"], safe)), "w") as f:
            f.write("// %s\n// %s (%s)\n" % (e["name"], e["mangled"], e["source"]))
            f.write(e["body"])


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "index":
        index(args[0], args[1:])
    elif cmd == "record":
        opts = dict(zip(args[2::2], args[3::2]))
        cmd_record(args[0], args[1], opts.get("--nvcc", "?"), opts.get("--commit", "?"))
    elif cmd == "check":
        opts = dict(zip(args[2::2], args[3::2]))
        cmd_check(args[0], args[1], opts.get("--reference"), opts.get("--baseline"),
                  opts.get("--baseline-name", "the baseline"), opts["--counts"], int(opts.get("--diff-lines", 400)))
    elif cmd == "dump":
        cmd_dump(args[0], args[1])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
