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

#include "dialects/mt/IR/MTOps.h"
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

namespace {

/// The value of an expression: a compile-time number or a tensor.
struct Val {
  enum class Kind { Invalid, Constant, Tensor };
  Kind kind = Kind::Invalid;
  double number = 0;
  bool isInteger = false;
  Value tensor;

  static Val constant(double number, bool isInteger) {
    return {Kind::Constant, number, isInteger, {}};
  }
  static Val of(Value tensor) { return {Kind::Tensor, 0, false, tensor}; }
  bool valid() const { return kind != Kind::Invalid; }
  bool isConstant() const { return kind == Kind::Constant; }
  bool isTensor() const { return kind == Kind::Tensor; }
};

/// A number as users write it: the shortest text that reads back as `value` (`2.5`,
/// `1e-05`), or six significant digits for values like 16 / 3.
std::string formatNumber(double value) {
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
std::string withoutOpPrefix(llvm::StringRef msg) {
  if (msg.starts_with("'mt."))
    if (size_t end = msg.find("' op "); end != llvm::StringRef::npos)
      return msg.drop_front(end + 5).str();
  return msg.str();
}

/// Checked access to a builtin call's arguments.
class CallArgs {
public:
  CallArgs(const Expr &call, Diagnostics &diags) : call(call), diags(diags) {}

  /// Checks the positional count and that every keyword is one of `keywords`.
  bool check(size_t minPositional, size_t maxPositional,
             llvm::ArrayRef<llvm::StringRef> keywords) {
    size_t count = call.args.size();
    if (count < minPositional || count > maxPositional) {
      std::string expected =
          minPositional == maxPositional
              ? std::to_string(minPositional)
              : std::to_string(minPositional) + " to " + std::to_string(maxPositional);
      diags.error(call.range, "'" + call.name + "' takes " + expected + " positional argument" +
                                  (maxPositional == 1 ? "" : "s") + ", got " +
                                  std::to_string(count));
      return false;
    }
    llvm::StringSet<> seen;
    for (const KeywordArg &kw : call.kwargs) {
      if (!llvm::is_contained(keywords, kw.name)) {
        std::string list;
        for (auto [i, k] : llvm::enumerate(keywords))
          list += (i == 0 ? "'" : i + 1 == keywords.size() ? " or '" : ", '") + k.str() + "'";
        diags.error(kw.nameRange, "unknown keyword argument '" + kw.name + "' for '" +
                                      call.name + "'" +
                                      (keywords.empty() ? "; it takes none"
                                                        : "; expected " + list));
        return false;
      }
      if (!seen.insert(kw.name).second) {
        diags.error(kw.nameRange, "keyword argument '" + kw.name + "' given twice");
        return false;
      }
    }
    return true;
  }

  const Expr *keyword(llvm::StringRef name) const {
    for (const KeywordArg &kw : call.kwargs)
      if (kw.name == name)
        return kw.value.get();
    return nullptr;
  }

  const Expr &call;
  Diagnostics &diags;
};

class MLIRGenImpl {
public:
  MLIRGenImpl(MLIRContext &context, Diagnostics &diags)
      : context(context), diags(diags), builder(&context) {}

  OwningOpRef<ModuleOp> lower(const Module &ast);

private:
  //===--------------------------------------------------------------------===//
  // Locations and errors
  //===--------------------------------------------------------------------===//

  Location loc(const SourceRange &range) {
    const llvm::SourceMgr &sm = diags.getSourceMgr();
    StringRef file = sm.getMemoryBuffer(diags.getBufferId())->getBufferIdentifier();
    return FileLineColLoc::get(&context, file, range.begin.line, range.begin.col);
  }

  Val fail(const SourceRange &range, const llvm::Twine &msg) {
    diags.error(range, msg);
    return {};
  }

  /// Routes a diagnostic from the dialect's shape inference to `range`.
  template <typename Fn>
  auto withErrorsAt(const SourceRange &range, Fn &&fn) {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      diags.error(range, withoutOpPrefix(diag.str()));
      return success();
    });
    return fn([&] { return emitError(loc(range)); });
  }

