//===- DropoutKey.cpp - The dropout key compiled kernels ask for ----------===//

#include "runtime/exec/DropoutKey.h"

#include "runtime/support/Philox.h"

namespace mtc::rt {

DropoutCall *DropoutCall::of(const MtcKernelContext *context) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  return checked ? static_cast<DropoutCall *>(checked->dropout) : nullptr;
}

int64_t dropoutKeyWord(const DropoutKey &key, int64_t stream, int64_t instance, int64_t word) {
  switch (word) {
  case MTC_DROPOUT_KEY_SEED:
    return static_cast<int64_t>(key.seed);
  case MTC_DROPOUT_KEY_TENSOR_ID:
    return mtc_dropout_tensor_id(stream, instance);
  case MTC_DROPOUT_KEY_STEP:
    return static_cast<uint32_t>(key.step + 1);
  case MTC_DROPOUT_KEY_INDEX_BASE:
    return static_cast<int64_t>(static_cast<uint64_t>(key.sampleBegin) *
                                static_cast<uint64_t>(MTC_DROPOUT_SAMPLE_STRIDE));
  case MTC_DROPOUT_KEY_ACTIVE:
    return 1;
  default:
    return 0;
  }
}

} // namespace mtc::rt

using mtc::rt::DropoutCall;

extern "C" int64_t mtc_dropout_key(MtcKernelContext *context, int64_t stream, int64_t word) {
  const DropoutCall *call = DropoutCall::of(context);
  return call ? mtc::rt::dropoutKeyWord(call->key, stream, call->instance, word) : 0;
}

extern "C" void mtc_dropout_layer(MtcKernelContext *context, int64_t instance) {
  if (DropoutCall *call = DropoutCall::of(context))
    call->instance = instance;
}
