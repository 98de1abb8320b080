//===- BuiltinLowering.cpp - the .mtl builtins to mt ops -------------------===//
//
// Each builtin of docs/dsl.md: its arguments checked (arity, keywords, dimension names,
// constants), its mt op built with the dialect's shape rules, errors at the call's span.
//
//===----------------------------------------------------------------------===//

#include "frontend/MLIRGenImpl.h"

#include "mlir/IR/Verifier.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mtc;
using namespace mtc::frontend;
using namespace mtc::frontend::detail;

//===----------------------------------------------------------------------===//
// Builtin arguments
//===----------------------------------------------------------------------===//

Value MLIRGenImpl::tensorArg(const Expr &expr, llvm::StringRef what, const Expr &call) {
  Val val = eval(expr);
  if (!val.valid())
    return {};
  if (val.isConstant()) {
    diags.error(expr.range, "'" + call.name + "' needs a tensor as its " + what +
                                ", not the constant " + formatNumber(val.number));
    return {};
  }
  return val.tensor;
}

Value MLIRGenImpl::floatTensorArg(const Expr &expr, llvm::StringRef what, const Expr &call) {
  Value value = tensorArg(expr, what, call);
  if (value && !isa<FloatType>(typeOf(value).getElementType())) {
    diags.error(expr.range, "'" + call.name + "' needs a floating-point tensor as its " + what +
                                ", not the " + typeToString(typeOf(value)) +
                                " tensor (integer tensors hold token ids and labels)");
    return {};
  }
  return value;
}

std::optional<std::string> MLIRGenImpl::dimName(const Expr &expr, const llvm::Twine &what) {
  if (expr.kind != Expr::Kind::Name) {
    diags.error(expr.range, what + " must be a dimension name");
    return std::nullopt;
  }
  return expr.name;
}

std::optional<SmallVector<std::string>> MLIRGenImpl::dimNames(const Expr &expr,
                                                              llvm::StringRef what) {
  SmallVector<std::string> names;
  if (expr.kind == Expr::Kind::Tuple) {
    for (const ExprPtr &element : expr.args) {
      std::optional<std::string> name = dimName(*element, what);
      if (!name)
        return std::nullopt;
      names.push_back(*name);
    }
    return names;
  }
  std::optional<std::string> name = dimName(expr, what);
  if (!name)
    return std::nullopt;
  names.push_back(*name);
  return names;
}

std::optional<double> MLIRGenImpl::constantArg(const Expr *expr, double fallback,
                                               llvm::StringRef what) {
  if (!expr)
    return fallback;
  bool isInteger = false;
  std::optional<double> value = evalConstant(*expr, isInteger);
  if (!value)
    diags.note(expr->range, what + " must be a compile-time constant");
  return value;
}

std::optional<int64_t> MLIRGenImpl::dimSize(llvm::StringRef name, const SourceRange &range) {
  if (auto it = dims.find(name); it != dims.end())
    return it->second;
  diags.error(range, "unknown dimension '" + name + "'; declare it in dims {}");
  return std::nullopt;
}

bool MLIRGenImpl::requireDim(Value value, llvm::StringRef dim, const SourceRange &range,
                             llvm::StringRef what) {
  if (typeOf(value).hasDim(dim))
    return true;
  diags.error(range, what + " " + typeOf(value).dimsToString() + " has no dimension '" + dim +
                         "'");
  return false;
}

//===----------------------------------------------------------------------===//
// Builtins
//===----------------------------------------------------------------------===//

