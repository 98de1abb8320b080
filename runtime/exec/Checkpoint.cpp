//===- Checkpoint.cpp - Saving and resuming a training run ----------------===//

#include "runtime/exec/Checkpoint.h"

#include "runtime/plan/VocabularyPadding.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/RegularFile.h"
#include "runtime/support/TemporaryFiles.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <sys/stat.h>

namespace mtc::rt {
namespace {

constexpr std::string_view kFormat = "mtc-checkpoint";

std::string hex32(uint32_t value) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", value);
  return buf;
}

uint32_t tensorCrc(const std::vector<float> &values) {
  return crc32c(values.data(), values.size() * sizeof(float));
}

const std::string *findMetadata(const SafetensorsMetadata &metadata, std::string_view key) {
  for (const auto &[k, v] : metadata)
    if (k == key)
      return &v;
  return nullptr;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += concat(i ? ", " : "", shape[i]);
  return s + "]";
}

} // namespace

TrainingState withRealVocabulary(const Plan &plan, const TrainingState &state) {
  TrainingState real;
  real.step = state.step;
  real.lossScale = state.lossScale;
  auto strip = [&](const TrainingState::Tensor &t, const std::vector<Dim> &dims) {
    if (!plan.vocabularyPadded())
      return t;
    return TrainingState::Tensor{t.name, realShape(plan, dims),
                                 stripVocabularyPadding(plan, dims, t.values)};
  };
  for (size_t i = 0; i < state.params.size(); ++i)
    real.params.push_back(strip(state.params[i], plan.params[i].dims));
  for (size_t i = 0; i < state.states.size(); ++i)
    real.states.push_back(strip(state.states[i], plan.states[i].dims));
  return real;
}

namespace {

// fp16's loss scaler (LossScaler.h), present together or not at all.
constexpr std::string_view kLossScaleKey = "loss_scale";
constexpr std::string_view kGrowthTrackerKey = "loss_scale_growth_tracker";
constexpr std::string_view kHysteresisTrackerKey = "loss_scale_hysteresis_tracker";
constexpr std::string_view kSkippedStepsKey = "skipped_steps";

/// `text` as a whole number or float (from_chars), or an error naming `key`.
template <typename T>
Expected<T> parseField(const std::string &text, std::string_view key, const std::string &where) {
  T value{};
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || end != text.data() + text.size())
    return makeError(where, ": invalid ", key, " '", text, "' in the checkpoint's metadata");
  return value;
}

/// The loss scaler's state in `meta`, none when the run had no loss scaling; every value
/// checked (a positive finite scale, counts that fit `step` steps).
Expected<std::optional<LossScaleState>> readLossScale(const SafetensorsMetadata &meta,
                                                      int64_t step, const std::string &where) {
  const std::string_view keys[] = {kLossScaleKey, kGrowthTrackerKey, kHysteresisTrackerKey,
                                   kSkippedStepsKey};
  const std::string *values[4];
  int present = 0;
  for (int i = 0; i < 4; ++i)
    present += (values[i] = findMetadata(meta, keys[i])) != nullptr;
  if (present == 0)
    return std::optional<LossScaleState>();
  for (int i = 0; i < 4; ++i)
    if (!values[i])
      return makeError(where, ": the checkpoint's metadata has loss scaling fields but no '",
                       keys[i], "'");
  Expected<float> scale = parseField<float>(*values[0], keys[0], where);
  if (!scale)
    return scale.takeError();
  Expected<int64_t> growth = parseField<int64_t>(*values[1], keys[1], where);
  if (!growth)
    return growth.takeError();
  Expected<int64_t> hysteresis = parseField<int64_t>(*values[2], keys[2], where);
  if (!hysteresis)
    return hysteresis.takeError();
  Expected<int64_t> skipped = parseField<int64_t>(*values[3], keys[3], where);
  if (!skipped)
    return skipped.takeError();
  if (!std::isfinite(*scale) || *scale <= 0)
    return makeError(where, ": the checkpoint's loss scale ", *values[0],
                     " is not a positive finite value");
  if (*growth < 0 || *growth > step)
    return makeError(where, ": the checkpoint's ", keys[1], " ", *growth,
                     " is not a count of the ", step, " steps taken");
  if (*skipped < 0 || *skipped > step)
    return makeError(where, ": the checkpoint's ", keys[3], " ", *skipped,
                     " is not a count of the ", step, " steps taken");
  return std::optional<LossScaleState>(LossScaleState{*scale, *growth, *hysteresis, *skipped});
}

} // namespace

Error saveCheckpoint(const std::filesystem::path &dir, const Plan &plan,
                     const TrainingState &whole) {
  std::optional<TrainingState> stripped;
  if (plan.vocabularyPadded())
    stripped = withRealVocabulary(plan, whole);
  const TrainingState &state = stripped ? *stripped : whole;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return makeError(dir, ": cannot create the checkpoint directory: ", ec);
  std::vector<TensorRef> refs;
  SafetensorsMetadata metadata = {
      {"format", std::string(kFormat)},
      {"version", concat(kCheckpointVersion)},
      {"model", plan.model},
      {"step", concat(state.step)},
      {"seed", concat(plan.seed)},
      {"plan_sha256", plan.planSha256},
  };
  if (const std::optional<LossScaleState> &scaling = state.lossScale) {
    char scale[32];
    auto [end, err] = std::to_chars(scale, scale + sizeof scale, scaling->scale);
    metadata.insert(metadata.end(),
                    {{std::string(kLossScaleKey), std::string(scale, end)},
                     {std::string(kGrowthTrackerKey), concat(scaling->growthTracker)},
                     {std::string(kHysteresisTrackerKey), concat(scaling->hysteresisTracker)},
                     {std::string(kSkippedStepsKey), concat(scaling->skippedSteps)}});
  }
  for (auto [prefix, table] : {std::pair{"param:", &state.params}, {"state:", &state.states}})
    for (const TrainingState::Tensor &t : *table) {
      std::string name = concat(prefix, t.name);
      metadata.emplace_back(concat("crc32c:", name), hex32(tensorCrc(t.values)));
      refs.push_back(makeTensorRef(std::move(name), t.shape, t.values));
    }
  return writeSafetensors(dir / kCheckpointFileName, refs, metadata)
      .withContext(concat("saving the checkpoint ", dir));
}

