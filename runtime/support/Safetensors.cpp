//===- Safetensors.cpp - Read and write .safetensors files ----------------===//

#include "runtime/support/Safetensors.h"

#include "runtime/support/Json.h"
#include "runtime/support/RegularFile.h"
#include "runtime/support/TemporaryFiles.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <fcntl.h>
#include <limits>
#include <unistd.h>

namespace mtc::rt {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 13> kDTypes = {{
    {DType::BOOL, "BOOL", 1},
    {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},
    {DType::I16, "I16", 2},
    {DType::U16, "U16", 2},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},
    {DType::U32, "U32", 4},
    {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},
    {DType::I64, "I64", 8},
    {DType::U64, "U64", 8},
}};

/// The reference rejects headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

/// Bytes of a tensor of `dtype` and `shape`, or nullopt on a negative dimension or overflow.
std::optional<uint64_t> byteSize(DType dtype, std::span<const int64_t> shape) {
  uint64_t n = dtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return std::nullopt;
  }
  return n;
}

std::string shapeString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += concat(i ? ", " : "", shape[i]);
  return s + "]";
}

/// The header (padded) and the tensors in file order, after validating the inputs.
struct Layout {
  std::string header;
  std::vector<const TensorRef *> order;
};

Expected<Layout> layoutFile(std::span<const TensorRef> tensors,
                            const SafetensorsMetadata &metadata) {
  Layout layout;
  for (const TensorRef &t : tensors) {
    if (t.name.empty())
      return makeError("safetensors: tensor with an empty name");
    if (t.name == "__metadata__")
      return makeError("safetensors: '__metadata__' is reserved and cannot name a tensor");
    std::optional<uint64_t> bytes = byteSize(t.dtype, t.shape);
    if (!bytes)
      return makeError("safetensors: tensor '", t.name, "' has an invalid shape ",
                       shapeString(t.shape));
    if (*bytes != t.data.size())
      return makeError("safetensors: tensor '", t.name, "' of dtype ", dtypeName(t.dtype),
                       " and shape ", shapeString(t.shape), " needs ", *bytes,
                       " bytes but was given ", t.data.size());
    layout.order.push_back(&t);
  }
  // The reference's order: dtype descending (wider types first), then name.
  std::sort(layout.order.begin(), layout.order.end(), [](const TensorRef *a, const TensorRef *b) {
    if (a->dtype != b->dtype)
      return a->dtype > b->dtype;
    return a->name < b->name;
  });

  JsonObject header;
  if (!metadata.empty()) {
    JsonObject meta;
    for (const auto &[key, value] : metadata)
      if (!meta.insert(key, value))
        return makeError("safetensors: duplicate metadata key '", key, "'");
    header.insert("__metadata__", std::move(meta));
  }
  uint64_t offset = 0;
  for (const TensorRef *t : layout.order) {
    JsonArray shape;
    for (int64_t d : t->shape)
      shape.emplace_back(d);
    uint64_t end = offset + t->data.size();
    JsonObject info{{"dtype", dtypeName(t->dtype)},
                    {"shape", std::move(shape)},
                    {"data_offsets", JsonArray{JsonValue(offset), JsonValue(end)}}};
    if (!header.insert(t->name, std::move(info)))
      return makeError("safetensors: duplicate tensor name '", t->name, "'");
    offset = end;
  }
  layout.header = JsonValue(std::move(header)).serialize();
  layout.header.append((8 - layout.header.size() % 8) % 8, ' ');
  return layout;
}

std::array<char, 8> encodeU64(uint64_t v) {
  std::array<char, 8> b;
  for (int i = 0; i < 8; ++i)
    b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return b;
}

uint64_t decodeU64(const char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

Expected<std::string> readWholeFile(const std::filesystem::path &path) {
  Expected<RegularFile> file = openInputFile(path);
  if (!file)
    return file.takeError();
  std::string bytes;
  bytes.resize(static_cast<size_t>(file->size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(file->handle.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return makeError("cannot read ", path, ": ", errnoCode());
    if (n == 0)
      break; // shrank while reading: validation reports the truncation
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

Expected<std::vector<int64_t>> parseShape(const JsonValue &v, std::string_view name) {
  const JsonArray *a = v.getArray();
  if (!a)
    return makeError("tensor '", name, "': 'shape' must be an array of integers");
  std::vector<int64_t> shape;
  for (const JsonValue &d : *a) {
    if (!d.isInt() || *d.getInt() < 0)
      return makeError("tensor '", name, "': 'shape' must hold non-negative integers, got ",
                       d.serialize());
    shape.push_back(*d.getInt());
  }
  return shape;
}

} // namespace

//===----------------------------------------------------------------------===//
// DTypes and conversions
//===----------------------------------------------------------------------===//

std::string_view dtypeName(DType dtype) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == dtype)
      return i.name;
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &i : kDTypes)
    if (i.name == name)
      return i.dtype;
  return std::nullopt;
}

size_t dtypeSize(DType dtype) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == dtype)
      return i.size;
  return 0;
}

