//===- KernelLibraryTest.cpp - Loading a plan's compiled step -------------===//
//
// The failures of loading (an object compiled for another kernel context among them), a
// pipeline plan's chunk and stage functions (checked against the chunk's layers and the
// stage's tables, PipelineStage.h) and a call's kernel context; calling compiled kernels is
// covered end to end by the mtrun lit tests (test/tools/mtrun/train.test), which run a real
// plan's step.

#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/PipelineStage.h"

#include "ExecTestPlan.h"
#include "ToyMeshPlan.h"
#include "ToyPipelinePlan.h"
#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <cstring>
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
                                    "(compile it with `mtc compile --target=x86`)");
}

TEST(KernelLibraryTest, NotASharedObject) {
  TempDir tmp;
  Plan plan = smallPlan();
  plan.dir = tmp.path();
  plan.x86Kernels.emplace().file = "x86_64.so";
  std::ofstream(tmp / "x86_64.so") << "not an ELF file";
  std::string message = loadError(plan);
  EXPECT_EQ(message.rfind("'" + (tmp / "x86_64.so").string() + "': cannot load the compiled step: ",
                          0),
            0u)
      << message;
}

TEST(KernelLibraryTest, ObjectWithoutAContextVersion) {
  // libc is a shared object without our symbols: as an object compiled before the kernel
  // context existed, it exports no context version.
  Plan plan = smallPlan();
  plan.dir = "/";
  plan.x86Kernels.emplace().file = "lib/x86_64-linux-gnu/libc.so.6";
  EXPECT_EQ(loadError(plan),
            concat("'/lib/x86_64-linux-gnu/libc.so.6': the compiled step exports no "
                   "mtc_kernel_context_version: it was compiled for a kernel ABI without a "
                   "context (version 0), and this runtime passes kernel context version ",
                   MTC_KERNEL_CONTEXT_VERSION, " (recompile the plan with this mtc)"));
}

TEST(KernelLibraryTest, ObjectOfAnotherContextVersion) {
  // Version 1: an object whose temporaries the runtime matched to the plan's offsets in
  // order, compiled before the workspace's offsets were compiled in.
  Plan plan = smallPlan();
  plan.dir = "/";
  plan.x86Kernels.emplace().file = MTC_TOY_MESH_KERNELS_OTHER_CONTEXT;
  EXPECT_EQ(loadError(plan), concat("'", MTC_TOY_MESH_KERNELS_OTHER_CONTEXT,
                                    "': the compiled step was compiled for kernel context "
                                    "version 1, and this runtime passes version ",
                                    MTC_KERNEL_CONTEXT_VERSION,
                                    " (recompile the plan with this mtc)"));
}

TEST(KernelLibraryTest, MissingFunctionAndBadBuffers) {
  // The toy kernels have none of a compiled plan's symbols; the checks of the calling
  // convention run before the symbol lookup.
  Plan plan = smallPlan();
  plan.dir = "/";
  plan.x86Kernels.emplace().file = MTC_TOY_MESH_KERNELS;
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
  EXPECT_EQ(loadError(plan), "/: kernels.x86_64.functions.forward_backward: param 'b' is bf16; "
                             "parameters, gradients, optimizer states, the loss, the logits and "
                             "the step's scalars must be f32");

  fb.inputs = {KernelBuffer{BufferKind::Activation, "x", PlanDType::I32, {{"cols", 4}}}};
  plan.x86Kernels->forwardBackward = fb;
  EXPECT_EQ(loadError(plan), "/: kernels.x86_64.functions.forward_backward: activation 'x' is "
                             "i32; activations must be f32, bf16 or f16");

  fb.inputs = {KernelBuffer{BufferKind::Param, "b", PlanDType::F32, {{"cols", 4}}}};
  plan.x86Kernels->forwardBackward = fb;
  EXPECT_EQ(loadError(plan), "/: kernels.x86_64.functions.forward_backward: the kernel library has "
                             "no symbol '_mtc_packed_forward_backward'");
}

