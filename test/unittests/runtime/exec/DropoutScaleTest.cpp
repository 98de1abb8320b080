//===- DropoutScaleTest.cpp - The dropout decision of compiled kernels ----===//

#include "runtime/exec/DropoutScale.h"

#include "runtime/support/Philox.h"

#include <gtest/gtest.h>

using namespace mtc::rt;

TEST(DropoutScaleTest, NoScopeMeansNoDropout) {
  for (int64_t e = 0; e < 100; ++e)
    EXPECT_EQ(mtc_dropout_scale(3, e, 0.5), 1.0f);
}

TEST(DropoutScaleTest, ScopeSetsTheKeyAndRestoresThePrevious) {
  DropoutKey outer{11, 4, 0}, inner{11, 5, 0};
  DropoutKeyScope a(outer);
  std::vector<float> first;
  for (int64_t e = 0; e < 64; ++e)
    first.push_back(mtc_dropout_scale(2, e, 0.5));
  {
    DropoutKeyScope b(inner);
    int differ = 0;
    for (int64_t e = 0; e < 64; ++e) {
      EXPECT_EQ(mtc_dropout_scale(2, e, 0.5), dropoutScale(inner, 2, -1, e, 0.5));
      differ += mtc_dropout_scale(2, e, 0.5) != first[size_t(e)];
    }
    EXPECT_GT(differ, 0) << "another step draws other masks";
  }
  for (int64_t e = 0; e < 64; ++e)
    EXPECT_EQ(mtc_dropout_scale(2, e, 0.5), first[size_t(e)]);
}

TEST(DropoutScaleTest, LayerInstanceIsSetByKernelsAndResetByScopes) {
  DropoutKey key{3, 1, 0};
  DropoutKeyScope scope(key);
  mtc_dropout_layer(1);
  for (int64_t e = 0; e < 64; ++e)
    EXPECT_EQ(mtc_dropout_scale(4, e, 0.5), dropoutScale(key, 4, 1, e, 0.5));
  {
    DropoutKeyScope inner(key);
    for (int64_t e = 0; e < 64; ++e)
      EXPECT_EQ(mtc_dropout_scale(4, e, 0.5), dropoutScale(key, 4, -1, e, 0.5));
  }
  // The outer scope's instance is back.
  for (int64_t e = 0; e < 64; ++e)
    EXPECT_EQ(mtc_dropout_scale(4, e, 0.5), dropoutScale(key, 4, 1, e, 0.5));
}

TEST(DropoutScaleTest, KeepsAboutOneMinusRateAndRescales) {
  DropoutKey key{1234, 0, 0};
  int kept = 0;
  constexpr int n = 100000;
  for (int64_t e = 0; e < n; ++e) {
    float s = dropoutScale(key, 7, -1, e, 0.1);
    ASSERT_TRUE(s == 0.0f || s == 1.0f / 0.9f) << s;
    kept += s != 0.0f;
  }
  EXPECT_NEAR(kept / double(n), 0.9, 0.005);
}

TEST(DropoutScaleTest, FollowsThePhiloxKeying) {
  // Counter step = step + 1 (0 is parameter initialisation); index = element + sample << 40.
  DropoutKey key{99, 6, 16};
  for (int64_t e = 0; e < 256; ++e) {
    uint64_t index = uint64_t(e) + (uint64_t(16) << 40);
    bool keep = mtc_dropout_keep(99, mtc_dropout_tensor_id(5, 3), index, 7, 0.75f);
    EXPECT_EQ(dropoutScale(key, 5, 3, e, 0.25), keep ? 1.0f / 0.75f : 0.0f);
  }
}

TEST(DropoutScaleTest, MicroBatchesAndSitesDiffer) {
  DropoutKey first{5, 0, 0}, second{5, 0, 8};
  int bySample = 0, bySite = 0, byInstance = 0;
  for (int64_t e = 0; e < 256; ++e) {
    float base = dropoutScale(first, 1, 0, e, 0.5);
    bySample += base != dropoutScale(second, 1, 0, e, 0.5);
    bySite += base != dropoutScale(first, 2, 0, e, 0.5);
    byInstance += base != dropoutScale(first, 1, 1, e, 0.5);
  }
  EXPECT_GT(bySample, 64);
  EXPECT_GT(bySite, 64);
  EXPECT_GT(byInstance, 64);
}

TEST(DropoutScaleTest, EdgeRates) {
  DropoutKey key{1, 0, 0};
  EXPECT_EQ(dropoutScale(key, 0, -1, 0, 0.0), 1.0f);
  EXPECT_EQ(dropoutScale(key, 0, -1, 0, 1.0), 0.0f);
}
