//===- CommunicationPrediction.cpp - Bytes a rank should send per step ----===//

#include "runtime/exec/CommunicationPrediction.h"

namespace mtc::rt {

double predictedCommunicationBytes(const Plan &plan, int64_t microBatches,
                                   int64_t dataParallelSize) {
  double bytes = 0;
  if (const auto &compiled = plan.predictions.communicationBytes)
    bytes += static_cast<double>(microBatches / dataParallelSize) *
                 static_cast<double>(compiled->forwardBackward) +
             static_cast<double>(compiled->optimizerStep);
  if (dataParallelSize > 1) {
    double allReduced = 0, reduceScattered = 0;
    for (const ParamInfo &param : plan.params) {
      // The gradient as the kernels return it: the parameter's rank-local shard.
      double gradient = static_cast<double>(numElements(plan.localDims(param)) * sizeof(float));
      (plan.dataParallelShardDim(param) ? reduceScattered : allReduced) += gradient;
    }
    double fraction =
        static_cast<double>(dataParallelSize - 1) / static_cast<double>(dataParallelSize);
    // The tokens per expert (i64) are all-reduced beside the loss.
    double counts = 0;
    if (plan.x86Kernels && plan.x86Kernels->forwardBackward)
      for (const KernelBuffer &b : plan.x86Kernels->forwardBackward->outputs)
        if (b.kind == BufferKind::ExpertLoad)
          counts += static_cast<double>(b.numElements() * sizeof(int64_t));
    bytes += fraction * reduceScattered + 2.0 * fraction * (allReduced + sizeof(double) + counts);
  }
  return bytes;
}

} // namespace mtc::rt