TEST(KernelLibraryTest, CallPassesItsStateInTheKernelContext) {
  // toy_forward_backward: loss = t * sum(w^2), the sum all-reduced over mesh axis 0
  // (t = tokens[0] % 5 + 1); the bad variant also reduces over axis 3.
  Plan plan = mtc::rt::test::toyPlan(1);
  Expected<KernelLibrary> lib = KernelLibrary::load(plan);
  ASSERT_TRUE(lib.ok()) << lib.error().message();
  std::vector<int32_t> tokens{2, 0, 0, 0}, labels(4);
  std::vector<float> w(8, 0.5f), grad(8);
  float loss = -1;
  std::vector<void *> buffers{tokens.data(), labels.data(), w.data(), &loss, grad.data()};
  MeshContext mesh;
  mesh.axes = {MeshAxisGroup{"tp", 1, 0, nullptr}};

  MeshCall meshCall(mesh);
  KernelLibrary::call(lib->forwardBackward(), buffers, {&meshCall, nullptr});
  EXPECT_TRUE(meshCall.ok()) << meshCall.error().message();
  EXPECT_EQ(loss, 3 * 8 * 0.25f) << "the axis of one rank copies the partial sum";
  EXPECT_EQ(grad[0], 3.0f);

  // Without a mesh the collective writes zeros.
  KernelLibrary::call(lib->forwardBackward(), buffers);
  EXPECT_EQ(loss, 0.0f);

  // A failing collective is recorded in the MeshCall of that call, not of another.
  Plan badPlan = mtc::rt::test::toyPlan(1, "toy_bad_forward_backward");
  Expected<KernelLibrary> badLib = KernelLibrary::load(badPlan);
  ASSERT_TRUE(badLib.ok()) << badLib.error().message();
  MeshCall failing(mesh);
  KernelLibrary::call(badLib->forwardBackward(), buffers, {&failing, nullptr});
  EXPECT_EQ(failing.error().message(),
            "mtc_all_reduce (sum, 1 f64 elements) on world rank 0: mesh axis 3 is out of range "
            "(the plan's mesh has 1 axis)");
  EXPECT_TRUE(meshCall.ok());
}

namespace {

/// The toy pipeline plan over the toy kernels' object: every function (the whole step's, the
/// chunks', stage<s>.optimizer_step taking the stage's tensors as `stagePlan` lays them out)
/// is `toy_forward_backward` or `toy_optimizer_step`, which are only looked up here.
Plan pipelinePlanOverToyKernels(const mtc::rt::test::ToyPipeline &t) {
  Plan plan = mtc::rt::test::toyPipelinePlan(t);
  plan.dir = "/";
  KernelsInfo &k = *plan.x86Kernels;
  k.file = MTC_TOY_MESH_KERNELS;
  k.forwardBackward = KernelFunction{"toy_forward_backward", {}, {}, {}};
  k.optimizerStep = KernelFunction{"toy_optimizer_step", {}, {}, {}};
  for (ChunkKernels &c : k.chunks)
    for (std::optional<KernelFunction> *fn :
         {&c.forward, &c.backward, &c.backwardInput, &c.backwardWeight})
      if (*fn)
        (*fn)->symbol = "toy_forward_backward";
  for (int64_t s = 0; s < t.stages; ++s) {
    Expected<StageHoldings> holdings = stageHoldings(plan, s);
    EXPECT_TRUE(holdings.ok());
    Plan tables = stagePlan(plan, *holdings);
    KernelFunction step{"toy_optimizer_step", {}, {}, {}};
    for (const ParamInfo &p : tables.params) {
      step.inputs.push_back(
          {BufferKind::Grad, p.name, PlanDType::F32, tables.optimizerLocalDims(p)});
      step.inputs.push_back({BufferKind::Param, p.name, PlanDType::F32, tables.localDims(p)});
    }
    for (const StateInfo &st : tables.states)
      step.inputs.push_back({BufferKind::State, st.name, PlanDType::F32,
                             tables.optimizerLocalDims(tables.params[st.paramIndex])});
    step.outputs.push_back({BufferKind::Lr, "lr", PlanDType::F32, {}});
    k.stages[size_t(s)].optimizerStep = std::move(step);
  }
  return plan;
}

} // namespace

