//===- LossMask.h - The loss mask of packed documents ------------*- C++ -*-===//
//
// Megatron packs documents into samples, each ended by the end-of-document token. With
// --eod-mask-loss the position whose input token is that token (where the model would
// predict the first token of the next document from the end of the last) leaves the loss:
// megatron/core/datasets/gpt_dataset.py, `_get_ltor_masks_and_position_ids`, sets
// `loss_mask[data == eod_token] = 0` over the sample's input tokens. A plan compiled with
// `eod_mask_loss` takes that mask as an input of its step (docs/plan-format.md), which the
// trainer fills from each micro-batch's tokens.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_LOSSMASK_H
#define MTC_RUNTIME_DATA_LOSSMASK_H

#include <cstdint>
#include <span>

namespace mtc::rt {

/// Writes the weight of each position of `tokens` to `mask` (as many): 0 where the token is
/// `eod`, 1 elsewhere.
void eodLossMask(std::span<const int32_t> tokens, int64_t eod, std::span<float> mask);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_LOSSMASK_H
