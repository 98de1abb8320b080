//===- ParamInitTest.cpp - Initial parameter values -----------------------===//

#include "runtime/plan/ParamInit.h"

#include "runtime/support/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace mtc::rt;

namespace {

ParamInfo makeParam(InitKind kind, std::vector<double> args, std::vector<Dim> dims,
                    uint32_t tensorId = 0) {
  ParamInfo p;
  p.name = "p";
  p.tensorId = tensorId;
  p.dims = std::move(dims);
  p.init = InitSpec{kind, std::move(args)};
  return p;
}

std::vector<float> whole(const ParamInfo &p, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(p.numElements()));
  initializeParam(p, seed, 0, p.numElements(), v.data());
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Moments {
  double mean = 0, stddev = 0, min = INFINITY, max = -INFINITY;
};

Moments moments(const std::vector<float> &v) {
  Moments m;
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    m.min = std::min(m.min, double(x));
    m.max = std::max(m.max, double(x));
  }
  m.mean = sum / double(v.size());
  for (float x : v)
    sq += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(sq / double(v.size()));
  return m;
}

constexpr int64_t kN = 1 << 20;

TEST(ParamInitTest, ZerosOnesConstantAreExact) {
  for (auto [kind, args, value] :
       {std::tuple{InitKind::Zeros, std::vector<double>{}, 0.0f},
        std::tuple{InitKind::Ones, std::vector<double>{}, 1.0f},
        std::tuple{InitKind::Constant, std::vector<double>{-2.5}, -2.5f},
        std::tuple{InitKind::Constant, std::vector<double>{0.1}, 0.1f}}) {
    ParamInfo p = makeParam(kind, args, {{"a", 7}, {"b", 13}});
    std::vector<float> v(p.numElements(), 42.0f);
    initializeParam(p, 1234, 0, p.numElements(), v.data());
    for (float x : v)
      ASSERT_EQ(x, value) << p.init.describe();
  }
}

TEST(ParamInitTest, NormalStatistics) {
  ParamInfo p = makeParam(InitKind::Normal, {0.02}, {{"n", kN}});
  Moments m = moments(whole(p, 1234));
  EXPECT_NEAR(m.mean, 0.0, 5 * 0.02 / std::sqrt(double(kN)));
  EXPECT_NEAR(m.stddev, 0.02, 0.02 * 0.005);
  EXPECT_LE(m.max, 0.02 * 5.8); // |z| <= 5.77 by construction
  EXPECT_GE(m.min, -0.02 * 5.8);

  ParamInfo shifted = makeParam(InitKind::Normal, {2.0, -3.0}, {{"n", kN}});
  m = moments(whole(shifted, 99));
  EXPECT_NEAR(m.mean, -3.0, 5 * 2.0 / std::sqrt(double(kN)));
  EXPECT_NEAR(m.stddev, 2.0, 2.0 * 0.005);
}

TEST(ParamInitTest, NormalMatchesPhiloxKeying) {
  // Element i of tensor t: Philox(seed, t, i, step 0), std * z + mean rounded once.
  ParamInfo p = makeParam(InitKind::Normal, {0.5, 0.25}, {{"n", 100}}, 7);
  std::vector<float> v = whole(p, 4321);
  for (uint64_t i = 0; i < 100; ++i) {
    uint32_t w[4];
    mtc_philox_element(4321, 7, i, 0, w);
    float expected = float(0.25 + 0.5 * mtc_normal_double(w[0], w[1]));
    ASSERT_EQ(v[i], expected) << i;
  }
}

TEST(ParamInitTest, UniformStatistics) {
  ParamInfo p = makeParam(InitKind::Uniform, {-0.5, 1.5}, {{"n", kN}});
  std::vector<float> v = whole(p, 1234);
  Moments m = moments(v);
  EXPECT_NEAR(m.mean, 0.5, 5 * (2.0 / std::sqrt(12.0)) / std::sqrt(double(kN)));
  EXPECT_NEAR(m.stddev, 2.0 / std::sqrt(12.0), 0.005);
  EXPECT_GE(m.min, -0.5);
  EXPECT_LT(m.max, 1.5);
  EXPECT_LT(m.min, -0.499);
  EXPECT_GT(m.max, 1.499);
  // Degenerate range: the one value.
  ParamInfo point = makeParam(InitKind::Uniform, {3.0, 3.0}, {{"n", 10}});
  for (float x : whole(point, 1))
    EXPECT_EQ(x, 3.0f);
}

TEST(ParamInitTest, SliceEqualsTheSameSliceOfTheWhole) {
  for (InitKind kind : {InitKind::Normal, InitKind::Uniform, InitKind::Ones}) {
    std::vector<double> args = kind == InitKind::Normal    ? std::vector<double>{1.0}
                               : kind == InitKind::Uniform ? std::vector<double>{0.0, 1.0}
                                                           : std::vector<double>{};
    ParamInfo p = makeParam(kind, args, {{"rows", 37}, {"cols", 29}}, 3);
    std::vector<float> all = whole(p, 77);
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 1},
                        {5, 6},
                        {100, 733},
                        {29, 58},
                        {1000, 1073},
                        {0, 1073},
                        {400, 400}}) {
      std::vector<float> slice(static_cast<size_t>(e - b) + 1, -7.0f);
      initializeParam(p, 77, b, e, slice.data());
      for (int64_t i = b; i < e; ++i)
        ASSERT_EQ(std::memcmp(&slice[i - b], &all[i], sizeof(float)), 0)
            << "element " << i << " of slice [" << b << ", " << e << ")";
      EXPECT_EQ(slice[e - b], -7.0f) << "wrote past the slice";
    }
  }
}

