//===- BlendIndexCache.cpp - Megatron's .npy cache of a blend's indices ---===//

#include "runtime/data/BlendIndexCache.h"

#include "runtime/data/GptIndexCache.h"
#include "runtime/data/NpyFile.h"
#include "runtime/support/Json.h"
#include "runtime/support/RegularFile.h"
#include "runtime/support/Sha256.h"
#include "runtime/support/TemporaryFiles.h"

#include <bit>
#include <cstring>
#include <new>

namespace mtc::rt {

static_assert(std::endian::native == std::endian::little,
              ".npy files are written from the little-endian arrays in memory");

namespace {

Error invalid(const BlendIndexFiles &files, const std::filesystem::path &path,
              const std::string &why) {
  return invalidCacheEntry(files.prefix, concat(path, ": ", why));
}

/// `array` is 1-D of `size` elements of `dtype`.
Error checkLayout(const NpyArray &array, NpyDType dtype, int64_t size) {
  if (array.dtype() != dtype)
    return makeError("its dtype is ", npyDTypeName(array.dtype()), ", not ", npyDTypeName(dtype));
  if (array.shape() != std::vector<int64_t>{size}) {
    std::string shape = "(";
    for (size_t i = 0; i < array.shape().size(); ++i)
      shape.append(concat(i ? ", " : "", array.shape()[i]));
    shape.append(array.shape().size() == 1 ? ",)" : ")");
    return makeError("its shape is ", shape, ", not the (", size, ",) of this split's blend");
  }
  return Error::success();
}

/// The entry's indices, validated (see the header): nothing when it is absent.
Expected<std::optional<BlendingIndex>> readBlendIndex(const BlendIndexFiles &files,
                                                      std::string_view description,
                                                      const BlendIndexRequest &request) {
  const std::filesystem::path arrays[] = {files.datasetIndex, files.datasetSampleIndex};
  Expected<std::optional<std::vector<NpyArray>>> entry =
      readCacheEntry(files.prefix, files.description, description, arrays);
  if (!entry)
    return entry.takeError();
  if (!*entry)
    return std::optional<BlendingIndex>();
  const NpyArray *datasets = &(**entry)[0], *samples = &(**entry)[1];
  if (Error err = checkLayout(*datasets, NpyDType::I16, request.size); !err.ok())
    return invalid(files, files.datasetIndex, err.message());
  if (Error err = checkLayout(*samples, NpyDType::I64, request.size); !err.ok())
    return invalid(files, files.datasetSampleIndex, err.message());
  BlendingIndex index;
  try {
    index.dataset.resize(size_t(request.size));
    index.sample.resize(size_t(request.size));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory for the blending indices of ", request.size, " samples");
  }
  const int64_t n = int64_t(request.datasets.size());
  std::string why;
  datasets->forEachInteger([&](int64_t k, int64_t d) {
    if (d < 0 || d >= n) {
      why = concat("element ", k, " is dataset ", d, ", outside the blend's [0, ", n - 1, "]");
      return false;
    }
    index.dataset[size_t(k)] = int16_t(d);
    return true;
  });
  if (!why.empty())
    return invalid(files, files.datasetIndex, why);
  // Each sample is the next of its dataset: the sample index follows from the dataset index.
  std::vector<int64_t> counts(size_t(n), 0);
  samples->forEachInteger([&](int64_t k, int64_t s) {
    const size_t d = size_t(index.dataset[size_t(k)]);
    if (s != counts[d]) {
      why = concat("element ", k, " is sample ", s, " of dataset ", d, ", not its next, ",
                   counts[d]);
      return false;
    }
    if (s >= request.datasetSamples[d]) {
      why = concat("element ", k, " is sample ", s, " of dataset ", d, ", whose order holds ",
                   request.datasetSamples[d]);
      return false;
    }
    ++counts[d];
    index.sample[size_t(k)] = s;
    return true;
  });
  if (!why.empty())
    return invalid(files, files.datasetSampleIndex, why);
  return std::optional<BlendingIndex>(std::move(index));
}

Error writeBlendIndex(const BlendIndexFiles &files, std::string_view description,
                      const BlendingIndex &index) {
  const std::filesystem::path dir = files.description.parent_path();
  if (Error err = prepareCacheDirectory(dir); !err.ok())
    return err;
  auto context = [&](Error err) {
    return std::move(err).withContext(
        concat("--data-cache-path: writing the blending indices to ", dir));
  };
  const int64_t shape[] = {int64_t(index.dataset.size())};
  try {
    std::string datasets(index.dataset.size() * sizeof(int16_t), '\0');
    std::memcpy(datasets.data(), index.dataset.data(), datasets.size());
    if (Error err = writeNpyFile(files.datasetIndex, NpyDType::I16, shape, datasets); !err.ok())
      return context(std::move(err));
    std::string samples(index.sample.size() * sizeof(int64_t), '\0');
    std::memcpy(samples.data(), index.sample.data(), samples.size());
    if (Error err = writeNpyFile(files.datasetSampleIndex, NpyDType::I64, shape, samples);
        !err.ok())
      return context(std::move(err));
  } catch (const std::bad_alloc &) {
    return context(makeError("out of memory"));
  }
  // Last: the description makes the entry present.
  return context(writeCacheDescription(files.description, description));
}

} // namespace

Expected<std::string> describeBlendIndex(const BlendIndexRequest &request) {
  JsonArray datasets;
  for (const std::string &text : request.datasets) {
    Expected<JsonValue> each = parseJson(text);
    if (!each)
      return each.takeError().withContext("a blended dataset's description");
    datasets.push_back(std::move(*each));
  }
  JsonObject description{
      {"class", "BlendedDataset"},
      {"datasets", std::move(datasets)},
      {"split", splitName(request.which)},
      {"weights", JsonArray(request.weights.begin(), request.weights.end())},
      {"size", request.size},
      {"format", "mtc BlendedDataset indices 1"},
  };
  return JsonValue(std::move(description)).serialize(4) + "\n";
}

BlendIndexFiles blendIndexFiles(const std::filesystem::path &dir, std::string_view description,
                                DataSplit which) {
  BlendIndexFiles files;
  files.hash = sha256Hex(description).substr(0, 32);
  const std::string base = concat(files.hash, "-BlendedDataset-", splitName(which), "-");
  files.prefix = dir / base;
  files.description = dir / (base + "description.txt");
  files.datasetIndex = dir / (base + "dataset_index.npy");
  files.datasetSampleIndex = dir / (base + "dataset_sample_index.npy");
  return files;
}

Expected<CachedBlendIndex> cachedBlendingIndex(const std::filesystem::path &dir,
                                               const BlendIndexRequest &request) {
  if (request.weights.size() != request.datasets.size() ||
      request.datasetSamples.size() != request.datasets.size())
    return makeError("a blend of ", request.datasets.size(), " datasets with ",
                     request.weights.size(), " weights and ", request.datasetSamples.size(),
                     " sample counts");
  Expected<std::string> description = describeBlendIndex(request);
  if (!description)
    return description.takeError();
  CachedBlendIndex cached;
  cached.files = blendIndexFiles(dir, *description, request.which);
  Expected<std::optional<BlendingIndex>> read = readBlendIndex(cached.files, *description, request);
  if (!read)
    return read.takeError();
  if (*read) {
    cached.index = std::move(**read);
    cached.loaded = true;
    return cached;
  }
  Expected<BlendingIndex> built = buildBlendingIndex(request.weights, request.size);
  if (!built)
    return built.takeError();
  // A blend that draws more samples from a dataset than its order holds is refused by its
  // user (BlendedDataset::open): such indices are not kept.
  std::vector<int64_t> counts(request.datasets.size(), 0);
  for (int16_t d : built->dataset)
    ++counts[size_t(d)];
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > request.datasetSamples[i]) {
      cached.index = std::move(*built);
      return cached;
    }
  if (Error err = writeBlendIndex(cached.files, *description, *built); !err.ok())
    return err;
  cached.index = std::move(*built);
  return cached;
}

} // namespace mtc::rt
