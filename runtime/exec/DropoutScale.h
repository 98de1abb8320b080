//===- DropoutScale.h - The dropout decision compiled kernels call --*- C++ -*-===//
//
// Compiled step functions call `float mtc_dropout_scale(int64_t stream, int64_t element,
// double rate)` once per element of each `mt.dropout`, and `void mtc_dropout_layer(int64_t
// instance)` when a scan starts a repeat of a layer (-1 when it ends; see
// compiler/codegen/MTToLinalg.h). The runtime defines both here with Philox
// (runtime/support/Philox.h):
//
//     keep  iff  mtc_dropout_keep(seed, mtc_dropout_tensor_id(stream, instance), index,
//                                 step + 1, 1 - rate)
//     scale =    keep ? 1 / (1 - rate) : 0
//     index =    element + (first sample of the micro-batch) * 2^40
//
// `step + 1` keeps dropout counters apart from parameter initialisation (counter step 0).
// The layer instance gives every repeat of a layer its own masks, and the micro-batch's first
// global sample index in the high bits every micro-batch, while a forward and its backward
// (one call) agree.
//
// The C interface has no context argument, so the key of the call in progress and the layer
// instance are thread-locals that a `DropoutKeyScope` sets around each kernel call (kernels
// run on the calling thread).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_DROPOUTSCALE_H
#define MTC_RUNTIME_EXEC_DROPOUTSCALE_H

#include <cstdint>

extern "C" float mtc_dropout_scale(int64_t stream, int64_t element, double rate);
extern "C" void mtc_dropout_layer(int64_t instance);

namespace mtc::rt {

/// What distinguishes one kernel call's dropout masks from another's.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t step = 0;        // the optimizer step being computed, from 0
  int64_t sampleBegin = 0; // the first global sample of the micro-batch
};

/// Sets the key of mtc_dropout_scale on this thread for its lifetime, with no layer instance
/// (-1); restores the previous key and instance after. Without a scope, the scale is 1 (no
/// dropout) and no random numbers are drawn.
class DropoutKeyScope {
public:
  explicit DropoutKeyScope(const DropoutKey &key);
  ~DropoutKeyScope();
  DropoutKeyScope(const DropoutKeyScope &) = delete;
  DropoutKeyScope &operator=(const DropoutKeyScope &) = delete;

private:
  const DropoutKey *previous_;
  int64_t previousInstance_;
};

/// The scale of `element` of dropout site `stream` in repeat `instance` of its layer (-1
/// outside layers) under `key`: what mtc_dropout_scale returns inside a scope with that key
/// after mtc_dropout_layer(instance).
float dropoutScale(const DropoutKey &key, int64_t stream, int64_t instance, int64_t element,
                   double rate);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_DROPOUTSCALE_H
