//===- GemmOperandViews.cpp - GEMM operands read in place ------------------===//
//
// See GemmOperandViewsPass in Passes.td. An operand is traced back through its reshapes
// (collapse_shape; expand_shape adding unit dimensions) to the buffer the transpose wrote;
// each of its three dimensions is then a list of the transpose source's dimensions, whose
// sizes and strides either merge into one strided dimension or not. The batch may instead
// split into two merged parts; both operands then share one split (the lhs's first), and
// an operand without a view is cut into the same parts with subviews, as is the result.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

namespace mtc::codegen {
#define GEN_PASS_DEF_GEMMOPERANDVIEWSPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// One dimension of a strided view: its size and stride, in elements.
struct StridedDim {
  int64_t size;
  int64_t stride;
};

/// A run of dimensions that merges into one when each stride is the next one's times its
/// size (dimensions of size 1 are left out: their stride is never used).
std::optional<StridedDim> merge(ArrayRef<StridedDim> run) {
  SmallVector<StridedDim> used;
  for (StridedDim dim : run)
    if (dim.size != 1)
      used.push_back(dim);
  if (used.empty())
    return StridedDim{1, 1};
  int64_t size = 1;
  for (size_t i = 0; i + 1 < used.size(); ++i)
    if (used[i].stride != used[i + 1].stride * used[i + 1].size)
      return std::nullopt;
  for (StridedDim dim : used)
    size *= dim.size;
  return StridedDim{size, used.back().stride};
}

/// The buffer an operand is a rank-3 reshape of, and which of that buffer's dimensions
/// each of the operand's three gathers.
struct ReshapedOperand {
  Value buffer;
  SmallVector<SmallVector<int64_t>> groups;
};

/// Walks `operand` back through collapse_shape and expand_shape ops that only add unit
/// dimensions, to the buffer it reshapes.
std::optional<ReshapedOperand> reshapeSource(Value operand) {
  auto type = cast<MemRefType>(operand.getType());
  ReshapedOperand result{operand, {}};
  for (int64_t d = 0; d < type.getRank(); ++d)
    result.groups.push_back({d});
  while (Operation *producer = result.buffer.getDefiningOp()) {
    if (auto collapse = dyn_cast<memref::CollapseShapeOp>(producer)) {
      SmallVector<ReassociationIndices> reassociation = collapse.getReassociationIndices();
      SmallVector<SmallVector<int64_t>> groups;
      for (const SmallVector<int64_t> &group : result.groups) {
        SmallVector<int64_t> &expanded = groups.emplace_back();
        for (int64_t d : group)
          llvm::append_range(expanded, reassociation[d]);
      }
      result = {collapse.getSrc(), std::move(groups)};
      continue;
    }
    if (auto expand = dyn_cast<memref::ExpandShapeOp>(producer)) {
      // Each source dimension becomes several, of which at most one is not a unit.
      ArrayRef<int64_t> shape = expand.getResultType().getShape();
      SmallVector<int64_t> sourceOf(shape.size());
      for (auto [source, group] : llvm::enumerate(expand.getReassociationIndices())) {
        if (llvm::count_if(group, [&](int64_t d) { return shape[d] != 1; }) > 1)
          return std::nullopt;
        for (int64_t d : group)
          sourceOf[d] = static_cast<int64_t>(source);
      }
      SmallVector<SmallVector<int64_t>> groups;
      for (const SmallVector<int64_t> &group : result.groups) {
        SmallVector<int64_t> &mapped = groups.emplace_back();
        for (int64_t d : group)
          if (shape[d] != 1 && !llvm::is_contained(mapped, sourceOf[d]))
            mapped.push_back(sourceOf[d]);
      }
      result = {expand.getSrc(), std::move(groups)};
      continue;
    }
    break;
  }
  return result;
}

Value rootAllocation(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewLikeOpInterface>())
    buffer = view.getViewSource();
  return buffer;
}

