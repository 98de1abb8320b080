//===- PartitionOpInterface.cpp - what partition rules share --------------===//

#include "compiler/sharding/PartitionOpInterface.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::sharding;
using mt::NamedTensorType;
using mtp::ShardedTensorType;

#include "compiler/sharding/PartitionOpInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// Layout, PartitionRule
//===----------------------------------------------------------------------===//

Layout Layout::of(ShardedTensorType type) {
  Layout layout;
  for (NamedAttribute entry : type.getSplit())
    for (StringRef axis : type.getSplitAxes(entry.getName()))
      layout.split[entry.getName().getValue()].push_back(axis.str());
  for (StringRef axis : type.getPartialAxes())
    layout.partial.push_back(axis.str());
  return layout;
}

Layout Layout::restrict(const llvm::StringMap<Axes> &split, NamedTensorType type) {
  Layout layout;
  for (const auto &entry : split)
    if (type.hasDim(entry.first()))
      layout.split[entry.first()] = entry.second;
  return layout;
}

ArrayRef<std::string> Layout::axesOf(StringRef dim) const {
  auto it = split.find(dim);
  if (it == split.end())
    return {};
  return it->second;
}

bool Layout::splits(StringRef axis) const {
  return llvm::any_of(split, [&](const auto &e) { return llvm::is_contained(e.second, axis); });
}

void Layout::truncate(StringRef dim, StringRef axis) {
  auto it = split.find(dim);
  if (it == split.end())
    return;
  const auto *at = llvm::find(it->second, axis);
  it->second.erase(at, it->second.end());
  if (it->second.empty())
    split.erase(it);
}

bool sharding::extends(ArrayRef<std::string> axes, ArrayRef<std::string> prefix) {
  return prefix.size() <= axes.size() && llvm::equal(prefix, axes.take_front(prefix.size()));
}

PartitionRule PartitionRule::replicated(Operation *op) {
  PartitionRule rule;
  rule.operands.resize(op->getNumOperands());
  rule.results.resize(op->getNumResults());
  return rule;
}

SmallVector<StringRef> sharding::dimNames(NamedTensorType type) {
  SmallVector<StringRef> names;
  for (StringAttr name : type.getDimNames())
    names.push_back(name.getValue());
  return names;
}

//===----------------------------------------------------------------------===//
// PartitionContext
//===----------------------------------------------------------------------===//

ShardedTensorType PartitionContext::build(NamedTensorType global, const Layout &layout) const {
  NamedAttrList split;
  for (const mt::NamedDim &dim : global.getDims()) {
    ArrayRef<std::string> axes = layout.axesOf(dim.name.getValue());
    if (axes.empty())
      continue;
    SmallVector<Attribute> names = llvm::map_to_vector(
        axes, [&](const std::string &axis) -> Attribute { return StringAttr::get(context, axis); });
    split.set(dim.name, ArrayAttr::get(context, names));
  }
  SmallVector<Attribute> partial;
  for (const std::string &axis : layout.partial)
    partial.push_back(StringAttr::get(context, axis));
  return ShardedTensorType::get(context, global, spec.mesh, split.getDictionary(context),
                                ArrayAttr::get(context, partial));
}

ShardedTensorType PartitionContext::replicated(Type global) const {
  return build(cast<NamedTensorType>(global), Layout{});
}

int64_t PartitionContext::axisSize(StringRef axis) const {
  return *spec.mesh.getAxisSize(axis);
}

bool PartitionContext::divisible(NamedTensorType type, StringRef dim, StringRef axis) const {
  return type.hasDim(dim) && type.getDimSize(dim) % spec.mesh.getPieces(axis) == 0;
}

bool PartitionContext::splittable(NamedTensorType type, StringRef dim,
                                  ArrayRef<std::string> axes) const {
  int64_t parts = 1;
  for (const std::string &axis : axes)
    parts *= spec.mesh.getPieces(axis);
  return type.hasDim(dim) && type.getDimSize(dim) % parts == 0;
}

