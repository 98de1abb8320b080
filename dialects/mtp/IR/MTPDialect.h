//===- MTPDialect.h - mtp dialect, attributes and types ----------*- C++ -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPDIALECT_H
#define MTC_DIALECTS_MTP_IR_MTPDIALECT_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "dialects/mtp/IR/MTPDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/mtp/IR/MTPAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/mtp/IR/MTPTypes.h.inc"

#endif // MTC_DIALECTS_MTP_IR_MTPDIALECT_H
