#!/usr/bin/env python3
"""check_docs.py — the code references in the docs are true.

   scripts/check_docs.py [FILE.md ...]      (default: docs/walkthrough.md and README.md)

A reference is `path: name` (a file of the repository, then a function, type or symbol it
defines or calls), `path` alone, or `Class::member` next to a file reference. Each path must
exist, and each name must occur in that file. Prints one line per failure and, last,
"check_docs: P passed, F failed" (scripts/test.sh counts these).
"""
import os
import re
import sys

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
        for cls, member in sorted(set(QUALIFIED.findall(text))):
            pattern = re.compile(r"\b" + cls + r"::" + member + r"\b|\b" + member + r"\s*\(")
            found = any(re.search(r"\b(class|struct)\s+" + cls + r"\b", b) and pattern.search(b) for b in blobs) or \
                any(re.search(r"\b" + cls + r"::" + member + r"\b", b) for b in blobs)
            check(found, f"{doc}: {cls}::{member} is not defined")
    print(f"check_docs: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["docs/walkthrough.md", "README.md"]))
