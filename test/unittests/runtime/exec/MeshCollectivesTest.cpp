//===- MeshCollectivesTest.cpp - The kernels' collectives and the rank mesh -===//
//
// Ranks as threads over loopback (../comm/CommTestUtil.h). The six C functions compiled
// kernels import run with a MeshCall in their kernel context on 2 and 4 ranks: sums (f32,
// f64) bitwise equal on every rank, max, gather, reduce-scatter and all-to-all block order
// (and the all-to-all's bytes as the compiler predicts them), the ring shift, coordinates;
// the sticky error after a peer dies or stops answering (zeros, no more communication, one
// message naming the function, the axis and the rank); calls without a mesh (no context, a
// context of another version), two calls at once, and bad arguments. RankMesh:
// communicators per axis, data-parallel and model groups for tp2 x dp2, tp4 and two axes, and
// shards gathered into the whole tensors of a single-rank run.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/support/Safetensors.h"

#include "../comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>

namespace mtc::rt::test {
namespace {

template <class T> bool sameBits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Values of varied sign and magnitude, so that the summation order matters.
double valueOf(int rank, size_t i) {
  uint64_t x = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  double u = double(x >> 11) * 0x1.0p-53 * 2 - 1;
  return u * std::pow(10.0, double(int(i % 7) - 3));
}

template <class T> std::vector<T> inputOf(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<T>(valueOf(rank, i));
  return v;
}

/// One axis `tp` over all n ranks of `comm`.
MeshContext oneAxis(Communicator *comm, int worldRank) {
  MeshContext m;
  m.worldRank = worldRank;
  m.axes.push_back(MeshAxisGroup{"tp", comm->size(), comm->rank(), comm});
  return m;
}

class MeshCollectives : public ::testing::TestWithParam<int> {
protected:
  int n() const { return GetParam(); }
  TestJob job;
};

INSTANTIATE_TEST_SUITE_P(Ranks, MeshCollectives, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

TEST_P(MeshCollectives, AllReduceSum) {
  const int n = this->n();
  const size_t count = 1001;
  std::vector<std::vector<float>> f32(n), gloo(n);
  std::vector<std::vector<double>> f64(n);
  std::vector<uint64_t> bytes(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "sum");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<float> in = inputOf<float>(rank, count);
    f32[rank].assign(count, -1.0f);
    mtc_all_reduce(&context, 0, MTC_F32, MTC_SUM, in.data(), f32[rank].data(), int64_t(count));
    std::vector<double> in64 = inputOf<double>(rank, count);
    f64[rank].assign(count, -1.0);
    mtc_all_reduce(&context, 0, MTC_F64, MTC_SUM, in64.data(), f64[rank].data(), int64_t(count));
    EXPECT_TRUE(scope.ok()) << scope.error().message();
    EXPECT_EQ(in, inputOf<float>(rank, count)) << "the input is not touched";
    // The same bits as the communicator's own all-reduce.
    gloo[rank] = in;
    ASSERT_TRUE(comm->allReduce(gloo[rank].data(), count, MTC_F32, MTC_SUM).ok());
    bytes[rank] = comm->counters().bytesSentBy(CollectiveKind::AllReduce);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(sameBits(f32[r], f32[0])) << "rank " << r;
    EXPECT_TRUE(sameBits(f64[r], f64[0])) << "rank " << r;
    EXPECT_TRUE(sameBits(f32[r], gloo[r])) << "rank " << r;
    EXPECT_GT(bytes[r], 0u) << "counted by the communicator";
  }
  for (size_t i = 0; i < count; ++i) {
    double sum = 0, mag = 0;
    for (int r = 0; r < n; ++r)
      sum += valueOf(r, i), mag += std::fabs(valueOf(r, i));
    ASSERT_NEAR(f32[0][i], sum, 1e-6 * mag + 1e-30) << "element " << i;
    ASSERT_NEAR(f64[0][i], sum, 1e-14 * mag + 1e-300) << "element " << i;
  }
}

TEST_P(MeshCollectives, AllReduceMax) {
  const int n = this->n();
  const size_t count = 257;
  std::vector<std::vector<float>> f32(n);
  std::vector<std::vector<double>> f64(n);
  std::vector<std::vector<BFloat16>> bf16(n);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "max");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<float> in = inputOf<float>(rank, count);
    if (rank == n - 1)
      in[5] = nan; // a NaN wins
    f32[rank].assign(count, 0.0f);
    mtc_all_reduce(&context, 0, MTC_F32, MTC_MAX, in.data(), f32[rank].data(), int64_t(count));
    std::vector<double> in64 = inputOf<double>(rank, count);
    f64[rank].assign(count, 0.0);
    mtc_all_reduce(&context, 0, MTC_F64, MTC_MAX, in64.data(), f64[rank].data(), int64_t(count));
    // Mixed precision's bf16 activations: compared as values, not as 16-bit integers.
    std::vector<BFloat16> in16;
    for (float x : in)
      in16.push_back(floatToBf16(x));
    bf16[rank].assign(count, BFloat16{});
    mtc_all_reduce(&context, 0, MTC_BF16, MTC_MAX, in16.data(), bf16[rank].data(),
                   int64_t(count));
    EXPECT_TRUE(scope.ok()) << scope.error().message();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(sameBits(f32[r], f32[0])) << "rank " << r;
    EXPECT_TRUE(sameBits(f64[r], f64[0])) << "rank " << r;
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(bf16[r][i].bits, bf16[0][i].bits) << "rank " << r << " element " << i;
  }
  for (size_t i = 0; i < count; ++i) {
    float m = -INFINITY;
    double m64 = -INFINITY;
    for (int r = 0; r < n; ++r) {
      m = std::max(m, float(valueOf(r, i)));
      m64 = std::max(m64, valueOf(r, i));
    }
    if (i == 5) {
      EXPECT_TRUE(std::isnan(f32[0][i]));
      EXPECT_TRUE(std::isnan(bf16ToFloat(bf16[0][i])));
    } else {
      ASSERT_EQ(f32[0][i], m) << "element " << i;
      ASSERT_EQ(bf16ToFloat(bf16[0][i]), bf16ToFloat(floatToBf16(m))) << "element " << i;
    }
    ASSERT_EQ(f64[0][i], m64) << "element " << i;
  }
}

