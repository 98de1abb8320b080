//===- ModulePartition.h - An LLVM module cut into independently compiled parts -*- C++ -*-===//
//
// The x86 step is one LLVM module whose functions are independent of each other but for
// calls between exported functions, so its O2 pipeline and code generation, most of the
// compile time, can run on several threads: each part holds the definitions of some of the
// module's external functions and declarations of the rest, and a copy of every local
// (internal or private) function and global it uses, such as the OpenMP regions outlined from
// its loops and their source-location strings. The parts' objects linked together define
// every external symbol exactly once, as the whole module's object does.
//
// The cut depends on the module only (function sizes, in module order), never on the number
// of threads, so a plan's object code is the same on every machine.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_CPU_MODULEPARTITION_H
#define MTC_COMPILER_CODEGEN_CPU_MODULEPARTITION_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/Module.h"

#include <memory>

namespace mtc::codegen {

/// Cuts `module` into at most `maxParts` parts (fewer when it has fewer external function
/// definitions; one part is a copy of the module less its unused local and linkonce
/// definitions). External definitions go to the part with the fewest instructions so far,
/// largest first; the external global variables to part 0.
/// `module` is left unchanged.
llvm::SmallVector<std::unique_ptr<llvm::Module>> partitionModule(const llvm::Module &module,
                                                                 unsigned maxParts);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_CPU_MODULEPARTITION_H
