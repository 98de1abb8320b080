//===- CheckpointTest.cpp - Saving and resuming training state ------------===//

#include "runtime/exec/Checkpoint.h"

#include "ExecTestPlan.h"
#include "runtime/support/TemporaryFiles.h"
#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace mtc::rt;
using mtc::rt::test::smallPlan;
using mtc::rt::test::TempDir;

namespace {

TrainingState trainedState(const Plan &plan) {
  Expected<TrainingState> state = TrainingState::initialize(plan, 1);
  EXPECT_TRUE(state.ok()) << state.error().message();
  // Values a fresh initialisation does not have, so that loading is seen to restore them.
  for (auto *table : {&state->params, &state->states})
    for (TrainingState::Tensor &t : *table)
      for (size_t i = 0; i < t.values.size(); ++i)
        t.values[i] += 0.25f * static_cast<float>(i + 1);
  state->step = 42;
  return std::move(*state);
}

std::string readAll(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void writeAll(const std::filesystem::path &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string loadError(const std::filesystem::path &dir, const Plan &plan) {
  Expected<TrainingState> loaded = loadCheckpoint(dir, plan);
  EXPECT_FALSE(loaded.ok()) << "the checkpoint loaded";
  return loaded.ok() ? "" : loaded.error().message();
}

} // namespace

TEST(CheckpointTest, RoundTripIsExact) {
  TempDir tmp;
  Plan plan = smallPlan();
  TrainingState state = trainedState(plan);
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, state).ok());
  Expected<TrainingState> loaded = loadCheckpoint(tmp / "ckpt", plan);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_EQ(loaded->step, 42);
  ASSERT_EQ(loaded->params.size(), 2u);
  ASSERT_EQ(loaded->states.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(loaded->params[i].name, state.params[i].name);
    EXPECT_EQ(loaded->params[i].shape, state.params[i].shape);
    EXPECT_EQ(loaded->params[i].values, state.params[i].values);
    EXPECT_EQ(loaded->states[i].values, state.states[i].values);
  }
}

TEST(CheckpointTest, TheLossScalerStateRoundTrips) {
  TempDir tmp;
  Plan plan = smallPlan();
  TrainingState state = trainedState(plan);
  state.lossScale = LossScaleState{1.5f * 65536.0f, 17, -3, 9};
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, state).ok());
  Expected<TrainingState> loaded = loadCheckpoint(tmp / "ckpt", plan);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  ASSERT_TRUE(loaded->lossScale.has_value());
  EXPECT_EQ(*loaded->lossScale, *state.lossScale);
  EXPECT_EQ(loaded->optimizerSteps(), 42 - 9);
  // Without loss scaling there is no state, and every step was the optimizer's.
  state.lossScale.reset();
  ASSERT_TRUE(saveCheckpoint(tmp / "plain", plan, state).ok());
  loaded = loadCheckpoint(tmp / "plain", plan);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_FALSE(loaded->lossScale.has_value());
  EXPECT_EQ(loaded->optimizerSteps(), 42);
}

TEST(CheckpointTest, BadLossScalerFieldsAreNamed) {
  TempDir tmp;
  Plan plan = smallPlan();
  TrainingState state = trainedState(plan);
  state.lossScale = LossScaleState{1024.0f, 3, 2, 10};
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, state).ok());
  std::filesystem::path file = tmp / "ckpt" / std::string(kCheckpointFileName);
  const std::string bytes = readAll(file);
  // The metadata is JSON text in the header: edit a value in place (same length).
  auto edited = [&](const std::string &from, const std::string &to) {
    std::string copy = bytes;
    size_t at = copy.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    copy.replace(at, from.size(), to);
    writeAll(file, copy);
    return loadError(tmp / "ckpt", plan);
  };
  EXPECT_NE(edited("\"loss_scale\":\"1024\"", "\"loss_scale\":\"-024\"")
                .find("the checkpoint's loss scale -024 is not a positive finite value"),
            std::string::npos);
  EXPECT_NE(edited("\"loss_scale\":\"1024\"", "\"loss_scale\":\"1x24\"")
                .find("invalid loss_scale '1x24' in the checkpoint's metadata"),
            std::string::npos);
  EXPECT_NE(edited("\"loss_scale_growth_tracker\":\"3\"", "\"loss_scale_growth_tracker\":\"-\"")
                .find("invalid loss_scale_growth_tracker '-' in the checkpoint's metadata"),
            std::string::npos);
  EXPECT_NE(edited("\"skipped_steps\":\"10\"", "\"skipped_steps\":\"99\"")
                .find("skipped_steps 99 is not a count of the 42 steps taken"),
            std::string::npos);
  EXPECT_NE(edited("\"skipped_steps\":\"10\"", "\"skipped_stepz\":\"10\"")
                .find("has loss scaling fields but no 'skipped_steps'"),
            std::string::npos);
}

