//===- PhiloxTest.cpp - Philox4x32-10 and the shard-independent streams ---===//

#include "runtime/support/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

extern "C" {
void mtc_test_philox_c99(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
float mtc_test_uniform_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step);
float mtc_test_normal_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step);
int mtc_test_keep_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step,
                      float keep_prob);
void mtc_test_normal_pair_c99(uint32_t a, uint32_t b, float *z0, float *z1);
}

using namespace mtc::rt;

namespace {

struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t expected[4];
};

// The philox4x32 10-round lines of Random123's kat_vectors (counter, key, output).
const Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(PhiloxTest, KnownAnswerVectors) {
  for (const Kat &k : kKats) {
    uint32_t out[4];
    mtc_philox4x32_10(k.ctr, k.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], k.expected[i]) << "word " << i << " for ctr[0]=" << std::hex << k.ctr[0];
  }
}

TEST(PhiloxTest, KnownAnswerVectorsFromC99Build) {
  for (const Kat &k : kKats) {
    uint32_t out[4];
    mtc_test_philox_c99(k.ctr, k.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], k.expected[i]);
  }
}

TEST(PhiloxTest, OutputMayAliasCounter) {
  uint32_t buf[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
  mtc_philox4x32_10(buf, kKats[2].key, buf);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(buf[i], kKats[2].expected[i]);
}

TEST(PhiloxTest, KeyingIsSeedTensorIndexStep) {
  const uint64_t seed = 0x0123456789abcdefull;
  const uint64_t index = 0x0000000500000007ull; // above 2^32: exercises the high counter word
  auto words = philoxStream(seed, 42, index, 9);
  uint32_t ctr[4] = {0x00000007, 0x00000005, 42, 9};
  uint32_t key[2] = {0x89abcdef, 0x01234567};
  uint32_t expected[4];
  mtc_philox4x32_10(ctr, key, expected);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(words[i], expected[i]);
  // Every input matters.
  EXPECT_NE(philoxStream(seed, 42, index, 9), philoxStream(seed + 1, 42, index, 9));
  EXPECT_NE(philoxStream(seed, 42, index, 9), philoxStream(seed ^ (1ull << 40), 42, index, 9));
  EXPECT_NE(philoxStream(seed, 42, index, 9), philoxStream(seed, 43, index, 9));
  EXPECT_NE(philoxStream(seed, 42, index, 9), philoxStream(seed, 42, index + 1, 9));
  EXPECT_NE(philoxStream(seed, 42, index, 9), philoxStream(seed, 42, index + (1ull << 32), 9));
  EXPECT_NE(philoxStream(seed, 42, index, 9), philoxStream(seed, 42, index, 10));
  // step defaults to 0.
  EXPECT_EQ(philoxStream(seed, 42, index), philoxStream(seed, 42, index, 0));
}

TEST(PhiloxTest, UniformFloatIsExact24Bit) {
  EXPECT_EQ(mtc_uniform_float(0), 0.0f);
  EXPECT_EQ(mtc_uniform_float(0xFF), 0.0f); // the low 8 bits are dropped
  EXPECT_EQ(mtc_uniform_float(0x100), 0x1p-24f);
  EXPECT_EQ(mtc_uniform_float(0x80000000u), 0.5f);
  EXPECT_EQ(mtc_uniform_float(0xFFFFFFFFu), 1.0f - 0x1p-24f);
  EXPECT_LT(mtc_uniform_float(0xFFFFFFFFu), 1.0f);
}

TEST(PhiloxTest, NormalPairBoxMuller) {
  float z0, z1;
  // u1 = 1 -> radius 0.
  mtc_normal_pair(0xFFFFFFFFu, 0x12345678u, &z0, &z1);
  EXPECT_EQ(z0, 0.0f);
  EXPECT_EQ(z1, 0.0f);
  // u1 = 2^-24, u2 = 0 -> (sqrt(48 ln 2), 0): the largest magnitude the transform gives.
  mtc_normal_pair(0, 0, &z0, &z1);
  EXPECT_FLOAT_EQ(z0, std::sqrt(48.0f * std::log(2.0f)));
  EXPECT_EQ(z1, 0.0f);
  // u2 = 1/4 -> the radius moves to z1.
  mtc_normal_pair(0, 0x40000000u, &z0, &z1);
  EXPECT_NEAR(z0, 0.0f, 1e-6f);
  EXPECT_FLOAT_EQ(z1, std::sqrt(48.0f * std::log(2.0f)));
  // u1 = 1/2 (a >> 8 = 2^23 - 1), u2 = 1/2 -> z0 = -sqrt(2 ln 2).
  mtc_normal_pair(0x7FFFFF00u, 0x80000000u, &z0, &z1);
  EXPECT_FLOAT_EQ(z0, -std::sqrt(2.0f * std::log(2.0f)));
  // The per-element normal is the cosine branch.
  auto w = philoxStream(7, 3, 11, 0);
  mtc_normal_pair(w[0], w[1], &z0, &z1);
  EXPECT_TRUE(sameBits(mtc_philox_normal(7, 3, 11, 0), z0));
}

TEST(PhiloxTest, C99AndCxxBuildsAgreeBitForBit) {
  for (uint64_t i = 0; i < 5000; ++i) {
    uint64_t index = i * 0x9E3779B97F4A7C15ull; // spread over the 64-bit index space
    uint32_t step = uint32_t(i % 7);
    ASSERT_TRUE(
        sameBits(mtc_test_uniform_c99(99, 5, index, step), mtc_philox_uniform(99, 5, index, step)));
    ASSERT_TRUE(
        sameBits(mtc_test_normal_c99(99, 5, index, step), mtc_philox_normal(99, 5, index, step)));
    ASSERT_EQ(mtc_test_keep_c99(99, 5, index, step, 0.9f),
              mtc_dropout_keep(99, 5, index, step, 0.9f));
    float a0, a1, b0, b1;
    mtc_test_normal_pair_c99(uint32_t(index), uint32_t(index >> 32), &a0, &a1);
    mtc_normal_pair(uint32_t(index), uint32_t(index >> 32), &b0, &b1);
    ASSERT_TRUE(sameBits(a0, b0));
    ASSERT_TRUE(sameBits(a1, b1));
  }
}

TEST(PhiloxTest, FillFunctionsMatchPerElementHelpers) {
  RngStream s{1234, 17, 3};
  std::vector<float> n(100), u(100);
  std::vector<uint8_t> m(100);
  fillNormal(s, 1000, 1100, 0.0f, 1.0f, n.data());
  fillUniform(s, 1000, 1100, 0.0f, 1.0f, u.data());
  fillDropoutMask(s, 1000, 1100, 0.75f, m.data());
  for (uint64_t k = 0; k < 100; ++k) {
    EXPECT_TRUE(sameBits(n[k], mtc_philox_normal(1234, 17, 1000 + k, 3)));
    EXPECT_TRUE(sameBits(u[k], mtc_philox_uniform(1234, 17, 1000 + k, 3)));
    EXPECT_EQ(m[k], mtc_dropout_keep(1234, 17, 1000 + k, 3, 0.75f));
  }
}

TEST(PhiloxTest, ShardSlicesEqualTheWholeTensor) {
  // A [64, 96] tensor generated whole, and by 4 x 3 "ranks" each producing its row blocks
  // of a column-sharded layout element by element via global indices.
  const uint64_t rows = 64, cols = 96, total = rows * cols;
  RngStream s{0xfeedface12345678ull, 5, 0};
  std::vector<float> whole(total), uniformWhole(total);
  std::vector<uint8_t> maskWhole(total);
  fillNormal(s, 0, total, 0.0f, 0.02f, whole.data());
  fillUniform(s, 0, total, -0.1f, 0.1f, uniformWhole.data());
  fillDropoutMask(s, 0, total, 0.9f, maskWhole.data());

  // Contiguous slices [begin, end) in arbitrary order and sizes (row-sharding).
  const uint64_t cuts[] = {0, 1, 7, 500, 501, 4096, 5000, total};
  for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
    uint64_t b = cuts[c], e = cuts[c + 1];
    std::vector<float> part(e - b), upart(e - b);
    std::vector<uint8_t> mpart(e - b);
    fillNormal(s, b, e, 0.0f, 0.02f, part.data());
    fillUniform(s, b, e, -0.1f, 0.1f, upart.data());
    fillDropoutMask(s, b, e, 0.9f, mpart.data());
    for (uint64_t i = b; i < e; ++i) {
      ASSERT_TRUE(sameBits(part[i - b], whole[i])) << "normal element " << i;
      ASSERT_TRUE(sameBits(upart[i - b], uniformWhole[i])) << "uniform element " << i;
      ASSERT_EQ(mpart[i - b], maskWhole[i]) << "mask element " << i;
    }
  }

  // Column-sharding over 3 ranks: each rank generates its local [rows, cols / 3] shard row
  // by row from global indices; reassembled, it equals the whole tensor.
  std::vector<float> reassembled(total, -1.0f);
  for (uint64_t rank = 0; rank < 3; ++rank) {
    const uint64_t localCols = cols / 3;
    std::vector<float> shard(rows * localCols);
    for (uint64_t r = 0; r < rows; ++r) {
      uint64_t begin = r * cols + rank * localCols;
      fillNormal(s, begin, begin + localCols, 0.0f, 0.02f, shard.data() + r * localCols);
    }
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < localCols; ++c)
        reassembled[r * cols + rank * localCols + c] = shard[r * localCols + c];
  }
  EXPECT_EQ(std::memcmp(reassembled.data(), whole.data(), total * sizeof(float)), 0);

  // Empty and inverted ranges write nothing.
  float sentinel = 42.0f;
  fillNormal(s, 10, 10, 0.0f, 1.0f, &sentinel);
  fillNormal(s, 11, 10, 0.0f, 1.0f, &sentinel);
  EXPECT_EQ(sentinel, 42.0f);
}

