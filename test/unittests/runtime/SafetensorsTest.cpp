//===- SafetensorsTest.cpp - safetensors writer and validating reader -----===//

#include "runtime/support/Safetensors.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <limits>

using namespace mtc::rt;

namespace {

using test::TempDir;

/// u64 LE length + header + data.
std::string makeFile(std::string_view header, std::string_view data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  out.append(header);
  out.append(data);
  return out;
}

std::string parseError(std::string bytes) {
  Expected<SafetensorsFile> f = SafetensorsFile::parse(std::move(bytes));
  EXPECT_FALSE(f) << "expected a validation error";
  return f ? std::string() : f.error().message();
}

#define EXPECT_ERROR_CONTAINS(bytes, text)                                                         \
  do {                                                                                             \
    std::string msg_ = parseError(bytes);                                                          \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: " << msg_;                          \
    EXPECT_EQ(msg_.rfind("safetensors: ", 0), 0u) << msg_;                                         \
  } while (0)

TEST(SafetensorsTest, ByteExactTinyFile) {
  std::vector<int32_t> b = {7};
  std::vector<float> a = {1.0f, -2.0f};
  std::vector<TensorRef> tensors = {makeTensorRef("b", {}, b), makeTensorRef("a", {2}, a)};
  Expected<std::string> bytes = serializeSafetensors(tensors, {{"format", "pt"}});
  ASSERT_TRUE(bytes) << bytes.error().message();
  // 138 bytes of JSON padded with 6 spaces to 144 = 0x90; F32 before I32 (wider dtypes
  // first), __metadata__ first, compact JSON, offsets relative to the data.
  const std::string expected =
      std::string("\x90\0\0\0\0\0\0\0", 8) +
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I32","shape":[],"data_offsets":[8,12]}})" +
      std::string(6, ' ') + std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x07\x00\x00\x00", 12);
  EXPECT_EQ(*bytes, expected);
  EXPECT_EQ(bytes->size(), 8u + 144u + 12u);

  // No metadata: the key is omitted. 54 bytes + 2 spaces.
  std::vector<double> x = {0.5};
  std::vector<TensorRef> one = {makeTensorRef("x", {1}, x)};
  Expected<std::string> small = serializeSafetensors(one);
  ASSERT_TRUE(small);
  EXPECT_EQ(*small, std::string("\x38\0\0\0\0\0\0\0", 8) +
                        R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}  )" +
                        std::string("\0\0\0\0\0\0\xe0\x3f", 8));
}

TEST(SafetensorsTest, WriteReadRoundTrip) {
  TempDir dir;
  std::vector<float> f32(2 * 3);
  for (size_t i = 0; i < f32.size(); ++i)
    f32[i] = 0.25f * float(i) - 1.0f;
  std::vector<double> f64 = {3.141592653589793, -1e300};
  std::vector<BFloat16> bf16 = {floatToBf16(1.5f), floatToBf16(-0.125f), floatToBf16(3.0f)};
  std::vector<int32_t> i32 = {1, -2, 2147483647, -2147483647 - 1};
  std::vector<float> scalar = {42.0f};
  std::vector<float> empty;
  std::vector<TensorRef> tensors = {
      makeTensorRef("layers.0.w", {2, 3}, f32), makeTensorRef("pi", {2}, f64),
      makeTensorRef("half", {3}, bf16),         makeTensorRef("ids", {2, 2}, i32),
      makeTensorRef("scale", {}, scalar),       makeTensorRef("nothing", {0, 5}, empty)};
  SafetensorsMetadata meta = {{"format", "mtc"}, {"step", "100"}, {"note", "ünïcode \"q\""}};
  const std::filesystem::path path = dir / "model.safetensors";
  Error err = writeSafetensors(path, tensors, meta);
  ASSERT_TRUE(err.ok()) << err.message();
  // Atomic write leaves only the file.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  // The streamed file equals the in-memory serialization.
  Expected<std::string> inMemory = serializeSafetensors(tensors, meta);
  ASSERT_TRUE(inMemory);
  EXPECT_EQ(test::readBytes(path), *inMemory);

  Expected<SafetensorsFile> file = SafetensorsFile::read(path);
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(file->metadata(), meta);
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (const TensorRef &t : tensors) {
    const SafetensorsFile::Tensor *r = file->find(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(r->dtype, t.dtype) << t.name;
    EXPECT_EQ(r->shape, t.shape) << t.name;
    std::span<const std::byte> data = file->data(*r);
    ASSERT_EQ(data.size(), t.data.size()) << t.name;
    EXPECT_TRUE(std::equal(data.begin(), data.end(), t.data.begin())) << t.name;
  }
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_EQ(file->find("scale")->numElements(), 1u);
  EXPECT_EQ(file->find("nothing")->numElements(), 0u);

  // Conversions to float32.
  Expected<std::vector<float>> w = file->toFloat32(*file->find("layers.0.w"));
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, f32);
  Expected<std::vector<float>> pi = file->toFloat32(*file->find("pi"));
  ASSERT_TRUE(pi);
  EXPECT_EQ((*pi)[0], 3.14159265f);
  EXPECT_EQ((*pi)[1], -std::numeric_limits<float>::infinity());
  Expected<std::vector<float>> h = file->toFloat32(*file->find("half"));
  ASSERT_TRUE(h);
  EXPECT_EQ(*h, (std::vector<float>{1.5f, -0.125f, 3.0f}));
  Expected<std::vector<float>> ids = file->toFloat32(*file->find("ids"));
  ASSERT_FALSE(ids);
  EXPECT_NE(ids.error().message().find("not a floating-point type"), std::string::npos);
}

