//===- TraceTest.cpp - Spans and the job's Chrome trace --------------------===//

#include "runtime/exec/Trace.h"

#include "test/unittests/runtime/TempDir.h"
#include "test/unittests/runtime/comm/CommTestUtil.h"

#include <gtest/gtest.h>

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

TEST(Trace, AnUnwritableFileIsAnError) {
  TraceRecorder trace(0);
  Error err = writeJobTrace(trace, nullptr, "/nonexistent-dir/trace.json");
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message().rfind("writing the trace '/nonexistent-dir/trace.json': ", 0), 0u)
      << err.message();
}

} // namespace
