//===- MLIRGen.cpp - lowering the .mtl AST to the mt dialect --------------===//
//
// One pass over the AST: dimensions and model arguments are folded to constants, params
// become `mt.param` symbols, each layer becomes a `func.func` marked `mt.layer`, and the
// statements of a function become `mt` ops. Builtins are checked here (arity, keyword
// arguments, dimension names) so that users see errors in .mtl terms; the shape rules
// themselves are the dialect's (mt::infer*Type), reported at the expression's span.
//
//===----------------------------------------------------------------------===//

#include "frontend/MLIRGen.h"
#include "frontend/MLIRGenImpl.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/Vocabulary.h"
#include "frontend/ConfigLowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

using namespace mlir;
using namespace mtc;
using namespace mtc::frontend;
using namespace mtc::frontend::detail;

/// A number as users write it: the shortest text that reads back as `value` (`2.5`,
/// `1e-05`), or six significant digits for values like 16 / 3.
std::string mtc::frontend::detail::formatNumber(double value) {
  if (std::nearbyint(value) == value && std::fabs(value) < 1e15)
    return std::to_string(static_cast<int64_t>(value));
  char text[32];
  for (int precision = 1; precision <= 6; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

/// Operation::emitError words a verifier's message "'mt.merge' op must ..."; the user wrote a
/// builtin call, not that op, and the caret already points at the call.
std::string mtc::frontend::detail::withoutOpPrefix(llvm::StringRef msg) {
  if (msg.starts_with("'mt."))
    if (size_t end = msg.find("' op "); end != llvm::StringRef::npos)
      return msg.drop_front(end + 5).str();
  return msg.str();
}


//===----------------------------------------------------------------------===//
// Compile-time values
//===----------------------------------------------------------------------===//

std::optional<double> MLIRGenImpl::evalConstant(const Expr &expr, bool &isInteger) {
  switch (expr.kind) {
  case Expr::Kind::Number:
    isInteger = expr.isInteger;
    return expr.number;
  case Expr::Kind::Name: {
    if (auto it = modelArgs.find(expr.name); it != modelArgs.end()) {
      isInteger = integerModelArgs.contains(expr.name);
      return it->second;
    }
    if (auto it = dims.find(expr.name); it != dims.end()) {
      isInteger = true;
      return static_cast<double>(it->second);
    }
    if (failedDims.contains(expr.name))
      return std::nullopt; // already reported
    if (laterDims.contains(expr.name)) {
      diags.error(expr.range, "dimension '" + expr.name + "' is used before its definition; "
                              "a dimension may only use the dimensions before it");
      return std::nullopt;
    }
    diags.error(expr.range, "'" + expr.name + "' is not a constant: expected a number, a model "
                                              "argument or a dimension");
    return std::nullopt;
  }
  case Expr::Kind::Unary: {
    std::optional<double> value = evalConstant(*expr.lhs, isInteger);
    if (value && expr.op == "-")
      return -*value;
    return value;
  }
  case Expr::Kind::Binary: {
    bool lhsInt = false, rhsInt = false;
    std::optional<double> lhs = evalConstant(*expr.lhs, lhsInt);
    std::optional<double> rhs = evalConstant(*expr.rhs, rhsInt);
    if (!lhs || !rhs)
      return std::nullopt;
    isInteger = lhsInt && rhsInt;
    double result;
    if (expr.op == "+") {
      result = *lhs + *rhs;
    } else if (expr.op == "-") {
      result = *lhs - *rhs;
    } else if (expr.op == "*") {
      result = *lhs * *rhs;
    } else if (expr.op == "**") {
      isInteger = isInteger && *rhs >= 0;
      result = std::pow(*lhs, *rhs);
    } else {
      if (*rhs == 0) {
        diags.error(expr.range, "division by zero in a constant expression");
        return std::nullopt;
      }
      // Integer division must be exact: `head_dim = hidden / heads` is a size, never
      // rounded. Remember the first inexact one so a size error can point at it.
      if (isInteger && std::fmod(*lhs, *rhs) != 0) {
        isInteger = false;
        if (!inexactDivision)
          inexactDivision = {expr.range, formatNumber(*lhs) + " / " + formatNumber(*rhs) +
                                             " = " + formatNumber(*lhs / *rhs)};
      }
      result = *lhs / *rhs;
    }
    return finiteConstant(result, expr.range);
  }
  case Expr::Kind::Call: {
    static const llvm::StringMap<double (*)(double)> functions = {
        {"sqrt", [](double x) { return std::sqrt(x); }},
        {"exp", [](double x) { return std::exp(x); }},
        {"log", [](double x) { return std::log(x); }},
    };
    auto it = functions.find(expr.name);
    if (it == functions.end() || expr.args.size() != 1 || !expr.kwargs.empty()) {
      diags.error(expr.range, "'" + expr.name + "(...)' is not a constant expression; only "
                                                "sqrt, exp and log of constants fold");
      return std::nullopt;
    }
    bool argInt = false;
    std::optional<double> arg = evalConstant(*expr.args.front(), argInt);
    if (!arg)
      return std::nullopt;
    if ((expr.name == "sqrt" || expr.name == "log") && *arg < (expr.name == "log" ? 1e-300 : 0)) {
      diags.error(expr.range, "'" + expr.name + "' of " + formatNumber(*arg) +
                                  " is undefined");
      return std::nullopt;
    }
    isInteger = false;
    return finiteConstant(it->second(*arg), expr.range);
  }
  default:
    diags.error(expr.range, "expected a constant expression");
    return std::nullopt;
  }
}

std::optional<int64_t> MLIRGenImpl::evalPositiveInt(const Expr &expr, llvm::StringRef what) {
  bool isInteger = false;
  inexactDivision.reset();
  std::optional<double> value = evalConstant(expr, isInteger);
  if (!value)
    return std::nullopt;
  if (!isInteger || *value < 1 || *value > 1e15) {
    // `2.0` and `8 / 2 * 1.0` are whole but not integers: show that they are floats.
    std::string text = formatNumber(*value);
    if (!isInteger && std::nearbyint(*value) == *value && std::fabs(*value) < 1e15)
      text += ".0";
    // Say which division was not exact: in the message when it is the whole expression,
    // else in a note pointing at it.
    bool noteDivision = inexactDivision && !isInteger;
    if (noteDivision && inexactDivision->first.begin.offset == expr.range.begin.offset &&
        inexactDivision->first.end.offset == expr.range.end.offset) {
      text = inexactDivision->second + ", not a whole number";
      noteDivision = false;
    }
    diags.error(expr.range, what + " must be a positive integer, got " + text);
    if (noteDivision)
      diags.note(inexactDivision->first, inexactDivision->second + " is not a whole number");
    return std::nullopt;
  }
  return static_cast<int64_t>(*value);
}

bool MLIRGenImpl::lowerDims(const Module &ast, const ModelDecl &model,
                            const TrainSettings &train) {
  unsigned errorsBefore = diags.numErrors();
  for (const Binding &arg : model.args) {
    bool isInteger = false;
    std::optional<double> value = evalConstant(*arg.value, isInteger);
    if (!value)
      continue;
    if (modelArgs.count(arg.name)) {
      diags.error(arg.nameRange, "model argument '" + arg.name + "' is defined twice");
      continue;
    }
    modelArgs[arg.name] = *value;
    if (isInteger)
      integerModelArgs.insert(arg.name);
  }
  llvm::StringMap<SourceRange> defined;
  for (const Binding &dim : ast.dims)
    laterDims.insert(dim.name);
  for (const Binding &dim : ast.dims) {
    if (auto it = defined.find(dim.name); it != defined.end()) {
      diags.error(dim.nameRange, "dimension '" + dim.name + "' is defined twice");
      diags.note(it->second, "previous definition is here");
      continue;
    }
    defined[dim.name] = dim.nameRange;
    laterDims.erase(dim.name);
    if (modelArgs.count(dim.name)) {
      diags.error(dim.nameRange, "dimension '" + dim.name + "' has the name of a model argument");
      continue;
    }
    if (std::optional<int64_t> size = evalPositiveInt(*dim.value, "size of dimension '" + dim.name + "'"))
      dims[dim.name] = *size;
    else
      failedDims.insert(dim.name);
  }
  laterDims.clear();
  // The micro-batch dimension: `train { micro_batch N }` unless dims set it, in which case the
  // two must agree.
  if (auto it = defined.find("batch"); it == defined.end()) {
    dims["batch"] = train.microBatch;
  } else if (train.attr && train.attr.getMicroBatch() && dims.count("batch") &&
             dims["batch"] != train.microBatch) {
    diags.error(it->second, "dimension 'batch' = " + std::to_string(dims["batch"]) +
                                " contradicts train { micro_batch " +
                                std::to_string(train.microBatch) + " }");
  }
  return diags.numErrors() == errorsBefore;
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

static Type elementTypeFor(MLIRContext &context, llvm::StringRef name) {
  Builder b(&context);
  return llvm::StringSwitch<Type>(name)
      .Cases({"f32", "fp32"}, b.getF32Type())
      .Cases({"bf16"}, b.getBF16Type())
      .Cases({"f16", "fp16"}, b.getF16Type())
      .Case("f64", b.getF64Type())
      .Case("i32", b.getI32Type())
      .Case("i64", b.getI64Type())
      .Default(Type());
}

std::optional<mt::NamedTensorType> MLIRGenImpl::tensorType(const TensorSig &sig,
                                                           Type defaultElement) {
  Type element = defaultElement;
  if (!sig.elementType.empty()) {
    element = elementTypeFor(context, sig.elementType);
    if (!element) {
      diags.error(sig.elementTypeRange, "unknown element type '" + sig.elementType +
                                            "'; expected f32, bf16, f16, f64, i32 or i64");
      return std::nullopt;
    }
  }
  SmallVector<mt::NamedDim> namedDims;
  llvm::StringSet<> seen;
  bool ok = true;
  for (auto [name, range] : llvm::zip(sig.dims, sig.dimRanges)) {
    auto it = dims.find(name);
    if (it == dims.end() && failedDims.contains(name)) {
      ok = false; // its definition was already reported
      continue;
    }
    if (it == dims.end()) {
      diags.error(range, "unknown dimension '" + name + "'; declare it in dims {}");
      ok = false;
      continue;
    }
    if (!seen.insert(name).second) {
      diags.error(range, "dimension '" + name + "' appears twice in one tensor");
      ok = false;
      continue;
    }
    namedDims.push_back({builder.getStringAttr(name), it->second});
  }
  if (!ok)
    return std::nullopt;
  return mt::NamedTensorType::get(namedDims, element);
}

mt::InitAttr MLIRGenImpl::lowerInit(const ParamDecl &param) {
  if (!param.init)
    return mt::InitAttr::get(&context, mt::InitKind::Zeros,
                             builder.getDenseF64ArrayAttr({}));
  const InitSpec &init = *param.init;
  std::optional<mt::InitKind> kind = mt::symbolizeInitKind(init.kind);
  if (!kind) {
    diags.error(init.range, "unknown initialiser '" + init.kind +
                                "'; expected zeros, ones, normal(std), uniform(low, high) or "
                                "constant(value)");
    return {};
  }
  SmallVector<double> args;
  for (const ExprPtr &arg : init.args) {
    bool isInteger = false;
    std::optional<double> value = evalConstant(*arg, isInteger);
    if (!value)
      return {};
    args.push_back(*value);
  }
  // The attribute's verifier words the arity and range rules; report it at the init.
  mt::InitAttr attr = withErrorsAt(init.range, [&](auto emitErrorFn) {
    return mt::InitAttr::getChecked(emitErrorFn, &context, *kind,
                                    builder.getDenseF64ArrayAttr(args));
  });
  return attr;
}

void MLIRGenImpl::lowerParam(const ParamDecl &param, llvm::StringRef layer) {
  std::string symbol = layer.empty() ? param.name : (layer + "." + param.name).str();
  // Whether or not the first declaration failed (say its dims were 0): a repeat of it is
  // "declared twice", not a clash with some other symbol.
  if (auto it = paramLayers.find(symbol); it != paramLayers.end() && it->second == layer) {
    diags.error(param.nameRange, "parameter '" + param.name + "' is declared twice");
    diags.note(symbols.lookup(symbol), "previous declaration is here");
    return;
  }
  if (!declareSymbol(symbol, param.nameRange, "parameter"))
    return;
  paramLayers[symbol] = layer.str();
  std::optional<mt::NamedTensorType> type = tensorType(param.sig, parameterType);
  if (param.sig.elementType.empty())
    masterParams.insert(symbol);
  if (type && !isa<FloatType>(type->getElementType())) {
    diags.error(param.sig.elementTypeRange, "parameters must have a floating-point type");
    failedParams.insert(symbol);
    return;
  }
  mt::InitAttr init = lowerInit(param);
  if (!type || !init) {
    failedParams.insert(symbol);
    return;
  }
  auto op = mt::ParamOp::create(builder, 
      loc(param.range), builder.getStringAttr(symbol),
      layer.empty() ? FlatSymbolRefAttr() : FlatSymbolRefAttr::get(&context, layer),
      TypeAttr::get(*type), init);
  params[symbol] = op;
}

func::FuncOp MLIRGenImpl::declareFunction(const FnDecl &fn, llvm::StringRef symbol,
                                          bool isLayer) {
  SmallVector<Type> inputs;
  bool ok = true;
  llvm::StringSet<> argNames;
  for (const FnArg &arg : fn.args) {
    if (!argNames.insert(arg.name).second) {
      diags.error(arg.nameRange, "argument '" + arg.name + "' is declared twice");
      ok = false;
    }
    std::optional<mt::NamedTensorType> type = tensorType(arg.sig, floatType);
    if (!type) {
      ok = false;
      continue;
    }
    inputs.push_back(*type);
  }
  SmallVector<Type> results;
  if (fn.returnsLoss)
    results.push_back(mt::NamedTensorType::getScalar(builder.getF32Type()));
  for (const TensorSig &sig : fn.results) {
    if (std::optional<mt::NamedTensorType> type = tensorType(sig, floatType))
      results.push_back(*type);
    else
      ok = false;
  }
  if (!ok)
    return {};
  auto func = func::FuncOp::create(builder, loc(fn.range), symbol,
                                   builder.getFunctionType(inputs, results));
  if (isLayer)
    func->setAttr(mt::MTDialect::kLayerAttrName, builder.getUnitAttr());
  return func;
}

void MLIRGenImpl::lowerBody(const FnDecl &fn, func::FuncOp func, const LayerDecl *layer) {
  OpBuilder::InsertionGuard guard(builder);
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  currentLayer = layer;
  locals.clear();
  poisonedLocals.clear();
  paramRefs.clear();
  lastParamRef = nullptr;
  for (auto [arg, value] : llvm::zip(fn.args, entry->getArguments()))
    locals[arg.name] = value;

  const Stmt *returned = nullptr;
  for (const Stmt &stmt : fn.body) {
    if (diags.reachedErrorLimit())
      return;
    if (returned) {
      diags.error(stmt.range, "statement after 'return' is never executed");
      return;
    }
    if (stmt.kind == Stmt::Kind::Return) {
      returned = &stmt;
      // `return a, b` arrives as a Tuple; a single value as itself.
      SmallVector<const Expr *> exprs;
      if (stmt.value->kind == Expr::Kind::Tuple)
        for (const ExprPtr &element : stmt.value->args)
          exprs.push_back(element.get());
      else
        exprs.push_back(stmt.value.get());
      TypeRange declared = func.getFunctionType().getResults();
      if (exprs.size() != declared.size()) {
        diags.error(stmt.value->range, "function returns " + std::to_string(exprs.size()) +
                                           " value(s) but declares " +
                                           std::to_string(declared.size()));
        return;
      }
      SmallVector<Value> results;
      for (auto [expr, type] : llvm::zip(exprs, declared)) {
        auto expected = cast<mt::NamedTensorType>(type);
        Val val = eval(*expr);
        if (!val.valid())
          return;
        std::string what = fn.returnsLoss ? "the declared '-> loss' (a scalar)"
                                          : "the declared result " + expected.dimsToString();
        Value result = coerceTo(materialize(val, expected.getElementType(), expr->range),
                                expected, expr->range, what);
        if (!result)
          return;
        results.push_back(result);
      }
      func::ReturnOp::create(builder, loc(stmt.range), results);
      continue;
    }
    SmallVector<Val> values = evalMulti(*stmt.value, stmt.targets.size());
    for (auto [i, name, range] : llvm::enumerate(stmt.targets, stmt.targetRanges)) {
      if (dims.count(name) || modelArgs.count(name)) {
        diags.error(range, "'" + name + "' is a " +
                               (dims.count(name) ? "dimension" : "model argument") +
                               " and cannot be assigned");
        continue;
      }
      if (i >= values.size() || !values[i].valid()) {
        // The value's error is reported; later uses of the name would only repeat it.
        locals.erase(name);
        poisonedLocals.insert(name);
        continue;
      }
      locals[name] = materialize(values[i], floatType, stmt.value->range);
      poisonedLocals.erase(name);
    }
  }
  if (!returned) {
    // Point at the closing '}', where the return is missing.
    SourceRange brace = {fn.range.end, fn.range.end};
    brace.begin.col -= 1;
    brace.begin.offset -= 1;
    diags.error(brace, "function '" + (fn.name.empty() ? func.getSymName().str() : fn.name) +
                           "' has no 'return'");
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Value MLIRGenImpl::materialize(const Val &val, Type elementType, const SourceRange &range) {
  if (val.isTensor())
    return val.tensor;
  return mt::ConstantOp::create(builder, loc(range),
                                        mt::NamedTensorType::getScalar(elementType),
                                        builder.getF64FloatAttr(val.number));
}

Type MLIRGenImpl::commonFloatType(const Val &lhs, const Val &rhs) {
  Type l = lhs.isTensor() ? typeOf(lhs.tensor).getElementType() : Type();
  Type r = rhs.isTensor() ? typeOf(rhs.tensor).getElementType() : Type();
  if (!l || !r || l == r)
    return l ? l : r;
  unsigned lw = cast<FloatType>(l).getWidth(), rw = cast<FloatType>(r).getWidth();
  if (lw != rw)
    return lw > rw ? l : r;
  return builder.getF32Type(); // bf16 and f16
}

Value MLIRGenImpl::castTo(Value value, Type element, const SourceRange &range) {
  mt::NamedTensorType type = typeOf(value);
  if (type.getElementType() == element)
    return value;
  return mt::CastOp::create(builder, loc(range), type.withElementType(element), value);
}

/// `base` with `dims`, unless a dimension would appear twice (`topk(x, over = experts, k = seq)`
/// on an `x` that has `seq`), which the type cannot represent.
std::optional<mt::NamedTensorType>
MLIRGenImpl::resultType(mt::NamedTensorType base, llvm::ArrayRef<mt::NamedDim> dims,
                        const SourceRange &range) {
  llvm::StringSet<> seen;
  for (const mt::NamedDim &dim : dims)
    if (!seen.insert(dim.name.getValue()).second) {
      diags.error(range, "the result would have the dimension '" + dim.name.getValue() +
                             "' twice; rename one of them first");
      return std::nullopt;
    }
  return base.withDims(dims);
}

std::string MLIRGenImpl::typeToString(mt::NamedTensorType type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type.getElementType() << type.dimsToString();
  return text;
}

Value MLIRGenImpl::coerceTo(Value value, mt::NamedTensorType expected, const SourceRange &range,
                            llvm::StringRef what) {
  mt::NamedTensorType actual = typeOf(value);
  if (actual == expected)
    return value;
  // Only float precisions convert implicitly: token ids never become floats by accident.
  if (isa<FloatType>(actual.getElementType()) != isa<FloatType>(expected.getElementType())) {
    std::string element;
    llvm::raw_string_ostream(element) << expected.getElementType();
    diags.error(range, "value " + typeToString(actual) + " does not match " + what +
                           " (element type " + element + ")");
    return {};
  }
  bool sameDims = actual.getRank() == expected.getRank() &&
                  llvm::all_of(expected.getDims(), [&](const mt::NamedDim &dim) {
                    return actual.hasDim(dim.name) && actual.getDimSize(dim.name.getValue()) == dim.size;
                  });
  if (!sameDims) {
    diags.error(range, "value " + actual.dimsToString() + " does not match " + what);
    return {};
  }
  if (actual.getElementType() != expected.getElementType())
    value = mt::CastOp::create(builder, loc(range),
                                       actual.withElementType(expected.getElementType()), value);
  if (typeOf(value) != expected)
    value = mt::TransposeOp::create(builder, loc(range), expected, value);
  return value;
}

Val MLIRGenImpl::eval(const Expr &expr) {
  switch (expr.kind) {
  case Expr::Kind::Number:
    return Val::constant(expr.number, expr.isInteger);
  case Expr::Kind::Name:
    return evalName(expr);
  case Expr::Kind::Unary: {
    Val operand = eval(*expr.lhs);
    if (!operand.valid() || expr.op != "-")
      return operand;
    if (operand.isConstant())
      return Val::constant(-operand.number, operand.isInteger);
    if (!isa<FloatType>(typeOf(operand.tensor).getElementType()))
      return fail(expr.range, "cannot negate an integer tensor");
    return Val::of(mt::NegOp::create(builder, loc(expr.range), operand.tensor));
  }
  case Expr::Kind::Binary:
    return evalBinary(expr);
  case Expr::Kind::Call:
  case Expr::Kind::Repeat: {
    SmallVector<Val> values = evalMulti(expr, 1);
    return values.size() == 1 ? values.front() : Val();
  }
  case Expr::Kind::Tuple:
    return fail(expr.range, "a tuple '(a, b)' is only allowed as a keyword argument, e.g. "
                            "over = (heads, head_dim)");
  }
  return {};
}

SmallVector<Val> MLIRGenImpl::evalMulti(const Expr &expr, size_t expected) {
  SmallVector<Val> values;
  if (expr.kind == Expr::Kind::Repeat) {
    std::optional<int64_t> count = evalPositiveInt(*expr.lhs, "repeat count");
    if (!count) {
      layerApplied.try_emplace(expr.name, expr.range); // not "never applied" as well
      return {};
    }
    values = evalRepeat(expr, *count, expr.lhs->range);
  } else if (expr.kind == Expr::Kind::Call &&
             (layers.count(expr.name) || rejectedLayers.contains(expr.name))) {
    // `block(x)` is `repeat(1) block(x)`.
    values = evalRepeat(expr, 1, expr.nameRange);
  } else if (expr.kind == Expr::Kind::Call && expr.name == "topk") {
    values = moeBuiltin(expr);
  } else if (expr.kind == Expr::Kind::Call) {
    values.push_back(evalCall(expr));
    // Every builtin's op meets its verifier at once, so a rule the checks here missed is
    // reported at the call, in .mtl terms, rather than as an invalid module at the end.
    if (values.back().isTensor())
      if (Operation *op = values.back().tensor.getDefiningOp())
        if (failed(withErrorsAt(expr.range, [&](auto) { return mlir::verify(op, false); })))
          values.back() = Val();
  } else {
    values.push_back(eval(expr));
  }
  if (values.empty() || llvm::any_of(values, [](const Val &v) { return !v.valid(); }))
    return {};
  if (values.size() != expected) {
    diags.error(expr.range, "expression gives " + std::to_string(values.size()) + " value" +
                                (values.size() == 1 ? "" : "s") + " but " +
                                std::to_string(expected) + (expected == 1 ? " is" : " are") +
                                " expected");
    return {};
  }
  return values;
}

Val MLIRGenImpl::evalName(const Expr &expr) {
  if (auto it = locals.find(expr.name); it != locals.end())
    return Val::of(it->second);
  if (poisonedLocals.contains(expr.name) ||
      (currentLayer && failedParams.contains(currentLayer->name + "." + expr.name)) ||
      failedParams.contains(expr.name))
    return {}; // already reported
  std::string symbol;
  if (currentLayer && params.count(currentLayer->name + "." + expr.name))
    symbol = currentLayer->name + "." + expr.name;
  else if (auto it = params.find(expr.name); it != params.end() && !it->second.getLayer())
    symbol = expr.name;
  if (!symbol.empty()) {
    Value &ref = paramRefs[symbol];
    if (!ref) {
      // Parameter reads go at the top of the function, in order of first use, so every
      // later use is dominated.
      OpBuilder::InsertionGuard guard(builder);
      if (lastParamRef)
        builder.setInsertionPointAfter(lastParamRef);
      else
        builder.setInsertionPointToStart(builder.getInsertionBlock());
      mt::ParamOp param = params[symbol];
      auto op = mt::ParamRefOp::create(builder, loc(expr.range), param.getType(),
                                       FlatSymbolRefAttr::get(&context, symbol));
      lastParamRef = op;
      ref = op;
    }
    // Mixed precision: the master weight is read in the training precision, cast at each
    // use, so that autodiff takes each use's gradient back to f32 through its own cast: the
    // gradients of a parameter read twice (a tied embedding) are summed in f32.
    if (masterParams.contains(symbol) && parameterType != floatType)
      return Val::of(castTo(ref, floatType, expr.range));
    return Val::of(ref);
  }
  if (auto it = modelArgs.find(expr.name); it != modelArgs.end())
    return Val::constant(it->second, integerModelArgs.contains(expr.name));
  if (auto it = dims.find(expr.name); it != dims.end())
    return Val::constant(static_cast<double>(it->second), true);
  for (const auto &entry : params) {
    mt::ParamOp op = entry.second;
    if (op.getLayer() && entry.first().ends_with("." + expr.name))
      return fail(expr.range, "'" + expr.name + "' is a parameter of layer '" +
                                  *op.getLayer() + "' and cannot be used outside it");
  }
  return fail(expr.range, "undefined name '" + expr.name + "'");
}

Val MLIRGenImpl::evalBinary(const Expr &expr) {
  Val lhs = eval(*expr.lhs);
  Val rhs = eval(*expr.rhs);
  if (!lhs.valid() || !rhs.valid())
    return {};
  if (lhs.isConstant() && rhs.isConstant()) {
    bool isInteger = false;
    std::optional<double> value = evalConstant(expr, isInteger);
    return value ? Val::constant(*value, isInteger) : Val();
  }
  if (expr.op == "/" && rhs.isConstant() && rhs.number == 0)
    return fail(expr.rhs->range, "division by zero");
  // Arithmetic is on floats: integer tensors hold token ids and labels.
  for (auto [val, operand] : {std::pair{&lhs, expr.lhs.get()}, std::pair{&rhs, expr.rhs.get()}})
    if (val->isTensor() && !isa<FloatType>(typeOf(val->tensor).getElementType()))
      return fail(operand->range, "'" + expr.op + "' needs floating-point operands, not the " +
                                      typeToString(typeOf(val->tensor)) +
                                      " tensor (integer tensors hold token ids and labels)");
  // Mixed precisions meet where a loss (always f32) is added to a value in the training
  // precision (`cross_entropy(...) + aux`): compute in the wider type.
  Type element = commonFloatType(lhs, rhs);
  Value l = castTo(materialize(lhs, element, expr.lhs->range), element, expr.lhs->range);
  Value r = castTo(materialize(rhs, element, expr.rhs->range), element, expr.rhs->range);
  Value result;
  if (expr.op == "+")
    result = createInferred<mt::AddOp>(expr.range, l, r);
  else if (expr.op == "-")
    result = createInferred<mt::SubOp>(expr.range, l, r);
  else if (expr.op == "*")
    result = createInferred<mt::MulOp>(expr.range, l, r);
  else if (expr.op == "/")
    result = createInferred<mt::DivOp>(expr.range, l, r);
  else
    result = createInferred<mt::PowOp>(expr.range, l, r);
  return result ? Val::of(result) : Val();
}

SmallVector<Val> MLIRGenImpl::evalRepeat(const Expr &expr, int64_t count,
                                         const SourceRange &countRange) {
  if (rejectedLayers.contains(expr.name))
    return {}; // its declaration was already reported
  auto layerIt = layers.find(expr.name);
  if (layerIt == layers.end()) {
    diags.error(expr.nameRange, "'" + expr.name + "' is not a layer");
    return {};
  }
  if (currentLayer) {
    diags.error(expr.range, "layers cannot be applied inside another layer");
    return {};
  }
  if (auto [it, inserted] = layerApplied.try_emplace(expr.name, expr.range); !inserted) {
    diags.error(expr.range, "layer '" + expr.name +
                                "' is applied twice; each layer has one repeat, which owns its "
                                "parameters");
    diags.note(it->second, "first applied here");
    return {};
  }
  func::FuncOp callee = layerFuncs.lookup(expr.name);
  if (!callee)
    return {}; // its declaration already failed
  if (!expr.kwargs.empty()) {
    diags.error(expr.kwargs.front().nameRange, "layers take no keyword arguments");
    return {};
  }
  FunctionType type = callee.getFunctionType();
  if (expr.args.size() != type.getNumInputs()) {
    diags.error(expr.range, "layer '" + expr.name + "' takes " +
                                std::to_string(type.getNumInputs()) + " argument(s), got " +
                                std::to_string(expr.args.size()));
    return {};
  }
  if (type.getResults() != type.getInputs()) {
    diags.error(expr.range, "layer '" + expr.name +
                                "' must return values of its argument types to be repeated");
    return {};
  }
  SmallVector<Value> inputs;
  for (auto [arg, expected] : llvm::zip(expr.args, type.getInputs())) {
    Val val = eval(*arg);
    if (!val.valid())
      return {};
    Value input = coerceTo(materialize(val, floatType, arg->range),
                           cast<mt::NamedTensorType>(expected), arg->range,
                           "the layer's argument " +
                               cast<mt::NamedTensorType>(expected).dimsToString());
    if (!input)
      return {};
    inputs.push_back(input);
  }
  (void)countRange;
  auto repeat = mt::RepeatOp::create(builder, loc(expr.range), type.getResults(),
                                             FlatSymbolRefAttr::get(&context, expr.name), inputs,
                                             builder.getI64IntegerAttr(count), IntegerAttr(),
                                     StringAttr(), UnitAttr(), IntegerAttr());
  SmallVector<Val> results;
  for (Value result : repeat.getResults())
    results.push_back(Val::of(result));
  return results;
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> MLIRGenImpl::lower(const Module &ast) {
  if (ast.models.empty()) {
    // Point at the first top-level item's keyword (the file is not empty: the parser says so).
    std::optional<SourceRange> first;
    auto consider = [&](SourceRange range, size_t keywordLength) {
      range.end = range.begin;
      range.end.col += keywordLength;
      range.end.offset += keywordLength;
      if (!first || range.begin.offset < first->begin.offset)
        first = range;
    };
    if (!ast.dimsBlockRanges.empty())
      consider(ast.dimsBlockRanges.front(), 4);
    if (ast.train)
      consider(ast.train->range, 5);
    if (ast.parallel)
      consider(ast.parallel->range, 8);
    if (diags.numErrors() == 0)
      diags.error(first.value_or(SourceRange{}), "no 'model' declaration in this file");
    return nullptr;
  }
  const ModelDecl &model = ast.models.front();
  for (const ModelDecl &extra : llvm::drop_begin(ast.models)) {
    diags.error(extra.nameRange, "only one model per file; '" + model.name +
                                     "' is already declared");
    diags.note(model.nameRange, "first model is here");
  }

  TrainSettings train = lowerTrainBlock(ast.train ? &*ast.train : nullptr, context, diags);
  floatType = elementTypeFor(context, train.precision);
  parameterType = builder.getF32Type();
  lowerDims(ast, model, train);

  module = ModuleOp::create(loc(model.range), model.name);
  OwningOpRef<ModuleOp> owned(module);
  builder.setInsertionPointToEnd(module.getBody());

  // `forward` is claimed first so that a param or layer of that name is the one reported.
  for (const FnDecl &fn : model.fns)
    if (fn.name == "forward") {
      symbols.try_emplace("forward", fn.nameRange);
      break;
    }
  for (const ParamDecl &param : model.params)
    lowerParam(param, "");
  for (const LayerDecl &layer : model.layers) {
    if (auto it = layers.find(layer.name); it != layers.end()) {
      diags.error(layer.nameRange, "layer '" + layer.name + "' is declared twice");
      diags.note(it->second->nameRange, "previous declaration is here");
      continue;
    }
    if (!declareSymbol(layer.name, layer.nameRange, "layer")) {
      rejectedLayers.insert(layer.name);
      continue;
    }
    layers[layer.name] = &layer;
    for (const ParamDecl &param : layer.params)
      lowerParam(param, layer.name);
    if (layer.fns.size() != 1) {
      diags.error(layer.nameRange, "layer '" + layer.name + "' must have exactly one fn, has " +
                                       std::to_string(layer.fns.size()));
      continue;
    }
    if (func::FuncOp func = declareFunction(layer.fns.front(), layer.name, /*isLayer=*/true))
      layerFuncs[layer.name] = func;
  }

  SmallVector<std::pair<const FnDecl *, func::FuncOp>> functions;
  const FnDecl *forward = nullptr;
  for (const FnDecl &fn : model.fns) {
    if (fn.name.empty()) {
      // Point at the `fn` keyword: an anonymous fn has no name to point at.
      SourceRange keyword = {fn.range.begin, fn.range.begin};
      keyword.end.col += 2;
      keyword.end.offset += 2;
      diags.error(keyword, "an anonymous fn belongs in a layer; the model's only fn is "
                           "'fn forward(...) -> loss'");
      continue;
    }
    if (fn.name != "forward") {
      diags.error(fn.nameRange, "model functions other than 'forward' are not supported; put "
                                "reusable computation in a layer");
      continue;
    }
    if (forward) {
      diags.error(fn.nameRange, "'forward' is defined twice");
      diags.note(forward->nameRange, "first defined here");
      continue;
    }
    forward = &fn;
    if (!fn.returnsLoss)
      diags.error(fn.resultRange, "'forward' must return the loss: declare it '-> loss'");
    // An unknown element type (`i31`) is reported by declareFunction below.
    Type tokenType = fn.args.empty() || fn.args.front().sig.elementType.empty()
                         ? Type()
                         : elementTypeFor(context, fn.args.front().sig.elementType);
    if (fn.args.empty() || fn.args.front().sig.elementType.empty() ||
        (tokenType && !isa<IntegerType>(tokenType)))
      diags.error(fn.nameRange, "'forward' takes the token ids first, e.g. "
                                "forward(tokens: i32[batch, seq], labels: i32[batch, seq])");
    if (func::FuncOp func = declareFunction(fn, "forward", /*isLayer=*/false))
      functions.push_back({&fn, func});
  }
  if (!forward)
    diags.error(model.nameRange, "model '" + model.name + "' has no 'forward' function");

  for (const LayerDecl &layer : model.layers)
    if (func::FuncOp func = layerFuncs.lookup(layer.name); func && layers[layer.name] == &layer)
      lowerBody(layer.fns.front(), func, &layer);
  for (auto [fn, func] : functions)
    lowerBody(*fn, func, nullptr);
  // A layer whose declaration failed was already reported.
  for (const auto &[name, layer] : layers)
    if (!layerApplied.count(name) && layerFuncs.count(name))
      diags.error(layer->nameRange, "layer '" + name.str() + "' is never applied; use "
                                    "repeat(n) " + name.str() + "(...) in forward");

  int64_t numLayers = 0;
  module.walk([&](mt::RepeatOp repeat) { numLayers += repeat.getCount(); });
  mt::ParallelAttr parallel = lowerParallelBlock(ast.parallel ? &*ast.parallel : nullptr, dims,
                                               numLayers, mt::lossClassDim(module), context,
                                               diags);

  SmallVector<NamedAttribute> dimAttrs;
  for (const auto &[name, size] : dims)
    dimAttrs.push_back(builder.getNamedAttr(name, builder.getI64IntegerAttr(size)));
  module->setAttr(mt::MTDialect::kDimsAttrName, builder.getDictionaryAttr(dimAttrs));
  module->setAttr(mt::MTDialect::kTrainAttrName, train.attr);
  module->setAttr(mt::MTDialect::kParallelAttrName, parallel);

  if (diags.numErrors() != 0)
    return nullptr;
  // Anything the checks above missed is a frontend bug; the verifier still names the op.
  if (failed(mlir::verify(module)))
    return nullptr;
  return owned;
}

OwningOpRef<ModuleOp> mtc::frontend::lowerToMT(const Module &module, MLIRContext &context,
                                               Diagnostics &diags) {
  context.getOrLoadDialect<mt::MTDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  return MLIRGenImpl(context, diags).lower(module);
}
