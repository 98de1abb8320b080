#!/usr/bin/env python3
"""Writes plain-text files as JSON lines for `mtc-data preprocess`: one document per paragraph
(text between blank lines, its whitespace runs folded to one space), {"text": ...} per line.

    scripts/text-to-jsonl.py OUTPUT.jsonl FILE...

`make demo` and test/tools/mtrun/train-real-text.test use it on Debian's license texts
(/usr/share/common-licenses, in every Debian system through base-files), a real English
corpus of about 230,000 characters that needs no download. Symbolic links are skipped (GPL
links to GPL-3 there), so no text is read twice. Undecodable bytes are an error naming the
file: a corpus is not silently altered.
"""
import json
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: text-to-jsonl.py OUTPUT.jsonl FILE...")
    documents = characters = 0
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        for path in sorted(sys.argv[2:]):
            if os.path.islink(path):
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as error:
                sys.exit(f"text-to-jsonl.py: {path}: {error}")
            for paragraph in text.split("\n\n"):
                paragraph = " ".join(paragraph.split())
                if paragraph:
                    out.write(json.dumps({"text": paragraph}, ensure_ascii=False) + "\n")
                    documents += 1
                    characters += len(paragraph)
    if documents == 0:
        sys.exit("text-to-jsonl.py: the files hold no text")
    print(f"wrote {sys.argv[1]}: {documents} documents, {characters} characters")


if __name__ == "__main__":
    main()
