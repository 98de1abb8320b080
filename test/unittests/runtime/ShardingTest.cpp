//===- ShardingTest.cpp - Rank placement, shards and their initialisation --===//
//
// The arithmetic of tensor parallelism (runtime/plan/Sharding.h): Megatron rank placement,
// shard boxes, extraction and reassembly (whole -> shards -> whole), runs of partial ranges,
// and sharded initialisation against the single-rank values.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/ParamInit.h"
#include "runtime/plan/Sharding.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

using namespace mtc::rt;

namespace {

std::vector<MeshAxis> mesh(std::initializer_list<std::pair<const char *, int64_t>> axes) {
  std::vector<MeshAxis> m;
  for (auto [name, size] : axes)
    m.push_back(MeshAxis{name, size});
  return m;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ShardingTest, PlacementTp2Dp2) {
  std::vector<MeshAxis> m = mesh({{"tp", 2}});
  // Megatron order: tp innermost. Ranks 0,1 are dp 0; ranks 2,3 dp 1.
  int64_t expectTp[] = {0, 1, 0, 1}, expectDp[] = {0, 0, 1, 1};
  for (int64_t r = 0; r < 4; ++r) {
    Expected<MeshPlacement> p = placeRank(m, r, 4);
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->coordinates, std::vector<int64_t>{expectTp[r]}) << "rank " << r;
    EXPECT_EQ(p->dpIndex, expectDp[r]);
    EXPECT_EQ(p->dpSize, 2);
    EXPECT_EQ(p->meshSize, 2);
    EXPECT_EQ(p->meshIndex, expectTp[r]);
  }
}

TEST(ShardingTest, PlacementTp4) {
  std::vector<MeshAxis> m = mesh({{"tp", 4}});
  for (int64_t r = 0; r < 4; ++r) {
    Expected<MeshPlacement> p = placeRank(m, r, 4);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->coordinates, std::vector<int64_t>{r});
    EXPECT_EQ(p->dpIndex, 0);
    EXPECT_EQ(p->dpSize, 1);
  }
}

TEST(ShardingTest, PlacementTwoAxesLastFastest) {
  std::vector<MeshAxis> m = mesh({{"a", 2}, {"b", 3}});
  std::set<std::vector<int64_t>> seen;
  for (int64_t r = 0; r < 12; ++r) {
    Expected<MeshPlacement> p = placeRank(m, r, 12);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->coordinates, (std::vector<int64_t>{(r / 3) % 2, r % 3})) << "rank " << r;
    EXPECT_EQ(p->meshIndex, r % 6);
    EXPECT_EQ(p->dpIndex, r / 6);
    EXPECT_EQ(p->dpSize, 2);
    EXPECT_EQ(meshCoordinates(m, p->meshIndex), p->coordinates);
    seen.insert({p->dpIndex, p->coordinates[0], p->coordinates[1]});
  }
  EXPECT_EQ(seen.size(), 12u);
}

TEST(ShardingTest, NoMeshIsDataParallelOnly) {
  Expected<MeshPlacement> p = placeRank({}, 3, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->coordinates.empty());
  EXPECT_EQ(p->dpIndex, 3);
  EXPECT_EQ(p->dpSize, 4);
  EXPECT_EQ(p->meshSize, 1);
}

TEST(ShardingTest, WorldNotAMultipleOfTheMesh) {
  Expected<MeshPlacement> p = placeRank(mesh({{"tp", 4}}), 0, 6);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message(),
            "the plan partitions the model over a mesh of 4 ranks (tp=4), but the job has 6 "
            "ranks: the number of ranks must be a multiple of 4 (data parallelism takes the "
            "rest)");
  EXPECT_FALSE(placeRank(mesh({{"tp", 2}}), 0, 1).ok());
  EXPECT_FALSE(placeRank(mesh({{"tp", 2}}), 2, 2).ok());
}

/// A tensor whose element i holds i (exact in f32 for these sizes).
std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

struct LayoutCase {
  const char *what;
  std::vector<Dim> dims;
  std::vector<MeshAxis> mesh;
  ParamLayout layout;
};

std::vector<LayoutCase> layoutCases() {
  std::vector<Dim> d3 = {{"layers", 2}, {"heads", 4}, {"head_dim", 6}};
  return {
      {"first dim", {{"vocab", 8}, {"hidden", 3}}, mesh({{"tp", 2}}), {{{0, {0}}}}},
      {"last dim", {{"vocab", 5}, {"hidden", 8}}, mesh({{"tp", 4}}), {{{1, {0}}}}},
      {"middle dim", d3, mesh({{"tp", 2}}), {{{1, {0}}}}},
      {"middle dim of 4", d3, mesh({{"tp", 4}}), {{{1, {0}}}}},
      {"two dims on two axes", d3, mesh({{"a", 2}, {"b", 3}}), {{{1, {0}}, {2, {1}}}}},
      {"one dim over two axes", {{"x", 3}, {"ffn", 12}, {"y", 2}}, mesh({{"a", 2}, {"b", 3}}),
       {{{1, {0, 1}}}}},
      {"split and replicated axis", d3, mesh({{"a", 2}, {"b", 2}}), {{{2, {1}}}}},
      {"replicated", d3, mesh({{"tp", 2}}), {}},
      {"scalar-like", {{"x", 1}}, mesh({{"tp", 2}}), {}},
  };
}