TEST(ParamInitTest, ShardsCoverTheWhole) {
  // Four ranks, each initialising its contiguous quarter alone, reproduce the whole.
  ParamInfo p = makeParam(InitKind::Normal, {0.02}, {{"a", 64}, {"b", 48}}, 5);
  std::vector<float> all = whole(p, 1), pieced(all.size());
  int64_t n = p.numElements();
  for (int rank = 0; rank < 4; ++rank) {
    int64_t b = n * rank / 4, e = n * (rank + 1) / 4;
    initializeParam(p, 1, b, e, pieced.data() + b);
  }
  EXPECT_TRUE(sameBits(all, pieced));
}

TEST(ParamInitTest, StreamsDependOnTensorIdAndSeed) {
  ParamInfo a = makeParam(InitKind::Normal, {1.0}, {{"n", 256}}, 0);
  ParamInfo b = makeParam(InitKind::Normal, {1.0}, {{"n", 256}}, 1);
  std::vector<float> va = whole(a, 1234), vb = whole(b, 1234), vc = whole(a, 1235);
  int same = 0, sameSeed = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    same += va[i] == vb[i];
    sameSeed += va[i] == vc[i];
  }
  EXPECT_EQ(same, 0);
  EXPECT_EQ(sameSeed, 0);
  EXPECT_TRUE(sameBits(va, whole(a, 1234))) << "deterministic";
}

TEST(ParamInitTest, LayerStackedParams) {
  // A layer parameter stores its instances along the leading `layers` dimension; the index
  // counts over the stacked tensor, so instance k is elements [k * per, (k + 1) * per) and the
  // instances differ from each other.
  ParamInfo p = makeParam(InitKind::Normal, {1.0}, {{"layers", 3}, {"hidden", 16}, {"ffn", 8}}, 4);
  p.layer = "block";
  p.instances = 3;
  std::vector<float> all = whole(p, 1234);
  const int64_t per = 16 * 8;
  ASSERT_EQ(int64_t(all.size()), 3 * per);
  for (int k = 0; k < 3; ++k) {
    std::vector<float> inst(per);
    initializeParam(p, 1234, k * per, (k + 1) * per, inst.data());
    EXPECT_TRUE(
        sameBits(inst, std::vector<float>(all.begin() + k * per, all.begin() + (k + 1) * per)));
    for (int64_t i = 0; i < per; ++i) {
      uint32_t w[4];
      mtc_philox_element(1234, 4, uint64_t(k * per + i), 0, w);
      ASSERT_EQ(inst[i], float(mtc_normal_double(w[0], w[1]))) << "instance " << k;
    }
  }
  int equal = 0;
  for (int64_t i = 0; i < per; ++i)
    equal += all[i] == all[per + i];
  EXPECT_EQ(equal, 0) << "instances share values";
}

TEST(ParamInitTest, EmptySliceWritesNothing) {
  ParamInfo p = makeParam(InitKind::Ones, {}, {{"n", 4}});
  float sentinel = -1.0f;
  initializeParam(p, 1, 2, 2, &sentinel);
  EXPECT_EQ(sentinel, -1.0f);
}

Plan twoParamPlan() {
  Plan plan;
  plan.model = "m";
  plan.seed = 42;
  ParamInfo a = makeParam(InitKind::Normal, {0.02}, {{"vocab", 300}, {"hidden", 700}}, 0);
  a.name = "wte";
  ParamInfo b = makeParam(InitKind::Uniform, {-1.0, 1.0}, {{"layers", 2}, {"hidden", 700}}, 1);
  b.name = "block.b";
  b.layer = "block";
  b.instances = 2;
  ParamInfo c = makeParam(InitKind::Zeros, {}, {}, 2); // a scalar
  c.name = "scale";
  plan.params = {a, b, c};
  return plan;
}

TEST(ParamInitTest, HostParamsMatchPerParamInit) {
  Plan plan = twoParamPlan();
  for (unsigned threads : {1u, 3u, 0u}) {
    Expected<HostParams> host = HostParams::initialize(plan, threads);
    ASSERT_TRUE(host.ok()) << host.error().message();
    ASSERT_EQ(host->size(), 3u);
    EXPECT_EQ(host->numElements(), 300 * 700 + 2 * 700 + 1);
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const HostParams::Tensor &t = host->tensors()[i];
      EXPECT_EQ(t.name, plan.params[i].name);
      EXPECT_EQ(t.shape, plan.params[i].shape());
      EXPECT_TRUE(sameBits(t.values, whole(plan.params[i], plan.seed)))
          << t.name << " with " << threads << " threads";
    }
    ASSERT_NE(host->find("block.b"), nullptr);
    EXPECT_EQ(host->find("block.b")->shape, (std::vector<int64_t>{2, 700}));
    EXPECT_EQ(host->find("scale")->values, std::vector<float>{0.0f});
    EXPECT_EQ(host->find("nope"), nullptr);

    std::vector<TensorRef> refs = host->tensorRefs();
    ASSERT_EQ(refs.size(), 3u);
    EXPECT_EQ(refs[0].name, "wte");
    EXPECT_EQ(refs[0].dtype, DType::F32);
    EXPECT_EQ(refs[0].data.size(), 300u * 700u * sizeof(float));
    EXPECT_EQ(refs[2].shape, std::vector<int64_t>{});
  }
}

} // namespace