TEST_P(MeshCollectives, AllGatherAndReduceScatterBlocks) {
  const int n = this->n();
  const size_t count = 37;
  std::vector<std::vector<float>> gathered(n), scattered(n);
  std::vector<std::vector<double>> gathered64(n), scattered64(n);
  std::vector<int64_t> coordinate(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "blocks");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    coordinate[rank] = mtc_mesh_coordinate(&context, 0);
    std::vector<float> in = inputOf<float>(rank, count);
    gathered[rank].assign(count * n, -1.0f);
    mtc_all_gather(&context, 0, MTC_F32, in.data(), gathered[rank].data(), int64_t(count));
    std::vector<double> in64 = inputOf<double>(rank, count);
    gathered64[rank].assign(count * n, -1.0);
    mtc_all_gather(&context, 0, MTC_F64, in64.data(), gathered64[rank].data(), int64_t(count));
    // Reduce-scatter of integers (exact sums): element i of block c of rank r is
    // 1000 r + 10 c + i % 7.
    std::vector<float> rs(count * n);
    std::vector<double> rs64(count * n);
    for (int c = 0; c < n; ++c)
      for (size_t i = 0; i < count; ++i)
        rs[c * count + i] = rs64[c * count + i] = 1000.0 * rank + 10.0 * c + double(i % 7);
    scattered[rank].assign(count, -1.0f);
    mtc_reduce_scatter(&context, 0, MTC_F32, rs.data(), scattered[rank].data(), int64_t(count));
    scattered64[rank].assign(count, -1.0);
    mtc_reduce_scatter(&context, 0, MTC_F64, rs64.data(), scattered64[rank].data(), int64_t(count));
    EXPECT_TRUE(scope.ok()) << scope.error().message();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(coordinate[r], r);
    for (int c = 0; c < n; ++c) {
      std::vector<float> block(gathered[r].begin() + c * count,
                               gathered[r].begin() + (c + 1) * count);
      EXPECT_TRUE(sameBits(block, inputOf<float>(c, count))) << "rank " << r << " block " << c;
      std::vector<double> block64(gathered64[r].begin() + c * count,
                                  gathered64[r].begin() + (c + 1) * count);
      EXPECT_TRUE(sameBits(block64, inputOf<double>(c, count))) << "rank " << r << " block " << c;
    }
    for (size_t i = 0; i < count; ++i) {
      double expected = 0;
      for (int s = 0; s < n; ++s)
        expected += 1000.0 * s + 10.0 * r + double(i % 7);
      ASSERT_EQ(scattered[r][i], float(expected)) << "rank " << r << " element " << i;
      ASSERT_EQ(scattered64[r][i], expected) << "rank " << r << " element " << i;
    }
  }
}

TEST_P(MeshCollectives, AllToAllMovesBlockCToCoordinateC) {
  const int n = this->n();
  const size_t count = 37; // elements per block
  std::vector<std::vector<float>> out(n);
  std::vector<std::vector<double>> out64(n);
  std::vector<uint64_t> bytes(n);
  std::vector<char> untouched(n); // not vector<bool>: the ranks write concurrently
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "alltoall");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    // Element i of block c of rank r: 1000 r + 10 c + i % 7.
    std::vector<float> in(count * n);
    std::vector<double> in64(count * n);
    for (int c = 0; c < n; ++c)
      for (size_t i = 0; i < count; ++i)
        in[c * count + i] = in64[c * count + i] = 1000.0 * rank + 10.0 * c + double(i % 7);
    const std::vector<float> before = in;
    out[rank].assign(count * n, -1.0f);
    mtc_all_to_all(&context, 0, MTC_F32, in.data(), out[rank].data(), int64_t(count));
    out64[rank].assign(count * n, -1.0);
    mtc_all_to_all(&context, 0, MTC_F64, in64.data(), out64[rank].data(), int64_t(count));
    EXPECT_TRUE(scope.ok()) << scope.error().message();
    untouched[rank] = in == before;
    bytes[rank] = comm->counters().bytesSentBy(CollectiveKind::AllToAll);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(untouched[r]) << "rank " << r << ": the input is not touched";
    // Block s of rank r's output is block r of rank s's input.
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < count; ++i) {
        double expected = 1000.0 * s + 10.0 * r + double(i % 7);
        ASSERT_EQ(out[r][s * count + i], float(expected)) << "rank " << r << " block " << s;
        ASSERT_EQ(out64[r][s * count + i], expected) << "rank " << r << " block " << s;
      }
    // What the compiler predicts for mtp.all_to_all (compiler/sharding/CommunicationVolume.cpp):
    // (n - 1) / n of the local input's bytes, per call.
    uint64_t localBytes = count * n * (sizeof(float) + sizeof(double));
    EXPECT_EQ(bytes[r], (n - 1) * localBytes / n) << "rank " << r;
  }
}

// Ring attention's exchange: every rank's block goes `offset` ranks further around the ring
// (f32 and f64, offsets 1 and -1), or, without rotating, stops at the ends (zeros arrive
// where no rank is before). Each rotating shift sends the block once.
TEST_P(MeshCollectives, ShiftPassesBlocksAroundTheRing) {
  const int n = this->n();
  const size_t count = 37;
  std::vector<std::vector<float>> next(n), previous(n), open(n);
  std::vector<std::vector<double>> next64(n);
  std::vector<uint64_t> bytes(n);
  std::vector<char> ok(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "shift");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<float> in(count);
    std::vector<double> in64(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = in64[i] = 1000.0 * rank + double(i);
    next[rank].assign(count, -1.0f);
    mtc_shift(&context, 0, MTC_F32, 1, 1, in.data(), next[rank].data(), int64_t(count));
    bytes[rank] = comm->counters().bytesSentBy(CollectiveKind::SendRecv);
    next64[rank].assign(count, -1.0);
    mtc_shift(&context, 0, MTC_F64, 1, 1, in64.data(), next64[rank].data(), int64_t(count));
    previous[rank].assign(count, -1.0f);
    mtc_shift(&context, 0, MTC_F32, -1, 1, in.data(), previous[rank].data(), int64_t(count));
    open[rank].assign(count, -1.0f);
    mtc_shift(&context, 0, MTC_F32, 1, 0, in.data(), open[rank].data(), int64_t(count));
    ok[rank] = scope.ok();
    EXPECT_TRUE(scope.ok()) << scope.error().message();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(ok[r]);
    int from = (r + n - 1) % n, back = (r + 1) % n;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(next[r][i], float(1000.0 * from + double(i))) << "rank " << r;
      ASSERT_EQ(next64[r][i], 1000.0 * from + double(i)) << "rank " << r;
      ASSERT_EQ(previous[r][i], float(1000.0 * back + double(i))) << "rank " << r;
      ASSERT_EQ(open[r][i], r == 0 ? 0.0f : float(1000.0 * (r - 1) + double(i))) << "rank " << r;
    }
    // What the compiler predicts for a rotating mtp.shift: the local block's bytes.
    EXPECT_EQ(bytes[r], count * sizeof(float)) << "rank " << r;
  }
}

