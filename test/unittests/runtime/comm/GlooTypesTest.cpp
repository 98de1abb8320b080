//===- GlooTypesTest.cpp - Every element type and reduction over Gloo ------===//
//
// All-reduce and reduce-scatter of every (element type, reduction) pair on 2 and 4 thread
// ranks, with values exact in every type (small integers, and large ones for i64), against a
// serial reference; non-exact halves must still give the same bits on every rank.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include "runtime/comm/ElementTypes.h"
#include "runtime/support/Safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mtc::rt::test {
namespace {

/// bf16 as its 16 bits (Safetensors.h's conversions).
uint16_t toBf16(float v) { return floatToBf16(v).bits; }
float fromBf16(uint16_t bits) { return bf16ToFloat(BFloat16{bits}); }

/// Element i of a buffer of `type`, as a double (exact for the values used here).
double get(MtcElementType type, const std::vector<uint8_t> &buf, size_t i) {
  const uint8_t *p = buf.data() + i * elementSize(type);
  switch (type) {
  case MTC_F32:
    return *reinterpret_cast<const float *>(p);
  case MTC_F64:
    return *reinterpret_cast<const double *>(p);
  case MTC_BF16:
    return fromBf16(*reinterpret_cast<const uint16_t *>(p));
  case MTC_F16:
    return f16ToFloat(*reinterpret_cast<const uint16_t *>(p));
  case MTC_I32:
    return *reinterpret_cast<const int32_t *>(p);
  case MTC_I64:
    return double(*reinterpret_cast<const int64_t *>(p));
  }
  return 0;
}

void put(MtcElementType type, std::vector<uint8_t> &buf, size_t i, double v) {
  uint8_t *p = buf.data() + i * elementSize(type);
  switch (type) {
  case MTC_F32:
    *reinterpret_cast<float *>(p) = float(v);
    return;
  case MTC_F64:
    *reinterpret_cast<double *>(p) = v;
    return;
  case MTC_BF16:
    *reinterpret_cast<uint16_t *>(p) = toBf16(float(v));
    return;
  case MTC_F16:
    *reinterpret_cast<uint16_t *>(p) = floatToF16(float(v));
    return;
  case MTC_I32:
    *reinterpret_cast<int32_t *>(p) = int32_t(v);
    return;
  case MTC_I64:
    *reinterpret_cast<int64_t *>(p) = int64_t(v);
    return;
  }
}

/// Small integers of both signs (exact in every type, and so are their sums over 4 ranks);
/// i64 adds 2^40 * (rank + 1), beyond 32 bits.
double valueOf(MtcElementType type, int rank, size_t i) {
  double v = double(int((rank * 7 + i * 3) % 17) - 8);
  return type == MTC_I64 ? v + std::ldexp(1.0, 40) * (rank + 1) : v;
}

double reduce(MtcReduction reduction, double a, double b) {
  return reduction == MTC_SUM ? a + b : reduction == MTC_MAX ? std::max(a, b) : std::min(a, b);
}

std::vector<uint8_t> bufferOf(MtcElementType type, int rank, size_t count) {
  std::vector<uint8_t> buf(count * elementSize(type));
  for (size_t i = 0; i < count; ++i)
    put(type, buf, i, valueOf(type, rank, i));
  return buf;
}

const MtcElementType kTypes[] = {MTC_F32, MTC_F64, MTC_BF16, MTC_F16, MTC_I32, MTC_I64};
const MtcReduction kReductions[] = {MTC_SUM, MTC_MAX, MTC_MIN};

std::string label(MtcElementType t, MtcReduction r, size_t count) {
  return concat(elementTypeName(t), " ", reductionName(r), " count ", count);
}

class GlooTypes : public ::testing::TestWithParam<int> {
protected:
  int n() const { return GetParam(); }
  TestJob job;
};

INSTANTIATE_TEST_SUITE_P(Ranks, GlooTypes, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

TEST_P(GlooTypes, AllReduceEveryTypeAndReduction) {
  const int n = this->n();
  // 3: fewer elements than the ring's segments; 1001: several elements per segment.
  const size_t counts[] = {3, 1001};
  // results[rank][combination]
  std::vector<std::vector<std::vector<uint8_t>>> results(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "types");
    ASSERT_TRUE(comm);
    for (size_t count : counts)
      for (MtcElementType t : kTypes)
        for (MtcReduction r : kReductions) {
          std::vector<uint8_t> buf = bufferOf(t, rank, count);
          Error e = comm->allReduce(buf.data(), count, t, r);
          ASSERT_TRUE(e.ok()) << label(t, r, count) << ": " << e.message();
          results[rank].push_back(std::move(buf));
        }
  });
  size_t k = 0;
  for (size_t count : counts)
    for (MtcElementType t : kTypes)
      for (MtcReduction r : kReductions) {
        for (size_t i = 0; i < count; ++i) {
          double expected = valueOf(t, 0, i);
          for (int rank = 1; rank < n; ++rank)
            expected = reduce(r, expected, valueOf(t, rank, i));
          for (int rank = 0; rank < n; ++rank)
            ASSERT_EQ(get(t, results[rank][k], i), expected)
                << label(t, r, count) << ", rank " << rank << ", element " << i;
        }
        ++k;
      }
}

