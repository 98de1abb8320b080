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

/// A layout being decided: the axis splitting each dimension (at most one per dimension:
/// the specs never split one dimension over both `dp` and `tp`) and the axes over which
/// values are partial sums.
struct Layout {
  llvm::StringMap<std::string> split;
  llvm::SmallVector<std::string, 1> partial;

  static Layout of(mtp::ShardedTensorType type);
  /// The splits of `split` on dimensions of `type`, no partial sums.
  static Layout restrict(const llvm::StringMap<std::string> &split, mt::NamedTensorType type);

  std::optional<llvm::StringRef> axisOf(llvm::StringRef dim) const;
  bool isPartial() const { return !partial.empty(); }
};

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
  /// Which split survives when one axis would split two dimensions of a tensor: layout
  /// dimensions (and the data's: batch under ep, seq under cp), then `seq` under sequence
  /// parallelism, then the rest.
  int priority(llvm::StringRef dim) const;

  /// How a partial operand of global type `type` is summed when its consumer cannot take
  /// partial sums: reduce-scatter along a dimension of `wanted` (the splits the consumer's
  /// other operands have) or, with sequence parallelism, along `seq`; all-reduce otherwise.
  Layout resolvePartial(mt::NamedTensorType type, const Layout &layout,
                        const llvm::StringMap<std::string> &wanted) const;

  /// `layout` (of a value of global type `type`) with its partial sums over an axis that
  /// splits a dimension of the data (`seq` over cp) reduce-scattered along that dimension
  /// where `type` has it: the key and value gradients of context-parallel attention, summed
  /// over the ranks' query parts, go back to this rank's part of the sequence before
  /// anything computes on them (rather than every rank computing on the whole sequence).
  /// Other partial sums stay.
  Layout scatterDataPartials(mt::NamedTensorType type, const Layout &layout) const;

  /// Splits of the union of `layouts` restricted to the dimensions `dims` (first operand
  /// first), one axis per tensor: on a clash the lower-priority dimension loses. Axes in
  /// `reserved` (partial sums the result keeps) split nothing.
  llvm::StringMap<std::string> unionSplits(llvm::ArrayRef<Layout> layouts,
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
