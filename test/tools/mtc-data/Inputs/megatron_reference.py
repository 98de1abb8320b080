#!/usr/bin/env python3
"""A reference of Megatron-LM's data pipeline, independent of mtc's C++, written with numpy.

    megatron_reference.py samples PREFIX --seq-len L --num-samples N [--seed S] [--split W]
            [--which train|valid|test]
        prints what `mtc-data samples` prints: the split, epochs and the samples' token ids
        in the order Megatron's GPTDataset gives them (document index, sample index and
        shuffle index built as megatron/core/datasets/gpt_dataset.py and helpers.cpp do, every
        shuffle with numpy.random.RandomState(seed).shuffle);
    megatron_reference.py samples W1 PREFIX1 W2 PREFIX2 ... [options as above]
        the same for Megatron's blend of them (get_blend_from_list, normalize,
        BlendedMegatronDatasetBuilder's _get_size_per_split_per_dataset with the default
        mid_level_dataset_surplus, BlendedDataset and helpers.cpp's build_blending_indices),
        each sample with its dataset and that dataset's sample;
    megatron_reference.py preprocess INPUT.jsonl PREFIX [--append-eod] [--dtype u16|i32]
        writes PREFIX.idx/.bin as Megatron's tools/preprocess_data.py with a byte-level
        tokenizer (token = UTF-8 byte, end of document 0) and IndexedDatasetBuilder would;
    megatron_reference.py write PREFIX DTYPE DOC [DOC ...]
        writes an indexed dataset whose documents are given as comma-separated token ids,
        sentences separated by '/' (for the reader's tests).

Only numpy is needed (Debian's python3-numpy); Megatron itself is not.
"""
import json
import math
import re
import struct
import sys

import numpy

DTYPES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32, 5: numpy.int64,
          6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}
CODES = {"u16": 8, "i32": 4, "u8": 1, "i64": 5}


def write_dataset(prefix, code, documents):
    """documents: a list of documents, each a list of sequences (lists of token ids)."""
    dtype = DTYPES[code]
    lengths, pointers, doc_index = [], [], [0]
    with open(prefix + ".bin", "wb") as out:
        offset = 0
        for doc in documents:
            for seq in doc:
                data = numpy.array(seq, dtype=dtype)
                out.write(data.tobytes(order="C"))
                lengths.append(data.size)
                pointers.append(offset)
                offset += data.size * numpy.dtype(dtype).itemsize
            doc_index.append(len(lengths))
    with open(prefix + ".idx", "wb") as out:
        out.write(b"MMIDIDX\x00\x00")
        out.write(struct.pack("<Q", 1))
        out.write(struct.pack("<B", code))
        out.write(struct.pack("<Q", len(lengths)))
        out.write(struct.pack("<Q", len(doc_index)))
        out.write(numpy.array(lengths, dtype=numpy.int32).tobytes(order="C"))
        out.write(numpy.array(pointers, dtype=numpy.int64).tobytes(order="C"))
        out.write(numpy.array(doc_index, dtype=numpy.int64).tobytes(order="C"))


def read_dataset(prefix):
    raw = open(prefix + ".idx", "rb").read()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack("<Q", raw[9:17])[0] == 1
    dtype = DTYPES[raw[17]]
    count, ndocs = struct.unpack("<QQ", raw[18:34])
    lengths = numpy.frombuffer(raw, dtype=numpy.int32, count=count, offset=34)
    pointers = numpy.frombuffer(raw, dtype=numpy.int64, count=count, offset=34 + 4 * count)
    tokens = numpy.fromfile(prefix + ".bin", dtype=dtype)
    itemsize = numpy.dtype(dtype).itemsize

    def get(seq, offset=0, length=None):
        if length is None:
            length = lengths[seq] - offset
        start = pointers[seq] // itemsize + offset
        return tokens[start:start + length]

    return lengths, get


def split_range(split, count, which=0):
    weights = [float(w) for w in re.findall(r"[.0-9]+", split)]
    weights += [0.0] * (3 - len(weights))
    w = numpy.array(weights, dtype=numpy.float64)
    w = (w / numpy.sum(w)).tolist()
    bounds = [0]
    for x in w:
        bounds.append(bounds[-1] + x)
    begin, end = bounds[which], bounds[which + 1]
    if end <= begin:
        return None
    return int(round(begin * float(count))), int(round(end * float(count)))


