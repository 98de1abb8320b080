//===- MTOps.h - mt dialect operations --------------------------*- C++ -*-===//

#ifndef MTC_DIALECTS_MT_IR_MTOPS_H
#define MTC_DIALECTS_MT_IR_MTOPS_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mtc::mt::OpTrait {

/// An op with no operands whose value is fixed for one call of the function it is in (a
/// constant, positions, the loss scale): a pass that moves computations between functions
/// (pipeline chunks, the backward) recomputes it where it is used rather than passing it,
/// and it costs nothing.
template <typename ConcreteType>
class CallConstant : public mlir::OpTrait::TraitBase<ConcreteType, CallConstant> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return mlir::OpTrait::impl::verifyZeroOperands(op);
  }
};

} // namespace mtc::mt::OpTrait

#define GET_OP_CLASSES
#include "dialects/mt/IR/MTOps.h.inc"

#endif // MTC_DIALECTS_MT_IR_MTOPS_H
