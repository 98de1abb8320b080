//===- VocabularyPadding.h - Whole tensors with and without padding -*- C++ -*-===//
//
// A plan whose vocabulary the compiler padded to a multiple of tp (Plan::vocabularyPadded,
// docs/plan-format.md) computes on tensors of the padded size; checkpoints and safetensors
// exports hold the real vocabulary only, so they load under any tp. These convert one
// whole row-major tensor between the two: the real block is the sub-block at offset 0
// whose vocabulary dimension has the real size.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_VOCABULARYPADDING_H
#define MTC_RUNTIME_PLAN_VOCABULARYPADDING_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <span>
#include <vector>

namespace mtc::rt {

/// The shape of a tensor of `dims` with the vocabulary at its real size (dimSizes(dims)
/// when the plan's vocabulary is not padded or `dims` lacks it).
std::vector<int64_t> realShape(const Plan &plan, const std::vector<Dim> &dims);

/// The real block of the whole tensor `values` of `dims` (realShape elements).
std::vector<float> stripVocabularyPadding(const Plan &plan, const std::vector<Dim> &dims,
                                          std::span<const float> values);

/// The inverse: the whole tensor of `dims` holding `real` (realShape elements) in its real
/// block and 0 at the padded positions.
std::vector<float> padVocabulary(const Plan &plan, const std::vector<Dim> &dims,
                                 std::span<const float> real);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_VOCABULARYPADDING_H