  //===--------------------------------------------------------------------===//
  // Compile-time values: dims, model arguments, constant expressions
  //===--------------------------------------------------------------------===//

  std::optional<double> evalConstant(const Expr &expr, bool &isInteger);
  std::optional<double> finiteConstant(double value, const SourceRange &range) {
    if (std::isfinite(value))
      return value;
    diags.error(range, "constant expression is out of range (" + formatNumber(value) + ")");
    return std::nullopt;
  }
  std::optional<int64_t> evalPositiveInt(const Expr &expr, llvm::StringRef what);
  bool lowerDims(const Module &ast, const ModelDecl &model, const TrainSettings &train);

  //===--------------------------------------------------------------------===//
  // Declarations
  //===--------------------------------------------------------------------===//

  std::optional<mt::NamedTensorType> tensorType(const TensorSig &sig, Type defaultElement);
  void lowerParam(const ParamDecl &param, llvm::StringRef layer);
  mt::InitAttr lowerInit(const ParamDecl &param);
  func::FuncOp declareFunction(const FnDecl &fn, llvm::StringRef symbol, bool isLayer);
  void lowerBody(const FnDecl &fn, func::FuncOp func, const LayerDecl *layer);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  Val eval(const Expr &expr);
  SmallVector<Val> evalMulti(const Expr &expr, size_t expected);
  Val evalName(const Expr &expr);
  Val evalBinary(const Expr &expr);
  Val evalCall(const Expr &expr);
  SmallVector<Val> evalRepeat(const Expr &expr, int64_t count, const SourceRange &countRange);

  Value materialize(const Val &val, Type elementType, const SourceRange &range);
  Value tensorArg(const Expr &expr, llvm::StringRef what, const Expr &call);
  std::optional<std::string> dimName(const Expr &expr, const llvm::Twine &what);
  std::optional<SmallVector<std::string>> dimNames(const Expr &expr, llvm::StringRef what);
  std::optional<double> constantArg(const Expr *expr, double fallback, llvm::StringRef what);
  std::optional<int64_t> dimSize(llvm::StringRef name, const SourceRange &range);
  mt::NamedTensorType typeOf(Value value) { return cast<mt::NamedTensorType>(value.getType()); }
  bool requireDim(Value value, llvm::StringRef dim, const SourceRange &range,
                  llvm::StringRef what);
  Value coerceTo(Value value, mt::NamedTensorType expected, const SourceRange &range,
                 llvm::StringRef what);
  Type commonFloatType(const Val &lhs, const Val &rhs);
  Value castTo(Value value, Type element, const SourceRange &range);
  std::string typeToString(mt::NamedTensorType type);
  std::optional<mt::NamedTensorType> resultType(mt::NamedTensorType base,
                                                llvm::ArrayRef<mt::NamedDim> dims,
                                                const SourceRange &range);
  Value floatTensorArg(const Expr &expr, llvm::StringRef what, const Expr &call);

  Val unaryBuiltin(const Expr &call, llvm::StringRef name);
  Val reduceBuiltin(const Expr &call, llvm::StringRef name);
  Val normBuiltin(const Expr &call, bool rms);
  Val attentionBuiltin(const Expr &call);
  SmallVector<Val> moeBuiltin(const Expr &call);

  MLIRContext &context;
  Diagnostics &diags;
  OpBuilder builder;
  ModuleOp module;

