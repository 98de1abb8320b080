//===- Documents.h - Positions within packed documents -----------*- C++ -*-===//
//
// Megatron packs documents into samples, each ended by the end-of-document token. With
// --reset-position-ids a token's position counts from the start of its own document rather
// than of the sample. megatron/core/datasets/gpt_dataset.py, `_get_ltor_masks_and_position_ids`
// (as megatron/training/utils.py's `get_ltor_masks_and_position_ids` per sample):
//
//   eod_index = position_ids[data == eod_token]
//   prev_index = 0
//   for i in eod_index:
//       position_ids[(i + 1):] -= i + 1 - prev_index
//       prev_index = i + 1
//
// so the position after an end of document is 0 and the end of document keeps its
// document's position (it belongs to the document it ends). A plan compiled with
// `reset_position_ids` takes them as an input of its step (docs/plan-format.md), which the
// trainer fills from each micro-batch's tokens.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_DOCUMENTS_H
#define MTC_RUNTIME_DATA_DOCUMENTS_H

#include <cstdint>
#include <span>

namespace mtc::rt {

/// Writes the position of each token of `tokens` within its document to `positions` (as
/// many): `tokens` holds samples of `sequenceLength` tokens one after the other, and each
/// sample's positions count from 0 at its start and again after each token `eod`.
void resetPositionIds(std::span<const int32_t> tokens, int64_t sequenceLength, int64_t eod,
                      std::span<int32_t> positions);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_DOCUMENTS_H