TEST(KernelLibraryTest, PipelineChunkAndStageFunctions) {
  // pp2 x dp2 with the distributed optimizer, one layer per stage: a stage's optimizer_step
  // takes block.w's gradient and states split on hidden (the whole model's on layers).
  Plan plan = pipelinePlanOverToyKernels({2, {0, 1}, {1, 1}, false, /*dp=*/2});
  Expected<KernelLibrary> lib = KernelLibrary::load(plan);
  ASSERT_TRUE(lib.ok()) << lib.error().message();
  ASSERT_EQ(lib->chunks().size(), 2u);
  for (const LoadedChunk &c : lib->chunks()) {
    EXPECT_TRUE(c.forward.entry);
    EXPECT_TRUE(c.backward.entry);
    EXPECT_FALSE(c.backwardInput.entry) << "absent in the plan";
    EXPECT_FALSE(c.backwardWeight.entry);
  }
  EXPECT_EQ(lib->chunks()[1].forward.function, &*plan.x86Kernels->chunks[1].forward);
  ASSERT_EQ(lib->stages().size(), 2u);
  for (const LoadedStage &s : lib->stages()) {
    EXPECT_TRUE(s.optimizerStep.entry);
    EXPECT_FALSE(s.gradSquares.entry);
  }

  // A chunk's layer parameter holds the chunk's layers, not the stack's.
  Plan wholeStack = plan;
  wholeStack.x86Kernels->chunks[1].forward->inputs[0].dims.front().size = 2;
  EXPECT_EQ(loadError(wholeStack),
            "/: kernels.x86_64.functions.chunk1.forward: param 'block.w' is [layers=2, "
            "hidden=4, ffn=6] but the parameter table says [layers=1, hidden=4, ffn=6]");
  // A stage's gradient in the whole model's optimizer layout (layers over dp).
  Plan wholeLayout = plan;
  KernelBuffer &grad = wholeLayout.x86Kernels->stages[0].optimizerStep->inputs[2];
  ASSERT_EQ(grad.name, "block.w");
  grad.dims = plan.optimizerLocalDims(plan.params[1]);
  EXPECT_EQ(loadError(wholeLayout),
            "/: kernels.x86_64.functions.stage0.optimizer_step: grad 'block.w' is [layers=1, "
            "hidden=4, ffn=6] but the optimizer layout of parameter 'block.w' (hidden over dp) "
            "gives the local dims [layers=1, hidden=2, ffn=6]");
  // Stage 0 does not hold the final norm.
  Plan notHeld = plan;
  notHeld.x86Kernels->stages[0].optimizerStep->inputs.push_back(
      {BufferKind::Param, "lnf.g", PlanDType::F32, {{"hidden", 4}}});
  EXPECT_EQ(loadError(notHeld), "/: kernels.x86_64.functions.stage0.optimizer_step: param "
                                "'lnf.g' is not a parameter of the plan");
  // A chunk function whose symbol the object lacks.
  Plan noSymbol = plan;
  noSymbol.x86Kernels->chunks[0].backward->symbol = "_mtc_chunk0_backward";
  EXPECT_EQ(loadError(noSymbol), "/: kernels.x86_64.functions.chunk0.backward: the kernel "
                                 "library has no symbol '_mtc_chunk0_backward'");
}