  Type floatType;
  llvm::StringMap<int64_t> dims;
  /// While `dims {}` is evaluated: the entries not defined yet, and those that failed (whose
  /// uses are not reported again).
  llvm::StringSet<> laterDims, failedDims;
  /// The first integer division that was not exact in the constant being evaluated.
  std::optional<std::pair<SourceRange, std::string>> inexactDivision;
  llvm::StringMap<double> modelArgs;
  llvm::StringSet<> integerModelArgs;
  /// Parameter symbols: `name` for model params, `layer.name` for layer params.
  llvm::StringMap<mt::ParamOp> params;
  /// Params whose declaration failed (and was reported): their uses are not reported again.
  llvm::StringSet<> failedParams;
  /// Every symbol of the module (params, layer functions, `forward`) and where it was declared:
  /// they share one symbol table, so `param forward[...]` or a model param `block.w` next to a
  /// layer `block` with a param `w` must be rejected here rather than by the verifier.
  llvm::StringMap<SourceRange> symbols;
  bool declareSymbol(llvm::StringRef symbol, const SourceRange &range, llvm::StringRef what) {
    auto [it, inserted] = symbols.try_emplace(symbol, range);
    if (inserted)
      return true;
    diags.error(range, what + " '" + symbol + "' has the same name as an earlier declaration");
    diags.note(it->second, "previous declaration is here");
    return false;
  }
  llvm::StringMap<const LayerDecl *> layers;
  /// Layers whose name clashed with another symbol: their applications are not reported again.
  llvm::StringSet<> rejectedLayers;
  llvm::StringMap<SourceRange> layerApplied;
  llvm::StringMap<func::FuncOp> layerFuncs;
  int64_t nextDropoutStream = 0;