/// Whether an op in [from, to) of one block may write the allocation `root` or views of it.
bool mayWriteBetween(Operation *from, Operation *to, Value root) {
  for (Operation *op = from; op != to; op = op->getNextNode()) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      if (op->getNumRegions() || !isPure(op))
        return true;
      continue;
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &instance : instances) {
      if (!isa<MemoryEffects::Write, MemoryEffects::Free>(instance.getEffect()))
        continue;
      Value written = instance.getValue();
      if (!written || rootAllocation(written) == root)
        return true;
    }
  }
  return false;
}

/// A product operand as a strided view of the buffer the transpose reads: the three
/// dimensions of each element, the batch dimension as one or two strided parts.
struct OperandView {
  Value source;
  int64_t offset;
  SmallVector<StridedDim> batch; // outer part first; one entry when it merges
  StridedDim rows, cols;
  linalg::TransposeOp transpose;
  Value copy;             // the buffer the view replaces: the transpose's input or output
  linalg::FillOp zeroing; // for the result: the fill of `copy` the product accumulates into
};

/// The view of `source` (static strides) whose three dimensions gather the dimensions of
/// `groups` (size and stride in `source` each): rows and columns must merge into one
/// stride, the batch into one or two.
std::optional<OperandView> mergeGroups(Value source, ArrayRef<SmallVector<StridedDim>> groups) {
  auto type = cast<MemRefType>(source.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || ShapedType::isDynamic(offset))
    return std::nullopt;
  OperandView view{source, offset, {}, {}, {}, {}, {}, {}};
  std::optional<StridedDim> rows = merge(groups[1]), cols = merge(groups[2]);
  if (!rows || !cols)
    return std::nullopt;
  view.rows = *rows;
  view.cols = *cols;
  ArrayRef<StridedDim> batch = groups[0];
  if (std::optional<StridedDim> whole = merge(batch)) {
    view.batch = {*whole};
    return view;
  }
  for (size_t split = 1; split < batch.size(); ++split) {
    std::optional<StridedDim> outer = merge(batch.take_front(split));
    std::optional<StridedDim> inner = merge(batch.drop_front(split));
    if (outer && inner) {
      view.batch = {*outer, *inner};
      return view;
    }
  }
  return std::nullopt;
}

/// Whether `type` is a static shape with static strides.
bool hasStaticLayout(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  SmallVector<int64_t> strides;
  int64_t offset;
  return memref && memref.hasStaticShape() &&
         succeeded(memref.getStridesAndOffset(strides, offset)) &&
         !ShapedType::isDynamic(offset) && llvm::none_of(strides, ShapedType::isDynamic);
}

/// The (size, stride) of each dimension of `buffer` (static layout).
SmallVector<StridedDim> stridedDims(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  (void)type.getStridesAndOffset(strides, offset);
  return llvm::map_to_vector(llvm::seq<int64_t>(0, type.getRank()), [&](int64_t d) {
    return StridedDim{type.getDimSize(d), strides[d]};
  });
}

