//===- DropoutKeep.cpp - Philox's dropout decision for the GPU kernels ----===//

#include "compiler/codegen/GPU/DropoutKeep.h"

#include "runtime/exec/KernelABI.h"
#include "runtime/support/Philox.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

LogicalResult mtc::codegen::defineDropoutKeep(gpu::GPUModuleOp kernels) {
  auto declaration = dyn_cast_or_null<func::FuncOp>(
      SymbolTable::lookupSymbolIn(kernels, MTC_ABI_DROPOUT_KEEP_ELEMENT));
  if (!declaration)
    return success();
  MLIRContext *context = kernels.getContext();
  OpBuilder b(context);
  Type i32 = b.getI32Type(), i64 = b.getI64Type(), f32 = b.getF32Type();
  // (seed, tensor id, counter, step, keep probability) -> kept (0 or 1).
  auto type = FunctionType::get(context, {i64, i32, i64, i32, f32}, {i32});
  if (!declaration.isExternal() || declaration.getFunctionType() != type)
    return declaration.emitOpError() << "is reserved for the dropout decision, of type " << type;

  Location loc = declaration.getLoc();
  Block *body = declaration.addEntryBlock();
  declaration.setPrivate();
  b.setInsertionPointToStart(body);
  auto constant32 = [&](uint32_t value) -> Value {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i32, value));
  };
  auto low = [&](Value word) -> Value { return arith::TruncIOp::create(b, loc, i32, word); };
  auto high = [&](Value word) -> Value {
    Value shift = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32));
    return low(arith::ShRUIOp::create(b, loc, word, shift));
  };
  Value seed = body->getArgument(0), counter = body->getArgument(2);
  // Philox.h's keying: key {seed lo, seed hi}, counter {index lo, index hi, tensor, step}.
  Value k0 = low(seed), k1 = high(seed);
  Value x[4] = {low(counter), high(counter), body->getArgument(1), body->getArgument(3)};
  Value m0 = constant32(MTC_PHILOX_M0), m1 = constant32(MTC_PHILOX_M1);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 = arith::AddIOp::create(b, loc, k0, constant32(MTC_PHILOX_W0));
      k1 = arith::AddIOp::create(b, loc, k1, constant32(MTC_PHILOX_W1));
    }
    auto p0 = arith::MulUIExtendedOp::create(b, loc, m0, x[0]);
    auto p1 = arith::MulUIExtendedOp::create(b, loc, m1, x[2]);
    Value next[4] = {
        arith::XOrIOp::create(b, loc, arith::XOrIOp::create(b, loc, p1.getHigh(), x[1]), k0),
        p1.getLow(),
        arith::XOrIOp::create(b, loc, arith::XOrIOp::create(b, loc, p0.getHigh(), x[3]), k1),
        p0.getLow()};
    std::copy(std::begin(next), std::end(next), std::begin(x));
  }
  // mtc_uniform_float: the top 24 bits times 2^-24, exact in f32.
  Value bits = arith::ShRUIOp::create(b, loc, x[0], constant32(8));
  Value uniform = arith::MulFOp::create(
      b, loc, arith::UIToFPOp::create(b, loc, f32, bits),
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f / 16777216.0f)));
  Value kept = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, uniform,
                                     body->getArgument(4));
  func::ReturnOp::create(b, loc, ValueRange{arith::ExtUIOp::create(b, loc, i32, kept)});
  return success();
}
