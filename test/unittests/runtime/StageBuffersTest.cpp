//===- StageBuffersTest.cpp - What a pipeline stage's task list holds -----===//

#include "runtime/plan/StageBuffers.h"

#include "PipelineTestSchedules.h"

#include <gtest/gtest.h>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

/// Every chunk keeps `residual` bytes per micro-batch and hands `activation` on (the last
/// chunk none).
ChunkBufferBytes uniform(size_t chunks, int64_t residual, int64_t activation,
                         int64_t weightResidual = 0, int64_t stash = 0) {
  ChunkBufferBytes bytes;
  for (size_t c = 0; c < chunks; ++c) {
    bytes.residual.push_back(residual);
    bytes.weightResidual.push_back(weightResidual);
    bytes.stash.push_back(stash);
    bytes.activation.push_back(c + 1 < chunks ? activation : 0);
  }
  return bytes;
}

// 1F1B on 2 stages, 4 micro-batches: stage 0 holds two micro-batches' residuals at once
// (its warm-up forward and the steady state's), stage 1 one. Messages: the runtime keeps a
// send's buffer from the task writing it until it is known to have arrived (sendReleases:
// stage 0's activation i at its backward i, stage 1's gradient i at its forward i + 2, the
// last two to the end of the step), and a receive's from its posting, up to two compute
// tasks ahead, to the task consuming it.
TEST(StageBuffers, OneFOneBHoldsTheWarmUpsResiduals) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 4);
  ChunkBufferBytes bytes = uniform(2, 1000, 10);
  StageBufferPeaks first = simulateStageBuffers(s.stages, 0, {0, 1}, bytes);
  StageBufferPeaks last = simulateStageBuffers(s.stages, 1, {0, 1}, bytes);
  EXPECT_EQ(first.saved, 2000);
  EXPECT_EQ(last.saved, 1000);
  // Stage 0 as its backward 0 posts the receive of gradient 1: micro-batches 0 and 1's
  // residuals and activations sent, gradients 0 and 1 received (before the backward frees
  // activation 0's send). Kept to the step's end, the four sends made it 2000 + 6 x 10.
  EXPECT_EQ(first.held, 2000 + 2 * 10 + 2 * 10);
  // Stage 1 at its forward 1 (and again later): a micro-batch's residuals, gradients 0 and 1
  // sent (0 is freed at forward 2), activations 1 and 2 received. Kept to the end, the four
  // sends made it 1000 + 4 x 10.
  EXPECT_EQ(last.held, 1000 + 3 * 10);
}

// Where each send's buffer is freed: once the stage has read a message the peer sent after
// reading the send. 1F1B: stage 0's activation i comes back as gradient i (read by backward
// i); stage 1's gradient i is read by stage 0's backward i, after which stage 0 sends
// activation i + 2 (read by stage 1's forward i + 2); the last two gradients have nothing
// after them. GPipe: both of stage 0's activations are known to have arrived at its first
// backward, and stage 1's gradients only at the step's end (stage 0 sends nothing after).
TEST(StageBuffers, SendsAreReleasedWhereAMessageBackProvesThemArrived) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 4);
  const std::vector<ScheduleTask> &zero = s.stages[0].tasks, &one = s.stages[1].tasks;
  auto at = [](const std::vector<ScheduleTask> &tasks, TaskOp op, int chunk, int i) {
    for (size_t k = 0; k < tasks.size(); ++k)
      if (tasks[k].op == op && tasks[k].chunk == chunk && tasks[k].microBatch == i)
        return k;
    return tasks.size();
  };
  std::vector<size_t> first = sendReleases(s.stages, 0), last = sendReleases(s.stages, 1);
  ASSERT_EQ(first.size(), zero.size());
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(first[at(zero, TaskOp::SendActivation, 0, i)], at(zero, TaskOp::Backward, 0, i));
  EXPECT_EQ(last[at(one, TaskOp::SendGradient, 1, 0)], at(one, TaskOp::Forward, 1, 2));
  EXPECT_EQ(last[at(one, TaskOp::SendGradient, 1, 1)], at(one, TaskOp::Forward, 1, 3));
  EXPECT_EQ(last[at(one, TaskOp::SendGradient, 1, 2)], one.size());
  EXPECT_EQ(last[at(one, TaskOp::SendGradient, 1, 3)], one.size());
  // Tasks that are no send: the list's size.
  EXPECT_EQ(first[at(zero, TaskOp::Forward, 0, 0)], zero.size());

  PipelineSchedule g = buildSchedule(TestScheduleKind::GPipe, 2, 2);
  const std::vector<ScheduleTask> &gz = g.stages[0].tasks, &go = g.stages[1].tasks;
  std::vector<size_t> gFirst = sendReleases(g.stages, 0), gLast = sendReleases(g.stages, 1);
  EXPECT_EQ(gFirst[at(gz, TaskOp::SendActivation, 0, 0)], at(gz, TaskOp::Backward, 0, 0));
  EXPECT_EQ(gFirst[at(gz, TaskOp::SendActivation, 0, 1)], at(gz, TaskOp::Backward, 0, 0));
  EXPECT_EQ(gLast[at(go, TaskOp::SendGradient, 1, 0)], go.size());
  EXPECT_EQ(gLast[at(go, TaskOp::SendGradient, 1, 1)], go.size());
}

