//===- ResetDocuments.h - names of mt-reset-documents ------------*- C++ -*-===//
//
// The module attributes that ask for Megatron's --reset-position-ids and
// --reset-attention-mask (set by `mtc compile`), and the argument attribute naming the data
// input mt-reset-documents adds, which the plan writer, the calling convention and mt-logits
// read (Passes.td, MTResetDocumentsPass).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_TRANSFORMS_RESETDOCUMENTS_H
#define MTC_COMPILER_TRANSFORMS_RESETDOCUMENTS_H

#include "llvm/ADT/StringRef.h"

namespace mtc::transforms {

/// Unit attribute on a module whose positions restart at each document.
inline constexpr llvm::StringLiteral kResetPositionIdsAttrName = "mt.reset_position_ids";
/// Unit attribute on a module whose attention stays within each document (refused yet).
inline constexpr llvm::StringLiteral kResetAttentionMaskAttrName = "mt.reset_attention_mask";
/// Argument attribute naming an entry function's data argument that has no place in
/// mt::MTDialect::kEntryInputNames: the plan's input name.
inline constexpr llvm::StringLiteral kInputNameAttrName = "mt.input";
/// The name of the position ids among the step's inputs.
inline constexpr llvm::StringLiteral kPositionIdsInput = "position_ids";

} // namespace mtc::transforms

#endif // MTC_COMPILER_TRANSFORMS_RESETDOCUMENTS_H
