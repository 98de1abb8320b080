//===- NpyFile.cpp - NumPy's .npy array files -----------------------------===//

#include "runtime/data/NpyFile.h"

#include "runtime/support/RegularFile.h"
#include "runtime/support/TemporaryFiles.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <sys/stat.h>

namespace mtc::rt {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct DTypeInfo {
  NpyDType dtype;
  std::string_view descr, name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {NpyDType::I32, "<i4", "int32", 4},
    {NpyDType::U32, "<u4", "uint32", 4},
    {NpyDType::I64, "<i8", "int64", 8},
    {NpyDType::F32, "<f4", "float32", 4},
    {NpyDType::I16, "<i2", "int16", 2},
};

const DTypeInfo &info(NpyDType dtype) { return kDTypes[size_t(dtype)]; }

/// A cursor over the header's dict literal.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool consumeWord(std::string_view word) {
    skipSpace();
    if (text_.substr(pos_).starts_with(word)) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  bool atEnd() {
    skipSpace();
    return pos_ == text_.size();
  }
  /// A string literal in single or double quotes (no escapes: numpy's keys and dtypes have
  /// none).
  std::optional<std::string_view> string() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      return std::nullopt;
    const char quote = text_[pos_];
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos)
      return std::nullopt;
    std::string_view s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }
  /// A non-negative integer (Python 2's numpy wrote a trailing L).
  std::optional<int64_t> integer() {
    skipSpace();
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
    if (ec != std::errc() || end == text_.data() + pos_ || value < 0)
      return std::nullopt;
    pos_ = size_t(end - text_.data());
    if (pos_ < text_.size() && text_[pos_] == 'L')
      ++pos_;
    return value;
  }
  /// A tuple of integers: (), (n,), (n, m), ...
  std::optional<std::vector<int64_t>> shape() {
    if (!consume('('))
      return std::nullopt;
    std::vector<int64_t> dims;
    if (consume(')'))
      return dims;
    for (;;) {
      std::optional<int64_t> n = integer();
      if (!n)
        return std::nullopt;
      dims.push_back(*n);
      const bool comma = consume(',');
      if (consume(')'))
        // Python's (n) is n, not a tuple.
        return comma || dims.size() > 1 ? std::optional(dims) : std::nullopt;
      if (!comma)
        return std::nullopt;
    }
  }

private:
  std::string_view text_;
  size_t pos_ = 0;
};

