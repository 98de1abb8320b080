//===- LogitsFunction.h - The plan's logits of a token sequence -*- C++ -*-===//
//
// Calls the plan's `logits` function (docs/plan-format.md: the training `forward` without
// its loss) on one sequence. The function takes a whole micro-batch [batch, seq]: every row
// holds the sequence, padded with token 0 past its end, and row 0's scores are read. Under
// causal attention the scores of position t depend on the tokens up to t only, so the
// padding changes nothing that is read (a model whose layers mix positions otherwise, such as
// capacity-limited expert routing, lets the padding compete for expert slots, as the tokens of
// a training batch do). The call has no dropout key: evaluation without dropout, as
// `forward` evaluates. Where the compiler padded the vocabulary for tp, the padded classes
// are left out.
//
// A plan partitioned over a mesh (tp, sp, cp, ep) compiles `logits` like `forward`: each
// rank passes its shards of the parameters, the function communicates along the mesh axes
// (MeshCollectives.h) and returns the whole logits on every rank (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_GENERATE_LOGITSFUNCTION_H
#define MTC_RUNTIME_GENERATE_LOGITSFUNCTION_H

#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/generate/PlanMesh.h"
#include "runtime/plan/Plan.h"

#include <span>
#include <vector>

namespace mtc::rt {

class LogitsFunction {
public:
  /// Binds `kernels`' logits function to the parameters of `state`: whole tensors on one
  /// rank, or this rank's shards where `mesh` (RankMesh::context(), which must outlive the
  /// function) places it on the plan's mesh; the function's collectives then run over it,
  /// and every rank of the mesh calls run() with the same ids at the same time. Fails when
  /// the plan has no logits function, or is partitioned over more than one rank and `mesh`
  /// is null. The plan, kernels and state must outlive the function.
  static Expected<LogitsFunction> create(const Plan &plan, const KernelLibrary &kernels,
                                         const TrainingState &state,
                                         const MeshContext *mesh = nullptr);

  /// Positions of the model's window (the tokens' `seq`).
  int64_t window() const { return window_; }
  /// The real vocabulary: the scores of each position.
  int64_t vocabulary() const { return vocabulary_; }

  /// Scores `ids` (1 to window() ids below vocabulary()); afterwards at(t) are the logits of
  /// position t < ids.size() (the scores of the token after it).
  Error run(std::span<const int64_t> ids);
  std::span<const float> at(int64_t position) const;

private:
  LogitsFunction(const LoadedKernel &kernel, PlanMesh mesh)
      : kernel_(&kernel), mesh_(std::move(mesh)) {}

  const LoadedKernel *kernel_;
  PlanMesh mesh_;
  std::vector<void *> buffers_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  int64_t batch_ = 1, window_ = 1, vocabulary_ = 1, paddedVocabulary_ = 1;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_GENERATE_LOGITSFUNCTION_H