Val MLIRGenImpl::unaryBuiltin(const Expr &call, llvm::StringRef name) {
  CallArgs args(call, diags);
  bool isGelu = name == "gelu";
  if (!args.check(1, 1, isGelu ? llvm::ArrayRef<llvm::StringRef>{"approximate"}
                               : llvm::ArrayRef<llvm::StringRef>{}))
    return {};
  Val operand = eval(*call.args.front());
  if (!operand.valid())
    return {};
  if (operand.isConstant()) {
    bool isInteger = false;
    std::optional<double> value = evalConstant(call, isInteger);
    return value ? Val::constant(*value, false) : Val();
  }
  Value x = operand.tensor;
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return fail(call.args.front()->range, "'" + name + "' needs a floating-point tensor");
  Location location = loc(call.range);
  if (isGelu) {
    bool approximate = true;
    if (const Expr *kw = args.keyword("approximate")) {
      if (kw->kind != Expr::Kind::Name || (kw->name != "tanh" && kw->name != "none"))
        return fail(kw->range, "'approximate' must be 'tanh' (GPT-2's form) or 'none' (erf)");
      approximate = kw->name == "tanh";
    }
    return Val::of(mt::GeluOp::create(builder, location, x, approximate));
  }
  using Builder = std::function<Value(Value)>;
  const llvm::StringMap<Builder> builders = {
      {"silu", [&](Value v) { return mt::SiluOp::create(builder, location, v).getResult(); }},
      {"relu", [&](Value v) { return mt::ReluOp::create(builder, location, v).getResult(); }},
      {"sigmoid", [&](Value v) { return mt::SigmoidOp::create(builder, location, v).getResult(); }},
      {"tanh", [&](Value v) { return mt::TanhOp::create(builder, location, v).getResult(); }},
      {"exp", [&](Value v) { return mt::ExpOp::create(builder, location, v).getResult(); }},
      {"log", [&](Value v) { return mt::LogOp::create(builder, location, v).getResult(); }},
      {"sqrt", [&](Value v) { return mt::SqrtOp::create(builder, location, v).getResult(); }},
      {"rsqrt", [&](Value v) { return mt::RsqrtOp::create(builder, location, v).getResult(); }},
  };
  return Val::of(builders.lookup(name)(x));
}

Val MLIRGenImpl::reduceBuiltin(const Expr &call, llvm::StringRef name) {
  CallArgs args(call, diags);
  // `max(a, b)` is elementwise; `max(x, over = d)` reduces.
  if (name == "max" && call.args.size() == 2 && call.kwargs.empty()) {
    Value lhs = floatTensorArg(*call.args[0], "first argument", call);
    Value rhs = floatTensorArg(*call.args[1], "second argument", call);
    if (!lhs || !rhs)
      return {};
    Value max = createInferred<mt::MaxOp>(call.range, lhs, rhs);
    return max ? Val::of(max) : Val();
  }
  if (!args.check(1, 1, {"over"}))
    return {};
  Value x = floatTensorArg(*call.args.front(), "argument", call);
  const Expr *over = args.keyword("over");
  if (!x)
    return {};
  if (!over)
    return fail(call.range, "'" + name + "' needs 'over = <dim>' or 'over = (d1, d2)'");
  std::optional<SmallVector<std::string>> names = dimNames(*over, "'over'");
  if (!names)
    return {};
  ArrayAttr overAttr =
      builder.getStrArrayAttr(SmallVector<StringRef>(names->begin(), names->end()));
  Value reduced = name == "sum"    ? createInferred<mt::ReduceSumOp>(over->range, x, overAttr)
                  : name == "mean" ? createInferred<mt::ReduceMeanOp>(over->range, x, overAttr)
                                   : createInferred<mt::ReduceMaxOp>(over->range, x, overAttr);
  return reduced ? Val::of(reduced) : Val();
}

