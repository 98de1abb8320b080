//===- NpyFileTest.cpp - NumPy's .npy array files -------------------------===//
//
// The header bytes numpy.save writes (compared with numpy's own output, quoted below), a
// round trip of every dtype and shape, the other versions and spellings numpy.load reads,
// and every malformed file: each an error naming the file, never a crash. That numpy reads
// the files written here is checked by test/tools/mtc-data/data-cache.test.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/NpyFile.h"

#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sys/stat.h>

using namespace mtc::rt;
using mtc::rt::test::readBytes;
using mtc::rt::test::TempDir;
using mtc::rt::test::writeBytes;

namespace {

/// A .npy file of the header dict `dict` (padded as numpy pads it) and `data`, version
/// `major`.0.
std::string npy(std::string dict, std::string_view data, int major = 1) {
  const size_t prefix = 8 + (major == 1 ? 2 : 4);
  dict.append(63 - (prefix + dict.size()) % 64, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(char(major));
  out.push_back('\0');
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(char((dict.size() >> (8 * i)) & 0xff));
  return out + dict + std::string(data);
}

template <class T> std::string bytesOf(std::initializer_list<T> values) {
  std::string out;
  for (T v : values)
    out.append(reinterpret_cast<const char *>(&v), sizeof v);
  return out;
}

std::string parseError(std::string bytes) {
  Expected<NpyArray> array = parseNpy(std::move(bytes), "'f.npy'");
  EXPECT_FALSE(array.ok());
  return array.ok() ? "" : array.error().message();
}

// numpy 1.24: numpy.save(f, numpy.arange(3, dtype=numpy.int32)) writes this header (its dict
// padded to 118 bytes, the data at byte 128).
TEST(NpyFile, HeaderIsNumpys) {
  const int64_t one[] = {3};
  std::string header = npyHeader(NpyDType::I32, one);
  ASSERT_EQ(header.size(), 128u);
  EXPECT_EQ(header.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(header.substr(10, 60), "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }   ");
  EXPECT_EQ(header.back(), '\n');
  const int64_t two[] = {4, 2};
  EXPECT_NE(npyHeader(NpyDType::U32, two)
                .find("'descr': '<u4', 'fortran_order': False, "
                      "'shape': (4, 2), }"),
            std::string::npos);
  EXPECT_NE(npyHeader(NpyDType::I64, {}).find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(npyHeader(NpyDType::F32, two).size() % 64, 0u);
}

TEST(NpyFile, RoundTripsEveryDType) {
  TempDir dir;
  struct Case {
    NpyDType dtype;
    std::string data;
    std::vector<int64_t> expected;
  };
  const Case cases[] = {
      {NpyDType::I32,
       bytesOf<int32_t>({-5, 0, 7, 2147483647, -2147483647 - 1, 9}),
       {-5, 0, 7, 2147483647, -2147483647 - 1, 9}},
      {NpyDType::U32,
       bytesOf<uint32_t>({0, 1, 4294967295u, 3, 4, 5}),
       {0, 1, 4294967295ll, 3, 4, 5}},
      {NpyDType::I64,
       bytesOf<int64_t>({int64_t(1) << 40, -1, 0, 3, 4, 5}),
       {int64_t(1) << 40, -1, 0, 3, 4, 5}},
  };
  const int64_t shape[] = {3, 2};
  for (const Case &c : cases) {
    std::filesystem::path path = dir / std::string(npyDTypeName(c.dtype));
    ASSERT_TRUE(writeNpyFile(path, c.dtype, shape, c.data).ok());
    Expected<NpyArray> array = readNpyFile(path);
    ASSERT_TRUE(array.ok()) << array.error().message();
    EXPECT_EQ(array->dtype(), c.dtype);
    EXPECT_EQ(array->shape(), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(array->size(), 6);
    EXPECT_EQ(array->data(), c.data);
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_EQ(array->integerAt(i), c.expected[size_t(i)]);
  }
  // Floats, empty arrays and scalars.
  std::string floats = bytesOf<float>({1.5f, -2.0f});
  const int64_t two[] = {2}, none[] = {0, 5};
  ASSERT_TRUE(writeNpyFile(dir / "f", NpyDType::F32, two, floats).ok());
  EXPECT_EQ(readNpyFile(dir / "f")->data(), floats);
  ASSERT_TRUE(writeNpyFile(dir / "empty", NpyDType::I64, none, "").ok());
  EXPECT_EQ(readNpyFile(dir / "empty")->size(), 0);
  ASSERT_TRUE(writeNpyFile(dir / "scalar", NpyDType::I64, {}, bytesOf<int64_t>({42})).ok());
  EXPECT_EQ(readNpyFile(dir / "scalar")->integerAt(0), 42);
  // No temporary is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto &entry : std::filesystem::directory_iterator(dir.path()))
    ++files;
  EXPECT_EQ(files, 6);
}

TEST(NpyFile, WriterRefusesDataOfAnotherSize) {
  TempDir dir;
  const int64_t shape[] = {3};
  Error err = writeNpyFile(dir / "x.npy", NpyDType::I32, shape, "12345678");
  EXPECT_EQ(err.message(),
            concat("cannot write ", dir / "x.npy", ": 8 bytes for 3 elements of int32"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.npy"));
}

TEST(NpyFile, WriterReportsAnUnwritablePlace) {
  TempDir dir;
  writeBytes(dir / "file", "x");
  const int64_t shape[] = {1};
  Error err = writeNpyFile(dir / "file" / "x.npy", NpyDType::I32, shape, bytesOf<int32_t>({1}));
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("cannot create"), std::string::npos) << err.message();
}

// What numpy writes and reads beyond the runtime's own files.
TEST(NpyFile, ReadsOtherSpellingsNumpyReads) {
  const std::string data = bytesOf<int32_t>({1, 2});
  // Version 2.0 and 3.0 (a u32 header length), keys in another order, double quotes, no
  // trailing comma, Python 2's long integers, a 1-D array in Fortran order.
  for (const auto &[dict, major] : std::vector<std::pair<std::string, int>>{
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 2},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 3},
           {"{'shape': (2,), 'fortran_order': False, 'descr': '<i4'}", 1},
           {"{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,)}", 1},
           {"{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }", 1},
           {"{'descr':'<i4','fortran_order':False,'shape':(1,2)}", 1}}) {
    Expected<NpyArray> array = parseNpy(npy(dict, data, major), "f");
    ASSERT_TRUE(array.ok()) << dict << ": " << array.error().message();
    EXPECT_EQ(array->size(), 2);
    EXPECT_EQ(array->integerAt(1), 2);
  }
}

TEST(NpyFile, RefusesMalformedFiles) {
  const std::string data = bytesOf<int32_t>({1, 2});
  const std::string good = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(parseError(""), "'f.npy': not a .npy file (no \\x93NUMPY magic)");
  EXPECT_EQ(parseError("PK\x03\x04 a zip file"), "'f.npy': not a .npy file (no \\x93NUMPY magic)");
  EXPECT_EQ(parseError(std::string("\x93NUMPY\x04\x00", 8) + "...."),
            "'f.npy': version 4.0 of the .npy format (1.0 to 3.0 are read)");
  EXPECT_EQ(parseError(std::string("\x93NUMPY\x01\x00", 8)),
            "'f.npy': truncated in its header (8 bytes)");
  EXPECT_EQ(parseError(npy(good, data).substr(0, 40)),
            "'f.npy': truncated in its header (40 bytes, the header ends at byte 128)");
  // Truncated data, and bytes past it.
  EXPECT_EQ(parseError(npy(good, data.substr(0, 5))),
            "'f.npy': truncated: 5 bytes of data where its shape (1-dimensional, 2 elements of "
            "int32) needs 8");
  EXPECT_EQ(parseError(npy(good, data + "x")),
            "'f.npy': 9 bytes of data where its shape (1-dimensional, 2 elements of int32) "
            "needs 8");
  // Dtypes the runtime does not read.
  EXPECT_EQ(parseError(npy("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", data)),
            "'f.npy': its dtype '>i4' is not one of '<i4' int32, '<u4' uint32, '<i8' int64, "
            "'<f4' float32, '<i2' int16 (little-endian; big-endian arrays are not read)");
  EXPECT_NE(parseError(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", data))
                .find("its dtype '<f8' is not one of"),
            std::string::npos);
  EXPECT_NE(parseError(npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", data))
                .find("its dtype '|O'"),
            std::string::npos);
  EXPECT_EQ(parseError(npy("{'descr': '<i4', 'fortran_order': True, 'shape': (1, 2), }", data)),
            "'f.npy': its 2-dimensional array is in Fortran order (only C order is read)");
  // Headers that are not numpy's dict.
  const std::string prefix =
      "'f.npy': its header is not numpy's dict of 'descr', 'fortran_order' and 'shape' (";
  for (const auto &[dict, why] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 2]", "no '{'"},
           {"{descr: '<i4'}", "a key is not a string"},
           {"{'descr' '<i4'}", "no ':' after 'descr'"},
           {"{'descr': '<i4', 'extra': 1, 'shape': (2,)}", "an unknown key 'extra'"},
           {"{'descr': '<i4', 'descr': '<i4'}", "'descr' twice"},
           {"{'descr': 4, 'fortran_order': False, 'shape': (2,)}", "'descr' is not a string"},
           {"{'descr': '<i4', 'fortran_order': 0, 'shape': (2,)}",
            "'fortran_order' is neither True nor False"},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (-2,)}",
            "'shape' is not a tuple of non-negative integers"},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (2)}",
            "'shape' is not a tuple of non-negative integers"},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': [2]}",
            "'shape' is not a tuple of non-negative integers"},
           {"{'descr': '<i4', 'fortran_order': False}", "'shape' is missing"},
           {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,)} x", "text after the dict"},
           {"{'descr': '<i4' 'fortran_order': False}", "no ',' or '}' after 'descr'"},
           {"{'descr: '<i4'}", "no ':' after 'descr: '"},
       })
    EXPECT_EQ(parseError(npy(dict, data)), prefix + why + ")") << dict;
  // A shape whose elements overflow, and one larger than the file.
  EXPECT_EQ(parseError(npy("{'descr': '<i8', 'fortran_order': False, 'shape': "
                           "(4294967296, 4294967296)}",
                           data)),
            "'f.npy': its shape's elements overflow");
  EXPECT_NE(parseError(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1000000,)}", data))
                .find("truncated: 8 bytes of data"),
            std::string::npos);
}

TEST(NpyFile, ReaderRefusesWhatIsNotARegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  std::filesystem::create_directory(dir / "dir");
  EXPECT_EQ(readNpyFile(dir / "fifo").error().message(),
            concat(dir / "fifo", " is a FIFO (named pipe), not a regular file"));
  EXPECT_EQ(readNpyFile(dir / "dir").error().message(),
            concat(dir / "dir", " is a directory, not a regular file"));
  EXPECT_EQ(readNpyFile(dir / "absent").error().message(),
            concat("cannot open ", dir / "absent", ": No such file or directory"));
  // A parse error names the file.
  writeBytes(dir / "bad.npy", "not numpy");
  EXPECT_EQ(readNpyFile(dir / "bad.npy").error().message(),
            concat(dir / "bad.npy", ": not a .npy file (no \\x93NUMPY magic)"));
}

} // namespace
