//===- RequestRelay.cpp - Rank 0 hands requests to the other ranks --------===//

#include "runtime/serve/RequestRelay.h"

#include <algorithm>

namespace mtc::rt {
namespace {

constexpr size_t kHeaderBytes = 10; // kind, API, seed

/// How long a store request may take to be answered beyond its own wait.
constexpr std::chrono::milliseconds kReplyTimeout{5000};

std::vector<char> bytesOf(std::string_view text) {
  return std::vector<char>(text.begin(), text.end());
}

} // namespace

std::string encodeRelayedRequest(const RelayedRequest &message) {
  std::string bytes;
  bytes.reserve(kHeaderBytes + message.body.size());
  bytes.push_back(static_cast<char>(message.kind));
  bytes.push_back(static_cast<char>(message.api));
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>((message.seed >> (8 * i)) & 0xff));
  bytes += message.body;
  return bytes;
}

Expected<RelayedRequest> decodeRelayedRequest(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes)
    return makeError("a relayed request of ", bytes.size(), " bytes (at least ", kHeaderBytes,
                     " expected)");
  RelayedRequest message;
  const auto kind = static_cast<uint8_t>(bytes[0]);
  const auto api = static_cast<uint8_t>(bytes[1]);
  if (kind > static_cast<uint8_t>(RelayedRequest::Kind::Abort))
    return makeError("a relayed request of unknown kind ", int(kind));
  if (api > static_cast<uint8_t>(CompletionApi::OpenAI))
    return makeError("a relayed request of unknown API ", int(api));
  message.kind = static_cast<RelayedRequest::Kind>(kind);
  message.api = static_cast<CompletionApi>(api);
  for (int i = 0; i < 8; ++i)
    message.seed |= uint64_t(static_cast<uint8_t>(bytes[2 + size_t(i)])) << (8 * i);
  message.body = std::string(bytes.substr(kHeaderBytes));
  return message;
}

std::string RelayOptions::requestKey(uint64_t sequence) const {
  return concat(prefix, "/request/", sequence);
}

std::string RelayOptions::stopKey() const { return concat(prefix, "/stop"); }

RequestBell::RequestBell(std::shared_ptr<TcpStore> store, RelayOptions options)
    : store_(std::move(store)), options_(std::move(options)) {}

Error RequestBell::ring(const RelayedRequest &message) {
  if (Error err = store_->trySet(options_.requestKey(sequence_ + 1),
                                 bytesOf(encodeRelayedRequest(message)));
      !err.ok())
    return std::move(err).withContext("handing the request to the other ranks");
  ++sequence_;
  return Error::success();
}

Error RequestBell::forgetLast() {
  if (sequence_ == 0)
    return Error::success();
  // An empty value is no message: a listener never reads it (it read the key before).
  return store_->trySet(options_.requestKey(sequence_), {});
}

Expected<std::optional<std::string>> RequestBell::stopAsked() {
  auto ages = store_->ages({options_.stopKey()}, kReplyTimeout);
  if (!ages)
    return ages.takeError();
  if (!ages->front())
    return std::optional<std::string>();
  auto note = store_->tryGet(options_.stopKey(), std::chrono::milliseconds(0));
  if (!note)
    return note.takeError();
  return std::optional<std::string>(std::string(note->begin(), note->end()));
}

RequestListener::RequestListener(std::shared_ptr<TcpStore> store, int rank, int size,
                                 RelayOptions options)
    : store_(std::move(store)), rank_(rank), size_(size), options_(std::move(options)) {}

Expected<RelayedRequest> RequestListener::next(const std::function<Error()> &idle) {
  const std::string key = options_.requestKey(sequence_ + 1);
  auto gone = [](Error err) {
    return std::move(err).withContext(
        "waiting for rank 0's next request: the store, which rank 0 runs, does not answer "
        "(rank 0 may be stopped, hung or gone)");
  };
  for (;;) {
    Expected<std::vector<std::string>> missing = store_->waitMissing({key}, options_.poll);
    if (!missing)
      return gone(missing.takeError());
    if (missing->empty())
      break;
    if (idle)
      if (Error err = idle(); !err.ok())
        return err;
    // Rank 0's heartbeat: only the size of the job matters for its keys, rank 0's are read.
    Expected<std::vector<RankHeartbeat>> beats =
        readHeartbeats(*store_, std::max(size_, 1), options_.heartbeat, kReplyTimeout);
    if (!beats)
      return gone(beats.takeError());
    const RankHeartbeat &server = beats->front();
    // A rank 0 that never beat has no heartbeat (a warning at its start): the store answers
    // for it. One that has ended may have rung its last message since the wait above.
    if (server.age && server.silent(options_.heartbeat)) {
      Expected<std::vector<std::string>> last =
          store_->waitMissing({key}, std::chrono::milliseconds(0));
      if (last && last->empty())
        break;
      return makeError("waiting for rank 0's next request: ", server.describe());
    }
  }
  Expected<std::vector<char>> value = store_->tryGet(key, options_.poll);
  if (!value)
    return gone(value.takeError());
  Expected<RelayedRequest> message =
      decodeRelayedRequest(std::string_view(value->data(), value->size()));
  if (!message)
    return message.takeError().withContext(concat("rank ", rank_, ": request ", sequence_ + 1));
  ++sequence_;
  return message;
}

Error RequestListener::askToStop(const std::string &note) {
  return store_->trySet(options_.stopKey(), bytesOf(note));
}

Expected<bool> anyRank(Communicator *world, bool mine, std::string_view what) {
  if (!world || world->size() == 1)
    return mine;
  int32_t flag = mine ? 1 : 0;
  if (Error err = world->allReduce(&flag, 1, MTC_I32, MTC_MAX); !err.ok())
    return std::move(err).withContext(what);
  return flag != 0;
}

} // namespace mtc::rt