TEST(PhiloxTest, NormalStatistics) {
  const uint64_t n = 1000000;
  std::vector<float> z(n);
  fillNormal(RngStream{2024, 1, 0}, 0, n, 0.0f, 1.0f, z.data());
  double sum = 0, sum2 = 0, sum3 = 0, sum4 = 0, within1 = 0, lag = 0;
  float maxAbs = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double x = z[i];
    sum += x;
    sum2 += x * x;
    sum3 += x * x * x;
    sum4 += x * x * x * x;
    within1 += std::fabs(x) < 1.0;
    if (i)
      lag += x * z[i - 1];
    maxAbs = std::max(maxAbs, std::fabs(z[i]));
  }
  double mean = sum / n, var = sum2 / n - mean * mean;
  // Standard errors: mean 1e-3, variance 1.4e-3, third moment 2.4e-3, fourth 1e-2.
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.005);
  EXPECT_NEAR(sum3 / n, 0.0, 0.015);
  EXPECT_NEAR(sum4 / n, 3.0, 0.05);
  EXPECT_NEAR(within1 / n, 0.682689, 0.003);
  EXPECT_NEAR(lag / n, 0.0, 0.005); // neighbouring elements uncorrelated
  EXPECT_LE(maxAbs, 5.77f);
  EXPECT_GT(maxAbs, 4.0f);

  // mean + std * z.
  std::vector<float> w(n);
  fillNormal(RngStream{2024, 1, 0}, 0, n, 0.5f, 0.02f, w.data());
  double wsum = 0, wsum2 = 0;
  for (float x : w) {
    wsum += x;
    wsum2 += double(x) * x;
  }
  double wmean = wsum / n;
  EXPECT_NEAR(wmean, 0.5, 1e-4);
  EXPECT_NEAR(std::sqrt(wsum2 / n - wmean * wmean), 0.02, 1e-4);
  EXPECT_FLOAT_EQ(w[123], float(0.5 + 0.02 * double(z[123])));
}