Val MLIRGenImpl::normBuiltin(const Expr &call, bool rms) {
  CallArgs args(call, diags);
  if (!args.check(2, rms ? 2 : 3, {"eps", "over"}))
    return {};
  Value x = floatTensorArg(*call.args[0], "input", call);
  Value scale = floatTensorArg(*call.args[1], "scale", call);
  Value bias = call.args.size() == 3 ? floatTensorArg(*call.args[2], "bias", call) : Value();
  if (!x || !scale || (call.args.size() == 3 && !bias))
    return {};
  std::string dim;
  if (const Expr *over = args.keyword("over")) {
    std::optional<std::string> name = dimName(*over, "'over'");
    if (!name || !requireDim(x, *name, over->range, "input"))
      return {};
    dim = *name;
  } else if (typeOf(x).getRank() == 0) {
    return fail(call.args[0]->range, "cannot normalise a scalar");
  } else {
    dim = typeOf(x).getDimNames().back().str();
  }
  std::optional<double> eps = constantArg(args.keyword("eps"), rms ? 1e-6 : 1e-5, "'eps'");
  if (!eps)
    return {};
  if (*eps <= 0)
    return fail(args.keyword("eps")->range, "'eps' must be positive");
  mt::NamedTensorType weightType = typeOf(x).withDims(
      {mt::NamedDim{builder.getStringAttr(dim), typeOf(x).getDimSize(dim)}});
  for (auto [value, expr, what] :
       {std::tuple{scale, call.args[1].get(), "scale"},
        std::tuple{bias, call.args.size() == 3 ? call.args[2].get() : nullptr, "bias"}}) {
    if (value && typeOf(value) != weightType)
      return fail(expr->range, std::string("the ") + what + " " + typeOf(value).dimsToString() +
                                   " must have exactly the normalised dimension " +
                                   weightType.dimsToString());
  }
  Value normalised =
      rms ? createInferred<mt::RMSNormOp>(call.range, x, scale, builder.getStringAttr(dim),
                                          builder.getF64FloatAttr(*eps))
          : createInferred<mt::LayerNormOp>(call.range, x, scale, bias, builder.getStringAttr(dim),
                                            builder.getF64FloatAttr(*eps));
  return normalised ? Val::of(normalised) : Val();
}

Val MLIRGenImpl::attentionBuiltin(const Expr &call) {
  CallArgs args(call, diags);
  if (!args.check(3, 4, {"scale", "seq", "heads", "head_dim"}))
    return {};
  bool causal = false;
  if (call.args.size() == 4) {
    const Expr &flag = *call.args[3];
    if (flag.kind != Expr::Kind::Name || flag.name != "causal")
      return fail(flag.range, "the fourth argument of 'attention' can only be 'causal'");
    causal = true;
  }
  Value q = floatTensorArg(*call.args[0], "query", call);
  Value k = floatTensorArg(*call.args[1], "key", call);
  Value v = floatTensorArg(*call.args[2], "value", call);
  if (!q || !k || !v)
    return {};
  auto dimOr = [&](llvm::StringRef keyword, llvm::StringRef fallback) -> std::optional<std::string> {
    if (const Expr *expr = args.keyword(keyword))
      return dimName(*expr, "'" + keyword + "'");
    return fallback.str();
  };
  std::optional<std::string> seq = dimOr("seq", "seq"), heads = dimOr("heads", "heads"),
                             headDim = dimOr("head_dim", "head_dim");
  if (!seq || !heads || !headDim)
    return {};
  for (auto [value, expr, what] : {std::tuple{q, call.args[0].get(), "query"}}) {
    for (const std::string &dim : {*seq, *heads, *headDim})
      if (!requireDim(value, dim, expr->range, what))
        return {};
  }
  // The key's head dimension: `heads` itself (multi-head) or the one dimension the key has
  // that the query lacks (grouped-query attention's kv_heads).
  std::string kvHeads = *heads;
  if (!typeOf(k).hasDim(*heads)) {
    SmallVector<StringRef> extra;
    for (StringAttr name : typeOf(k).getDimNames())
      if (!typeOf(q).hasDim(name))
        extra.push_back(name.getValue());
    if (extra.size() != 1)
      return fail(call.args[1]->range,
                  "key " + typeOf(k).dimsToString() + " must have the query's '" + *heads +
                      "' dimension or exactly one other head dimension (grouped-query "
                      "attention)");
    kvHeads = extra.front().str();
  }
  double defaultScale = 1.0 / std::sqrt(static_cast<double>(typeOf(q).getDimSize(*headDim)));
  std::optional<double> scale = constantArg(args.keyword("scale"), defaultScale, "'scale'");
  if (!scale)
    return {};
  // Report shape problems at the call with the dialect's wording.
  auto op = mt::AttentionOp::create(builder, loc(call.range), q, k, v, /*positions=*/Value(),
                                    *seq, *heads, kvHeads, *headDim, causal,
                                    llvm::APFloat(*scale));
  LogicalResult verified = withErrorsAt(call.range, [&](auto) { return op.verify(); });
  if (failed(verified)) {
    op.erase();
    return {};
  }
  return Val::of(op.getResult());
}

