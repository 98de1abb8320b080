//===- MTSDialect.h - mts dialect --------------------------------*- C++ -*-===//

#ifndef MTC_DIALECTS_MTS_IR_MTSDIALECT_H
#define MTC_DIALECTS_MTS_IR_MTSDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/mts/IR/MTSDialect.h.inc"

#endif // MTC_DIALECTS_MTS_IR_MTSDIALECT_H
