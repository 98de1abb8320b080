//===- MTPDialect.h - mtp dialect, attributes and types ----------*- C++ -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPDIALECT_H
#define MTC_DIALECTS_MTP_IR_MTPDIALECT_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/mtp/IR/MTPEnums.h.inc"

// Before the dialect, whose helper for `mtp.mesh` reads a MeshAttr.
#define GET_ATTRDEF_CLASSES
#include "dialects/mtp/IR/MTPAttrs.h.inc"

#include "dialects/mtp/IR/MTPDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/mtp/IR/MTPTypes.h.inc"

namespace mtc::mtp {

/// The `mtp.layout` of `op` (see the dialect's `layout` attribute): where this rank's part
/// of its tensor lies in the whole; null when it has none.
ShardedTensorType getLocalLayout(mlir::Operation *op);
void setLocalLayout(mlir::Operation *op, ShardedTensorType layout);

} // namespace mtc::mtp

#endif // MTC_DIALECTS_MTP_IR_MTPDIALECT_H
