//===- LossScalerTest.cpp - fp16's dynamic loss scale -----------------------===//

#include "runtime/exec/LossScaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mtc::rt;

namespace {

LossScaleOptions dynamic(float initial, int64_t window, int64_t hysteresis, float minimum = 1) {
  LossScaleOptions options;
  options.initial = initial;
  options.window = window;
  options.hysteresis = hysteresis;
  options.minimum = minimum;
  return options;
}

} // namespace

TEST(LossScalerTest, MegatronsDefaults) {
  LossScaleOptions options;
  EXPECT_EQ(options.initial, std::ldexp(1.0f, 32));
  EXPECT_EQ(options.minimum, 1.0f);
  EXPECT_EQ(options.window, 1000);
  EXPECT_EQ(options.hysteresis, 2);
  EXPECT_FALSE(options.fixed.has_value());
  LossScaler scaler(options);
  EXPECT_EQ(scaler.scale(), std::ldexp(1.0f, 32));
  EXPECT_EQ(scaler.state(), (LossScaleState{std::ldexp(1.0f, 32), 0, 2, 0}));
}

TEST(LossScalerTest, HalvesAfterTheHysteresisAndEveryOverflowAfterThat) {
  LossScaler scaler(dynamic(1024, 1000, 2));
  scaler.update(true); // the first overflow uses up the hysteresis
  EXPECT_EQ(scaler.scale(), 1024.0f);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512.0f);
  // A clean step does not restore the hysteresis: the next overflow halves again.
  scaler.update(false);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 256.0f);
  EXPECT_EQ(scaler.state().skippedSteps, 3);
  EXPECT_EQ(scaler.state().growthTracker, 0);
  EXPECT_EQ(scaler.state().hysteresisTracker, -1);
}

TEST(LossScalerTest, DoublesAfterAWindowWithoutOverflowAndRestoresTheHysteresis) {
  LossScaler scaler(dynamic(8, 3, 2));
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 4.0f);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 4.0f);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 8.0f);
  EXPECT_EQ(scaler.state().growthTracker, 0);
  EXPECT_EQ(scaler.state().hysteresisTracker, 2);
  // An overflow resets the window.
  scaler.update(false);
  scaler.update(true);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 8.0f);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 16.0f);
  EXPECT_EQ(scaler.state().skippedSteps, 3);
}

TEST(LossScalerTest, NeverBelowTheMinimumNorAboveWhatF32Holds) {
  LossScaler low(dynamic(4, 1000, 1, 2));
  for (int i = 0; i < 5; ++i)
    low.update(true);
  EXPECT_EQ(low.scale(), 2.0f);
  float largest = std::ldexp(1.0f, 127);
  LossScaler high(dynamic(largest, 1, 2));
  high.update(false);
  EXPECT_EQ(high.scale(), largest);
  EXPECT_TRUE(std::isfinite(high.scale()));
}

TEST(LossScalerTest, AFixedScaleStaysButOverflowsAreStillSkipped) {
  LossScaleOptions options;
  options.fixed = 128.0f;
  LossScaler scaler(options);
  EXPECT_EQ(scaler.scale(), 128.0f);
  scaler.update(true);
  scaler.update(true);
  for (int i = 0; i < 2000; ++i)
    scaler.update(false);
  EXPECT_EQ(scaler.scale(), 128.0f);
  EXPECT_EQ(scaler.state().skippedSteps, 2);
}

TEST(LossScalerTest, ResumesFromAState) {
  LossScaler scaler(dynamic(1024, 3, 2), LossScaleState{64, 2, 1, 7});
  EXPECT_EQ(scaler.scale(), 64.0f);
  scaler.update(false); // the window was at 2 of 3
  EXPECT_EQ(scaler.scale(), 128.0f);
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 64.0f);
  EXPECT_EQ(scaler.state().skippedSteps, 9);
}

TEST(LossScalerTest, OptionsAreChecked) {
  auto message = [](const LossScaleOptions &options) {
    Error err = options.check();
    return err.ok() ? std::string() : err.message();
  };
  EXPECT_EQ(message(LossScaleOptions{}), "");
  LossScaleOptions options;
  options.fixed = 0;
  EXPECT_EQ(message(options), "--loss-scale 0 is not a positive finite f32 value");
  options = {};
  options.initial = std::numeric_limits<float>::infinity();
  EXPECT_EQ(message(options), "--initial-loss-scale inf is not a positive finite f32 value");
  options = {};
  options.minimum = -1;
  EXPECT_EQ(message(options), "--min-loss-scale -1 is not a positive finite f32 value");
  options = {};
  options.initial = 2;
  options.minimum = 4;
  EXPECT_EQ(message(options), "--min-loss-scale 4 is above --initial-loss-scale 2");
  options = {};
  options.window = 0;
  EXPECT_EQ(message(options), "--loss-scale-window 0 is not a positive step count");
  options = {};
  options.hysteresis = -2;
  EXPECT_EQ(message(options), "--hysteresis -2 is not a positive count of overflows");
}

TEST(LossScalerTest, AnOverflowIsASkipWithScalingAndAnErrorWithout) {
  float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (float norm : {inf, nan}) {
    Expected<bool> scaled = gradientOverflow(norm, /*scaling=*/true, 6);
    ASSERT_TRUE(scaled.ok());
    EXPECT_TRUE(*scaled);
    Expected<bool> unscaled = gradientOverflow(norm, /*scaling=*/false, 6);
    ASSERT_FALSE(unscaled.ok());
    EXPECT_NE(unscaled.error().message().find("step 7: the gradient norm is "),
              std::string::npos);
    EXPECT_NE(unscaled.error().message().find(" (training diverged)"), std::string::npos);
  }
  for (bool scaling : {true, false}) {
    Expected<bool> finite = gradientOverflow(0.5f, scaling, 0);
    ASSERT_TRUE(finite.ok());
    EXPECT_FALSE(*finite);
  }
}
