//===- EarlyDeallocation.cpp - free temporaries after their last use ------===//
//
// Ownership-based deallocation frees every buffer at the end of the block that allocated
// it, so a step function holds all its temporaries until it returns: the workspace was the
// sum of the temporaries, five times the activations the backward needs. Here each
// unconditional `memref.dealloc` of a `memref.alloc` moves up to just after the last op of
// its block that uses the buffer or anything derived from it:
//
// - every result of type memref of an op that uses the buffer (views, casts, loops
//   carrying it, calls) counts as the buffer (a conservative alias closure that needs no
//   interface of the op);
// - an address taken with `memref.extract_aligned_pointer_as_index` counts too, with
//   everything computed from it (the runtime's collectives take addresses,
//   CollectivesToCalls.cpp), and a buffer it is stored into (the CUDA host code passes a
//   kernel its buffers' addresses in an array of words, mtc-gpu-launches-to-calls: the
//   launch reading the array is a use of the buffers);
// - a use nested in a region counts as its ancestor op in the block (a loop reading the
//   buffer keeps it until the loop ends).
//
// A buffer whose uses reach outside the block (a terminator, another block) keeps its
// place.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_EARLYDEALLOCATIONPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The last op of `block` that uses `buffer` or what derives from it, or null when a use
/// is not inside `block` or is its terminator.
Operation *lastUseInBlock(Value buffer, Block *block) {
  SmallVector<Value> worklist = {buffer};
  DenseSet<Value> seen = {buffer};
  Operation *last = nullptr;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    // Values that are not memrefs here derive from an address of the buffer.
    bool address = !isa<BaseMemRefType>(value.getType());
    for (Operation *user : value.getUsers()) {
      if (isa<memref::DeallocOp>(user))
        continue;
      Operation *ancestor = block->findAncestorOpInBlock(*user);
      if (!ancestor || ancestor->hasTrait<OpTrait::IsTerminator>())
        return nullptr;
      if (!last || last->isBeforeInBlock(ancestor))
        last = ancestor;
      bool follow = address || isa<memref::ExtractAlignedPointerAsIndexOp>(user);
      for (Value result : user->getResults())
        if ((follow || isa<BaseMemRefType>(result.getType())) && seen.insert(result).second)
          worklist.push_back(result);
      if (auto store = dyn_cast<memref::StoreOp>(user);
          store && address && store.getValueToStore() == value &&
          seen.insert(store.getMemRef()).second)
        worklist.push_back(store.getMemRef());
    }
  }
  return last;
}

struct EarlyDeallocationPass
    : public mtc::codegen::impl::EarlyDeallocationPassBase<EarlyDeallocationPass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk([&](memref::DeallocOp dealloc) { deallocs.push_back(dealloc); });
    for (memref::DeallocOp dealloc : deallocs) {
      auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != dealloc->getBlock())
        continue;
      Operation *last = lastUseInBlock(alloc.getResult(), dealloc->getBlock());
      if (last && last->isBeforeInBlock(dealloc))
        dealloc->moveAfter(last);
    }
  }
};

} // namespace