std::optional<OperandView> viewOfTransposedOperand(Value operand, linalg::BatchMatmulOp matmul) {
  std::optional<ReshapedOperand> reshaped = reshapeSource(operand);
  if (!reshaped || reshaped->groups.size() != 3)
    return std::nullopt;
  auto allocation = reshaped->buffer.getDefiningOp<memref::AllocOp>();
  if (!allocation)
    return std::nullopt;
  linalg::TransposeOp transpose;
  for (Operation *user : allocation->getUsers()) {
    auto candidate = dyn_cast<linalg::TransposeOp>(user);
    if (candidate && candidate.getInit() == allocation.getResult()) {
      if (transpose)
        return std::nullopt;
      transpose = candidate;
    }
  }
  if (!transpose || transpose->getBlock() != matmul->getBlock() ||
      !transpose->isBeforeInBlock(matmul))
    return std::nullopt;
  // Between the transpose and the product, neither the source nor the copy may change (an
  // op writing the copy in place would make the product read more than the transpose).
  Value source = transpose.getInput();
  if (!hasStaticLayout(source.getType()) ||
      mayWriteBetween(transpose->getNextNode(), matmul, rootAllocation(source)) ||
      mayWriteBetween(transpose->getNextNode(), matmul, allocation.getResult()))
    return std::nullopt;
  // Dimension t of the transposed buffer is dimension permutation[t] of the source.
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  SmallVector<StridedDim> dims = stridedDims(source);
  SmallVector<SmallVector<StridedDim>> groups = llvm::map_to_vector(
      reshaped->groups, [&](ArrayRef<int64_t> group) {
        return llvm::map_to_vector(group, [&](int64_t t) { return dims[permutation[t]]; });
      });
  std::optional<OperandView> view = mergeGroups(source, groups);
  if (view) {
    view->transpose = transpose;
    view->copy = allocation.getResult();
  }
  return view;
}

/// The view of the buffer the product's result is transposed into, for a result buffer P
/// that a fill zeroes, the product accumulates into and reshapes lead to one transpose,
/// with nothing else reading or writing P. The destination must be an allocation (moved
/// up to the fill) or an argument of the function, not touched between the fill and the
/// transpose.
std::optional<OperandView> viewOfTransposedResult(linalg::BatchMatmulOp matmul) {
  Value product = matmul.getDpsInits()[0];
  auto allocation = product.getDefiningOp<memref::AllocOp>();
  if (!allocation || allocation->getBlock() != matmul->getBlock())
    return std::nullopt;
  linalg::FillOp zeroing;
  Operation *next = nullptr;
  for (Operation *user : allocation->getUsers()) {
    if (user == matmul)
      continue;
    auto fill = dyn_cast<linalg::FillOp>(user);
    if (fill && !zeroing && fill->getBlock() == matmul->getBlock() &&
        fill->isBeforeInBlock(matmul) && fill.getDpsInits()[0] == product) {
      zeroing = fill;
      continue;
    }
    if (next)
      return std::nullopt;
    next = user;
  }
  if (!zeroing || !next || zeroing->getNextNode() != matmul.getOperation())
    return std::nullopt;
  // The product's dimensions as lists of the current value's, through the reshapes.
  SmallVector<SmallVector<int64_t>> groups = {{0}, {1}, {2}};
  Value current = product;
  while (auto reshape = dyn_cast<memref::ExpandShapeOp>(next)) {
    SmallVector<ReassociationIndices> reassociation = reshape.getReassociationIndices();
    for (SmallVector<int64_t> &group : groups) {
      SmallVector<int64_t> expanded;
      for (int64_t d : group)
        llvm::append_range(expanded, reassociation[d]);
      group = std::move(expanded);
    }
    current = reshape.getResult();
    if (!current.hasOneUse())
      return std::nullopt;
    next = *current.getUsers().begin();
  }
  auto transpose = dyn_cast<linalg::TransposeOp>(next);
  if (!transpose || transpose.getInput() != current ||
      transpose->getBlock() != matmul->getBlock())
    return std::nullopt;
  Value destination = transpose.getInit();
  if (!hasStaticLayout(destination.getType()))
    return std::nullopt;
  auto argument = dyn_cast<BlockArgument>(destination);
  bool movable = destination.getDefiningOp<memref::AllocOp>() != nullptr;
  if (!movable && !(argument && argument.getOwner()->isEntryBlock()))
    return std::nullopt;
  // Nothing may touch the destination or a view of it between the fill and the transpose
  // (a use nested in a region counts where its ancestor in this block is).
  SmallVector<Value> aliases = {destination};
  while (!aliases.empty()) {
    Value alias = aliases.pop_back_val();
    for (Operation *user : alias.getUsers()) {
      if (isa<ViewLikeOpInterface>(user))
        llvm::append_range(aliases, user->getResults());
      Operation *ancestor = matmul->getBlock()->findAncestorOpInBlock(*user);
      if (ancestor && ancestor != transpose && zeroing->isBeforeInBlock(ancestor) &&
          ancestor->isBeforeInBlock(transpose))
        return std::nullopt;
    }
  }
  // Dimension j of the transposed input is dimension i of the destination where
  // permutation[i] == j.
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  SmallVector<StridedDim> dims = stridedDims(destination);
  SmallVector<SmallVector<StridedDim>> strided = llvm::map_to_vector(
      groups, [&](ArrayRef<int64_t> group) {
        return llvm::map_to_vector(group, [&](int64_t j) {
          return dims[llvm::find(permutation, j) - permutation.begin()];
        });
      });
  std::optional<OperandView> view = mergeGroups(destination, strided);
  if (view) {
    view->transpose = transpose;
    view->copy = product;
    view->zeroing = zeroing;
  }
  return view;
}