TEST(PhiloxTest, UniformStatisticsAndRange) {
  const uint64_t n = 1000000;
  std::vector<float> u(n);
  fillUniform(RngStream{7, 2, 0}, 0, n, -2.0f, 3.0f, u.data());
  double sum = 0, sum2 = 0;
  int buckets[10] = {};
  for (float x : u) {
    ASSERT_GE(x, -2.0f);
    ASSERT_LT(x, 3.0f);
    sum += x;
    sum2 += double(x) * x;
    ++buckets[std::min(9, int((x + 2.0f) / 0.5f))];
  }
  double mean = sum / n;
  EXPECT_NEAR(mean, 0.5, 0.01);                           // se 1.4e-3
  EXPECT_NEAR(sum2 / n - mean * mean, 25.0 / 12.0, 0.02); // se 2.4e-3
  for (int b : buckets)
    EXPECT_NEAR(b, n / 10.0, 1500.0); // se 300
}

TEST(PhiloxTest, UniformNeverReachesHi) {
  // Find an element whose 24-bit uniform is 1 - 2^-24: for [1, 2) the affine map rounds
  // 1 + (1 - 2^-24) up to 2.0f; the result must stay below hi.
  RngStream s{3, 9, 0};
  uint64_t found = UINT64_MAX;
  for (uint64_t i = 0; i < (uint64_t(1) << 27) && found == UINT64_MAX; ++i)
    if ((philoxStream(s.seed, s.tensorId, i, s.step)[0] >> 8) == 0xFFFFFFu)
      found = i;
  ASSERT_NE(found, UINT64_MAX) << "no element with the top uniform value in 2^27 tries";
  float v;
  fillUniform(s, found, found + 1, 1.0f, 2.0f, &v);
  EXPECT_LT(v, 2.0f);
  EXPECT_EQ(v, std::nextafter(2.0f, 1.0f));
}

