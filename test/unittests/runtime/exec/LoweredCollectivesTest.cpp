//===- LoweredCollectivesTest.cpp - compiled collectives on ranks ---------===//
//
// The functions of LoweredCollectives.mlir, compiled by mtc-codegen into a shared object at
// build time (MTC_LOWERED_COLLECTIVES), run on ranks as threads over loopback
// (../comm/CommTestUtil.h), each call with a MeshCall over its rank's communicator in its
// kernel context (as the Trainer calls kernels). Each rank passes its shard of a whole
// tensor whose values are known and must get back exactly its shard of the result layout:
// the compiler's transposes and the runtime's block exchange agree end to end, and the
// communicator counts the bytes the compiler predicts for the call (CommunicationVolume.cpp:
// (n - 1) / n of the local input for an all-to-all, the local input for a ring shift).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/MeshCollectives.h"

#include "../comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <array>
#include <functional>

namespace mtc::rt::test {
namespace {

/// A row-major f32 buffer of rank 3 and its MLIR memref descriptor ({allocated, aligned,
/// offset, sizes[3], strides[3]}).
class Buffer3 {
public:
  explicit Buffer3(std::array<int64_t, 3> sizes)
      : sizes(sizes), values(size_t(sizes[0] * sizes[1] * sizes[2]), -1.0f) {}
  float &at(int64_t i, int64_t j, int64_t k) {
    return values[size_t((i * sizes[1] + j) * sizes[2] + k)];
  }
  /// The descriptor of the values where they are now.
  void *descriptor() {
    auto data = reinterpret_cast<int64_t>(values.data());
    words = {data, data, 0, sizes[0], sizes[1], sizes[2], sizes[1] * sizes[2], sizes[2], 1};
    return words.data();
  }

private:
  std::array<int64_t, 3> sizes;
  std::vector<float> values;
  std::array<int64_t, 9> words{};
};

class LoweredCollectives : public ::testing::Test {
protected:
  void SetUp() override {
    library = ::dlopen(MTC_LOWERED_COLLECTIVES, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << ::dlerror();
  }
  void TearDown() override {
    if (library)
      ::dlclose(library);
  }

  MtcPackedEntry entry(const std::string &name) {
    return reinterpret_cast<MtcPackedEntry>(::dlsym(library, ("_mtc_packed_" + name).c_str()));
  }

  /// Calls `name` on `n` ranks along one mesh axis called `axis`: rank r's input is
  /// `input(r, i, j, k)` over `in`, and its result must be `expected(r, i, j, k)` over `out`;
  /// each rank sends `sent` bytes by collectives of `kind`.
  void expectOnRanks(const std::string &name, int n, const std::string &axis,
                     std::array<int64_t, 3> in, std::array<int64_t, 3> out,
                     std::function<float(int, int64_t, int64_t, int64_t)> input,
                     std::function<float(int, int64_t, int64_t, int64_t)> expected,
                     CollectiveKind kind, uint64_t sent) {
    MtcPackedEntry function = entry(name);
    ASSERT_NE(function, nullptr) << "no packed entry for " << name;
    std::vector<Buffer3> results(size_t(n), Buffer3{out});
    std::vector<std::string> errors(static_cast<size_t>(n));
    std::vector<uint64_t> bytes(static_cast<size_t>(n));
    runRanks(n, [&](int rank) {
      auto comm = job.connect(rank, n, name);
      ASSERT_TRUE(comm);
      MeshContext mesh;
      mesh.worldRank = rank;
      mesh.axes.push_back(MeshAxisGroup{axis, n, rank, comm.get()});
      MeshCall call(mesh);
      MtcKernelContext context = mtc_kernel_context(&call, nullptr, nullptr, 0);
      Buffer3 shard(in);
      for (int64_t i = 0; i < in[0]; ++i)
        for (int64_t j = 0; j < in[1]; ++j)
          for (int64_t k = 0; k < in[2]; ++k)
            shard.at(i, j, k) = input(rank, i, j, k);
      void *descriptors[] = {shard.descriptor(), results[size_t(rank)].descriptor()};
      function(&context, descriptors);
      errors[size_t(rank)] = call.error().message();
      bytes[size_t(rank)] = comm->counters().bytesSentBy(kind);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
      EXPECT_EQ(bytes[size_t(r)], sent) << "rank " << r;
      for (int64_t i = 0; i < out[0]; ++i)
        for (int64_t j = 0; j < out[1]; ++j)
          for (int64_t k = 0; k < out[2]; ++k)
            ASSERT_EQ(results[size_t(r)].at(i, j, k), expected(r, i, j, k))
                << name << ": rank " << r << " element [" << i << ", " << j << ", " << k << "]";
    }
  }

  TestJob job;
  void *library = nullptr;
};

float whole(int64_t i, int64_t j, int64_t k) { return float(100 * i + 10 * j + k); }

/// What an all-to-all of a local [a, b, c] f32 tensor sends on n ranks.
uint64_t allToAllBytes(int n, std::array<int64_t, 3> local) {
  return uint64_t(n - 1) * uint64_t(local[0] * local[1] * local[2]) * sizeof(float) / uint64_t(n);
}

TEST_F(LoweredCollectives, AllToAllMovesTheSplitFromOneInnerDimensionToAnother) {
  // [b=3, s=4, h=4] split along s over 2 ranks -> split along h.
  expectOnRanks(
      "all_to_all_s_to_h", 2, "tp", {3, 2, 4}, {3, 4, 2},
      [](int r, int64_t b, int64_t s, int64_t h) { return whole(b, r * 2 + s, h); },
      [](int r, int64_t b, int64_t s, int64_t h) { return whole(b, s, r * 2 + h); },
      CollectiveKind::AllToAll, allToAllBytes(2, {3, 2, 4}));
}

TEST_F(LoweredCollectives, AllToAllDispatchesCapacityToTheOutermostExperts) {
  // [experts=4, capacity=12, hidden=2] split along capacity over 4 ranks -> along experts.
  expectOnRanks(
      "all_to_all_capacity_to_experts", 4, "ep", {4, 3, 2}, {1, 12, 2},
      [](int r, int64_t e, int64_t c, int64_t h) { return whole(e, r * 3 + c, h); },
      [](int r, int64_t e, int64_t c, int64_t h) { return whole(r + e, c, h); },
      CollectiveKind::AllToAll, allToAllBytes(4, {4, 3, 2}));
}

TEST_F(LoweredCollectives, ShiftPassesEachRanksPartToTheNextAroundTheRing) {
  // [b=3, s=8, h=4] split along s over 4 ranks: rank r gets the part of rank r - 1 (mod 4),
  // sending its whole part once.
  expectOnRanks(
      "shift_around_cp", 4, "cp", {3, 2, 4}, {3, 2, 4},
      [](int r, int64_t b, int64_t s, int64_t h) { return whole(b, r * 2 + s, h); },
      [](int r, int64_t b, int64_t s, int64_t h) { return whole(b, ((r + 3) % 4) * 2 + s, h); },
      CollectiveKind::SendRecv, 3 * 2 * 4 * sizeof(float));
}

} // namespace
} // namespace mtc::rt::test
