//===- TrainingRunTest.cpp - One rank's training run ----------------------===//
//
// runTraining on the toy plan (ToyMeshPlan.h, one rank, no process): which steps it logs,
// when it checkpoints, the metrics lines, resuming, and a checkpoint past the target. A
// device backend (DeviceTrainer.h) on two ranks as threads over Gloo: each rank's device
// trainer gets that rank's shards (the device joins its own communicators); a pipeline plan
// is refused.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/TrainingRun.h"

#include "runtime/exec/Checkpoint.h"

#include "test/unittests/runtime/TempDir.h"
#include "test/unittests/runtime/comm/CommTestUtil.h"
#include "test/unittests/runtime/exec/ToyMeshPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

namespace mtc::rt::test {
namespace {

/// Keeps what a run reports.
struct RecordingLog final : TrainingLog {
  std::vector<std::string> lines;
  std::vector<std::pair<std::string, int64_t>> checkpoints;
  std::vector<int64_t> stepsDone;

  void write(std::string_view text) override {
    std::istringstream in{std::string(text)};
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
  }
  void progress(int64_t done, int64_t /*target*/) override { stepsDone.push_back(done); }
  void checkpointWritten(const std::string &dir, int64_t step) override {
    checkpoints.emplace_back(dir, step);
  }

  /// The steps of the "step N/M" lines.
  std::vector<int64_t> loggedSteps() const {
    std::vector<int64_t> steps;
    for (const std::string &line : lines)
      if (line.rfind("step ", 0) == 0)
        steps.push_back(std::stoll(line.substr(5)));
    return steps;
  }
  bool has(std::string_view prefix) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string &l) { return l.rfind(prefix, 0) == 0; });
  }
};

/// The toy plan with a 16-token vocabulary for the synthetic task.
Plan toyRunPlan() {
  Plan plan = toyPlan(1);
  plan.dims = {{"vocab", 16}};
  plan.vocabulary = "vocab";
  plan.vocabularyRealSize = 16;
  return plan;
}

