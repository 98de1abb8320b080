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
  for (NamedAttribute entry : type.getSplit()) {
    SmallVector<StringRef> axes = type.getSplitAxes(entry.getName());
    if (!axes.empty())
      layout.split[entry.getName().getValue()] = axes.back().str();
  }
  for (StringRef axis : type.getPartialAxes())
    layout.partial.push_back(axis.str());
  return layout;
}

Layout Layout::restrict(const llvm::StringMap<std::string> &split, NamedTensorType type) {
  Layout layout;
  for (const auto &entry : split)
    if (type.hasDim(entry.first()))
      layout.split[entry.first()] = entry.second;
  return layout;
}

std::optional<StringRef> Layout::axisOf(StringRef dim) const {
  auto it = split.find(dim);
  if (it == split.end())
    return std::nullopt;
  return StringRef(it->second);
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
  for (const mt::NamedDim &dim : global.getDims())
    if (auto axis = layout.axisOf(dim.name.getValue()))
      split.set(dim.name, ArrayAttr::get(context, {StringAttr::get(context, *axis)}));
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
  return type.hasDim(dim) && type.getDimSize(dim) % axisSize(axis) == 0;
}

int PartitionContext::priority(StringRef dim) const {
  if (spec.dimAxis.count(dim) || spec.activationAxis.count(dim))
    return 2;
  return dim == spec.sequenceDim ? 1 : 0;
}

Layout PartitionContext::resolvePartial(NamedTensorType type, const Layout &layout,
                                        const llvm::StringMap<std::string> &wanted) const {
  Layout result = layout;
  result.partial.clear();
  for (const std::string &axis : layout.partial) {
    std::optional<StringRef> along;
    for (const auto &entry : wanted)
      if (entry.second == axis && !layout.axisOf(entry.first()) &&
          divisible(type, entry.first(), axis))
        along = entry.first();
    if (!along && !spec.sequenceDim.empty() && axis == "tp" &&
        !layout.axisOf(spec.sequenceDim) && divisible(type, spec.sequenceDim, axis))
      along = spec.sequenceDim;
    bool used = llvm::any_of(result.split, [&](const auto &e) { return e.second == axis; });
    if (along && !used)
      result.split[*along] = axis;
  }
  return result;
}

Layout PartitionContext::scatterDataPartials(NamedTensorType type, const Layout &layout) const {
  Layout result = layout;
  for (const auto &entry : spec.activationAxis) {
    StringRef dim = entry.first(), axis = entry.second;
    bool used = llvm::any_of(result.split, [&](const auto &e) { return e.second == axis; });
    if (!llvm::is_contained(result.partial, axis) || used || !divisible(type, dim, axis))
      continue;
    llvm::erase(result.partial, axis);
    result.split[dim] = axis.str();
  }
  return result;
}

llvm::StringMap<std::string> PartitionContext::unionSplits(ArrayRef<Layout> layouts,
                                                           ArrayRef<StringRef> dims,
                                                           ArrayRef<std::string> reserved) const {
  llvm::StringMap<std::string> split;
  for (const Layout &layout : layouts)
    for (const auto &entry : layout.split)
      if (llvm::is_contained(dims, entry.first()) && !split.count(entry.first()))
        split[entry.first()] = entry.second;
  for (const std::string &axis : reserved)
    for (auto it = split.begin(); it != split.end();)
      if (it->second == axis)
        split.erase(it++);
      else
        ++it;
  // One dimension per axis: keep the highest priority (the first on ties).
  llvm::StringMap<std::string> winner; // axis -> dim
  for (StringRef dim : dims) {
    auto it = split.find(dim);
    if (it == split.end())
      continue;
    auto [w, inserted] = winner.try_emplace(it->second, dim.str());
    if (!inserted && priority(dim) > priority(w->second))
      w->second = dim.str();
  }
  llvm::StringMap<std::string> result;
  for (StringRef dim : dims)
    if (auto it = split.find(dim); it != split.end() && winner[it->second] == dim)
      result[dim] = it->second;
  return result;
}