TEST(SafetensorsTest, ReferenceOrderAlignsEveryTensor) {
  std::vector<uint8_t> u8 = {1, 2, 3};
  std::vector<BFloat16> bf = {floatToBf16(1.0f)};
  std::vector<float> f = {1.0f};
  std::vector<double> d = {1.0};
  std::vector<int64_t> i64 = {5};
  std::vector<TensorRef> tensors = {
      makeTensorRef("z_u8", {3}, u8), makeTensorRef("y_bf", {1}, bf),
      makeTensorRef("c_f32", {1}, f), makeTensorRef("b_f32", {1}, f),
      makeTensorRef("x_f64", {1}, d), makeTensorRef("w_i64", {1}, i64)};
  Expected<std::string> bytes = serializeSafetensors(tensors);
  ASSERT_TRUE(bytes);
  Expected<SafetensorsFile> file = SafetensorsFile::parse(*bytes);
  ASSERT_TRUE(file) << file.error().message();
  std::vector<std::string> names;
  for (const auto &t : file->tensors()) {
    names.push_back(t.name);
    EXPECT_EQ(t.begin % dtypeSize(t.dtype), 0u) << t.name;
  }
  // The reference sorts by dtype descending (I64 > F64 > F32 > BF16 > U8), then by name.
  EXPECT_EQ(names, (std::vector<std::string>{"w_i64", "x_f64", "b_f32", "c_f32", "y_bf", "z_u8"}));
  EXPECT_EQ((bytes->size() - 3 - 2 - 4 - 4 - 8 - 8) % 8, 0u); // data starts 8-aligned
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  std::vector<float> two = {1, 2};
  auto err = [](std::vector<TensorRef> tensors, SafetensorsMetadata meta = {}) {
    Expected<std::string> r = serializeSafetensors(tensors, meta);
    EXPECT_FALSE(r);
    return r ? std::string() : r.error().message();
  };
  EXPECT_NE(err({makeTensorRef("a", {3}, two)}).find("needs 12 bytes but was given 8"),
            std::string::npos);
  EXPECT_NE(err({makeTensorRef("a", {-2}, two)}).find("invalid shape [-2]"), std::string::npos);
  EXPECT_NE(err({makeTensorRef("a", {1LL << 40, 1LL << 40}, two)}).find("invalid shape"),
            std::string::npos);
  EXPECT_NE(err({makeTensorRef("a", {2}, two), makeTensorRef("a", {2}, two)})
                .find("duplicate tensor name 'a'"),
            std::string::npos);
  std::vector<double> twoD = {1, 2};
  EXPECT_NE(err({makeTensorRef("a", {2}, two), makeTensorRef("a", {2}, twoD)})
                .find("duplicate tensor name 'a'"),
            std::string::npos);
  EXPECT_NE(err({makeTensorRef("", {2}, two)}).find("empty name"), std::string::npos);
  EXPECT_NE(err({makeTensorRef("__metadata__", {2}, two)}).find("reserved"), std::string::npos);
  EXPECT_NE(err({makeTensorRef("a", {2}, two)}, {{"k", "1"}, {"k", "2"}})
                .find("duplicate metadata key 'k'"),
            std::string::npos);
}

