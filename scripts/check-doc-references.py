#!/usr/bin/env python3
"""Checks that the repository's text cites only documents the repository holds.

    scripts/check-doc-references.py [SOURCE_ROOT]

Reports (file:line: message) and exits 1 on:
  - a reference to notes kept outside the repository (a `../shared` path, "design notes");
  - a path `docs/<name>.md` (or `docs/<dir>/<name>.md`) that does not exist;
  - a note named in capitals (`<NAME>.md`) that no Markdown file of the repository is.
Build directories, the fuzz corpora and this script are not read.
"""
import os
import re
import sys

OUTSIDE = re.compile(r"\.\./shared\b|\bdesign notes?\b", re.I)
DOC_PATH = re.compile(r"\bdocs/[A-Za-z0-9_./-]+?\.md\b")
# Notes outside a docs/ folder are named in capitals (README.md, NOTES.md); generated dialect
# docs (MTDialect.md) and wrapped paths are not.
MD_NAME = re.compile(r"(?<![A-Za-z0-9_./-])[A-Z][A-Z0-9_]*\.md\b")
SKIP_DIRS = {".git", "fuzz-corpus", "__pycache__", ".venv"}
TEXT_SUFFIXES = {".md", ".h", ".cpp", ".c", ".td", ".txt", ".py", ".sh", ".mlir", ".mtl",
                 ".test", ".in", ".cfg", ".dict"}


def text_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP_DIRS and not d.startswith("build")]
        for name in filenames:
            if os.path.splitext(name)[1] in TEXT_SUFFIXES or name in ("Makefile",):
                yield os.path.join(dirpath, name)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    me = os.path.abspath(__file__)
    files = sorted(text_files(root))
    markdown = {os.path.basename(f) for f in files if f.endswith(".md")}
    problems = 0
    for path in files:
        if os.path.abspath(path) == me:
            continue
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if OUTSIDE.search(line):
                    print(f"{rel}:{number}: cites a note outside the repository: {line.strip()}")
                    problems += 1
                    continue
                for name in MD_NAME.findall(line):
                    if name not in markdown:
                        print(f"{rel}:{number}: {name} is not in the repository")
                        problems += 1
                for doc in DOC_PATH.findall(line):
                    if not os.path.isfile(os.path.join(root, doc)):
                        print(f"{rel}:{number}: {doc} does not exist")
                        problems += 1
    print(f"check-doc-references: {problems} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