def document_index(documents, epochs, rng, separate_final_epoch):
    if not separate_final_epoch or epochs == 1:
        index = numpy.tile(documents, epochs).astype(numpy.int32)
        rng.shuffle(index)
        return index
    first = document_index(documents, epochs - 1, rng, False)
    last = document_index(documents, 1, rng, False)
    return numpy.concatenate((first, last))


def sample_index(sizes, doc_index, seq_length, epochs, tokens_per_epoch):
    # helpers.cpp build_sample_idx with drop_last_partial_sequence and the extra token.
    num_samples = (epochs * tokens_per_epoch - 1) // seq_length
    out = [(0, 0)]
    position, offset = 0, 0
    while len(out) <= num_samples:
        remaining = seq_length + 1
        while remaining != 0:
            length = int(sizes[doc_index[position]]) - offset
            remaining -= length
            if remaining <= 0:
                offset += remaining + length - 1
                remaining = 0
            else:
                if position == len(doc_index) - 1:
                    offset = int(sizes[doc_index[position]]) - 1
                    break
                position += 1
                offset = 0
        out.append((position, offset))
    return numpy.array(out, dtype=numpy.int64)


def shuffle_index(num_samples, total, rng):
    first = numpy.arange(0, num_samples, dtype=numpy.int64)
    rng.shuffle(first)
    if num_samples == total:
        return first
    last = numpy.arange(num_samples, total, dtype=numpy.int64)
    rng.shuffle(last)
    return numpy.concatenate((first, last))


class GPTOrder:
    """One split of one dataset in GPTDataset's order, for num_samples samples (None: one
    epoch, as GPTDataset's num_samples=None)."""

    def __init__(self, prefix, seq_length, num_samples, seed, split, which):
        sizes, self.get = read_dataset(prefix)
        begin, end = split_range(split, len(sizes), which)
        documents = numpy.arange(begin, end, dtype=numpy.int32)
        tokens_per_epoch = int(numpy.sum(sizes[documents]))
        epochs, tokens = 1, tokens_per_epoch
        while num_samples is not None and tokens < num_samples * seq_length + 1:
            epochs += 1
            tokens += tokens_per_epoch
        separate = False
        before_final = 0
        if epochs > 1:
            before_final = ((epochs - 1) * tokens_per_epoch - 1) // seq_length
            from_final = num_samples - before_final
            per_epoch = (tokens_per_epoch - 1) // seq_length
            separate = from_final < int(0.80 * per_epoch)
        rng = numpy.random.RandomState(seed)
        self.doc_index = document_index(documents, epochs, rng, separate)
        self.samples_index = sample_index(sizes, self.doc_index, seq_length, epochs,
                                          tokens_per_epoch)
        total = self.samples_index.shape[0] - 1
        self.order = shuffle_index(before_final if separate else total, total, rng)
        self.header = (f"documents [{begin}, {end}), {tokens_per_epoch} tokens per epoch, "
                       f"{epochs} epochs, separate final epoch {'yes' if separate else 'no'}, "
                       f"{total} samples")

    def __len__(self):
        return self.samples_index.shape[0] - 1

    def __getitem__(self, k):
        s = self.order[k]
        (b, bo), (e, eo) = self.samples_index[s], self.samples_index[s + 1]
        get, doc_index = self.get, self.doc_index
        if b == e:
            parts = [get(doc_index[b], bo, eo - bo + 1)]
        else:
            parts = [get(doc_index[i], bo if i == b else 0, None if i < e else eo + 1)
                     for i in range(b, e + 1)]
        return numpy.concatenate(parts)


def print_sample(k, label, tokens):
    print(f"{k}:{label} " + " ".join(str(int(t)) for t in tokens))


def samples(prefix, seq_length, num_samples, seed, split, which):
    order = GPTOrder(prefix, seq_length, num_samples, seed, split, which)
    print(order.header)
    for k in range(num_samples):
        print_sample(k, "", order[k])


# megatron/core/datasets/utils.py
def get_blend_from_list(blend):
    if len(blend) % 2 == 1:
        weight_per_dataset = None
        raw_prefix_per_dataset = blend
    else:
        raw_weight_per_dataset, raw_prefix_per_dataset = zip(
            *[(blend[i], blend[i + 1]) for i in range(0, len(blend), 2)])
        weight_per_dataset = []
        for rwpd in raw_weight_per_dataset:
            try:
                weight = float(rwpd)
            except ValueError:
                weight = None
            weight_per_dataset.append(weight)
        if any(w is None for w in weight_per_dataset):
            weight_per_dataset = None
            raw_prefix_per_dataset = blend
    return [rppd.strip() for rppd in raw_prefix_per_dataset], weight_per_dataset


