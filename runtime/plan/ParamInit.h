//===- ParamInit.h - Initial parameter values from the plan -----*- C++ -*-===//
//
// Parameter values come from Philox (runtime/support/Philox.h) keyed on (plan seed, the
// parameter's tensor id, global element index) at step 0, the index counting row-major over
// the parameter's stored dims (for a layer parameter: all instances, `layers` first). So any
// rank initialises its own shard [begin, end) alone and gets exactly the values a single rank
// gets there, whatever the parallel layout (docs/plan-format.md; docs/runtime.md, "Keying").
//
//   zeros / ones / constant(v)   exact
//   normal(std[, mean])          mean + std * z, z the Box-Muller normal of Philox.h
//   uniform(low, high)           low + (high - low) * u, u in [0, 1), kept below high
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_PARAMINIT_H
#define MTC_RUNTIME_PLAN_PARAMINIT_H

#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"
#include "runtime/support/Safetensors.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// Fills out[0, end - begin) with the initial values of the global elements [begin, end) of
/// `param`'s stored tensor for a run seeded with `seed`. With a padded vocabulary
/// (`param.padding`) an element's value is the one its index in the unpadded tensor gets,
/// and 0 at the padded positions: the real rows start as they would under any tp. `param` must come from a loaded plan
/// (its initialiser checked) and 0 <= begin <= end <= param.numElements() (programming
/// errors otherwise: asserted, and nothing is written).
void initializeParam(const ParamInfo &param, uint64_t seed, int64_t begin, int64_t end, float *out);

/// Every parameter of a model, whole, in host memory, in the plan's table order.
///
/// Values are held as f32 whatever the plan's dtype (f32 is the only parameter dtype the
/// runtime computes in for now; bf16/f16/f64 storage arrives with mixed precision).
class HostParams {
public:
  struct Tensor {
    std::string name;           // the .mtl name
    std::vector<int64_t> shape; // stored dims
    std::vector<float> values;  // row-major
  };

  /// Allocates every parameter of `plan` and initialises it (in parallel over up to
  /// `threads` threads; 0 picks the hardware's concurrency). Fails only when memory runs out.
  static Expected<HostParams> initialize(const Plan &plan, unsigned threads = 0);

  /// The same for the rank at mesh `coordinates` (runtime/plan/Sharding.h): every parameter
  /// is the rank's shard (local shape), holding exactly the values of the whole tensor there.
  static Expected<HostParams> initializeShards(const Plan &plan,
                                               const std::vector<int64_t> &coordinates,
                                               unsigned threads = 0);

  size_t size() const { return tensors_.size(); }
  const std::vector<Tensor> &tensors() const { return tensors_; }
  const Tensor *find(std::string_view name) const;
  /// Elements of all tensors together.
  int64_t numElements() const;

  /// Borrowed views of every tensor (F32), e.g. for writeSafetensors. Valid while this
  /// object lives and is not modified.
  std::vector<TensorRef> tensorRefs() const;

  /// Hands the tensors over (this object is left empty).
  std::vector<Tensor> release() && { return std::move(tensors_); }

private:
  std::vector<Tensor> tensors_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_PARAMINIT_H