// A shift by as many ranks as the axis has reaches no other rank: an error naming it.
TEST_P(MeshCollectives, ShiftRefusesAnOffsetBeyondTheAxis) {
  const int n = this->n();
  std::vector<std::string> messages(n);
  std::vector<std::vector<float>> out(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "shift-bad");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<float> in(3, 1.0f);
    out[rank].assign(3, -1.0f);
    mtc_shift(&context, 0, MTC_F32, n, 1, in.data(), out[rank].data(), 3);
    messages[rank] = scope.error().message();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(messages[r].find("mtc_shift"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find("is not a step to another rank"), std::string::npos)
        << messages[r];
    EXPECT_EQ(out[r], std::vector<float>(3, 0.0f)) << "rank " << r;
  }
}

// The all-to-all of expert slots moves only the filled ones, there (tokens' ranks to the
// experts' ranks: blocks [slot][expert]) and back (blocks [expert][slot]): 3 slots per rank
// and 2 experts per rank, rank r having filled (r + e) % 5 slots of expert e (4 is more than
// its 3 slots: clamped). Slots past the counts hold garbage that must not arrive: they are
// zero in the output. The bytes sent are the counts' exchange and the filled rows.
TEST_P(MeshCollectives, AllToAllFilledMovesOnlyFilledSlots) {
  const int n = this->n();
  const int64_t slots = 3, perRank = 2, row = 2, experts = perRank * n;
  auto filledBy = [&](int rank, int64_t expert) {
    return std::min<int64_t>((rank + expert) % 5, slots);
  };
  auto there = [](int from, int to, int64_t s, int64_t e, int64_t i) {
    return float(1000 * from + 100 * to + 10 * s + 2 * e + i);
  };
  auto back = [](int from, int to, int64_t e, int64_t s, int64_t i) {
    return float(-1000 * from - 100 * to - 10 * e - 2 * s - i);
  };
  const size_t count = size_t(n * slots * perRank * row);
  std::vector<std::vector<float>> out(n), returned(n);
  std::vector<uint64_t> bytes(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "alltoallfilled");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<int64_t> counts(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e)
      counts[size_t(e)] = (rank + e) % 5;
    // There: block p [slot][expert of p's part].
    std::vector<float> in(count), scratch(count);
    for (int p = 0; p < n; ++p)
      for (int64_t s = 0; s < slots; ++s)
        for (int64_t e = 0; e < perRank; ++e)
          for (int64_t i = 0; i < row; ++i)
            in[size_t(((p * slots + s) * perRank + e) * row + i)] =
                s < filledBy(rank, p * perRank + e) ? there(rank, p, s, e, i) : 777.0f;
    out[rank].assign(count, -1.0f);
    mtc_all_to_all_filled(&context, 0, MTC_F32, in.data(), out[rank].data(), scratch.data(),
                          counts.data(), /*slots_first=*/1, slots, perRank, row);
    // Back: block p [expert of this rank][slot of p's part].
    std::vector<float> in2(count);
    for (int p = 0; p < n; ++p)
      for (int64_t e = 0; e < perRank; ++e)
        for (int64_t s = 0; s < slots; ++s)
          for (int64_t i = 0; i < row; ++i)
            in2[size_t(((p * perRank + e) * slots + s) * row + i)] =
                s < filledBy(p, rank * perRank + e) ? back(rank, p, e, s, i) : 777.0f;
    returned[rank].assign(count, -1.0f);
    mtc_all_to_all_filled(&context, 0, MTC_F32, in2.data(), returned[rank].data(),
                          scratch.data(), counts.data(), /*slots_first=*/0, perRank, slots, row);
    EXPECT_TRUE(scope.ok()) << scope.error().message();
    bytes[rank] = comm->counters().bytesSentBy(CollectiveKind::AllToAll);
  });
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p)
      for (int64_t s = 0; s < slots; ++s)
        for (int64_t e = 0; e < perRank; ++e)
          for (int64_t i = 0; i < row; ++i) {
            // There: from token rank p, the slots it filled for expert r * perRank + e.
            bool filled = s < filledBy(p, r * perRank + e);
            ASSERT_EQ(out[r][size_t(((p * slots + s) * perRank + e) * row + i)],
                      filled ? there(p, r, s, e, i) : 0.0f)
                << "rank " << r << " from " << p << " slot " << s << " expert " << e;
            // Back: from experts rank p, the slots this rank filled for its expert e.
            bool mine = s < filledBy(r, p * perRank + e);
            ASSERT_EQ(returned[r][size_t(((p * perRank + e) * slots + s) * row + i)],
                      mine ? back(p, r, e, s, i) : 0.0f)
                << "rank " << r << " back from " << p << " expert " << e << " slot " << s;
          }
    // Per call, the counts to every other rank; then the filled rows this rank sent
    // (there: its own to p's experts; back: p's to this rank's experts, counted as p's).
    uint64_t sentRows = 0;
    for (int p = 0; p < n; ++p)
      if (p != r)
        for (int64_t s = 0; s < slots; ++s)
          for (int64_t e = 0; e < perRank; ++e)
            sentRows += (s < filledBy(r, p * perRank + e)) + (s < filledBy(p, r * perRank + e));
    EXPECT_EQ(bytes[r], 2 * (n - 1) * perRank * sizeof(int64_t) + sentRows * row * sizeof(float))
        << "rank " << r;
  }
}

