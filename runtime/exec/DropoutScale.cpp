//===- DropoutScale.cpp - The dropout decision compiled kernels call ------===//

#include "runtime/exec/DropoutScale.h"

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

float dropoutScale(const DropoutKey &key, int64_t stream, int64_t instance, int64_t element,
                   double rate) {
  if (rate <= 0)
    return 1.0f;
  if (rate >= 1)
    return 0.0f;
  auto keep = static_cast<float>(1.0 - rate);
  uint64_t index = static_cast<uint64_t>(element) + (static_cast<uint64_t>(key.sampleBegin) << 40);
  bool kept = mtc_dropout_keep(key.seed, mtc_dropout_tensor_id(stream, instance), index,
                               static_cast<uint32_t>(key.step + 1), keep);
  return kept ? 1.0f / keep : 0.0f;
}

} // namespace mtc::rt

extern "C" float mtc_dropout_scale(int64_t stream, int64_t element, double rate) {
  const mtc::rt::DropoutKey *key = mtc::rt::currentKey;
  return key ? mtc::rt::dropoutScale(*key, stream, mtc::rt::currentInstance, element, rate)
             : 1.0f;
}

extern "C" void mtc_dropout_layer(int64_t instance) { mtc::rt::currentInstance = instance; }
