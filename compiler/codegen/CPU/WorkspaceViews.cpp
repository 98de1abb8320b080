//===- WorkspaceViews.cpp - the temporaries as views of one workspace -----===//
//
// Compiles the workspace plan (compiler/codegen/CPU/Workspace.h: planKernelMemory, the plan
// mtc writes into the plan's `arena`) into the code: every placed memref.alloc becomes a
// memref.view of its block of the workspace, the address at its offset (a select among its
// offsets by the phase of its loop when a loop carries it into the next iteration), the
// deallocations of placed allocations go, and each function with views asks the runtime for
// the workspace at its entry and hands it back before it returns. Each block keeps the byte
// ranges it may take (kWorkspaceRangesAttrName, on the insertion of its aligned pointer
// into its descriptor, which no lowering folds away) for mtc-workspace-alias-scopes.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Passes.h"
#include "compiler/codegen/CPU/Workspace.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_WORKSPACEVIEWSPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;
using mtc::codegen::WorkspacePlan;

namespace {

struct WorkspaceViewsPass
    : public mtc::codegen::impl::WorkspaceViewsPassBase<WorkspaceViewsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<WorkspacePlan> plan;
    {
      // An entry the planner cannot simulate keeps the runtime allocator: why is no error.
      ScopedDiagnosticHandler quiet(&getContext(), [](Diagnostic &) { return success(); });
      SmallVector<func::FuncOp> unplanned;
      plan = mtc::codegen::planKernelMemory(module, &unplanned);
    }
    if (failed(plan))
      return signalPassFailure();

    llvm::MapVector<func::FuncOp, SmallVector<memref::AllocOp>> placedIn;
    module.walk([&](memref::AllocOp alloc) {
      if (plan->placements.contains(alloc))
        placedIn[alloc->getParentOfType<func::FuncOp>()].push_back(alloc);
    });
    if (placedIn.empty())
      return;

    MLIRContext *context = &getContext();
    Type pointer = LLVM::LLVMPointerType::get(context);
    Type i64 = IntegerType::get(context, 64);
    FailureOr<func::FuncOp> acquire =
        declareImport(module, mtc::codegen::kKernelWorkspaceFunction, {i64}, {pointer});
    FailureOr<func::FuncOp> release =
        declareImport(module, mtc::codegen::kKernelWorkspaceReleaseFunction, {pointer}, {});
    if (failed(acquire) || failed(release))
      return signalPassFailure();

    llvm::DenseSet<Value> views;
    for (auto &[func, allocs] : placedIn) {
      int64_t bytes = 0;
      for (memref::AllocOp alloc : allocs) {
        const WorkspacePlan::Placement &placement = plan->placements.at(alloc);
        for (int64_t offset : placement.offsets)
          bytes = std::max(bytes, offset + placement.bytes);
      }
      auto builder = OpBuilder::atBlockBegin(&func.getBody().front());
      Location loc = func.getLoc();
      Value base = func::CallOp::create(builder, loc, *acquire,
                                        ValueRange{arith::ConstantIntOp::create(builder, loc, bytes, 64)})
                       .getResult(0);
      func.walk([&](func::ReturnOp ret) {
        OpBuilder before(ret);
        func::CallOp::create(before, ret.getLoc(), *release, ValueRange{base});
      });
      for (memref::AllocOp alloc : allocs) {
        const WorkspacePlan::Placement &placement = plan->placements.at(alloc);
        OpBuilder before(alloc);
        Location at = alloc.getLoc();
        auto address = LLVM::GEPOp::create(before, at, pointer, before.getI8Type(), base,
                                           ValueRange{offsetOf(before, alloc, placement.offsets)});
        SmallVector<int64_t> ranges;
        for (int64_t offset : placement.offsets)
          llvm::append_range(ranges, ArrayRef<int64_t>{offset, offset + placement.bytes});
        Value block = asMemRef(before, at, address, placement.bytes,
                               DenseI64ArrayAttr::get(context, ranges));
        auto view = memref::ViewOp::create(before, at, alloc.getType(), block,
                                           arith::ConstantIndexOp::create(before, at, 0),
                                           ValueRange{});
        alloc.replaceAllUsesWith(view.getResult());
        alloc.erase();
        views.insert(view.getResult());
      }
    }