// Integer tensors (token ids, routing indices) travel as they are: gathered, exchanged and
// reduced (sum, max) exactly, also beyond what an f32 holds.
TEST_P(MeshCollectives, IntegersAreGatheredExchangedAndReduced) {
  const int n = this->n();
  const int64_t big = (int64_t(1) << 40) + 3; // not representable in f32 or i32
  std::vector<std::vector<int32_t>> gathered(n), exchanged(n);
  std::vector<std::vector<int64_t>> summed(n), maxima(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "integers");
    ASSERT_TRUE(comm);
    MeshContext mesh = oneAxis(comm.get(), rank);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<int32_t> ids(n);
    for (int c = 0; c < n; ++c)
      ids[c] = 100 * rank + c;
    gathered[rank].assign(n * n, -1);
    mtc_all_gather(&context, 0, MTC_I32, ids.data(), gathered[rank].data(), n);
    exchanged[rank].assign(n, -1);
    mtc_all_to_all(&context, 0, MTC_I32, ids.data(), exchanged[rank].data(), 1);
    std::vector<int64_t> wide = {big + rank, -rank};
    summed[rank].assign(2, 0);
    mtc_all_reduce(&context, 0, MTC_I64, MTC_SUM, wide.data(), summed[rank].data(), 2);
    maxima[rank].assign(2, 0);
    mtc_all_reduce(&context, 0, MTC_I64, MTC_MAX, wide.data(), maxima[rank].data(), 2);
    EXPECT_TRUE(scope.ok()) << scope.error().message();
  });
  for (int r = 0; r < n; ++r) {
    for (int s = 0; s < n; ++s) {
      for (int c = 0; c < n; ++c)
        EXPECT_EQ(gathered[r][s * n + c], 100 * s + c) << "rank " << r;
      EXPECT_EQ(exchanged[r][s], 100 * s + r) << "rank " << r << ": block r of rank s";
    }
    EXPECT_EQ(summed[r][0], n * big + n * (n - 1) / 2);
    EXPECT_EQ(summed[r][1], -n * (n - 1) / 2);
    EXPECT_EQ(maxima[r], (std::vector<int64_t>{big + n - 1, 0}));
  }
}

/// The last rank stays alive but stops participating: the others' first collective fails
/// within the timeout; it and every later one of the scope write zeros without waiting, and
/// the scope holds the first failure.
TEST_P(MeshCollectives, StickyErrorWhenAPeerStopsAnswering) {
  const int n = this->n();
  std::promise<void> othersDone;
  std::shared_future<void> done = othersDone.get_future().share();
  std::atomic<int> finished{0};
  std::vector<std::string> messages(n);
  std::vector<std::vector<float>> first(n), gathered(n), scattered(n), exchanged(n);
  std::vector<std::chrono::steady_clock::duration> later(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "silent", 500ms);
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    if (rank == n - 1) {
      done.wait();
      return;
    }
    MeshContext mesh = oneAxis(comm.get(), rank + 10); // world rank 10 + r in messages
    {
      MeshCall scope(mesh);
      MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
      std::vector<float> in(100, 1.0f);
      first[rank].assign(100, 7.0f);
      mtc_all_reduce(&context, 0, MTC_F32, MTC_SUM, in.data(), first[rank].data(), 100);
      EXPECT_FALSE(scope.ok());
      auto start = std::chrono::steady_clock::now();
      gathered[rank].assign(100 * n, 7.0f);
      mtc_all_gather(&context, 0, MTC_F32, in.data(), gathered[rank].data(), 100);
      std::vector<float> rs(100 * n, 1.0f);
      scattered[rank].assign(100, 7.0f);
      mtc_reduce_scatter(&context, 0, MTC_F32, rs.data(), scattered[rank].data(), 100);
      exchanged[rank].assign(100 * n, 7.0f);
      mtc_all_to_all(&context, 0, MTC_F32, rs.data(), exchanged[rank].data(), 100);
      later[rank] = std::chrono::steady_clock::now() - start;
      messages[rank] = scope.error().message();
      Error taken = scope.takeError();
      EXPECT_FALSE(taken.ok());
      EXPECT_TRUE(scope.ok());
    }
    if (++finished == n - 1)
      othersDone.set_value();
  });
  for (int r = 0; r + 1 < n; ++r) {
    EXPECT_NE(messages[r].find(concat("mtc_all_reduce (sum, 100 f32 elements) over mesh axis 'tp' "
                                      "(world rank ",
                                      10 + r, ", coordinate ", r, " of ", n, "): ")),
              std::string::npos)
        << messages[r];
    EXPECT_NE(messages[r].find("gloo allReduce"), std::string::npos) << messages[r];
    EXPECT_EQ(first[r], std::vector<float>(100, 0.0f)) << "rank " << r;
    EXPECT_EQ(gathered[r], std::vector<float>(100 * size_t(n), 0.0f)) << "rank " << r;
    EXPECT_EQ(scattered[r], std::vector<float>(100, 0.0f)) << "rank " << r;
    EXPECT_EQ(exchanged[r], std::vector<float>(100 * size_t(n), 0.0f)) << "rank " << r;
    EXPECT_LT(later[r], 100ms) << "later collectives must not communicate";
  }
}

TEST(MeshCollectivesTest, DeadPeerFailsTheCall) {
  TestJob job;
  std::string message;
  std::vector<double> out(8, 5.0);
  std::promise<void> died;
  std::shared_future<void> dead = died.get_future().share();
  runRanks(2, [&](int rank) {
    auto comm = job.connect(rank, 2, "dead", 500ms);
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    if (rank == 1) {
      comm.reset(); // dies: its connections close
      died.set_value();
      return;
    }
    dead.wait();
    MeshContext mesh = oneAxis(comm.get(), 0);
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<double> in(16, 1.0);
    mtc_reduce_scatter(&context, 0, MTC_F64, in.data(), out.data(), 8);
    message = scope.error().message();
  });
  EXPECT_EQ(message.rfind("mtc_reduce_scatter (sum, 8 f64 elements) over mesh axis 'tp' (world "
                          "rank 0, coordinate 0 of 2): ",
                          0),
            0u)
      << message;
  EXPECT_EQ(out, std::vector<double>(8, 0.0));
}

