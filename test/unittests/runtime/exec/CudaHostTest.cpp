//===- CudaHostTest.cpp - The CUDA host code against the plan's description ===//
//
// No GPU needed: the test executable defines the GPU host object's imports (KernelABI.h's
// GPU section) as recorders, loads gpt-tiny's `kernels/cuda_host.so` (a plan compiled with
// --target=cuda, test/CMakeLists.txt) through KernelLibrary::loadCudaHost, calls step
// functions with fake device addresses and checks that the launches the compiled host code
// makes are the ones plan.json describes (`kernels.cuda.functions`), in order, with the
// function's buffers where the plan says `arg` and the workspace where it says `temp`. The
// recorder is reached through the call's MtcKernelContext::gpu, as the CUDA executor's state
// would be.

#include "runtime/exec/KernelABI.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/plan/Plan.h"

#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace mtc::rt;
using mtc::rt::test::TempDir;

namespace {

struct RecordedLaunch {
  std::string kernel;
  std::array<int64_t, 3> grid, block;
  std::vector<uint64_t> args;
};

/// What the host code asked of the runtime in one call.
struct Recorder {
  std::vector<RecordedLaunch> launches;
  int64_t gemms = 0, bf16Gemms = 0;
  int64_t workspaces = 0, releases = 0;
  /// Set by an import that was passed something it cannot have been (a context without
  /// the recorder, a workspace larger than the context's).
  std::string failure;
};

Recorder &recorder(MtcKernelContext *context) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  // The test always passes one; a null here is a bug of the host code's context threading.
  if (!checked || !checked->gpu)
    std::abort();
  return *static_cast<Recorder *>(checked->gpu);
}

} // namespace

extern "C" {

void mtc_gpu_launch(MtcKernelContext *context, const char *kernel, int64_t gx, int64_t gy,
                    int64_t gz, int64_t bx, int64_t by, int64_t bz, const uint64_t *args,
                    int64_t count) {
  recorder(context).launches.push_back(
      {kernel, {gx, gy, gz}, {bx, by, bz}, std::vector<uint64_t>(args, args + count)});
}

void *mtc_gpu_workspace(MtcKernelContext *context, size_t bytes) {
  Recorder &r = recorder(context);
  ++r.workspaces;
  if (bytes > context->workspace_bytes)
    r.failure = "a workspace of " + std::to_string(bytes) + " bytes was asked for, " +
                std::to_string(context->workspace_bytes) + " planned";
  return context->workspace;
}

void mtc_gpu_workspace_release(MtcKernelContext *context, void *workspace) {
  Recorder &r = recorder(context);
  ++r.releases;
  if (workspace != context->workspace)
    r.failure = "another workspace was released";
}

void _mlir_ciface_mtc_gpu_batch_matmul_f32(MtcKernelContext *context, MtcMemRef3F32 *,
                                           MtcMemRef3F32 *, MtcMemRef3F32 *) {
  ++recorder(context).gemms;
}

void _mlir_ciface_mtc_gpu_batch_matmul_bf16(MtcKernelContext *context, MtcMemRef3BF16 *,
                                            MtcMemRef3BF16 *, MtcMemRef3F32 *) {
  ++recorder(context).bf16Gemms;
}

} // extern "C"

namespace {

/// Fake device addresses: buffer i at (i + 1) << 32, the workspace far above them. Nothing
/// dereferences them: the host code only passes addresses on.
uint64_t bufferAddress(size_t i) { return uint64_t(i + 1) << 32; }
constexpr uint64_t kWorkspaceAddress = uint64_t(1) << 48;

Expected<Plan> loadTestPlan() {
  std::filesystem::path dir = MTC_TEST_CUDA_PLAN;
  if (!std::filesystem::exists(dir / "MANIFEST"))
    return makeError(dir.string(), ": not built (ninja -C build test/plans/gpt-tiny-cuda.plan/MANIFEST)");
  return loadPlan(dir);
}

const CudaFunction *describedFunction(const Plan &plan, const std::string &name) {
  for (const CudaFunction &f : plan.cudaKernels->functions)
    if (f.name == name)
      return &f;
  return nullptr;
}

/// Calls `kernel` with fake buffers and the recorder, and returns what it recorded.
Recorder callRecorded(const Plan &plan, const LoadedKernel &kernel) {
  std::vector<void *> buffers;
  for (size_t i = 0; i < kernel.function->inputs.size() + kernel.function->outputs.size(); ++i)
    buffers.push_back(reinterpret_cast<void *>(bufferAddress(i)));
  Recorder recorded;
  KernelCallState state;
  state.gpu = &recorded;
  state.workspace = reinterpret_cast<void *>(kWorkspaceAddress);
  state.workspaceBytes = static_cast<uint64_t>(plan.cudaKernels->hostWorkspaceBytes);
  KernelLibrary::call(kernel, buffers, state);
  return recorded;
}

/// Checks one recorded launch against the plan's description of it.
void expectLaunch(const Plan &plan, const RecordedLaunch &recorded, const CudaLaunch &described) {
  SCOPED_TRACE(described.kernel);
  EXPECT_EQ(recorded.kernel, described.kernel);
  EXPECT_EQ(recorded.grid, described.grid);
  EXPECT_EQ(recorded.block, described.block);
  ASSERT_EQ(recorded.args.size(), described.args.size());
  uint64_t workspaceEnd = kWorkspaceAddress + uint64_t(plan.cudaKernels->hostWorkspaceBytes);
  for (size_t i = 0; i < described.args.size(); ++i) {
    const CudaLaunchArgument &a = described.args[i];
    switch (a.kind) {
    case CudaLaunchArgument::Kind::Argument:
      EXPECT_EQ(recorded.args[i], bufferAddress(size_t(a.index))) << "parameter " << i << " (argument " << a.index << ")";
      break;
    case CudaLaunchArgument::Kind::Temporary:
      EXPECT_GE(recorded.args[i], kWorkspaceAddress) << "parameter " << i;
      EXPECT_LE(recorded.args[i] + uint64_t(a.bytes), workspaceEnd) << "parameter " << i;
      break;
    case CudaLaunchArgument::Kind::View:
    case CudaLaunchArgument::Kind::Scalar:
      break;
    }
  }
}

} // namespace

