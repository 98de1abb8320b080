//===- BufferizePipeline.cpp - linalg on tensors to buffers ---------------===//

#include "compiler/codegen/Common/Passes.h"
#include "compiler/fusion/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mtc::codegen::buildBufferizePassPipeline(OpPassManager &pm, UpdateGuard guard) {
  pm.addPass(createCopyRepeatedResultsPass());
  pm.addPass(fusion::createFuseElementwisePass());
  pm.addPass(createCanonicalizerPass());
  // The optimizer steps' new parameters and states go into their input buffers: the
  // update kernels write there directly once the tensor.empty they fill is replaced by the
  // destination.
  UpdateInPlacePassOptions inPlace;
  inPlace.selectInKernels = guard == UpdateGuard::InKernels;
  pm.addPass(createUpdateInPlacePass(inPlace));
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.unknownTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  // A layer called in an scf.for (mt.repeat) returns fresh buffers for the carried values.
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(createDropInPlaceResultsPass());
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());
}
