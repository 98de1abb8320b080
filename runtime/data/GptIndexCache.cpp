//===- GptIndexCache.cpp - Megatron's .npy cache of the GPT indices -------===//

#include "runtime/data/GptIndexCache.h"

#include "runtime/data/NpyFile.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/Json.h"
#include "runtime/support/RegularFile.h"
#include "runtime/support/Sha256.h"
#include "runtime/support/TemporaryFiles.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <sys/stat.h>

namespace mtc::rt {

static_assert(std::endian::native == std::endian::little,
              ".npy files are written from the little-endian arrays in memory");

namespace {

/// Whether `path` exists (a dangling symbolic link does not, nor a path under a file, which
/// creating the directory then reports); another failure to look is an error.
Expected<bool> fileExists(const std::filesystem::path &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0)
    return true;
  if (errno == ENOENT || errno == ENOTDIR)
    return false;
  return makeError("cannot look at ", path, ": ", errnoCode());
}

/// The error of an entry's file that cannot be used: `message` names the file.
Error invalid(const GptIndexFiles &files, const std::string &message) {
  return invalidCacheEntry(files.prefix, message);
}

/// The same for `path`, which is wrong for `why`.
Error invalid(const GptIndexFiles &files, const std::filesystem::path &path,
              const std::string &why) {
  return invalid(files, concat(path, ": ", why));
}

/// The elements of `array` as T, each in [low, high].
template <class T>
Expected<std::vector<T>> integers(const NpyArray &array, int64_t low, int64_t high,
                                  std::string_view what) {
  std::vector<T> out;
  try {
    out.resize(size_t(array.size()));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory for its ", array.size(), " elements");
  }
  int64_t bad = -1, badValue = 0;
  array.forEachInteger([&](int64_t i, int64_t v) {
    if (v < low || v > high) {
      bad = i;
      badValue = v;
      return false;
    }
    out[size_t(i)] = T(v);
    return true;
  });
  if (bad >= 0)
    return makeError("element ", bad, " is ", badValue, ", outside ", what, " [", low, ", ", high,
                     "]");
  return out;
}

/// `array`'s dtype is one of `dtypes` and its shape `shape`.
Error checkLayout(const NpyArray &array, std::initializer_list<NpyDType> dtypes,
                  std::vector<int64_t> shape) {
  bool dtypeOk = false;
  std::string names;
  for (NpyDType d : dtypes) {
    dtypeOk |= array.dtype() == d;
    names.append(names.empty() ? "" : " or ").append(npyDTypeName(d));
  }
  if (!dtypeOk)
    return makeError("its dtype is ", npyDTypeName(array.dtype()), ", not ", names);
  if (array.shape() != shape) {
    auto text = [](const std::vector<int64_t> &dims) {
      std::string s = "(";
      for (size_t i = 0; i < dims.size(); ++i)
        s.append(concat(i ? ", " : "", dims[i]));
      return s.append(dims.size() == 1 ? ",)" : ")");
    };
    return makeError("its shape is ", text(array.shape()), ", not the ", text(shape),
                     " of this split's indices");
  }
  return Error::success();
}

/// The sum and the sum of squares of 0, 1, ..., n - 1, modulo 2^64.
std::pair<uint64_t, uint64_t> rangeSums(int64_t n) {
  using U = unsigned __int128;
  const U m = U(uint64_t(n));
  return {uint64_t(m * (m - 1) / 2), uint64_t((m - 1) * m * (2 * m - 1) / 6)};
}

Expected<std::vector<int32_t>> readDocumentIndex(const NpyArray &array, const GptIndexShape &shape,
                                                 DocumentRange documents) {
  if (Error err = checkLayout(array, {NpyDType::I32, NpyDType::I64}, {shape.documentIndexSize});
      !err.ok())
    return err;
  Expected<std::vector<int32_t>> docs =
      integers<int32_t>(array, documents.begin, documents.end - 1, "the split's documents");
  if (!docs)
    return docs.takeError();
  // Every document once per epoch (and once in a final epoch shuffled apart), checked in one
  // sequential pass: the sums of the documents and of their squares (relative to the split's
  // first, modulo 2^64) are those of E copies of the split. A count per document would be
  // exact but costs a random access per entry, as much as building the index.
  const int64_t n = documents.end - documents.begin;
  auto sums = [&](size_t from, size_t to) {
    uint64_t sum = 0, squares = 0;
    for (size_t i = from; i < to; ++i) {
      const uint64_t d = uint64_t((*docs)[i] - documents.begin);
      sum += d;
      squares += d * d;
    }
    return std::pair{sum, squares};
  };
  const auto [one, oneSquares] = rangeSums(n);
  const size_t tail = shape.separateFinalEpoch ? size_t(n) : 0;
  const auto [head, headSquares] = sums(0, docs->size() - tail);
  const uint64_t headEpochs = uint64_t(shape.numEpochs) - (shape.separateFinalEpoch ? 1 : 0);
  if (head != one * headEpochs || headSquares != oneSquares * headEpochs)
    return makeError("its entries are not the split's ", n, " documents once in each of ",
                     headEpochs, headEpochs == 1 ? " epoch" : " epochs", " (their sums differ)");
  if (shape.separateFinalEpoch) {
    const auto [last, lastSquares] = sums(docs->size() - tail, docs->size());
    if (last != one || lastSquares != oneSquares)
      return makeError("its last ", n,
                       " entries are not the split's documents once each, the "
                       "final epoch shuffled apart (their sums differ)");
  }
  return docs;
}

/// The sample index's rows: (position, offset) from (0, 0), positions non-decreasing within
/// the document index, offsets non-negative, and within one document each sample seqLen
/// tokens after the last. (A sample spanning documents is not checked against their lengths,
/// a random access per document; reading a sample checks its length and range.)
Error checkSampleIndex(const NpyArray &array, const GptIndexShape &shape, int64_t seqLen) {
  if (Error err = checkLayout(array, {NpyDType::I32, NpyDType::I64}, {shape.numSamples + 1, 2});
      !err.ok())
    return err;
  int64_t position = 0, offset = 0;
  std::string why;
  array.forEachInteger([&](int64_t i, int64_t v) {
    const int64_t row = i / 2;
    if (i % 2 == 0) {
      if (row == 0 ? v != 0 : v < position || v >= shape.documentIndexSize)
        why = concat("row ", row, " starts at position ", v, row == 0 ? ", not 0" : "",
                     row == 0 ? ""
                              : concat(", after row ", row - 1, "'s ", position,
                                       " or past the document index"));
      else if (v != position)
        offset = -1; // another document: any offset
      position = v;
    } else {
      if (v < 0 || (row == 0 && v != 0) || (offset >= 0 && row > 0 && v != offset + seqLen))
        why = concat("row ", row, " has offset ", v,
                     offset >= 0 && row > 0
                         ? concat(", not ", offset + seqLen, " (a sample of the same document)")
                         : std::string());
      offset = v;
    }
    return why.empty();
  });
  if (!why.empty())
    return makeError(why);
  return Error::success();
}

Expected<std::vector<int64_t>> readShuffleIndex(const NpyArray &array, const GptIndexShape &shape) {
  if (Error err =
          checkLayout(array, {NpyDType::U32, NpyDType::I64, NpyDType::I32}, {shape.numSamples});
      !err.ok())
    return err;
  Expected<std::vector<int64_t>> order =
      integers<int64_t>(array, 0, shape.numSamples - 1, "the samples");
  if (!order)
    return order.takeError();
  std::vector<bool> seen(size_t(shape.numSamples), false);
  const int64_t before = shape.separateFinalEpoch ? shape.samplesBeforeFinalEpoch : 0;
  for (size_t i = 0; i < order->size(); ++i) {
    const int64_t s = (*order)[i];
    if (seen[size_t(s)])
      return makeError("sample ", s, " appears twice (element ", i, ")");
    seen[size_t(s)] = true;
    if (shape.separateFinalEpoch && (int64_t(i) < before) != (s < before))
      return makeError("element ", i, " is sample ", s, ", but the samples before ", before,
                       " and the final epoch's are shuffled apart");
  }
  return order;
}

/// `values` as little-endian elements of `dtype` (int32, uint32 or int64, each fitting).
template <class T> std::string encode(const std::vector<T> &values, NpyDType dtype) {
  std::string out(values.size() * npyDTypeSize(dtype), '\0');
  char *p = out.data();
  for (T v : values) {
    if (dtype == NpyDType::I64) {
      int64_t x = int64_t(v);
      std::memcpy(p, &x, 8);
      p += 8;
    } else {
      uint32_t x = uint32_t(v);
      std::memcpy(p, &x, 4);
      p += 4;
    }
  }
  return out;
}

} // namespace

