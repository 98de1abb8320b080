//===- SharedLogits.cpp - One choice of tokens on every rank of a job ------===//

#include "runtime/generate/SharedLogits.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace mtc::rt {

LogitsOfLast shareLogitsOfRankZero(LogitsOfLast local, Communicator *world, int64_t vocabulary) {
  if (!world || world->size() == 1)
    return local;
  auto row = std::make_shared<std::vector<float>>(size_t(vocabulary), 0.0f);
  return [local = std::move(local), world, row,
          vocabulary](std::span<const int64_t> ids) -> Expected<std::span<const float>> {
    Expected<std::span<const float>> mine = local(ids);
    if (mine && static_cast<int64_t>(mine->size()) < vocabulary)
      mine = makeError("the logits have ", mine->size(), " values, not the vocabulary's ",
                       vocabulary);
    int32_t failed = mine ? 0 : world->rank() + 1;
    if (Error err = world->allReduce(&failed, 1, MTC_I32, MTC_MAX); !err.ok())
      return std::move(err).withContext("agreeing on the logits over the ranks");
    if (!mine)
      return mine.takeError();
    if (failed != 0)
      return makeError("rank ", failed - 1, " failed to score the tokens");
    if (world->rank() == 0)
      std::copy_n(mine->begin(), vocabulary, row->begin());
    if (Error err = world->broadcast(row->data(), row->size(), MTC_F32, 0); !err.ok())
      return std::move(err).withContext("broadcasting rank 0's logits");
    return std::span<const float>(*row);
  };
}

} // namespace mtc::rt
