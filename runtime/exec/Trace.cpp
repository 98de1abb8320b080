//===- Trace.cpp - A timeline of spans, written as a Chrome trace ---------===//

#include "runtime/exec/Trace.h"

#include "runtime/support/Safetensors.h"

#include <cstring>

namespace mtc::rt {

Error TraceRecorder::start(Communicator *world) {
  if (world)
    if (Error err = world->barrier(); !err.ok())
      return std::move(err).withContext("starting the trace's clock");
  origin_ = Clock::now();
  return Error::success();
}

void TraceRecorder::record(std::string name, std::string category, Clock::time_point begin,
                           Clock::time_point end, JsonObject args) {
  if (spans_.size() >= kMaxTraceSpans) {
    ++dropped_;
    return;
  }
  using Micros = std::chrono::duration<double, std::micro>;
  spans_.push_back(TraceSpan{std::move(name), std::move(category), Micros(begin - origin_).count(),
                             Micros(end - begin).count(), std::move(args)});
}

JsonArray TraceRecorder::events() const {
  JsonArray out;
  out.reserve(spans_.size() + 3);
  auto metadata = [&](const char *name, JsonObject args, int tid) {
    out.push_back(JsonObject{
        {"name", name}, {"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"args", std::move(args)}});
  };
  metadata("process_name", {{"name", concat("rank ", rank_)}}, 0);
  metadata("process_sort_index", {{"sort_index", rank_}}, 0);
  metadata("thread_name", {{"name", "compute"}}, 0);
  for (const TraceSpan &s : spans_) {
    JsonObject e{{"name", s.name},    {"cat", s.category},        {"ph", "X"},
                 {"pid", rank_},      {"tid", 0},                 {"ts", s.startUs},
                 {"dur", s.durationUs}};
    if (!s.args.empty())
      e.set("args", s.args);
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

/// One rank's part of the job's trace: its events and how many spans it dropped.
JsonValue part(const TraceRecorder &recorder) {
  return JsonObject{{"events", recorder.events()},
                    {"dropped", static_cast<int64_t>(recorder.dropped())}};
}

/// Sends `text` to rank 0: its length, then its bytes (as 8-byte words: the communicator has
/// no byte type).
Error sendText(Communicator &world, const std::string &text) {
  int64_t length = static_cast<int64_t>(text.size());
  if (Error err = world.send(&length, 1, MTC_I64, 0); !err.ok())
    return err;
  std::vector<int64_t> words((text.size() + 7) / 8, 0);
  if (!text.empty())
    std::memcpy(words.data(), text.data(), text.size());
  return world.send(words.data(), words.size(), MTC_I64, 0);
}

Expected<std::string> receiveText(Communicator &world, int from) {
  int64_t length = 0;
  if (Error err = world.recv(&length, 1, MTC_I64, from); !err.ok())
    return err;
  // A rank's part holds at most kMaxTraceSpans spans (each well under 1 KiB of JSON).
  constexpr int64_t kMaxPartBytes = int64_t(kMaxTraceSpans) * 1024;
  if (length < 0 || length > kMaxPartBytes)
    return makeError("rank ", from, " announced a trace of ", length, " bytes");
  std::vector<int64_t> words((static_cast<size_t>(length) + 7) / 8, 0);
  if (Error err = world.recv(words.data(), words.size(), MTC_I64, from); !err.ok())
    return err;
  std::string text(static_cast<size_t>(length), '\0');
  if (length > 0)
    std::memcpy(text.data(), words.data(), text.size());
  return text;
}

} // namespace

Error writeJobTrace(const TraceRecorder &recorder, Communicator *world,
                    const std::filesystem::path &file) {
  auto context = [&](Error err) {
    return std::move(err).withContext(concat("writing the trace ", file));
  };
  if (world && world->rank() != 0)
    return context(sendText(*world, part(recorder).serialize()));
  JsonArray events = recorder.events();
  int64_t dropped = static_cast<int64_t>(recorder.dropped());
  for (int r = 1; world && r < world->size(); ++r) {
    Expected<std::string> text = receiveText(*world, r);
    if (!text)
      return context(text.takeError());
    Expected<JsonValue> value = parseJson(*text);
    JsonObject *o = value ? value->getObject() : nullptr;
    JsonValue *rankEvents = o ? o->find("events") : nullptr;
    const JsonValue *rankDropped = o ? o->find("dropped") : nullptr;
    if (!rankEvents || !rankEvents->isArray() || !rankDropped || !rankDropped->getInt())
      return context(makeError("rank ", r, " sent a malformed trace"));
    for (JsonValue &e : *rankEvents->getArray())
      events.push_back(std::move(e));
    dropped += *rankDropped->getInt();
  }
  JsonObject trace{{"traceEvents", std::move(events)},
                   {"displayTimeUnit", "ms"},
                   {"otherData", JsonObject{{"producer", "mtrun"},
                                            {"ranks", world ? world->size() : 1},
                                            {"dropped_spans", dropped}}}};
  return context(writeFileAtomically(file, JsonValue(std::move(trace)).serialize() + "\n"));
}

} // namespace mtc::rt
