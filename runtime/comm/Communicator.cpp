//===- Communicator.cpp - What all backends share ---------------------------===//

#include "runtime/comm/Communicator.h"

#include <algorithm>

namespace mtc::rt {

std::string_view collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "allReduce";
  case CollectiveKind::AllGather:
    return "allGather";
  case CollectiveKind::ReduceScatter:
    return "reduceScatter";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::AllToAll:
    return "allToAll";
  case CollectiveKind::Barrier:
    return "barrier";
  case CollectiveKind::SendRecv:
    return "sendRecv";
  }
  return "unknown";
}

uint64_t CommCounters::totalBytesSent() const {
  uint64_t total = 0;
  for (uint64_t b : bytesSent)
    total += b;
  return total;
}

Communicator::~Communicator() = default;

Expected<std::unique_ptr<Communicator>> Communicator::subgroup(const std::vector<int> &ranks) {
  if (ranks.empty())
    return makeError("subgroup: the list of ranks is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size())
      return makeError("subgroup: rank ", sorted[i], " is not in [0, ", size(), ")");
    if (i > 0 && sorted[i] == sorted[i - 1])
      return makeError("subgroup: rank ", sorted[i], " is listed twice");
  }
  auto it = std::find(ranks.begin(), ranks.end(), rank());
  if (it == ranks.end())
    return split(-1, 0);
  return split(0, static_cast<int>(it - ranks.begin()));
}

} // namespace mtc::rt