    // The frees of placed allocations: those the simulation saw free only them, and those it
    // never ran that free a view (through views and casts).
    SmallVector<memref::DeallocOp> frees;
    module.walk([&](memref::DeallocOp dealloc) {
      if (plan->freesOfPlaced.contains(dealloc) || views.contains(rootOf(dealloc.getMemref())))
        frees.push_back(dealloc);
    });
    for (memref::DeallocOp dealloc : frees)
      dealloc.erase();
  }

  /// `value` through the views, casts and metadata extractions it is made by.
  static Value rootOf(Value value) {
    while (Operation *op = value.getDefiningOp()) {
      if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(op))
        value = metadata.getSource();
      else if (auto view = dyn_cast<ViewLikeOpInterface>(op); view && !isa<memref::ViewOp>(op))
        value = view.getViewSource();
      else
        break;
    }
    return value;
  }

  /// The external function `name` of that type, declared when the module has none.
  FailureOr<func::FuncOp> declareImport(ModuleOp module, StringRef name, TypeRange inputs,
                                        TypeRange results) {
    auto type = FunctionType::get(&getContext(), inputs, results);
    if (Operation *existing = module.lookupSymbol(name)) {
      auto func = dyn_cast<func::FuncOp>(existing);
      if (!func || !func.isExternal() || func.getFunctionType() != type)
        return existing->emitError("'") << name << "' is the runtime's workspace function and "
                                        << "must be an external func.func of type " << type;
      return func;
    }
    auto builder = OpBuilder::atBlockBegin(module.getBody());
    auto func = func::FuncOp::create(builder, module.getLoc(), name, type);
    func.setPrivate();
    return func;
  }

  /// The `bytes` at `base` as a `memref<bytes x i8>`: the LLVM descriptor
  /// finalize-memref-to-llvm gives that type, cast to it; the insertion of its aligned
  /// pointer carries `ranges`.
  static Value asMemRef(OpBuilder &builder, Location loc, Value base, int64_t bytes,
                        DenseI64ArrayAttr ranges) {
    MLIRContext *context = builder.getContext();
    Type i64 = builder.getI64Type();
    Type sizes = LLVM::LLVMArrayType::get(i64, 1);
    Type descriptorType = LLVM::LLVMStructType::getLiteral(
        context, {base.getType(), base.getType(), i64, sizes, sizes});
    auto field = [&](Value descriptor, Value value, ArrayRef<int64_t> position) -> Value {
      return LLVM::InsertValueOp::create(builder, loc, descriptor, value, position);
    };
    auto constant = [&](int64_t value) -> Value {
      return LLVM::ConstantOp::create(builder, loc, i64, builder.getI64IntegerAttr(value));
    };
    Value descriptor = LLVM::PoisonOp::create(builder, loc, descriptorType);
    descriptor = field(descriptor, base, {0});
    descriptor = field(descriptor, base, {1});
    descriptor.getDefiningOp()->setAttr(mtc::codegen::kWorkspaceRangesAttrName, ranges);
    descriptor = field(descriptor, constant(0), {2});
    descriptor = field(descriptor, constant(bytes), {3, 0});
    descriptor = field(descriptor, constant(1), {4, 0});
    auto type = MemRefType::get({bytes}, builder.getI8Type());
    return UnrealizedConversionCastOp::create(builder, loc, type, descriptor).getResult(0);
  }

  /// The byte offset of `alloc`'s block (an i64): its one offset, or the offset of the
  /// phase of its innermost loop's iteration.
  static Value offsetOf(OpBuilder &builder, memref::AllocOp alloc, ArrayRef<int64_t> offsets) {
    Location loc = alloc.getLoc();
    auto i64 = [&](int64_t value) -> Value {
      return arith::ConstantIntOp::create(builder, loc, value, 64);
    };
    Value offset = i64(offsets.front());
    if (offsets.size() == 1)
      return offset;
    auto loop = alloc->getParentOfType<scf::ForOp>();
    Value iteration = arith::DivUIOp::create(
        builder, loc,
        arith::SubIOp::create(builder, loc, loop.getInductionVar(), loop.getLowerBound()),
        loop.getStep());
    Value phase = arith::RemUIOp::create(
        builder, loc, iteration, arith::ConstantIndexOp::create(builder, loc, offsets.size()));
    for (auto [k, other] : llvm::enumerate(offsets.drop_front())) {
      Value isPhase = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, phase,
                                            arith::ConstantIndexOp::create(builder, loc, k + 1));
      offset = arith::SelectOp::create(builder, loc, isPhase, i64(other), offset);
    }
    return offset;
  }
};

} // namespace
