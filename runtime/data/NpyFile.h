//===- NpyFile.h - NumPy's .npy array files ----------------------*- C++ -*-===//
//
// The .npy format of numpy.save / numpy.load (numpy's `format.py`, "NEP 1"): the magic
// "\x93NUMPY", a major and a minor version byte, the header's length (little-endian u16 in
// version 1.0, u32 in 2.0 and 3.0), the header, and the array's elements. The header is a
// Python dict literal `{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }` padded
// with spaces and ended by a newline so that the data starts at a multiple of 64 bytes.
//
// What the runtime writes: version 1.0, little-endian elements in C order, of the dtypes
// below (`mtrun generate --dump-logits` writes float32 logits, the index cache of
// GptIndexCache.h int32, uint32 and int64 indices, BlendIndexCache.h int16 and int64 ones); numpy.load reads them. What it reads:
// versions 1.0 to 3.0 of those dtypes in C order (a 1-D array in Fortran order is the same
// bytes and accepted), nothing after the data. Anything else is an error naming the file:
// another magic or version, a header that is not such a dict, another dtype (big-endian
// included), a negative or overflowing shape, a file shorter or longer than its shape says.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_NPYFILE_H
#define MTC_RUNTIME_DATA_NPYFILE_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

enum class NpyDType : uint8_t { I32, U32, I64, F32, I16 };

/// numpy's names: "int32", "uint32", "int64", "float32", "int16".
std::string_view npyDTypeName(NpyDType dtype);
/// Bytes per element.
size_t npyDTypeSize(NpyDType dtype);

/// The bytes of a version 1.0 .npy file before the elements of an array of `dtype` and
/// `shape` (C order); `shape` must be non-negative.
std::string npyHeader(NpyDType dtype, std::span<const int64_t> shape);

/// Writes the array atomically (TemporaryFiles.h): the header, then `data`, which holds its
/// elements little-endian in C order (its size must be the shape's elements times the dtype's
/// size).
Error writeNpyFile(const std::filesystem::path &path, NpyDType dtype,
                   std::span<const int64_t> shape, std::string_view data);

/// An array read from a .npy file: its elements' bytes, little-endian, in C order.
class NpyArray {
public:
  NpyDType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  /// The number of elements (the product of the shape).
  int64_t size() const { return size_; }
  /// The elements' bytes.
  std::string_view data() const { return std::string_view(bytes_).substr(dataOffset_); }
  /// Element `i` of an integer array as int64 (i in [0, size)).
  int64_t integerAt(int64_t i) const;
  /// Calls `f(i, value)` for every element of an integer array in order, the value as int64
  /// (one dtype dispatch for the whole array); stops at the first `f` that returns false.
  template <class F> void forEachInteger(F &&f) const;

private:
  friend Expected<NpyArray> parseNpy(std::string bytes, std::string_view name);
  NpyDType dtype_ = NpyDType::I64;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::string bytes_; // the whole file
  size_t dataOffset_ = 0;
};

template <class F> void NpyArray::forEachInteger(F &&f) const {
  auto each = [&](auto sample) {
    using T = decltype(sample);
    const char *p = bytes_.data() + dataOffset_;
    for (int64_t i = 0; i < size_; ++i, p += sizeof(T)) {
      T v;
      std::memcpy(&v, p, sizeof v);
      if (!f(i, int64_t(v)))
        return;
    }
  };
  switch (dtype_) {
  case NpyDType::I32:
    return each(int32_t());
  case NpyDType::U32:
    return each(uint32_t());
  case NpyDType::I64:
    return each(int64_t());
  case NpyDType::I16:
    return each(int16_t());
  case NpyDType::F32:
    return;
  }
}

/// The array of a .npy file's bytes `bytes`, named `name` in errors.
Expected<NpyArray> parseNpy(std::string bytes, std::string_view name);

/// Reads the regular file `path` whole (RegularFile.h: a FIFO or a directory is an error, a
/// file that shrinks or grows while read too) and parses it.
Expected<NpyArray> readNpyFile(const std::filesystem::path &path);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_NPYFILE_H
