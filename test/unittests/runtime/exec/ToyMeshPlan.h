//===- ToyMeshPlan.h - An in-memory plan over the toy mesh kernels -*- C++ -*-===//
//
// The plan of the hand-written per-rank kernels of ToyMeshKernels.c (the shared object
// MTC_TOY_MESH_KERNELS), for the tests of the trainer and the training run.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_EXEC_TOYMESHPLAN_H
#define MTC_TEST_UNITTESTS_RUNTIME_EXEC_TOYMESHPLAN_H

#include "runtime/plan/Plan.h"

namespace mtc::rt::test {

/// w [rows=4, cols=2] (normal(1)), state m; mesh tp=`tp` with w split on rows when tp > 1
/// (a mesh axis of size 1 otherwise: the kernels always name axis 0).
inline Plan toyPlan(int64_t tp, const char *forwardBackward = "toy_forward_backward") {
  Plan plan;
  plan.dir = "toy.plan";
  plan.model = "toy";
  plan.seed = 5;
  plan.mesh = {MeshAxis{"tp", tp}};
  plan.train = JsonObject{{"global_batch", 4}};
  ParamInfo w;
  w.name = "w";
  w.tensorId = 0;
  w.dims = {{"rows", 4}, {"cols", 2}};
  w.init = InitSpec{InitKind::Normal, {1.0}};
  if (tp > 1)
    w.layout.splits = {DimSplit{0, {0}}};
  plan.params = {w};
  plan.states = {StateInfo{"w.m", "w", 0, w.dims, PlanDType::F32}};
  std::vector<Dim> local = plan.localDims(plan.params[0]);
  std::vector<Dim> tokens = {{"batch", 1}, {"seq", 4}};
  auto buffer = [](BufferKind kind, const char *name, PlanDType dtype, std::vector<Dim> dims) {
    return KernelBuffer{kind, name, dtype, std::move(dims)};
  };
  KernelFunction fb;
  fb.symbol = forwardBackward;
  fb.inputs = {buffer(BufferKind::Input, "tokens", PlanDType::I32, tokens),
               buffer(BufferKind::Input, "labels", PlanDType::I32, tokens),
               buffer(BufferKind::Param, "w", PlanDType::F32, local)};
  fb.outputs = {buffer(BufferKind::Loss, "loss", PlanDType::F32, {}),
                buffer(BufferKind::Grad, "w", PlanDType::F32, local)};
  KernelFunction opt;
  opt.symbol = "toy_optimizer_step";
  opt.inputs = {buffer(BufferKind::Step, "step", PlanDType::F32, {}),
                buffer(BufferKind::GradScale, "grad_scale", PlanDType::F32, {}),
                buffer(BufferKind::Grad, "w", PlanDType::F32, local),
                buffer(BufferKind::Param, "w", PlanDType::F32, local),
                buffer(BufferKind::State, "w.m", PlanDType::F32, local)};
  opt.outputs = {buffer(BufferKind::GradNorm, "grad_norm", PlanDType::F32, {}),
                 buffer(BufferKind::Lr, "lr", PlanDType::F32, {})};
  KernelsInfo &kernels = plan.x86Kernels.emplace();
  kernels.file = MTC_TOY_MESH_KERNELS;
  kernels.forwardBackward = fb;
  kernels.optimizerStep = opt;
  return plan;
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_EXEC_TOYMESHPLAN_H
