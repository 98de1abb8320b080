//===- OutlineParameters.cpp - parameters and states as explicit buffers --===//
//
// Rewrites every function so that it no longer reads or writes module state: the
// parameters and optimizer states a function uses on entry become arguments, the ones it
// writes become results, and `mt.repeat` passes the parameters of its layer as stacked
// operands. Passes.td describes the contract; docs/architecture.md the choices.
//
// The pass works in two phases. The analysis visits the functions callees first and
// computes, per function, the symbols whose entry value it uses (`in`) and the symbols it
// writes (`out`), checking everything that could make the rewrite impossible; the rewrite
// then changes every function at once and cannot fail.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>

namespace mtc::transforms {
#define GEN_PASS_DEF_MTOUTLINEPARAMETERSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace mtc::transforms

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;

namespace {

/// The dimension that stacks the instances of a layer parameter outside its layer.

/// `type` with a leading dimension `dim` of size `size`.
NamedTensorType stackedType(NamedTensorType type, StringRef dim, int64_t size) {
  SmallVector<mt::NamedDim> dims = {{StringAttr::get(type.getContext(), dim), size}};
  llvm::append_range(dims, type.getDims());
  return type.withDims(dims);
}

/// An `mt.param` or `mt.state` of the module.
struct Symbol {
  FlatSymbolRefAttr ref;
  Operation *op;
  bool isState;
  /// The declared type (a state's storage type).
  NamedTensorType type;
  /// The layer a layer parameter belongs to.
  std::optional<StringRef> layer;
};

/// What a function does with the symbols, indexed by symbol: `in` holds the symbols whose
/// value on entry it uses (its new arguments), `out` those it writes (its new results).
struct Access {
  llvm::BitVector in, out;
};

class Outliner {
public:
  explicit Outliner(ModuleOp module) : module(module), symbolTable(module) {}

  /// Computes every function's accesses; emits an error and fails where the module
  /// cannot be outlined.
  LogicalResult analyze();
  /// Rewrites every function; only after a successful analyze().
  void rewrite();

private:
  LogicalResult collectSymbols();
  LogicalResult orderFunctions();
  LogicalResult scan(func::FuncOp func);

  /// The type of symbol `s` as function `func` sees it: a layer parameter's instance inside
  /// a function of its layer, all its instances stacked along `layers` outside any layer;
  /// otherwise the declared type. Null where `func` cannot see `s` (see whyUnreadable).
  NamedTensorType valueType(func::FuncOp func, unsigned s) const;
  std::string whyUnreadable(func::FuncOp func, unsigned s) const;
  /// Checks that `op` in `func` accesses symbol `s` with type `type`.
  LogicalResult checkAccess(Operation *op, func::FuncOp func, unsigned s, Type type) const;
  /// Checks that `repeat` in `caller` can pass symbol `s`, which `callee` reads.
  LogicalResult checkRepeatOperand(mt::RepeatOp repeat, func::FuncOp caller, func::FuncOp callee,
                                   unsigned s) const;
  /// The symbol `op` names through `name`; emits an error if there is none.
  FailureOr<unsigned> lookupSymbol(Operation *op, StringRef name) const;
  func::FuncOp lookupCallee(Operation *op, StringRef name) const;

  void rewrite(func::FuncOp func);
  DictionaryAttr symbolAttrs(unsigned s) const;

