//===- BufferizePipeline.cpp - linalg on tensors to buffers ---------------===//

#include "compiler/codegen/Common/Passes.h"
#include "compiler/fusion/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mtc::codegen::buildBufferizePassPipeline(OpPassManager &pm) {
  pm.addPass(createCopyRepeatedResultsPass());
  pm.addPass(fusion::createFuseElementwisePass());
  pm.addPass(createCanonicalizerPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.unknownTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  // A layer called in an scf.for (mt.repeat) returns fresh buffers for the carried values.
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());
}
