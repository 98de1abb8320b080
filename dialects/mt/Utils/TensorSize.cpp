//===- TensorSize.cpp - the bytes of an mt tensor -------------------------===//

#include "dialects/mt/Utils/TensorSize.h"

#include "dialects/mt/IR/MTDialect.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

int64_t mtc::mt::getElementSizeInBytes(Type elementType) {
  if (!elementType.isIntOrFloat())
    return 0;
  return llvm::divideCeil(elementType.getIntOrFloatBitWidth(), 8);
}

int64_t mtc::mt::getSizeInBytes(Type type) {
  auto tensor = dyn_cast<NamedTensorType>(type);
  if (!tensor)
    return 0;
  return tensor.getNumElements() * getElementSizeInBytes(tensor.getElementType());
}
