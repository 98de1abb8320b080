//===- Communicator.cpp - What all backends share ---------------------------===//
//
// The argument checks of every operation (one place for both backends), the Work handle and
// the blocking-free bookkeeping around it.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "runtime/comm/ElementTypes.h"

#include <algorithm>
#include <optional>

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

//===----------------------------------------------------------------------===//
// Work
//===----------------------------------------------------------------------===//

WorkState::~WorkState() = default;

Work Work::finished(Error result) {
  Work w;
  w.result_ = std::move(result);
  return w;
}

Work &Work::operator=(Work &&other) noexcept {
  if (this != &other) {
    if (state_)
      (void)state_->wait();
    state_ = std::move(other.state_);
    result_ = std::move(other.result_);
  }
  return *this;
}

Work::~Work() {
  if (state_)
    (void)state_->wait();
}

void FailureRecord::record(std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (message_.empty())
    message_ = message.empty() ? std::string("unknown failure") : std::move(message);
}

std::string FailureRecord::message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

bool FailureRecord::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !message_.empty();
}

Error FailureRecord::unusable(std::string_view where) const {
  return makeError(where, ": communicator unusable after an earlier failure: ", message());
}

//===----------------------------------------------------------------------===//
// Communicator: argument checks, then the backend
//===----------------------------------------------------------------------===//

Communicator::~Communicator() = default;

std::string Communicator::describe(std::string_view op) const {
  return concat(backendName(), " ", op, " (rank ", rank(), " of ", size(), ")");
}

Work Communicator::unusable(std::string_view op) const {
  return Work::finished(failure_->unusable(describe(op)));
}

std::optional<Work> Communicator::refuse(std::string_view op,
                                         std::initializer_list<std::string> problems) const {
  for (const std::string &why : problems)
    if (!why.empty())
      return Work::finished(makeError(describe(op), ": ", why));
  if (failure_->failed())
    return unusable(op);
  return std::nullopt;
}

namespace {

/// Why `type` (and `reduction`, when given) cannot be used; empty when they can.
std::string checkCodes(MtcElementType type, const MtcReduction *reduction = nullptr) {
  if (!isElementType(type))
    return concat("unknown element type code ", int64_t(type), " (0-", MTC_NUM_ELEMENT_TYPES - 1,
                  ": f32, f64, bf16, f16, i32, i64)");
  if (reduction && !isReduction(*reduction))
    return concat("unknown reduction code ", int64_t(*reduction), " (0 = sum, 1 = max, 2 = min)");
  return {};
}

std::string checkBuffer(const void *data, size_t count, std::string_view what) {
  if (!data && count > 0)
    return concat("the ", what, " buffer is null but holds ", count, " elements");
  return {};
}

} // namespace

Work Communicator::startAllReduce(void *data, size_t count, MtcElementType type,
                                  MtcReduction reduction) {
  if (std::optional<Work> refused =
          refuse("allReduce", {checkCodes(type, &reduction), checkBuffer(data, count, "data")}))
    return std::move(*refused);
  return doAllReduce(data, count, type, reduction);
}

Work Communicator::startAllGather(const void *in, void *out, size_t countPerRank,
                                  MtcElementType type) {
  if (std::optional<Work> refused =
          refuse("allGather", {checkCodes(type), checkBuffer(in, countPerRank, "input"),
                               checkBuffer(out, countPerRank, "output")}))
    return std::move(*refused);
  return doAllGather(in, out, countPerRank, type);
}

Work Communicator::startReduceScatter(const void *in, void *out, size_t countPerRank,
                                      MtcElementType type, MtcReduction reduction) {
  if (std::optional<Work> refused = refuse(
          "reduceScatter", {checkCodes(type, &reduction), checkBuffer(in, countPerRank, "input"),
                            checkBuffer(out, countPerRank, "output")}))
    return std::move(*refused);
  return doReduceScatter(in, out, countPerRank, type, reduction);
}

