//===- Tensor.cpp - host tensors and layout helpers of the interpreter ----===//

#include "compiler/interpreter/OpEval.h"

#include "mlir/IR/Location.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cmath>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

Tensor::Tensor(mt::NamedTensorType type)
    : type(type), data(static_cast<size_t>(type.getNumElements()), 0.0) {}

Tensor::Tensor(mt::NamedTensorType type, std::vector<double> data)
    : type(type), data(std::move(data)) {}

Tensor Tensor::scalar(Type elementType, double value) {
  return Tensor(mt::NamedTensorType::getScalar(elementType), {value});
}

SmallVector<int64_t> Tensor::getStrides() const {
  ArrayRef<int64_t> sizes = type.getDimSizes();
  SmallVector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;)
    strides[d - 1] = strides[d] * sizes[d];
  return strides;
}

std::optional<int64_t> Tensor::offsetOf(ArrayRef<NamedIndex> coords) const {
  if (coords.size() != type.getRank())
    return std::nullopt;
  SmallVector<int64_t> strides = getStrides();
  SmallVector<bool> seen(type.getRank(), false);
  int64_t offset = 0;
  for (const NamedIndex &coord : coords) {
    std::optional<unsigned> dim = type.getDimIndex(coord.dim);
    if (!dim || seen[*dim] || coord.index < 0 || coord.index >= type.getDimSizes()[*dim])
      return std::nullopt;
    seen[*dim] = true;
    offset += coord.index * strides[*dim];
  }
  return offset;
}

double &Tensor::at(ArrayRef<NamedIndex> coords) {
  std::optional<int64_t> offset = offsetOf(coords);
  assert(offset && "invalid coordinates for this tensor");
  return data[*offset];
}

double Tensor::at(ArrayRef<NamedIndex> coords) const {
  return const_cast<Tensor *>(this)->at(coords);
}

SmallVector<int64_t> Tensor::coordsOf(int64_t offset) const {
  ArrayRef<int64_t> sizes = type.getDimSizes();
  SmallVector<int64_t> coords(sizes.size(), 0);
  for (size_t d = sizes.size(); d-- > 0;) {
    coords[d] = offset % sizes[d];
    offset /= sizes[d];
  }
  return coords;
}

Expected<Tensor> mtc::interp::reorder(const Tensor &tensor, mt::NamedTensorType target) {
  mt::NamedTensorType source = tensor.type;
  if (!source || !target)
    return llvm::createStringError("cannot reorder a tensor without a type");
  bool sameDims = source.getRank() == target.getRank();
  for (const mt::NamedDim &dim : target.getDims())
    sameDims =
        sameDims && source.hasDim(dim.name) && source.getDimSize(dim.name.getValue()) == dim.size;
  if (tensor.getNumElements() != source.getNumElements())
    return llvm::createStringError(llvm::formatv("cannot reorder a tensor of {0} holding {1} "
                                                 "values instead of {2}",
                                                 source.dimsToString(), tensor.getNumElements(),
                                                 source.getNumElements())
                                       .str());
  if (!sameDims || source.getElementType() != target.getElementType())
    return llvm::createStringError(
        llvm::formatv("cannot reorder a tensor of {0} of {1} as {2} of {3}: the dimensions "
                      "or the element type differ",
                      source.dimsToString(), source.getElementType(), target.dimsToString(),
                      target.getElementType())
            .str());
  Tensor result(target);
  Space space = Space::of(target);
  int64_t next = 0;
  forEachPoint<1>(space, {stridesAlong(source, space)}, [&](const std::array<int64_t, 1> &at) {
    result.data[next++] = tensor.data[at[0]];
  });
  return result;
}

//===----------------------------------------------------------------------===//
// Layout helpers
//===----------------------------------------------------------------------===//

Space Space::of(mt::NamedTensorType type, ArrayRef<StringRef> except) {
  Space space;
  for (const mt::NamedDim &dim : type.getDims())
    if (!llvm::is_contained(except, dim.name.getValue()))
      space.append(dim.name.getValue(), dim.size);
  return space;
}

Space &Space::append(StringRef name, int64_t size) {
  names.push_back(name);
  sizes.push_back(size);
  return *this;
}

Space &Space::append(const Space &other) {
  for (auto [name, size] : llvm::zip(other.names, other.sizes))
    append(name, size);
  return *this;
}

int64_t Space::getNumElements() const {
  int64_t count = 1;
  for (int64_t size : sizes)
    count *= size;
  return count;
}

Strides eval::stridesAlong(mt::NamedTensorType type, const Space &space) {
  ArrayRef<int64_t> sizes = type.getDimSizes();
  SmallVector<int64_t, 6> own(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;)
    own[d - 1] = own[d] * sizes[d];
  Strides strides;
  for (StringRef name : space.names) {
    std::optional<unsigned> dim = type.getDimIndex(name);
    strides.push_back(dim ? own[*dim] : 0);
  }
  return strides;
}

Strides eval::counterAlong(StringRef dim, const Space &space) {
  Strides strides;
  for (StringRef name : space.names)
    strides.push_back(name == dim ? 1 : 0);
  return strides;
}

SmallVector<int64_t> eval::offsetsOf(mt::NamedTensorType type, const Space &space) {
  SmallVector<int64_t> offsets;
  offsets.reserve(space.getNumElements());
  forEachPoint<1>(space, {stridesAlong(type, space)},
                  [&](const std::array<int64_t, 1> &at) { offsets.push_back(at[0]); });
  return offsets;
}

TableRows TableRows::of(mt::NamedTensorType table, StringRef dim) {
  Space rowSpace = Space::of(table, {dim});
  Space dimSpace = Space().append(dim, table.getDimSize(dim));
  return {table.getDimSize(dim), stridesAlong(table, dimSpace)[0], offsetsOf(table, rowSpace)};
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

std::string eval::formatLocation(Location location) {
  if (auto fileLoc = location->findInstanceOf<FileLineColLoc>()) {
    StringRef file = fileLoc.getFilename().getValue();
    return llvm::formatv("{0}:{1}:{2}", file.empty() ? StringRef("<input>") : file,
                         fileLoc.getLine(), fileLoc.getColumn())
        .str();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  location.print(os);
  return text;
}

llvm::Error eval::opError(Operation *op, const Twine &message) {
  return llvm::createStringError(llvm::formatv("{0}: '{1}': {2}", formatLocation(op->getLoc()),
                                               op->getName().getStringRef(), message.str())
                                     .str());
}

Expected<int64_t> eval::readIndex(Operation *op, double value, int64_t size, StringRef what) {
  if (!(value >= 0 && value < static_cast<double>(size)) || value != std::floor(value)) {
    // Integral values (all that integer tensors hold) print as integers.
    std::string text = std::fabs(value) < 0x1p62 && value == std::floor(value)
                           ? std::to_string(static_cast<int64_t>(value))
                           : llvm::formatv("{0}", value).str();
    return opError(op, llvm::formatv("{0} {1} is out of range [0, {2})", what, text, size));
  }
  return static_cast<int64_t>(value);
}
