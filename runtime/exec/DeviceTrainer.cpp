//===- DeviceTrainer.cpp - What a device trainer's options need of a plan -===//

#include "runtime/exec/DeviceTrainer.h"

namespace mtc::rt {

Error checkOptimizerOffload(const Plan &plan) {
  if (!plan.x86Kernels || !plan.x86Kernels->optimizerStep)
    return makeError(plan.dir.string(),
                     " has no x86 optimizer_step to run on the host (compile it with "
                     "`mtc compile --target=x86,cuda`)");
  if (!plan.mesh.empty()) {
    std::string axes;
    for (const MeshAxis &axis : plan.mesh)
      axes += (axes.empty() ? "" : ", ") + axis.name + "=" + std::to_string(axis.size);
    return makeError(plan.dir.string(), " is partitioned over a mesh (", axes,
                     "): the optimizer step's collectives would run on the host, where the "
                     "device's communicators cannot serve them; offload a plan without "
                     "tensor, sequence, context or expert parallelism (data parallelism over "
                     "--nodes is fine)");
  }
  return Error::success();
}

} // namespace mtc::rt
