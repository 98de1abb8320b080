/*===- DropoutKeep.c - Philox's dropout decision for the x86 kernels -------===*
 *
 * Compiled by clang to LLVM bitcode when mtc is built and linked into every x86 kernel
 * object (CPUCodegen.cpp), so that the dropout kernels decide each element with the same
 * code as the runtime and the interpreter (runtime/support/Philox.h) and LLVM can inline
 * and vectorise it; a call per element into the runtime was a quarter of a training step.
 * See kDropoutKeepFunction in MTToLinalg.h for the contract.
 *
 *===----------------------------------------------------------------------===*/

/* The ABI declares the function: a definition that differs does not compile. */
#include "runtime/exec/KernelABI.h"

int32_t mtc_dropout_keep_element(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step,
                                 float keep_prob) {
  return mtc_dropout_keep(seed, tensor_id, index, step, keep_prob);
}
