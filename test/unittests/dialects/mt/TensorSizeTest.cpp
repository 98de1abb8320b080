//===- TensorSizeTest.cpp - the bytes of an mt tensor ---------------------===//
//
// getSizeInBytes, which every memory prediction counts with: whole bytes per element (i1
// takes one), and nothing for what is no mt tensor of integers or floats.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/Utils/TensorSize.h"

#include "dialects/mt/IR/MTOps.h"

#include "mlir/AsmParser/AsmParser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mtc::mt;

namespace {

class TensorSizeTest : public ::testing::Test {
protected:
  TensorSizeTest() { context.loadDialect<MTDialect>(); }

  int64_t bytes(StringRef type) { return getSizeInBytes(parseType(type, &context)); }

  MLIRContext context;
};

TEST_F(TensorSizeTest, WholeBytesPerElement) {
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], f32>"), 128);
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], bf16>"), 64);
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], f16>"), 64);
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], f64>"), 256);
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], i64>"), 256);
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], i32>"), 128);
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], i8>"), 32);
  // A mask holds one byte per element, not one bit.
  EXPECT_EQ(bytes("!mt.tensor<[batch=4, seq=8], i1>"), 32);
  EXPECT_EQ(bytes("!mt.tensor<[], f32>"), 4);
}

TEST_F(TensorSizeTest, NothingForOtherTypes) {
  EXPECT_EQ(bytes("tensor<4x8xf32>"), 0);
  EXPECT_EQ(bytes("f32"), 0);
  EXPECT_EQ(getElementSizeInBytes(IndexType::get(&context)), 0);
  EXPECT_EQ(getElementSizeInBytes(Float32Type::get(&context)), 4);
}

} // namespace
