//===- Safetensors.h - Read and write .safetensors files --------*- C++ -*-===//
//
// The format (https://github.com/huggingface/safetensors):
//
//   u64 little-endian N | N bytes of JSON header | data
//
//   header = {"__metadata__": {"key": "string value", ...},          (optional, first)
//             "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...}
//
// Offsets are relative to the start of the data, which the tensors cover contiguously (no
// holes, no overlaps, nothing after the last one). The writer follows the reference
// implementation byte for byte: compact JSON, `__metadata__` first (omitted when empty),
// tensors ordered by dtype (wider first, in the reference's dtype order) then by name, so
// each tensor is aligned to its element size, and the header padded with spaces to a multiple
// of 8 bytes. Files are written atomically (`path.mtc-tmp.<host>.<pid>`, fsync, rename, fsync
// of the directory; stale temporaries of killed writers are removed first, TemporaryFiles.h). The reader validates everything and reports the first problem.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_SAFETENSORS_H
#define MTC_RUNTIME_SUPPORT_SAFETENSORS_H

#include "runtime/support/Error.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtc::rt {

/// Element types, in the reference implementation's order (which the writer sorts by).
enum class DType : uint8_t { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

/// "F32", "BF16", ...
std::string_view dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
size_t dtypeSize(DType dtype);

/// A bfloat16 value by its bits (so that it is distinct from uint16_t).
struct BFloat16 {
  uint16_t bits = 0;
};
/// Round to nearest even; NaN stays NaN.
BFloat16 floatToBf16(float f);
inline float bf16ToFloat(BFloat16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
/// IEEE binary16 bits to float (exact).
float f16ToFloat(uint16_t bits);

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BF16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };

/// A tensor to write: its bytes are borrowed, not copied.
struct TensorRef {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

template <class T>
TensorRef makeTensorRef(std::string name, std::vector<int64_t> shape, std::span<const T> values) {
  return TensorRef{std::move(name), DTypeOf<T>::value, std::move(shape), std::as_bytes(values)};
}
template <class T>
TensorRef makeTensorRef(std::string name, std::vector<int64_t> shape,
                        const std::vector<T> &values) {
  return makeTensorRef(std::move(name), std::move(shape), std::span<const T>(values));
}

/// String-to-string metadata, written in this order.
using SafetensorsMetadata = std::vector<std::pair<std::string, std::string>>;

/// The whole file in memory (for small files and tests).
Expected<std::string> serializeSafetensors(std::span<const TensorRef> tensors,
                                           const SafetensorsMetadata &metadata = {});

/// Writes the file atomically, streaming the tensor data (no in-memory copy).
Error writeSafetensors(const std::filesystem::path &path, std::span<const TensorRef> tensors,
                       const SafetensorsMetadata &metadata = {});

/// Writes `bytes` to `path` atomically: to temporaryPathFor(path), fsync, rename over `path`,
/// fsync of the directory. On failure `path` is untouched and the temporary removed.
Error writeFileAtomically(const std::filesystem::path &path, std::string_view bytes);

/// A validated safetensors file held in memory.
class SafetensorsFile {
public:
  struct Tensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    uint64_t begin = 0; // byte offsets relative to the data start
    uint64_t end = 0;
    uint64_t numElements() const { return dtypeSize(dtype) ? (end - begin) / dtypeSize(dtype) : 0; }
  };

  /// Validates and takes ownership of the file's bytes.
  static Expected<SafetensorsFile> parse(std::string bytes);
  /// Reads and validates a file; errors start with the path.
  static Expected<SafetensorsFile> read(const std::filesystem::path &path);

  /// Tensors in header order.
  const std::vector<Tensor> &tensors() const { return tensors_; }
  const Tensor *find(std::string_view name) const;
  const SafetensorsMetadata &metadata() const { return metadata_; }
  /// The raw little-endian bytes of a tensor of this file.
  std::span<const std::byte> data(const Tensor &t) const {
    return std::as_bytes(std::span<const char>(bytes_))
        .subspan(dataStart_ + t.begin, t.end - t.begin);
  }
  /// The tensor converted to float32 (from F32, F64, BF16 or F16).
  Expected<std::vector<float>> toFloat32(const Tensor &t) const;

private:
  std::string bytes_;
  size_t dataStart_ = 0;
  std::vector<Tensor> tensors_;
  SafetensorsMetadata metadata_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_SAFETENSORS_H