Expected<bool> cacheFileExists(const std::filesystem::path &path) { return fileExists(path); }

Error invalidCacheEntry(const std::filesystem::path &prefix, const std::string &message) {
  return makeError("--data-cache-path: ", message,
                   ": the cache entry is stale or corrupt; delete its files '", prefix.string(),
                   "*' and rerun to rebuild it");
}

Expected<std::optional<std::vector<NpyArray>>>
readCacheEntry(const std::filesystem::path &prefix, const std::filesystem::path &descriptionFile,
               std::string_view description, std::span<const std::filesystem::path> arrays) {
  auto invalidFile = [&](const std::filesystem::path &path, const std::string &why) {
    return invalidCacheEntry(prefix, concat(path, ": ", why));
  };
  Expected<bool> present = fileExists(descriptionFile);
  if (!present)
    return present.takeError().withContext("--data-cache-path");
  if (!*present)
    return std::optional<std::vector<NpyArray>>();
  Expected<std::string> text = readInputFile(descriptionFile);
  if (!text)
    return invalidCacheEntry(prefix, text.error().message());
  if (*text != description)
    return invalidFile(descriptionFile, "it describes other indices than this run's (an edited "
                                        "file, or a hash collision)");
  std::vector<NpyArray> read;
  for (const std::filesystem::path &path : arrays) {
    Expected<bool> there = fileExists(path);
    if (!there)
      return there.takeError().withContext("--data-cache-path");
    if (!*there)
      return invalidFile(path, "missing, though the entry's description.txt is there");
    Expected<NpyArray> array = readNpyFile(path);
    if (!array)
      return invalidCacheEntry(prefix, array.error().message());
    read.push_back(std::move(*array));
  }
  return std::optional<std::vector<NpyArray>>(std::move(read));
}