TEST(CheckpointTest, SavingAgainReplacesTheFileAtomically) {
  TempDir tmp;
  Plan plan = smallPlan();
  TrainingState state = trainedState(plan);
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, state).ok());
  state.step = 43;
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, state).ok());
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(tmp / "ckpt"))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"checkpoint.safetensors"});
  Expected<TrainingState> loaded = loadCheckpoint(tmp / "ckpt", plan);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_EQ(loaded->step, 43);
}

TEST(CheckpointTest, FlippedBitFailsTheChecksum) {
  TempDir tmp;
  Plan plan = smallPlan();
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, trainedState(plan)).ok());
  std::filesystem::path file = tmp / "ckpt" / "checkpoint.safetensors";
  std::string bytes = readAll(file);
  bytes[bytes.size() - 3] ^= 0x10; // inside the last tensor's data
  writeAll(file, bytes);
  std::string message = loadError(tmp / "ckpt", plan);
  EXPECT_NE(message.find("fails its CRC-32C check (the file is corrupt)"), std::string::npos)
      << message;
}

TEST(CheckpointTest, TruncatedFileIsCorrupt) {
  TempDir tmp;
  Plan plan = smallPlan();
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, trainedState(plan)).ok());
  std::filesystem::path file = tmp / "ckpt" / "checkpoint.safetensors";
  std::string bytes = readAll(file);
  writeAll(file, bytes.substr(0, bytes.size() - 8));
  std::string message = loadError(tmp / "ckpt", plan);
  EXPECT_EQ(message.rfind((tmp / "ckpt").string() + ": corrupt checkpoint: ", 0), 0u) << message;
}

TEST(CheckpointTest, OtherModelName) {
  TempDir tmp;
  Plan other = smallPlan("other");
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", other, trainedState(other)).ok());
  EXPECT_EQ(loadError(tmp / "ckpt", smallPlan()),
            (tmp / "ckpt").string() +
                ": a checkpoint of model 'other', but the plan is of model 'small'");
}

TEST(CheckpointTest, SameNameOtherShapes) {
  TempDir tmp;
  Plan wide = smallPlan("small", 5);
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", wide, trainedState(wide)).ok());
  EXPECT_EQ(loadError(tmp / "ckpt", smallPlan()),
            (tmp / "ckpt").string() +
                ": tensor 'param:w' is F32 [5, 4] in the checkpoint but F32 [3, 4] in the plan (a "
                "checkpoint of another model?)");
}

TEST(CheckpointTest, MissingTensor) {
  TempDir tmp;
  Plan fewer = smallPlan();
  fewer.states.pop_back();
  fewer.params.back().name = "bias";
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", fewer, trainedState(fewer)).ok());
  EXPECT_NE(loadError(tmp / "ckpt", smallPlan()).find("holds 3 tensors but the plan has 2 "
                                                      "parameters and 2 optimizer states"),
            std::string::npos);
}

