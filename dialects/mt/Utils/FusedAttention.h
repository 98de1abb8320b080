//===- FusedAttention.h - whether attention runs fused ----------*- C++ -*-===//
//
// `mtc compile --fused-attention` (Megatron's `--use-flash-attn`) puts the module attribute
// `mt.fused_attention = <block> : i64` on the module: `mt.attention` and
// `mt.attention_grad` then stay whole through mt-decompose and partitioning and mt-to-linalg
// lowers them to FlashAttention-2's loops over blocks of `block` query and key positions
// (compiler/codegen/ToLinalg/AttentionToLinalg.cpp). Autodiff saves the forward's output and
// log-sum-exp for the backward (`save_lse`), and the cost model prices the fused kernel.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_UTILS_FUSEDATTENTION_H
#define MTC_DIALECTS_MT_UTILS_FUSEDATTENTION_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace mtc::mt {

/// Module attribute (an i64, the block size in positions): attention runs fused.
constexpr llvm::StringLiteral kFusedAttentionAttrName = "mt.fused_attention";

/// The block size FlashAttention-2 uses on the GPU for head dimensions up to 128.
constexpr int64_t kDefaultFusedAttentionBlock = 64;

/// The block size of fused attention in the module holding `op` (or `op` itself, a
/// module), or nothing when attention is decomposed.
inline std::optional<int64_t> getFusedAttentionBlock(mlir::Operation *op) {
  auto module = llvm::dyn_cast<mlir::ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<mlir::ModuleOp>();
  if (!module)
    return std::nullopt;
  auto block = module->getAttrOfType<mlir::IntegerAttr>(kFusedAttentionAttrName);
  if (!block)
    return std::nullopt;
  return block.getInt();
}

/// The block actually used along a sequence of `length` positions: the largest divisor of
/// `length` not above `requested` (every block then has the same size).
inline int64_t fusedAttentionBlockFor(int64_t length, int64_t requested) {
  int64_t block = std::max<int64_t>(1, std::min(length, requested));
  while (length % block != 0)
    --block;
  return block;
}

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_UTILS_FUSEDATTENTION_H