Error writeCacheDescription(const std::filesystem::path &file, std::string_view description) {
  return writeAtomically(file, [&](int fd, const std::filesystem::path &tmp) {
    return writeAll(fd, description.data(), description.size(), tmp);
  });
}

Error prepareCacheDirectory(const std::filesystem::path &dir) {
  if (struct stat st; ::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    return makeError("--data-cache-path: ", dir, " is ", describeFileType(st.st_mode),
                     ", not a directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return makeError("--data-cache-path: cannot create the directory ", dir, ": ", ec.message());
  return Error::success();
}

std::string describeGptIndex(const GptIndexRequest &request) {
  const std::span<const int32_t> lengths = request.sequenceLengths.subspan(
      size_t(request.documents.begin), size_t(request.documents.end - request.documents.begin));
  int64_t tokens = 0;
  for (int32_t n : lengths)
    tokens += n;
  // CRC-32C (a few GB/s) rather than SHA-256 (a few hundred MB/s): it tells a rewritten
  // dataset from the one the entry was built for, together with the counts; it is no defence
  // against a forged one.
  const uint32_t lengthsCrc = crc32c(lengths.data(), lengths.size() * sizeof(int32_t));
  JsonObject description{
      {"class", "GPTDataset"},
      {"dataset_path", request.datasetPath},
      {"num_samples", request.numSamples},
      {"index_split", splitName(request.which)},
      {"random_seed", int64_t(request.seed)},
      {"sequence_length", request.seqLen},
      {"split", request.split},
      {"add_extra_token_to_sequence", true},
      {"documents", JsonArray{request.documents.begin, request.documents.end}},
      {"dataset_sequences", int64_t(request.sequenceLengths.size())},
      {"num_tokens_per_epoch", tokens},
      {"sequence_lengths_crc32c", int64_t(lengthsCrc)},
      {"format", "mtc GPTDataset indices 1"},
  };
  return JsonValue(std::move(description)).serialize(4) + "\n";
}

GptIndexFiles gptIndexFiles(const std::filesystem::path &dir, std::string_view description,
                            DataSplit which) {
  GptIndexFiles files;
  files.hash = sha256Hex(description).substr(0, 32);
  const std::string base = concat(files.hash, "-GPTDataset-", splitName(which), "-");
  files.prefix = dir / base;
  files.description = dir / (base + "description.txt");
  files.documentIndex = dir / (base + "document_index.npy");
  files.sampleIndex = dir / (base + "sample_index.npy");
  files.shuffleIndex = dir / (base + "shuffle_index.npy");
  return files;
}

Expected<std::optional<GptSampleIndex>> readGptIndex(const GptIndexFiles &files,
                                                     std::string_view description,
                                                     const GptIndexRequest &request) {
  // Every file read whole, then validated.
  const std::filesystem::path arrays[] = {files.documentIndex, files.sampleIndex,
                                          files.shuffleIndex};
  Expected<std::optional<std::vector<NpyArray>>> entry =
      readCacheEntry(files.prefix, files.description, description, arrays);
  if (!entry)
    return entry.takeError();
  if (!*entry)
    return std::optional<GptSampleIndex>();
  const NpyArray *documents = &(**entry)[0], *samples = &(**entry)[1], *shuffle = &(**entry)[2];

  const DocumentRange docs = request.documents;
  int64_t tokens = 0;
  for (int64_t d = docs.begin; d < docs.end; ++d)
    tokens += request.sequenceLengths[size_t(d)];
  Expected<GptIndexShape> shape =
      gptIndexShape(tokens, docs.end - docs.begin, request.seqLen, request.numSamples);
  if (!shape)
    return shape.takeError();
  GptSampleIndex index;
  index.numEpochs = shape->numEpochs;
  index.separateFinalEpoch = shape->separateFinalEpoch;
  Expected<std::vector<int32_t>> documentIndex = readDocumentIndex(*documents, *shape, docs);
  if (!documentIndex)
    return invalid(files, files.documentIndex, documentIndex.error().message());
  index.documentIndex = std::move(*documentIndex);
  if (Error err = checkSampleIndex(*samples, *shape, request.seqLen); !err.ok())
    return invalid(files, files.sampleIndex, err.message());
  Expected<std::vector<int64_t>> rows =
      integers<int64_t>(*samples, 0, std::numeric_limits<int64_t>::max(), "the positions");
  if (!rows)
    return invalid(files, files.sampleIndex, rows.error().message());
  index.sampleIndex = std::move(*rows);
  Expected<std::vector<int64_t>> order = readShuffleIndex(*shuffle, *shape);
  if (!order)
    return invalid(files, files.shuffleIndex, order.error().message());
  index.shuffleIndex = std::move(*order);
  return std::optional<GptSampleIndex>(std::move(index));
}

Error writeGptIndex(const GptIndexFiles &files, std::string_view description,
                    const GptSampleIndex &index) {
  const std::filesystem::path dir = files.description.parent_path();
  if (Error err = prepareCacheDirectory(dir); !err.ok())
    return err;
  // Megatron's dtypes: the sample index in int32 while the document index's positions fit
  // (offsets are below a sequence's int32 length), the shuffle index in uint32 below 2^32 - 2
  // samples.
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  const int64_t samples = index.numSamples();
  const NpyDType sampleType =
      int64_t(index.documentIndex.size()) <= kInt32Max ? NpyDType::I32 : NpyDType::I64;
  const NpyDType shuffleType =
      samples < int64_t(std::numeric_limits<uint32_t>::max()) - 1 ? NpyDType::U32 : NpyDType::I64;
  auto context = [&](Error err) {
    return std::move(err).withContext(concat("--data-cache-path: writing the indices to ", dir));
  };
  const int64_t documentShape[] = {int64_t(index.documentIndex.size())};
  const int64_t sampleShape[] = {samples + 1, 2};
  const int64_t shuffleShape[] = {samples};
  try {
    if (Error err = writeNpyFile(files.documentIndex, NpyDType::I32, documentShape,
                                 encode(index.documentIndex, NpyDType::I32));
        !err.ok())
      return context(std::move(err));
    if (Error err = writeNpyFile(files.sampleIndex, sampleType, sampleShape,
                                 encode(index.sampleIndex, sampleType));
        !err.ok())
      return context(std::move(err));
    if (Error err = writeNpyFile(files.shuffleIndex, shuffleType, shuffleShape,
                                 encode(index.shuffleIndex, shuffleType));
        !err.ok())
      return context(std::move(err));
  } catch (const std::bad_alloc &) {
    return context(makeError("out of memory"));
  }
  // Last: the description makes the entry present.
  return context(writeCacheDescription(files.description, description));
}

Expected<CachedGptIndex> cachedGptSampleIndex(const std::filesystem::path &dir,
                                              const GptIndexRequest &request) {
  const std::string description = describeGptIndex(request);
  CachedGptIndex cached;
  cached.files = gptIndexFiles(dir, description, request.which);
  cached.description = description;
  Expected<std::optional<GptSampleIndex>> read = readGptIndex(cached.files, description, request);
  if (!read)
    return read.takeError();
  if (*read) {
    cached.index = std::move(**read);
    cached.loaded = true;
    return cached;
  }
  Expected<GptSampleIndex> built = buildGptSampleIndex(
      request.sequenceLengths, request.documents, request.seqLen, request.numSamples, request.seed);
  if (!built)
    return built.takeError();
  if (Error err = writeGptIndex(cached.files, description, *built); !err.ok())
    return err;
  cached.index = std::move(*built);
  return cached;
}

} // namespace mtc::rt