/// `view` with the batch dimension `batch` at `offset` elements into its source's
/// allocation (a constant or an index value): a rank-3 reinterpret_cast.
Value buildView(OpBuilder &b, Location loc, const OperandView &view, StridedDim batch,
                OpFoldResult offset) {
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(batch.size), b.getIndexAttr(view.rows.size),
                                     b.getIndexAttr(view.cols.size)};
  SmallVector<OpFoldResult> strides = {b.getIndexAttr(batch.stride),
                                       b.getIndexAttr(view.rows.stride),
                                       b.getIndexAttr(view.cols.stride)};
  return memref::ReinterpretCastOp::create(b, loc, view.source, offset, sizes, strides);
}

/// Part `index` of `inner` batch entries of a rank-3 operand that has no view (a subview).
Value batchPart(OpBuilder &b, Location loc, Value operand, int64_t inner, Value index) {
  auto type = cast<MemRefType>(operand.getType());
  Value begin = arith::MulIOp::create(b, loc, index, arith::ConstantIndexOp::create(b, loc, inner));
  SmallVector<OpFoldResult> offsets = {begin, b.getIndexAttr(0), b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(inner), b.getIndexAttr(type.getDimSize(1)),
                                     b.getIndexAttr(type.getDimSize(2))};
  SmallVector<OpFoldResult> steps(3, b.getIndexAttr(1));
  return memref::SubViewOp::create(b, loc, operand, offsets, sizes, steps);
}

/// Erases `copy`'s reshapes, transpose and allocation when nothing else reads them (for a
/// result, the transpose and the fill always: the view replaced them).
void eraseUnusedCopy(const OperandView &view) {
  if (view.zeroing) {
    view.transpose->erase();
    view.zeroing->erase();
  }
  std::function<bool(Operation *)> eraseIfDead = [&](Operation *op) {
    if (!isa<memref::CollapseShapeOp, memref::ExpandShapeOp>(op))
      return false;
    for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
      if (!eraseIfDead(user))
        return false;
    op->erase();
    return true;
  };
  for (Operation *user : llvm::make_early_inc_range(view.copy.getUsers()))
    eraseIfDead(user);
  if (view.zeroing ? !view.copy.use_empty() : !view.copy.hasOneUse())
    return;
  if (!view.zeroing)
    view.transpose->erase();
  view.copy.getDefiningOp()->erase();
}