TEST(ShardingTest, ShardsReassembleTheWholeTensor) {
  for (const LayoutCase &c : layoutCases()) {
    SCOPED_TRACE(c.what);
    int64_t meshSize = meshSizeOf(c.mesh);
    int64_t n = numElements(c.dims);
    std::vector<float> global = iota(n), rebuilt(size_t(n), -1.0f);
    std::vector<int> owners(size_t(n), 0);
    int64_t ways = 1;
    for (const DimSplit &s : c.layout.splits)
      for (size_t a : s.axes)
        ways *= c.mesh[a].size;
    for (int64_t k = 0; k < meshSize; ++k) {
      std::vector<int64_t> coords = meshCoordinates(c.mesh, k);
      ShardBox box = shardBox(c.dims, c.layout, c.mesh, coords);
      ASSERT_EQ(box.localElements() * ways, n);
      std::vector<float> local(size_t(box.localElements()));
      extractShard(box, global.data(), local.data());
      // Element by element: the local row-major index maps to the global multi-index.
      for (int64_t l = 0; l < box.localElements(); ++l) {
        int64_t rest = l, g = 0, stride = 1;
        for (size_t d = box.localShape.size(); d-- > 0;) {
          g += (box.offset[d] + rest % box.localShape[d]) * stride;
          rest /= box.localShape[d];
          stride *= box.globalShape[d];
        }
        ASSERT_EQ(local[size_t(l)], float(g)) << "mesh index " << k << " local " << l;
        ++owners[size_t(g)];
      }
      insertShard(box, local.data(), rebuilt.data());
    }
    EXPECT_TRUE(sameBits(rebuilt, global));
    // Every element is held by (mesh size / ways) ranks: the replicas of its shard.
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(owners[size_t(i)], meshSize / ways) << "element " << i;
  }
}

TEST(ShardingTest, MiddleDimBoxAndRuns) {
  // [layers=2, heads=4, head_dim=6] split on heads over tp=2: coordinate 1 holds heads 2-3.
  ShardBox box = shardBox({{"layers", 2}, {"heads", 4}, {"head_dim", 6}}, {{{1, {0}}}},
                          mesh({{"tp", 2}}), {1});
  EXPECT_EQ(box.localShape, (std::vector<int64_t>{2, 2, 6}));
  EXPECT_EQ(box.offset, (std::vector<int64_t>{0, 2, 0}));
  std::vector<std::array<int64_t, 3>> runs;
  forEachShardRun(box, 0, box.localElements(),
                  [&](int64_t g, int64_t l, int64_t n) { runs.push_back({g, l, n}); });
  // One run of 2 heads x 6 per layer: global 12..23 and 36..47.
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], (std::array<int64_t, 3>{12, 0, 12}));
  EXPECT_EQ(runs[1], (std::array<int64_t, 3>{36, 12, 12}));
  // A partial range cuts the runs.
  runs.clear();
  forEachShardRun(box, 5, 15, [&](int64_t g, int64_t l, int64_t n) { runs.push_back({g, l, n}); });
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], (std::array<int64_t, 3>{17, 5, 7}));
  EXPECT_EQ(runs[1], (std::array<int64_t, 3>{36, 12, 3}));
}

TEST(ShardingTest, ShardInitialisationEqualsTheSingleRankSlice) {
  for (const LayoutCase &c : layoutCases()) {
    SCOPED_TRACE(c.what);
    for (auto [kind, args] : {std::pair{InitKind::Normal, std::vector<double>{0.02}},
                              std::pair{InitKind::Uniform, std::vector<double>{-1, 1}},
                              std::pair{InitKind::Constant, std::vector<double>{0.5}}}) {
      ParamInfo p;
      p.name = "p";
      p.tensorId = 3;
      p.dims = c.dims;
      p.layout = c.layout;
      p.init = InitSpec{kind, args};
      std::vector<float> whole(size_t(p.numElements()));
      initializeParam(p, 99, 0, p.numElements(), whole.data());
      for (int64_t k = 0; k < meshSizeOf(c.mesh); ++k) {
        ShardBox box = shardBox(p.dims, p.layout, c.mesh, meshCoordinates(c.mesh, k));
        std::vector<float> expected(size_t(box.localElements())), got(expected.size());
        extractShard(box, whole.data(), expected.data());
        initializeShard(p, 99, box, 0, box.localElements(), got.data());
        EXPECT_TRUE(sameBits(got, expected)) << "mesh index " << k;
        // In two pieces, split mid-run.
        int64_t half = box.localElements() / 2 + 1;
        if (half < box.localElements()) {
          std::vector<float> pieces(expected.size());
          initializeShard(p, 99, box, 0, half, pieces.data());
          initializeShard(p, 99, box, half, box.localElements(), pieces.data() + half);
          EXPECT_TRUE(sameBits(pieces, expected)) << "mesh index " << k;
        }
      }
    }
  }
}