TEST_P(GlooTypes, ReduceScatterEveryTypeAndReduction) {
  const int n = this->n();
  const size_t per = 101;
  std::vector<std::vector<std::vector<uint8_t>>> results(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "rstypes");
    ASSERT_TRUE(comm);
    for (MtcElementType t : kTypes)
      for (MtcReduction r : kReductions) {
        std::vector<uint8_t> in = bufferOf(t, rank, per * n), out(per * elementSize(t));
        Error e = comm->reduceScatter(in.data(), out.data(), per, t, r);
        ASSERT_TRUE(e.ok()) << label(t, r, per) << ": " << e.message();
        results[rank].push_back(std::move(out));
      }
  });
  size_t k = 0;
  for (MtcElementType t : kTypes)
    for (MtcReduction r : kReductions) {
      for (int rank = 0; rank < n; ++rank)
        for (size_t i = 0; i < per; ++i) {
          const size_t at = size_t(rank) * per + i; // this rank's block
          double expected = valueOf(t, 0, at);
          for (int s = 1; s < n; ++s)
            expected = reduce(r, expected, valueOf(t, s, at));
          ASSERT_EQ(get(t, results[rank][k], i), expected)
              << label(t, r, per) << ", rank " << rank << ", element " << i;
        }
      ++k;
    }
}

TEST_P(GlooTypes, InexactHalfSumsAgreeBitwiseAndNaNWins) {
  const int n = this->n();
  const size_t count = 513;
  std::vector<std::vector<uint16_t>> bf(n), half(n), maxed(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "halves");
    ASSERT_TRUE(comm);
    bf[rank].resize(count);
    half[rank].resize(count);
    for (size_t i = 0; i < count; ++i) {
      float v = 1.0f / float(i + 1 + rank) * (i % 2 ? -1.0f : 1.0f);
      bf[rank][i] = toBf16(v);
      half[rank][i] = floatToF16(v);
    }
    ASSERT_TRUE(comm->allReduce(bf[rank].data(), count, MTC_BF16, MTC_SUM).ok());
    ASSERT_TRUE(comm->allReduce(half[rank].data(), count, MTC_F16, MTC_SUM).ok());
    // max with a NaN on one rank: NaN everywhere for that element.
    maxed[rank].assign(4, toBf16(float(rank)));
    if (rank == n - 1)
      maxed[rank][2] = toBf16(std::nanf(""));
    ASSERT_TRUE(comm->allReduce(maxed[rank].data(), 4, MTC_BF16, MTC_MAX).ok());
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(bf[r], bf[0]) << "rank " << r;
    EXPECT_EQ(half[r], half[0]) << "rank " << r;
    EXPECT_EQ(fromBf16(maxed[r][0]), float(n - 1));
    EXPECT_TRUE(std::isnan(fromBf16(maxed[r][2]))) << "rank " << r;
  }
  // Rounded once per ring step: close to the exact sum (bf16 keeps 8 bits).
  for (size_t i = 0; i < count; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      double v = 1.0 / double(i + 1 + r);
      exact += i % 2 ? -v : v;
      magnitude += v;
    }
    ASSERT_NEAR(fromBf16(bf[0][i]), exact, magnitude * n * 0x1p-8) << i;
    ASSERT_NEAR(f16ToFloat(half[0][i]), exact, magnitude * n * 0x1p-11 + 0x1p-24 * n) << i;
  }
}

TEST_P(GlooTypes, GathersMoveEveryTypeUnchanged) {
  const int n = this->n();
  const size_t per = 7;
  std::vector<std::vector<std::vector<uint8_t>>> gathered(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "gtypes");
    ASSERT_TRUE(comm);
    for (MtcElementType t : kTypes) {
      std::vector<uint8_t> in = bufferOf(t, rank, per), out(per * n * elementSize(t));
      ASSERT_TRUE(comm->allGather(in.data(), out.data(), per, t).ok()) << elementTypeName(t);
      gathered[rank].push_back(std::move(out));
    }
  });
  for (int rank = 0; rank < n; ++rank)
    for (size_t k = 0; k < std::size(kTypes); ++k)
      for (int s = 0; s < n; ++s)
        for (size_t i = 0; i < per; ++i)
          ASSERT_EQ(get(kTypes[k], gathered[rank][k], s * per + i), valueOf(kTypes[k], s, i))
              << elementTypeName(kTypes[k]) << " rank " << rank;
}

} // namespace
} // namespace mtc::rt::test
