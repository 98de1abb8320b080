//===- ElementTypesTest.cpp - Sizes, names, 16-bit floats and reductions ---===//

#include "runtime/comm/ElementTypes.h"
#include "runtime/support/Safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace mtc::rt {
namespace {

/// bf16 as its 16 bits (Safetensors.h's conversions).
uint16_t toBf16(float v) { return floatToBf16(v).bits; }
float fromBf16(uint16_t bits) { return bf16ToFloat(BFloat16{bits}); }

TEST(ElementTypes, CodesSizesAndNames) {
  // The codes are ABI: fixed values.
  EXPECT_EQ(int(MTC_F32), 0);
  EXPECT_EQ(int(MTC_F64), 1);
  EXPECT_EQ(int(MTC_BF16), 2);
  EXPECT_EQ(int(MTC_F16), 3);
  EXPECT_EQ(int(MTC_I32), 4);
  EXPECT_EQ(int(MTC_I64), 5);
  EXPECT_EQ(int(MTC_SUM), 0);
  EXPECT_EQ(int(MTC_MAX), 1);
  EXPECT_EQ(int(MTC_MIN), 2);
  const size_t sizes[] = {4, 8, 2, 2, 4, 8};
  const char *names[] = {"f32", "f64", "bf16", "f16", "i32", "i64"};
  for (int t = 0; t < MTC_NUM_ELEMENT_TYPES; ++t) {
    EXPECT_TRUE(isElementType(t));
    EXPECT_EQ(elementSize(MtcElementType(t)), sizes[t]);
    EXPECT_EQ(elementTypeName(MtcElementType(t)), names[t]);
    for (int r = 0; r < MTC_NUM_REDUCTIONS; ++r)
      EXPECT_NE(reduceFunction(MtcElementType(t), MtcReduction(r)), nullptr);
  }
  EXPECT_FALSE(isElementType(-1));
  EXPECT_FALSE(isElementType(MTC_NUM_ELEMENT_TYPES));
  EXPECT_FALSE(isReduction(3));
  EXPECT_EQ(elementSize(MtcElementType(7)), 0u);
  EXPECT_EQ(reduceFunction(MtcElementType(7), MTC_SUM), nullptr);
  EXPECT_EQ(reduceFunction(MTC_F32, MtcReduction(9)), nullptr);
  EXPECT_EQ(reductionName(MTC_MIN), "min");
}

TEST(ElementTypes, F16RoundsToNearestEven) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(f16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);            // largest half
  EXPECT_EQ(floatToF16(65519.0f), 0x7bff);            // below halfway to 65536
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00);            // halfway: ties to even = infinity
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f), 0x3c00);     // tie to even
  EXPECT_EQ(floatToF16(1.0f + 3 * 0x1p-11f), 0x3c02); // tie up to even
  EXPECT_EQ(floatToF16(0x1p-24f), 0x0001);            // smallest subnormal
  EXPECT_EQ(floatToF16(0x1p-25f), 0x0000);            // tie to even: zero
  EXPECT_EQ(floatToF16(0x1.8p-24f), 0x0002);          // 1.5 units: tie to even (2)
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(0x1p-14f - 0x1p-26f), 0x0400); // rounds up into the normals
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::bit_cast<float>(0x7f800001u)))));
  for (uint32_t h = 0; h < 0x10000; ++h) { // every finite half survives the round trip
    float f = f16ToFloat(uint16_t(h));
    if (!std::isnan(f))
      ASSERT_EQ(floatToF16(f), h) << h;
  }
  EXPECT_EQ(f16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(f16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
}

TEST(ElementTypes, ReductionsNaNFirstEqualsAndWrapping) {
  const float nan = std::nanf("");
  float a[4] = {1, nan, 3, -0.0f}, b[4] = {2, 5, nan, 0.0f}, c[4];
  reduceFunction(MTC_F32, MTC_MAX)(c, a, b, 4);
  EXPECT_EQ(c[0], 2);
  EXPECT_TRUE(std::isnan(c[1]));
  EXPECT_TRUE(std::isnan(c[2]));
  EXPECT_TRUE(std::signbit(c[3])); // equal: the first wins
  reduceFunction(MTC_F32, MTC_MIN)(c, a, b, 4);
  EXPECT_EQ(c[0], 1);
  EXPECT_TRUE(std::isnan(c[1]) && std::isnan(c[2]));

  int32_t i[2] = {std::numeric_limits<int32_t>::max(), -5}, j[2] = {1, 3};
  reduceFunction(MTC_I32, MTC_SUM)(i, i, j, 2); // in place
  EXPECT_EQ(i[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(i[1], -2);
  int64_t k[1] = {int64_t(1) << 40}, l[1] = {-(int64_t(1) << 41)};
  reduceFunction(MTC_I64, MTC_MIN)(k, k, l, 1);
  EXPECT_EQ(k[0], -(int64_t(1) << 41));

  // bf16 sums through f32 and rounds once: 256 + 1 is a tie, to even (256).
  uint16_t x[2] = {toBf16(256.0f), toBf16(1.5f)};
  uint16_t y[2] = {toBf16(1.0f), toBf16(-0.25f)};
  uint16_t z[2];
  reduceFunction(MTC_BF16, MTC_SUM)(z, x, y, 2);
  EXPECT_EQ(fromBf16(z[0]), 256.0f);
  EXPECT_EQ(fromBf16(z[1]), 1.25f);
  // f16 halves compared as numbers, not as bit patterns (-3 has the larger bits).
  uint16_t h[2] = {floatToF16(-3.0f), floatToF16(7.0f)};
  uint16_t g[2] = {floatToF16(2.0f), floatToF16(6.5f)};
  reduceFunction(MTC_F16, MTC_MAX)(z, h, g, 2);
  EXPECT_EQ(f16ToFloat(z[0]), 2.0f);
  EXPECT_EQ(f16ToFloat(z[1]), 7.0f);
  double d[1] = {1.0 / 3}, e[1] = {2.0 / 3};
  reduceFunction(MTC_F64, MTC_SUM)(d, d, e, 1);
  EXPECT_EQ(d[0], 1.0 / 3 + 2.0 / 3);
}

} // namespace
} // namespace mtc::rt
