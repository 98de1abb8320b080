//===- ModulePartition.cpp - An LLVM module cut into independently compiled parts -===//

#include "compiler/codegen/CPU/ModulePartition.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <algorithm>

using namespace llvm;

namespace {

/// Whether the object of every part may define `value`: a local symbol (each part gets its
/// own copy) or one the linker merges (linkonce/weak/common).
bool copiedIntoEveryPart(const GlobalValue &value) {
  return value.hasLocalLinkage() || value.isWeakForLinker();
}

/// Deletes the definitions of `module` that nothing uses and no other object may need (local
/// or linkonce), until none is left: the copies a part does not need (an outlined OpenMP
/// region of another part's function).
void eraseUnusedCopies(Module &module) {
  bool erased = true;
  while (erased) {
    erased = false;
    for (Function &function : make_early_inc_range(module.functions()))
      if (!function.isDeclaration() && function.isDiscardableIfUnused() && function.use_empty()) {
        function.eraseFromParent();
        erased = true;
      }
    for (GlobalVariable &global : make_early_inc_range(module.globals()))
      if (!global.isDeclaration() && global.isDiscardableIfUnused() && global.use_empty()) {
        global.eraseFromParent();
        erased = true;
      }
  }
}

} // namespace

SmallVector<std::unique_ptr<Module>> mtc::codegen::partitionModule(const Module &module,
                                                                   unsigned maxParts) {
  SmallVector<const Function *> external;
  for (const Function &function : module.functions())
    if (!function.isDeclaration() && !copiedIntoEveryPart(function))
      external.push_back(&function);
  unsigned parts = std::clamp<unsigned>(static_cast<unsigned>(external.size()), 1,
                                        std::max(1u, maxParts));

  // Largest first, each to the least loaded part; ties in module order, so the cut is a
  // function of the module alone.
  auto bySize = llvm::to_vector(llvm::seq<unsigned>(0, external.size()));
  llvm::sort(bySize, [&](unsigned a, unsigned b) {
    unsigned sizeA = external[a]->getInstructionCount(), sizeB = external[b]->getInstructionCount();
    return sizeA != sizeB ? sizeA > sizeB : a < b;
  });
  DenseMap<const Function *, unsigned> partOf;
  SmallVector<uint64_t> load(parts, 0);
  for (unsigned index : bySize) {
    const Function *function = external[index];
    unsigned least = std::min_element(load.begin(), load.end()) - load.begin();
    partOf[function] = least;
    load[least] += function->getInstructionCount() + 1;
  }

  SmallVector<std::unique_ptr<Module>> result;
  for (unsigned part = 0; part < parts; ++part) {
    ValueToValueMapTy map;
    std::unique_ptr<Module> clone = CloneModule(module, map, [&](const GlobalValue *value) {
      if (copiedIntoEveryPart(*value))
        return true;
      if (const auto *function = dyn_cast<Function>(value))
        return partOf.lookup(function) == part;
      // External global variables and aliases are defined once, in part 0.
      return part == 0;
    });
    eraseUnusedCopies(*clone);
    result.push_back(std::move(clone));
  }
  return result;
}
