//===- Plan.cpp - Loading and verifying a plan directory ------------------===//

#include "runtime/plan/Plan.h"

#include "runtime/support/JsonRead.h"
#include "runtime/support/RegularFile.h"
#include "runtime/support/Sha256.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <unistd.h>

namespace mtc::rt {

//===----------------------------------------------------------------------===//
// Names of dtypes and initialisers, dims
//===----------------------------------------------------------------------===//

namespace {

struct PlanDTypeInfo {
  PlanDType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<PlanDTypeInfo, 6> kPlanDTypes = {{
    {PlanDType::F32, "f32", 4},
    {PlanDType::BF16, "bf16", 2},
    {PlanDType::F16, "f16", 2},
    {PlanDType::F64, "f64", 8},
    {PlanDType::I32, "i32", 4},
    {PlanDType::I64, "i64", 8},
}};

constexpr std::array<std::pair<InitKind, std::string_view>, 5> kInitKinds = {{
    {InitKind::Zeros, "zeros"},
    {InitKind::Ones, "ones"},
    {InitKind::Normal, "normal"},
    {InitKind::Uniform, "uniform"},
    {InitKind::Constant, "constant"},
}};

} // namespace

std::string_view planDTypeName(PlanDType dtype) {
  for (const PlanDTypeInfo &info : kPlanDTypes)
    if (info.dtype == dtype)
      return info.name;
  return "?";
}

std::optional<PlanDType> parsePlanDType(std::string_view name) {
  for (const PlanDTypeInfo &info : kPlanDTypes)
    if (info.name == name)
      return info.dtype;
  return std::nullopt;
}

size_t planDTypeSize(PlanDType dtype) {
  for (const PlanDTypeInfo &info : kPlanDTypes)
    if (info.dtype == dtype)
      return info.size;
  return 0;
}

namespace {
constexpr std::string_view kBufferKindNames[] = {
    "input",     "param",      "state",           "grad",     "loss",  "step",
    "grad_scale", "grad_norm", "lr",              "activation", "activation_grad",
    "residual",  "stash",      "grad_squares", "expert_load", "logits",
    "keys",      "values"};
} // namespace

std::string_view bufferKindName(BufferKind kind) {
  return kBufferKindNames[static_cast<size_t>(kind)];
}

std::optional<BufferKind> parseBufferKind(std::string_view name) {
  for (size_t i = 0; i < std::size(kBufferKindNames); ++i)
    if (kBufferKindNames[i] == name)
      return static_cast<BufferKind>(i);
  return std::nullopt;
}

std::string_view initKindName(InitKind kind) {
  for (const auto &[k, name] : kInitKinds)
    if (k == kind)
      return name;
  return "?";
}

std::optional<InitKind> parseInitKind(std::string_view name) {
  for (const auto &[k, n] : kInitKinds)
    if (n == name)
      return k;
  return std::nullopt;
}

std::string InitSpec::describe() const {
  std::string s(initKindName(kind));
  if (args.empty())
    return s;
  s.push_back('(');
  for (size_t i = 0; i < args.size(); ++i) {
    if (i)
      s.append(", ");
    s.append(concat(args[i]));
  }
  s.push_back(')');
  return s;
}

int64_t numElements(const std::vector<Dim> &dims) {
  int64_t n = 1;
  for (const Dim &d : dims)
    if (__builtin_mul_overflow(n, d.size, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

std::vector<int64_t> dimSizes(const std::vector<Dim> &dims) {
  std::vector<int64_t> sizes;
  sizes.reserve(dims.size());
  for (const Dim &d : dims)
    sizes.push_back(d.size);
  return sizes;
}

std::string formatDims(const std::vector<Dim> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s.append(", ");
    s.append(concat(dims[i].name, '=', dims[i].size));
  }
  s.push_back(']');
  return s;
}

const ParamInfo *Plan::findParam(std::string_view name) const {
  for (const ParamInfo &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

size_t CudaKernelsInfo::numLaunches() const {
  size_t n = 0;
  for (const CudaFunction &f : functions)
    n += f.launches.size();
  return n;
}

const ManifestEntry *Plan::findFile(std::string_view name) const {
  for (const ManifestEntry &f : files)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::optional<int64_t> Plan::dimSize(std::string_view name) const {
  for (const Dim &d : dims)
    if (d.name == name)
      return d.size;
  return std::nullopt;
}

std::optional<int64_t> Plan::vocabularySize() const {
  if (vocabulary.empty())
    return std::nullopt;
  return vocabularyRealSize;
}

bool Plan::vocabularyPadded() const {
  return !vocabulary.empty() && dimSize(vocabulary) != vocabularyRealSize;
}

int64_t Plan::numParameterElements() const {
  int64_t n = 0;
  for (const ParamInfo &p : params)
    if (__builtin_add_overflow(n, p.numElements(), &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

int64_t Plan::meshSize() const {
  int64_t n = 1;
  for (const MeshAxis &a : mesh)
    if (__builtin_mul_overflow(n, a.size, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

std::vector<Dim> Plan::localDims(const std::vector<Dim> &tensorDims,
                                 const ParamLayout &layout) const {
  std::vector<Dim> local = tensorDims;
  for (const DimSplit &split : layout.splits) {
    if (split.dim >= local.size())
      continue; // not from a loaded plan
    int64_t ways = 1;
    for (size_t axis : split.axes)
      if (axis < mesh.size())
        ways *= mesh[axis].size;
    local[split.dim].size /= ways;
  }
  return local;
}

std::vector<Dim> Plan::localDims(const ParamInfo &param) const {
  return localDims(param.dims, param.layout);
}

std::vector<Dim> Plan::optimizerLocalDims(const ParamInfo &param) const {
  return localDims(param.dims, param.stateLayout());
}

const ParamLayout &Plan::stateLayout(const StateInfo &state) const {
  static const ParamLayout replicated;
  return state.paramIndex < params.size() ? params[state.paramIndex].stateLayout() : replicated;
}

std::optional<size_t> Plan::dataParallelShardDim(const ParamInfo &param) const {
  if (!dataParallelAxis || !param.optimizerLayout)
    return std::nullopt;
  for (const DimSplit &split : param.optimizerLayout->splits)
    if (split.axes.size() == 1 && split.axes[0] == *dataParallelAxis)
      return split.dim;
  return std::nullopt;
}

std::string Plan::describeLayout(const std::vector<Dim> &tensorDims,
                                 const ParamLayout &layout) const {
  if (layout.replicated())
    return "replicated";
  std::string s;
  for (const DimSplit &split : layout.splits) {
    if (!s.empty())
      s.append(", ");
    s.append(split.dim < tensorDims.size() ? tensorDims[split.dim].name : "?").append(" over ");
    for (size_t i = 0; i < split.axes.size(); ++i)
      s.append(i ? " x " : "")
          .append(split.axes[i] < mesh.size() ? mesh[split.axes[i]].name : "?");
  }
  return s;
}

std::string Plan::describeLayout(const ParamInfo &param) const {
  return describeLayout(param.dims, param.layout);
}

//===----------------------------------------------------------------------===//
// MANIFEST
//===----------------------------------------------------------------------===//

namespace {

// The readers below throw jsonread::JsonReadError; parsePlanJson catches it.
using namespace jsonread;

constexpr std::string_view kManifestName = "MANIFEST";
constexpr std::string_view kPlanJsonName = "plan.json";
constexpr std::string_view kKernelsPrefix = "kernels/";
/// A MANIFEST lists a handful of files; anything this large is not one.
constexpr uint64_t kMaxManifestBytes = 1 << 20;
/// plan.json is read into memory whole; it holds tables, not tensors.
constexpr uint64_t kMaxPlanJsonBytes = uint64_t(1) << 30;

bool isLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool isDecimal(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool isPlainFileName(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.size() > 255)
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '+';
  });
}

/// The plan directory as users named it, without trailing slashes (for messages).
std::string displayName(const std::filesystem::path &dir) {
  std::string s = dir.string();
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s.empty() ? std::string(".") : s;
}

} // namespace

bool isSafePlanFileName(std::string_view name) {
  if (name.starts_with(kKernelsPrefix))
    name.remove_prefix(kKernelsPrefix.size());
  return isPlainFileName(name);
}

Expected<std::pair<int, std::vector<ManifestEntry>>> parseManifest(std::string_view text,
                                                                   std::string_view where) {
  if (text.empty())
    return makeError(where, ": MANIFEST is empty");

  // Lines, each with whether it ends with LF.
  struct Line {
    std::string_view text;
    bool terminated;
  };
  std::vector<Line> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      lines.push_back({text.substr(pos), false});
      break;
    }
    lines.push_back({text.substr(pos, nl - pos), true});
    pos = nl + 1;
  }

  auto lineError = [&](size_t index, const auto &...pieces) {
    return makeError(where, ": MANIFEST line ", index + 1, ": ", pieces...);
  };
  auto unterminated = [&](size_t index) {
    return lineError(index, "no line end after ", quoteForMessage(lines[index].text),
                     " (truncated?)");
  };

  // The format line: "mtc-plan <version>".
  std::string_view first = lines[0].text;
  std::string expectedFirst = concat(kPlanFormatName, ' ', kPlanFormatVersion);
  size_t space = first.find(' ');
  std::string_view formatWord = first.substr(0, space);
  if (formatWord != kPlanFormatName)
    return makeError(where, ": MANIFEST is not an mtc plan manifest: its first line is ",
                     quoteForMessage(first), ", expected '", expectedFirst, "'");
  std::string_view versionText =
      space == std::string_view::npos ? std::string_view() : first.substr(space + 1);
  if (!isDecimal(versionText) || (versionText.size() > 1 && versionText.front() == '0'))
    return lineError(0, "malformed format line ", quoteForMessage(first), " (expected '",
                     expectedFirst, "')");
  if (versionText != concat(kPlanFormatVersion))
    return makeError(where, ": unsupported plan version ", versionText,
                     " (this mtrun reads version ", kPlanFormatVersion, ")");
  if (!lines[0].terminated)
    return unterminated(0);

  std::vector<ManifestEntry> entries;
  std::vector<size_t> entryLines;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i].text;
    if (line.empty())
      return lineError(i, "empty line (every line after the first names one file)");
    constexpr std::string_view kShape = " (expected '<sha256 hex> <size in bytes> <file name>')";
    if (line.find('\r') != std::string_view::npos)
      return lineError(i, "malformed line ", quoteForMessage(line),
                       ": carriage return (MANIFEST lines end with LF alone)");
    size_t s1 = line.find(' ');
    size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
    if (s2 == std::string_view::npos)
      return lineError(i, "malformed line ", quoteForMessage(line), kShape);
    std::string_view hash = line.substr(0, s1);
    std::string_view sizeText = line.substr(s1 + 1, s2 - s1 - 1);
    std::string_view name = line.substr(s2 + 1);
    if (hash.size() != 64 || !isLowerHex(hash))
      return lineError(i, "malformed line ", quoteForMessage(line),
                       ": the SHA-256 must be 64 lowercase hex digits", kShape);
    uint64_t size = 0;
    auto [end, ec] = std::from_chars(sizeText.data(), sizeText.data() + sizeText.size(), size);
    if (!isDecimal(sizeText) || ec != std::errc() || end != sizeText.data() + sizeText.size() ||
        (sizeText.size() > 1 && sizeText.front() == '0'))
      return lineError(i, "malformed line ", quoteForMessage(line),
                       ": the size must be a decimal number of bytes", kShape);
    if (!isSafePlanFileName(name))
      return lineError(i, "unsafe file name ", quoteForMessage(name),
                       " (plan files are plain names in the plan directory, or under kernels/)");
    if (name == kManifestName)
      return lineError(i, "MANIFEST cannot list itself");
    for (size_t j = 0; j < entries.size(); ++j)
      if (entries[j].name == name)
        return lineError(i, "'", name, "' is listed twice (also on line ", entryLines[j] + 1, ")");
    if (!lines[i].terminated)
      return unterminated(i);
    entries.push_back(ManifestEntry{std::string(name), size, std::string(hash)});
    entryLines.push_back(i);
  }
  if (std::none_of(entries.begin(), entries.end(),
                   [](const ManifestEntry &e) { return e.name == kPlanJsonName; }))
    return makeError(where, ": MANIFEST does not list plan.json");
  return std::make_pair(kPlanFormatVersion, std::move(entries));
}

namespace {

/// Reads the rest of `fd` into `sink(data, size)`; returns errno on failure, 0 on success.
template <class Sink> int readAll(int fd, Sink &&sink) {
  std::array<char, 1 << 16> buf;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    if (n == 0)
      return 0;
    sink(buf.data(), static_cast<size_t>(n));
  }
}

/// Reads MANIFEST (size-capped).
Expected<std::string> readManifest(const std::filesystem::path &dir, const std::string &where) {
  int openErrno = 0;
  Expected<RegularFile> file = openInputFile(dir / kManifestName, kManifestName, &openErrno);
  if (!file) {
    if (openErrno == ENOENT)
      return makeError(where, ": no MANIFEST (not a plan directory, or an incomplete one)");
    return file.takeError().withContext(where);
  }
  if (file->size > kMaxManifestBytes)
    return makeError(where, ": MANIFEST is ", file->size, " bytes, too large for a plan manifest");
  std::string text;
  int err = readAll(file->handle.get(), [&](const char *data, size_t size) {
    if (text.size() <= kMaxManifestBytes)
      text.append(data, size);
  });
  if (err)
    return makeError(where, ": cannot read MANIFEST: ", errnoCode(err));
  if (text.size() > kMaxManifestBytes)
    return makeError(where, ": MANIFEST is too large for a plan manifest");
  return text;
}

/// Checks one listed file's size and SHA-256; keeps its bytes in `*contents` when given.
Error verifyFile(const std::filesystem::path &dir, const std::string &where,
                 const ManifestEntry &entry, std::string *contents) {
  int openErrno = 0;
  Expected<RegularFile> file = openInputFile(dir / entry.name, entry.name, &openErrno);
  if (!file) {
    if (openErrno == ENOENT)
      return makeError(where, ": ", entry.name, " is listed in MANIFEST but missing");
    return file.takeError().withContext(where);
  }
  auto sizeError = [&](uint64_t actual) {
    return makeError(where, ": ", entry.name, " is ", actual, " bytes, MANIFEST says ", entry.size,
                     actual < entry.size ? " (truncated?)" : " (modified?)");
  };
  if (file->size != entry.size)
    return sizeError(file->size);
  if (contents) {
    if (entry.size > kMaxPlanJsonBytes)
      return makeError(where, ": ", entry.name, " is ", entry.size,
                       " bytes, more than the 1 GiB this runtime reads");
    contents->clear();
    contents->reserve(entry.size);
  }
  Sha256 hash;
  uint64_t read = 0;
  int err = readAll(file->handle.get(), [&](const char *data, size_t size) {
    hash.update(data, size);
    read += size;
    if (contents && contents->size() + size <= entry.size)
      contents->append(data, size);
  });
  if (err)
    return makeError(where, ": cannot read ", entry.name, ": ", errnoCode(err));
  if (read != entry.size) // changed while we read it
    return sizeError(read);
  if (hash.finalizeHex() != entry.sha256)
    return makeError(where, ": ", entry.name,
                     " does not match its SHA-256 in MANIFEST (corrupt or modified)");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// plan.json
//===----------------------------------------------------------------------===//

/// A non-empty string.
std::string asName(const JsonValue &v, const std::string &path) {
  const std::string &s = asString(v, path);
  if (s.empty())
    fail(path, "expected a non-empty name, found the empty string");
  return s;
}

/// Which integer dtypes a tensor may have besides the floating-point ones: none
/// (parameters, states), i32 token ids (the plan's inputs), or also i64 counts (kernel
/// buffers: an MoE step's tokens per expert).
enum class Integers { None, TokenIds, TokenIdsAndCounts };

PlanDType asDType(const JsonValue &v, const std::string &path, Integers integers) {
  const std::string &s = asString(v, path);
  std::optional<PlanDType> d = parsePlanDType(s);
  bool allowed = d && (*d == PlanDType::I32   ? integers != Integers::None
                       : *d == PlanDType::I64 ? integers == Integers::TokenIdsAndCounts
                                              : true);
  if (!allowed)
    fail(path, concat("unknown dtype ", quoteForMessage(s), " (expected f32, bf16, f16 or f64",
                      integers == Integers::None        ? ")"
                      : integers == Integers::TokenIds ? ", or i32 for token ids)"
                                                        : ", or i32 for token ids, i64 for counts)"));
  return *d;
}

/// A size of a dimension: a positive integer.
int64_t asDimSize(const JsonValue &v, const std::string &path) {
  return asInt(v, path, 1, "a positive integer (a dimension size)");
}

/// `[{"name", "size"}, ...]`, with the element count checked against int64 and the sizes of
/// named model dimensions against the top-level `dims`.
std::vector<Dim> readDimList(const JsonValue &v, const std::string &path,
                             const std::vector<Dim> &modelDims) {
  std::vector<Dim> dims;
  const JsonArray &a = asArray(v, path);
  int64_t elements = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string p = element(path, i);
    const JsonObject &o = asObject(a[i], p);
    Dim d{asName(get(o, p, "name"), member(p, "name")),
          asDimSize(get(o, p, "size"), member(p, "size"))};
    // `layers` is the stacking dimension of layer parameters: its size is the layer's repeat
    // count, which need not equal a model dimension of that name.
    if (d.name != "layers")
      for (const Dim &m : modelDims)
        if (m.name == d.name && m.size != d.size)
          fail(p, concat("dimension '", d.name, "' has size ", d.size, " here but ", m.size,
                         " in dims"));
    if (__builtin_mul_overflow(elements, d.size, &elements))
      fail(path, "the tensor has more than 2^63 elements");
    dims.push_back(std::move(d));
  }
  return dims;
}

/// The top-level `dims`: `{"name": size, ...}` (also accepted as a `[{"name", "size"}]` list).
std::vector<Dim> readModelDims(const JsonValue &v, const std::string &path) {
  std::vector<Dim> dims;
  if (v.isArray()) {
    dims = readDimList(v, path, {});
    for (size_t i = 0; i < dims.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (dims[i].name == dims[j].name)
          fail(element(path, i), concat("duplicate dimension '", dims[i].name, "'"));
    return dims;
  }
  if (!v.isObject())
    typeError(path, "an object of dimension sizes", v);
  for (const auto &[name, size] : *v.getObject()) {
    std::string p = member(path, name);
    if (name.empty())
      fail(path, "a dimension has the empty name");
    dims.push_back(Dim{name, asDimSize(size, p)});
  }
  return dims;
}

InitSpec readInit(const JsonValue &v, const std::string &path) {
  const JsonObject &o = asObject(v, path);
  std::string kindPath = member(path, "kind");
  const std::string &kindName = asString(get(o, path, "kind"), kindPath);
  std::optional<InitKind> kind = parseInitKind(kindName);
  if (!kind)
    fail(kindPath, concat("unknown initialiser ", quoteForMessage(kindName),
                          " (expected zeros, ones, normal, uniform or constant)"));
  InitSpec init;
  init.kind = *kind;
  std::string argsPath = member(path, "args");
  if (const JsonValue *args = o.find("args")) {
    const JsonArray &a = asArray(*args, argsPath);
    for (size_t i = 0; i < a.size(); ++i) {
      double d = asNumber(a[i], element(argsPath, i));
      if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
        fail(element(argsPath, i), concat(d, " is outside the range of f32"));
      init.args.push_back(d);
    }
  }
  size_t n = init.args.size();
  auto arity = [&](size_t min, size_t max, std::string_view signature) {
    if (n < min || n > max)
      fail(argsPath, concat(kindName, " takes ", signature, ", found ", n,
                            n == 1 ? " argument" : " arguments"));
  };
  switch (init.kind) {
  case InitKind::Zeros:
  case InitKind::Ones:
    arity(0, 0, "no arguments");
    break;
  case InitKind::Normal:
    arity(1, 2, "1 or 2 arguments (std[, mean])");
    if (init.args[0] < 0)
      fail(element(argsPath, 0), concat("normal's std must not be negative, found ", init.args[0]));
    break;
  case InitKind::Uniform:
    arity(2, 2, "2 arguments (low, high)");
    if (init.args[0] > init.args[1])
      fail(argsPath,
           concat("uniform's low (", init.args[0], ") exceeds its high (", init.args[1], ")"));
    break;
  case InitKind::Constant:
    arity(1, 1, "1 argument (value)");
    break;
  }
  return init;
}

/// "tp, cp" or "(the plan has no mesh)" for messages.
std::string meshAxisNames(const std::vector<MeshAxis> &mesh) {
  if (mesh.empty())
    return "the plan has no mesh";
  std::string s = "mesh axes: ";
  for (size_t i = 0; i < mesh.size(); ++i)
    s.append(i ? ", " : "").append(mesh[i].name);
  return s;
}

/// `mesh`: `{"axes": [{"name", "size"}, ...], "data_parallel_axis": "<axis>", "zero_stage":
/// 1|2|3}` into plan.mesh, plan.dataParallelAxis and plan.zeroStage.
void readMesh(const JsonValue &v, const std::string &path, Plan &plan) {
  const JsonObject &o = asObject(v, path);
  std::string axesPath = member(path, "axes");
  const JsonArray &a = asArray(get(o, path, "axes"), axesPath);
  std::vector<MeshAxis> axes;
  int64_t product = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string p = element(axesPath, i);
    const JsonObject &ao = asObject(a[i], p);
    MeshAxis axis{asName(get(ao, p, "name"), member(p, "name")),
                  asInt(get(ao, p, "size"), member(p, "size"), 1,
                        "a positive integer (the axis' number of ranks)")};
    for (const MeshAxis &other : axes)
      if (other.name == axis.name)
        fail(member(p, "name"), concat("duplicate mesh axis '", axis.name, "'"));
    if (__builtin_mul_overflow(product, axis.size, &product) || product > (int64_t(1) << 31))
      fail(axesPath, "the mesh has more than 2^31 ranks");
    axes.push_back(std::move(axis));
  }
  plan.mesh = std::move(axes);
  if (const JsonValue *dp = o.find("data_parallel_axis")) {
    std::string dpPath = member(path, "data_parallel_axis");
    const std::string &name = asName(*dp, dpPath);
    size_t axis = 0;
    while (axis < plan.mesh.size() && plan.mesh[axis].name != name)
      ++axis;
    if (axis == plan.mesh.size())
      fail(dpPath, concat("'", name, "' is not an axis of the mesh (",
                          plan.mesh.empty() ? std::string("the mesh has no axes")
                                            : meshAxisNames(plan.mesh),
                          ")"));
    if (axis != 0)
      fail(dpPath, concat("the data-parallel axis '", name,
                          "' must be the mesh's first (outermost) axis, but it is axis ", axis,
                          " (", meshAxisNames(plan.mesh), ")"));
    plan.dataParallelAxis = axis;
    plan.zeroStage = 1;
  }
  if (const JsonValue *stage = o.find("zero_stage")) {
    std::string stagePath = member(path, "zero_stage");
    if (!plan.dataParallelAxis)
      fail(stagePath, "a ZeRO stage needs a data-parallel axis (mesh.data_parallel_axis)");
    plan.zeroStage = asInt(*stage, stagePath, 1, 3);
  }
}

/// A parameter's `layout` or `optimizer_layout`: `{"split": {"<dim>": ["<axis>", ...], ...}}`.
/// `forbiddenAxis` (the data-parallel axis, for `layout`) may split nothing.
ParamLayout readLayout(const JsonValue &v, const std::string &path, const ParamInfo &param,
                       const std::vector<MeshAxis> &mesh,
                       std::optional<size_t> forbiddenAxis = std::nullopt) {
  const JsonObject &o = asObject(v, path);
  ParamLayout layout;
  const JsonValue *splitValue = o.find("split");
  if (!splitValue)
    return layout;
  std::string splitPath = member(path, "split");
  const JsonObject &split = asObject(*splitValue, splitPath);
  std::vector<std::string> axisUsedBy(mesh.size()); // dim name per axis
  for (const auto &[dimName, axesValue] : split) {
    std::string p = member(splitPath, dimName);
    const JsonArray &axes = asArray(axesValue, p);
    std::optional<size_t> dim;
    for (size_t d = 0; d < param.dims.size(); ++d)
      if (param.dims[d].name == dimName) {
        if (dim)
          fail(p, concat("parameter '", param.name, "' has two dimensions named '", dimName,
                         "' ", formatDims(param.dims), "; a layout cannot split either"));
        dim = d;
      }
    if (!dim)
      fail(p, concat("parameter '", param.name, "' has no dimension '", dimName, "' (its dims are ",
                     formatDims(param.dims), ")"));
    if (axes.empty())
      continue; // not split
    DimSplit s;
    s.dim = *dim;
    int64_t ways = 1;
    std::string axisList;
    for (size_t i = 0; i < axes.size(); ++i) {
      std::string axisName = asName(axes[i], element(p, i));
      size_t axis = 0;
      while (axis < mesh.size() && mesh[axis].name != axisName)
        ++axis;
      if (axis == mesh.size())
        fail(element(p, i),
             concat("parameter '", param.name, "': dimension '", dimName, "' is split over axis '",
                    axisName, "', which the mesh does not have (", meshAxisNames(mesh), ")"));
      if (forbiddenAxis && axis == *forbiddenAxis)
        fail(element(p, i),
             concat("parameter '", param.name, "': dimension '", dimName,
                    "' is split over the data-parallel axis '", axisName,
                    "'; parameters are whole on every data-parallel rank (only the optimizer "
                    "state is split over it, by optimizer_layout) but under ZeRO-3 "
                    "(mesh.zero_stage 3)"));
      if (!axisUsedBy[axis].empty())
        fail(element(p, i), concat("parameter '", param.name, "': axis '", axisName,
                                   "' splits both dimension '", axisUsedBy[axis],
                                   "' and dimension '", dimName,
                                   "' (an axis splits at most one dimension of a tensor)"));
      axisUsedBy[axis] = dimName;
      ways *= mesh[axis].size;
      axisList.append(i ? " x " : "").append(concat("'", axisName, "' (size ", mesh[axis].size, ")"));
      s.axes.push_back(axis);
    }
    int64_t size = param.dims[*dim].size;
    if (size % ways != 0)
      fail(p, concat("parameter '", param.name, "': dimension '", dimName, "' (size ", size,
                     ") does not divide evenly over ", axes.size() == 1 ? "axis " : "axes ",
                     axisList));
    layout.splits.push_back(std::move(s));
  }
  std::sort(layout.splits.begin(), layout.splits.end(),
            [](const DimSplit &a, const DimSplit &b) { return a.dim < b.dim; });
  return layout;
}

/// Checks a parameter's optimizer layout (read by readLayout at `path`) against its layout:
/// every split of the layout kept, and exactly one more dimension split over the data-parallel
/// axis `dpAxis` alone.
void checkOptimizerLayout(const ParamLayout &optimizer, const std::string &path,
                          const ParamInfo &param, const std::vector<MeshAxis> &mesh,
                          size_t dpAxis) {
  std::string splitPath = member(path, "split");
  const std::string &dp = mesh[dpAxis].name;
  auto axesOf = [&](const std::vector<size_t> &axes) {
    std::string s;
    for (size_t i = 0; i < axes.size(); ++i)
      s.append(i ? " x " : "").append(mesh[axes[i]].name);
    return s;
  };
  auto rule = [&] {
    return concat("(the optimizer layout is the parameter's layout plus one more dimension split "
                  "over the data-parallel axis '",
                  dp, "')");
  };
  for (const DimSplit &s : param.layout.splits) {
    const std::string &dimName = param.dims[s.dim].name;
    auto it = std::find_if(optimizer.splits.begin(), optimizer.splits.end(),
                           [&](const DimSplit &o) { return o.dim == s.dim; });
    if (it == optimizer.splits.end() || it->axes != s.axes)
      fail(splitPath, concat("parameter '", param.name, "': its layout splits dimension '",
                             dimName, "' over ", axesOf(s.axes), " but its optimizer layout ",
                             it == optimizer.splits.end() ? std::string("does not split it")
                                                          : concat("splits it over ", axesOf(it->axes)),
                             " ", rule()));
  }
  size_t added = 0;
  for (const DimSplit &o : optimizer.splits) {
    if (std::any_of(param.layout.splits.begin(), param.layout.splits.end(),
                    [&](const DimSplit &s) { return s.dim == o.dim; }))
      continue;
    const std::string &dimName = param.dims[o.dim].name;
    if (o.axes != std::vector<size_t>{dpAxis})
      fail(member(splitPath, dimName),
           concat("parameter '", param.name, "': its optimizer layout splits dimension '",
                  dimName, "' over ", axesOf(o.axes), ", which its layout does not split; ",
                  "that dimension must be split over the data-parallel axis '", dp, "' alone ",
                  rule()));
    ++added;
  }
  if (added == 0)
    fail(splitPath, concat("parameter '", param.name,
                           "': its optimizer layout splits no dimension over the data-parallel "
                           "axis '",
                           dp, "' (leave optimizer_layout out when the state is whole) ",
                           rule()));
}

ParamInfo readParam(const JsonValue &v, const std::string &path, size_t index,
                    const std::vector<Dim> &modelDims, const std::vector<MeshAxis> &mesh,
                    std::optional<size_t> dpAxis, int64_t zeroStage) {
  const JsonObject &o = asObject(v, path);
  ParamInfo p;
  p.name = asName(get(o, path, "name"), member(path, "name"));
  if (const JsonValue *layer = o.find("layer"))
    p.layer = asName(*layer, member(path, "layer"));
  p.instances = asInt(get(o, path, "instances"), member(path, "instances"), 1,
                      "a positive integer (the layer's repeat count)");
  int64_t id =
      asInt(get(o, path, "tensor_id"), member(path, "tensor_id"), 0, "a non-negative integer");
  if (id != static_cast<int64_t>(index))
    fail(member(path, "tensor_id"),
         concat(id, ", expected ", index, " (the parameter's index in the table)"));
  p.tensorId = static_cast<uint32_t>(index);
  std::string dimsPath = member(path, "dims");
  p.dims = readDimList(get(o, path, "dims"), dimsPath, modelDims);
  if (p.layer) {
    if (p.dims.empty() || p.dims[0].name != "layers")
      fail(dimsPath,
           concat("a layer parameter's dims must lead with 'layers', found ", formatDims(p.dims)));
    if (p.dims[0].size != p.instances)
      fail(member(path, "instances"),
           concat(p.instances, ", but the leading 'layers' dimension has size ", p.dims[0].size));
  } else if (p.instances != 1) {
    fail(member(path, "instances"),
         concat("a model parameter (no 'layer') has 1 instance, found ", p.instances));
  }
  p.dtype = asDType(get(o, path, "dtype"), member(path, "dtype"), Integers::None);
  p.init = readInit(get(o, path, "init"), member(path, "init"));
  p.weightDecay = asBool(get(o, path, "weight_decay"), member(path, "weight_decay"));
  if (const JsonValue *layout = o.find("layout"))
    p.layout = readLayout(*layout, member(path, "layout"), p, mesh,
                          zeroStage == 3 ? std::nullopt : dpAxis);
  if (const JsonValue *optimizer = o.find("optimizer_layout")) {
    std::string optimizerPath = member(path, "optimizer_layout");
    if (!dpAxis)
      fail(optimizerPath,
           concat("parameter '", p.name,
                  "' has an optimizer layout, but the mesh names no data_parallel_axis (the "
                  "distributed optimizer splits the optimizer state over it)"));
    ParamLayout layout = readLayout(*optimizer, optimizerPath, p, mesh);
    checkOptimizerLayout(layout, optimizerPath, p, mesh, *dpAxis);
    p.optimizerLayout = std::move(layout);
  }
  return p;
}

StateInfo readState(const JsonValue &v, const std::string &path,
                    const std::vector<ParamInfo> &params, const std::vector<Dim> &modelDims) {
  const JsonObject &o = asObject(v, path);
  StateInfo s;
  s.name = asName(get(o, path, "name"), member(path, "name"));
  s.of = asName(get(o, path, "of"), member(path, "of"));
  auto it = std::find_if(params.begin(), params.end(),
                         [&](const ParamInfo &p) { return p.name == s.of; });
  if (it == params.end())
    fail(member(path, "of"), concat("no parameter named '", s.of, "'"));
  s.paramIndex = static_cast<size_t>(it - params.begin());
  s.dims = readDimList(get(o, path, "dims"), member(path, "dims"), modelDims);
  if (s.dims != it->dims)
    fail(member(path, "dims"), concat(formatDims(s.dims), " differ from the dims of parameter '",
                                      it->name, "' ", formatDims(it->dims)));
  s.dtype = asDType(get(o, path, "dtype"), member(path, "dtype"), Integers::None);
  return s;
}

InputInfo readInput(const JsonValue &v, const std::string &path,
                    const std::vector<Dim> &modelDims) {
  const JsonObject &o = asObject(v, path);
  InputInfo in;
  in.name = asName(get(o, path, "name"), member(path, "name"));
  in.dtype = asDType(get(o, path, "dtype"), member(path, "dtype"), Integers::TokenIds);
  in.dims = readDimList(get(o, path, "dims"), member(path, "dims"), modelDims);
  return in;
}

int64_t readCount(const JsonObject &o, const std::string &path, std::string_view key) {
  return asInt(get(o, path, key), member(path, key), 0, "a non-negative integer");
}

Predictions readPredictions(const JsonValue &v, const std::string &path) {
  const JsonObject &o = asObject(v, path);
  Predictions p;
  p.parameters = readCount(o, path, "parameters");
  std::string flopsPath = member(path, "flops_per_token");
  const JsonObject &flops = asObject(get(o, path, "flops_per_token"), flopsPath);
  p.forwardFlopsPerToken = readCount(flops, flopsPath, "forward");
  p.backwardFlopsPerToken = readCount(flops, flopsPath, "backward");
  std::string memPath = member(path, "memory_bytes");
  const JsonObject &mem = asObject(get(o, path, "memory_bytes"), memPath);
  p.memoryBytes.parameters = readCount(mem, memPath, "parameters");
  p.memoryBytes.gradients = readCount(mem, memPath, "gradients");
  p.memoryBytes.optimizerState = readCount(mem, memPath, "optimizer_state");
  p.memoryBytes.savedActivations = readCount(mem, memPath, "saved_activations");
  p.memoryBytes.total = readCount(mem, memPath, "total");
  if (mem.find("workspace"))
    p.memoryBytes.workspace = readCount(mem, memPath, "workspace");
  if (mem.find("peak"))
    p.memoryBytes.peak = readCount(mem, memPath, "peak");
  if (o.find("communication_bytes")) {
    std::string commPath = member(path, "communication_bytes");
    const JsonObject &comm = asObject(get(o, path, "communication_bytes"), commPath);
    p.communicationBytes = Predictions::CommunicationBytes{
        readCount(comm, commPath, "forward_backward"), readCount(comm, commPath, "optimizer_step"),
        {}};
    for (const auto &[function, bytes] : comm)
      if (function != "forward_backward" && function != "optimizer_step" &&
          function != "upper_bound")
        p.communicationBytes->pipelineFunctions[function] = readCount(comm, commPath, function);
    if (comm.find("upper_bound"))
      p.communicationBytes->upperBound =
          asBool(get(comm, commPath, "upper_bound"), member(commPath, "upper_bound"));
  }
  return p;
}

/// Parameter, state and gradient buffers hold the rank's shard: with a mesh their dims are
/// checked against the layout (checkLocalDims), not against the model's global dims.
KernelBuffer readKernelBuffer(const JsonValue &v, const std::string &path,
                              const std::vector<Dim> &modelDims, bool sharded) {
  const JsonObject &o = asObject(v, path);
  KernelBuffer b;
  const std::string &kind = asString(get(o, path, "kind"), member(path, "kind"));
  std::optional<BufferKind> parsed = parseBufferKind(kind);
  if (!parsed)
    fail(member(path, "kind"), concat("unknown buffer kind ", quoteForMessage(kind)));
  b.kind = *parsed;
  b.name = asName(get(o, path, "name"), member(path, "name"));
  b.dtype = asDType(get(o, path, "dtype"), member(path, "dtype"), Integers::TokenIdsAndCounts);
  // A pipeline chunk's residuals and stash are partitioned like the values they are. The
  // logits are whole on every rank, also where the data is split (ZeRO-3's batch):
  // checkLogitsFunction checks them against the global dims.
  bool local = (sharded && (b.kind == BufferKind::Param || b.kind == BufferKind::State ||
                            b.kind == BufferKind::Grad || b.kind == BufferKind::Residual ||
                            b.kind == BufferKind::Stash)) ||
               b.kind == BufferKind::Logits;
  b.dims = readDimList(get(o, path, "dims"), member(path, "dims"),
                       local ? std::vector<Dim>{} : modelDims);
  if (b.kind == BufferKind::Residual || b.kind == BufferKind::Stash)
    b.index = asInt(get(o, path, "index"), member(path, "index"), 0, "a non-negative index");
  return b;
}

/// `arena`: every allocation inside the arena, at an aligned offset.
KernelArenaPlan readArenaPlan(const JsonValue &v, const std::string &path) {
  const JsonObject &o = asObject(v, path);
  KernelArenaPlan arena;
  arena.bytes = readCount(o, path, "bytes");
  arena.peakBytes = readCount(o, path, "peak_bytes");
  std::string listPath = member(path, "allocations");
  const JsonArray &list = asArray(get(o, path, "allocations"), listPath);
  for (size_t i = 0; i < list.size(); ++i) {
    std::string itemPath = element(listPath, i);
    const JsonArray &pair = asArray(list[i], itemPath);
    if (pair.size() != 2)
      fail(itemPath, "must be [size, offset]");
    ArenaAllocation a{asInt(pair[0], element(itemPath, 0), 0, "a non-negative size"),
                      asInt(pair[1], element(itemPath, 1), 0, "a non-negative offset")};
    if (a.offset % kKernelArenaAlignment != 0)
      fail(element(itemPath, 1),
           concat("offset ", a.offset, " is not a multiple of ", kKernelArenaAlignment));
    if (a.size > arena.bytes || a.offset > arena.bytes - a.size)
      fail(itemPath, concat("[", a.size, ", ", a.offset, "] does not fit the arena of ",
                            arena.bytes, " bytes"));
    arena.allocations.push_back(a);
  }
  return arena;
}

KernelFunction readKernelFunction(const JsonValue &v, const std::string &path,
                                  const std::vector<Dim> &modelDims, bool sharded) {
  const JsonObject &o = asObject(v, path);
  KernelFunction f;
  f.symbol = asName(get(o, path, "symbol"), member(path, "symbol"));
  for (std::string_view side : {"inputs", "outputs"}) {
    std::string sidePath = member(path, side);
    const JsonArray &buffers = asArray(get(o, path, side), sidePath);
    for (size_t i = 0; i < buffers.size(); ++i)
      (side == "inputs" ? f.inputs : f.outputs)
          .push_back(readKernelBuffer(buffers[i], element(sidePath, i), modelDims, sharded));
  }
  if (const JsonValue *arena = o.find("arena"))
    f.arena = readArenaPlan(*arena, member(path, "arena"));
  return f;
}

/// "chunk3.forward" -> {3, "forward"} for `prefix` "chunk"; nothing for another name.
std::optional<std::pair<int64_t, std::string_view>> splitIndexedName(std::string_view name,
                                                                     std::string_view prefix) {
  if (!name.starts_with(prefix))
    return std::nullopt;
  std::string_view rest = name.substr(prefix.size());
  size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9 || !isDecimal(rest.substr(0, dot)))
    return std::nullopt;
  return std::pair{static_cast<int64_t>(std::stoll(std::string(rest.substr(0, dot)))),
                   rest.substr(dot + 1)};
}

/// The pipeline's chunk and stage functions of `functions` (`chunk<c>.<role>`,
/// `stage<s>.<role>`): each chunk's `layers` must be its range of the stack in the pipeline's
/// cut, and a name must not point past the pipeline's chunks or stages.
void readPipelineKernels(const JsonObject &functions, const std::string &functionsPath,
                         const PipelinePlan &pipeline, const std::vector<Dim> &modelDims,
                         bool sharded, KernelsInfo &k) {
  k.chunks.resize(pipeline.chunkLayers.size());
  k.stages.resize(size_t(pipeline.stages));
  int64_t first = 0;
  for (size_t c = 0; c < k.chunks.size(); ++c) {
    k.chunks[c].firstLayer = first;
    k.chunks[c].numLayers = pipeline.chunkLayers[c];
    first += pipeline.chunkLayers[c];
  }
  for (const auto &[name, value] : functions) {
    std::string path = member(functionsPath, name);
    if (auto chunk = splitIndexedName(name, "chunk")) {
      auto [c, role] = *chunk;
      if (c >= static_cast<int64_t>(k.chunks.size()))
        fail(path, concat("names chunk ", c, ", but the pipeline has ", k.chunks.size(), " chunks"));
      ChunkKernels &ck = k.chunks[size_t(c)];
      std::optional<KernelFunction> *slot = role == "forward"           ? &ck.forward
                                            : role == "backward"        ? &ck.backward
                                            : role == "backward_input"  ? &ck.backwardInput
                                            : role == "backward_weight" ? &ck.backwardWeight
                                                                        : nullptr;
      if (!slot)
        fail(path, concat("unknown chunk function ", quoteForMessage(role),
                          " (expected forward, backward, backward_input or backward_weight)"));
      const JsonObject &o = asObject(value, path);
      if (asInt(get(o, path, "chunk"), member(path, "chunk"), 0, "a chunk index") != c)
        fail(member(path, "chunk"), concat("must be ", c, ", the chunk the name gives"));
      const JsonArray &layers = asArray(get(o, path, "layers"), member(path, "layers"));
      if (layers.size() != 2 ||
          asInt(layers[0], element(member(path, "layers"), 0), 0, "a layer index") !=
              ck.firstLayer ||
          asInt(layers[1], element(member(path, "layers"), 1), 0, "a layer count") !=
              ck.numLayers)
        fail(member(path, "layers"), concat("must be [", ck.firstLayer, ", ", ck.numLayers,
                                            "], the chunk's layers in pipeline.chunk_layers"));
      *slot = readKernelFunction(value, path, modelDims, sharded);
    } else if (auto stage = splitIndexedName(name, "stage")) {
      auto [s, role] = *stage;
      if (s >= pipeline.stages)
        fail(path, concat("names stage ", s, ", but the pipeline has ", pipeline.stages, " stages"));
      StageKernels &sk = k.stages[size_t(s)];
      std::optional<KernelFunction> *slot = role == "grad_squares"     ? &sk.gradSquares
                                            : role == "optimizer_step" ? &sk.optimizerStep
                                                                       : nullptr;
      if (!slot)
        fail(path, concat("unknown stage function ", quoteForMessage(role),
                          " (expected grad_squares or optimizer_step)"));
      const JsonObject &o = asObject(value, path);
      if (asInt(get(o, path, "stage"), member(path, "stage"), 0, "a stage index") != s)
        fail(member(path, "stage"), concat("must be ", s, ", the stage the name gives"));
      *slot = readKernelFunction(value, path, modelDims, sharded);
    }
  }
}

/// `kernels.x86_64`: the file must be one of MANIFEST's (so it was verified).
KernelsInfo readKernels(const JsonValue &v, const std::string &path,
                        const std::vector<Dim> &modelDims, bool sharded,
                        const std::optional<PipelinePlan> &pipeline) {
  const JsonObject &o = asObject(v, path);
  KernelsInfo k;
  k.file = asName(get(o, path, "file"), member(path, "file"));
  if (!isSafePlanFileName(k.file))
    fail(member(path, "file"), concat(quoteForMessage(k.file), " is not a plan file name"));
  std::string functionsPath = member(path, "functions");
  const JsonObject &functions = asObject(get(o, path, "functions"), functionsPath);
  auto read = [&](std::string_view name, std::optional<KernelFunction> &out) {
    if (const JsonValue *f = functions.find(name))
      out = readKernelFunction(*f, member(functionsPath, name), modelDims, sharded);
  };
  read("forward", k.forward);
  read("forward_backward", k.forwardBackward);
  read("optimizer_step", k.optimizerStep);
  read("logits", k.logits);
  // One sequence, one position: their dims are not the training batch's (checked by
  // checkCachedGeneration).
  for (auto [name, out] : {std::pair{"prefill", &k.prefill}, {"decode_step", &k.decodeStep}})
    if (const JsonValue *f = functions.find(name))
      *out = readKernelFunction(*f, member(functionsPath, name), {}, sharded);
  if (pipeline)
    readPipelineKernels(functions, functionsPath, *pipeline, modelDims, sharded, k);
  return k;
}

/// With a mesh: every parameter, state and gradient buffer of the kernels is the rank's shard,
/// so its dims must be the local dims its parameter's layout gives: `layout` for parameters and
/// forward_backward's gradients, the optimizer layout (Plan::stateLayout) for states and
/// optimizer_step's gradients. Buffers naming no table entry are left to KernelLibrary, which
/// rejects them.
CudaLaunchArgument readCudaLaunchArgument(const JsonValue &v, const std::string &path) {
  const JsonObject &o = asObject(v, path);
  CudaLaunchArgument a;
  const std::string &kind = asString(get(o, path, "kind"), member(path, "kind"));
  if (kind == "scalar") {
    a.kind = CudaLaunchArgument::Kind::Scalar;
    a.scalarType = asName(get(o, path, "type"), member(path, "type"));
    return a;
  }
  if (kind == "arg") {
    a.kind = CudaLaunchArgument::Kind::Argument;
    a.index = asInt(get(o, path, "index"), member(path, "index"), 0, "a non-negative index");
  } else if (kind == "temp") {
    a.kind = CudaLaunchArgument::Kind::Temporary;
  } else if (kind != "view") {
    fail(member(path, "kind"), concat("unknown launch argument kind ", quoteForMessage(kind),
                                      " (arg, temp, view or scalar)"));
  }
  a.bytes = readCount(o, path, "bytes");
  return a;
}

/// `grid` or `block`: three positive sizes.
std::array<int64_t, 3> readLaunchSize(const JsonObject &o, const std::string &path,
                                      std::string_view key) {
  std::string sizePath = member(path, key);
  const JsonArray &list = asArray(get(o, path, key), sizePath);
  if (list.size() != 3)
    fail(sizePath, concat("must be [x, y, z], found ", list.size(), " sizes"));
  std::array<int64_t, 3> size{};
  for (size_t d = 0; d < 3; ++d)
    size[d] = asInt(list[d], element(sizePath, d), 1, "a positive size");
  return size;
}

CudaLaunch readCudaLaunch(const JsonValue &v, const std::string &path) {
  const JsonObject &o = asObject(v, path);
  CudaLaunch launch;
  launch.kernel = asName(get(o, path, "kernel"), member(path, "kernel"));
  launch.grid = readLaunchSize(o, path, "grid");
  launch.block = readLaunchSize(o, path, "block");
  if (launch.block[0] * launch.block[1] * launch.block[2] > 1024)
    fail(member(path, "block"), "has more than 1024 threads");
  std::string argsPath = member(path, "args");
  const JsonArray &args = asArray(get(o, path, "args"), argsPath);
  for (size_t i = 0; i < args.size(); ++i)
    launch.args.push_back(readCudaLaunchArgument(args[i], element(argsPath, i)));
  return launch;
}

/// A `kernels/` file of plan.json that MANIFEST must list (loadPlan checks that).
std::string readKernelFileName(const JsonObject &o, const std::string &path,
                               std::string_view key) {
  std::string name = asName(get(o, path, key), member(path, key));
  if (!isSafePlanFileName(name))
    fail(member(path, key), concat(quoteForMessage(name), " is not a plan file name"));
  return name;
}

/// `kernels.cuda`; the host code's functions take buffers of `dataDims` (readKernels).
CudaKernelsInfo readCudaKernels(const JsonValue &v, const std::string &path,
                                const std::vector<Dim> &dataDims, bool sharded,
                                const std::optional<PipelinePlan> &pipeline) {
  const JsonObject &o = asObject(v, path);
  CudaKernelsInfo k;
  k.blockSize = asInt(get(o, path, "block_size"), member(path, "block_size"), 1, 1024);
  std::string binariesPath = member(path, "binaries");
  const JsonArray &binaries = asArray(get(o, path, "binaries"), binariesPath);
  if (binaries.empty())
    fail(binariesPath, "lists no chip");
  for (size_t i = 0; i < binaries.size(); ++i) {
    std::string binaryPath = element(binariesPath, i);
    const JsonObject &b = asObject(binaries[i], binaryPath);
    CudaBinary binary;
    binary.chip = asName(get(b, binaryPath, "chip"), member(binaryPath, "chip"));
    for (const CudaBinary &other : k.binaries)
      if (other.chip == binary.chip)
        fail(member(binaryPath, "chip"), concat("lists ", binary.chip, " twice"));
    binary.ptxFile = readKernelFileName(b, binaryPath, "ptx");
    if (b.find("cubin"))
      binary.cubinFile = readKernelFileName(b, binaryPath, "cubin");
    k.binaries.push_back(std::move(binary));
  }
  std::string functionsPath = member(path, "functions");
  for (const auto &[name, value] : asObject(get(o, path, "functions"), functionsPath)) {
    std::string functionPath = member(functionsPath, name);
    const JsonObject &f = asObject(value, functionPath);
    CudaFunction function;
    function.name = name;
    std::string callsPath = member(functionPath, "calls");
    const JsonArray &calls = asArray(get(f, functionPath, "calls"), callsPath);
    for (size_t i = 0; i < calls.size(); ++i)
      function.calls.push_back(asName(calls[i], element(callsPath, i)));
    std::string launchesPath = member(functionPath, "launches");
    const JsonArray &launches = asArray(get(f, functionPath, "launches"), launchesPath);
    for (size_t i = 0; i < launches.size(); ++i)
      function.launches.push_back(readCudaLaunch(launches[i], element(launchesPath, i)));
    k.functions.push_back(std::move(function));
  }
  if (const JsonValue *host = o.find("host")) {
    std::string hostPath = member(path, "host");
    k.host = readKernels(*host, hostPath, dataDims, sharded, pipeline);
    k.hostWorkspaceBytes = readCount(asObject(*host, hostPath), hostPath, "workspace_bytes");
  }
  return k;
}

void checkLocalDims(const Plan &plan, const std::string &path) {
  const KernelsInfo &k = *plan.x86Kernels;
  auto check = [&](const std::optional<KernelFunction> &fn, std::string_view name) {
    if (!fn)
      return;
    for (std::string_view side : {"inputs", "outputs"}) {
      const std::vector<KernelBuffer> &buffers = side == "inputs" ? fn->inputs : fn->outputs;
      for (size_t i = 0; i < buffers.size(); ++i) {
        const KernelBuffer &b = buffers[i];
        const ParamInfo *param = nullptr;
        if (b.kind == BufferKind::Param || b.kind == BufferKind::Grad) {
          param = plan.findParam(b.name);
        } else if (b.kind == BufferKind::State) {
          for (const StateInfo &s : plan.states)
            if (s.name == b.name)
              param = &plan.params[s.paramIndex];
        }
        if (!param)
          continue;
        bool optimizer = b.kind == BufferKind::State ||
                         (b.kind == BufferKind::Grad && name == "optimizer_step");
        const ParamLayout &layout = optimizer ? param->stateLayout() : param->layout;
        std::vector<Dim> local = plan.localDims(param->dims, layout);
        if (b.dims != local)
          fail(member(element(member(member(member(path, "functions"), name), side), i), "dims"),
               concat(bufferKindName(b.kind), " '", b.name, "' is ", formatDims(b.dims), ", but the ",
                      optimizer && param->optimizerLayout ? "optimizer layout" : "layout",
                      " of parameter '", param->name, "' (",
                      plan.describeLayout(param->dims, layout), ") gives the local dims ",
                      formatDims(local)));
      }
    }
  };
  check(k.forward, "forward");
  check(k.forwardBackward, "forward_backward");
  check(k.optimizerStep, "optimizer_step");
  check(k.logits, "logits");
}

/// The step's data inputs as each of their readers lists them: plan.json's `inputs`, the
/// Input buffers of each x86 entry function that takes them (forward, forward_backward), in
/// order, and those of each pipeline chunk function (`chunk`: a chunk takes the data inputs
/// it reads, whichever they are), each with its path in plan.json.
struct DataInputList {
  std::string path;
  std::vector<InputInfo> inputs;
  std::vector<std::string> paths;
  bool chunk = false;

  const InputInfo *find(std::string_view name) const {
    for (const InputInfo &input : inputs)
      if (input.name == name)
        return &input;
    return nullptr;
  }
};

std::vector<DataInputList> dataInputLists(const Plan &plan) {
  std::vector<DataInputList> lists(1);
  lists[0].path = "inputs";
  lists[0].inputs = plan.inputs;
  // As the kernels take them: under ZeRO-3 each data-parallel rank's part of the micro-batch
  // (what a pipeline plan's chunks, which have no entry function beside them, compare with).
  if (plan.shardsParameters())
    for (InputInfo &input : lists[0].inputs)
      for (Dim &d : input.dims)
        if (d.name == "batch")
          d.size /= plan.mesh[*plan.dataParallelAxis].size;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    lists[0].paths.push_back(element("inputs", i));
  if (!plan.x86Kernels)
    return lists;
  const KernelsInfo &k = *plan.x86Kernels;
  const std::string functionsPath = member("kernels.x86_64", "functions");
  auto add = [&](const KernelFunction &fn, const std::string &name, bool chunk) {
    DataInputList &list = lists.emplace_back();
    list.path = member(member(functionsPath, name), "inputs");
    list.chunk = chunk;
    for (size_t i = 0; i < fn.inputs.size(); ++i)
      if (const KernelBuffer &b = fn.inputs[i]; b.kind == BufferKind::Input) {
        list.inputs.push_back(InputInfo{b.name, b.dtype, b.dims});
        list.paths.push_back(element(list.path, i));
      }
  };
  for (auto [fn, name] : {std::pair{&k.forward, "forward"}, {&k.forwardBackward, "forward_backward"}})
    if (*fn)
      add(**fn, name, false);
  for (size_t c = 0; c < k.chunks.size(); ++c) {
    const ChunkKernels &ck = k.chunks[c];
    for (auto [fn, role] : {std::pair{&ck.forward, "forward"},
                            {&ck.backward, "backward"},
                            {&ck.backwardInput, "backward_input"},
                            {&ck.backwardWeight, "backward_weight"}})
      if (*fn)
        add(**fn, concat("chunk", c, '.', role), true);
  }
  return lists;
}

/// A pipeline chunk function's data inputs (docs/plan-format.md, "Kernels"): each is one of
/// the step's, named as the entry functions name it, with its dtype and dims there
/// (forward_backward's or forward's; a pipeline plan has neither, and then plan.json's
/// `inputs`, under ZeRO-3 the kernels' part of the micro-batch); a function takes each at
/// most once.
void checkChunkDataInputs(const std::vector<DataInputList> &lists) {
  // The entry functions' lists come before the chunks', forward_backward's last.
  const DataInputList *step = &lists[0];
  for (const DataInputList &list : lists)
    if (!list.chunk)
      step = &list;
  for (const DataInputList &list : lists) {
    if (!list.chunk)
      continue;
    for (size_t i = 0; i < list.inputs.size(); ++i) {
      const InputInfo &input = list.inputs[i];
      const InputInfo *given = step->find(input.name);
      if (!given)
        fail(member(list.paths[i], "name"),
             concat(quoteForMessage(input.name), " is not one of the step's data inputs (",
                    step->path, ")"));
      if (list.find(input.name) != &input)
        fail(member(list.paths[i], "name"),
             concat(quoteForMessage(input.name), " is taken twice"));
      if (input.dtype != given->dtype || input.dims != given->dims)
        fail(list.paths[i], concat(planDTypeName(input.dtype), " ", formatDims(input.dims),
                                   ", but the step's ", quoteForMessage(input.name), " is ",
                                   planDTypeName(given->dtype), " ", formatDims(given->dims),
                                   " (", step->path, ")"));
    }
  }
}

/// Megatron's --eod-mask-loss (`train.eod_mask_loss`): the entry functions take the loss
/// mask, f32 with the labels' dims, after the tokens and the labels; without it no function
/// takes one. Under pipeline parallelism every chunk function taking the labels takes the
/// mask (checkChunkDataInputs checked its dtype and dims).
void checkLossMask(const Plan &plan, const std::vector<DataInputList> &lists) {
  for (const DataInputList &list : lists) {
    if (list.chunk) {
      if (plan.eodMaskLoss && list.find("labels") && !list.find(kLossMaskInput))
        fail(list.path, "takes the labels but no loss mask, but train.eod_mask_loss is true");
      continue;
    }
    bool masked = false;
    for (size_t i = 0; i < list.inputs.size(); ++i) {
      const InputInfo &input = list.inputs[i];
      if (input.name != kLossMaskInput)
        continue;
      masked = true;
      if (i < 2)
        fail(member(list.paths[i], "name"), "the loss mask comes after the tokens and the labels");
      if (input.dtype != PlanDType::F32)
        fail(member(list.paths[i], "dtype"), "the loss mask must be f32");
      if (input.dims != list.inputs[1].dims)
        fail(member(list.paths[i], "dims"), concat(formatDims(input.dims),
                                                   " are not the labels' dims ",
                                                   formatDims(list.inputs[1].dims)));
    }
    if (masked != plan.eodMaskLoss)
      fail(list.path, plan.eodMaskLoss ? "takes no loss mask, but train.eod_mask_loss is true"
                                       : "takes a loss mask, but train.eod_mask_loss is not true");
  }
}

/// Megatron's --reset-position-ids and --reset-attention-mask (`train.reset_position_ids`,
/// `train.reset_attention_mask`): the entry functions take the position ids, i32 with the
/// tokens' dims, as their last data input (after the tokens, the labels and the loss mask);
/// without either no function takes them. Under pipeline parallelism some chunk function
/// takes them (the one reading the position table; with rope or the document mask, every
/// chunk's layers; checkChunkDataInputs checked their dtype and dims).
void checkPositionIds(const Plan &plan, const std::vector<DataInputList> &lists) {
  // The setting that makes the step take the ids, for the messages.
  const char *setting =
      plan.resetPositionIds || !plan.resetAttentionMask ? "reset_position_ids"
                                                        : "reset_attention_mask";
  bool chunks = false, chunkTakes = false;
  for (const DataInputList &list : lists) {
    if (list.chunk) {
      chunks = true;
      chunkTakes = chunkTakes || list.find(kPositionIdsInput);
      continue;
    }
    bool takes = false;
    for (size_t i = 0; i < list.inputs.size(); ++i) {
      const InputInfo &input = list.inputs[i];
      if (input.name != kPositionIdsInput)
        continue;
      takes = true;
      if (i == 0 || i + 1 != list.inputs.size())
        fail(member(list.paths[i], "name"), "the position ids are the last of the data inputs, "
                                            "after the tokens");
      if (input.dtype != PlanDType::I32)
        fail(member(list.paths[i], "dtype"), "the position ids must be i32");
      if (input.dims != list.inputs[0].dims)
        fail(member(list.paths[i], "dims"), concat(formatDims(input.dims),
                                                   " are not the tokens' dims ",
                                                   formatDims(list.inputs[0].dims)));
    }
    if (takes != plan.takesPositionIds())
      fail(list.path, plan.takesPositionIds()
                          ? concat("takes no position ids, but train.", setting, " is true")
                          : std::string("takes position ids, but neither "
                                        "train.reset_position_ids nor "
                                        "train.reset_attention_mask is true"));
  }
  if (chunks && plan.resetPositionIds && !chunkTakes)
    fail(member("kernels.x86_64", "functions"),
         "no chunk function takes the position ids, but train.reset_position_ids is true");
}

/// `logits` (docs/plan-format.md): the token ids [batch, seq] then parameters in, and one
/// `logits` buffer out, f32 with the dims of the tokens (whole) then the vocabulary (its
/// size in `dims`, padded where the compiler padded it), what generation reads.
void checkLogitsFunction(const Plan &plan, const std::string &path) {
  const KernelFunction &fn = *plan.x86Kernels->logits;
  auto bufferPath = [&](std::string_view side, size_t i) {
    return element(member(path, side), i);
  };
  if (plan.vocabulary.empty())
    fail(path, "the plan has no `vocabulary`, which the logits function's result needs");
  if (fn.inputs.empty() || fn.inputs[0].kind != BufferKind::Input ||
      fn.inputs[0].dtype != PlanDType::I32 || fn.inputs[0].dims.size() != 2)
    fail(member(path, "inputs"), "must start with the token ids (an i32 input [batch, seq])");
  for (size_t i = 1; i < fn.inputs.size(); ++i)
    if (fn.inputs[i].kind != BufferKind::Param)
      fail(member(bufferPath("inputs", i), "kind"),
           concat("is ", quoteForMessage(bufferKindName(fn.inputs[i].kind)),
                  ", but the logits function takes only the token ids and parameters"));
  if (fn.outputs.size() != 1)
    fail(member(path, "outputs"), concat("has ", fn.outputs.size(),
                                         " buffers, but the logits function returns one"));
  const KernelBuffer &out = fn.outputs[0];
  if (out.kind != BufferKind::Logits)
    fail(member(bufferPath("outputs", 0), "kind"),
         concat("is ", quoteForMessage(bufferKindName(out.kind)), ", expected \"logits\""));
  if (out.dtype != PlanDType::F32)
    fail(member(bufferPath("outputs", 0), "dtype"), "the logits must be f32");
  std::vector<Dim> expected;
  for (const Dim &d : fn.inputs[0].dims)
    expected.push_back(Dim{d.name, plan.dimSize(d.name).value_or(d.size)});
  expected.push_back(Dim{plan.vocabulary, *plan.dimSize(plan.vocabulary)});
  if (out.dims != expected)
    fail(member(bufferPath("outputs", 0), "dims"),
         concat("are ", formatDims(out.dims), ", but the logits of the token ids are ",
                formatDims(expected), " (the tokens' dims, then the vocabulary)"));
}

/// `prefill` and `decode_step` (docs/plan-format.md, mt-kv-cache): both or neither. prefill:
/// the token ids of one sequence [..., seq] then parameters in; logits, keys, values out.
/// decode_step: the token ids [..., seq=1], the position (i32 [seq=1]), keys and values (as
/// prefill returns them), then parameters in; logits, keys, values out.
void checkCachedGeneration(const Plan &plan, const std::string &path) {
  const KernelsInfo &k = *plan.x86Kernels;
  if (!k.prefill && !k.decodeStep)
    return;
  if (!k.prefill || !k.decodeStep || !k.logits)
    fail(path, "cached generation needs `logits`, `prefill` and `decode_step` together");
  auto check = [&](const KernelFunction &fn, std::string_view name,
                   std::initializer_list<std::pair<BufferKind, std::string_view>> leading) {
    std::string fnPath = member(path, name);
    size_t i = 0;
    for (auto [kind, bufferName] : leading) {
      std::string p = element(member(fnPath, "inputs"), i);
      if (i >= fn.inputs.size() || fn.inputs[i].kind != kind || fn.inputs[i].name != bufferName)
        fail(p, concat("must be the ", bufferKindName(kind), " '", bufferName, "'"));
      ++i;
    }
    for (; i < fn.inputs.size(); ++i)
      if (fn.inputs[i].kind != BufferKind::Param)
        fail(member(element(member(fnPath, "inputs"), i), "kind"),
             concat("is ", quoteForMessage(bufferKindName(fn.inputs[i].kind)),
                    ", expected a parameter"));
    const BufferKind outputs[] = {BufferKind::Logits, BufferKind::Keys, BufferKind::Values};
    if (fn.outputs.size() != 3)
      fail(member(fnPath, "outputs"), "must be the logits, keys and values");
    for (size_t o = 0; o < 3; ++o)
      if (fn.outputs[o].kind != outputs[o] || fn.outputs[o].dtype != PlanDType::F32)
        fail(element(member(fnPath, "outputs"), o),
             concat("must be the f32 ", bufferKindName(outputs[o])));
    const KernelBuffer &tokens = fn.inputs[0];
    if (tokens.dtype != PlanDType::I32 || tokens.dims.empty())
      fail(element(member(fnPath, "inputs"), 0), "the token ids must be i32 [..., seq]");
    std::vector<Dim> expected = tokens.dims;
    expected.push_back(Dim{plan.vocabulary, *plan.dimSize(plan.vocabulary)});
    if (fn.outputs[0].dims != expected)
      fail(member(element(member(fnPath, "outputs"), 0), "dims"),
           concat("are ", formatDims(fn.outputs[0].dims), ", expected ", formatDims(expected)));
  };
  check(*k.prefill, "prefill", {{BufferKind::Input, "tokens"}});
  check(*k.decodeStep, "decode_step",
        {{BufferKind::Input, "tokens"}, {BufferKind::Input, "position"}, {BufferKind::Keys, "keys"},
         {BufferKind::Values, "values"}});
  const KernelFunction &prefill = *k.prefill, &step = *k.decodeStep;
  for (size_t o = 1; o < 3; ++o)
    if (step.inputs[o + 1].dims != prefill.outputs[o].dims ||
        step.outputs[o].dims != prefill.outputs[o].dims)
      fail(member(path, "decode_step"),
           concat("its ", bufferKindName(prefill.outputs[o].kind), " are not prefill's ",
                  formatDims(prefill.outputs[o].dims)));
  if (step.inputs[1].dtype != PlanDType::I32 || step.inputs[1].dims.size() != 1 ||
      step.inputs[1].dims[0].size != 1 || step.inputs[0].dims.back().size != 1)
    fail(member(path, "decode_step"), "must take one token at one position");
}

Plan readPlan(const JsonValue &root) {
  const std::string top;
  if (!root.isObject())
    fail(top, concat("expected an object at the top level, found ", kindWithArticle(root)));
  const JsonObject &o = *root.getObject();
  Plan plan;

  const std::string &format = asString(get(o, top, "format"), "format");
  if (format != kPlanFormatName)
    fail("format", concat("expected '", kPlanFormatName, "', found ", quoteForMessage(format),
                          " (not an mtc plan)"));
  int64_t version = asInt(get(o, top, "version"), "version", 0, "a non-negative integer");
  if (version != kPlanFormatVersion)
    fail("version", concat("unsupported plan version ", version, " (this mtrun reads version ",
                           kPlanFormatVersion, ")"));
  plan.version = kPlanFormatVersion;
  plan.compiler = asString(get(o, top, "compiler"), "compiler");
  plan.model = asName(get(o, top, "model"), "model");

  const JsonObject &source = asObject(get(o, top, "source"), "source");
  plan.sourcePath = asString(get(source, "source", "path"), "source.path");
  plan.sourceSha256 = asString(get(source, "source", "sha256"), "source.sha256");

  plan.seed = static_cast<uint64_t>(
      asInt(get(o, top, "seed"), "seed", 0, "a non-negative integer (the random seed)"));
  plan.dims = readModelDims(get(o, top, "dims"), "dims");
  if (const JsonValue *vocabulary = o.find("vocabulary")) {
    plan.vocabulary = asName(*vocabulary, "vocabulary");
    std::optional<int64_t> padded = plan.dimSize(plan.vocabulary);
    if (!padded)
      fail("vocabulary", concat(quoteForMessage(plan.vocabulary), " is not a dimension of the model"));
    // Plans written before padding existed have no `vocabulary_size`: the dimension's size.
    plan.vocabularyRealSize = *padded;
    if (const JsonValue *size = o.find("vocabulary_size")) {
      plan.vocabularyRealSize = asInt(*size, "vocabulary_size", 1,
                                      "a positive integer (the vocabulary's real size)");
      if (plan.vocabularyRealSize > *padded)
        fail("vocabulary_size", concat(plan.vocabularyRealSize, " exceeds the size ", *padded,
                                       " of dimension ", quoteForMessage(plan.vocabulary)));
    }
  }

  plan.train = get(o, top, "train");
  if (!plan.train.isObject())
    typeError("train", "an object", plan.train);
  if (const JsonValue *steps = plan.train.getObject()->find("steps")) {
    std::optional<int64_t> n = steps->getInt();
    if (!n || *n < 0 || *n > kMaxTrainSteps)
      fail(top, concat("train.steps is ", steps->serialize(), ", not a step count from 0 to ",
                       kMaxTrainSteps));
    plan.steps = *n;
  }
  if (const JsonValue *dropout = plan.train.getObject()->find("dropout"))
    plan.dropout = asBool(*dropout, member("train", "dropout"));
  if (const JsonValue *mask = plan.train.getObject()->find("eod_mask_loss"))
    plan.eodMaskLoss = asBool(*mask, member("train", "eod_mask_loss"));
  if (const JsonValue *reset = plan.train.getObject()->find("reset_position_ids"))
    plan.resetPositionIds = asBool(*reset, member("train", "reset_position_ids"));
  if (const JsonValue *reset = plan.train.getObject()->find("reset_attention_mask"))
    plan.resetAttentionMask = asBool(*reset, member("train", "reset_attention_mask"));
  if (const JsonValue *precision = plan.train.getObject()->find("precision")) {
    const std::string &name = asString(*precision, member("train", "precision"));
    if (name != "fp32" && name != "bf16" && name != "fp16")
      fail(member("train", "precision"),
           concat("unknown precision ", quoteForMessage(name), " (expected fp32, bf16 or fp16)"));
    plan.lossScaling = name == "fp16";
  }
  plan.parallel = get(o, top, "parallel");
  if (!plan.parallel.isObject())
    typeError("parallel", "an object", plan.parallel);

  const JsonArray &inputs = asArray(get(o, top, "inputs"), "inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    plan.inputs.push_back(readInput(inputs[i], element("inputs", i), plan.dims));

  if (const JsonValue *mesh = o.find("mesh"))
    readMesh(*mesh, "mesh", plan);

  const JsonArray &params = asArray(get(o, top, "params"), "params");
  for (size_t i = 0; i < params.size(); ++i) {
    std::string path = element("params", i);
    ParamInfo p = readParam(params[i], path, i, plan.dims, plan.mesh, plan.dataParallelAxis,
                              plan.zeroStage);
    for (size_t j = 0; j < plan.params.size(); ++j)
      if (plan.params[j].name == p.name)
        fail(member(path, "name"),
             concat("duplicate parameter name '", p.name, "' (also params[", j, "])"));
    if (plan.vocabularyPadded())
      for (size_t d = 0; d < p.dims.size(); ++d)
        if (p.dims[d].name == plan.vocabulary)
          p.padding = ParamInfo::Padding{d, plan.vocabularyRealSize};
    plan.params.push_back(std::move(p));
  }

  const JsonArray &states = asArray(get(o, top, "states"), "states");
  for (size_t i = 0; i < states.size(); ++i) {
    std::string path = element("states", i);
    StateInfo s = readState(states[i], path, plan.params, plan.dims);
    for (size_t j = 0; j < plan.states.size(); ++j)
      if (plan.states[j].name == s.name)
        fail(member(path, "name"),
             concat("duplicate state name '", s.name, "' (also states[", j, "])"));
    plan.states.push_back(std::move(s));
  }

  const JsonArray &functions = asArray(get(o, top, "functions"), "functions");
  for (size_t i = 0; i < functions.size(); ++i)
    plan.functions.push_back(asName(functions[i], element("functions", i)));

  plan.predictions = readPredictions(get(o, top, "predictions"), "predictions");

  if (const JsonValue *pipeline = o.find("pipeline")) {
    Expected<PipelinePlan> read = parsePipeline(*pipeline);
    if (!read)
      fail(top, read.error().message());
    plan.pipeline = std::move(*read);
  }
  if (plan.pipeline)
    for (const PipelinePlan::SharedParam &shared : plan.pipeline->sharedParams)
      if (!plan.findParam(shared.name))
        fail(member(member("pipeline", "shared_params"), shared.name),
             concat("no parameter named '", shared.name, "' (a shared parameter is one of params)"));
  if (const JsonValue *kernels = o.find("kernels")) {
    const JsonObject &targets = asObject(*kernels, "kernels");
    // Under ZeRO-3 the kernels' data is each data-parallel rank's part of the micro-batch.
    std::vector<Dim> dataDims = plan.dims;
    if (plan.zeroStage == 3)
      for (Dim &d : dataDims)
        if (d.name == "batch") {
          int64_t dp = plan.mesh[*plan.dataParallelAxis].size;
          if (d.size % dp != 0)
            fail("dims.batch", concat(d.size, " sequences cannot be split over the ", dp,
                                      " data-parallel ranks of ZeRO-3"));
          d.size /= dp;
        }
    if (const JsonValue *x86 = targets.find("x86_64"))
      plan.x86Kernels =
          readKernels(*x86, "kernels.x86_64", dataDims, !plan.mesh.empty(), plan.pipeline);
    if (const JsonValue *cuda = targets.find("cuda"))
      plan.cudaKernels = readCudaKernels(*cuda, "kernels.cuda", dataDims, !plan.mesh.empty(),
                                         plan.pipeline);
  }
  if (plan.x86Kernels && !plan.mesh.empty())
    checkLocalDims(plan, "kernels.x86_64");
  if (plan.x86Kernels && plan.x86Kernels->logits)
    checkLogitsFunction(plan, "kernels.x86_64.functions.logits");
  if (plan.x86Kernels)
    checkCachedGeneration(plan, "kernels.x86_64.functions");
  std::vector<DataInputList> lists = dataInputLists(plan);
  checkChunkDataInputs(lists);
  checkLossMask(plan, lists);
  checkPositionIds(plan, lists);
  return plan;
}

} // namespace

Expected<Plan> parsePlanJson(std::string_view text, std::string_view where) {
  Expected<JsonValue> root = parseJson(text);
  if (!root)
    return root.takeError().withContext(where);
  try {
    return readPlan(*root);
  } catch (const jsonread::JsonReadError &e) {
    return makeError(where, ": ", e.message);
  } catch (const std::bad_alloc &) {
    return makeError(where, ": out of memory");
  }
}

Expected<Plan> loadPlan(const std::filesystem::path &dir) {
  std::string where = displayName(dir);
  std::error_code ec;
  std::filesystem::file_status status = std::filesystem::status(dir, ec);
  if (ec && status.type() != std::filesystem::file_type::not_found)
    return makeError(where, ": cannot access the plan: ", ec);
  if (status.type() == std::filesystem::file_type::not_found)
    return makeError(where, ": no such plan directory");
  if (status.type() != std::filesystem::file_type::directory)
    return makeError(where, ": not a plan directory (a plan is a directory holding MANIFEST, "
                            "plan.json and program.mlir)");

  Expected<std::string> manifestText = readManifest(dir, where);
  if (!manifestText)
    return manifestText.takeError();
  auto manifest = parseManifest(*manifestText, where);
  if (!manifest)
    return manifest.takeError();

  std::string planJson;
  std::string planSha256;
  for (const ManifestEntry &entry : manifest->second) {
    bool isPlanJson = entry.name == kPlanJsonName;
    if (Error err = verifyFile(dir, where, entry, isPlanJson ? &planJson : nullptr); !err.ok())
      return err;
    if (isPlanJson)
      planSha256 = entry.sha256;
  }

  Expected<Plan> plan = parsePlanJson(planJson, concat(where, '/', kPlanJsonName));
  if (!plan)
    return plan.takeError();
  std::vector<const std::string *> kernelFiles;
  if (plan->x86Kernels)
    kernelFiles.push_back(&plan->x86Kernels->file);
  if (plan->cudaKernels)
    for (const CudaBinary &binary : plan->cudaKernels->binaries) {
      kernelFiles.push_back(&binary.ptxFile);
      if (binary.cubinFile)
        kernelFiles.push_back(&*binary.cubinFile);
    }
  if (plan->cudaKernels && plan->cudaKernels->host)
    kernelFiles.push_back(&plan->cudaKernels->host->file);
  for (const std::string *file : kernelFiles) {
    bool listed = false;
    for (const ManifestEntry &entry : manifest->second)
      listed = listed || entry.name == *file;
    if (!listed)
      return makeError(where, ": plan.json names the kernel file '", *file,
                       "', which MANIFEST does not list");
  }
  plan->dir = dir;
  plan->version = manifest->first;
  plan->files = std::move(manifest->second);
  plan->planSha256 = std::move(planSha256);
  return plan;
}

} // namespace mtc::rt