// A pipeline plan has no whole-model step (mtc compiles none); given its stage, a rank's
// arena is the largest of its own chunks' and stage's functions, and only they use it.
TEST(KernelLibraryTest, AStagesArenaIsSizedForItsOwnFunctions) {
  Plan plan = pipelinePlanOverToyKernels({2, {0, 1}, {1, 1}, false, /*dp=*/2});
  KernelsInfo &k = *plan.x86Kernels;
  k.forward.reset();
  k.forwardBackward.reset();
  k.optimizerStep.reset();
  k.logits.reset();
  k.chunks[0].forward->arena = KernelArenaPlan{1024, 1024, {}};
  k.stages[0].optimizerStep->arena = KernelArenaPlan{2048, 2048, {}};
  k.chunks[1].backward->arena = KernelArenaPlan{4096, 4096, {}};
  Expected<KernelLibrary> whole = KernelLibrary::load(plan);
  ASSERT_TRUE(whole.ok()) << whole.error().message();
  ASSERT_TRUE(whole->arena());
  EXPECT_EQ(whole->arena()->size(), 4096);
  EXPECT_FALSE(whole->forwardBackward().entry);

  Expected<KernelLibrary> first = KernelLibrary::load(plan, 0);
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_TRUE(first->arena());
  EXPECT_EQ(first->arena()->size(), 2048);
  EXPECT_EQ(first->chunks()[0].forward.arena, first->arena());
  EXPECT_EQ(first->stages()[0].optimizerStep.arena, first->arena());
  EXPECT_EQ(first->chunks()[1].backward.arena, nullptr) << "stage 1's";

  Expected<KernelLibrary> second = KernelLibrary::load(plan, 1);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_EQ(second->arena()->size(), 4096);
  EXPECT_EQ(second->chunks()[0].forward.arena, nullptr);

  Expected<KernelLibrary> none = KernelLibrary::load(plan, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "/: no pipeline stage 2 in the plan");
  // Without a pipeline the whole-model step is required.
  Plan single = plan;
  single.pipeline.reset();
  single.x86Kernels->chunks.clear();
  single.x86Kernels->stages.clear();
  EXPECT_EQ(loadError(single), "/: the plan's kernels have no 'forward_backward' function");
}

TEST(KernelLibraryTest, CallPassesTheFunctionsArenaBytesAsItsWorkspace) {
  // toy_workspace_forward_backward asks for 256 bytes and reports the address it got.
  auto addressIn = [](const std::vector<float> &grad) {
    uint32_t halves[2];
    std::memcpy(&halves[0], &grad[0], 4);
    std::memcpy(&halves[1], &grad[1], 4);
    return static_cast<uintptr_t>(halves[0]) | (static_cast<uintptr_t>(halves[1]) << 32);
  };
  std::vector<int32_t> tokens{2, 0, 0, 0}, labels(4);
  std::vector<float> w(8, 0.5f), grad(8);
  float loss = -1;
  std::vector<void *> buffers{tokens.data(), labels.data(), w.data(), &loss, grad.data()};

  Plan plan = mtc::rt::test::toyPlan(1, "toy_workspace_forward_backward");
  plan.x86Kernels->forwardBackward->arena = KernelArenaPlan{512, 256, {{256, 0}}};
  Expected<KernelLibrary> lib = KernelLibrary::load(plan);
  ASSERT_TRUE(lib.ok()) << lib.error().message();
  ASSERT_NE(lib->arena(), nullptr);
  int64_t fallbacks = kernelArenaFallbacks();
  KernelLibrary::call(lib->forwardBackward(), buffers);
  EXPECT_EQ(addressIn(grad), reinterpret_cast<uintptr_t>(lib->arena()->data()));
  EXPECT_EQ(grad[2], 3.0f) << "the workspace held the gradient";
  EXPECT_EQ(kernelArenaFallbacks(), fallbacks);

  // A plan whose arena is smaller than the function's views reach: a block of the heap,
  // counted, and freed by the release.
  Plan small = mtc::rt::test::toyPlan(1, "toy_workspace_forward_backward");
  small.x86Kernels->forwardBackward->arena = KernelArenaPlan{128, 128, {{128, 0}}};
  Expected<KernelLibrary> smallLib = KernelLibrary::load(small);
  ASSERT_TRUE(smallLib.ok()) << smallLib.error().message();
  int64_t live = kernelLiveBytes();
  KernelLibrary::call(smallLib->forwardBackward(), buffers);
  EXPECT_NE(addressIn(grad), reinterpret_cast<uintptr_t>(smallLib->arena()->data()));
  EXPECT_EQ(grad[2], 3.0f);
  EXPECT_EQ(kernelArenaFallbacks(), fallbacks + 1);
  EXPECT_EQ(kernelLiveBytes(), live) << "the heap block is freed";
}