TEST(PhiloxTest, DropoutKeepFraction) {
  const uint64_t n = 1000000;
  std::vector<uint8_t> m(n), m2(n);
  for (float p : {0.9f, 0.5f, 0.1f}) {
    fillDropoutMask(RngStream{11, 4, 100}, 0, n, p, m.data());
    uint64_t kept = 0;
    for (uint8_t k : m) {
      ASSERT_LE(k, 1);
      kept += k;
    }
    EXPECT_NEAR(double(kept) / n, p, 0.002) << "keep probability " << p; // se <= 5e-4
  }
  // Masks change with the step (agreement p^2 + (1-p)^2 = 0.82 for p = 0.9) and with the
  // tensor id.
  fillDropoutMask(RngStream{11, 4, 100}, 0, n, 0.9f, m.data());
  fillDropoutMask(RngStream{11, 4, 101}, 0, n, 0.9f, m2.data());
  uint64_t same = 0;
  for (uint64_t i = 0; i < n; ++i)
    same += m[i] == m2[i];
  EXPECT_NEAR(double(same) / n, 0.82, 0.003);
  fillDropoutMask(RngStream{11, 5, 100}, 0, n, 0.9f, m2.data());
  same = 0;
  for (uint64_t i = 0; i < n; ++i)
    same += m[i] == m2[i];
  EXPECT_NEAR(double(same) / n, 0.82, 0.003);

  // Degenerate probabilities are exact.
  fillDropoutMask(RngStream{11, 4, 100}, 0, 10000, 0.0f, m.data());
  for (uint64_t i = 0; i < 10000; ++i)
    ASSERT_EQ(m[i], 0);
  fillDropoutMask(RngStream{11, 4, 100}, 0, 10000, 1.0f, m.data());
  for (uint64_t i = 0; i < 10000; ++i)
    ASSERT_EQ(m[i], 1);
}

} // namespace
