//===- MTOps.h - mt dialect operations --------------------------*- C++ -*-===//

#ifndef MTC_DIALECTS_MT_IR_MTOPS_H
#define MTC_DIALECTS_MT_IR_MTOPS_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/mt/IR/MTOps.h.inc"

#endif // MTC_DIALECTS_MT_IR_MTOPS_H