/// Reads the operands of `matmul` that are transposed copies in place (see the file
/// comment). Returns whether it changed anything.
bool readOperandsInPlace(linalg::BatchMatmulOp matmul) {
  if (!matmul.hasPureBufferSemantics() || matmul.hasUserDefinedMaps())
    return false;
  Value operands[3] = {matmul.getDpsInputs()[0], matmul.getDpsInputs()[1],
                       matmul.getDpsInits()[0]};
  for (Value operand : operands)
    if (!cast<MemRefType>(operand.getType()).hasStaticShape())
      return false;
  std::optional<OperandView> views[3] = {viewOfTransposedOperand(operands[0], matmul),
                                         viewOfTransposedOperand(operands[1], matmul),
                                         viewOfTransposedResult(matmul)};
  // One split of the batch for all: the first view's that has one.
  int64_t batch = cast<MemRefType>(operands[2].getType()).getDimSize(0);
  int64_t inner = batch;
  for (const std::optional<OperandView> &view : views)
    if (view && view->batch.size() == 2 && inner == batch)
      inner = view->batch[1].size;
  for (std::optional<OperandView> &view : views)
    if (view && view->batch.size() == 2 && view->batch[1].size != inner)
      view.reset();
  if (llvm::none_of(views, [](const auto &view) { return view.has_value(); }))
    return false;

  OpBuilder b(matmul);
  Location loc = matmul.getLoc();
  // The product accumulates into the destination, zeroed where the copy was.
  if (views[2]) {
    linalg::FillOp fill = views[2]->zeroing;
    if (Operation *allocation = views[2]->source.getDefiningOp())
      if (allocation->getBlock() == matmul->getBlock() && fill->isBeforeInBlock(allocation))
        allocation->moveBefore(fill);
    OpBuilder zeroing(fill);
    linalg::FillOp::create(zeroing, loc, fill.getDpsInputs()[0], views[2]->source);
  }
  if (inner == batch) {
    for (auto [view, operand] : llvm::zip_equal(views, operands))
      if (view)
        operand = buildView(b, loc, *view, view->batch[0], b.getIndexAttr(view->offset));
    linalg::BatchMatmulOp::create(b, loc, ValueRange{operands[0], operands[1]},
                                  ValueRange{operands[2]});
  } else {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value outer = arith::ConstantIndexOp::create(b, loc, batch / inner);
    auto loop = scf::ForOp::create(b, loc, zero, outer, one);
    b.setInsertionPointToStart(loop.getBody());
    Value index = loop.getInductionVar();
    Value parts[3];
    for (auto [view, operand, part] : llvm::zip_equal(views, operands, parts)) {
      if (!view) {
        part = batchPart(b, loc, operand, inner, index);
        continue;
      }
      // The outer stride: that of the outer part, or inner entries of a merged batch.
      int64_t outerStride = view->batch.size() == 2 ? view->batch[0].stride
                                                    : view->batch[0].stride * inner;
      StridedDim innerDim = view->batch.back();
      innerDim.size = inner;
      Value offset = arith::AddIOp::create(
          b, loc, arith::ConstantIndexOp::create(b, loc, view->offset),
          arith::MulIOp::create(b, loc, index,
                                arith::ConstantIndexOp::create(b, loc, outerStride)));
      part = buildView(b, loc, *view, innerDim, offset);
    }
    linalg::BatchMatmulOp::create(b, loc, ValueRange{parts[0], parts[1]}, ValueRange{parts[2]});
  }
  matmul->erase();
  for (const std::optional<OperandView> &view : views)
    if (view)
      eraseUnusedCopy(*view);
  return true;
}

struct GemmOperandViewsPass
    : mtc::codegen::impl::GemmOperandViewsPassBase<GemmOperandViewsPass> {
  void runOnOperation() override {
    SmallVector<linalg::BatchMatmulOp> matmuls;
    getOperation().walk([&](linalg::BatchMatmulOp op) {
      // f32 only: the bf16/f16 operands of mixed-precision products are widened into f32
      // copies by batch-matmul-to-calls, which read the transposes' results as they are.
      if (llvm::all_of(op->getOperandTypes(), [](Type type) {
            return cast<ShapedType>(type).getElementType().isF32();
          }))
        matmuls.push_back(op);
    });
    for (linalg::BatchMatmulOp matmul : matmuls)
      readOperandsInPlace(matmul);
  }
};

} // namespace
