//===- ParameterReadTest.cpp - mixed precision's read of a parameter ------===//
//
// getCastParameter, which autodiff, the pipeline chunks and the stage cut share: the cast
// of an `mt.param_ref`, or of a block argument the caller calls a parameter; no other op.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/Utils/ParameterRead.h"

#include "dialects/mt/IR/MTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mtc::mt;

namespace {

constexpr StringLiteral kModule = R"mlir(
mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
func.func @f(%arg: !mt.tensor<[hidden=8], f32>, %x: !mt.tensor<[hidden=8], bf16>) {
  %w = mt.param_ref @w : !mt.tensor<[hidden=8], f32>
  %0 = mt.cast %w : !mt.tensor<[hidden=8], f32> to !mt.tensor<[hidden=8], bf16>
  %1 = mt.cast %arg : !mt.tensor<[hidden=8], f32> to !mt.tensor<[hidden=8], bf16>
  %2 = mt.cast %x : !mt.tensor<[hidden=8], bf16> to !mt.tensor<[hidden=8], f32>
  %3 = mt.add %0, %1 : !mt.tensor<[hidden=8], bf16>, !mt.tensor<[hidden=8], bf16> -> !mt.tensor<[hidden=8], bf16>
  return
}
)mlir";

TEST(ParameterReadTest, CastOfParameter) {
  MLIRContext context;
  context.loadDialect<MTDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("f");
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  Value paramRef = ops[0]->getResult(0);
  BlockArgument arg = func.getArgument(0);
  auto isFirstArgument = [](BlockArgument a) { return a.getArgNumber() == 0; };

  EXPECT_EQ(getCastParameter(ops[1]), paramRef);
  EXPECT_EQ(getCastParameter(ops[1], isFirstArgument), paramRef);
  // A block argument is a parameter only where the caller says so.
  EXPECT_FALSE(getCastParameter(ops[2]));
  EXPECT_EQ(getCastParameter(ops[2], isFirstArgument), Value(arg));
  EXPECT_FALSE(getCastParameter(ops[3], isFirstArgument));
  // The read itself and other ops are no cast of a parameter.
  EXPECT_FALSE(getCastParameter(ops[0]));
  EXPECT_FALSE(getCastParameter(ops[4]));
  EXPECT_FALSE(getCastParameter(nullptr));
}

} // namespace
