//===- PartitionOpInterface.h - partition rules of mt ops -------*- C++ -*-===//
//
// What a partition rule sees and decides (PartitionOpInterface.td): layouts being decided
// (`Layout`), the rule's decision (`PartitionRule`), the spec and the helpers every rule
// shares (`PartitionContext`), and the laid-out types of a function's values
// (`ValueLayouts`).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_SHARDING_PARTITIONOPINTERFACE_H
#define MTC_COMPILER_SHARDING_PARTITIONOPINTERFACE_H

#include "compiler/sharding/Layout.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace mtc::sharding {

/// The mesh axes splitting one dimension, outermost first: `seq = [cp, tp]` is split into
/// cp parts, each of them into tp parts (rank (c, t) holds part c * tp + t).
using Axes = llvm::SmallVector<std::string, 1>;

/// A layout being decided: the axes splitting each dimension (an axis splits at most one
/// dimension of a tensor) and the axes over which values are partial sums.
struct Layout {
  llvm::StringMap<Axes> split;
  llvm::SmallVector<std::string, 1> partial;

  static Layout of(mtp::ShardedTensorType type);
  /// The splits of `split` on dimensions of `type`, no partial sums.
  static Layout restrict(const llvm::StringMap<Axes> &split, mt::NamedTensorType type);

  /// The axes splitting `dim`, outermost first; empty where it is whole.
  llvm::ArrayRef<std::string> axesOf(llvm::StringRef dim) const;
  /// Whether `axis` splits some dimension.
  bool splits(llvm::StringRef axis) const;
  /// Cuts `dim`'s split before `axis` (the axes inside it go too: they split parts of
  /// `axis`'s); nothing when `axis` does not split `dim`.
  void truncate(llvm::StringRef dim, llvm::StringRef axis);
  bool isPartial() const { return !partial.empty(); }
};

/// Whether `axes` extends `prefix` (or equals it): `[cp, tp]` extends `[cp]` and `[]`.
bool extends(llvm::ArrayRef<std::string> axes, llvm::ArrayRef<std::string> prefix);

/// A rule's decision for one op: the layout each operand is brought to and each result's.
struct PartitionRule {
  llvm::SmallVector<Layout> operands;
  llvm::SmallVector<Layout> results;

  /// Whole operands, whole results: the rule of ops without a sharded form.
  static PartitionRule replicated(mlir::Operation *op);
};

/// The spec a module is partitioned for, and what rules compute from it.
class PartitionContext {
public:
  PartitionContext(mlir::MLIRContext *context, const ShardingSpec &spec)
      : context(context), spec(spec) {}

  const ShardingSpec &getSpec() const { return spec; }
  mlir::MLIRContext *getContext() const { return context; }

  /// The laid-out type of `global` under `layout`.
  mtp::ShardedTensorType build(mt::NamedTensorType global, const Layout &layout) const;
  mtp::ShardedTensorType replicated(mlir::Type global) const;
  int64_t axisSize(llvm::StringRef axis) const;
  /// Whether `type` has `dim` and `axis` divides it.
  bool divisible(mt::NamedTensorType type, llvm::StringRef dim, llvm::StringRef axis) const;
  /// Whether `type` has `dim` and the product of the sizes of `axes` divides it.
  bool splittable(mt::NamedTensorType type, llvm::StringRef dim,
                  llvm::ArrayRef<std::string> axes) const;
  /// Which split survives when `axis` would split two dimensions of a tensor: a dimension
  /// the spec maps to `axis` (the layout's, and the data's: batch over ep, seq over cp),
  /// then `seq` over tp under sequence parallelism, then the rest.
  int priority(llvm::StringRef dim, llvm::StringRef axis) const;
  /// The axes the data split `dim` over from the entry on (`seq = [cp]` under cp; empty
  /// where none does).
  Axes dataAxes(llvm::StringRef dim) const;

  /// How a partial operand of global type `type` is summed when its consumer cannot take
  /// partial sums: reduce-scatter along a dimension of `wanted` (the splits the consumer's
  /// other operands have) whose split is the operand's and the partial axis inside it, or,
  /// with sequence parallelism, along `seq` (tp inside the data's axes: `[cp, tp]` under
  /// cp); all-reduce otherwise.
  Layout resolvePartial(mt::NamedTensorType type, const Layout &layout,
                        const llvm::StringMap<Axes> &wanted) const;

  /// `layout` (of a value of global type `type`) with its partial sums over an axis that
  /// splits a dimension of the data (`seq` over cp) reduce-scattered along that dimension
  /// where `type` has it: the key and value gradients of context-parallel attention, summed
  /// over the ranks' query parts, go back to this rank's part of the sequence before
  /// anything computes on them (rather than every rank computing on the whole sequence).
  /// Other partial sums stay.
  Layout scatterDataPartials(mt::NamedTensorType type, const Layout &layout) const;

  /// Splits of the union of `layouts` restricted to the dimensions `dims`: a dimension's
  /// split is the longest of the operands' where each extends the other, the first
  /// operand's otherwise. Each axis splits one dimension: on a clash the lower-priority
  /// dimension's split is cut before the axis (Layout::truncate). Axes in `reserved`
  /// (partial sums the result keeps) split nothing.
  llvm::StringMap<Axes> unionSplits(llvm::ArrayRef<Layout> layouts,
                                    llvm::ArrayRef<llvm::StringRef> dims,
                                    llvm::ArrayRef<std::string> reserved) const;

private:
  mlir::MLIRContext *context;
  const ShardingSpec &spec;
};

/// The laid-out type of every value of the function being partitioned.
class ValueLayouts {
public:
  mtp::ShardedTensorType lookup(mlir::Value value) const { return layouts.lookup(value); }
  bool contains(mlir::Value value) const { return layouts.contains(value); }
  void set(mlir::Value value, mtp::ShardedTensorType layout) { layouts[value] = layout; }

private:
  llvm::DenseMap<mlir::Value, mtp::ShardedTensorType> layouts;
};

/// The names of `type`'s dimensions, in order.
llvm::SmallVector<llvm::StringRef> dimNames(mt::NamedTensorType type);

/// Attaches the partition rules of the `mt` ops (PartitionRules.cpp, and attention's,
/// registerAttentionPartitionRules).
void registerPartitionRules(mlir::DialectRegistry &registry);
/// Attaches ring attention's rules to `mt.attention` and `mt.attention_grad`
/// (AttentionPartition.cpp).
void registerAttentionPartitionRules(mlir::DialectRegistry &registry);

} // namespace mtc::sharding

#include "compiler/sharding/PartitionOpInterface.h.inc"

#endif // MTC_COMPILER_SHARDING_PARTITIONOPINTERFACE_H
