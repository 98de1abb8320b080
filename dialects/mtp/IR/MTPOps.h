//===- MTPOps.h - mtp dialect operations -------------------------*- C++ -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPOPS_H
#define MTC_DIALECTS_MTP_IR_MTPOPS_H

#include "dialects/mtp/IR/MTPDialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/mtp/IR/MTPOps.h.inc"

#endif // MTC_DIALECTS_MTP_IR_MTPOPS_H
