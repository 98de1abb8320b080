//===- MLIRGenImpl.h - the frontend's lowering state (internal) -*- C++ -*-===//
//
// Shared by MLIRGen.cpp (declarations, statements, expressions, the module) and
// BuiltinLowering.cpp (the builtin functions of the language). Not part of the frontend's
// interface: include frontend/MLIRGen.h.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_MLIRGENIMPL_H
#define MTC_FRONTEND_MLIRGENIMPL_H

#include "frontend/AST.h"
#include "frontend/ConfigLowering.h"
#include "frontend/Diagnostics.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>

namespace mtc::frontend::detail {

using namespace mlir;

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
std::string formatNumber(double value);

/// A verifier's message without its "'mt.merge' op " prefix: the user wrote a builtin call.
std::string withoutOpPrefix(llvm::StringRef msg);

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

  /// Builds `OpTy` (an op that infers its result type) from `args`, its builder's
  /// arguments after the result type, with the type the dialect infers; when the op's
  /// rules reject the operands, reports the rule at `range` and builds nothing.
  template <typename OpTy, typename... Args>
  Value createInferred(const SourceRange &range, Args &&...args) {
    OperationState state(loc(range), OpTy::getOperationName());
    OpTy::build(builder, state, /*result=*/Type(), std::forward<Args>(args)...);
    SmallVector<Type, 1> types;
    if (failed(withErrorsAt(range, [&](auto) {
          return OpTy::inferReturnTypes(&context, state.location, state.operands,
                                        state.attributes.getDictionary(&context),
                                        state.getRawProperties(), state.regions, types);
        })))
      return {};
    state.types.assign(types.begin(), types.end());
    return builder.create(state)->getResult(0);
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

  /// The element type of activations: the training precision (f32, bf16 or f16).
  Type floatType;
  /// The element type parameters are declared in: f32 whatever the precision (the master
  /// weights mixed precision updates), read as `floatType` through a cast at each use.
  Type parameterType;
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
  /// Params declared without an element type: kept in `parameterType` and computed with in
  /// `floatType`.
  llvm::StringSet<> masterParams;
  /// Params whose declaration failed (and was reported): their uses are not reported again.
  llvm::StringSet<> failedParams;
  /// The layer ("" for the model) of every parameter symbol declared, failed ones included.
  llvm::StringMap<std::string> paramLayers;
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

} // namespace mtc::frontend::detail

#endif // MTC_FRONTEND_MLIRGENIMPL_H
