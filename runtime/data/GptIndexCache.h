//===- GptIndexCache.h - Megatron's .npy cache of the GPT indices -*- C++ -*-===//
//
// Megatron's `--data-cache-path DIR`: the document, sample and shuffle indices of a split
// (GptDataset.h) kept in DIR as .npy files, so that a run over a large corpus loads them
// instead of shuffling again. An entry is four files sharing the prefix
// `DIR/<hash>-GPTDataset-<split>-`, Megatron-Core's layout:
//
//   description.txt      the description of the inputs the indices depend on (below)
//   document_index.npy   int32, [E x documents]
//   sample_index.npy     int32 ([samples + 1, 2]), int64 when the document index has more
//                        than 2^31 - 1 entries
//   shuffle_index.npy    uint32 ([samples]), int64 from 2^32 - 2 samples on
//
// the dtypes Megatron-Core's GPTDataset writes. The description is a JSON object with
// Megatron's keys where Megatron has them (class, dataset_path, num_samples, index_split,
// random_seed, sequence_length, split, add_extra_token_to_sequence) and what else determines
// the indices here: the split's documents, the dataset's sequence count, the split's tokens
// and the CRC-32C of its documents' lengths, so that a dataset rewritten under the same
// prefix gets another entry rather than indices of the old one. <hash> is the first 32 hex
// digits of the description's SHA-256 (Megatron names entries by the MD5 of its description;
// the runtime already has SHA-256, and 128 bits of it name an entry as well). The hash
// cannot be Megatron's: its description is a JSON dump of Python objects (the tokenizer's
// among them), so an entry written by one is a miss for the other, never a wrong hit.
//
// An entry is present when its description.txt is. Then every file must be a regular file
// that reads whole and validates, in sequential passes (loading must cost less than building,
// whose cost is random access): the description equal to the expected one; each array's
// magic, header, dtype (one of those above) and shape; document index entries within the
// split whose sums and sums of squares are those of each document once per epoch (and once
// in a separate final epoch); sample index rows from (0, 0) with non-decreasing positions
// inside the document index, non-negative offsets, and consecutive samples of one document
// seqLen tokens apart; the shuffle index a permutation (within each part when the final epoch
// is shuffled apart). Indices that pass cannot make a read leave the dataset (reading a sample
// checks its range and length too). Any failure is an error naming the file and telling to
// delete the entry's files, which the next run rebuilds: nothing is rebuilt silently over a
// file of unknown origin.
//
// Without description.txt the indices are built and written: the three arrays, then the
// description, each to a temporary in DIR renamed into place (TemporaryFiles.h), so a
// reader sees a complete entry or none; DIR is created when missing. Writers of the same
// entry (ranks of a job on hosts without a shared DIR, two jobs at once) write the same bytes,
// so the last rename wins harmlessly. A directory that cannot be written is an error naming
// it (a complete entry in a read-only DIR is only read).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_GPTINDEXCACHE_H
#define MTC_RUNTIME_DATA_GPTINDEXCACHE_H

#include "runtime/data/GptDataset.h"
#include "runtime/data/NpyFile.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// Everything a split's indices are built from.
struct GptIndexRequest {
  /// The prefix as given, and the split string (only described: the documents decide).
  std::string datasetPath;
  std::string split;
  DataSplit which = DataSplit::Train;
  DocumentRange documents;
  /// The dataset's sequence lengths (all of them: documents index them).
  std::span<const int32_t> sequenceLengths;
  int64_t seqLen = 0;
  int64_t numSamples = 0;
  uint32_t seed = 0;
};

/// The four files of an entry.
struct GptIndexFiles {
  /// 32 hex digits.
  std::string hash;
  /// `DIR/<hash>-GPTDataset-<split>-`, the files' common prefix.
  std::filesystem::path prefix;
  std::filesystem::path description, documentIndex, sampleIndex, shuffleIndex;
};

/// The description of `request` (JSON, ending with a newline).
std::string describeGptIndex(const GptIndexRequest &request);

/// The files of the entry for `description` and split `which` in `dir`.
GptIndexFiles gptIndexFiles(const std::filesystem::path &dir, std::string_view description,
                            DataSplit which);

/// The indices of the entry `files` for `request`: nothing when its description.txt does not
/// exist, an error when the entry is there but does not validate (see above).
Expected<std::optional<GptSampleIndex>> readGptIndex(const GptIndexFiles &files,
                                                     std::string_view description,
                                                     const GptIndexRequest &request);

/// Writes `index` as the entry `files` (creating its directory).
Error writeGptIndex(const GptIndexFiles &files, std::string_view description,
                    const GptSampleIndex &index);

/// The indices of `request`, from the cache in `dir` when it holds them, else built
/// (buildGptSampleIndex) and written there; `loaded` says which.
struct CachedGptIndex {
  GptSampleIndex index;
  GptIndexFiles files;
  /// The entry's description (describeGptIndex), which a blend's entry includes.
  std::string description;
  bool loaded = false;
};
Expected<CachedGptIndex> cachedGptSampleIndex(const std::filesystem::path &dir,
                                              const GptIndexRequest &request);

/// What the caches of GptIndexCache.h and BlendIndexCache.h share: whether `path` exists (a
/// failure to look other than its absence is an error), and `dir` made a directory (created
/// when missing; a file in its place or a failure to create it is an error naming it).
Expected<bool> cacheFileExists(const std::filesystem::path &path);
Error prepareCacheDirectory(const std::filesystem::path &dir);
/// The error of the entry whose files start with `prefix` when one of them cannot be used:
/// `message` names the file; the error says to delete the entry's files.
Error invalidCacheEntry(const std::filesystem::path &prefix, const std::string &message);
/// An entry's arrays, each file read whole: nothing when its description file is absent;
/// else the description must read `description` and every file of `arrays` be there and a
/// .npy file, or the error is invalidCacheEntry's.
Expected<std::optional<std::vector<NpyArray>>>
readCacheEntry(const std::filesystem::path &prefix, const std::filesystem::path &descriptionFile,
               std::string_view description, std::span<const std::filesystem::path> arrays);
/// Writes an entry's description, atomically and after its arrays: it makes the entry present.
Error writeCacheDescription(const std::filesystem::path &file, std::string_view description);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_GPTINDEXCACHE_H