struct Header {
  NpyDType dtype = NpyDType::I64;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

Expected<Header> parseHeader(std::string_view text) {
  HeaderParser p(text);
  auto bad = [&](const auto &...why) {
    return makeError("its header is not numpy's dict of 'descr', 'fortran_order' and 'shape' (",
                     why..., ")");
  };
  if (!p.consume('{'))
    return bad("no '{'");
  Header header;
  bool seen[3] = {false, false, false};
  std::string_view descr;
  while (!p.consume('}')) {
    std::optional<std::string_view> key = p.string();
    if (!key)
      return bad("a key is not a string");
    if (!p.consume(':'))
      return bad("no ':' after '", *key, "'");
    int which = *key == "descr" ? 0 : *key == "fortran_order" ? 1 : *key == "shape" ? 2 : -1;
    if (which < 0)
      return bad("an unknown key '", *key, "'");
    if (seen[which])
      return bad("'", *key, "' twice");
    seen[which] = true;
    if (which == 0) {
      std::optional<std::string_view> value = p.string();
      if (!value)
        return bad("'descr' is not a string");
      descr = *value;
    } else if (which == 1) {
      if (p.consumeWord("True"))
        header.fortranOrder = true;
      else if (!p.consumeWord("False"))
        return bad("'fortran_order' is neither True nor False");
    } else {
      std::optional<std::vector<int64_t>> shape = p.shape();
      if (!shape)
        return bad("'shape' is not a tuple of non-negative integers");
      header.shape = std::move(*shape);
    }
    if (!p.consume(',')) {
      if (!p.consume('}'))
        return bad("no ',' or '}' after '", *key, "'");
      break;
    }
  }
  if (!p.atEnd())
    return bad("text after the dict");
  if (!seen[0] || !seen[1] || !seen[2])
    return bad("'", !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape", "' is missing");
  for (const DTypeInfo &d : kDTypes)
    if (descr == d.descr) {
      header.dtype = d.dtype;
      if (header.fortranOrder && header.shape.size() > 1)
        return makeError("its ", header.shape.size(),
                         "-dimensional array is in Fortran order (only C order is read)");
      return header;
    }
  std::string known;
  for (const DTypeInfo &d : kDTypes)
    known.append(known.empty() ? "" : ", ").append(concat("'", d.descr, "' ", d.name));
  return makeError("its dtype '", descr, "' is not one of ", known,
                   " (little-endian; big-endian arrays are not read)");
}

} // namespace

std::string_view npyDTypeName(NpyDType dtype) { return info(dtype).name; }
size_t npyDTypeSize(NpyDType dtype) { return info(dtype).size; }

std::string npyHeader(NpyDType dtype, std::span<const int64_t> shape) {
  // numpy writes "()", "(5,)" and "(3, 2)".
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims.append(concat(i ? ", " : "", shape[i]));
  if (shape.size() == 1)
    dims.push_back(',');
  std::string dict = concat("{'descr': '", info(dtype).descr,
                            "', 'fortran_order': False, 'shape': (", dims, "), }");
  // Magic, version 1.0, the u16 length, then the dict padded with spaces and ended by a
  // newline so that the data starts at a multiple of 64.
  const size_t prefix = kMagic.size() + 2 + 2;
  dict.append(63 - (prefix + dict.size()) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(char(dict.size() & 0xff));
  out.push_back(char(dict.size() >> 8));
  return out + dict;
}

Error writeNpyFile(const std::filesystem::path &path, NpyDType dtype,
                   std::span<const int64_t> shape, std::string_view data) {
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return makeError("cannot write ", path, ": a negative dimension ", d);
    elements *= uint64_t(d);
  }
  if (elements * npyDTypeSize(dtype) != data.size())
    return makeError("cannot write ", path, ": ", data.size(), " bytes for ", elements,
                     " elements of ", npyDTypeName(dtype));
  const std::string header = npyHeader(dtype, shape);
  return writeAtomically(path, [&](int fd, const std::filesystem::path &tmp) {
    if (Error err = writeAll(fd, header.data(), header.size(), tmp); !err.ok())
      return err;
    return writeAll(fd, data.data(), data.size(), tmp);
  });
}

int64_t NpyArray::integerAt(int64_t i) const {
  const char *p = bytes_.data() + dataOffset_ + size_t(i) * npyDTypeSize(dtype_);
  switch (dtype_) {
  case NpyDType::I32: {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case NpyDType::U32: {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case NpyDType::I64: {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case NpyDType::I16: {
    int16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case NpyDType::F32:
    break;
  }
  return 0;
}

Expected<NpyArray> parseNpy(std::string bytes, std::string_view name) {
  auto fail = [&](const auto &...pieces) { return makeError(name, ": ", pieces...); };
  if (bytes.size() < kMagic.size() + 2 ||
      std::string_view(bytes).substr(0, kMagic.size()) != kMagic)
    return fail("not a .npy file (no \\x93NUMPY magic)");
  const uint8_t major = uint8_t(bytes[6]), minor = uint8_t(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return fail("version ", int(major), ".", int(minor),
                " of the .npy format (1.0 to 3.0 are read)");
  const size_t lengthBytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + lengthBytes)
    return fail("truncated in its header (", bytes.size(), " bytes)");
  uint64_t headerLength = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLength |= uint64_t(uint8_t(bytes[8 + i])) << (8 * i);
  const uint64_t dataOffset = 8 + lengthBytes + headerLength;
  if (dataOffset > bytes.size())
    return fail("truncated in its header (", bytes.size(), " bytes, the header ends at byte ",
                dataOffset, ")");
  Expected<Header> header =
      parseHeader(std::string_view(bytes).substr(8 + lengthBytes, size_t(headerLength)));
  if (!header)
    return header.takeError().withContext(name);
  const uint64_t itemSize = npyDTypeSize(header->dtype);
  uint64_t elements = 1;
  for (int64_t d : header->shape) {
    if (d != 0 && elements > uint64_t(std::numeric_limits<int64_t>::max()) / itemSize / uint64_t(d))
      return fail("its shape's elements overflow");
    elements *= uint64_t(d);
  }
  const uint64_t dataSize = bytes.size() - dataOffset;
  if (dataSize != elements * itemSize)
    return fail(dataSize < elements * itemSize ? "truncated: " : "", dataSize,
                " bytes of data where its shape (", header->shape.size(), "-dimensional, ",
                elements, " elements of ", npyDTypeName(header->dtype), ") needs ",
                elements * itemSize);
  NpyArray array;
  array.dtype_ = header->dtype;
  array.shape_ = std::move(header->shape);
  array.size_ = int64_t(elements);
  array.bytes_ = std::move(bytes);
  array.dataOffset_ = size_t(dataOffset);
  return array;
}

Expected<NpyArray> readNpyFile(const std::filesystem::path &path) {
  const std::string name = concat(path);
  Expected<RegularFile> file = openInputFile(path);
  if (!file)
    return file.takeError();
  std::string bytes(size_t(file->size), '\0');
  if (Error err = readExactlyAt(file->handle.get(), 0, bytes.data(), bytes.size(), name); !err.ok())
    return err;
  // A writer appending to it now would leave a prefix that may parse: refuse a file whose size
  // changed while it was read (an atomic replacement leaves the open file as it was).
  struct stat st;
  if (::fstat(file->handle.get(), &st) != 0)
    return makeError("cannot stat ", name, ": ", errnoCode());
  if (uint64_t(st.st_size) != file->size)
    return makeError(name, " changed size while it was read (", file->size, " then ", st.st_size,
                     " bytes)");
  return parseNpy(std::move(bytes), name);
}

} // namespace mtc::rt
