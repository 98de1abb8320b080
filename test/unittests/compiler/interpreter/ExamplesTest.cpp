//===- ExamplesTest.cpp - whole example models run by the interpreter -----===//
//
// The tiny examples, lowered by the frontend, run forward with deterministic near-zero
// weights: the logits are then nearly uniform, so the loss is close to ln(vocab) (plus the
// small auxiliary load-balancing term of the MoE models).
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"
#include "test/unittests/support/LowerExample.h"



#include <cctype>
#include <cmath>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;

namespace {

struct ExampleCase {
  const char *file;
  /// Upper bound of |loss - ln(vocab)|.
  double tolerance;
};

class ExamplesTest : public InterpreterTest, public ::testing::WithParamInterface<ExampleCase> {
protected:
  /// The example lowered to mt, or null (with a test failure).
  mlir::ModuleOp lower(llvm::StringRef file) {
    std::string errors;
    mlir::OwningOpRef<mlir::ModuleOp> module = mtc::testing::lowerExample(context, file, errors);
    if (!module) {
      ADD_FAILURE() << "cannot lower " << file.str() << ":\n" << errors;
      return nullptr;
    }
    modules.push_back(std::move(module));
    return *modules.back();
  }
};

/// Weights as their initialiser asks, with deterministic values in place of the random
/// ones: ones, zeros, constants, and normal(std) as uniform values of that deviation.
static llvm::Error setParams(Interpreter &interp, mlir::ModuleOp module, Random &rng) {
  for (auto param : module.getOps<mt::ParamOp>()) {
    llvm::Expected<mt::NamedTensorType> type = interp.getParamValueType(param.getSymName());
    if (!type)
      return type.takeError();
    Tensor value(*type);
    mt::InitAttr init = param.getInit();
    llvm::ArrayRef<double> args = init.getArgs().asArrayRef();
    for (double &x : value.data) {
      switch (init.getKind()) {
      case mt::InitKind::Zeros:
        x = 0;
        break;
      case mt::InitKind::Ones:
        x = 1;
        break;
      case mt::InitKind::Constant:
        x = args[0];
        break;
      case mt::InitKind::Normal:
        x = (args.size() > 1 ? args[1] : 0) + args[0] * std::sqrt(3.0) * rng.uniform(-1, 1);
        break;
      case mt::InitKind::Uniform:
        x = rng.uniform(args[0], args[1]);
        break;
      }
    }
    if (llvm::Error error = interp.setParam(param.getSymName(), std::move(value)))
      return error;
  }
  return llvm::Error::success();
}

/// Token ids (and labels) in [0, vocab) for each argument of @forward.
static std::vector<Tensor> randomIds(mlir::func::FuncOp forward, int64_t vocab, Random &rng) {
  std::vector<Tensor> args;
  for (mlir::Type argType : forward.getArgumentTypes()) {
    Tensor ids(llvm::cast<mt::NamedTensorType>(argType));
    for (double &id : ids.data)
      id = static_cast<double>(rng.next() % static_cast<uint64_t>(vocab));
    args.push_back(std::move(ids));
  }
  return args;
}

TEST_P(ExamplesTest, ForwardLossIsNearLnVocab) {
  mlir::ModuleOp module = lower(GetParam().file);
  ASSERT_TRUE(module);
  Interpreter interp(module);
  llvm::Error error = setParams(interp, module, rng);
  ASSERT_FALSE(static_cast<bool>(error)) << llvm::toString(std::move(error));
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(forward);
  auto dims = module->getAttrOfType<mlir::DictionaryAttr>(mt::MTDialect::kDimsAttrName);
  ASSERT_TRUE(dims && dims.getAs<mlir::IntegerAttr>("vocab"));
  int64_t vocab = dims.getAs<mlir::IntegerAttr>("vocab").getInt();
  std::vector<Tensor> args = randomIds(forward, vocab, rng);

  MTC_ASSIGN_OR_FAIL(out, interp.call("forward", args));
  ASSERT_EQ(out.size(), 1u);
  double loss = out[0].data[0];
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, std::log(static_cast<double>(vocab)), GetParam().tolerance);

  // With dropout masks (about one element in ten dropped) the loss changes but stays
  // finite and close.
  interp.setDropoutMode(DropoutMode::DeterministicMasks, [](int64_t stream, int64_t element) {
    return Random(static_cast<uint64_t>(stream) * 0x10001 + static_cast<uint64_t>(element)).next() %
               10 !=
           0;
  });
  MTC_ASSIGN_OR_FAIL(dropped, interp.call("forward", args));
  EXPECT_TRUE(std::isfinite(dropped[0].data[0]));
  EXPECT_NEAR(dropped[0].data[0], std::log(static_cast<double>(vocab)), GetParam().tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, ExamplesTest,
    ::testing::Values(ExampleCase{"gpt-tiny.mtl", 0.05}, ExampleCase{"llama-gqa-tiny.mtl", 0.05},
                      // + aux_coef * (load-balancing loss ~ 1 per layer) / layers ~ 0.02.
                      ExampleCase{"mixtral-tiny.mtl", 0.08},
                      ExampleCase{"mixtral-shared-tiny.mtl", 0.08}),
    [](const ::testing::TestParamInfo<ExampleCase> &info) {
      std::string name = llvm::StringRef(info.param.file).drop_back(4).str();
      for (char &c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)))
          c = '_';
      return name;
    });

} // namespace
