//===- TraceTest.cpp - Spans and the job's Chrome trace --------------------===//

#include "runtime/exec/Trace.h"

#include "test/unittests/runtime/TempDir.h"
#include "test/unittests/runtime/comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

/// The "X" events of `trace` whose pid is `rank`.
std::vector<const JsonObject *> spansOf(const JsonValue &trace, int rank) {
  std::vector<const JsonObject *> out;
  for (const JsonValue &e : *trace.getObject()->find("traceEvents")->getArray()) {
    const JsonObject &o = *e.getObject();
    if (*o.find("ph")->getString() == "X" && *o.find("pid")->getInt() == rank)
      out.push_back(&o);
  }
  return out;
}

TEST(Trace, ScopesRecordNestedSpans) {
  TraceRecorder trace(3);
  {
    TraceRecorder::Scope step(&trace, "step", "step", {{"step", 1}});
    TraceRecorder::Scope inner(&trace, "forward_backward", "compute");
  }
  TraceRecorder::Scope off(nullptr, "nothing", "compute"); // no recorder: records nothing
  ASSERT_EQ(trace.spans().size(), 2u);
  const TraceSpan &inner = trace.spans()[0], &outer = trace.spans()[1];
  EXPECT_EQ(inner.name, "forward_backward");
  EXPECT_EQ(outer.name, "step");
  EXPECT_LE(outer.startUs, inner.startUs);
  EXPECT_GE(outer.startUs + outer.durationUs, inner.startUs + inner.durationUs);
  JsonArray events = trace.events();
  ASSERT_EQ(events.size(), 5u); // process name, sort index, thread name, two spans
  const JsonObject &e = *events[4].getObject();
  EXPECT_EQ(*e.find("pid")->getInt(), 3);
  EXPECT_EQ(*e.find("cat")->getString(), "step");
  EXPECT_EQ(*e.find("args")->getObject()->find("step")->getInt(), 1);
}

TEST(Trace, RankZeroWritesEveryRanksSpans) {
  TestJob job;
  TempDir dir;
  const std::filesystem::path file = dir.path() / "trace.json";
  const int n = 3;
  std::vector<Error> errors(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "trace");
    ASSERT_TRUE(comm);
    TraceRecorder trace(rank);
    errors[rank] = trace.start(comm.get());
    for (int i = 0; i <= rank; ++i)
      TraceRecorder::Scope span(&trace, concat("span ", i), "compute", {{"i", i}});
    if (errors[rank].ok())
      errors[rank] = writeJobTrace(trace, comm.get(), file);
  });
  for (const Error &e : errors)
    ASSERT_TRUE(e.ok()) << e.message();
  Expected<JsonValue> trace = parseJson(readBytes(file));
  ASSERT_TRUE(trace.ok()) << trace.error().message();
  for (int r = 0; r < n; ++r) {
    auto spans = spansOf(*trace, r);
    ASSERT_EQ(spans.size(), size_t(r + 1)) << "rank " << r;
    EXPECT_EQ(*spans.back()->find("name")->getString(), concat("span ", r));
  }
  EXPECT_EQ(*trace->getObject()->find("otherData")->getObject()->find("ranks")->getInt(), 3);
}

// Rank 0 checks what each rank sends before it merges it: a part that is not JSON, lacks its
// events or dropped count, or announces a negative or impossibly large length is an error,
// and no file is written.
TEST(Trace, AMalformedPartFromARankIsAnError) {
  struct Case {
    const char *name;
    int64_t length; // as announced; the text follows unless it is empty
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"text", 11, "not a trace", "rank 1 sent a malformed trace"},
      {"nodropped", 13, R"({"events":[]})", "rank 1 sent a malformed trace"},
      {"noevents", 13, R"({"dropped":0})", "rank 1 sent a malformed trace"},
      {"negative", -5, "", "rank 1 announced a trace of -5 bytes"},
      // More than any recorder's part: refused before rank 0 allocates it.
      {"huge", int64_t(1) << 60, "", "rank 1 announced a trace of 1152921504606846976 bytes"},
  };
  for (const Case &c : cases) {
    TestJob job;
    TempDir dir;
    const std::filesystem::path file = dir.path() / "trace.json";
    Error rank0;
    runRanks(2, [&](int rank) {
      auto comm = job.connect(rank, 2, concat("malformed-", c.name));
      ASSERT_TRUE(comm);
      if (rank == 0) {
        rank0 = writeJobTrace(TraceRecorder(0), comm.get(), file);
        return;
      }
      // Rank 1 speaks the parts' framing (length, then the text in 8-byte words) by hand.
      int64_t length = c.length;
      ASSERT_TRUE(comm->send(&length, 1, MTC_I64, 0).ok());
      if (length < 0 || c.text.empty())
        return;
      std::vector<int64_t> words((c.text.size() + 7) / 8, 0);
      std::memcpy(words.data(), c.text.data(), c.text.size());
      ASSERT_TRUE(comm->send(words.data(), words.size(), MTC_I64, 0).ok());
    });
    ASSERT_FALSE(rank0.ok()) << c.name;
    EXPECT_EQ(rank0.message(), concat("writing the trace '", file.string(), "': ", c.error));
    EXPECT_FALSE(std::filesystem::exists(file)) << c.name;
  }
}

TEST(Trace, AnUnwritableFileIsAnError) {
  TraceRecorder trace(0);
  Error err = writeJobTrace(trace, nullptr, "/nonexistent-dir/trace.json");
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message().rfind("writing the trace '/nonexistent-dir/trace.json': ", 0), 0u)
      << err.message();
}

} // namespace
