//===- StepBindingsTest.cpp - Laying out a step function's call -----------===//
//
// optimizerStepCall: every binding kind to its pointer, in the function's argument order
// (the parameters and states are inputs, updated in place). checkOptimizerOffload (DeviceTrainer.h): what optimizer offload
// needs of a plan, each refusal naming why.

#include "runtime/exec/DeviceTrainer.h"
#include "runtime/exec/StepBindings.h"

#include <gtest/gtest.h>

namespace mtc::rt {
namespace {

TEST(OptimizerStepCall, EachBindingToItsPointerInArgumentOrder) {
  float step = 0, scale = 0, norm = 0, lr = 0;
  float grads[2], params[2], states[2];
  OptimizerStepBuffers where{&step, &scale, &norm, &lr};
  where.grad = [&](size_t i) -> void * { return &grads[i]; };
  where.param = [&](size_t i) -> void * { return &params[i]; };
  where.state = [&](size_t i) -> void * { return &states[i]; };
  const std::vector<BufferBinding> bindings = {
      {BufferKind::Step},     {BufferKind::GradScale}, {BufferKind::Grad, 1},
      {BufferKind::Param, 0}, {BufferKind::State, 1},  {BufferKind::Param, 1},
      {BufferKind::GradNorm}, {BufferKind::Lr}};
  std::vector<void *> call = optimizerStepCall(bindings, where);
  const std::vector<void *> expected = {&step,      &scale,     &grads[1], &params[0],
                                        &states[1], &params[1], &norm,     &lr};
  EXPECT_EQ(call, expected);
}

TEST(DataInputAt, TokensLabelsThenTheLossMaskThenThePositionIds) {
  EXPECT_EQ(dataInputAt(0, false), DataInput::Tokens);
  EXPECT_EQ(dataInputAt(1, false), DataInput::Labels);
  EXPECT_EQ(dataInputAt(2, false), DataInput::PositionIds);
  EXPECT_EQ(dataInputAt(0, true), DataInput::Tokens);
  EXPECT_EQ(dataInputAt(1, true), DataInput::Labels);
  EXPECT_EQ(dataInputAt(2, true), DataInput::LossMask);
  EXPECT_EQ(dataInputAt(3, true), DataInput::PositionIds);
}

Plan offloadablePlan() {
  Plan plan;
  plan.dir = "/plans/gpt.plan";
  plan.x86Kernels.emplace();
  plan.x86Kernels->optimizerStep.emplace();
  return plan;
}

TEST(OptimizerOffload, APlanWithItsX86OptimizerStepAndNoMeshIsOffloadable) {
  Error err = checkOptimizerOffload(offloadablePlan());
  EXPECT_TRUE(err.ok()) << err.message();
}

TEST(OptimizerOffload, APlanWithoutX86KernelsSaysHowToCompileOne) {
  Plan plan = offloadablePlan();
  plan.x86Kernels.reset();
  Error err = checkOptimizerOffload(plan);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(), "/plans/gpt.plan has no x86 optimizer_step to run on the host "
                           "(compile it with `mtc compile --target=x86,cuda`)");
}

TEST(OptimizerOffload, AMeshIsRefusedNamingItsAxes) {
  Plan plan = offloadablePlan();
  plan.mesh = {MeshAxis{"tp", 2}, MeshAxis{"ep", 2}};
  Error err = checkOptimizerOffload(plan);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("/plans/gpt.plan is partitioned over a mesh (tp=2, ep=2)"),
            std::string::npos)
      << err.message();
}

} // namespace
} // namespace mtc::rt