def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    w_sum = numpy.sum(w)
    return (w / w_sum).tolist()


# blended_megatron_dataset_builder.py, for one split.
def get_size_per_dataset(normalized_weights, target_size, surplus=0.0):
    return [int(math.ceil(math.ceil(target_size * weight) * (1 + surplus)))
            for weight in normalized_weights]


# helpers.cpp
def build_blending_indices(weights, size):
    dataset_index = numpy.zeros(size, dtype=numpy.int16)
    dataset_sample_index = numpy.zeros(size, dtype=numpy.int64)
    current_samples = [0] * len(weights)
    for sample_idx in range(size):
        sample_idx_double = max(float(sample_idx), 1.0)
        max_error_index = 0
        max_error = weights[0] * sample_idx_double - float(current_samples[0])
        for dataset_idx in range(1, len(weights)):
            error = weights[dataset_idx] * sample_idx_double - float(current_samples[dataset_idx])
            if error > max_error:
                max_error = error
                max_error_index = dataset_idx
        dataset_index[sample_idx] = max_error_index
        dataset_sample_index[sample_idx] = current_samples[max_error_index]
        current_samples[max_error_index] += 1
    return dataset_index, dataset_sample_index


MID_LEVEL_DATASET_SURPLUS = 0.005


def blended_samples(words, seq_length, num_samples, seed, split, which):
    prefixes, weights = get_blend_from_list(words)
    if weights is not None:
        # The builder: normalised weights, the samples each dataset contributes and the ones
        # its order is built for.
        weights = normalize(weights)
        target = get_size_per_dataset(weights, num_samples)
        built = get_size_per_dataset(weights, num_samples, MID_LEVEL_DATASET_SURPLUS)
        datasets = [GPTOrder(p, seq_length, n, seed, split, which)
                    for p, n in zip(prefixes, built)]
        size = sum(target)
    else:
        built = [None] * len(prefixes)
        datasets = [GPTOrder(p, seq_length, None, seed, split, which) for p in prefixes]
        weights = [len(d) for d in datasets]
        size = min(num_samples, sum(weights))
    # BlendedDataset normalises its weights (once more).
    weights = normalize(weights)
    dataset_index, dataset_sample_index = build_blending_indices(weights, size)
    for d, count in zip(*numpy.unique(dataset_index, return_counts=True)):
        assert len(datasets[d]) >= count, "the blend oversamples a dataset"
    print(f"blend of {len(datasets)} datasets, {size} samples, weights"
          + "".join(" %.17g" % w for w in weights))
    for d, dataset in enumerate(datasets):
        drawn = int(numpy.sum(dataset_index == d))
        print(f"dataset {d}: {drawn} samples drawn, order for {built[d] or 0}: {dataset.header}")
    for k in range(size):
        d, j = int(dataset_index[k]), int(dataset_sample_index[k])
        print_sample(k, f" {d}/{j}:", datasets[d][j])


def preprocess(path, prefix, append_eod, code):
    documents = []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        text = json.loads(line)["text"]
        sentences = text if isinstance(text, list) else [text]
        doc = [list(s.encode("utf-8")) for s in sentences]
        doc = [s for s in doc if s]
        if doc and append_eod:
            doc[-1].append(0)
        documents.append(doc)
    write_dataset(prefix, code, documents)


def option(args, name, default):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "samples":
        seq_length = int(option(args, "--seq-len", None))
        num_samples = int(option(args, "--num-samples", None))
        seed = int(option(args, "--seed", "1234"))
        split = option(args, "--split", "969, 30, 1")
        which = ["train", "valid", "test"].index(option(args, "--which", "train"))
        if len(args) == 1:
            samples(args[0], seq_length, num_samples, seed, split, which)
        else:
            blended_samples(args, seq_length, num_samples, seed, split, which)
    elif command == "preprocess":
        append_eod = "--append-eod" in args
        if append_eod:
            args.remove("--append-eod")
        code = CODES[option(args, "--dtype", "u16")]
        preprocess(args[0], args[1], append_eod, code)
    elif command == "write":
        prefix, code = args[0], CODES[args[1]]
        documents = [[[int(t) for t in s.split(",") if t] for s in doc.split("/")]
                     for doc in args[2:]]
        write_dataset(prefix, code, [[s for s in d if s] for d in documents])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
