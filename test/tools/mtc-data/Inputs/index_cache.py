#!/usr/bin/env python3
"""Checks and damages the .npy index cache mtc writes for --data-cache-path, with numpy.

    index_cache.py check DIR PREFIX --seq-len L --num-samples N [--seed S] [--split W]
            [--which train|valid|test]
        finds DIR's entry for those inputs (its description.txt, a JSON object), loads its
        three arrays with numpy.load and compares them with the document, sample and shuffle
        indices megatron_reference.py builds as Megatron does; checks Megatron's file names
        (<32 hex digits>-GPTDataset-<split>-...) and dtypes (int32 document index, int32 or
        int64 sample index of shape (samples + 1, 2), uint32 or int64 shuffle index). Prints
        one line per array, e.g. "document_index int32 (120,) equal".
    index_cache.py check-blend DIR WEIGHT PREFIX ... --seq-len L --num-samples N [--seed S]
            [--split W] [--which train|valid|test]
        finds DIR's only BlendedDataset entry of the split, loads its two arrays with
        numpy.load and compares them with the blending indices megatron_reference.py builds
        for that blend as Megatron does; checks Megatron's file names
        (<32 hex digits>-BlendedDataset-<split>-...) and dtypes (int16 dataset index, int64
        dataset sample index). Prints one line per array.
    index_cache.py damage DIR WHICH FILE KIND
        damages FILE (document_index, sample_index, shuffle_index or description) of DIR's
        only entry of split WHICH: truncate, garbage, float64, float32 or int16 (the same
        values), reshape (the same values, another shape), directory, fifo, edit (the
        description with a space added), remove. FILE dataset_index, dataset_sample_index or
        blend_description damages the only BlendedDataset entry of the split instead.
"""
import glob
import json
import os
import re
import sys

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_reference  # noqa: E402


def entries(directory, which):
    return sorted(glob.glob(os.path.join(directory, f"*-GPTDataset-{which}-description.txt")))


def check(directory, prefix, seq_length, num_samples, seed, split, which):
    name = ["train", "valid", "test"][which]
    found = None
    for path in entries(directory, name):
        with open(path) as f:
            description = json.load(f)
        if (description["dataset_path"] == prefix and description["num_samples"] == num_samples
                and description["random_seed"] == seed
                and description["sequence_length"] == seq_length
                and description["split"] == split and description["index_split"] == name):
            assert found is None, "two entries for the same inputs"
            found = path
    assert found, f"no entry for {prefix} in {directory}"
    base = os.path.basename(found)[:-len("description.txt")]
    assert re.fullmatch(r"[0-9a-f]{32}-GPTDataset-" + name + "-", base), base
    order = megatron_reference.GPTOrder(prefix, seq_length, num_samples, seed, split, which)
    expected = {"document_index": (order.doc_index, ["int32"]),
                "sample_index": (order.samples_index, ["int32", "int64"]),
                "shuffle_index": (order.order, ["uint32", "int64"])}
    for what, (reference, dtypes) in expected.items():
        array = numpy.load(os.path.join(directory, base + what + ".npy"), allow_pickle=False)
        assert str(array.dtype) in dtypes, f"{what}: dtype {array.dtype}"
        assert array.shape == reference.shape, f"{what}: shape {array.shape} != {reference.shape}"
        assert numpy.array_equal(array.astype(numpy.int64), reference.astype(numpy.int64)), what
        print(f"{what} {array.dtype} {array.shape} equal")


def check_blend(directory, words, seq_length, num_samples, seed, split, which):
    name = ["train", "valid", "test"][which]
    found = glob.glob(os.path.join(directory, f"*-BlendedDataset-{name}-description.txt"))
    assert len(found) == 1, found
    base = os.path.basename(found[0])[:-len("description.txt")]
    assert re.fullmatch(r"[0-9a-f]{32}-BlendedDataset-" + name + "-", base), base
    # megatron_reference.blended_samples's weights and size.
    prefixes, weights = megatron_reference.get_blend_from_list(words)
    if weights is not None:
        weights = megatron_reference.normalize(weights)
        size = sum(megatron_reference.get_size_per_dataset(weights, num_samples))
    else:
        weights = [len(megatron_reference.GPTOrder(p, seq_length, None, seed, split, which))
                   for p in prefixes]
        size = min(num_samples, sum(weights))
    weights = megatron_reference.normalize(weights)
    expected = megatron_reference.build_blending_indices(weights, size)
    for what, reference in zip(("dataset_index", "dataset_sample_index"), expected):
        array = numpy.load(os.path.join(directory, base + what + ".npy"), allow_pickle=False)
        assert array.dtype == reference.dtype, f"{what}: dtype {array.dtype}"
        assert array.shape == reference.shape, f"{what}: shape {array.shape} != {reference.shape}"
        assert numpy.array_equal(array, reference), what
        print(f"{what} {array.dtype} {array.shape} equal")


def damage(directory, which, what, kind):
    marker = f"-GPTDataset-{which}-"
    if what in ("dataset_index", "dataset_sample_index", "blend_description"):
        marker = f"-BlendedDataset-{which}-"
        what = "description" if what == "blend_description" else what
    bases = {p[:p.index(marker) + len(marker)]
             for p in glob.glob(os.path.join(directory, "*" + marker + "*"))}
    assert len(bases) == 1, bases
    base = bases.pop()
    path = base + ("description.txt" if what == "description" else what + ".npy")
    if kind == "truncate":
        os.truncate(path, os.path.getsize(path) - 5)
    elif kind == "garbage":
        with open(path, "wb") as f:
            f.write(b"not an array")
    elif kind in ("float64", "float32", "int16"):
        numpy.save(path, numpy.load(path).astype(kind))
    elif kind == "reshape":
        numpy.save(path, numpy.load(path).reshape(-1, 1))
    elif kind == "directory":
        os.remove(path)
        os.mkdir(path)
    elif kind == "fifo":
        os.remove(path)
        os.mkfifo(path)
    elif kind == "edit":
        with open(path, "a") as f:
            f.write(" ")
    elif kind == "remove":
        os.remove(path)
    else:
        sys.exit(f"unknown damage {kind}")


def main(argv):
    command, args = argv[1], argv[2:]
    option = megatron_reference.option
    if command == "check":
        seq_length = int(option(args, "--seq-len", None))
        num_samples = int(option(args, "--num-samples", None))
        seed = int(option(args, "--seed", "1234"))
        split = option(args, "--split", "969, 30, 1")
        which = ["train", "valid", "test"].index(option(args, "--which", "train"))
        check(args[0], args[1], seq_length, num_samples, seed, split, which)
    elif command == "check-blend":
        seq_length = int(option(args, "--seq-len", None))
        num_samples = int(option(args, "--num-samples", None))
        seed = int(option(args, "--seed", "1234"))
        split = option(args, "--split", "969, 30, 1")
        which = ["train", "valid", "test"].index(option(args, "--which", "train"))
        check_blend(args[0], args[1:], seq_length, num_samples, seed, split, which)
    elif command == "damage":
        damage(*args)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
