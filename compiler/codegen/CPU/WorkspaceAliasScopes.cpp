//===- WorkspaceAliasScopes.cpp - blocks of the workspace kept apart ------===//
//
// The temporaries of a function are offsets of one workspace pointer (mtc-workspace-views),
// which LLVM's alias analysis cannot tell apart where the indices differ. This pass gives
// each block an alias scope and says, on every access that reaches only such
// blocks, which scopes it never aliases: those whose byte ranges share nothing with its own.
// The criterion is spatial, not temporal, so it holds in any order of the accesses. The
// buffers the runtime passes to an entry function are never in the workspace: accesses
// through them get one more scope, apart from every block. The arguments of a function the
// module calls get a scope of that function's, apart from its own blocks, which are
// allocated while the arguments are live (LLVM's inliner gives each inlined copy its own
// scopes, so the claim stays within one call).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Passes.h"
#include "compiler/codegen/CPU/Workspace.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_WORKSPACEALIASSCOPESPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The block of the workspace (the op with its ranges) `pointer` derives from, through
/// getelementptr, the descriptors' insertvalue/extractvalue and casts; for a memref argument
/// of a function, `entry` when the function is an entry function (a buffer of the runtime's,
/// never in the workspace), else the function; null when it derives from anything else (a
/// value carried by a loop, a load).
Operation *blockOf(Value pointer, Operation *entry,
                   const llvm::DenseSet<Operation *> &entryFunctions) {
  Value value = pointer;
  for (;;) {
    Operation *op = value.getDefiningOp();
    if (!op) {
      Operation *owner = cast<BlockArgument>(value).getOwner()->getParentOp();
      if (!value.getParentBlock()->isEntryBlock() || !isa<func::FuncOp>(owner) ||
          !isa<MemRefType>(value.getType()))
        return nullptr;
      return entryFunctions.contains(owner) ? entry : owner;
    }
    if (op->hasAttr(mtc::codegen::kWorkspaceRangesAttrName))
      return op;
    if (auto gep = dyn_cast<LLVM::GEPOp>(op)) {
      value = gep.getBase();
      continue;
    }
    if (auto cast = dyn_cast<UnrealizedConversionCastOp>(op); cast && cast.getNumOperands() == 1) {
      value = cast.getOperand(0);
      continue;
    }
    auto extract = dyn_cast<LLVM::ExtractValueOp>(op);
    if (!extract)
      return nullptr;
    // The value inserted at that position of the descriptor.
    ArrayRef<int64_t> position = extract.getPosition();
    Value aggregate = extract.getContainer();
    for (;;) {
      Operation *def = aggregate.getDefiningOp();
      if (!def) {
        // A descriptor that is an argument: the pointers it holds are the argument's.
        value = aggregate;
        break;
      }
      if (auto insert = dyn_cast_or_null<LLVM::InsertValueOp>(def)) {
        if (insert.getPosition() == position) {
          if (insert->hasAttr(mtc::codegen::kWorkspaceRangesAttrName))
            return insert;
          value = insert.getValue();
          break;
        }
        aggregate = insert.getContainer();
        continue;
      }
      if (auto cast = dyn_cast_or_null<UnrealizedConversionCastOp>(def);
          cast && cast.getNumOperands() == 1) {
        aggregate = cast.getOperand(0);
        continue;
      }
      return nullptr;
    }
  }
}

/// Whether two lists of [begin, end) ranges share a byte.
bool overlap(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  for (size_t i = 0; i + 1 < a.size(); i += 2)
    for (size_t j = 0; j + 1 < b.size(); j += 2)
      if (a[i] < b[j + 1] && b[j] < a[i + 1])
        return true;
  return false;
}

struct WorkspaceAliasScopesPass
    : public mtc::codegen::impl::WorkspaceAliasScopesPassBase<WorkspaceAliasScopesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    StringRef rangesName = mtc::codegen::kWorkspaceRangesAttrName;

    // The blocks, in order, and the accesses reaching only blocks.
    llvm::MapVector<Operation *, ArrayRef<int64_t>> ranges;
    module.walk([&](Operation *op) {
      if (auto attr = op->getAttrOfType<DenseI64ArrayAttr>(rangesName))
        ranges[op] = attr.asArrayRef();
    });
    if (ranges.empty())
      return;
    llvm::DenseSet<Operation *> entryFunctions;
    for (func::FuncOp func : mtc::codegen::workspaceEntries(module))
      entryFunctions.insert(func);
    // The runtime's buffers the entry functions take, one scope apart from every block.
    Operation *entry = module;
    SmallVector<std::pair<LLVM::AliasAnalysisOpInterface, SmallVector<Operation *, 2>>> accesses;
    module.walk([&](LLVM::AliasAnalysisOpInterface access) {
      SmallVector<Operation *, 2> blocks;
      for (Value pointer : access.getAccessedOperands()) {
        Operation *block = blockOf(pointer, entry, entryFunctions);
        if (!block)
          return;
        if (!llvm::is_contained(blocks, block))
          blocks.push_back(block);
      }
      if (!blocks.empty())
        accesses.emplace_back(access, std::move(blocks));
    });

    auto domain = LLVM::AliasScopeDomainAttr::get(
        context, StringAttr::get(context, "mtc.workspace: the blocks of the temporaries"));
    DenseMap<Operation *, LLVM::AliasScopeAttr> scopes;
    for (auto [index, block] : llvm::enumerate(ranges))
      scopes[block.first] = LLVM::AliasScopeAttr::get(
          domain, StringAttr::get(context, "block " + llvm::Twine(index)));
    scopes[entry] = LLVM::AliasScopeAttr::get(domain, StringAttr::get(context, "arguments"));
    SmallVector<Operation *> all = llvm::to_vector(llvm::make_first_range(ranges));
    all.push_back(entry);
    for (auto &[access, blocks] : accesses)
      for (Operation *block : blocks)
        if (auto func = dyn_cast<func::FuncOp>(block); func && !scopes.contains(func)) {
          scopes[func] = LLVM::AliasScopeAttr::get(
              domain, StringAttr::get(context, "arguments of " + func.getSymName()));
          all.push_back(func);
        }
    // The runtime's buffers are apart from every block; the arguments of a function the
    // module calls (the caller's blocks, or the runtime's buffers) from the function's own
    // blocks, allocated while the arguments are live; arguments not from each other.
    auto isArguments = [&](Operation *op) { return op == entry || isa<func::FuncOp>(op); };
    auto isApart = [&](Operation *block, Operation *other) {
      if (isArguments(block) && isArguments(other))
        return false;
      if (block == entry || other == entry)
        return true;
      if (isArguments(block) || isArguments(other)) {
        Operation *function = isArguments(block) ? block : other;
        Operation *own = isArguments(block) ? other : block;
        return own->getParentOfType<func::FuncOp>() == function;
      }
      return !overlap(ranges[block], ranges[other]);
    };
    for (auto &[access, blocks] : accesses) {
      SmallVector<Attribute> own, apart;
      for (Operation *block : blocks)
        own.push_back(scopes[block]);
      for (Operation *other : all)
        if (llvm::all_of(blocks, [&](Operation *block) { return isApart(block, other); }))
          apart.push_back(scopes[other]);
      access.setAliasScopes(ArrayAttr::get(context, own));
      if (!apart.empty())
        access.setNoAliasScopes(ArrayAttr::get(context, apart));
    }
    for (auto &entry : ranges)
      entry.first->removeAttr(rangesName);
  }
};

} // namespace