  // Per-function state.
  const LayerDecl *currentLayer = nullptr;
  llvm::StringMap<Value> locals;
  /// Locals whose last assignment failed (and was reported).
  llvm::StringSet<> poisonedLocals;
  llvm::StringMap<Value> paramRefs;
  Operation *lastParamRef = nullptr;
};

} // namespace

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
  } else if (train.attr && train.attr.get("micro_batch") && dims.count("batch") &&
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
  if (auto it = params.find(symbol); it != params.end() &&
                                     it->second.getLayer().value_or("") == layer) {
    diags.error(param.nameRange, "parameter '" + param.name + "' is declared twice");
    diags.note(symbols.lookup(symbol), "previous declaration is here");
    return;
  }
  if (!declareSymbol(symbol, param.nameRange, "parameter"))
    return;
  std::optional<mt::NamedTensorType> type = tensorType(param.sig, floatType);
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
  FailureOr<mt::NamedTensorType> type = withErrorsAt(expr.range, [&](auto emitErrorFn) {
    return mt::inferBroadcastType(typeOf(l), typeOf(r), emitErrorFn);
  });
  if (failed(type))
    return {};
  Location location = loc(expr.range);
  Value result;
  if (expr.op == "+")
    result = mt::AddOp::create(builder, location, *type, l, r);
  else if (expr.op == "-")
    result = mt::SubOp::create(builder, location, *type, l, r);
  else if (expr.op == "*")
    result = mt::MulOp::create(builder, location, *type, l, r);
  else if (expr.op == "/")
    result = mt::DivOp::create(builder, location, *type, l, r);
  else
    result = mt::PowOp::create(builder, location, *type, l, r);
  return Val::of(result);
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
                                     StringAttr(), UnitAttr());
  SmallVector<Val> results;
  for (Value result : repeat.getResults())
    results.push_back(Val::of(result));
  return results;
}

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
    FailureOr<mt::NamedTensorType> type = withErrorsAt(call.range, [&](auto emitErrorFn) {
      return mt::inferBroadcastType(typeOf(lhs), typeOf(rhs), emitErrorFn);
    });
    if (failed(type))
      return {};
    return Val::of(mt::MaxOp::create(builder, loc(call.range), *type, lhs, rhs));
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
  SmallVector<StringRef> refs(names->begin(), names->end());
  FailureOr<mt::NamedTensorType> type = withErrorsAt(over->range, [&](auto emitErrorFn) {
    return mt::inferReduceType(typeOf(x), refs, emitErrorFn);
  });
  if (failed(type))
    return {};
  ArrayAttr overAttr = builder.getStrArrayAttr(refs);
  Location location = loc(call.range);
  if (name == "sum")
    return Val::of(mt::ReduceSumOp::create(builder, location, *type, x, overAttr));
  if (name == "mean")
    return Val::of(mt::ReduceMeanOp::create(builder, location, *type, x, overAttr));
  return Val::of(mt::ReduceMaxOp::create(builder, location, *type, x, overAttr));
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
  Location location = loc(call.range);
  if (rms)
    return Val::of(mt::RMSNormOp::create(builder, location, typeOf(x), x, scale,
                                                 builder.getStringAttr(dim),
                                                 builder.getF64FloatAttr(*eps)));
  return Val::of(mt::LayerNormOp::create(builder, location, typeOf(x), x, scale, bias,
                                                 builder.getStringAttr(dim),
                                                 builder.getF64FloatAttr(*eps)));
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
  auto op = mt::AttentionOp::create(builder, loc(call.range), q, k, v, *seq, *heads, kvHeads,
                                            *headDim, causal, llvm::APFloat(*scale));
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
    SmallVector<StringRef> refs(names->begin(), names->end());
    FailureOr<mt::NamedTensorType> type = withErrorsAt(over->range, [&](auto emitErrorFn) {
      return mt::inferContractType(typeOf(lhs), typeOf(rhs), refs, emitErrorFn);
    });
    if (failed(type))
      return {};
    return Val::of(mt::ContractOp::create(builder, location, *type, lhs, rhs,
                                                  builder.getStrArrayAttr(refs)));
  }

  if (name == "swiglu") {
    if (!args.check(2, 2, {}))
      return {};
    Value gate = floatTensorArg(*call.args[0], "gate", call);
    Value up = floatTensorArg(*call.args[1], "up projection", call);
    if (!gate || !up)
      return {};
    FailureOr<mt::NamedTensorType> type = withErrorsAt(call.range, [&](auto emitErrorFn) {
      return mt::inferBroadcastType(typeOf(gate), typeOf(up), emitErrorFn);
    });
    if (failed(type))
      return {};
    Value activated = mt::SiluOp::create(builder, location, gate);
    return Val::of(mt::MulOp::create(builder, location, *type, activated, up));
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
                                              builder.getF64FloatAttr(*theta)));
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
    SmallVector<mt::NamedDim> resultDims = typeOf(ids).getDims();
    for (const mt::NamedDim &d : typeOf(table).getDims()) {
      if (d.name.getValue() == *dim)
        continue;
      if (typeOf(ids).hasDim(d.name))
        return fail(call.range, "dimension '" + d.name.getValue().str() +
                                    "' is in both the table and the indices");
      resultDims.push_back(d);
    }
    std::optional<mt::NamedTensorType> type = resultType(typeOf(table), resultDims, call.range);
    if (!type)
      return {};
    return Val::of(mt::GatherOp::create(builder, location, *type,
                                                table, ids, builder.getStringAttr(*dim)));
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
        builder.getStringAttr(*dim));
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
      SmallVector<mt::NamedDim> resultDims;
      for (const mt::NamedDim &d : input.getDims()) {
        if (d.name.getValue() == merged->front())
          resultDims.push_back({builder.getStringAttr(*into), product});
        else if (!llvm::is_contained(*merged, d.name.getValue()))
          resultDims.push_back(d);
      }
      std::optional<mt::NamedTensorType> type = resultType(input, resultDims, call.range);
      if (!type)
        return {};
      auto op = mt::MergeOp::create(builder, 
          location, *type, x,
          builder.getStrArrayAttr(SmallVector<StringRef>(merged->begin(), merged->end())),
          builder.getStringAttr(*into));
      if (failed(withErrorsAt(call.range, [&](auto) { return op.verify(); }))) {
        op.erase();
        return {};
      }
      return Val::of(op.getResult());
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
    SmallVector<mt::NamedDim> resultDims = input.getDims();
    for (mt::NamedDim &d : resultDims)
      if (d.name.getValue() == *dim)
        d.name = builder.getStringAttr(*to);
    return Val::of(mt::RenameOp::create(builder, location, input.withDims(resultDims), x,
                                                builder.getStringAttr(*dim),
                                                builder.getStringAttr(*to)));
  }

  if (name == "dispatch" || name == "combine" || name == "load_balancing_loss") {
    bool isDispatch = name == "dispatch", isCombine = name == "combine";
    SmallVector<llvm::StringRef> keywords = {"experts", "k"};
    if (isDispatch)
      keywords.push_back("capacity_factor");
    size_t positional = isCombine ? 3 : 2;
    if (!args.check(positional, positional, keywords))
      return {};
    SmallVector<Value> operands;
    static const char *roles[3][3] = {{"input", "indices", ""},
                                      {"expert outputs", "indices", "weights"},
                                      {"router logits", "indices", ""}};
    unsigned role = isDispatch ? 0 : isCombine ? 1 : 2;
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
    Operation *op;
    if (isDispatch) {
      std::optional<double> factor =
          constantArg(args.keyword("capacity_factor"), 1.25, "'capacity_factor'");
      if (!factor)
        return {};
      if (!(*factor > 0))
        return fail(args.keyword("capacity_factor")->range, "'capacity_factor' must be positive");
      // The capacity is derived: ceil(factor * tokens * k / experts).
      mt::NamedTensorType indices = typeOf(operands[1]);
      int64_t k = indices.getDimSize(*kDim);
      int64_t tokens = indices.getNumElements() / k;
      auto capacity = static_cast<int64_t>(
          std::ceil(*factor * static_cast<double>(tokens * k) / static_cast<double>(*experts)));
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
      op = mt::DispatchOp::create(builder, 
          location, *type, operands[0], operands[1],
          builder.getStringAttr(*kDim), builder.getStringAttr(*expertDim),
          builder.getStringAttr("capacity"), builder.getF64FloatAttr(*factor));
    } else if (isCombine) {
      mt::NamedTensorType input = typeOf(operands[0]);
      if (!requireDim(operands[0], *expertDim, call.args[0]->range, "expert outputs") ||
          !requireDim(operands[0], "capacity", call.args[0]->range, "expert outputs"))
        return {};
      mt::NamedTensorType indices = typeOf(operands[1]);
      SmallVector<mt::NamedDim> resultDims;
      for (const mt::NamedDim &d : indices.getDims())
        if (d.name.getValue() != *kDim)
          resultDims.push_back(d);
      for (const mt::NamedDim &d : input.getDims())
        if (d.name.getValue() != *expertDim && d.name.getValue() != "capacity")
          resultDims.push_back(d);
      std::optional<mt::NamedTensorType> type = resultType(input, resultDims, call.range);
      if (!type)
        return {};
      op = mt::CombineOp::create(builder, location, *type, operands[0],
                                         operands[1], operands[2], builder.getStringAttr(*kDim),
                                         builder.getStringAttr(*expertDim),
                                         builder.getStringAttr("capacity"));
    } else {
      op = mt::LoadBalancingLossOp::create(builder, 
          location, mt::NamedTensorType::getScalar(typeOf(operands[0]).getElementType()),
          operands[0], operands[1], builder.getStringAttr(*expertDim),
          builder.getStringAttr(*kDim));
    }
    if (failed(withErrorsAt(call.range, [&](auto) { return mlir::verify(op, false); }))) {
      op->erase();
      return {};
    }
    return Val::of(op->getResult(0));
  }

  if (layers.count(name))
    return fail(call.range, "internal: layer call reached evalCall");
  return fail(call.nameRange, "unknown function '" + name + "'");
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
    if (fn.args.empty() || fn.args.front().sig.elementType.empty() ||
        !isa<IntegerType>(elementTypeFor(context, fn.args.front().sig.elementType)))
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
  DictionaryAttr parallel =
      lowerParallelBlock(ast.parallel ? &*ast.parallel : nullptr, dims, numLayers, context, diags);

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
