//===- VocabularyPaddingTest.cpp - A vocabulary padded for tp ----------------===//
//
// A plan whose vocabulary the compiler padded to a multiple of tp (mt-pad-vocabulary): the
// real elements of a parameter start with exactly the values of the unpadded parameter
// (Philox keyed on the unpadded index), whole or sharded, wherever the vocabulary lies in
// the parameter's dims; the padded ones are 0; and stripping the padding and padding again
// (checkpoints, exports) are inverse.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/ParamInit.h"
#include "runtime/plan/Sharding.h"
#include "runtime/plan/VocabularyPadding.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

using namespace mtc::rt;

namespace {

constexpr int64_t kReal = 67, kPadded = 68;

/// A parameter of `dims` (with "vocab" at its padded size), padded like the plan loader
/// marks it.
ParamInfo paddedParam(std::vector<Dim> dims) {
  ParamInfo p;
  p.name = "p";
  p.tensorId = 4;
  p.dims = std::move(dims);
  p.init = InitSpec{InitKind::Normal, {0.02}};
  for (size_t d = 0; d < p.dims.size(); ++d)
    if (p.dims[d].name == "vocab")
      p.padding = ParamInfo::Padding{d, kReal};
  return p;
}

/// The same parameter without padding.
ParamInfo unpadded(ParamInfo p) {
  p.dims[p.padding->dim].size = kReal;
  p.padding.reset();
  return p;
}

Plan paddedPlan() {
  Plan plan;
  plan.dims = {{"vocab", kPadded}, {"hidden", 6}, {"layers", 3}};
  plan.vocabulary = "vocab";
  plan.vocabularyRealSize = kReal;
  return plan;
}

std::vector<float> initialValues(const ParamInfo &p) {
  std::vector<float> values(size_t(p.numElements()));
  initializeParam(p, 1234, 0, p.numElements(), values.data());
  return values;
}

const std::vector<std::vector<Dim>> kShapes = {
    {{"vocab", kPadded}, {"hidden", 6}},              // leading: the tied embedding
    {{"hidden", 6}, {"vocab", kPadded}},              // trailing: an output projection
    {{"vocab", kPadded}},                             // alone: an output bias
    {{"layers", 3}, {"vocab", kPadded}, {"hidden", 6}}, // in the middle
};

TEST(VocabularyPaddingTest, RealElementsKeepTheUnpaddedValuesPaddedAreZero) {
  Plan plan = paddedPlan();
  EXPECT_TRUE(plan.vocabularyPadded());
  EXPECT_EQ(plan.vocabularySize(), kReal);
  for (const std::vector<Dim> &dims : kShapes) {
    ParamInfo p = paddedParam(dims);
    std::vector<float> padded = initialValues(p);
    std::vector<float> real = initialValues(unpadded(p));
    std::vector<float> stripped = stripVocabularyPadding(plan, p.dims, padded);
    ASSERT_EQ(stripped.size(), real.size());
    EXPECT_EQ(std::memcmp(stripped.data(), real.data(), real.size() * sizeof(float)), 0);
    // Padding again gives back the padded tensor: zeros at the padded positions.
    std::vector<float> again = padVocabulary(plan, p.dims, real);
    ASSERT_EQ(again.size(), padded.size());
    EXPECT_EQ(std::memcmp(again.data(), padded.data(), padded.size() * sizeof(float)), 0);
    int64_t zeros = 0;
    for (float v : padded)
      zeros += v == 0.0f;
    EXPECT_EQ(zeros, p.numElements() / kPadded);
    std::vector<int64_t> shape = realShape(plan, p.dims);
    EXPECT_EQ(numElements(p.dims) / kPadded * kReal,
              std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>()));
  }
}

TEST(VocabularyPaddingTest, ShardsOfThePaddedVocabularyEqualTheWholeSlices) {
  std::vector<MeshAxis> mesh = {MeshAxis{"tp", 4}};
  for (const std::vector<Dim> &dims : kShapes) {
    ParamInfo p = paddedParam(dims);
    p.layout = {{{p.padding->dim, {0}}}};
    std::vector<float> whole = initialValues(p);
    for (int64_t c = 0; c < 4; ++c) {
      ShardBox box = shardBox(p.dims, p.layout, mesh, {c});
      std::vector<float> expected(size_t(box.localElements())), got(expected.size());
      extractShard(box, whole.data(), expected.data());
      // In two pieces split mid-run, as the chunked initialisation does.
      int64_t half = box.localElements() / 2 + 1;
      initializeShard(p, 1234, box, 0, half, got.data());
      initializeShard(p, 1234, box, half, box.localElements(), got.data() + half);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << "coordinate " << c;
    }
  }
}

TEST(VocabularyPaddingTest, UnpaddedPlansAreLeftAlone) {
  Plan plan;
  plan.dims = {{"vocab", 64}, {"hidden", 6}};
  plan.vocabulary = "vocab";
  plan.vocabularyRealSize = 64;
  EXPECT_FALSE(plan.vocabularyPadded());
  std::vector<float> values(64 * 6, 1.5f);
  EXPECT_EQ(realShape(plan, plan.dims), (std::vector<int64_t>{64, 6}));
  EXPECT_EQ(stripVocabularyPadding(plan, plan.dims, values), values);
}

} // namespace