TEST(CudaHostTest, LoadsAndChecksTheCallingConvention) {
  Expected<Plan> plan = loadTestPlan();
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  ASSERT_TRUE(plan->cudaKernels && plan->cudaKernels->host);
  EXPECT_EQ(plan->cudaKernels->host->file, "kernels/cuda_host.so");
  Expected<KernelLibrary> lib = KernelLibrary::loadCudaHost(*plan);
  ASSERT_TRUE(lib.ok()) << lib.error().message();
  // The device workspace is the caller's: the library holds no host arena for it.
  EXPECT_EQ(lib->arena(), nullptr);
}

TEST(CudaHostTest, OptimizerStepLaunchesWhatThePlanDescribes) {
  Expected<Plan> plan = loadTestPlan();
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  Expected<KernelLibrary> lib = KernelLibrary::loadCudaHost(*plan);
  ASSERT_TRUE(lib.ok()) << lib.error().message();
  const CudaFunction *described = describedFunction(*plan, "optimizer_step");
  ASSERT_NE(described, nullptr);
  ASSERT_TRUE(described->calls.empty()) << "optimizer_step launches only its own kernels";
  Recorder recorded = callRecorded(*plan, lib->optimizerStep());
  EXPECT_EQ(recorded.failure, "");
  ASSERT_EQ(recorded.launches.size(), described->launches.size());
  for (size_t i = 0; i < described->launches.size(); ++i)
    expectLaunch(*plan, recorded.launches[i], described->launches[i]);
  EXPECT_EQ(recorded.workspaces, recorded.releases);
}

TEST(CudaHostTest, ForwardBackwardLaunchesWhatThePlanDescribes) {
  Expected<Plan> plan = loadTestPlan();
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  Expected<KernelLibrary> lib = KernelLibrary::loadCudaHost(*plan);
  ASSERT_TRUE(lib.ok()) << lib.error().message();
  const CudaFunction *described = describedFunction(*plan, "forward_backward");
  ASSERT_NE(described, nullptr);
  Recorder recorded = callRecorded(*plan, lib->forwardBackward());
  EXPECT_EQ(recorded.failure, "");
  // Its own launches among those of the layers it calls. plan.json lists each launch op
  // once in program order; one inside a host loop (the layers' scan) runs once per
  // iteration. So: every recorded launch is one plan.json describes, with its grid, block
  // and parameter count (and for forward_backward's own, its buffers: a layer's `arg` is
  // the layer function's argument, a view of the caller's), and the order of first
  // launches is the described order.
  std::vector<std::string> firstOrder;
  for (const RecordedLaunch &launch : recorded.launches) {
    const CudaLaunch *match = nullptr;
    for (const CudaFunction &f : plan->cudaKernels->functions)
      for (const CudaLaunch &l : f.launches)
        if (l.kernel == launch.kernel)
          match = &l;
    ASSERT_NE(match, nullptr) << launch.kernel << " is not in plan.json";
    if (launch.kernel.rfind("forward_backward_kernel_", 0) != 0) {
      EXPECT_EQ(launch.grid, match->grid) << launch.kernel;
      EXPECT_EQ(launch.block, match->block) << launch.kernel;
      EXPECT_EQ(launch.args.size(), match->args.size()) << launch.kernel;
      continue;
    }
    expectLaunch(*plan, launch, *match);
    if (std::find(firstOrder.begin(), firstOrder.end(), launch.kernel) == firstOrder.end())
      firstOrder.push_back(launch.kernel);
  }
  std::vector<std::string> describedOrder;
  for (const CudaLaunch &l : described->launches)
    describedOrder.push_back(l.kernel);
  EXPECT_EQ(firstOrder, describedOrder);
  // The GEMMs are the runtime's, through the device-memory variant.
  bool callsGemm = false;
  for (const std::string &call : described->calls)
    callsGemm = callsGemm || call == MTC_ABI_BATCH_MATMUL_F32;
  EXPECT_EQ(callsGemm, recorded.gemms > 0);
  EXPECT_EQ(recorded.workspaces, recorded.releases);
}

TEST(CudaHostTest, CorruptHostObjectIsAPlanError) {
  Expected<Plan> plan = loadTestPlan();
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  TempDir tmp;
  std::filesystem::copy(plan->dir, tmp / "copy.plan", std::filesystem::copy_options::recursive);
  std::filesystem::path host = tmp / "copy.plan" / "kernels" / "cuda_host.so";
  std::filesystem::permissions(host, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  std::ofstream(host, std::ios::binary | std::ios::trunc) << "not an ELF file";
  Expected<Plan> corrupt = loadPlan(tmp / "copy.plan");
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.error().message().find("kernels/cuda_host.so"), std::string::npos)
      << corrupt.error().message();

  std::filesystem::remove(host);
  Expected<Plan> missing = loadPlan(tmp / "copy.plan");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("kernels/cuda_host.so"), std::string::npos)
      << missing.error().message();
}

TEST(CudaHostTest, PlanWithoutHostCode) {
  Expected<Plan> plan = loadTestPlan();
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  plan->cudaKernels->host.reset();
  Expected<KernelLibrary> lib = KernelLibrary::loadCudaHost(*plan);
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.error().message().find("have no host code"), std::string::npos)
      << lib.error().message();
}