TEST(ShardingTest, HostParamsShardsEqualTheWholeParameters) {
  Plan plan;
  plan.seed = 1234;
  plan.mesh = mesh({{"tp", 2}});
  ParamInfo wte;
  wte.name = "wte";
  wte.tensorId = 0;
  wte.dims = {{"vocab", 300}, {"hidden", 256}}; // more than one 64K-element chunk
  wte.init = InitSpec{InitKind::Normal, {0.02}};
  wte.layout = {{{0, {0}}}};
  ParamInfo wq;
  wq.name = "block.wq";
  wq.tensorId = 1;
  wq.dims = {{"layers", 2}, {"hidden", 16}, {"heads", 4}, {"head_dim", 4}};
  wq.init = InitSpec{InitKind::Uniform, {-0.1, 0.1}};
  wq.layout = {{{2, {0}}}};
  ParamInfo g;
  g.name = "lnf.g";
  g.tensorId = 2;
  g.dims = {{"hidden", 16}};
  g.init = InitSpec{InitKind::Ones, {}};
  plan.params = {wte, wq, g};
  EXPECT_EQ(plan.localDims(wq)[2], (Dim{"heads", 2}));
  EXPECT_EQ(plan.describeLayout(wq), "heads over tp");
  EXPECT_EQ(plan.describeLayout(g), "replicated");

  Expected<HostParams> whole = HostParams::initialize(plan, 2);
  ASSERT_TRUE(whole.ok());
  for (unsigned threads : {1u, 3u}) {
    std::vector<std::vector<float>> rebuilt;
    for (const HostParams::Tensor &t : whole->tensors())
      rebuilt.emplace_back(t.values.size(), -7.0f);
    for (int64_t c = 0; c < 2; ++c) {
      Expected<HostParams> shard = HostParams::initializeShards(plan, {c}, threads);
      ASSERT_TRUE(shard.ok());
      for (size_t i = 0; i < plan.params.size(); ++i) {
        ShardBox box = shardBox(plan, plan.params[i], {c});
        EXPECT_EQ(shard->tensors()[i].shape, box.localShape);
        EXPECT_EQ(shard->tensors()[i].shape, dimSizes(plan.localDims(plan.params[i])));
        insertShard(box, shard->tensors()[i].values.data(), rebuilt[i].data());
      }
    }
    for (size_t i = 0; i < plan.params.size(); ++i)
      EXPECT_TRUE(sameBits(rebuilt[i], whole->tensors()[i].values)) << plan.params[i].name;
  }
}

// The distributed optimizer's blocks (extractDimBlock, GradientSharding.h) are the shards
// Sharding.h gives a dimension split over one axis, on the (tensor-parallel local) tensor:
// block c of dim d is its index range [c L / n, (c + 1) L / n), along any dim.
TEST(ShardingTest, DimBlocksAreTheShardsOfOneSplitDim) {
  std::vector<Dim> dims = {{"a", 3}, {"b", 8}, {"c", 5}};
  std::vector<float> whole(120);
  std::iota(whole.begin(), whole.end(), 0.0f);
  for (size_t dim = 0; dim < 3; ++dim)
    for (int64_t n : {1, 2, 4, 8}) {
      if (dims[dim].size % n != 0)
        continue;
      std::vector<MeshAxis> dp = mesh({{"dp", n}});
      ParamLayout layout{{DimSplit{dim, {0}}}};
      for (int64_t c = 0; c < n; ++c) {
        ShardBox box = shardBox(dims, layout, dp, {c});
        std::vector<float> expected(size_t(box.localElements())), block(expected.size());
        extractShard(box, whole.data(), expected.data());
        extractDimBlock(dimSizes(dims), dim, n, c, whole.data(), block.data());
        EXPECT_TRUE(sameBits(block, expected)) << "dim " << dim << " n " << n << " c " << c;
      }
    }
}

// With a data-parallel axis the world is the mesh: the same placement as data parallelism
// outside a mesh of the other axes.
TEST(ShardingTest, PlacementWithADataParallelAxis) {
  std::vector<MeshAxis> withDp = mesh({{"dp", 2}, {"tp", 2}, {"cp", 3}});
  std::vector<MeshAxis> without = mesh({{"tp", 2}, {"cp", 3}});
  for (int64_t r = 0; r < 12; ++r) {
    Expected<MeshPlacement> a = placeRank(withDp, r, 12, 0);
    Expected<MeshPlacement> b = placeRank(without, r, 12);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->dpIndex, b->dpIndex);
    EXPECT_EQ(a->dpSize, 2);
    EXPECT_EQ(a->meshIndex, r);
    EXPECT_EQ(a->meshSize, 12);
    EXPECT_EQ(a->coordinates[0], b->dpIndex);
    EXPECT_EQ(a->coordinates[1], b->coordinates[0]);
    EXPECT_EQ(a->coordinates[2], b->coordinates[1]);
  }
  EXPECT_FALSE(placeRank(withDp, 0, 24, 0).ok()) << "no data parallelism outside the mesh";
  EXPECT_FALSE(placeRank(withDp, 0, 6, 0).ok());
}

} // namespace