Work Communicator::startBroadcast(void *data, size_t count, MtcElementType type, int root) {
  std::string badRoot =
      root < 0 || root >= size() ? concat("root ", root, " is not in [0, ", size(), ")") : "";
  if (std::optional<Work> refused =
          refuse("broadcast", {badRoot, checkCodes(type), checkBuffer(data, count, "data")}))
    return std::move(*refused);
  return doBroadcast(data, count, type, root);
}

Work Communicator::startAllToAll(const void *in, void *out, size_t countPerRank,
                                 MtcElementType type) {
  if (std::optional<Work> refused =
          refuse("allToAll", {checkCodes(type), checkBuffer(in, countPerRank, "input"),
                              checkBuffer(out, countPerRank, "output")}))
    return std::move(*refused);
  std::vector<size_t> counts(static_cast<size_t>(size()), countPerRank);
  return doAllToAllV(in, counts, out, counts, type);
}

Work Communicator::startAllToAllV(const void *in, std::span<const size_t> sendCounts, void *out,
                                  std::span<const size_t> recvCounts, MtcElementType type) {
  const size_t n = static_cast<size_t>(size()), me = static_cast<size_t>(rank());
  if (sendCounts.size() != n || recvCounts.size() != n)
    return *refuse("allToAllV",
                   {concat("expected ", n, " send and ", n, " receive counts (one per rank), got ",
                           sendCounts.size(), " and ", recvCounts.size())});
  if (sendCounts[me] != recvCounts[me])
    return *refuse("allToAllV", {concat("this rank sends itself ", sendCounts[me],
                                        " elements but expects ", recvCounts[me])});
  size_t sendTotal = 0, recvTotal = 0;
  for (size_t p = 0; p < n; ++p)
    sendTotal += sendCounts[p], recvTotal += recvCounts[p];
  if (std::optional<Work> refused =
          refuse("allToAllV", {checkCodes(type), checkBuffer(in, sendTotal, "input"),
                               checkBuffer(out, recvTotal, "output")}))
    return std::move(*refused);
  return doAllToAllV(in, std::vector<size_t>(sendCounts.begin(), sendCounts.end()), out,
                     std::vector<size_t>(recvCounts.begin(), recvCounts.end()), type);
}

Work Communicator::startBarrier() {
  if (std::optional<Work> refused = refuse("barrier", {}))
    return std::move(*refused);
  return doBarrier();
}

namespace {
std::string checkPeer(int peer, int rank, int size) {
  if (peer < 0 || peer >= size || peer == rank)
    return concat("peer ", peer, " is not another rank of the group");
  return {};
}
} // namespace

Work Communicator::startSend(const void *data, size_t count, MtcElementType type, int peer) {
  if (std::optional<Work> refused =
          refuse("send", {checkPeer(peer, rank(), size()), checkCodes(type),
                          checkBuffer(data, count, "data")}))
    return std::move(*refused);
  return doSend(data, count, type, peer);
}

Work Communicator::startRecv(void *data, size_t count, MtcElementType type, int peer) {
  if (std::optional<Work> refused =
          refuse("recv", {checkPeer(peer, rank(), size()), checkCodes(type),
                          checkBuffer(data, count, "data")}))
    return std::move(*refused);
  return doRecv(data, count, type, peer);
}

Work Communicator::startSendRecv(const void *sendData, size_t sendCount, int dst, void *recvData,
                                 size_t recvCount, int src, MtcElementType type) {
  if (std::optional<Work> refused =
          refuse("sendRecv", {checkPeer(dst, rank(), size()), checkPeer(src, rank(), size()),
                              checkCodes(type), checkBuffer(sendData, sendCount, "send"),
                              checkBuffer(recvData, recvCount, "receive")}))
    return std::move(*refused);
  return doSendRecv(sendData, sendCount, dst, recvData, recvCount, src, type);
}

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