size_t countLines(const std::filesystem::path &file) {
  std::string text = readBytes(file);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(TrainingRunTest, LogsAndCheckpointsOnSchedule) {
  TempDir dir;
  Plan plan = toyRunPlan();
  TrainingRunOptions options;
  options.targetSteps = 5;
  options.logEvery = 2;
  options.saveEvery = 2;
  options.threads = 1;
  options.save = (dir / "ckpt").string();
  options.metrics = (dir / "metrics.jsonl").string();
  options.exportSafetensors = (dir / "w.safetensors").string();
  RankContext job;
  RecordingLog log;
  Error err = runTraining(plan, options, job, log);
  ASSERT_TRUE(err.ok()) << err.message();
  // The first step, every second one and the last.
  EXPECT_EQ(log.loggedSteps(), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(log.stepsDone, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  // Every second step but the last, then the final checkpoint.
  std::vector<std::pair<std::string, int64_t>> saved = {
      {*options.save, 2}, {*options.save, 4}, {*options.save, 5}};
  EXPECT_EQ(log.checkpoints, saved);
  EXPECT_TRUE(log.has("model toy: 8 parameters, plan toy.plan")) << log.lines[0];
  EXPECT_TRUE(log.has("batch: 4 sequences of 4 tokens (4 micro-batches of 1); steps 0 -> 5"));
  EXPECT_TRUE(log.has("trained steps 1-5 in "));
  EXPECT_TRUE(log.has("saved checkpoint " + *options.save + " (step 5)"));
  EXPECT_FALSE(log.has("communication:")) << "one rank has no world";
  EXPECT_EQ(countLines(*options.metrics), 5u);
  Expected<TrainingState> checkpoint = loadCheckpoint(*options.save, plan);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.error().message();
  EXPECT_EQ(checkpoint->step, 5);
  EXPECT_TRUE(std::filesystem::is_regular_file(*options.exportSafetensors));
}

TEST(TrainingRunTest, ResumesFromACheckpoint) {
  TempDir dir;
  Plan plan = toyRunPlan();
  TrainingRunOptions first;
  first.targetSteps = 2;
  first.threads = 1;
  first.save = (dir / "ckpt").string();
  RankContext job;
  RecordingLog firstLog;
  ASSERT_TRUE(runTraining(plan, first, job, firstLog).ok());

  TrainingRunOptions resumed;
  resumed.targetSteps = 3;
  resumed.threads = 1;
  resumed.load = first.save;
  RecordingLog log;
  Error err = runTraining(plan, resumed, job, log);
  ASSERT_TRUE(err.ok()) << err.message();
  EXPECT_TRUE(log.has("resumed from " + *first.save + " at step 2"));
  EXPECT_TRUE(log.has("batch: 4 sequences of 4 tokens (4 micro-batches of 1); steps 2 -> 3"));
  EXPECT_EQ(log.loggedSteps(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(log.checkpoints.empty()) << "no --save";

  // At the target already: nothing to train.
  resumed.targetSteps = 2;
  RecordingLog idle;
  ASSERT_TRUE(runTraining(plan, resumed, job, idle).ok());
  EXPECT_EQ(idle.lines, (std::vector<std::string>{"resumed from " + *first.save + " at step 2"}));
}

TEST(TrainingRunTest, ACheckpointPastTheTargetIsAnError) {
  TempDir dir;
  Plan plan = toyRunPlan();
  TrainingRunOptions options;
  options.targetSteps = 3;
  options.threads = 1;
  options.save = (dir / "ckpt").string();
  RankContext job;
  RecordingLog log;
  ASSERT_TRUE(runTraining(plan, options, job, log).ok());
  options.targetSteps = 1;
  options.load = options.save;
  Error err = runTraining(plan, options, job, log);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(),
            "the checkpoint is at step 3, past --steps 1 (give a larger --steps to continue)");
}

TEST(TrainingRunTest, OnlyTheLeaderReports) {
  TempDir dir;
  Plan plan = toyRunPlan();
  TrainingRunOptions options;
  options.targetSteps = 2;
  options.threads = 1;
  options.save = (dir / "ckpt").string();
  options.metrics = (dir / "metrics.jsonl").string();
  // A rank other than 0 of a job whose world is this rank alone (no communicator needed).
  RankContext job;
  job.rank = 1;
  RecordingLog log;
  Error err = runTraining(plan, options, job, log);
  ASSERT_TRUE(err.ok()) << err.message();
  EXPECT_TRUE(log.lines.empty());
  EXPECT_TRUE(log.stepsDone.empty());
  EXPECT_TRUE(log.checkpoints.empty());
  EXPECT_FALSE(std::filesystem::exists(*options.save));
  EXPECT_FALSE(std::filesystem::exists(*options.metrics));
}

/// A device whose trainer records the state it was given and fails (what runTraining does
/// with a trainer is the CPU loop's, tested above).
DeviceBackend recordingDevice(std::vector<std::vector<int64_t>> &shapes, int rank) {
  DeviceBackend device;
  device.loadKernels = [](const Plan &plan) { return KernelLibrary::load(plan); };
  device.createTrainer =
      [&shapes, rank](DeviceTrainerInputs inputs) -> Expected<std::unique_ptr<DeviceTrainer>> {
    shapes[size_t(rank)] = inputs.state.params[0].shape;
    return makeError("the recording device trains nothing");
  };
  return device;
}

TEST(TrainingRunTest, ADeviceTrainsEachRankOfAMesh) {
  TestJob world;
  Plan plan = toyPlan(2);
  plan.dims = {{"vocab", 16}};
  plan.vocabulary = "vocab";
  plan.vocabularyRealSize = 16;
  std::vector<std::vector<int64_t>> shapes(2);
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    RankContext job;
    job.rank = rank;
    job.size = 2;
    job.world = world.connect(rank, 2, "device");
    ASSERT_TRUE(job.world);
    TrainingRunOptions options;
    options.targetSteps = 1;
    options.threads = 1;
    options.device = recordingDevice(shapes, rank);
    RecordingLog log;
    errors[size_t(rank)] = runTraining(plan, options, job, log).message();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[size_t(r)], "the recording device trains nothing") << "rank " << r;
    EXPECT_EQ(shapes[size_t(r)], (std::vector<int64_t>{2, 2})) << "rank " << r << "'s shard of w";
  }
}

TEST(TrainingRunTest, ADeviceRefusesAPipeline) {
  Plan plan = toyRunPlan();
  plan.pipeline.emplace();
  TrainingRunOptions options;
  options.targetSteps = 1;
  options.threads = 1;
  std::vector<std::vector<int64_t>> shapes(1);
  options.device = recordingDevice(shapes, 0);
  RankContext job;
  RecordingLog log;
  Error err = runTraining(plan, options, job, log);
  EXPECT_EQ(err.message(), "a device trainer runs a plan without a pipeline, and this is a "
                           "pipeline plan (train it with --device cpu)");
  EXPECT_TRUE(shapes[0].empty()) << "no trainer was created";
}

TEST(TrainingRunTest, OptimizerOffloadNeedsADevice) {
  Plan plan = toyRunPlan();
  TrainingRunOptions options;
  options.targetSteps = 1;
  options.threads = 1;
  options.optimizerCpuOffload = true;
  RankContext job;
  RecordingLog log;
  Error err = runTraining(plan, options, job, log);
  EXPECT_EQ(err.message(), "optimizer offload moves a device's optimizer step to the host, and "
                           "this run is on the host already");
}

} // namespace
} // namespace mtc::rt::test
