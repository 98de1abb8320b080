//===- DropoutKey.h - The dropout key compiled kernels ask for ------*- C++ -*-===//
//
// Compiled step functions decide dropout inside their kernels, with Philox compiled into the
// object (compiler/codegen/CPU/DropoutKeep.c); what they cannot know is the run's seed, the step,
// the micro-batch and the repeat of the layer. They ask for those once per dropout op:
//
//   int64_t mtc_dropout_key(MtcKernelContext *context, int64_t stream,
//                           int64_t word);                    // word: mtc_dropout_key_word
//   void    mtc_dropout_layer(MtcKernelContext *context, int64_t instance);
//
// (runtime/exec/KernelABI.h) and the runtime defines both here. The kernel keeps the element
// of dropout site `stream` at sample coordinate `b` (along `batch`, global under a split) and
// row-major offset `rest` over the tensor's other dimensions iff
//
//     mtc_dropout_keep(seed, mtc_dropout_tensor_id(stream, instance),
//                      (sampleBegin + b) * 2^40 + rest, step + 1, 1 - rate)
//
// (runtime/support/Philox.h, MTC_DROPOUT_SAMPLE_STRIDE = 2^40; sampleBegin is the first global
// sample of the micro-batch, the key's index base is sampleBegin * 2^40) and scales it by
// 1 / (1 - rate), or by 0 when dropped. A sample's mask is therefore the same whatever
// micro-batch holds it and whichever rank computes it: a run with micro-batches of B / ep
// draws the masks an expert-parallel run with micro-batches of B does. A tensor without a
// `batch` dimension is one sample's (b = 0).
// `step + 1` keeps dropout counters apart from parameter initialisation (counter step 0). The
// layer instance (set by a scan before each repeat of a layer, -1 when it ends; see
// compiler/codegen/ToLinalg/MTToLinalg.h) gives every repeat its own masks, and the global
// sample in the high bits every sample, while a forward and its backward (one call) agree.
//
// The key of the call in progress and its current layer instance are the `DropoutCall` of
// the call's kernel context (MtcKernelContext::dropout), which the Trainer builds for every
// forward_backward call. Without one (a null context or dropout, or a context of another ABI
// version) the key is inactive: every element is kept unscaled (no dropout).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_DROPOUTKEY_H
#define MTC_RUNTIME_EXEC_DROPOUTKEY_H

#include "runtime/exec/KernelABI.h"

#include <cstdint>

namespace mtc::rt {

/// What distinguishes one kernel call's dropout masks from another's.
struct DropoutKey {
  uint64_t seed = 0;
  int64_t step = 0;        // the optimizer step being computed, from 0
  int64_t sampleBegin = 0; // the first global sample of the micro-batch
};

/// The dropout side of one kernel call: its key and the layer instance the kernels are in
/// (-1 outside layers, where a call starts). Its address is the `dropout` of the call's
/// MtcKernelContext.
struct DropoutCall {
  DropoutKey key;
  int64_t instance = -1;

  /// The DropoutCall of `context` (null when it has none or is not of this ABI version).
  static DropoutCall *of(const MtcKernelContext *context);
};

/// Word `word` (an mtc_dropout_key_word) of the key of dropout site `stream` in repeat
/// `instance` of its layer (-1 outside layers) under `key`: what mtc_dropout_key returns
/// with a DropoutCall of that key after mtc_dropout_layer(instance). 0 for an unknown word.
int64_t dropoutKeyWord(const DropoutKey &key, int64_t stream, int64_t instance, int64_t word);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_DROPOUTKEY_H