// GPipe holds every micro-batch's residuals before the first backward.
TEST(StageBuffers, GPipeHoldsEveryMicroBatch) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, 2, 3);
  ChunkBufferBytes bytes = uniform(2, 100, 0);
  EXPECT_EQ(simulateStageBuffers(s.stages, 0, {0, 1}, bytes).saved, 300);
  EXPECT_EQ(simulateStageBuffers(s.stages, 1, {0, 1}, bytes).saved, 300);
}

// With the B/W split, B frees the residuals W does not read and leaves its stash; W frees
// the rest. GPipe's order (every B before any W) holds every micro-batch's stash and
// weight residuals at once. A B's stash is taken before its residuals go.
TEST(StageBuffers, SplitBackwardHoldsStashAndWeightResidualsUntilW) {
  PipelineSchedule s = buildChunkedGPipe({0, 1}, 2, 2, /*splitBackward=*/true);
  // Stage 1 (the last chunk): while the first B runs, both forwards' 2 x 100 and its 7.
  ChunkBufferBytes bytes = uniform(2, 100, 0, /*weightResidual=*/40, /*stash=*/7);
  EXPECT_EQ(simulateStageBuffers(s.stages, 1, {0, 1}, bytes).saved, 207);
  // While the second B runs: the first's 90 + 50, the second's 100 and 50.
  ChunkBufferBytes stashHeavy = uniform(2, 100, 0, /*weightResidual=*/90, /*stash=*/50);
  EXPECT_EQ(simulateStageBuffers(s.stages, 1, {0, 1}, stashHeavy).saved, 290);
}

// Two consecutive chunks on one stage hand the activation over locally: no message, only
// the next chunk's input, freed when that chunk's forward has run.
TEST(StageBuffers, LocalHandOverCountsTheInputOnce) {
  // Chunks 0 and 1 on stage 0 (a V shape's turn), one micro-batch.
  PipelineSchedule s = buildChunkedGPipe({0, 0}, 1, 1, /*splitBackward=*/false);
  ChunkBufferBytes bytes = uniform(2, 0, 64);
  StageBufferPeaks peaks = simulateStageBuffers(s.stages, 0, {0, 0}, bytes);
  // The forward of chunk 0 writes chunk 1's input (64), freed by chunk 1's forward; the
  // backward of chunk 1 writes chunk 0's output gradient (64), freed by chunk 0's backward.
  EXPECT_EQ(peaks.held, 64);
  EXPECT_EQ(peaks.saved, 0);
}

// Chunk indices past the byte tables count as empty rather than reading past them.
TEST(StageBuffers, MissingChunksHoldNothing) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 2);
  StageBufferPeaks peaks = simulateStageBuffers(s.stages, 1, {0, 1}, ChunkBufferBytes{});
  EXPECT_EQ(peaks.saved, 0);
  EXPECT_EQ(peaks.held, 0);
}

// The receive window: the receives before the third compute task from the current one.
TEST(StageBuffers, ReceiveWindowEndsBeforeTheThirdComputeTask) {
  std::vector<ScheduleTask> tasks = {
      {TaskOp::RecvActivation, 1, 0, 0}, {TaskOp::Forward, 1, 0},
      {TaskOp::RecvActivation, 1, 1, 0}, {TaskOp::Forward, 1, 1},
      {TaskOp::RecvActivation, 1, 2, 0}, {TaskOp::Forward, 1, 2}};
  EXPECT_EQ(receiveWindowEnd(tasks, 0), 5u); // posts recv 0 and recv 1 and recv 2
  EXPECT_EQ(receiveWindowEnd(tasks, 4), 6u);
  EXPECT_EQ(receiveWindowEnd(tasks, 6), 6u);
}

} // namespace