TEST(SafetensorsTest, WriteFailuresLeaveNothingBehind) {
  TempDir dir;
  std::vector<float> two = {1, 2};
  std::vector<TensorRef> tensors = {makeTensorRef("a", {2}, two)};
  Error e = writeSafetensors(dir / "no-such-dir" / "x.safetensors", tensors);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("no-such-dir"), std::string::npos) << e.message();
  // Invalid input fails before anything is created.
  std::vector<TensorRef> bad = {makeTensorRef("a", {3}, two)};
  e = writeSafetensors(dir / "bad.safetensors", bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("bad.safetensors"), std::string::npos) << e.message();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsTest, AtomicWriteReplaces) {
  TempDir dir;
  const auto path = dir / "f.bin";
  ASSERT_TRUE(writeFileAtomically(path, "first version, longer").ok());
  EXPECT_EQ(test::readBytes(path), "first version, longer");
  ASSERT_TRUE(writeFileAtomically(path, "second").ok());
  EXPECT_EQ(test::readBytes(path), "second");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  // Writing into a directory path fails and leaves the directory alone.
  std::filesystem::create_directory(dir / "sub");
  Error e = writeFileAtomically(dir / "sub", "x");
  EXPECT_FALSE(e.ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir / "sub"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            2);
}

TEST(SafetensorsTest, ReaderRejectsTruncationAndBadHeaderLength) {
  EXPECT_ERROR_CONTAINS(std::string(), "too short for the 8-byte header length");
  EXPECT_ERROR_CONTAINS(std::string("\x02\0\0", 3), "file is 3 bytes, too short");
  EXPECT_ERROR_CONTAINS(makeFile("", "").substr(0, 8).replace(0, 1, "\x10"),
                        "header length 16 exceeds the 0 bytes");
  std::string huge(8, '\xff');
  EXPECT_ERROR_CONTAINS(huge + "{}", "header length 18446744073709551615 exceeds");
  // A valid file cut short in its data.
  std::vector<float> v(16, 1.0f);
  std::vector<TensorRef> t = {makeTensorRef("v", {16}, v)};
  std::string full = *serializeSafetensors(t);
  EXPECT_TRUE(SafetensorsFile::parse(full));
  EXPECT_ERROR_CONTAINS(full.substr(0, full.size() - 1), "beyond the 63 data bytes");
  // Cut short in its header.
  EXPECT_ERROR_CONTAINS(full.substr(0, 20), "exceeds the 12 bytes after the length field");
}

TEST(SafetensorsTest, ReaderRejectsBadJson) {
  EXPECT_ERROR_CONTAINS(makeFile("{\"a\":", ""), "bad header: json: unexpected end of input");
  EXPECT_ERROR_CONTAINS(makeFile("{} x", ""), "bad header: json: unexpected 'x'");
  EXPECT_ERROR_CONTAINS(makeFile("[]", ""), "header is a JSON array, not an object");
  EXPECT_ERROR_CONTAINS(makeFile("{\"a\":1,\"a\":2}", ""), "duplicate key");
  // Padding with spaces is fine; an empty file body with no tensors is valid.
  Expected<SafetensorsFile> f = SafetensorsFile::parse(makeFile("{}      ", ""));
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_TRUE(f->tensors().empty());
}

TEST(SafetensorsTest, ReaderRejectsBadTensorEntries) {
  const std::string d8(8, '\0');
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":[]})", ""), "tensor 'a' must be an object");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2]}})", d8),
                        "needs 'dtype', 'shape' and 'data_offsets'");
  EXPECT_ERROR_CONTAINS(
      makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", d8),
      "unknown field 'extra'");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", d8),
                        "unsupported dtype 'F33'");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", d8),
                        "'dtype' must be a string");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8),
                        "'shape' must hold non-negative integers, got -2");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", d8),
                        "non-negative integers");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", d8),
                        "'shape' must be an array");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", d8),
                        "'data_offsets' must be two non-negative integers");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})", d8),
                        "'data_offsets' must be two non-negative integers");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", d8),
                        "end before they begin");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"__metadata__":{"k":1}})", ""),
                        "metadata value of 'k' is not a string (integer)");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"__metadata__":[]})", ""), "'__metadata__' must be an object");
}

