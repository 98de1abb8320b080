//===- SharedLogits.h - One choice of tokens on every rank of a job -*- C++ -*-===//
//
// Generation on several ranks (`mtrun generate PLAN --nodes N`): every rank runs the plan's
// logits function on the same ids (its collectives run over the plan's mesh, so every rank
// must), and every rank must then choose the same token, or their sequences, and the next
// collectives, part. Sampling is deterministic (Sampler.h), but data-parallel copies of a
// partitioned model compute their logits apart, and nothing promises that two copies round
// alike. So each call of the shared logits
//
//   1. runs the rank's own logits (`local`);
//   2. all-reduces (max) a failure flag over the world: rank + 1 of a rank whose call failed,
//      0 for none; a failure ends the call on every rank (the failed ranks with their own error,
//      the others naming the highest failed rank), so no rank waits for one that gave up;
//   3. broadcasts rank 0's row of logits over the world.
//
// Every rank then samples from rank 0's logits: the same bits, so the same token (Decoding.h
// keys a draw on the seed and the position only). A job of one rank calls `local` alone.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_GENERATE_SHAREDLOGITS_H
#define MTC_RUNTIME_GENERATE_SHAREDLOGITS_H

#include "runtime/comm/Communicator.h"
#include "runtime/generate/Decoding.h"

#include <cstdint>

namespace mtc::rt {

/// `local` shared as above over `world` (null or of one rank: `local` itself). Every rank of
/// `world` calls the result with the same ids, from one thread at a time (the world's owner);
/// `world` must outlive it. Each row has `vocabulary` logits (> 0).
LogitsOfLast shareLogitsOfRankZero(LogitsOfLast local, Communicator *world, int64_t vocabulary);

} // namespace mtc::rt

#endif // MTC_RUNTIME_GENERATE_SHAREDLOGITS_H
