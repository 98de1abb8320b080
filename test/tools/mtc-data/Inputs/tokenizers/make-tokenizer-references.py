#!/usr/bin/env python3
"""Makes the tokenizer fixtures of test/tools/mtc-data/tokenizers.test: small tokenizer files and
the token ids established implementations give for corpus.jsonl. The outputs are committed; the
tests need neither this script nor its packages.

    make-tokenizer-references.py train DIR
        gpt2-vocab.json, gpt2-merges.txt: a GPT-2-style byte-level BPE (up to 3000 merges, of
        pairs seen twice at least) trained by Hugging Face's `tokenizers` (ByteLevelBPETokenizer)
        on the GNU GPL version 3 as Debian ships it (/usr/share/common-licenses/GPL-3) and
        corpus.jsonl's texts; "<|endoftext|>" is added after the merges, as in GPT-2's own
        vocab.json.
        spm.model: a Llama-style SentencePiece BPE model (1000 pieces, byte fallback, digits
        split, identity normalization, <unk> 0, <s> 1, </s> 2, no pad) trained by the
        `sentencepiece` package on the GPL-3 alone, so that corpus.jsonl's CJK, emoji and other
        scripts fall back to bytes.
    make-tokenizer-references.py references DIR
        gpt2.ids, sentencepiece.ids, gptsentencepiece.ids, llama2.ids: for every document of
        corpus.jsonl, the ids Megatron's tools/preprocess_data.py writes with --append-eod
        (each non-empty sentence a sequence, the end-of-document id after the last), as
        "D: ids" with sequences separated by " |" (what `mtc-data tokens` prints).
        GPT-2: Hugging Face transformers' GPT2Tokenizer, the pure-Python implementation that
        OpenAI's encoder.py and Megatron's GPT2BPETokenizer also are (`regex` for the pattern),
        with its special-token handling bypassed as Megatron's has none ("<|endoftext|>" in
        the text is text); checked against `tokenizers` (Rust), which must agree.
        SentencePiece: the `sentencepiece` package's ids, wrapped as Megatron's
        SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer wrap them
        (megatron/training/tokenizer/tokenizer.py, rewritten below from its description).

How the committed files were made (Debian 12, Python 3.11.7; packages in a virtual environment
outside the repository):

    python3 -m venv /work/venv-tok
    /work/venv-tok/bin/pip install "transformers<5" tokenizers sentencepiece regex
    # transformers 4.57.6, tokenizers 0.22.2, sentencepiece 0.2.3, regex 2026.11.19
    cd test/tools/mtc-data/Inputs/tokenizers
    /work/venv-tok/bin/python make-tokenizer-references.py train .
    /work/venv-tok/bin/python make-tokenizer-references.py references .

transformers 5 dropped the pure-Python GPT2Tokenizer, hence "<5".
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GPL3 = "/usr/share/common-licenses/GPL-3"


def corpus():
    """corpus.jsonl's documents, each a list of sentences."""
    docs = []
    with open(os.path.join(HERE, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            docs.append(text if isinstance(text, list) else [text])
    return docs


def train(out):
    import sentencepiece
    from tokenizers import ByteLevelBPETokenizer

    texts = [open(GPL3, encoding="utf-8").read()]
    texts += ["".join(doc) for doc in corpus()]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=256 + 3000, min_frequency=2, show_progress=False)
    bpe.save_model(out)
    os.replace(os.path.join(out, "vocab.json"), os.path.join(out, "gpt2-vocab.json"))
    os.replace(os.path.join(out, "merges.txt"), os.path.join(out, "gpt2-merges.txt"))
    path = os.path.join(out, "gpt2-vocab.json")
    vocab = json.load(open(path, encoding="utf-8"))
    vocab["<|endoftext|>"] = len(vocab)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)

    sentencepiece.SentencePieceTrainer.train(
        input=GPL3, model_prefix=os.path.join(out, "spm"), model_type="bpe", vocab_size=1000,
        character_coverage=1.0, byte_fallback=True, split_digits=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2)
    os.remove(os.path.join(out, "spm.vocab"))


class MegatronSentencePiece:
    """Megatron's SentencePieceTokenizer: the model's pieces plus <CLS>, <SEP>, <EOD>, <MASK> and
    the pad, BOS and EOS pieces (<PAD>, <BOS>, <EOS> where the model has none), each added after
    the pieces unless it is one; those tokens in the text are encoded as themselves."""

    def __init__(self, sp):
        self.sp = sp
        self.vocab = {sp.id_to_piece(i): i for i in range(len(sp))}
        self.special = {}

        def piece(i, fallback):
            return sp.id_to_piece(i) if 0 <= i < len(sp) else fallback

        for t in ["<CLS>", "<SEP>", "<EOD>", "<MASK>", piece(sp.pad_id(), "<PAD>"),
                  piece(sp.bos_id(), "<BOS>"), piece(sp.eos_id(), "<EOS>")]:
            if t not in self.vocab:
                self.vocab[t] = len(self.vocab)
            self.special[t] = self.vocab[t]
        self.eod = self.vocab["<EOD>"]

    def tokenize(self, text):
        ids, at = [], 0
        while True:
            found = {t: text.find(t, at) for t in self.special if text.find(t, at) >= 0}
            if not found:
                break
            token = min(found, key=found.get)
            ids += self.sp.encode_as_ids(text[at:found[token]])
            ids.append(self.special[token])
            at = found[token] + len(token)
        return ids + self.sp.encode_as_ids(text[at:])


def write_ids(path, tokenize, eod):
    """What preprocess_data.py's Encoder.encode gives with --append-eod, a document a line."""
    with open(path, "w") as f:
        for d, doc in enumerate(corpus()):
            sequences = [s for s in (tokenize(sentence) for sentence in doc) if s]
            if sequences:
                sequences[-1] = sequences[-1] + [eod]
            line = " |".join("".join(" %d" % i for i in s) for s in sequences)
            f.write("%d:%s\n" % (d, line))


def references(out):
    import sentencepiece
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Tokenizer

    vocab, merges = os.path.join(out, "gpt2-vocab.json"), os.path.join(out, "gpt2-merges.txt")
    slow = GPT2Tokenizer(vocab, merges)
    rust = ByteLevelBPETokenizer(vocab, merges)

    def gpt2(text):
        ids = slow.convert_tokens_to_ids(slow._tokenize(text))
        if rust.encode(text).ids != ids:
            sys.exit("transformers and tokenizers disagree on %r" % text)
        return ids

    write_ids(os.path.join(out, "gpt2.ids"), gpt2, slow.convert_tokens_to_ids("<|endoftext|>"))

    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(out, "spm.model"))
    megatron = MegatronSentencePiece(sp)
    write_ids(os.path.join(out, "sentencepiece.ids"), megatron.tokenize, megatron.eod)
    write_ids(os.path.join(out, "gptsentencepiece.ids"), sp.encode_as_ids, sp.eos_id())
    write_ids(os.path.join(out, "llama2.ids"), lambda s: [sp.bos_id()] + sp.encode(s),
              sp.eos_id())


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("train", "references"):
        sys.exit(__doc__)
    {"train": train, "references": references}[sys.argv[1]](sys.argv[2])
