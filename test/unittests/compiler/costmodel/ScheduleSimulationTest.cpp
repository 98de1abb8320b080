//===- ScheduleSimulationTest.cpp - stage task lists with task times ------===//

#include "compiler/costmodel/ScheduleSimulation.h"

#include "llvm/Support/FormatVariadic.h"
#include "gtest/gtest.h"

using namespace mtc::costmodel;

namespace {

std::string key(const char *what, int64_t stage, int64_t mb) {
  return llvm::formatv("{0} {1} {2}", what, stage, mb).str();
}

/// One stage's compute task and the messages around it; sends are free and instant.
void forward(std::vector<SimTask> &tasks, int64_t s, int64_t p, int64_t mb, double f) {
  if (s > 0)
    tasks.push_back({SimTask::Kind::Receive, "recv a", 0, key("a", s - 1, mb), 0});
  tasks.push_back({SimTask::Kind::Compute, "F", f, "", 0});
  if (s + 1 < p)
    tasks.push_back({SimTask::Kind::Send, "send a", 0, key("a", s, mb), 0});
}
void backward(std::vector<SimTask> &tasks, int64_t s, int64_t p, int64_t mb, double b) {
  if (s + 1 < p)
    tasks.push_back({SimTask::Kind::Receive, "recv g", 0, key("g", s + 1, mb), 0});
  tasks.push_back({SimTask::Kind::Compute, "B", b, "", 0});
  if (s > 0)
    tasks.push_back({SimTask::Kind::Send, "send g", 0, key("g", s, mb), 0});
}

/// GPipe: every forward, then every backward (in reverse, as the runtime's lists do).
std::vector<std::vector<SimTask>> gpipe(int64_t p, int64_t m, double f, double b) {
  std::vector<std::vector<SimTask>> stages(p);
  for (int64_t s = 0; s < p; ++s) {
    for (int64_t i = 0; i < m; ++i)
      forward(stages[s], s, p, i, f);
    for (int64_t i = m - 1; i >= 0; --i)
      backward(stages[s], s, p, i, b);
  }
  return stages;
}

/// 1F1B: p - s - 1 warm-up forwards, then one forward and one backward, then the rest.
std::vector<std::vector<SimTask>> oneFOneB(int64_t p, int64_t m, double f, double b) {
  std::vector<std::vector<SimTask>> stages(p);
  for (int64_t s = 0; s < p; ++s) {
    int64_t warmup = std::min(m, p - s - 1), nextF = 0, nextB = 0;
    for (; nextF < warmup; ++nextF)
      forward(stages[s], s, p, nextF, f);
    for (; nextF < m; ++nextF, ++nextB) {
      forward(stages[s], s, p, nextF, f);
      backward(stages[s], s, p, nextB, b);
    }
    for (; nextB < m; ++nextB)
      backward(stages[s], s, p, nextB, b);
  }
  return stages;
}

/// The bubble fraction of stage 0: idle / step.
double bubble(const SimResult &r) { return 1 - r.compute[0] / r.stepSeconds; }

TEST(ScheduleSimulationTest, GPipeBubbleWithEqualTasks) {
  for (int64_t p : {2, 4}) {
    for (int64_t m : {1, 4, 8}) {
      llvm::Expected<SimResult> r = simulateStages(gpipe(p, m, 1, 1));
      ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
      // (m + p - 1) slots of forward and of backward, of which m compute.
      EXPECT_DOUBLE_EQ(r->stepSeconds, 2.0 * static_cast<double>(m + p - 1));
      EXPECT_NEAR(bubble(*r), static_cast<double>(p - 1) / static_cast<double>(m + p - 1), 1e-12)
          << "p " << p << " m " << m;
    }
  }
}

TEST(ScheduleSimulationTest, OneFOneBHasGPipesBubble) {
  // With B = 2F, as the compiler's unit times: the same (p - 1) / (m + p - 1).
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8}) {
      llvm::Expected<SimResult> r = simulateStages(oneFOneB(p, m, 1, 2));
      ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
      EXPECT_DOUBLE_EQ(r->stepSeconds, 3.0 * static_cast<double>(m + p - 1));
      EXPECT_NEAR(bubble(*r), static_cast<double>(p - 1) / static_cast<double>(m + p - 1), 1e-12);
    }
}

TEST(ScheduleSimulationTest, TransferTimeDelaysTheReceiver) {
  std::vector<std::vector<SimTask>> stages(2);
  stages[0] = {{SimTask::Kind::Compute, "F", 1, "", 0},
               {SimTask::Kind::Send, "send", 0.25, "x", 2}};
  stages[1] = {{SimTask::Kind::Receive, "recv", 0, "x", 0},
               {SimTask::Kind::Compute, "F", 1, "", 0}};
  llvm::Expected<SimResult> r = simulateStages(stages);
  ASSERT_TRUE(static_cast<bool>(r));
  // Sent at 1, arrives at 3, computed until 4; the sender was busy 0.25 s sending.
  EXPECT_DOUBLE_EQ(r->finish[0], 1.25);
  EXPECT_DOUBLE_EQ(r->finish[1], 4);
  EXPECT_DOUBLE_EQ(r->waiting[1], 3);
  EXPECT_DOUBLE_EQ(r->communicate[0], 0.25);
  EXPECT_DOUBLE_EQ(r->stepSeconds, 4);
}

TEST(ScheduleSimulationTest, ReportsADeadlock) {
  std::vector<std::vector<SimTask>> stages(2);
  stages[0] = {{SimTask::Kind::Receive, "recv b", 0, "b", 0},
               {SimTask::Kind::Send, "send a", 0, "a", 0}};
  stages[1] = {{SimTask::Kind::Receive, "recv a", 0, "a", 0},
               {SimTask::Kind::Send, "send b", 0, "b", 0}};
  llvm::Expected<SimResult> r = simulateStages(stages);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(llvm::toString(r.takeError()),
            "the schedule deadlocks: stage 0 at 'recv b', stage 1 at 'recv a'");
}

} // namespace