  ModuleOp module;
  SymbolTable symbolTable;
  SmallVector<Symbol> symbols;
  llvm::StringMap<unsigned> symbolIndex;
  /// Instances of each layer's parameters: the largest count of the repeats that call one
  /// of its functions (as the reference interpreter defines them).
  llvm::StringMap<int64_t> instances;
  /// Every function, callees before their callers.
  SmallVector<func::FuncOp> order;
  DenseMap<Operation *, Access> access;
};

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

LogicalResult Outliner::collectSymbols() {
  for (Operation &op : module.getBody()->getOperations()) {
    Symbol symbol;
    if (auto param = dyn_cast<mt::ParamOp>(op)) {
      symbol = {FlatSymbolRefAttr::get(param.getSymNameAttr()), &op, false, param.getTensorType(),
                param.getLayer()};
    } else if (auto state = dyn_cast<mt::StateOp>(op)) {
      symbol = {FlatSymbolRefAttr::get(state.getSymNameAttr()), &op, true,
                cast<NamedTensorType>(state.getType()), std::nullopt};
    } else {
      continue;
    }
    symbolIndex[symbol.ref.getValue()] = symbols.size();
    symbols.push_back(symbol);
  }
  module.walk([&](mt::RepeatOp repeat) {
    if (auto callee = symbolTable.lookup<func::FuncOp>(repeat.getCallee()))
      if (std::optional<StringRef> layer = mt::MTDialect::getLayerOf(callee)) {
        int64_t &count = instances[*layer];
        count = std::max(count, static_cast<int64_t>(repeat.getCount()));
      }
  });
  return success();
}

func::FuncOp Outliner::lookupCallee(Operation *op, StringRef name) const {
  auto callee = symbolTable.lookup<func::FuncOp>(name);
  if (!callee)
    op->emitOpError() << "calls '@" << name << "', which is not a func.func of the module";
  return callee;
}

/// Depth-first over the calls (mt.repeat and func.call), so that every callee's accesses
/// are known before its callers are scanned.
LogicalResult Outliner::orderFunctions() {
  enum class Mark { Visiting, Done };
  DenseMap<Operation *, Mark> marks;
  std::function<LogicalResult(func::FuncOp)> visit = [&](func::FuncOp func) -> LogicalResult {
    auto [it, inserted] = marks.try_emplace(func, Mark::Visiting);
    if (!inserted) {
      if (it->second == Mark::Done)
        return success();
      return emitError(func.getLoc()) << "'@" << func.getSymName()
                                      << "' calls itself (through mt.repeat or func.call): a "
                                         "recursive function cannot be outlined";
    }
    SmallVector<func::FuncOp> callees;
    WalkResult walk = func.walk([&](Operation *op) {
      StringRef name;
      if (auto repeat = dyn_cast<mt::RepeatOp>(op))
        name = repeat.getCallee();
      else if (auto call = dyn_cast<func::CallOp>(op))
        name = call.getCallee();
      else
        return WalkResult::advance();
      func::FuncOp callee = lookupCallee(op, name);
      if (!callee)
        return WalkResult::interrupt();
      callees.push_back(callee);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    for (func::FuncOp callee : callees)
      if (failed(visit(callee)))
        return failure();
    marks[func] = Mark::Done;
    order.push_back(func);
    return success();
  };
  for (auto func : module.getOps<func::FuncOp>())
    if (failed(visit(func)))
      return failure();
  return success();
}

NamedTensorType Outliner::valueType(func::FuncOp func, unsigned s) const {
  const Symbol &symbol = symbols[s];
  if (!symbol.layer)
    return symbol.type;
  if (std::optional<StringRef> layer = mt::MTDialect::getLayerOf(func))
    return *layer == *symbol.layer ? symbol.type : NamedTensorType();
  int64_t count = instances.lookup(*symbol.layer);
  if (count == 0)
    return {};
  return stackedType(symbol.type, mt::MTDialect::kLayersDimName, count);
}

std::string Outliner::whyUnreadable(func::FuncOp func, unsigned s) const {
  const Symbol &symbol = symbols[s];
  std::string message;
  llvm::raw_string_ostream os(message);
  if (std::optional<StringRef> layer = mt::MTDialect::getLayerOf(func))
    os << "parameter '@" << symbol.ref.getValue() << "' belongs to layer '@" << *symbol.layer
       << "' and cannot be read in '@" << func.getSymName() << "', a function of layer '@" << *layer
       << "'";
  else
    os << "layer '@" << *symbol.layer << "' is applied by no mt.repeat, so its parameter '@"
       << symbol.ref.getValue() << "' has no instances to stack";
  return message;
}

FailureOr<unsigned> Outliner::lookupSymbol(Operation *op, StringRef name) const {
  auto it = symbolIndex.find(name);
  if (it == symbolIndex.end())
    return op->emitOpError() << "'@" << name << "' does not name an mt.param or mt.state";
  return it->second;
}

LogicalResult Outliner::checkAccess(Operation *op, func::FuncOp func, unsigned s, Type type) const {
  NamedTensorType expected = valueType(func, s);
  if (!expected)
    return op->emitOpError() << whyUnreadable(func, s);
  if (expected != type)
    return op->emitOpError() << "accesses '@" << symbols[s].ref.getValue() << "' as " << type
                             << ", but its value in '@" << func.getSymName() << "' has type "
                             << expected;
  return success();
}

LogicalResult Outliner::checkRepeatOperand(mt::RepeatOp repeat, func::FuncOp caller,
                                           func::FuncOp callee, unsigned s) const {
  const Symbol &symbol = symbols[s];
  StringRef name = symbol.ref.getValue();
  NamedTensorType outer = valueType(caller, s);
  if (!outer)
    return repeat.emitOpError() << "cannot pass '@" << name << "', which '@" << callee.getSymName()
                                << "' reads: " << whyUnreadable(caller, s);
  StringRef stackDim = repeat.getStackDimName();
  int64_t count = static_cast<int64_t>(repeat.getCount());
  if (symbol.layer) {
    // The callee reads its instance (it is a function of the parameter's layer, or its
    // own scan would have failed); the caller must hold all instances, stacked.
    if (mt::MTDialect::getLayerOf(caller))
      return repeat.emitOpError() << "repeats '@" << callee.getSymName() << "' inside layer '@"
                                  << *symbol.layer << "' itself, whose parameter '@" << name
                                  << "' it reads: nested repeats of a layer are not supported";
    int64_t layerInstances = outer.getDimSizes().front();
    if (stackDim != mt::MTDialect::kLayersDimName || count != layerInstances)
      return repeat.emitOpError() << "'@" << callee.getSymName() << "' reads layer parameter '@"
                                  << name << "', whose " << layerInstances
                                  << " instances are stacked along '" << mt::MTDialect::kLayersDimName
                                  << "', but the repeat makes " << count << " calls stacked along '"
                                  << stackDim << "'";
    return success();
  }
  // A model parameter or a state: the same value for every call, broadcast by the caller.
  if (outer.hasDim(stackDim))
    return repeat.emitOpError() << "cannot broadcast '@" << name << "' of type " << outer
                                << " along the stacking dimension '" << stackDim
                                << "', which it already has";
  return success();
}

LogicalResult Outliner::scan(func::FuncOp func) {
  Access &mine = access.find(func)->second;
  if (func.isExternal())
    return success();
  Block &entry = func.getBody().front();
  bool singleBlock = func.getBody().hasOneBlock();
  auto checkPlacement = [&](Operation *op) -> LogicalResult {
    if (singleBlock && op->getBlock() == &entry)
      return success();
    return op->emitOpError() << "accesses parameters or states inside a nested region or a "
                                "function of several blocks, which -mt-outline-parameters "
                                "does not handle";
  };

  llvm::BitVector written(symbols.size());
  auto readEntryValue = [&](unsigned s) {
    if (!written[s])
      mine.in.set(s);
  };
  WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
    if (auto ref = dyn_cast<mt::ParamRefOp>(op)) {
      FailureOr<unsigned> s = lookupSymbol(op, ref.getParam());
      if (failed(s) || failed(checkPlacement(op)) ||
          failed(checkAccess(op, func, *s, ref.getResult().getType())))
        return WalkResult::interrupt();
      readEntryValue(*s);
    } else if (auto assign = dyn_cast<mt::AssignOp>(op)) {
      FailureOr<unsigned> s = lookupSymbol(op, assign.getTarget());
      if (failed(s) || failed(checkPlacement(op)) ||
          failed(checkAccess(op, func, *s, assign.getValue().getType())))
        return WalkResult::interrupt();
      written.set(*s);
      mine.out.set(*s);
    } else if (auto repeat = dyn_cast<mt::RepeatOp>(op)) {
      func::FuncOp callee = lookupCallee(op, repeat.getCallee());
      const Access &theirs = access.find(callee)->second;
      if (theirs.in.none() && theirs.out.none())
        return WalkResult::advance();
      if (failed(checkPlacement(op)))
        return WalkResult::interrupt();
      if (theirs.out.any()) {
        repeat.emitOpError() << "repeats '@" << callee.getSymName() << "', which writes '@"
                             << symbols[theirs.out.find_first()].ref.getValue()
                             << "' (mt.assign): a scan has no place to return written "
                                "parameters or states";
        return WalkResult::interrupt();
      }
      for (unsigned s : theirs.in.set_bits()) {
        if (failed(checkRepeatOperand(repeat, func, callee, s)))
          return WalkResult::interrupt();
        readEntryValue(s);
      }
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      func::FuncOp callee = lookupCallee(op, call.getCallee());
      const Access &theirs = access.find(callee)->second;
      if (theirs.in.none() && theirs.out.none())
        return WalkResult::advance();
      if (failed(checkPlacement(op)))
        return WalkResult::interrupt();
      llvm::BitVector both = theirs.in;
      both |= theirs.out;
      for (unsigned s : both.set_bits()) {
        NamedTensorType outer = valueType(func, s), inner = valueType(callee, s);
        if (!outer) {
          call.emitOpError() << "cannot pass '@" << symbols[s].ref.getValue() << "', which '@"
                             << callee.getSymName() << "' accesses: " << whyUnreadable(func, s);
          return WalkResult::interrupt();
        }
        if (outer != inner) {
          call.emitOpError() << "calls '@" << callee.getSymName() << "', which accesses '@"
                             << symbols[s].ref.getValue() << "' as " << inner
                             << ", but the caller holds it as " << outer;
          return WalkResult::interrupt();
        }
      }
      for (unsigned s : theirs.in.set_bits())
        readEntryValue(s);
      written |= theirs.out;
      mine.out |= theirs.out;
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult Outliner::analyze() {
  if (module->hasAttr(transforms::kOutlinedAttrName))
    return emitError(module.getLoc())
           << "module is already outlined ('" << transforms::kOutlinedAttrName
           << "'): its functions take parameters and states as arguments";
  if (failed(collectSymbols()) || failed(orderFunctions()))
    return failure();
  for (func::FuncOp func : order)
    access[func] = {llvm::BitVector(symbols.size()), llvm::BitVector(symbols.size())};
  for (func::FuncOp func : order)
    if (failed(scan(func)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Rewrite
//===----------------------------------------------------------------------===//

DictionaryAttr Outliner::symbolAttrs(unsigned s) const {
  const Symbol &symbol = symbols[s];
  MLIRContext *context = symbol.op->getContext();
  StringRef name = symbol.isState ? transforms::kStateAttrName : transforms::kParamAttrName;
  return DictionaryAttr::get(context, {NamedAttribute(StringAttr::get(context, name), symbol.ref)});
}

void Outliner::rewrite(func::FuncOp func) {
  const Access &mine = access.find(func)->second;
  if (func.isExternal())
    return;
  Block &entry = func.getBody().front();

  // The entry values: one argument per symbol read, in symbol order. A layer keeps the
  // arguments its mt.repeat passes unchanged to every call (position ids) last, as the
  // repeat keeps its invariant operands last.
  SmallVector<Value> current(symbols.size());
  unsigned invariant = 0;
  module.walk([&](mt::RepeatOp repeat) {
    if (repeat.getCallee() == func.getSymName())
      invariant = repeat.getNumInvariant();
  });
  unsigned numArgs = func.getNumArguments() - invariant;
  SmallVector<unsigned> argIndices;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Location> argLocs;
  for (unsigned s : mine.in.set_bits()) {
    argIndices.push_back(numArgs);
    argTypes.push_back(valueType(func, s));
    argAttrs.push_back(symbolAttrs(s));
    argLocs.push_back(symbols[s].op->getLoc());
  }
  if (!argIndices.empty()) {
    LogicalResult inserted = func.insertArguments(argIndices, argTypes, argAttrs, argLocs);
    assert(succeeded(inserted) && "func.func takes any arguments");
    (void)inserted;
  }
  for (auto [i, s] : llvm::enumerate(mine.in.set_bits()))
    current[s] = func.getArgument(numArgs + i);

  // Broadcasts of model parameters and states to stacked operands, shared by the repeats
  // that pass the same value with the same stacking.
  DenseMap<std::pair<Value, Type>, Value> broadcasts;
  for (Operation &op : llvm::make_early_inc_range(entry)) {
    if (auto ref = dyn_cast<mt::ParamRefOp>(op)) {
      Value value = current[symbolIndex.lookup(ref.getParam())];
      assert(value && "a read without an entry value or an earlier write");
      ref.getResult().replaceAllUsesWith(value);
      ref.erase();
    } else if (auto assign = dyn_cast<mt::AssignOp>(op)) {
      current[symbolIndex.lookup(assign.getTarget())] = assign.getValue();
      assign.erase();
    } else if (auto repeat = dyn_cast<mt::RepeatOp>(op)) {
      auto callee = symbolTable.lookup<func::FuncOp>(repeat.getCallee());
      const Access &theirs = access.find(callee)->second;
      if (theirs.in.none())
        continue;
      unsigned carried = repeat.getNumCarried();
      OpBuilder builder(repeat);
      SmallVector<Value> operands;
      for (unsigned s : theirs.in.set_bits()) {
        Value value = current[s];
        if (!symbols[s].layer) {
          NamedTensorType type = stackedType(cast<NamedTensorType>(value.getType()),
                                             repeat.getStackDimName(), repeat.getCount());
          Value &slot = broadcasts[{value, type}];
          if (!slot)
            slot = mt::BroadcastOp::create(builder, repeat.getLoc(), type, value);
          value = slot;
        }
        operands.push_back(value);
      }
      unsigned position = repeat.getInputs().size() - repeat.getNumInvariant();
      SmallVector<Value> inputs(repeat.getInputs());
      inputs.insert(inputs.begin() + position, operands.begin(), operands.end());
      repeat->setOperands(inputs);
      repeat.setCarriedAttr(builder.getI64IntegerAttr(carried));
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = symbolTable.lookup<func::FuncOp>(call.getCallee());
      const Access &theirs = access.find(callee)->second;
      if (theirs.in.none() && theirs.out.none())
        continue;
      SmallVector<Value> operands(call.getOperands());
      for (unsigned s : theirs.in.set_bits())
        operands.push_back(current[s]);
      SmallVector<Type> resultTypes(call.getResultTypes());
      for (unsigned s : theirs.out.set_bits())
        resultTypes.push_back(valueType(callee, s));
      OpBuilder builder(call);
      auto outlined =
          func::CallOp::create(builder, call.getLoc(), call.getCalleeAttr(), resultTypes, operands);
      outlined->setDiscardableAttrs(call->getDiscardableAttrDictionary());
      unsigned numResults = call.getNumResults();
      call.replaceAllUsesWith(outlined.getResults().take_front(numResults));
      for (auto [i, s] : llvm::enumerate(theirs.out.set_bits()))
        current[s] = outlined.getResult(numResults + i);
      call.erase();
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<Value> written;
      for (unsigned s : mine.out.set_bits())
        written.push_back(current[s]);
      ret.getOperandsMutable().append(written);
    }
  }

  // The written values: one result per symbol, in symbol order.
  SmallVector<unsigned> resultIndices;
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned s : mine.out.set_bits()) {
    resultIndices.push_back(func.getNumResults());
    resultTypes.push_back(valueType(func, s));
    resultAttrs.push_back(symbolAttrs(s));
  }
  if (!resultIndices.empty()) {
    LogicalResult inserted = func.insertResults(resultIndices, resultTypes, resultAttrs);
    assert(succeeded(inserted) && "func.func returns any results");
    (void)inserted;
  }
}

void Outliner::rewrite() {
  for (func::FuncOp func : order)
    rewrite(func);
  module->setAttr(transforms::kOutlinedAttrName, UnitAttr::get(module.getContext()));
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class OutlineParametersPass
    : public mtc::transforms::impl::MTOutlineParametersPassBase<OutlineParametersPass> {
public:
  void runOnOperation() override {
    Outliner outliner(getOperation());
    if (failed(outliner.analyze()))
      return signalPassFailure();
    outliner.rewrite();
  }
};

} // namespace
