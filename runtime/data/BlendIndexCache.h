//===- BlendIndexCache.h - Megatron's .npy cache of a blend's indices -*- C++ -*-===//
//
// Megatron's `--data-cache-path DIR` for a blend (BlendedDataset.h): the blending indices of
// a split, which sample of the blend comes from which dataset and which of its samples, kept
// in DIR next to the datasets' own entries (GptIndexCache.h). An entry is three files sharing
// the prefix `DIR/<hash>-BlendedDataset-<split>-`, Megatron-Core's layout and dtypes:
//
//   description.txt           the description of what the indices depend on (below)
//   dataset_index.npy         int16, [size]: the dataset of each sample of the blend
//   dataset_sample_index.npy  int64, [size]: that dataset's sample
//
// The description is a JSON object with Megatron's keys (class, datasets, split, weights,
// size): `datasets` holds each blended dataset's own entry description (GptIndexCache.h: its
// prefix, split, documents, sample count, seed, sequence length and a checksum of its
// documents' lengths), `weights` the weights the blending index follows, exactly (JSON's
// round-trip doubles), so that other data, other weights or another size are another entry.
// <hash> is the first 32 hex digits of the description's SHA-256, as for the GPT entries.
//
// The rules are GptIndexCache.h's: an entry is present when its description.txt is; then the
// description must equal this run's and both arrays read whole and validate in one sequential
// pass (the dtypes and shapes above; every dataset index below the number of datasets; every
// sample index the number of samples taken from its dataset before it, which is what the
// blending index gives; no dataset drawn beyond the samples its order holds). Any failure is
// an error naming the file and telling to delete the entry's files; nothing is rebuilt over a
// file of unknown origin. Absent, the indices are built (buildBlendingIndex) and written, the
// arrays first and the description last, each atomically.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_BLENDINDEXCACHE_H
#define MTC_RUNTIME_DATA_BLENDINDEXCACHE_H

#include "runtime/data/BlendedDataset.h"
#include "runtime/data/GptDataset.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mtc::rt {

/// Everything a split's blending indices are built from.
struct BlendIndexRequest {
  DataSplit which = DataSplit::Train;
  /// Each blended dataset's GPT entry description (describeGptIndex), in the blend's order.
  std::vector<std::string> datasets;
  /// The weights the blending index follows (normalised), one per dataset.
  std::vector<double> weights;
  /// The samples of the blend.
  int64_t size = 0;
  /// The samples each dataset's order holds.
  std::vector<int64_t> datasetSamples;
};

/// The three files of an entry.
struct BlendIndexFiles {
  std::string hash;
  /// `DIR/<hash>-BlendedDataset-<split>-`, the files' common prefix.
  std::filesystem::path prefix;
  std::filesystem::path description, datasetIndex, datasetSampleIndex;
};

/// The description of `request` (JSON, ending with a newline). Fails when a dataset's
/// description is not JSON.
Expected<std::string> describeBlendIndex(const BlendIndexRequest &request);

/// The files of the entry for `description` and split `which` in `dir`.
BlendIndexFiles blendIndexFiles(const std::filesystem::path &dir, std::string_view description,
                                DataSplit which);

/// The blending indices of `request`, from the cache in `dir` when it holds them, else built
/// (buildBlendingIndex) and written there; `loaded` says which.
struct CachedBlendIndex {
  BlendingIndex index;
  BlendIndexFiles files;
  bool loaded = false;
};
Expected<CachedBlendIndex> cachedBlendingIndex(const std::filesystem::path &dir,
                                               const BlendIndexRequest &request);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_BLENDINDEXCACHE_H