TEST(MeshCollectivesTest, WithoutAMeshZerosAndCoordinateZero) {
  // No context, a context without a mesh, and a context of another version of the ABI.
  MeshContext mesh;
  mesh.axes = {MeshAxisGroup{"tp", 1, 3, nullptr}};
  MeshCall meshCall(mesh);
  MtcKernelContext noMesh = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  MtcKernelContext otherVersion = mtc_kernel_context(&meshCall, nullptr, nullptr, 0);
  otherVersion.version = MTC_KERNEL_CONTEXT_VERSION + 1;
  MtcKernelContext otherSize = mtc_kernel_context(&meshCall, nullptr, nullptr, 0);
  otherSize.size -= 8;
  for (MtcKernelContext *context :
       {(MtcKernelContext *)nullptr, &noMesh, &otherVersion, &otherSize}) {
    std::vector<float> in(6, 3.0f), out(6, 9.0f);
    mtc_all_reduce(context, 0, MTC_F32, MTC_SUM, in.data(), out.data(), 6);
    EXPECT_EQ(out, std::vector<float>(6, 0.0f));
    out.assign(6, 9.0f);
    mtc_all_gather(context, 0, MTC_F32, in.data(), out.data(), 3);
    EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 9, 9, 9})) << "count elements";
    std::vector<double> in64(4, 3.0), out64(4, 9.0);
    mtc_reduce_scatter(context, 0, MTC_F64, in64.data(), out64.data(), 4);
    EXPECT_EQ(out64, std::vector<double>(4, 0.0));
    out.assign(6, 9.0f);
    mtc_all_to_all(context, 0, MTC_F32, in.data(), out.data(), 2);
    EXPECT_EQ(out, (std::vector<float>{0, 0, 9, 9, 9, 9})) << "count elements";
    EXPECT_EQ(mtc_mesh_coordinate(context, 0), 0);
    EXPECT_EQ(mtc_mesh_coordinate(context, 3), 0);
  }
  EXPECT_TRUE(meshCall.ok()) << "a context of another version is not read";
  MtcKernelContext good = mtc_kernel_context(&meshCall, nullptr, nullptr, 0);
  EXPECT_EQ(mtc_mesh_coordinate(&good, 0), 3);
}

TEST(MeshCollectivesTest, AxesOfOneRankCopyAndCallsAreIndependent) {
  // No communicator is needed along an axis of size 1.
  MeshContext mesh;
  mesh.worldRank = 3;
  mesh.axes = {MeshAxisGroup{"tp", 1, 0, nullptr}, MeshAxisGroup{"cp", 1, 0, nullptr}};
  MeshCall first(mesh);
  MtcKernelContext context = mtc_kernel_context(&first, nullptr, nullptr, 0);
  std::vector<float> in{1, -2, 3}, out(3);
  mtc_all_reduce(&context, 1, MTC_F32, MTC_MAX, in.data(), out.data(), 3);
  EXPECT_EQ(out, in);
  std::vector<double> in64{1.5, 2.5}, out64(2);
  mtc_all_gather(&context, 0, MTC_F64, in64.data(), out64.data(), 2);
  EXPECT_EQ(out64, in64);
  mtc_reduce_scatter(&context, 1, MTC_F64, in64.data(), out64.data(), 2);
  EXPECT_EQ(out64, in64);
  out64.assign(2, 0.0);
  mtc_all_to_all(&context, 0, MTC_F64, in64.data(), out64.data(), 2);
  EXPECT_EQ(out64, in64);
  EXPECT_EQ(mtc_mesh_coordinate(&context, 1), 0);
  // A second call in progress at the same time, on the same thread, with another mesh.
  MeshContext other;
  other.axes = {MeshAxisGroup{"tp", 1, 0, nullptr}};
  MeshCall second(other);
  MtcKernelContext secondContext = mtc_kernel_context(&second, nullptr, nullptr, 0);
  mtc_mesh_coordinate(&secondContext, 1); // out of range for its mesh: fails that call only
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE(first.ok()) << first.error().message();
  mtc_all_reduce(&context, 1, MTC_F32, MTC_SUM, in.data(), out.data(), 3);
  EXPECT_EQ(out, in);
}

/// A MeshMemory over this process's memory that logs what the collectives ask of it, the
/// CUDA trainer's device memory stand-in: "copy", "clear", "sync".
class LoggedMemory final : public MeshMemory {
public:
  std::vector<std::string> log;
  bool failSync = false;
  Error synchronize() override {
    log.push_back("sync");
    return failSync ? makeError("the device stream failed") : Error::success();
  }
  Error copy(void *out, const void *in, size_t bytes) override {
    log.push_back("copy");
    std::memcpy(out, in, bytes);
    return Error::success();
  }
  Error clear(void *out, size_t bytes) override {
    log.push_back("clear");
    std::memset(out, 0, bytes);
    return Error::success();
  }
};