BFloat16 floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
    return BFloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)}; // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);                               // round to nearest even
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    u = sign | ((112 - e) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

Expected<std::string> serializeSafetensors(std::span<const TensorRef> tensors,
                                           const SafetensorsMetadata &metadata) {
  Expected<Layout> layout = layoutFile(tensors, metadata);
  if (!layout)
    return layout.takeError();
  std::string out;
  auto len = encodeU64(layout->header.size());
  out.append(len.data(), len.size());
  out.append(layout->header);
  for (const TensorRef *t : layout->order)
    out.append(reinterpret_cast<const char *>(t->data.data()), t->data.size());
  return out;
}

Error writeSafetensors(const std::filesystem::path &path, std::span<const TensorRef> tensors,
                       const SafetensorsMetadata &metadata) {
  Expected<Layout> layout = layoutFile(tensors, metadata);
  if (!layout)
    return layout.takeError().withContext(path.string());
  return writeAtomically(path, [&](int fd, const std::filesystem::path &tmp) -> Error {
    auto len = encodeU64(layout->header.size());
    if (Error e = writeAll(fd, len.data(), len.size(), tmp); !e.ok())
      return e;
    if (Error e = writeAll(fd, layout->header.data(), layout->header.size(), tmp); !e.ok())
      return e;
    for (const TensorRef *t : layout->order)
      if (Error e = writeAll(fd, t->data.data(), t->data.size(), tmp); !e.ok())
        return e;
    return Error::success();
  });
}

Error writeFileAtomically(const std::filesystem::path &path, std::string_view bytes) {
  return writeAtomically(path, [&](int fd, const std::filesystem::path &tmp) {
    return writeAll(fd, bytes.data(), bytes.size(), tmp);
  });
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

Expected<SafetensorsFile> SafetensorsFile::parse(std::string bytes) {
  auto fail = [](auto &&...pieces) { return makeError("safetensors: ", pieces...); };
  if (bytes.size() < 8)
    return fail("file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  uint64_t headerSize = decodeU64(bytes.data());
  if (headerSize > bytes.size() - 8)
    return fail("header length ", headerSize, " exceeds the ", bytes.size() - 8,
                " bytes after the length field (truncated file?)");
  if (headerSize > kMaxHeaderSize)
    return fail("header length ", headerSize, " exceeds the limit of ", kMaxHeaderSize);
  Expected<JsonValue> header = parseJson(std::string_view(bytes).substr(8, headerSize));
  if (!header)
    return fail("bad header: ", header.error().message());
  const JsonObject *root = header->getObject();
  if (!root)
    return fail("header is a JSON ", jsonKindName(header->kind()), ", not an object");

  SafetensorsFile file;
  file.dataStart_ = 8 + headerSize;
  uint64_t dataSize = bytes.size() - file.dataStart_;
  for (const auto &[name, value] : *root) {
    if (name == "__metadata__") {
      const JsonObject *meta = value.getObject();
      if (!meta)
        return fail("'__metadata__' must be an object of strings");
      for (const auto &[key, v] : *meta) {
        if (!v.isString())
          return fail("metadata value of '", key, "' is not a string (", jsonKindName(v.kind()),
                      ")");
        file.metadata_.emplace_back(key, *v.getString());
      }
      continue;
    }
    const JsonObject *info = value.getObject();
    if (!info)
      return fail("tensor '", name, "' must be an object");
    for (const auto &member : *info)
      if (member.first != "dtype" && member.first != "shape" && member.first != "data_offsets")
        return fail("tensor '", name, "' has an unknown field '", member.first, "'");
    const JsonValue *dtypeV = info->find("dtype");
    const JsonValue *shapeV = info->find("shape");
    const JsonValue *offsetsV = info->find("data_offsets");
    if (!dtypeV || !shapeV || !offsetsV)
      return fail("tensor '", name, "' needs 'dtype', 'shape' and 'data_offsets'");
    Tensor t;
    t.name = name;
    if (!dtypeV->isString())
      return fail("tensor '", name, "': 'dtype' must be a string");
    std::optional<DType> dtype = parseDType(*dtypeV->getString());
    if (!dtype)
      return fail("tensor '", name, "' has an unsupported dtype '", *dtypeV->getString(), "'");
    t.dtype = *dtype;
    Expected<std::vector<int64_t>> shape = parseShape(*shapeV, name);
    if (!shape)
      return shape.takeError().withContext("safetensors");
    t.shape = std::move(*shape);
    const JsonArray *offsets = offsetsV->getArray();
    if (!offsets || offsets->size() != 2 || !(*offsets)[0].isInt() || !(*offsets)[1].isInt() ||
        *(*offsets)[0].getInt() < 0 || *(*offsets)[1].getInt() < 0)
      return fail("tensor '", name, "': 'data_offsets' must be two non-negative integers");
    t.begin = static_cast<uint64_t>(*(*offsets)[0].getInt());
    t.end = static_cast<uint64_t>(*(*offsets)[1].getInt());
    if (t.begin > t.end)
      return fail("tensor '", name, "' has data_offsets [", t.begin, ", ", t.end,
                  "] that end before they begin");
    if (t.end > dataSize)
      return fail("tensor '", name, "' has data_offsets [", t.begin, ", ", t.end, "] beyond the ",
                  dataSize, " data bytes (truncated file?)");
    std::optional<uint64_t> size = byteSize(t.dtype, t.shape);
    if (!size)
      return fail("tensor '", name, "' has a shape whose size overflows");
    if (*size != t.end - t.begin)
      return fail("tensor '", name, "' of dtype ", dtypeName(t.dtype), " and shape ",
                  shapeString(t.shape), " needs ", *size, " bytes but its data_offsets [", t.begin,
                  ", ", t.end, "] span ", t.end - t.begin);
    file.tensors_.push_back(std::move(t));
  }

  // The tensors must tile [0, dataSize) exactly.
  std::vector<const Tensor *> byOffset;
  for (const Tensor &t : file.tensors_)
    byOffset.push_back(&t);
  std::sort(byOffset.begin(), byOffset.end(), [](const Tensor *a, const Tensor *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  const Tensor *previous = nullptr;
  for (const Tensor *t : byOffset) {
    if (t->begin < expected)
      return fail("tensors '", previous->name, "' and '", t->name, "' overlap");
    if (t->begin > expected)
      return fail("hole of ", t->begin - expected, " bytes in the data before tensor '", t->name,
                  "'");
    expected = t->end;
    previous = t;
  }
  if (expected != dataSize)
    return fail("the tensors cover ", expected, " data bytes but the file holds ", dataSize);

  file.bytes_ = std::move(bytes);
  return file;
}

Expected<SafetensorsFile> SafetensorsFile::read(const std::filesystem::path &path) {
  Expected<std::string> bytes = readWholeFile(path);
  if (!bytes)
    return bytes.takeError();
  Expected<SafetensorsFile> file = parse(std::move(*bytes));
  if (!file)
    return file.takeError().withContext(path.string());
  return file;
}

const SafetensorsFile::Tensor *SafetensorsFile::find(std::string_view name) const {
  for (const Tensor &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

Expected<std::vector<float>> SafetensorsFile::toFloat32(const Tensor &t) const {
  std::span<const std::byte> raw = data(t);
  const size_t n = raw.size() / dtypeSize(t.dtype);
  std::vector<float> out(n);
  const auto *p = reinterpret_cast<const char *>(raw.data());
  switch (t.dtype) {
  case DType::F32:
    std::memcpy(out.data(), p, n * 4);
    return out;
  case DType::F64:
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      // Out-of-range doubles become infinities (a plain cast would be undefined).
      if (std::isfinite(d) && std::fabs(d) > double(std::numeric_limits<float>::max()))
        out[i] = d < 0 ? -std::numeric_limits<float>::infinity()
                       : std::numeric_limits<float>::infinity();
      else
        out[i] = static_cast<float>(d);
    }
    return out;
  case DType::BF16:
    for (size_t i = 0; i < n; ++i) {
      BFloat16 b;
      std::memcpy(&b.bits, p + 2 * i, 2);
      out[i] = bf16ToFloat(b);
    }
    return out;
  case DType::F16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = f16ToFloat(h);
    }
    return out;
  default:
    return makeError("safetensors: tensor '", t.name, "' has dtype ", dtypeName(t.dtype),
                     ", not a floating-point type");
  }
}

} // namespace mtc::rt
