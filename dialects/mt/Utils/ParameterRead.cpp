//===- ParameterRead.cpp - mixed precision's read of a parameter ----------===//

#include "dialects/mt/Utils/ParameterRead.h"

#include "dialects/mt/IR/MTOps.h"

using namespace mlir;

Value mtc::mt::getCastParameter(Operation *op,
                                llvm::function_ref<bool(BlockArgument)> isParameterArgument) {
  auto cast = dyn_cast_or_null<CastOp>(op);
  if (!cast)
    return {};
  Value input = cast.getInput();
  if (input.getDefiningOp<ParamRefOp>())
    return input;
  if (auto arg = dyn_cast<BlockArgument>(input);
      arg && isParameterArgument && isParameterArgument(arg))
    return input;
  return {};
}