Expected<TrainingState> loadCheckpoint(const std::filesystem::path &dir, const Plan &plan) {
  std::string where = dir.string();
  std::filesystem::path file = dir / kCheckpointFileName;
  struct stat status;
  if (::stat(dir.c_str(), &status) != 0)
    return makeError(where, ": no such checkpoint directory");
  if (!S_ISDIR(status.st_mode))
    return makeError(where, " is ", describeFileType(status.st_mode),
                     ", not a checkpoint directory");
  (void)removeStaleTemporaries(file);
  if (::stat(file.c_str(), &status) != 0)
    return makeError(where, ": not a checkpoint (no ", kCheckpointFileName, " in it)");
  // The reader refuses a non-regular file too; this says so without calling it corrupt.
  if (!S_ISREG(status.st_mode))
    return makeError(where, ": ", kCheckpointFileName, " is ", describeFileType(status.st_mode),
                     ", not a regular file");
  Expected<SafetensorsFile> read = SafetensorsFile::read(file);
  if (!read)
    return read.takeError().withContext(concat(where, ": corrupt checkpoint"));
  const SafetensorsFile &st = *read;
  const SafetensorsMetadata &meta = st.metadata();

  auto field = [&](std::string_view key) -> Expected<std::string> {
    if (const std::string *v = findMetadata(meta, key))
      return *v;
    return makeError(where, ": not an mtc checkpoint (no '", key, "' in its metadata)");
  };
  Expected<std::string> format = field("format");
  if (!format)
    return format.takeError();
  if (*format != kFormat)
    return makeError(where, ": not an mtc checkpoint (format '", *format, "')");
  Expected<std::string> version = field("version");
  if (!version)
    return version.takeError();
  if (*version != concat(kCheckpointVersion))
    return makeError(where, ": unsupported checkpoint version ", *version, " (this mtrun reads ",
                     kCheckpointVersion, ")");
  Expected<std::string> model = field("model");
  if (!model)
    return model.takeError();
  if (*model != plan.model)
    return makeError(where, ": a checkpoint of model '", *model, "', but the plan is of model '",
                     plan.model, "'");
  Expected<std::string> stepText = field("step");
  if (!stepText)
    return stepText.takeError();
  Expected<int64_t> step = parseField<int64_t>(*stepText, "step", where);
  if (!step)
    return step.takeError();
  if (*step < 0)
    return makeError(where, ": invalid step '", *stepText, "' in the checkpoint's metadata");
  TrainingState state;
  state.step = *step;
  Expected<std::optional<LossScaleState>> scaling = readLossScale(meta, state.step, where);
  if (!scaling)
    return scaling.takeError();
  state.lossScale = *scaling;

  size_t expected = plan.params.size() + plan.states.size();
  if (st.tensors().size() != expected)
    return makeError(where, ": the checkpoint holds ", st.tensors().size(),
                     " tensors but the plan has ", plan.params.size(), " parameters and ",
                     plan.states.size(), " optimizer states (a checkpoint of another model?)");
  auto take = [&](std::string_view prefix, const std::string &name,
                  const std::vector<Dim> &dims) -> Expected<TrainingState::Tensor> {
    std::string key = concat(prefix, name);
    const SafetensorsFile::Tensor *t = st.find(key);
    if (!t)
      return makeError(where, ": the checkpoint has no tensor '", key,
                       "' (a checkpoint of another model?)");
    std::vector<int64_t> shape = realShape(plan, dims);
    if (t->shape != shape || t->dtype != DType::F32)
      return makeError(where, ": tensor '", key, "' is ", dtypeName(t->dtype), " ",
                       formatShape(t->shape), " in the checkpoint but F32 ", formatShape(shape),
                       " in the plan (a checkpoint of another model?)");
    TrainingState::Tensor out{name, shape, {}};
    try {
      out.values.resize(size_t(t->numElements()));
    } catch (const std::bad_alloc &) {
      return makeError(where, ": out of memory reading '", key, "'");
    }
    std::span<const std::byte> bytes = st.data(*t);
    std::memcpy(out.values.data(), bytes.data(), bytes.size());
    const std::string *crc = findMetadata(meta, concat("crc32c:", key));
    if (!crc)
      return makeError(where, ": tensor '", key, "' has no checksum in the metadata");
    if (*crc != hex32(tensorCrc(out.values)))
      return makeError(where, ": tensor '", key, "' fails its CRC-32C check (the file is corrupt)");
    if (plan.vocabularyPadded()) {
      out.values = padVocabulary(plan, dims, out.values);
      out.shape = dimSizes(dims);
    }
    return out;
  };
  for (const ParamInfo &p : plan.params) {
    Expected<TrainingState::Tensor> t = take("param:", p.name, p.dims);
    if (!t)
      return t.takeError();
    state.params.push_back(std::move(*t));
  }
  for (const StateInfo &s : plan.states) {
    Expected<TrainingState::Tensor> t = take("state:", s.name, s.dims);
    if (!t)
      return t.takeError();
    state.states.push_back(std::move(*t));
  }
  return state;
}

} // namespace mtc::rt
