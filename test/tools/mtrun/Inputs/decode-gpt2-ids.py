#!/usr/bin/env python3
"""Decodes GPT-2 BPE token ids with vocab.json alone (GPT-2's byte-to-unicode table written out
again here, independently of mtc's tokenizer) and compares the text with a file.

    decode-gpt2-ids.py VOCAB_JSON IDS_FILE TEXT_FILE

Prints "<number of ids> <all ids in the vocabulary> <decoded text == TEXT_FILE's>".
"""
import json
import sys


def byte_of_unicode():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = [chr(b) for b in printable]
    others = [b for b in range(256) if b not in printable]
    chars += [chr(256 + n) for n in range(len(others))]
    return dict(zip(chars, printable + others))


def main():
    vocab_path, ids_path, text_path = sys.argv[1:4]
    token_of_id = {i: token for token, i in json.load(open(vocab_path, encoding="utf-8")).items()}
    ids = [int(t) for t in open(ids_path).read().split()]
    known = all(i in token_of_id for i in ids)
    table = byte_of_unicode()
    text = bytes(table[c] for i in ids if i in token_of_id for c in token_of_id[i])
    expected = open(text_path, "rb").read().rstrip(b"\n")
    print(len(ids), known, text == expected)


if __name__ == "__main__":
    main()
