//===- TypeInferenceTest.cpp - mt ops build with inferred result types ----===//
//
// The builders without result types give the type the op's rules imply, and the
// inference reports a broken rule at the builder's location (the frontend relies on this
// to put the dialect's message at the .mtl span) instead of producing a type.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/IR/MTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace mtc::mt;

namespace {

class TypeInferenceTest : public ::testing::Test {
protected:
  TypeInferenceTest() : builder(&context), loc(builder.getUnknownLoc()) {
    context.loadDialect<MTDialect>();
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
  }

  NamedTensorType type(ArrayRef<std::pair<StringRef, int64_t>> dims, Type element = {}) {
    SmallVector<NamedDim> named;
    for (auto [name, size] : dims)
      named.push_back({builder.getStringAttr(name), size});
    return NamedTensorType::get(named, element ? element : builder.getF32Type());
  }

  /// A value of `t`: the argument of a block that lives as long as the test.
  Value valueOf(NamedTensorType t) { return block.addArgument(t, loc); }

  MLIRContext context;
  OpBuilder builder;
  Location loc;
  /// Declared before the module, which holds the ops using its arguments, so that it is
  /// destroyed after them.
  Block block;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TypeInferenceTest, BroadcastAppendsTheRhsDimensionsTheLhsLacks) {
  Value lhs = valueOf(type({{"batch", 2}, {"seq", 4}}));
  Value rhs = valueOf(type({{"hidden", 8}, {"seq", 4}}));
  auto add = AddOp::create(builder, loc, lhs, rhs);
  EXPECT_EQ(add.getType(), type({{"batch", 2}, {"seq", 4}, {"hidden", 8}}));
  EXPECT_TRUE(succeeded(mlir::verify(add)));
}

TEST_F(TypeInferenceTest, ContractAndReduceAndMergeInferTheirTypes) {
  Value h = valueOf(type({{"seq", 4}, {"hidden", 8}}));
  Value w = valueOf(type({{"hidden", 8}, {"heads", 2}, {"head_dim", 4}}));
  auto q = ContractOp::create(builder, loc, h, w, builder.getStrArrayAttr({"hidden"}));
  EXPECT_EQ(q.getType(), type({{"seq", 4}, {"heads", 2}, {"head_dim", 4}}));
  auto merged = MergeOp::create(builder, loc, q, builder.getStrArrayAttr({"heads", "head_dim"}),
                                builder.getStringAttr("hidden"));
  EXPECT_EQ(merged.getType(), type({{"seq", 4}, {"hidden", 8}}));
  auto sum = ReduceSumOp::create(builder, loc, merged, builder.getStrArrayAttr({"seq"}));
  EXPECT_EQ(sum.getType(), type({{"hidden", 8}}));
  auto renamed = RenameOp::create(builder, loc, sum, builder.getStringAttr("hidden"),
                                  builder.getStringAttr("model"));
  EXPECT_EQ(renamed.getType(), type({{"model", 8}}));
}

TEST_F(TypeInferenceTest, GradientOpsTakeTheForwardOperandTypes) {
  Value logits = valueOf(type({{"seq", 4}, {"vocab", 16}}));
  Value labels = valueOf(type({{"seq", 4}}, builder.getI32Type()));
  Value loss = valueOf(type({}));
  auto grad = CrossEntropyGradOp::create(builder, loc, logits, labels, loss, /*mask=*/Value(),
                                         builder.getStringAttr("vocab"));
  EXPECT_EQ(grad.getType(), logits.getType());
}

TEST_F(TypeInferenceTest, InferenceReportsTheBrokenRuleAtTheLocation) {
  Value lhs = valueOf(type({{"seq", 4}}));
  Value rhs = valueOf(type({{"seq", 8}}));
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  SmallVector<Type> types;
  AddOp::Adaptor adaptor(ValueRange{lhs, rhs});
  EXPECT_TRUE(failed(AddOp::inferReturnTypes(&context, loc, adaptor, types)));
  EXPECT_TRUE(types.empty());
  EXPECT_EQ(message, "dimension 'seq' has size 4 in the lhs but 8 in the rhs");
}

TEST_F(TypeInferenceTest, InferenceWithoutLocationFailsSilently) {
  Value x = valueOf(type({{"seq", 4}}));
  bool reported = false;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &) {
    reported = true;
    return success();
  });
  SmallVector<Type> types;
  ReduceSumOp::Properties properties;
  properties.over = builder.getStrArrayAttr({"hidden"});
  ReduceSumOp::Adaptor adaptor(ValueRange{x}, /*attrs=*/nullptr, properties);
  EXPECT_TRUE(failed(ReduceSumOp::inferReturnTypes(&context, std::nullopt, adaptor, types)));
  EXPECT_FALSE(reported);
}

} // namespace