TEST(CheckpointTest, NotACheckpoint) {
  TempDir tmp;
  Plan plan = smallPlan();
  EXPECT_EQ(loadError(tmp / "absent", plan), (tmp / "absent").string() +
                                                 ": no such checkpoint directory");
  std::filesystem::create_directories(tmp / "empty");
  EXPECT_EQ(loadError(tmp / "empty", plan),
            (tmp / "empty").string() + ": not a checkpoint (no checkpoint.safetensors in it)");
  // A safetensors file that is not a checkpoint (an export of the parameters).
  std::filesystem::create_directories(tmp / "export");
  std::vector<float> values(4, 1.0f);
  std::vector<TensorRef> refs{makeTensorRef("b", {4}, values)};
  ASSERT_TRUE(
      writeSafetensors(tmp / "export" / "checkpoint.safetensors", refs, {{"format", "mtc"}}).ok());
  EXPECT_EQ(loadError(tmp / "export", plan),
            (tmp / "export").string() + ": not an mtc checkpoint (format 'mtc')");
}

// A save killed after writing its temporary leaves it; loading the directory removes it.
TEST(CheckpointTest, LoadRemovesAKilledSavesTemporary) {
  TempDir tmp;
  Plan plan = smallPlan();
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", plan, trainedState(plan)).ok());
  pid_t gone = ::fork();
  if (gone == 0)
    ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  std::filesystem::path stale =
      tmp / "ckpt" / concat("checkpoint.safetensors.mtc-tmp.", hostName(), '.', gone);
  writeAll(stale, std::string(1 << 16, 'x'));
  ASSERT_TRUE(loadCheckpoint(tmp / "ckpt", plan).ok());
  EXPECT_FALSE(std::filesystem::exists(stale));
}

TEST(CheckpointTest, NonRegularFilesAreRefusedWithoutBlocking) {
  TempDir tmp;
  Plan plan = smallPlan();
  ASSERT_EQ(::mkfifo((tmp / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(loadError(tmp / "fifo", plan),
            (tmp / "fifo").string() + " is a FIFO (named pipe), not a checkpoint directory");
  std::filesystem::create_directories(tmp / "ckpt");
  ASSERT_EQ(::mkfifo((tmp / "ckpt" / "checkpoint.safetensors").c_str(), 0600), 0);
  EXPECT_EQ(loadError(tmp / "ckpt", plan),
            (tmp / "ckpt").string() +
                ": checkpoint.safetensors is a FIFO (named pipe), not a regular file");
}

// A plan whose vocabulary (`rows`, real size 3) the compiler padded to 4: the checkpoint
// holds the real rows only, of the shapes the unpadded plan has, so either plan loads it;
// loading under the padded plan restores the padding as zeros.
TEST(CheckpointTest, PaddedVocabularyIsStoredAtItsRealSize) {
  TempDir tmp;
  Plan real = smallPlan("small", 3);
  real.dims = {{"rows", 3}, {"cols", 4}};
  real.vocabulary = "rows";
  real.vocabularyRealSize = 3;
  Plan padded = smallPlan("small", 4);
  padded.dims = {{"rows", 4}, {"cols", 4}};
  padded.vocabulary = "rows";
  padded.vocabularyRealSize = 3;
  padded.params[0].padding = ParamInfo::Padding{0, 3};
  ASSERT_TRUE(padded.vocabularyPadded());

  TrainingState state = trainedState(padded);
  for (auto *table : {&state.params, &state.states})
    for (TrainingState::Tensor &t : *table)
      if (t.shape.size() == 2)
        std::fill(t.values.begin() + 12, t.values.end(), 0.0f); // the padded row
  ASSERT_TRUE(saveCheckpoint(tmp / "ckpt", padded, state).ok());

  Expected<TrainingState> unpadded = loadCheckpoint(tmp / "ckpt", real);
  ASSERT_TRUE(unpadded.ok()) << unpadded.error().message();
  EXPECT_EQ(unpadded->params[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(unpadded->params[0].values,
            std::vector<float>(state.params[0].values.begin(), state.params[0].values.begin() + 12));
  EXPECT_EQ(unpadded->states[1].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(withRealVocabulary(padded, state).params[0].values, unpadded->params[0].values);

  Expected<TrainingState> again = loadCheckpoint(tmp / "ckpt", padded);
  ASSERT_TRUE(again.ok()) << again.error().message();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(again->params[i].shape, state.params[i].shape);
    EXPECT_EQ(again->params[i].values, state.params[i].values);
    EXPECT_EQ(again->states[i].values, state.states[i].values);
  }
}
