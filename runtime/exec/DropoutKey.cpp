//===- DropoutKey.cpp - The dropout key compiled kernels ask for ----------===//

#include "runtime/exec/DropoutKey.h"

#include "runtime/support/Philox.h"

namespace mtc::rt {

namespace {
thread_local const DropoutKey *currentKey = nullptr;
thread_local int64_t currentInstance = -1;
} // namespace

DropoutKeyScope::DropoutKeyScope(const DropoutKey &key)
    : previous_(currentKey), previousInstance_(currentInstance) {
  currentKey = &key;
  currentInstance = -1;
}

DropoutKeyScope::~DropoutKeyScope() {
  currentKey = previous_;
  currentInstance = previousInstance_;
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
    return static_cast<int64_t>(static_cast<uint64_t>(key.sampleBegin) << 40);
  case MTC_DROPOUT_KEY_ACTIVE:
    return 1;
  default:
    return 0;
  }
}

} // namespace mtc::rt

extern "C" int64_t mtc_dropout_key(int64_t stream, int64_t word) {
  const mtc::rt::DropoutKey *key = mtc::rt::currentKey;
  return key ? mtc::rt::dropoutKeyWord(*key, stream, mtc::rt::currentInstance, word) : 0;
}

extern "C" void mtc_dropout_layer(int64_t instance) { mtc::rt::currentInstance = instance; }
