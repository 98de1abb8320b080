//===- GptIndexCache.cpp - Megatron's .npy cache of the GPT indices -------===//

#include "runtime/data/GptIndexCache.h"

#include "runtime/data/NpyFile.h"
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
  return makeError("--data-cache-path: ", message,
                   ": the cache entry is stale or corrupt; delete its files '",
                   files.prefix.string(), "*' and rerun to rebuild it");
}

/// The same for `path`, which is wrong for `why`.
Error invalid(const GptIndexFiles &files, const std::filesystem::path &path,
              const std::string &why) {
  return invalid(files, concat(path, ": ", why));
}

/// The elements of `array` into `out` (of type T), each in [low, high].
template <class T>
Expected<std::vector<T>> integers(const NpyArray &array, int64_t low, int64_t high,
                                  std::string_view what) {
  std::vector<T> out;
  try {
    out.resize(size_t(array.size()));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory for its ", array.size(), " elements");
  }
  for (int64_t i = 0; i < array.size(); ++i) {
    int64_t v = array.integerAt(i);
    if (v < low || v > high)
      return makeError("element ", i, " is ", v, ", outside ", what, " [", low, ", ", high, "]");
    out[size_t(i)] = T(v);
  }
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

Expected<std::vector<int32_t>> readDocumentIndex(const NpyArray &array,
                                                 const GptIndexShape &shape,
                                                 DocumentRange documents) {
  if (Error err = checkLayout(array, {NpyDType::I32, NpyDType::I64}, {shape.documentIndexSize});
      !err.ok())
    return err;
  Expected<std::vector<int32_t>> docs =
      integers<int32_t>(array, documents.begin, documents.end - 1, "the split's documents");
  if (!docs)
    return docs.takeError();
  // Every document E times; with the final epoch shuffled apart, once in it.
  const int64_t n = documents.end - documents.begin;
  std::vector<int64_t> counts(size_t(n), 0);
  for (int32_t d : *docs)
    ++counts[size_t(d - documents.begin)];
  for (int64_t d = 0; d < n; ++d)
    if (counts[size_t(d)] != shape.numEpochs)
      return makeError("document ", documents.begin + d, " appears ", counts[size_t(d)],
                       " times, not once in each of the ", shape.numEpochs, " epochs");
  if (shape.separateFinalEpoch) {
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t i = docs->size() - size_t(n); i < docs->size(); ++i)
      if (++counts[size_t((*docs)[i] - documents.begin)] > 1)
        return makeError("document ", (*docs)[i],
                         " appears twice in the final epoch, which is shuffled apart");
  }
  return docs;
}

Error checkSampleIndex(const NpyArray &array, const GptIndexShape &shape,
                       const std::vector<int64_t> &expected) {
  if (Error err = checkLayout(array, {NpyDType::I32, NpyDType::I64}, {shape.numSamples + 1, 2});
      !err.ok())
    return err;
  for (int64_t i = 0; i < array.size(); ++i)
    if (array.integerAt(i) != expected[size_t(i)])
      return makeError("row ", i / 2, " is not the one its document index gives (",
                       i % 2 ? "offset " : "position ", array.integerAt(i), " instead of ",
                       expected[size_t(i)], ")");
  return Error::success();
}

Expected<std::vector<int64_t>> readShuffleIndex(const NpyArray &array,
                                                const GptIndexShape &shape) {
  if (Error err = checkLayout(array, {NpyDType::U32, NpyDType::I64, NpyDType::I32},
                              {shape.numSamples});
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

std::string describeGptIndex(const GptIndexRequest &request) {
  const std::span<const int32_t> lengths = request.sequenceLengths.subspan(
      size_t(request.documents.begin), size_t(request.documents.end - request.documents.begin));
  int64_t tokens = 0;
  for (int32_t n : lengths)
    tokens += n;
  const std::string lengthsDigest = sha256Hex(std::string_view(
      reinterpret_cast<const char *>(lengths.data()), lengths.size() * sizeof(int32_t)));
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
      {"sequence_lengths_sha256", lengthsDigest},
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
  Expected<bool> present = fileExists(files.description);
  if (!present)
    return present.takeError().withContext("--data-cache-path");
  if (!*present)
    return std::optional<GptSampleIndex>();
  // Every file read whole, then validated.
  Expected<std::string> text = readInputFile(files.description);
  if (!text)
    return invalid(files, text.error().message());
  if (*text != description)
    return invalid(files, files.description,
                   "it describes other indices than this run's (an edited file, or a hash "
                   "collision)");
  auto read = [&](const std::filesystem::path &path) -> Expected<NpyArray> {
    Expected<bool> there = fileExists(path);
    if (!there)
      return there.takeError().withContext("--data-cache-path");
    if (!*there)
      return invalid(files, path, "missing, though the entry's description.txt is there");
    Expected<NpyArray> array = readNpyFile(path);
    if (!array)
      return invalid(files, array.error().message());
    return array;
  };
  Expected<NpyArray> documents = read(files.documentIndex);
  if (!documents)
    return documents.takeError();
  Expected<NpyArray> samples = read(files.sampleIndex);
  if (!samples)
    return samples.takeError();
  Expected<NpyArray> shuffle = read(files.shuffleIndex);
  if (!shuffle)
    return shuffle.takeError();

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
  index.sampleIndex = buildSampleIndex(request.sequenceLengths, index.documentIndex,
                                       request.seqLen, shape->numSamples);
  if (Error err = checkSampleIndex(*samples, *shape, index.sampleIndex); !err.ok())
    return invalid(files, files.sampleIndex, err.message());
  Expected<std::vector<int64_t>> order = readShuffleIndex(*shuffle, *shape);
  if (!order)
    return invalid(files, files.shuffleIndex, order.error().message());
  index.shuffleIndex = std::move(*order);
  return std::optional<GptSampleIndex>(std::move(index));
}

Error writeGptIndex(const GptIndexFiles &files, std::string_view description,
                    const GptSampleIndex &index) {
  const std::filesystem::path dir = files.description.parent_path();
  if (struct stat st; ::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    return makeError("--data-cache-path: ", dir, " is ", describeFileType(st.st_mode),
                     ", not a directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return makeError("--data-cache-path: cannot create the directory ", dir, ": ", ec.message());
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
  return context(writeAtomically(files.description, [&](int fd, const std::filesystem::path &tmp) {
    return writeAll(fd, description.data(), description.size(), tmp);
  }));
}

Expected<CachedGptIndex> cachedGptSampleIndex(const std::filesystem::path &dir,
                                              const GptIndexRequest &request) {
  const std::string description = describeGptIndex(request);
  CachedGptIndex cached;
  cached.files = gptIndexFiles(dir, description, request.which);
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