TEST(SafetensorsTest, ReaderRejectsBadOffsets) {
  const std::string d8(8, '\0'), d16(16, '\0');
  // dtype/shape size mismatch.
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8),
                        "tensor 'a' of dtype F32 and shape [3] needs 12 bytes but its "
                        "data_offsets [0, 8] span 8");
  EXPECT_ERROR_CONTAINS(
      makeFile(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", d8),
      "overflows");
  // Out of range.
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d8),
                        "beyond the 8 data bytes");
  // Overlap.
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                 d16),
                        "tensors 'a' and 'b' overlap");
  // Hole at the start and in the middle.
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
                        "hole of 8 bytes in the data before tensor 'a'");
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                 d16),
                        "hole of 4 bytes in the data before tensor 'b'");
  // Bytes after the last tensor.
  EXPECT_ERROR_CONTAINS(makeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d16),
                        "the tensors cover 8 data bytes but the file holds 16");
  // Header order need not be data order; zero-size tensors may sit anywhere they fit.
  Expected<SafetensorsFile> ok =
      SafetensorsFile::parse(makeFile(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                                      R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                                      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                      d16));
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->tensors()[0].name, "b");
}

TEST(SafetensorsTest, ReadErrorsNameThePath) {
  TempDir dir;
  Expected<SafetensorsFile> missing = SafetensorsFile::read(dir / "absent.safetensors");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("absent.safetensors"), std::string::npos);
  test::writeBytes(dir / "short.safetensors", "\x05\0\0");
  Expected<SafetensorsFile> shortFile = SafetensorsFile::read(dir / "short.safetensors");
  ASSERT_FALSE(shortFile);
  EXPECT_NE(shortFile.error().message().find("short.safetensors: safetensors: file is"),
            std::string::npos)
      << shortFile.error().message();
  Expected<SafetensorsFile> directory = SafetensorsFile::read(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().message().find("is a directory, not a regular file"),
            std::string::npos)
      << directory.error().message();
  ASSERT_EQ(::mkfifo((dir / "fifo.safetensors").c_str(), 0600), 0);
  Expected<SafetensorsFile> fifo = SafetensorsFile::read(dir / "fifo.safetensors");
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().message().find("fifo.safetensors' is a FIFO (named pipe), not a "
                                        "regular file"),
            std::string::npos)
      << fifo.error().message();
}

TEST(SafetensorsTest, DTypesAndConversions) {
  EXPECT_EQ(dtypeName(DType::BF16), "BF16");
  EXPECT_EQ(parseDType("I64"), DType::I64);
  EXPECT_EQ(parseDType("f32"), std::nullopt); // names are case-sensitive
  EXPECT_EQ(dtypeSize(DType::BOOL), 1u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::U32), 4u);
  EXPECT_EQ(dtypeSize(DType::U64), 8u);
  for (const char *name :
       {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"})
    EXPECT_EQ(dtypeName(*parseDType(name)), name);

  EXPECT_EQ(floatToBf16(1.0f).bits, 0x3F80);
  EXPECT_EQ(floatToBf16(-2.0f).bits, 0xC000);
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f).bits, 0x3F80);     // tie -> even (down)
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f).bits, 0x3F82); // tie -> even (up)
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f + 0x1p-20f).bits, 0x3F81);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::infinity()).bits, 0x7F80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(BFloat16{0x7F81})));
  EXPECT_EQ(bf16ToFloat(BFloat16{0x4049}), 3.140625f);

  EXPECT_EQ(f16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(f16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(f16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(f16ToFloat(0x0400), 0x1p-14f);
  EXPECT_EQ(f16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(f16ToFloat(0x8000)));
  EXPECT_EQ(f16ToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7E00)));
}

} // namespace
