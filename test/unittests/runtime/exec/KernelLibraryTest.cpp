//===- KernelLibraryTest.cpp - Loading a plan's compiled step -------------===//
//
// The failures of loading; calling compiled kernels is covered end to end by the mtrun lit
// tests (test/tools/mtrun/train.test), which run a real plan's step.

#include "runtime/exec/KernelLibrary.h"

#include "ExecTestPlan.h"
#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace mtc::rt;
using mtc::rt::test::smallPlan;
using mtc::rt::test::TempDir;

namespace {

std::string loadError(const Plan &plan) {
  Expected<KernelLibrary> lib = KernelLibrary::load(plan);
  EXPECT_FALSE(lib.ok()) << "the library loaded";
  return lib.ok() ? "" : lib.error().message();
}

} // namespace

TEST(KernelLibraryTest, PlanWithoutKernels) {
  EXPECT_EQ(loadError(smallPlan()), "small.plan: the plan has no compiled step for this CPU "
                                    "(compile it with `mtc compile --kernels=x86`)");
}

TEST(KernelLibraryTest, NotASharedObject) {
  TempDir tmp;
  Plan plan = smallPlan();
  plan.dir = tmp.path();
  plan.x86Kernels = KernelsInfo{"x86_64.so", std::nullopt, std::nullopt, std::nullopt};
  std::ofstream(tmp / "x86_64.so") << "not an ELF file";
  std::string message = loadError(plan);
  EXPECT_EQ(message.rfind("'" + (tmp / "x86_64.so").string() + "': cannot load the compiled step: ",
                          0),
            0u)
      << message;
}

TEST(KernelLibraryTest, MissingFunctionAndBadBuffers) {
  // libc is a shared object without our symbols; the checks of the calling convention run
  // before the symbol lookup.
  Plan plan = smallPlan();
  plan.dir = "/";
  plan.x86Kernels = KernelsInfo{"lib/x86_64-linux-gnu/libc.so.6", std::nullopt, std::nullopt,
                                std::nullopt};
  EXPECT_EQ(loadError(plan), "/: the plan's kernels have no 'forward_backward' function");

  KernelFunction fb;
  fb.symbol = "_mtc_packed_forward_backward";
  fb.inputs = {KernelBuffer{BufferKind::Param, "w", PlanDType::F32, {{"rows", 2}, {"cols", 4}}}};
  plan.x86Kernels->forwardBackward = fb;
  EXPECT_EQ(loadError(plan), "/: kernels.x86_64.functions.forward_backward: param 'w' is "
                             "[rows=2, cols=4] but the parameter table says [rows=3, cols=4]");

  fb.inputs = {KernelBuffer{BufferKind::Grad, "v", PlanDType::F32, {}}};
  plan.x86Kernels->forwardBackward = fb;
  EXPECT_EQ(loadError(plan), "/: kernels.x86_64.functions.forward_backward: grad 'v' is not a "
                             "parameter of the plan");

  fb.inputs = {KernelBuffer{BufferKind::Param, "b", PlanDType::BF16, {{"cols", 4}}}};
  plan.x86Kernels->forwardBackward = fb;
  EXPECT_NE(loadError(plan).find("this runtime trains f32 models only"), std::string::npos);

  fb.inputs = {KernelBuffer{BufferKind::Param, "b", PlanDType::F32, {{"cols", 4}}}};
  plan.x86Kernels->forwardBackward = fb;
  EXPECT_EQ(loadError(plan), "/: kernels.x86_64.functions.forward_backward: the kernel library has "
                             "no symbol '_mtc_packed_forward_backward'");
}