int PartitionContext::priority(StringRef dim, StringRef axis) const {
  auto it = spec.dimAxis.find(dim);
  if ((it != spec.dimAxis.end() && it->second == axis) || llvm::is_contained(dataAxes(dim), axis))
    return 2;
  return dim == spec.sequenceDim && axis == "tp" ? 1 : 0;
}

Axes PartitionContext::dataAxes(StringRef dim) const {
  auto it = spec.activationAxes.find(dim);
  if (it == spec.activationAxes.end())
    return {};
  return it->second;
}

Layout PartitionContext::resolvePartial(NamedTensorType type, const Layout &layout,
                                        const llvm::StringMap<Axes> &wanted) const {
  Layout result = layout;
  result.partial.clear();
  for (const std::string &axis : layout.partial) {
    // A dimension whose wanted split is this one's and `axis` inside it.
    std::optional<StringRef> along;
    for (const auto &entry : wanted) {
      ArrayRef<std::string> want = entry.second, have = layout.axesOf(entry.first());
      if (!want.empty() && want.back() == axis && llvm::equal(have, want.drop_back()) &&
          splittable(type, entry.first(), want))
        along = entry.first();
    }
    // Sequence parallelism: tp inside the sequence's data split.
    if (!along && !spec.sequenceDim.empty() && axis == "tp") {
      Axes seq = dataAxes(spec.sequenceDim);
      seq.push_back(axis);
      if (llvm::equal(layout.axesOf(spec.sequenceDim), ArrayRef(seq).drop_back()) &&
          splittable(type, spec.sequenceDim, seq))
        along = spec.sequenceDim;
    }
    if (along && !result.splits(axis))
      result.split[*along].push_back(axis);
  }
  return result;
}

Layout PartitionContext::scatterDataPartials(NamedTensorType type, const Layout &layout) const {
  Layout result = layout;
  for (const auto &entry : spec.activationAxes) {
    StringRef dim = entry.first();
    ArrayRef<std::string> axes = entry.second;
    // The data's axes are the outermost of its dimension, in their order: an axis takes
    // the dimension split over the data's axes before it (whole for the first).
    for (size_t i = 0; i < axes.size(); ++i) {
      const std::string &axis = axes[i];
      if (!llvm::is_contained(result.partial, axis) || result.splits(axis) ||
          !llvm::equal(result.axesOf(dim), axes.take_front(i)) ||
          !splittable(type, dim, axes.take_front(i + 1)))
        continue;
      llvm::erase(result.partial, axis);
      result.split[dim].push_back(axis);
    }
  }
  return result;
}

llvm::StringMap<Axes> PartitionContext::unionSplits(ArrayRef<Layout> layouts,
                                                    ArrayRef<StringRef> dims,
                                                    ArrayRef<std::string> reserved) const {
  Layout split;
  for (const Layout &layout : layouts)
    for (const auto &entry : layout.split)
      if (llvm::is_contained(dims, entry.first())) {
        // The longer split where one extends the other (a slice), the first otherwise.
        auto [it, inserted] = split.split.try_emplace(entry.first(), entry.second);
        if (!inserted && extends(entry.second, it->second))
          it->second = entry.second;
      }
  for (const std::string &axis : reserved)
    for (StringRef dim : dims)
      split.truncate(dim, axis);
  // One dimension per axis: the highest priority keeps it (the first on ties); the others
  // are cut before it.
  llvm::StringMap<std::string> winner; // axis -> dim
  for (StringRef dim : dims)
    for (const std::string &axis : split.axesOf(dim)) {
      auto [w, inserted] = winner.try_emplace(axis, dim.str());
      if (!inserted && priority(dim, axis) > priority(w->second, axis))
        w->second = dim.str();
    }
  for (const auto &entry : winner)
    for (StringRef dim : dims)
      if (dim != entry.second)
        split.truncate(dim, entry.first());
  llvm::StringMap<Axes> result;
  for (StringRef dim : dims)
    if (ArrayRef<std::string> axes = split.axesOf(dim); !axes.empty())
      result[dim] = Axes(axes.begin(), axes.end());
  return result;
}
