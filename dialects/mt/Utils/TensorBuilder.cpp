//===- TensorBuilder.cpp - mt ops with inferred types ---------------------===//

#include "dialects/mt/Utils/TensorBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::mt;

Value TensorBuilder::scalar(double value, Value like) {
  return mt::ConstantOp::create(b, loc,
                                mt::NamedTensorType::getScalar(typeOf(like).getElementType()),
                                b.getF64FloatAttr(value));
}

Value TensorBuilder::zeros(mt::NamedTensorType type) {
  Value zero = mt::ConstantOp::create(b, loc, mt::NamedTensorType::getScalar(type.getElementType()),
                                      b.getF64FloatAttr(0.0));
  return type.getRank() == 0 ? zero : mt::BroadcastOp::create(b, loc, type, zero).getResult();
}

Value TensorBuilder::add(Value lhs, Value rhs) { return mt::AddOp::create(b, loc, lhs, rhs); }
Value TensorBuilder::sub(Value lhs, Value rhs) { return mt::SubOp::create(b, loc, lhs, rhs); }
Value TensorBuilder::mul(Value lhs, Value rhs) { return mt::MulOp::create(b, loc, lhs, rhs); }
Value TensorBuilder::div(Value lhs, Value rhs) { return mt::DivOp::create(b, loc, lhs, rhs); }
Value TensorBuilder::pow(Value lhs, Value rhs) { return mt::PowOp::create(b, loc, lhs, rhs); }
Value TensorBuilder::greater(Value lhs, Value rhs) {
  return mt::GreaterOp::create(b, loc, lhs, rhs);
}
Value TensorBuilder::neg(Value value) { return mt::NegOp::create(b, loc, value); }
Value TensorBuilder::exp(Value value) { return mt::ExpOp::create(b, loc, value); }
Value TensorBuilder::log(Value value) { return mt::LogOp::create(b, loc, value); }
Value TensorBuilder::sigmoid(Value value) { return mt::SigmoidOp::create(b, loc, value); }
Value TensorBuilder::rsqrt(Value value) { return mt::RsqrtOp::create(b, loc, value); }
Value TensorBuilder::sqrt(Value value) { return mt::SqrtOp::create(b, loc, value); }
Value TensorBuilder::cos(Value value) { return mt::CosOp::create(b, loc, value); }
Value TensorBuilder::max(Value lhs, Value rhs) { return mt::MaxOp::create(b, loc, lhs, rhs); }
Value TensorBuilder::min(Value lhs, Value rhs) { return neg(max(neg(lhs), neg(rhs))); }

Value TensorBuilder::sumAll(Value value) {
  SmallVector<StringRef> all;
  for (StringAttr name : typeOf(value).getDimNames())
    all.push_back(name.getValue());
  return reduceSum(value, all);
}

Value TensorBuilder::reduceSum(Value value, ArrayRef<StringRef> over) {
  if (over.empty())
    return value;
  return mt::ReduceSumOp::create(b, loc, value, b.getStrArrayAttr(over));
}

Value TensorBuilder::reduceMean(Value value, ArrayRef<StringRef> over) {
  return mt::ReduceMeanOp::create(b, loc, value, b.getStrArrayAttr(over));
}

Value TensorBuilder::reduceMax(Value value, ArrayRef<StringRef> over) {
  return mt::ReduceMaxOp::create(b, loc, value, b.getStrArrayAttr(over));
}

Value TensorBuilder::logSumExp(Value value, StringRef dim) {
  Value max = reduceMax(value, {dim});
  return add(log(reduceSum(exp(sub(value, max)), {dim})), max);
}

Value TensorBuilder::contract(Value lhs, Value rhs, ArrayRef<StringRef> over) {
  return mt::ContractOp::create(b, loc, lhs, rhs, b.getStrArrayAttr(over));
}

Value TensorBuilder::transposeTo(Value value, mt::NamedTensorType target) {
  mt::NamedTensorType type = typeOf(value);
  if (type == target)
    return value;
  if (type.getElementType() != target.getElementType())
    value = mt::CastOp::create(b, loc, type.withElementType(target.getElementType()), value);
  if (typeOf(value) == target)
    return value;
  return mt::TransposeOp::create(b, loc, target, value);
}

Value TensorBuilder::castTo(Value value, Type element) {
  mt::NamedTensorType type = typeOf(value);
  if (type.getElementType() == element)
    return value;
  return mt::CastOp::create(b, loc, type.withElementType(element), value);
}

Value TensorBuilder::broadcastTo(Value value, mt::NamedTensorType target) {
  mt::NamedTensorType type = typeOf(value);
  if (type.getRank() == target.getRank())
    return transposeTo(value, target);
  return mt::BroadcastOp::create(b, loc, target.withElementType(type.getElementType()), value);
}

Value TensorBuilder::sumTo(Value grad, mt::NamedTensorType target) {
  SmallVector<StringRef> extra;
  for (StringAttr name : typeOf(grad).getDimNames())
    if (!target.hasDim(name))
      extra.push_back(name.getValue());
  return transposeTo(reduceSum(grad, extra), target);
}