SmallVector<Val> MLIRGenImpl::moeBuiltin(const Expr &call) {
  // topk(x, over = experts, k = topk) -> values, indices
  CallArgs args(call, diags);
  if (!args.check(1, 1, {"over", "k"}))
    return {};
  Value x = floatTensorArg(*call.args[0], "input", call);
  if (!x)
    return {};
  const Expr *over = args.keyword("over");
  const Expr *k = args.keyword("k");
  std::optional<std::string> dim = over ? dimName(*over, "'over'") : std::string("experts");
  std::optional<std::string> kDim = k ? dimName(*k, "'k'") : std::string("topk");
  if (!dim || !kDim || !requireDim(x, *dim, over ? over->range : call.range, "input"))
    return {};
  std::optional<int64_t> kSize = dimSize(*kDim, k ? k->range : call.range);
  if (!kSize)
    return {};
  if (*kSize > typeOf(x).getDimSize(*dim)) {
    diags.error(call.range, "k = " + std::to_string(*kSize) + " exceeds the " +
                                std::to_string(typeOf(x).getDimSize(*dim)) + " entries of '" +
                                *dim + "'");
    return {};
  }
  SmallVector<mt::NamedDim> resultDims = typeOf(x).getDims();
  for (mt::NamedDim &d : resultDims)
    if (d.name.getValue() == *dim)
      d = {builder.getStringAttr(*kDim), *kSize};
  std::optional<mt::NamedTensorType> values = resultType(typeOf(x), resultDims, call.range);
  if (!values)
    return {};
  auto op = mt::TopKOp::create(builder, loc(call.range), *values,
                                       values->withElementType(builder.getI32Type()), x,
                                       builder.getStringAttr(*dim), builder.getStringAttr(*kDim));
  if (failed(withErrorsAt(call.range, [&](auto) { return op.verify(); }))) {
    op.erase();
    return {};
  }
  return {Val::of(op.getValues()), Val::of(op.getIndices())};
}