TEST(MeshCollectivesTest, DeviceMemoryCopiesAndWaitsBeforeEveryOperation) {
  TestJob job;
  const size_t count = 5;
  std::vector<std::vector<std::string>> logs(2);
  std::vector<std::vector<float>> sums(2), maxima(2), gathered(2);
  runRanks(2, [&](int rank) {
    auto comm = job.connect(rank, 2, "memory");
    ASSERT_TRUE(comm);
    LoggedMemory memory;
    MeshContext mesh = oneAxis(comm.get(), rank);
    mesh.memory = &memory;
    MeshCall scope(mesh);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    std::vector<float> in = inputOf<float>(rank, count);
    sums[rank].assign(count, -1.0f);
    mtc_all_reduce(&context, 0, MTC_F32, MTC_SUM, in.data(), sums[rank].data(), int64_t(count));
    // The maximum through the communicator's own max all-reduce, not a host reduction.
    maxima[rank].assign(count, -1.0f);
    mtc_all_reduce(&context, 0, MTC_F32, MTC_MAX, in.data(), maxima[rank].data(), int64_t(count));
    gathered[rank].assign(2 * count, -1.0f);
    mtc_all_gather(&context, 0, MTC_F32, in.data(), gathered[rank].data(), int64_t(count));
    EXPECT_TRUE(scope.ok()) << scope.error().message();
    logs[rank] = memory.log;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(logs[r], (std::vector<std::string>{"copy", "sync", "copy", "sync", "sync"}))
        << "rank " << r;
    for (size_t i = 0; i < count; ++i) {
      EXPECT_EQ(sums[r][i], float(valueOf(0, i)) + float(valueOf(1, i))) << "element " << i;
      EXPECT_EQ(maxima[r][i], std::max(float(valueOf(0, i)), float(valueOf(1, i))));
      EXPECT_EQ(gathered[r][i], float(valueOf(0, i)));
      EXPECT_EQ(gathered[r][count + i], float(valueOf(1, i)));
    }
  }
}

TEST(MeshCollectivesTest, DeviceMemoryFailuresClearThroughIt) {
  // An axis of one rank copies through the memory; a failed wait fails the call and clears
  // the output through the memory; the filled-slot exchange refuses device buffers.
  MeshContext mesh;
  mesh.axes = {MeshAxisGroup{"tp", 1, 0, nullptr}};
  LoggedMemory memory;
  mesh.memory = &memory;
  {
    MeshCall call(mesh);
    MtcKernelContext context = mtc_kernel_context(&call, nullptr, nullptr, 0);
    std::vector<float> in{1, 2, 3}, out(3);
    mtc_reduce_scatter(&context, 0, MTC_F32, in.data(), out.data(), 3);
    EXPECT_EQ(out, in);
    EXPECT_EQ(memory.log, std::vector<std::string>{"copy"});
    EXPECT_TRUE(call.ok()) << call.error().message();
  }
  TestJob job;
  std::vector<std::string> messages(2);
  std::vector<std::vector<float>> outs(2);
  runRanks(2, [&](int rank) {
    auto comm = job.connect(rank, 2, "failing");
    ASSERT_TRUE(comm);
    LoggedMemory failing;
    failing.failSync = true;
    MeshContext two = oneAxis(comm.get(), rank);
    two.memory = &failing;
    MeshCall call(two);
    MtcKernelContext context = mtc_kernel_context(&call, nullptr, nullptr, 0);
    std::vector<float> in{1, 2}, out{7, 7};
    mtc_all_reduce(&context, 0, MTC_F32, MTC_SUM, in.data(), out.data(), 2);
    outs[rank] = out;
    messages[rank] = call.error().message();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outs[r], (std::vector<float>{0, 0}));
    EXPECT_NE(messages[r].find("the device stream failed"), std::string::npos) << messages[r];
  }
  MeshCall call(mesh);
  MtcKernelContext context = mtc_kernel_context(&call, nullptr, nullptr, 0);
  std::vector<float> in(4, 1.0f), out(4, 9.0f), scratch(4);
  int64_t counts[1] = {1};
  mtc_all_to_all_filled(&context, 0, MTC_F32, in.data(), out.data(), scratch.data(), counts, 1, 2,
                        1, 2);
  EXPECT_NE(call.error().message().find("does not run on device buffers"), std::string::npos)
      << call.error().message();
  EXPECT_EQ(out, std::vector<float>(4, 0.0f));
}

TEST(MeshCollectivesTest, BadArgumentsFailTheCall) {
  MeshContext mesh;
  mesh.worldRank = 5;
  mesh.axes = {MeshAxisGroup{"tp", 1, 0, nullptr}};
  std::vector<float> in(4, 1.0f), out(4, 9.0f);
  auto firstError = [&](auto call) {
    MeshCall meshCall(mesh);
    MtcKernelContext context = mtc_kernel_context(&meshCall, nullptr, nullptr, 0);
    out.assign(4, 9.0f);
    call(&context);
    std::string message = meshCall.error().message();
    // Sticky: a valid call afterwards only writes zeros.
    std::vector<float> more(4, 9.0f);
    mtc_all_reduce(&context, 0, MTC_F32, MTC_SUM, in.data(), more.data(), 4);
    EXPECT_EQ(more, std::vector<float>(4, 0.0f));
    EXPECT_EQ(meshCall.error().message(), message) << "the first failure sticks";
    return message;
  };
  EXPECT_EQ(firstError([&](MtcKernelContext *c) {
              mtc_all_reduce(c, 2, MTC_F32, MTC_SUM, in.data(), out.data(), 4);
            }),
            "mtc_all_reduce (sum, 4 f32 elements) on world rank 5: mesh axis 2 is out of range "
            "(the plan's mesh has 1 axis)");
  EXPECT_EQ(out, std::vector<float>(4, 0.0f));
  EXPECT_EQ(firstError([&](MtcKernelContext *c) {
              mtc_all_reduce(c, 0, MTC_F32, 7, in.data(), out.data(), 4);
            }),
            "mtc_all_reduce (unknown op, 4 f32 elements) over mesh axis 'tp' (world rank 5, "
            "coordinate 0 of 1): unknown reduction 7 (0 = sum, 1 = max)");
  EXPECT_EQ(
      firstError([&](MtcKernelContext *c) { mtc_all_gather(c, 0, 6, in.data(), out.data(), 4); }),
      "mtc_all_gather (concatenation, 4 an unknown dtype elements) over mesh axis 'tp' "
      "(world rank 5, coordinate 0 of 1): unknown dtype 6 (0 = f32, 1 = f64, 2 = bf16, "
      "3 = f16, 4 = i32, 5 = i64)");
  EXPECT_EQ(out, std::vector<float>(4, 9.0f)) << "an unknown dtype has no size to zero";
  EXPECT_EQ(firstError([&](MtcKernelContext *c) {
              mtc_reduce_scatter(c, 0, MTC_F32, in.data(), out.data(), -1);
            }),
            "mtc_reduce_scatter (sum, -1 f32 elements) over mesh axis 'tp' (world rank 5, "
            "coordinate 0 of 1): negative element count -1");
  EXPECT_EQ(firstError([&](MtcKernelContext *c) {
              mtc_all_to_all(c, 3, MTC_F32, in.data(), out.data(), 2);
            }),
            "mtc_all_to_all (exchange of blocks, 2 f32 elements) on world rank 5: mesh axis 3 "
            "is out of range (the plan's mesh has 1 axis)");
  EXPECT_EQ(out, (std::vector<float>{0, 0, 9, 9})) << "count elements: the axis is unknown";
  EXPECT_EQ(firstError([&](MtcKernelContext *c) {
              mtc_all_to_all(c, 0, MTC_F32, in.data(), out.data(), -2);
            }),
            "mtc_all_to_all (exchange of blocks, -2 f32 elements) over mesh axis 'tp' (world "
            "rank 5, coordinate 0 of 1): negative element count -2");
  EXPECT_EQ(firstError([&](MtcKernelContext *c) { mtc_mesh_coordinate(c, -1); }),
            "mtc_mesh_coordinate on world rank 5: mesh axis -1 is out of range (the plan's mesh "
            "has 1 axis)");
  // An axis of size 2 without its communicator (a mesh not built for the plan).
  mesh.axes = {MeshAxisGroup{"tp", 2, 1, nullptr}};
  EXPECT_EQ(firstError([&](MtcKernelContext *c) {
              mtc_all_reduce(c, 0, MTC_F32, MTC_SUM, in.data(), out.data(), 4);
            }),
            "mtc_all_reduce (sum, 4 f32 elements) over mesh axis 'tp' (world rank 5, coordinate "
            "1 of 2): no communicator for the axis (internal error: the mesh was not built for "
            "this plan)");
}

//===----------------------------------------------------------------------===//
// RankMesh
//===----------------------------------------------------------------------===//

/// w [rows=4, cols=6] (normal) split on `splitDim` over the axes, b [cols=6] replicated,
/// Adam moments of w and b.
Plan meshPlan(std::vector<MeshAxis> mesh, std::vector<DimSplit> wSplits) {
  Plan plan;
  plan.dir = "mesh.plan";
  plan.model = "mesh";
  plan.seed = 11;
  plan.mesh = std::move(mesh);
  ParamInfo w;
  w.name = "w";
  w.tensorId = 0;
  w.dims = {{"rows", 4}, {"cols", 6}};
  w.init = InitSpec{InitKind::Normal, {0.02}};
  w.layout.splits = std::move(wSplits);
  ParamInfo b;
  b.name = "b";
  b.tensorId = 1;
  b.dims = {{"cols", 6}};
  b.init = InitSpec{InitKind::Uniform, {-1, 1}};
  plan.params = {w, b};
  plan.states.push_back(StateInfo{"w.exp_avg", "w", 0, w.dims, PlanDType::F32});
  plan.states.push_back(StateInfo{"b.exp_avg", "b", 1, b.dims, PlanDType::F32});
  return plan;
}

/// What each rank saw.
struct Seen {
  MeshPlacement placement;
  std::vector<int> axisSizes, axisRanks;
  int dpSize = 0, dpRank = -1, groupSize = 0, groupRank = -1;
  std::vector<std::vector<float>> gatheredWorldRanks; // per axis: the world ranks along it
  double dpSum = 0;                                   // sum of world ranks over the dp group
  bool wholeMatches = false, shardsMatch = false;
  uint64_t bytes = 0;
};

void runMesh(TestJob &job, int n, const Plan &plan, std::vector<Seen> &seen,
             const std::string &prefix) {
  seen.assign(n, Seen());
  Expected<TrainingState> whole = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(whole.ok());
  // Make the states distinct from zero so that their gather is checked too.
  for (TrainingState::Tensor &t : whole->states)
    for (size_t i = 0; i < t.values.size(); ++i)
      t.values[i] = float(i) + 0.5f;
  runRanks(n, [&](int rank) {
    auto world = job.connect(rank, n, prefix);
    ASSERT_TRUE(world);
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    ASSERT_TRUE(mesh.ok()) << mesh.error().message();
    Seen &s = seen[rank];
    s.placement = mesh->placement();
    const MeshContext &ctx = mesh->context();
    EXPECT_EQ(ctx.worldRank, rank);
    MeshCall scope(ctx);
    MtcKernelContext context = mtc_kernel_context(&scope, nullptr, nullptr, 0);
    for (size_t a = 0; a < ctx.axes.size(); ++a) {
      const MeshAxisGroup &g = ctx.axes[a];
      EXPECT_EQ(g.name, plan.mesh[a].name);
      EXPECT_EQ(g.coordinate, s.placement.coordinates[a]);
      EXPECT_EQ(mtc_mesh_coordinate(&context, int64_t(a)), g.coordinate);
      s.axisSizes.push_back(g.comm ? g.comm->size() : 1);
      s.axisRanks.push_back(g.comm ? g.comm->rank() : 0);
      float me = float(rank);
      std::vector<float> all(size_t(g.size));
      mtc_all_gather(&context, int64_t(a), MTC_F32, &me, all.data(), 1);
      s.gatheredWorldRanks.push_back(all);
    }
    EXPECT_TRUE(scope.ok()) << scope.error().message();
    if (Communicator *dp = mesh->dataParallel()) {
      s.dpSize = dp->size();
      s.dpRank = dp->rank();
      double x = rank;
      ASSERT_TRUE(dp->allReduce(&x, 1, MTC_F64, MTC_SUM).ok());
      s.dpSum = x;
    }
    if (Communicator *group = mesh->modelGroup()) {
      s.groupSize = group->size();
      s.groupRank = group->rank();
    }
    // This rank's shards: initialised alone, or taken from the whole tensors; gathered back.
    Expected<TrainingState> local =
        TrainingState::initializeShards(plan, s.placement.coordinates, 1);
    ASSERT_TRUE(local.ok());
    local->states = shardState(plan, *whole, s.placement.coordinates)->states;
    Expected<TrainingState> taken = shardState(plan, *whole, s.placement.coordinates);
    ASSERT_TRUE(taken.ok()) << taken.error().message();
    s.shardsMatch = true;
    for (size_t i = 0; i < plan.params.size(); ++i)
      s.shardsMatch = s.shardsMatch && sameBits(taken->params[i].values, local->params[i].values) &&
                      taken->params[i].shape == local->params[i].shape;
    Expected<TrainingState> gathered = gatherState(plan, *local, *mesh);
    ASSERT_TRUE(gathered.ok()) << gathered.error().message();
    s.wholeMatches = true;
    for (size_t i = 0; i < plan.params.size(); ++i)
      s.wholeMatches = s.wholeMatches &&
                       sameBits(gathered->params[i].values, whole->params[i].values) &&
                       gathered->params[i].shape == whole->params[i].shape;
    for (size_t i = 0; i < plan.states.size(); ++i)
      s.wholeMatches = s.wholeMatches &&
                       sameBits(gathered->states[i].values, whole->states[i].values);
    s.bytes = mesh->bytesSent();
  });
}

TEST(RankMeshTest, Tp2Dp2) {
  TestJob job;
  Plan plan = meshPlan({{"tp", 2}}, {{1, {0}}}); // w split on cols
  std::vector<Seen> seen;
  runMesh(job, 4, plan, seen, "tp2dp2");
  for (int r = 0; r < 4; ++r) {
    const Seen &s = seen[r];
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_EQ(s.placement.coordinates, std::vector<int64_t>{r % 2});
    EXPECT_EQ(s.placement.dpIndex, r / 2);
    EXPECT_EQ(s.axisSizes, std::vector<int>{2});
    EXPECT_EQ(s.axisRanks, std::vector<int>{r % 2});
    // The tp group of rank r: the two ranks of its dp index, in coordinate order.
    EXPECT_EQ(s.gatheredWorldRanks[0], (std::vector<float>{float(r / 2 * 2), float(r / 2 * 2 + 1)}));
    EXPECT_EQ(s.dpSize, 2);
    EXPECT_EQ(s.dpRank, r / 2);
    EXPECT_EQ(s.dpSum, double(r % 2) + double(r % 2 + 2)); // ranks with the same tp coordinate
    EXPECT_EQ(s.groupSize, 2);
    EXPECT_EQ(s.groupRank, r % 2);
    EXPECT_TRUE(s.shardsMatch);
    EXPECT_TRUE(s.wholeMatches);
    EXPECT_GT(s.bytes, 0u);
  }
}

TEST(RankMeshTest, Tp4) {
  TestJob job;
  Plan plan = meshPlan({{"tp", 4}}, {{0, {0}}}); // w split on rows
  std::vector<Seen> seen;
  runMesh(job, 4, plan, seen, "tp4");
  for (int r = 0; r < 4; ++r) {
    const Seen &s = seen[r];
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_EQ(s.placement.coordinates, std::vector<int64_t>{r});
    EXPECT_EQ(s.placement.dpSize, 1);
    EXPECT_EQ(s.gatheredWorldRanks[0], (std::vector<float>{0, 1, 2, 3}));
    EXPECT_EQ(s.dpSize, 0) << "no data-parallel communicator for dp 1";
    EXPECT_EQ(s.groupSize, 4);
    EXPECT_TRUE(s.shardsMatch);
    EXPECT_TRUE(s.wholeMatches);
  }
}

TEST(RankMeshTest, TwoAxes) {
  TestJob job;
  // w [rows=4, cols=6]: rows over a, cols over b.
  Plan plan = meshPlan({{"a", 2}, {"b", 2}}, {{0, {0}}, {1, {1}}});
  plan.params[0].dims = {{"rows", 4}, {"cols", 6}};
  std::vector<Seen> seen;
  runMesh(job, 4, plan, seen, "ab");
  for (int r = 0; r < 4; ++r) {
    const Seen &s = seen[r];
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_EQ(s.placement.coordinates, (std::vector<int64_t>{r / 2, r % 2}));
    // Along a: the ranks with my b coordinate; along b: the ranks with my a coordinate.
    EXPECT_EQ(s.gatheredWorldRanks[0], (std::vector<float>{float(r % 2), float(2 + r % 2)}));
    EXPECT_EQ(s.gatheredWorldRanks[1], (std::vector<float>{float(r / 2 * 2), float(r / 2 * 2 + 1)}));
    EXPECT_TRUE(s.shardsMatch);
    EXPECT_TRUE(s.wholeMatches);
  }
}

TEST(RankMeshTest, OneRankAndErrors) {
  // No world: fine without a mesh or with a mesh of one rank; a mesh of 2 needs 2 ranks.
  Plan plan = meshPlan({}, {});
  Expected<RankMesh> none = RankMesh::create(plan, nullptr);
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_FALSE(none->partitioned());
  EXPECT_EQ(none->dataParallel(), nullptr);
  EXPECT_EQ(none->bytesSent(), 0u);
  Plan ones = meshPlan({{"tp", 1}}, {{1, {0}}});
  Expected<RankMesh> one = RankMesh::create(ones, nullptr);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->partitioned());
  EXPECT_EQ(one->context().axes.size(), 1u);
  Expected<RankMesh> two = RankMesh::create(meshPlan({{"tp", 2}}, {{1, {0}}}), nullptr);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().message(),
            "the plan partitions the model over a mesh of 2 ranks (tp=2), but the job has 1 "
            "rank: the number of ranks must be a multiple of 2 (data parallelism takes the "
            "rest)");
  // The whole state of an unpartitioned mesh is the local one.
  Expected<TrainingState> state = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(state.ok());
  Expected<TrainingState> gathered = gatherState(plan, *state, *none);
  ASSERT_TRUE(gathered.ok());
  EXPECT_TRUE(sameBits(gathered->params[0].values, state->params[0].values));
  // shardState checks the sizes.
  TrainingState wrong = *state;
  wrong.params[0].values.resize(3);
  Expected<TrainingState> bad = shardState(plan, wrong, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "tensor 'w' has 3 elements, but 24 whole");
}

} // namespace
} // namespace mtc::rt::test