Val MLIRGenImpl::evalCall(const Expr &call) {
  llvm::StringRef name = call.name;
  CallArgs args(call, diags);
  Location location = loc(call.range);

  static const llvm::StringSet<> unary = {"gelu", "silu", "relu", "sigmoid", "tanh",
                                          "exp",  "log",  "sqrt", "rsqrt"};
  if (unary.contains(name))
    return unaryBuiltin(call, name);
  if (name == "sum" || name == "mean" || name == "max")
    return reduceBuiltin(call, name);
  if (name == "layer_norm" || name == "rms_norm")
    return normBuiltin(call, name == "rms_norm");
  if (name == "attention")
    return attentionBuiltin(call);

  if (name == "contract") {
    if (!args.check(2, 2, {"over"}))
      return {};
    Value lhs = floatTensorArg(*call.args[0], "first argument", call);
    Value rhs = floatTensorArg(*call.args[1], "second argument", call);
    const Expr *over = args.keyword("over");
    if (!lhs || !rhs)
      return {};
    if (!over)
      return fail(call.range, "'contract' needs 'over = <dim>' or 'over = (d1, d2)'");
    std::optional<SmallVector<std::string>> names = dimNames(*over, "'over'");
    if (!names)
      return {};
    Value contracted = createInferred<mt::ContractOp>(
        over->range, lhs, rhs,
        builder.getStrArrayAttr(SmallVector<StringRef>(names->begin(), names->end())));
    return contracted ? Val::of(contracted) : Val();
  }

  if (name == "swiglu") {
    if (!args.check(2, 2, {}))
      return {};
    Value gate = floatTensorArg(*call.args[0], "gate", call);
    Value up = floatTensorArg(*call.args[1], "up projection", call);
    if (!gate || !up)
      return {};
    Value activated = mt::SiluOp::create(builder, location, gate);
    Value product = createInferred<mt::MulOp>(call.range, activated, up);
    return product ? Val::of(product) : Val();
  }

  if (name == "softmax") {
    if (!args.check(1, 1, {"over"}))
      return {};
    Value x = floatTensorArg(*call.args[0], "argument", call);
    if (!x)
      return {};
    const Expr *over = args.keyword("over");
    std::optional<std::string> dim;
    if (over)
      dim = dimName(*over, "'over'");
    else if (typeOf(x).getRank() > 0)
      dim = typeOf(x).getDimNames().back().str();
    else
      return fail(call.range, "cannot take the softmax of a scalar");
    if (!dim || !requireDim(x, *dim, over ? over->range : call.range, "input"))
      return {};
    return Val::of(mt::SoftmaxOp::create(builder, location, x, builder.getStringAttr(*dim)));
  }

  if (name == "rope") {
    if (!args.check(1, 1, {"theta", "over", "position"}))
      return {};
    Value x = floatTensorArg(*call.args[0], "argument", call);
    if (!x)
      return {};
    const Expr *over = args.keyword("over");
    const Expr *position = args.keyword("position");
    std::optional<std::string> dim = over ? dimName(*over, "'over'") : std::string("head_dim");
    std::optional<std::string> pos =
        position ? dimName(*position, "'position'") : std::string("seq");
    std::optional<double> theta = constantArg(args.keyword("theta"), 10000.0, "'theta'");
    if (!dim || !pos || !theta ||
        !requireDim(x, *dim, over ? over->range : call.range, "input") ||
        !requireDim(x, *pos, position ? position->range : call.range, "input"))
      return {};
    if (typeOf(x).getDimSize(*dim) % 2 != 0)
      return fail(over ? over->range : call.range,
                  "rope rotates pairs: '" + *dim + "' must have an even size, got " +
                      std::to_string(typeOf(x).getDimSize(*dim)));
    if (*theta <= 0)
      return fail(args.keyword("theta")->range, "'theta' must be positive");
    return Val::of(mt::RopeOp::create(builder, location, x, builder.getStringAttr(*dim),
                                              builder.getStringAttr(*pos),
                                              builder.getF64FloatAttr(*theta), UnitAttr(),
                                              Value()));
  }

  if (name == "gather") {
    if (!args.check(2, 2, {"over"}))
      return {};
    Value table = floatTensorArg(*call.args[0], "table", call);
    Value ids = tensorArg(*call.args[1], "indices", call);
    if (!table || !ids)
      return {};
    if (!isa<IntegerType>(typeOf(ids).getElementType()))
      return fail(call.args[1]->range, "'gather' needs integer indices, e.g. tokens: i32[batch, seq]");
    const Expr *over = args.keyword("over");
    std::optional<std::string> dim;
    if (over)
      dim = dimName(*over, "'over'");
    else if (typeOf(table).getRank() > 0)
      dim = typeOf(table).getDimNames().front().str();
    else
      return fail(call.args[0]->range, "cannot gather from a scalar");
    if (!dim || !requireDim(table, *dim, over ? over->range : call.range, "table"))
      return {};
    Value rows = createInferred<mt::GatherOp>(call.range, table, ids, builder.getStringAttr(*dim));
    return rows ? Val::of(rows) : Val();
  }

  if (name == "cross_entropy") {
    if (!args.check(2, 2, {"over"}))
      return {};
    Value logits = floatTensorArg(*call.args[0], "logits", call);
    Value labels = tensorArg(*call.args[1], "labels", call);
    if (!logits || !labels)
      return {};
    const Expr *over = args.keyword("over");
    std::optional<std::string> dim = over ? dimName(*over, "'over'") : std::string("vocab");
    if (!dim || !requireDim(logits, *dim, over ? over->range : call.range, "logits"))
      return {};
    auto op = mt::CrossEntropyOp::create(builder, 
        location, mt::NamedTensorType::getScalar(builder.getF32Type()), logits, labels,
        /*mask=*/Value(), builder.getStringAttr(*dim));
    if (failed(withErrorsAt(call.range, [&](auto) { return op.verify(); }))) {
      op.erase();
      return {};
    }
    return Val::of(op.getResult());
  }

  if (name == "dropout") {
    if (!args.check(2, 2, {}))
      return {};
    Value x = floatTensorArg(*call.args[0], "input", call);
    std::optional<double> rate = constantArg(call.args[1].get(), 0, "the dropout rate");
    if (!x || !rate)
      return {};
    if (!(*rate >= 0 && *rate < 1))
      return fail(call.args[1]->range, "dropout rate must be in [0, 1), got " +
                                           formatNumber(*rate));
    return Val::of(mt::DropoutOp::create(builder, location, x, builder.getF64FloatAttr(*rate),
                                                 builder.getI64IntegerAttr(nextDropoutStream++)));
  }

  if (name == "split" || name == "merge" || name == "rename") {
    bool isRename = name == "rename";
    llvm::StringRef keyword = name == "split" ? "into" : name == "merge" ? "into" : "to";
    if (!args.check(2, 2, {keyword}))
      return {};
    Value x = tensorArg(*call.args[0], "input", call);
    const Expr *target = args.keyword(keyword);
    if (!x)
      return {};
    if (!target)
      return fail(call.range, "'" + name + "' needs '" + keyword + " = ...'");
    mt::NamedTensorType input = typeOf(x);
    if (name == "split") {
      std::optional<std::string> dim = dimName(*call.args[1], "the dimension to split");
      std::optional<SmallVector<std::string>> into = dimNames(*target, "'into'");
      if (!dim || !into || !requireDim(x, *dim, call.args[1]->range, "input"))
        return {};
      SmallVector<mt::NamedDim> resultDims;
      int64_t product = 1;
      for (const mt::NamedDim &d : input.getDims()) {
        if (d.name.getValue() != *dim) {
          resultDims.push_back(d);
          continue;
        }
        for (const std::string &part : *into) {
          std::optional<int64_t> size = dimSize(part, target->range);
          if (!size)
            return {};
          product *= *size;
          resultDims.push_back({builder.getStringAttr(part), *size});
        }
      }
      if (product != input.getDimSize(*dim))
        return fail(call.range, "cannot split '" + *dim + "' of size " +
                                    std::to_string(input.getDimSize(*dim)) +
                                    " into dimensions whose sizes multiply to " +
                                    std::to_string(product));
      std::optional<mt::NamedTensorType> type = resultType(input, resultDims, call.range);
      if (!type)
        return {};
      auto op = mt::SplitOp::create(builder, location, *type, x,
                                            builder.getStringAttr(*dim),
                                            builder.getStrArrayAttr(SmallVector<StringRef>(
                                                into->begin(), into->end())));
      if (failed(withErrorsAt(call.range, [&](auto) { return op.verify(); }))) {
        op.erase();
        return {};
      }
      return Val::of(op.getResult());
    }
    if (name == "merge") {
      std::optional<SmallVector<std::string>> merged =
          dimNames(*call.args[1], "the dimensions to merge");
      std::optional<std::string> into = dimName(*target, "'into'");
      if (!merged || !into)
        return {};
      int64_t product = 1;
      for (const std::string &d : *merged) {
        if (!requireDim(x, d, call.args[1]->range, "input"))
          return {};
        product *= input.getDimSize(d);
      }
      if (auto it = dims.find(*into); it != dims.end() && it->second != product)
        return fail(target->range, "merged size " + std::to_string(product) + " differs from '" +
                                       *into + "' = " + std::to_string(it->second));
      Value mergedValue = createInferred<mt::MergeOp>(
          call.range, x,
          builder.getStrArrayAttr(SmallVector<StringRef>(merged->begin(), merged->end())),
          builder.getStringAttr(*into));
      return mergedValue ? Val::of(mergedValue) : Val();
    }
    (void)isRename;
    std::optional<std::string> dim = dimName(*call.args[1], "the dimension to rename");
    std::optional<std::string> to = dimName(*target, "'to'");
    if (!dim || !to || !requireDim(x, *dim, call.args[1]->range, "input"))
      return {};
    if (auto it = dims.find(*to); it != dims.end() && it->second != input.getDimSize(*dim))
      return fail(target->range, "'" + *to + "' has size " + std::to_string(it->second) +
                                     " but '" + *dim + "' has size " +
                                     std::to_string(input.getDimSize(*dim)));
    if (input.hasDim(*to))
      return fail(target->range, "input already has a dimension '" + *to + "'");
    Value renamed = createInferred<mt::RenameOp>(call.range, x, builder.getStringAttr(*dim),
                                                 builder.getStringAttr(*to));
    return renamed ? Val::of(renamed) : Val();
  }

  if (name == "z_loss") {
    if (!args.check(1, 1, {"over"}))
      return {};
    Value logits = floatTensorArg(*call.args[0], "router logits", call);
    if (!logits)
      return {};
    const Expr *over = args.keyword("over");
    std::optional<std::string> dim = over ? dimName(*over, "'over'") : std::string("experts");
    if (!dim || !requireDim(logits, *dim, over ? over->range : call.range, "router logits"))
      return {};
    Value loss = createInferred<mt::ZLossOp>(call.range, logits, builder.getStringAttr(*dim));
    return loss ? Val::of(loss) : Val();
  }

  if (name == "dispatch" || name == "combine" || name == "load_balancing_loss") {
    bool isDispatch = name == "dispatch", isCombine = name == "combine";
    SmallVector<llvm::StringRef> keywords = {"experts", "k"};
    if (isDispatch)
      keywords.push_back("capacity_factor");
    else if (!isCombine)
      keywords.push_back("convention");
    size_t positional = isCombine ? 3 : 2;
    // dispatch's optional third argument is the flag `dropless`.
    if (!args.check(positional, isDispatch ? 3 : positional, keywords))
      return {};
    bool dropless = isDispatch && call.args.size() == 3;
    if (dropless) {
      const Expr &flag = *call.args[2];
      if (flag.kind != Expr::Kind::Name || flag.name != "dropless")
        return fail(flag.range, "the third argument of 'dispatch' can only be 'dropless'");
      if (const Expr *factor = args.keyword("capacity_factor"))
        return fail(factor->range, "a dropless dispatch has no capacity factor: every expert "
                                   "has room for all the tokens");
    }
    SmallVector<Value> operands;
    // load_balancing_loss takes the router's logits in Switch's convention (it applies the
    // softmax) and its probabilities in Megatron's.
    bool megatron = false;
    if (const Expr *convention = args.keyword("convention")) {
      if (convention->kind != Expr::Kind::Name ||
          (convention->name != "switch" && convention->name != "megatron"))
        return fail(convention->range, "'convention' is 'switch' (router logits, the default) "
                                       "or 'megatron' (router probabilities)");
      megatron = convention->name == "megatron";
    }
    static const char *roles[4][3] = {{"input", "indices", ""},
                                      {"expert outputs", "indices", "weights"},
                                      {"router logits", "indices", ""},
                                      {"router probabilities", "indices", ""}};
    unsigned role = isDispatch ? 0 : isCombine ? 1 : megatron ? 3 : 2;
    for (size_t i = 0; i < positional; ++i) {
      // Operand 1 holds the expert indices; the others are activations.
      Value operand = i == 1 ? tensorArg(*call.args[i], roles[role][i], call)
                             : floatTensorArg(*call.args[i], roles[role][i], call);
      if (!operand)
        return {};
      operands.push_back(operand);
    }
    const Expr *expertsKw = args.keyword("experts");
    const Expr *kKw = args.keyword("k");
    std::optional<std::string> expertDim =
        expertsKw ? dimName(*expertsKw, "'experts'") : std::string("experts");
    std::optional<std::string> kDim = kKw ? dimName(*kKw, "'k'") : std::string("topk");
    if (!expertDim || !kDim ||
        !requireDim(operands[1], *kDim, kKw ? kKw->range : call.args[1]->range, "indices"))
      return {};
    std::optional<int64_t> experts =
        dimSize(*expertDim, expertsKw ? expertsKw->range : call.range);
    if (!experts)
      return {};
    if (isCombine) {
      if (!requireDim(operands[0], *expertDim, call.args[0]->range, "expert outputs") ||
          !requireDim(operands[0], "capacity", call.args[0]->range, "expert outputs"))
        return {};
      Value combined = createInferred<mt::CombineOp>(
          call.range, operands[0], operands[1], operands[2], builder.getStringAttr(*kDim),
          builder.getStringAttr(*expertDim), builder.getStringAttr("capacity"));
      return combined ? Val::of(combined) : Val();
    }
    if (!isDispatch) {
      Value loss = createInferred<mt::LoadBalancingLossOp>(
          call.range, operands[0], operands[1], builder.getStringAttr(*expertDim),
          builder.getStringAttr(*kDim), megatron ? builder.getUnitAttr() : UnitAttr());
      return loss ? Val::of(loss) : Val();
    }
    // The capacity is derived: ceil(factor * tokens * k / experts), or the token count when
    // dropless; the expert count comes from the dims {} declaration, so the result type is
    // given, not inferred.
    mt::NamedTensorType indices = typeOf(operands[1]);
    int64_t k = indices.getDimSize(*kDim);
    int64_t tokens = indices.getNumElements() / k;
    int64_t capacity = tokens;
    FloatAttr factorAttr;
    if (!dropless) {
      std::optional<double> factor =
          constantArg(args.keyword("capacity_factor"), 1.25, "'capacity_factor'");
      if (!factor)
        return {};
      if (!(*factor > 0))
        return fail(args.keyword("capacity_factor")->range, "'capacity_factor' must be positive");
      double exact =
          std::ceil(*factor * static_cast<double>(tokens * k) / static_cast<double>(*experts));
      // Checked before the conversion, which is undefined beyond int64_t.
      if (!(exact < 0x1p62))
        return fail(args.keyword("capacity_factor")->range,
                    "'capacity_factor' gives a capacity too large to allocate");
      capacity = static_cast<int64_t>(exact);
      factorAttr = builder.getF64FloatAttr(*factor);
    }
    SmallVector<mt::NamedDim> resultDims = {{builder.getStringAttr(*expertDim), *experts},
                                            {builder.getStringAttr("capacity"), capacity}};
    // The input's feature dims: all but the token dims (the indices' dims except k).
    for (const mt::NamedDim &d : typeOf(operands[0]).getDims())
      if (!indices.hasDim(d.name) || d.name.getValue() == *kDim)
        resultDims.push_back(d);
    std::optional<mt::NamedTensorType> type =
        resultType(typeOf(operands[0]), resultDims, call.range);
    if (!type)
      return {};
    auto op =
        mt::DispatchOp::create(builder, location, *type, operands[0], operands[1],
                               builder.getStringAttr(*kDim), builder.getStringAttr(*expertDim),
                               builder.getStringAttr("capacity"), factorAttr);
    if (failed(withErrorsAt(call.range, [&](auto) { return mlir::verify(op, false); }))) {
      op->erase();
      return {};
    }
    return Val::of(op.getResult());
  }

  if (layers.count(name))
    return fail(call.range, "internal: layer call reached evalCall");
  return fail(call.nameRange, "unknown function '" + name + "'");
}
