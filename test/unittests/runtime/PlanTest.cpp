//===- PlanTest.cpp - Loading and verifying plan directories --------------===//
//
// Plans are built here by writing plan.json, program.mlir and a MANIFEST with their sizes and
// SHA-256s (docs/plan-format.md); each rejection case breaks one thing.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanSummary.h"
#include "runtime/plan/Sharding.h"

#include "runtime/support/Sha256.h"

#include "PipelineTestSchedules.h"
#include "TempDir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

using namespace mtc::rt;
using mtc::rt::test::readBytes;
using mtc::rt::test::TempDir;
using mtc::rt::test::writeBytes;

namespace {

JsonValue dimList(std::initializer_list<std::pair<const char *, int64_t>> dims) {
  JsonArray a;
  for (const auto &[name, size] : dims)
    a.push_back(JsonObject{{"name", name}, {"size", size}});
  return a;
}

JsonValue param(const char *name, int64_t id, JsonValue dims, JsonValue init, bool decay,
                const char *layer = nullptr, int64_t instances = 1) {
  JsonObject p{{"name", name},          {"tensor_id", id},         {"dims", std::move(dims)},
               {"dtype", "f32"},        {"init", std::move(init)}, {"weight_decay", decay},
               {"instances", instances}};
  if (layer)
    p.set("layer", layer);
  return p;
}

JsonValue init(const char *kind, JsonArray args = {}) {
  return JsonObject{{"kind", kind}, {"args", std::move(args)}};
}

/// A small valid plan.json: a GPT-like model with two model parameters and two layer
/// parameters stacked over 2 instances.
JsonValue validPlan() {
  JsonArray params;
  params.push_back(
      param("wte", 0, dimList({{"vocab", 16}, {"hidden", 8}}), init("normal", {0.02}), true));
  params.push_back(param("lnf.g", 1, dimList({{"hidden", 8}}), init("ones"), false));
  params.push_back(param("block.wq", 2, dimList({{"layers", 2}, {"hidden", 8}, {"hidden", 8}}),
                         init("normal", {0.5, 1.0}), true, "block", 2));
  params.push_back(param("block.b", 3, dimList({{"layers", 2}, {"hidden", 8}}),
                         init("uniform", {-0.1, 0.1}), false, "block", 2));
  JsonArray states;
  states.push_back(JsonObject{{"name", "wte.exp_avg"},
                              {"of", "wte"},
                              {"dims", dimList({{"vocab", 16}, {"hidden", 8}})},
                              {"dtype", "f32"}});
  states.push_back(JsonObject{{"name", "block.wq.exp_avg"},
                              {"of", "block.wq"},
                              {"dims", dimList({{"layers", 2}, {"hidden", 8}, {"hidden", 8}})},
                              {"dtype", "f32"}});
  JsonArray inputs;
  inputs.push_back(JsonObject{
      {"name", "tokens"}, {"dtype", "i32"}, {"dims", dimList({{"batch", 4}, {"seq", 8}})}});
  inputs.push_back(JsonObject{
      {"name", "labels"}, {"dtype", "i32"}, {"dims", dimList({{"batch", 4}, {"seq", 8}})}});
  return JsonObject{
      {"format", "mtc-plan"},
      {"version", 3},
      {"compiler", "mtc 0.1.0 (LLVM/MLIR 22.1.8)"},
      {"model", "tiny"},
      {"source", JsonObject{{"path", "tiny.mtl"}, {"sha256", std::string(64, '0')}}},
      {"seed", 1234},
      {"dims", JsonObject{{"batch", 4}, {"seq", 8}, {"vocab", 16}, {"hidden", 8}, {"layers", 2}}},
      {"vocabulary", "vocab"},
      {"train", JsonObject{{"steps", 10}, {"lr", 0.001}}},
      {"parallel", JsonObject{}},
      {"inputs", std::move(inputs)},
      {"params", std::move(params)},
      {"states", std::move(states)},
      {"functions", JsonArray{"forward", "forward_backward", "optimizer_step"}},
      {"predictions",
       JsonObject{{"parameters", 296},
                  {"flops_per_token", JsonObject{{"forward", 1000}, {"backward", 2000}}},
                  {"memory_bytes", JsonObject{{"parameters", 1184},
                                              {"gradients", 1184},
                                              {"optimizer_state", 1024},
                                              {"saved_activations", 512},
                                              {"total", 3904}}}}},
      {"unknown_future_key", JsonArray{1, 2, 3}},
  };
}

std::string manifestLine(std::string_view name, std::string_view bytes) {
  return sha256Hex(bytes) + " " + std::to_string(bytes.size()) + " " + std::string(name) + "\n";
}

class PlanTest : public ::testing::Test {
protected:
  std::filesystem::path plan() const { return dir_ / "model.plan"; }
  std::string where() const { return plan().string(); }

  /// Writes plan.json, program.mlir and a correct MANIFEST.
  void writePlan(const JsonValue &json) {
    std::filesystem::create_directories(plan());
    planJson_ = json.serialize(2) + "\n";
    writeBytes(plan() / "plan.json", planJson_);
    writeBytes(plan() / "program.mlir", program_);
    writeBytes(plan() / "MANIFEST", "mtc-plan 3\n" + manifestLine("plan.json", planJson_) +
                                        manifestLine("program.mlir", program_));
  }
  void writeManifest(std::string_view text) { writeBytes(plan() / "MANIFEST", text); }

  /// Writes `json` with a kernel file `kernels/x86_64.so` listed in MANIFEST (plan.json and
  /// the kernels only) and loads the plan.
  Expected<Plan> loadWithKernelFile(const JsonValue &json) {
    writePlan(json);
    std::filesystem::create_directories(plan() / "kernels");
    writeBytes(plan() / "kernels" / "x86_64.so", "ELF");
    writeManifest("mtc-plan 3\n" + manifestLine("plan.json", planJson_) +
                  manifestLine("kernels/x86_64.so", "ELF"));
    return loadPlan(plan());
  }

  /// loadPlan's error message (failing the test if it loaded).
  std::string loadError() {
    Expected<Plan> p = loadPlan(plan());
    EXPECT_FALSE(p.ok()) << "the plan loaded";
    return p.ok() ? std::string() : p.error().message();
  }

  /// Writes `json` with a correct MANIFEST and expects the error "<plan>/plan.json: <what>".
  void expectPlanJsonError(const JsonValue &json, const std::string &what) {
    writePlan(json);
    std::string message = loadError();
    EXPECT_EQ(message.rfind(where() + "/plan.json: ", 0), 0u) << message;
    EXPECT_NE(message.find(what), std::string::npos)
        << "message: " << message << "\nexpected: " << what;
  }

  /// The valid plan changed by `edit`.
  static JsonValue edited(const std::function<void(JsonObject &)> &edit) {
    JsonValue v = validPlan();
    edit(*v.getObject());
    return v;
  }
  static JsonObject &at(JsonObject &o, std::string_view key) { return *o.find(key)->getObject(); }
  static JsonObject &paramAt(JsonObject &o, size_t i) {
    return *(*o.find("params")->getArray())[i].getObject();
  }

  TempDir dir_;
  std::string planJson_;
  std::string program_ = "module {\n}\n";
};

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "message: " << (haystack) << "\nexpected: " << (needle)

TEST_F(PlanTest, LoadsAValidPlan) {
  writePlan(validPlan());
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->dir, plan());
  EXPECT_EQ(p->version, 3);
  EXPECT_EQ(p->model, "tiny");
  EXPECT_EQ(p->compiler, "mtc 0.1.0 (LLVM/MLIR 22.1.8)");
  EXPECT_EQ(p->sourcePath, "tiny.mtl");
  EXPECT_EQ(p->seed, 1234u);
  EXPECT_EQ(p->vocabularySize(), 16);
  EXPECT_EQ(p->planSha256, sha256Hex(planJson_));
  ASSERT_EQ(p->files.size(), 2u);
  EXPECT_EQ(p->files[0].name, "plan.json");
  EXPECT_EQ(p->files[0].size, planJson_.size());
  EXPECT_EQ(p->files[1].name, "program.mlir");
  EXPECT_EQ(p->files[1].sha256, sha256Hex(program_));
  ASSERT_NE(p->findFile("program.mlir"), nullptr);

  ASSERT_EQ(p->dims.size(), 5u);
  EXPECT_EQ(p->dims[0], (Dim{"batch", 4}));
  EXPECT_EQ(p->dims[3], (Dim{"hidden", 8}));
  EXPECT_EQ(p->dimSize("vocab"), 16);
  EXPECT_FALSE(p->dimSize("nope"));
  EXPECT_EQ(p->train.getObject()->find("steps")->getInt(), 10);
  EXPECT_EQ(p->steps, 10);
  EXPECT_TRUE(p->parallel.getObject()->empty());

  ASSERT_EQ(p->inputs.size(), 2u);
  EXPECT_EQ(p->inputs[0].name, "tokens");
  EXPECT_EQ(p->inputs[0].dtype, PlanDType::I32);
  EXPECT_EQ(formatDims(p->inputs[1].dims), "[batch=4, seq=8]");

  ASSERT_EQ(p->params.size(), 4u);
  const ParamInfo &wte = p->params[0];
  EXPECT_EQ(wte.name, "wte");
  EXPECT_FALSE(wte.layer);
  EXPECT_EQ(wte.instances, 1);
  EXPECT_EQ(wte.tensorId, 0u);
  EXPECT_EQ(wte.dtype, PlanDType::F32);
  EXPECT_EQ(wte.init.kind, InitKind::Normal);
  EXPECT_EQ(wte.init.args, std::vector<double>{0.02});
  EXPECT_EQ(wte.init.describe(), "normal(0.02)");
  EXPECT_TRUE(wte.weightDecay);
  EXPECT_EQ(wte.numElements(), 128);
  EXPECT_EQ(wte.shape(), (std::vector<int64_t>{16, 8}));
  const ParamInfo &wq = p->params[2];
  EXPECT_EQ(wq.layer, "block");
  EXPECT_EQ(wq.instances, 2);
  EXPECT_EQ(wq.tensorId, 2u);
  EXPECT_EQ(wq.numElements(), 128);
  EXPECT_EQ(formatDims(wq.dims), "[layers=2, hidden=8, hidden=8]");
  EXPECT_EQ(wq.init.describe(), "normal(0.5, 1)");
  EXPECT_EQ(p->params[1].init.kind, InitKind::Ones);
  EXPECT_FALSE(p->params[1].weightDecay);
  EXPECT_EQ(p->params[3].init.kind, InitKind::Uniform);
  EXPECT_EQ(p->findParam("block.b"), &p->params[3]);
  EXPECT_EQ(p->findParam("b"), nullptr);
  EXPECT_EQ(p->numParameterElements(), 128 + 8 + 128 + 16);

  ASSERT_EQ(p->states.size(), 2u);
  EXPECT_EQ(p->states[1].name, "block.wq.exp_avg");
  EXPECT_EQ(p->states[1].of, "block.wq");
  EXPECT_EQ(p->states[1].paramIndex, 2u);
  EXPECT_EQ(p->states[1].numElements(), 128);

  EXPECT_EQ(p->functions,
            (std::vector<std::string>{"forward", "forward_backward", "optimizer_step"}));
  EXPECT_EQ(p->predictions.parameters, 296);
  EXPECT_EQ(p->predictions.forwardFlopsPerToken, 1000);
  EXPECT_EQ(p->predictions.backwardFlopsPerToken, 2000);
  EXPECT_EQ(p->predictions.memoryBytes.optimizerState, 1024);
  EXPECT_EQ(p->predictions.memoryBytes.savedActivations, 512);
  EXPECT_EQ(p->predictions.memoryBytes.total, 3904);
  EXPECT_FALSE(p->predictions.memoryBytes.workspace) << "a plan without kernels";
  EXPECT_FALSE(p->predictions.memoryBytes.peak);
}

// A vocabulary the compiler padded for tp: `vocabulary_size` is the real size, `dims` the
// padded one; the parameters with the vocabulary know where it lies and its real size.
TEST_F(PlanTest, PaddedVocabulary) {
  writePlan(edited([](JsonObject &o) { o.set("vocabulary_size", 15); }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->vocabularySize(), 15);
  EXPECT_EQ(p->dimSize("vocab"), 16);
  EXPECT_TRUE(p->vocabularyPadded());
  const ParamInfo &wte = p->params[0];
  ASSERT_TRUE(wte.padding);
  EXPECT_EQ(wte.padding->dim, 0u);
  EXPECT_EQ(wte.padding->realSize, 15);
  for (size_t i = 1; i < p->params.size(); ++i)
    EXPECT_FALSE(p->params[i].padding) << p->params[i].name;

  writePlan(edited([](JsonObject &o) { o.set("vocabulary_size", 16); }));
  p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(p->vocabularyPadded());
  EXPECT_FALSE(p->params[0].padding);

  expectPlanJsonError(edited([](JsonObject &o) { o.set("vocabulary_size", 17); }),
                      "vocabulary_size: 17 exceeds the size 16 of dimension 'vocab'");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("vocabulary_size", 0); }),
                      "vocabulary_size: expected a positive integer (the vocabulary's real "
                      "size), found the integer 0");
}

TEST_F(PlanTest, PredictedWorkspaceAndPeak) {
  writePlan(edited([](JsonObject &o) {
    JsonObject &memory = at(at(o, "predictions"), "memory_bytes");
    memory.set("workspace", 4096);
    memory.set("peak", 9000);
  }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->predictions.memoryBytes.workspace, 4096);
  EXPECT_EQ(p->predictions.memoryBytes.peak, 9000);
  expectPlanJsonError(edited([](JsonObject &o) {
                        at(at(o, "predictions"), "memory_bytes").set("peak", -1);
                      }),
                      "predictions.memory_bytes.peak: expected a non-negative integer");
}

TEST_F(PlanTest, PredictedCommunication) {
  writePlan(validPlan());
  Expected<Plan> none = loadPlan(plan());
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_FALSE(none->predictions.communicationBytes) << "a plan without kernels";
  writePlan(edited([](JsonObject &o) {
    JsonObject comm;
    comm.set("forward_backward", 1481984);
    comm.set("optimizer_step", 44);
    comm.set("chunk1.forward", 4096);
    at(o, "predictions").set("communication_bytes", std::move(comm));
  }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->predictions.communicationBytes);
  EXPECT_EQ(p->predictions.communicationBytes->forwardBackward, 1481984);
  EXPECT_EQ(p->predictions.communicationBytes->optimizerStep, 44);
  // A pipeline function's figure, by name.
  EXPECT_EQ(p->predictions.communicationBytes->pipelineFunctions,
            (std::map<std::string, int64_t, std::less<>>{{"chunk1.forward", 4096}}));
  EXPECT_FALSE(p->predictions.communicationBytes->upperBound);
  // Dropless expert slots travel only where filled: the figures are an upper bound.
  writePlan(edited([](JsonObject &o) {
    JsonObject comm;
    comm.set("forward_backward", 1481984);
    comm.set("optimizer_step", 44);
    comm.set("upper_bound", true);
    at(o, "predictions").set("communication_bytes", std::move(comm));
  }));
  Expected<Plan> bound = loadPlan(plan());
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  EXPECT_TRUE(bound->predictions.communicationBytes->upperBound);
  expectPlanJsonError(edited([](JsonObject &o) {
                        JsonObject comm;
                        comm.set("forward_backward", 1);
                        comm.set("optimizer_step", 1);
                        comm.set("upper_bound", 1);
                        at(o, "predictions").set("communication_bytes", std::move(comm));
                      }),
                      "predictions.communication_bytes.upper_bound: expected true or false, "
                      "found the integer 1");
  expectPlanJsonError(edited([](JsonObject &o) {
                        JsonObject comm;
                        comm.set("forward_backward", 1);
                        comm.set("optimizer_step", 1);
                        comm.set("stage0.optimizer_step", -3);
                        at(o, "predictions").set("communication_bytes", std::move(comm));
                      }),
                      "predictions.communication_bytes.stage0.optimizer_step: expected a "
                      "non-negative integer");
  expectPlanJsonError(edited([](JsonObject &o) {
                        JsonObject comm;
                        comm.set("forward_backward", 1);
                        at(o, "predictions").set("communication_bytes", std::move(comm));
                      }),
                      "predictions.communication_bytes: missing key 'optimizer_step'");
}

TEST_F(PlanTest, StepsDefaultToZero) {
  writePlan(edited([](JsonObject &o) { at(o, "train").erase("steps"); }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->steps, 0);
}

TEST_F(PlanTest, Fp16PlansScaleTheLoss) {
  for (auto [precision, scaling] : {std::pair{"fp16", true}, {"bf16", false}, {"fp32", false}}) {
    writePlan(edited([&](JsonObject &o) { at(o, "train").set("precision", precision); }));
    Expected<Plan> p = loadPlan(plan());
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ(p->lossScaling, scaling) << precision;
  }
  writePlan(edited([](JsonObject &o) { at(o, "train").erase("precision"); }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(p->lossScaling);
}

// Megatron's --eod-mask-loss: train.eod_mask_loss and the loss mask among the inputs, after
// the tokens and the labels, go together.
TEST_F(PlanTest, LossMaskGoesWithEodMaskLoss) {
  auto withMask = [](JsonObject &o) {
    at(o, "train").set("eod_mask_loss", true);
    o.find("inputs")->getArray()->push_back(JsonObject{
        {"name", "loss_mask"}, {"dtype", "f32"}, {"dims", dimList({{"batch", 4}, {"seq", 8}})}});
  };
  writePlan(edited(withMask));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->eodMaskLoss);
  writePlan(validPlan());
  p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(p->eodMaskLoss);

  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("eod_mask_loss", true); }),
                      "inputs: takes no loss mask, but train.eod_mask_loss is true");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withMask(o);
                        at(o, "train").erase("eod_mask_loss");
                      }),
                      "inputs: takes a loss mask, but train.eod_mask_loss is not true");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withMask(o);
                        (*o.find("inputs")->getArray())[2].getObject()->set("dtype", "i32");
                      }),
                      "inputs[2].dtype: the loss mask must be f32");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withMask(o);
                        (*o.find("inputs")->getArray())[2].getObject()->set(
                            "dims", dimList({{"seq", 8}, {"batch", 4}}));
                      }),
                      "inputs[2].dims: [seq=8, batch=4] are not the labels' dims [batch=4, seq=8]");
  expectPlanJsonError(edited([](JsonObject &o) {
                        (*o.find("inputs")->getArray())[1].getObject()->set("name", "loss_mask");
                      }),
                      "inputs[1].name: the loss mask comes after the tokens and the labels");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("eod_mask_loss", "on"); }),
                      "train.eod_mask_loss: expected true or false, found the string 'on'");
}

// Megatron's --reset-position-ids: train.reset_position_ids and the position ids among the
// inputs, last, i32 with the tokens' dims, go together.
TEST_F(PlanTest, PositionIdsGoWithResetPositionIds) {
  auto withIds = [](JsonObject &o) {
    at(o, "train").set("reset_position_ids", true);
    o.find("inputs")->getArray()->push_back(JsonObject{{"name", "position_ids"},
                                                       {"dtype", "i32"},
                                                       {"dims", dimList({{"batch", 4}, {"seq", 8}})}});
  };
  writePlan(edited(withIds));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->resetPositionIds);
  writePlan(validPlan());
  p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(p->resetPositionIds);

  expectPlanJsonError(
      edited([](JsonObject &o) { at(o, "train").set("reset_position_ids", true); }),
      "inputs: takes no position ids, but train.reset_position_ids is true");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withIds(o);
                        at(o, "train").erase("reset_position_ids");
                      }),
                      "inputs: takes position ids, but neither train.reset_position_ids nor "
                      "train.reset_attention_mask is true");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withIds(o);
                        (*o.find("inputs")->getArray())[2].getObject()->set("dtype", "f32");
                      }),
                      "inputs[2].dtype: the position ids must be i32");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withIds(o);
                        (*o.find("inputs")->getArray())[2].getObject()->set(
                            "dims", dimList({{"seq", 8}, {"batch", 4}}));
                      }),
                      "inputs[2].dims: [seq=8, batch=4] are not the tokens' dims [batch=4, seq=8]");
  // Not last: the loss mask after them.
  expectPlanJsonError(edited([&](JsonObject &o) {
                        withIds(o);
                        at(o, "train").set("eod_mask_loss", true);
                        o.find("inputs")->getArray()->push_back(
                            JsonObject{{"name", "loss_mask"},
                                       {"dtype", "f32"},
                                       {"dims", dimList({{"batch", 4}, {"seq", 8}})}});
                      }),
                      "inputs[2].name: the position ids are the last of the data inputs, after "
                      "the tokens");
  expectPlanJsonError(
      edited([](JsonObject &o) { at(o, "train").set("reset_position_ids", "on"); }),
      "train.reset_position_ids: expected true or false, found the string 'on'");
}

// Megatron's --reset-attention-mask: train.reset_attention_mask takes the same position ids
// (the documents attention stays within), alone or with reset_position_ids.
TEST_F(PlanTest, PositionIdsGoWithResetAttentionMask) {
  auto withIds = [](JsonObject &o) {
    at(o, "train").set("reset_attention_mask", true);
    o.find("inputs")->getArray()->push_back(
        JsonObject{{"name", "position_ids"},
                   {"dtype", "i32"},
                   {"dims", dimList({{"batch", 4}, {"seq", 8}})}});
  };
  writePlan(edited(withIds));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->resetAttentionMask);
  EXPECT_FALSE(p->resetPositionIds);
  EXPECT_TRUE(p->takesPositionIds());
  writePlan(edited([&](JsonObject &o) {
    withIds(o);
    at(o, "train").set("reset_position_ids", true);
  }));
  p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->resetAttentionMask && p->resetPositionIds && p->takesPositionIds());
  writePlan(validPlan());
  p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(p->resetAttentionMask || p->takesPositionIds());

  expectPlanJsonError(
      edited([](JsonObject &o) { at(o, "train").set("reset_attention_mask", true); }),
      "inputs: takes no position ids, but train.reset_attention_mask is true");
  expectPlanJsonError(
      edited([](JsonObject &o) { at(o, "train").set("reset_attention_mask", 1); }),
      "train.reset_attention_mask: expected true or false");
}

TEST_F(PlanTest, TrailingSlashIsNotShownTwice) {
  writePlan(validPlan());
  std::filesystem::remove(plan() / "program.mlir");
  Expected<Plan> p = loadPlan(where() + "/");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message(), where() + ": program.mlir is listed in MANIFEST but missing");
}

TEST_F(PlanTest, ExtraFilesAndKernelsPrefix) {
  writePlan(validPlan());
  std::filesystem::create_directories(plan() / "kernels");
  writeBytes(plan() / "kernels" / "x86_64.so", "ELF");
  writeBytes(plan() / "notes.txt", "not listed, ignored");
  writeManifest("mtc-plan 3\n" + manifestLine("plan.json", planJson_) +
                manifestLine("kernels/x86_64.so", "ELF"));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->files.size(), 2u);
  EXPECT_EQ(p->files[1].name, "kernels/x86_64.so");
}

TEST_F(PlanTest, ModelDimsAsAList) {
  writePlan(edited([](JsonObject &o) {
    o.set("dims", dimList({{"batch", 4}, {"seq", 8}, {"vocab", 16}, {"hidden", 8}}));
  }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->dims.size(), 4u);
  EXPECT_EQ(p->dimSize("hidden"), 8);
}

//===----------------------------------------------------------------------===//
// The directory and MANIFEST
//===----------------------------------------------------------------------===//

TEST_F(PlanTest, NoDirectory) { EXPECT_EQ(loadError(), where() + ": no such plan directory"); }

TEST_F(PlanTest, NotADirectory) {
  writeBytes(plan(), "a file");
  EXPECT_CONTAINS(loadError(), where() + ": not a plan directory");
}

TEST_F(PlanTest, MissingManifest) {
  writePlan(validPlan());
  std::filesystem::remove(plan() / "MANIFEST");
  EXPECT_EQ(loadError(), where() + ": no MANIFEST (not a plan directory, or an incomplete one)");
}

TEST_F(PlanTest, ManifestIsADirectory) {
  std::filesystem::create_directories(plan() / "MANIFEST");
  EXPECT_EQ(loadError(), where() + ": MANIFEST is a directory, not a regular file");
}

// A FIFO where a plan file belongs blocked the loader forever (mtrun and mtc inspect).
TEST_F(PlanTest, ManifestIsAFifo) {
  writePlan(validPlan());
  std::filesystem::remove(plan() / "MANIFEST");
  ASSERT_EQ(::mkfifo((plan() / "MANIFEST").c_str(), 0600), 0);
  EXPECT_EQ(loadError(), where() + ": MANIFEST is a FIFO (named pipe), not a regular file");
}

TEST_F(PlanTest, EmptyManifest) {
  writePlan(validPlan());
  writeManifest("");
  EXPECT_EQ(loadError(), where() + ": MANIFEST is empty");
}

TEST_F(PlanTest, OtherFormat) {
  writePlan(validPlan());
  writeManifest("safetensors 1\n");
  EXPECT_EQ(loadError(), where() + ": MANIFEST is not an mtc plan manifest: its first line is "
                                   "'safetensors 1', expected 'mtc-plan 3'");
}

TEST_F(PlanTest, UnsupportedVersion) {
  writePlan(validPlan());
  // A plan of version 1, whose kernels take no kernel context, and one of version 2, whose
  // optimizer returns new copies of the parameters, are refused.
  writeManifest("mtc-plan 1\n" + manifestLine("plan.json", planJson_));
  EXPECT_EQ(loadError(), where() + ": unsupported plan version 1 (this mtrun reads version 3)");
  writeManifest("mtc-plan 2\n" + manifestLine("plan.json", planJson_));
  EXPECT_EQ(loadError(), where() + ": unsupported plan version 2 (this mtrun reads version 3)");
  writeManifest("mtc-plan 4\n" + manifestLine("plan.json", planJson_));
  EXPECT_EQ(loadError(), where() + ": unsupported plan version 4 (this mtrun reads version 3)");
  writeManifest("mtc-plan 12345678901234567890123\n");
  EXPECT_CONTAINS(loadError(), "unsupported plan version 12345678901234567890123");
}

TEST_F(PlanTest, MalformedFormatLine) {
  writePlan(validPlan());
  for (std::string first : {"mtc-plan", "mtc-plan ", "mtc-plan x", "mtc-plan 01", "mtc-plan 3 x",
                            "mtc-plan -1", "mtc-plan 3\r"}) {
    writeManifest(first + "\n" + manifestLine("plan.json", planJson_));
    EXPECT_CONTAINS(loadError(), where() + ": MANIFEST line 1: malformed format line");
  }
}

TEST_F(PlanTest, MalformedLines) {
  writePlan(validPlan());
  std::string good = manifestLine("plan.json", planJson_);
  std::string hash = sha256Hex(planJson_);
  std::string size = std::to_string(planJson_.size());
  struct Case {
    std::string line;
    std::string what;
  };
  const std::vector<Case> cases = {
      {"garbage", "MANIFEST line 3: malformed line 'garbage' (expected '<sha256 hex> <size in "
                  "bytes> <file name>')"},
      {hash + " " + size, "MANIFEST line 3: malformed line"},
      {hash.substr(1) + " 5 x", "the SHA-256 must be 64 lowercase hex digits"},
      {std::string(64, 'A') + " 5 x", "the SHA-256 must be 64 lowercase hex digits"},
      {hash + " -5 x", "the size must be a decimal number of bytes"},
      {hash + " 5a x", "the size must be a decimal number of bytes"},
      {hash + " 05 x", "the size must be a decimal number of bytes"},
      {hash + " 99999999999999999999999 x", "the size must be a decimal number of bytes"},
      {hash + "  5 x", "the size must be a decimal number of bytes"},
      {hash + " 5 x\r", "carriage return"},
      {"", "MANIFEST line 3: empty line"},
      {hash + " 5 \x01x", "unsafe file name '\\x01x'"},
  };
  for (const Case &c : cases) {
    writeManifest("mtc-plan 3\n" + good + c.line + "\n");
    std::string message = loadError();
    EXPECT_EQ(message.rfind(where() + ": ", 0), 0u) << message;
    EXPECT_CONTAINS(message, c.what);
  }
  // A control character is shown escaped.
  writeManifest("mtc-plan 3\n" + good + "ab\x01\n");
  EXPECT_CONTAINS(loadError(), "'ab\\x01'");
}

TEST_F(PlanTest, UnsafeNames) {
  writePlan(validPlan());
  std::string good = manifestLine("plan.json", planJson_);
  for (std::string name :
       {"../plan.json", "/etc/passwd", "sub/plan.json", ".hidden", "..", ".",
        "kernels/../plan.json", "kernels/", "kernels/a/b", "a b", "back\\slash"}) {
    writeManifest("mtc-plan 3\n" + good + manifestLine(name, "x"));
    EXPECT_CONTAINS(loadError(), where() + ": MANIFEST line 3: unsafe file name '" + name + "'");
  }
  EXPECT_TRUE(isSafePlanFileName("plan.json"));
  EXPECT_TRUE(isSafePlanFileName("kernels/sm_90.ptx"));
  EXPECT_TRUE(isSafePlanFileName("rank-3+1.mlir"));
  EXPECT_FALSE(isSafePlanFileName("kernels/.x"));
  EXPECT_FALSE(isSafePlanFileName(""));
}

TEST_F(PlanTest, DuplicateSelfAndMissingPlanJson) {
  writePlan(validPlan());
  std::string good = manifestLine("plan.json", planJson_);
  writeManifest("mtc-plan 3\n" + good + manifestLine("program.mlir", program_) + good);
  EXPECT_EQ(loadError(),
            where() + ": MANIFEST line 4: 'plan.json' is listed twice (also on line 2)");
  writeManifest("mtc-plan 3\n" + good + manifestLine("MANIFEST", "x"));
  EXPECT_EQ(loadError(), where() + ": MANIFEST line 3: MANIFEST cannot list itself");
  writeManifest("mtc-plan 3\n" + manifestLine("program.mlir", program_));
  EXPECT_EQ(loadError(), where() + ": MANIFEST does not list plan.json");
  writeManifest("mtc-plan 3\n");
  EXPECT_EQ(loadError(), where() + ": MANIFEST does not list plan.json");
}

TEST_F(PlanTest, MissingLineEnd) {
  writePlan(validPlan());
  std::string good = manifestLine("plan.json", planJson_);
  writeManifest("mtc-plan 3\n" + good.substr(0, good.size() - 1));
  EXPECT_CONTAINS(loadError(), where() + ": MANIFEST line 2: no line end after");
  EXPECT_CONTAINS(loadError(), "(truncated?)");
  writeManifest("mtc-plan 3");
  EXPECT_CONTAINS(loadError(), where() + ": MANIFEST line 1: no line end after 'mtc-plan 3'");
}

TEST_F(PlanTest, MissingListedFile) {
  writePlan(validPlan());
  std::filesystem::remove(plan() / "program.mlir");
  EXPECT_EQ(loadError(), where() + ": program.mlir is listed in MANIFEST but missing");
  writePlan(validPlan());
  std::filesystem::remove(plan() / "plan.json");
  EXPECT_EQ(loadError(), where() + ": plan.json is listed in MANIFEST but missing");
}

TEST_F(PlanTest, ListedFileIsADirectory) {
  writePlan(validPlan());
  std::filesystem::remove(plan() / "program.mlir");
  std::filesystem::create_directories(plan() / "program.mlir");
  EXPECT_EQ(loadError(), where() + ": program.mlir is a directory, not a regular file");
}

TEST_F(PlanTest, PlanJsonIsAFifo) {
  writePlan(validPlan());
  std::filesystem::remove(plan() / "plan.json");
  ASSERT_EQ(::mkfifo((plan() / "plan.json").c_str(), 0600), 0);
  EXPECT_EQ(loadError(), where() + ": plan.json is a FIFO (named pipe), not a regular file");
}

TEST_F(PlanTest, TruncatedFile) {
  writePlan(validPlan());
  std::string truncated = planJson_.substr(0, planJson_.size() - 10);
  writeBytes(plan() / "plan.json", truncated);
  EXPECT_EQ(loadError(), where() + ": plan.json is " + std::to_string(truncated.size()) +
                             " bytes, MANIFEST says " + std::to_string(planJson_.size()) +
                             " (truncated?)");
}

TEST_F(PlanTest, GrownFile) {
  writePlan(validPlan());
  writeBytes(plan() / "program.mlir", program_ + "// appended\n");
  EXPECT_EQ(loadError(), where() + ": program.mlir is " + std::to_string(program_.size() + 12) +
                             " bytes, MANIFEST says " + std::to_string(program_.size()) +
                             " (modified?)");
}

TEST_F(PlanTest, ModifiedFile) {
  writePlan(validPlan());
  std::string modified = planJson_;
  size_t pos = modified.find("1234");
  ASSERT_NE(pos, std::string::npos);
  modified[pos] = '9'; // same size, different bytes
  writeBytes(plan() / "plan.json", modified);
  EXPECT_EQ(loadError(),
            where() + ": plan.json does not match its SHA-256 in MANIFEST (corrupt or modified)");
  writePlan(validPlan());
  writeBytes(plan() / "program.mlir", "module {\n]\n");
  EXPECT_EQ(loadError(), where() +
                             ": program.mlir does not match its SHA-256 in MANIFEST (corrupt or "
                             "modified)");
}

//===----------------------------------------------------------------------===//
// plan.json
//===----------------------------------------------------------------------===//

TEST_F(PlanTest, PlanJsonNotJson) {
  std::filesystem::create_directories(plan());
  std::string text = "{\"format\": \"mtc-plan\",}";
  writeBytes(plan() / "plan.json", text);
  writeManifest("mtc-plan 3\n" + manifestLine("plan.json", text));
  EXPECT_CONTAINS(loadError(), where() + "/plan.json: json: ");
  EXPECT_CONTAINS(loadError(), "(line 1, column 23)");
}

TEST_F(PlanTest, PlanJsonNotAnObject) {
  expectPlanJsonError(JsonArray{1}, "expected an object at the top level, found an array");
}

TEST_F(PlanTest, TopLevelErrors) {
  expectPlanJsonError(edited([](JsonObject &o) { o.set("format", "onnx"); }),
                      "format: expected 'mtc-plan', found 'onnx' (not an mtc plan)");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("version", 1); }),
                      "version: unsupported plan version 1 (this mtrun reads version 3)");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("version", "1"); }),
                      "version: expected a non-negative integer, found the string '1'");
  expectPlanJsonError(edited([](JsonObject &o) { o.erase("model"); }), "missing key 'model'");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("model", ""); }),
                      "model: expected a non-empty name");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("compiler", 3); }),
                      "compiler: expected a string, found the integer 3");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "source").erase("sha256"); }),
                      "source: missing key 'sha256'");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("seed", -1); }),
                      "seed: expected a non-negative integer (the random seed), found the "
                      "integer -1");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("seed", 1.5); }),
                      "seed: expected a non-negative integer (the random seed), found the "
                      "number 1.5");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("dims", 3); }),
                      "dims: expected an object of dimension sizes, found the integer 3");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "dims").set("hidden", 0); }),
                      "dims.hidden: expected a positive integer (a dimension size), found the "
                      "integer 0");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("vocabulary", "tokens"); }),
                      "vocabulary: 'tokens' is not a dimension of the model");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("train", JsonArray{}); }),
                      "train: expected an object, found an array");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("steps", -3); }),
                      "train.steps is -3, not a step count from 0 to 2147483647");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("steps", 2.5); }),
                      "train.steps is 2.5, not a step count from 0 to 2147483647");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("steps", int64_t(1) << 31); }),
                      "train.steps is 2147483648, not a step count from 0 to 2147483647");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("steps", "10"); }),
                      "train.steps is \"10\", not a step count from 0 to 2147483647");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("dropout", "off"); }),
                      "train.dropout: expected true or false, found the string 'off'");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("precision", "fp8"); }),
                      "train.precision: unknown precision 'fp8' (expected fp32, bf16 or fp16)");
  expectPlanJsonError(edited([](JsonObject &o) { at(o, "train").set("precision", 16); }),
                      "train.precision: expected a string, found the integer 16");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("parallel", nullptr); }),
                      "parallel: expected an object, found null");
  expectPlanJsonError(edited([](JsonObject &o) { o.erase("states"); }), "missing key 'states'");
  expectPlanJsonError(edited([](JsonObject &o) {
                        o.set("functions", JsonArray{"forward", 1});
                      }),
                      "functions[1]: expected a string, found the integer 1");
  expectPlanJsonError(
      edited([](JsonObject &o) { at(at(o, "predictions"), "memory_bytes").erase("total"); }),
      "predictions.memory_bytes: missing key 'total'");
  expectPlanJsonError(
      edited([](JsonObject &o) { at(at(o, "predictions"), "flops_per_token").set("forward", -1); }),
      "predictions.flops_per_token.forward: expected a non-negative integer");
  expectPlanJsonError(edited([](JsonObject &o) {
                        (*o.find("inputs")->getArray())[0].getObject()->set("dtype", "i64");
                      }),
                      "inputs[0].dtype: unknown dtype 'i64' (expected f32, bf16, f16 or f64, or "
                      "i32 for token ids)");
}

TEST_F(PlanTest, ParamErrors) {
  expectPlanJsonError(edited([](JsonObject &o) { o.set("params", JsonObject{}); }),
                      "params: expected an array, found an object");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 3).set("init", init("gaussian")); }),
                      "params[3].init.kind: unknown initialiser 'gaussian' (expected zeros, ones, "
                      "normal, uniform or constant)");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 0).erase("dtype"); }),
                      "params[0]: missing key 'dtype'");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 0).set("dtype", "i32"); }),
                      "params[0].dtype: unknown dtype 'i32' (expected f32, bf16, f16 or f64)");
  // i64 is for counts in kernel buffers (an MoE step's tokens per expert), never a parameter.
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 0).set("dtype", "i64"); }),
                      "params[0].dtype: unknown dtype 'i64' (expected f32, bf16, f16 or f64)");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 0).set("dims", "x"); }),
                      "params[0].dims: expected an array, found the string 'x'");
  expectPlanJsonError(edited([](JsonObject &o) {
                        paramAt(o, 0).set("dims", dimList({{"vocab", 16}, {"hidden", -8}}));
                      }),
                      "params[0].dims[1].size: expected a positive integer (a dimension size), "
                      "found the integer -8");
  expectPlanJsonError(edited([](JsonObject &o) {
                        paramAt(o, 0).set("dims", dimList({{"vocab", 16}, {"hidden", 9}}));
                      }),
                      "params[0].dims[1]: dimension 'hidden' has size 9 here but 8 in dims");
  expectPlanJsonError(
      edited([](JsonObject &o) {
        paramAt(o, 0).set("dims", dimList({{"a", 1 << 30}, {"b", 1 << 30}, {"c", 1 << 30}}));
      }),
      "params[0].dims: the tensor has more than 2^63 elements");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 1).set("tensor_id", 7); }),
                      "params[1].tensor_id: 7, expected 1 (the parameter's index in the table)");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 1).set("name", "wte"); }),
                      "params[1].name: duplicate parameter name 'wte' (also params[0])");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 1).set("weight_decay", 1); }),
                      "params[1].weight_decay: expected true or false, found the integer 1");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 1).set("instances", 2); }),
                      "params[1].instances: a model parameter (no 'layer') has 1 instance, "
                      "found 2");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 2).set("instances", 3); }),
                      "params[2].instances: 3, but the leading 'layers' dimension has size 2");
  expectPlanJsonError(edited([](JsonObject &o) {
                        paramAt(o, 3).set("dims", dimList({{"hidden", 8}, {"layers", 2}}));
                      }),
                      "params[3].dims: a layer parameter's dims must lead with 'layers', found "
                      "[hidden=8, layers=2]");
  expectPlanJsonError(edited([](JsonObject &o) { paramAt(o, 3).set("layer", 5); }),
                      "params[3].layer: expected a string, found the integer 5");
}

TEST_F(PlanTest, InitErrors) {
  auto withInit = [](JsonValue i) {
    return edited([&](JsonObject &o) { paramAt(o, 0).set("init", i); });
  };
  expectPlanJsonError(withInit(init("normal")),
                      "params[0].init.args: normal takes 1 or 2 arguments (std[, mean]), found 0 "
                      "arguments");
  expectPlanJsonError(withInit(init("normal", {1, 2, 3})),
                      "normal takes 1 or 2 arguments (std[, mean]), found 3 arguments");
  expectPlanJsonError(withInit(init("normal", {-0.5})),
                      "params[0].init.args[0]: normal's std must not be negative, found -0.5");
  expectPlanJsonError(withInit(init("uniform", {1})),
                      "params[0].init.args: uniform takes 2 arguments (low, high), found 1 "
                      "argument");
  expectPlanJsonError(withInit(init("uniform", {1, -1})),
                      "params[0].init.args: uniform's low (1) exceeds its high (-1)");
  expectPlanJsonError(withInit(init("zeros", {0.0})), "zeros takes no arguments, found 1 argument");
  expectPlanJsonError(withInit(init("constant")), "constant takes 1 argument (value), found 0");
  expectPlanJsonError(withInit(init("constant", {1e300})),
                      "params[0].init.args[0]: 1e+300 is outside the range of f32");
  expectPlanJsonError(withInit(init("constant", {"x"})),
                      "params[0].init.args[0]: expected a number, found the string 'x'");
  expectPlanJsonError(withInit(JsonObject{{"args", JsonArray{}}}),
                      "params[0].init: missing key 'kind'");
  // `args` may be left out where there are none.
  writePlan(withInit(JsonObject{{"kind", "ones"}}));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->params[0].init.kind, InitKind::Ones);
}

TEST_F(PlanTest, StateErrors) {
  auto state = [](JsonObject &o, size_t i) -> JsonObject & {
    return *(*o.find("states")->getArray())[i].getObject();
  };
  expectPlanJsonError(edited([&](JsonObject &o) { state(o, 0).set("of", "nope"); }),
                      "states[0].of: no parameter named 'nope'");
  expectPlanJsonError(edited([&](JsonObject &o) {
                        state(o, 1).set("dims", dimList({{"layers", 2}, {"hidden", 8}}));
                      }),
                      "states[1].dims: [layers=2, hidden=8] differ from the dims of parameter "
                      "'block.wq' [layers=2, hidden=8, hidden=8]");
  expectPlanJsonError(edited([&](JsonObject &o) { state(o, 1).set("name", "wte.exp_avg"); }),
                      "states[1].name: duplicate state name 'wte.exp_avg' (also states[0])");
}

TEST(PlanParseTest, ParseManifestDirectly) {
  auto m = parseManifest("mtc-plan 3\n" + std::string(64, 'a') + " 0 plan.json\n", "p");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->first, 3);
  ASSERT_EQ(m->second.size(), 1u);
  EXPECT_EQ(m->second[0].size, 0u);
  auto bad = parseManifest("mtc-plan 2\n", "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "p: unsupported plan version 2 (this mtrun reads version 3)");
}

TEST(PlanParseTest, NamesOfDTypesAndInits) {
  for (PlanDType d :
       {PlanDType::F32, PlanDType::BF16, PlanDType::F16, PlanDType::F64, PlanDType::I32})
    EXPECT_EQ(parsePlanDType(planDTypeName(d)), d);
  EXPECT_EQ(planDTypeSize(PlanDType::BF16), 2u);
  EXPECT_EQ(planDTypeSize(PlanDType::F64), 8u);
  EXPECT_FALSE(parsePlanDType("F32"));
  for (InitKind k :
       {InitKind::Zeros, InitKind::Ones, InitKind::Normal, InitKind::Uniform, InitKind::Constant})
    EXPECT_EQ(parseInitKind(initKindName(k)), k);
  EXPECT_FALSE(parseInitKind("gaussian"));
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(formatDims({}), "[]");
}

} // namespace

//===----------------------------------------------------------------------===//
// The kernels section
//===----------------------------------------------------------------------===//

namespace {

JsonValue kernelBuffer(const char *kind, const char *name, const char *dtype, JsonValue dims) {
  return JsonObject{{"kind", kind}, {"name", name}, {"dtype", dtype}, {"dims", std::move(dims)}};
}

/// The valid plan with a `kernels.x86_64` section naming `file`, whose forward_backward
/// takes the token ids and `wte` and returns the loss and `wte`'s gradient.
JsonValue planWithKernels(const char *file, const char *firstKind = "input") {
  JsonValue v = validPlan();
  JsonArray inputs{kernelBuffer(firstKind, "tokens", "i32", dimList({{"batch", 4}, {"seq", 8}})),
                   kernelBuffer("param", "wte", "f32", dimList({{"vocab", 16}, {"hidden", 8}}))};
  JsonArray outputs{kernelBuffer("loss", "loss", "f32", JsonArray{}),
                    kernelBuffer("grad", "wte", "f32", dimList({{"vocab", 16}, {"hidden", 8}}))};
  JsonObject forwardBackward{{"symbol", "_mtc_packed_forward_backward"},
                             {"inputs", std::move(inputs)},
                             {"outputs", std::move(outputs)}};
  v.getObject()->set(
      "kernels",
      JsonObject{{"x86_64", JsonObject{{"file", file},
                                       {"functions", JsonObject{{"forward_backward",
                                                                 std::move(forwardBackward)}}}}}});
  return v;
}

} // namespace

TEST_F(PlanTest, KernelsSection) {
  Expected<Plan> p = loadWithKernelFile(planWithKernels("kernels/x86_64.so"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->x86Kernels.has_value());
  EXPECT_EQ(p->x86Kernels->file, "kernels/x86_64.so");
  EXPECT_FALSE(p->x86Kernels->forward.has_value());
  EXPECT_FALSE(p->x86Kernels->optimizerStep.has_value());
  ASSERT_TRUE(p->x86Kernels->forwardBackward.has_value());
  const KernelFunction &fb = *p->x86Kernels->forwardBackward;
  EXPECT_EQ(fb.symbol, "_mtc_packed_forward_backward");
  ASSERT_EQ(fb.inputs.size(), 2u);
  EXPECT_EQ(fb.inputs[0].kind, BufferKind::Input);
  EXPECT_EQ(fb.inputs[0].dtype, PlanDType::I32);
  EXPECT_EQ(fb.inputs[1].kind, BufferKind::Param);
  EXPECT_EQ(fb.inputs[1].numElements(), 128);
  ASSERT_EQ(fb.outputs.size(), 2u);
  EXPECT_EQ(fb.outputs[0].kind, BufferKind::Loss);
  EXPECT_TRUE(fb.outputs[0].dims.empty());
  EXPECT_EQ(fb.outputs[1].kind, BufferKind::Grad);
}

TEST_F(PlanTest, KernelFileMustBeListed) {
  writePlan(planWithKernels("kernels/x86_64.so"));
  EXPECT_EQ(loadError(), where() + ": plan.json names the kernel file 'kernels/x86_64.so', which "
                                   "MANIFEST does not list");
}

TEST_F(PlanTest, KernelBufferKindIsChecked) {
  expectPlanJsonError(planWithKernels("kernels/x86_64.so", "weights"),
                      "kernels.x86_64.functions.forward_backward.inputs[0].kind: unknown buffer "
                      "kind 'weights'");
}

namespace {

/// planWithKernels with `arena` as forward_backward's arena.
JsonValue planWithArena(JsonValue arena) {
  JsonValue v = planWithKernels("kernels/x86_64.so");
  JsonObject &kernels = *v.getObject()->find("kernels")->getObject();
  JsonObject &fb = *kernels.find("x86_64")->getObject()->find("functions")->getObject()
                        ->find("forward_backward")->getObject();
  fb.set("arena", std::move(arena));
  return v;
}

JsonObject arena(int64_t bytes, JsonArray allocations) {
  return JsonObject{{"bytes", bytes}, {"peak_bytes", bytes}, {"allocations", std::move(allocations)}};
}

} // namespace

TEST_F(PlanTest, KernelArenaIsRead) {
  Expected<Plan> p =
      loadWithKernelFile(planWithArena(arena(256, JsonArray{JsonArray{100, 0}, JsonArray{64, 128}})));
  ASSERT_TRUE(p.ok()) << p.error().message();
  const std::optional<KernelArenaPlan> &a = p->x86Kernels->forwardBackward->arena;
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->bytes, 256);
  ASSERT_EQ(a->allocations.size(), 2u);
  EXPECT_EQ(a->allocations[1].size, 64);
  EXPECT_EQ(a->allocations[1].offset, 128);
}

TEST_F(PlanTest, KernelArenaAllocationsMustFitAndBeAligned) {
  const std::string path = "kernels.x86_64.functions.forward_backward.arena.allocations";
  expectPlanJsonError(planWithArena(arena(256, JsonArray{JsonValue(JsonArray{100, 192})})),
                      path + "[0]: [100, 192] does not fit the arena of 256 bytes");
  expectPlanJsonError(planWithArena(arena(256, JsonArray{JsonValue(JsonArray{16, 8})})),
                      path + "[0][1]: offset 8 is not a multiple of 64");
  expectPlanJsonError(planWithArena(arena(256, JsonArray{JsonValue(JsonArray{16})})),
                      path + "[0]: must be [size, offset]");
}

namespace {

/// planWithKernels with a `logits` function: the token ids and `wte` in, `outputs` out
/// (default: the f32 logits [batch, seq, vocab]); `edit` changes the function.
JsonValue planWithLogits(const std::function<void(JsonObject &)> &edit = {}) {
  JsonValue v = planWithKernels("kernels/x86_64.so");
  JsonObject logits{
      {"symbol", "_mtc_packed_logits"},
      {"inputs", JsonArray{kernelBuffer("input", "tokens", "i32", dimList({{"batch", 4}, {"seq", 8}})),
                           kernelBuffer("param", "wte", "f32", dimList({{"vocab", 16}, {"hidden", 8}}))}},
      {"outputs", JsonArray{kernelBuffer("logits", "logits", "f32",
                                         dimList({{"batch", 4}, {"seq", 8}, {"vocab", 16}}))}}};
  if (edit)
    edit(logits);
  v.getObject()->find("kernels")->getObject()->find("x86_64")->getObject()->find("functions")
      ->getObject()->set("logits", std::move(logits));
  return v;
}

} // namespace

TEST_F(PlanTest, LogitsFunctionIsRead) {
  Expected<Plan> p = loadWithKernelFile(planWithLogits());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->x86Kernels->logits.has_value());
  const KernelFunction &logits = *p->x86Kernels->logits;
  EXPECT_EQ(logits.symbol, "_mtc_packed_logits");
  ASSERT_EQ(logits.outputs.size(), 1u);
  EXPECT_EQ(logits.outputs[0].kind, BufferKind::Logits);
  EXPECT_EQ(logits.outputs[0].numElements(), 4 * 8 * 16);
  EXPECT_EQ(bufferKindName(BufferKind::Logits), "logits");
  // Absent: a plan without it (a model without a loss over token ids) still loads.
  Expected<Plan> without = loadWithKernelFile(planWithKernels("kernels/x86_64.so"));
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without->x86Kernels->logits.has_value());
}

TEST_F(PlanTest, LogitsFunctionIsChecked) {
  const std::string path = "kernels.x86_64.functions.logits";
  auto output = [](const char *kind, const char *dtype, JsonValue dims) {
    return [=](JsonObject &f) {
      f.set("outputs", JsonArray{kernelBuffer(kind, "logits", dtype, dims)});
    };
  };
  expectPlanJsonError(
      planWithLogits(output("logits", "f32", dimList({{"batch", 4}, {"vocab", 16}, {"seq", 8}}))),
      path + ".outputs[0].dims: are [batch=4, vocab=16, seq=8], but the logits of the token ids "
             "are [batch=4, seq=8, vocab=16] (the tokens' dims, then the vocabulary)");
  expectPlanJsonError(
      planWithLogits(output("logits", "f32", dimList({{"batch", 4}, {"seq", 8}, {"vocab", 12}}))),
      "are [batch=4, seq=8, vocab=12], but the logits of the token ids are [batch=4, seq=8, "
      "vocab=16]");
  expectPlanJsonError(planWithLogits(output("loss", "f32", JsonArray{})),
                      path + ".outputs[0].kind: is 'loss', expected \"logits\"");
  expectPlanJsonError(
      planWithLogits(output("logits", "i32", dimList({{"batch", 4}, {"seq", 8}, {"vocab", 16}}))),
      path + ".outputs[0].dtype: the logits must be f32");
  expectPlanJsonError(planWithLogits([](JsonObject &f) { f.set("outputs", JsonArray{}); }),
                      path + ".outputs: has 0 buffers, but the logits function returns one");
  expectPlanJsonError(
      planWithLogits([](JsonObject &f) {
        f.set("inputs", JsonArray{kernelBuffer("param", "wte", "f32",
                                               dimList({{"vocab", 16}, {"hidden", 8}}))});
      }),
      path + ".inputs: must start with the token ids (an i32 input [batch, seq])");
  expectPlanJsonError(
      planWithLogits([](JsonObject &f) {
        f.set("inputs",
              JsonArray{kernelBuffer("input", "tokens", "i32", dimList({{"batch", 4}, {"seq", 8}})),
                        kernelBuffer("state", "wte.exp_avg", "f32",
                                     dimList({{"vocab", 16}, {"hidden", 8}}))});
      }),
      path + ".inputs[1].kind: is 'state', but the logits function takes only the token ids and "
             "parameters");
  JsonValue noVocabulary = planWithLogits();
  noVocabulary.getObject()->erase("vocabulary");
  expectPlanJsonError(noVocabulary, path + ": the plan has no `vocabulary`, which the logits "
                                           "function's result needs");
}

namespace {

/// planWithLogits with `prefill` and `decode_step` as mt-kv-cache writes them (one sequence
/// of 8, a cache [layers=2, batch=1, seq_cache=8, heads=2, head_dim=4]); `edit` changes the
/// functions object after they are added.
JsonValue planWithCache(const std::function<void(JsonObject &)> &edit = {}) {
  JsonValue v = planWithLogits();
  auto cache = [] {
    return dimList({{"layers", 2}, {"batch", 1}, {"seq_cache", 8}, {"heads", 2}, {"head_dim", 4}});
  };
  JsonValue wte = kernelBuffer("param", "wte", "f32", dimList({{"vocab", 16}, {"hidden", 8}}));
  auto outputs = [&](int64_t seq) {
    return JsonArray{
        kernelBuffer("logits", "logits", "f32", dimList({{"batch", 1}, {"seq", seq}, {"vocab", 16}})),
        kernelBuffer("keys", "keys", "f32", cache()), kernelBuffer("values", "values", "f32", cache())};
  };
  JsonObject prefill{
      {"symbol", "_mtc_packed_prefill"},
      {"inputs", JsonArray{kernelBuffer("input", "tokens", "i32", dimList({{"batch", 1}, {"seq", 8}})),
                           wte}},
      {"outputs", outputs(8)}};
  JsonObject step{
      {"symbol", "_mtc_packed_decode_step"},
      {"inputs", JsonArray{kernelBuffer("input", "tokens", "i32", dimList({{"batch", 1}, {"seq", 1}})),
                           kernelBuffer("input", "position", "i32", dimList({{"seq", 1}})),
                           kernelBuffer("keys", "keys", "f32", cache()),
                           kernelBuffer("values", "values", "f32", cache()), wte}},
      {"outputs", outputs(1)}};
  JsonObject &functions = *v.getObject()->find("kernels")->getObject()->find("x86_64")
                               ->getObject()->find("functions")->getObject();
  functions.set("prefill", std::move(prefill));
  functions.set("decode_step", std::move(step));
  if (edit)
    edit(functions);
  return v;
}

} // namespace

TEST_F(PlanTest, CachedGenerationIsRead) {
  Expected<Plan> p = loadWithKernelFile(planWithCache());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->x86Kernels->prefill && p->x86Kernels->decodeStep);
  const KernelFunction &step = *p->x86Kernels->decodeStep;
  EXPECT_EQ(step.inputs[2].kind, BufferKind::Keys);
  EXPECT_EQ(step.outputs[2].kind, BufferKind::Values);
  EXPECT_EQ(step.inputs[2].numElements(), 2 * 8 * 2 * 4);
  EXPECT_EQ(bufferKindName(BufferKind::Keys), "keys");
}

TEST_F(PlanTest, CachedGenerationIsChecked) {
  const std::string path = "kernels.x86_64.functions";
  expectPlanJsonError(planWithCache([](JsonObject &f) { f.erase("decode_step"); }),
                      path + ": cached generation needs `logits`, `prefill` and `decode_step` "
                             "together");
  // The position missing: the keys come second.
  expectPlanJsonError(planWithCache([](JsonObject &f) {
                        JsonArray &inputs = *f.find("decode_step")->getObject()->find("inputs")
                                                 ->getArray();
                        inputs.erase(inputs.begin() + 1);
                      }),
                      path + ".decode_step.inputs[1]: must be the input 'position'");
  // A cache of another shape than prefill's.
  expectPlanJsonError(
      planWithCache([](JsonObject &f) {
        JsonArray &inputs = *f.find("decode_step")->getObject()->find("inputs")->getArray();
        inputs[2] = kernelBuffer("keys", "keys", "f32",
                                 dimList({{"layers", 2}, {"batch", 1}, {"seq_cache", 4},
                                          {"heads", 2}, {"head_dim", 4}}));
      }),
      path + ".decode_step: its keys are not prefill's [layers=2, batch=1, seq_cache=8, heads=2, "
             "head_dim=4]");
  // Logits of another vocabulary than the plan's.
  expectPlanJsonError(
      planWithCache([](JsonObject &f) {
        JsonArray &outputs = *f.find("prefill")->getObject()->find("outputs")->getArray();
        outputs[0] = kernelBuffer("logits", "logits", "f32",
                                  dimList({{"batch", 1}, {"seq", 8}, {"vocab", 12}}));
      }),
      path + ".prefill.outputs[0].dims: are [batch=1, seq=8, vocab=12], expected [batch=1, seq=8, "
             "vocab=16]");
}

TEST_F(PlanTest, KernelFileNameIsChecked) {
  expectPlanJsonError(planWithKernels("../x86_64.so"),
                      "kernels.x86_64.file: '../x86_64.so' is not a plan file name");
}

namespace {

/// The valid plan with a `kernels.cuda` section: sm_80 with PTX and cubin, sm_90 with PTX
/// only, and forward_backward launching one kernel on its argument 2, a temporary and a
/// scalar, and calling the GEMM.
JsonValue planWithCudaKernels() {
  JsonValue v = validPlan();
  JsonArray args{JsonObject{{"kind", "arg"}, {"index", 2}, {"bytes", 512}},
                 JsonObject{{"kind", "temp"}, {"bytes", 64}},
                 JsonObject{{"kind", "scalar"}, {"type", "index"}}};
  JsonObject launch{{"kernel", "forward_backward_kernel_0"},
                    {"grid", JsonArray{2, 1, 1}},
                    {"block", JsonArray{256, 1, 1}},
                    {"args", std::move(args)}};
  JsonObject forwardBackward{{"calls", JsonArray{"mtc_batch_matmul_f32"}},
                             {"launches", JsonArray{std::move(launch)}}};
  v.getObject()->set(
      "kernels",
      JsonObject{{"cuda",
                  JsonObject{{"block_size", 256},
                             {"binaries",
                              JsonArray{JsonObject{{"chip", "sm_80"},
                                                   {"ptx", "kernels/sm_80.ptx"},
                                                   {"cubin", "kernels/sm_80.cubin"}},
                                        JsonObject{{"chip", "sm_90"}, {"ptx", "kernels/sm_90.ptx"}}}},
                             {"functions",
                              JsonObject{{"forward_backward", std::move(forwardBackward)}}}}}});
  return v;
}

/// The cuda section of `v` (planWithCudaKernels) to edit.
JsonObject &cudaSection(JsonValue &v) {
  return *v.getObject()->find("kernels")->getObject()->find("cuda")->getObject();
}

JsonObject &firstLaunch(JsonValue &v) {
  JsonObject &fb = *cudaSection(v).find("functions")->getObject()->find("forward_backward")
                        ->getObject();
  return *(*fb.find("launches")->getArray())[0].getObject();
}

} // namespace

class CudaPlanTest : public PlanTest {
protected:
  /// Writes `json` with the CUDA files planWithCudaKernels names, each listed in MANIFEST
  /// unless it is `unlisted`, and loads the plan.
  Expected<Plan> loadWithCudaFiles(const JsonValue &json, std::string_view unlisted = {}) {
    writePlan(json);
    std::filesystem::create_directories(plan() / "kernels");
    std::string manifest = "mtc-plan 3\n" + manifestLine("plan.json", planJson_);
    for (const char *name : {"kernels/sm_80.ptx", "kernels/sm_80.cubin", "kernels/sm_90.ptx"}) {
      std::string bytes = std::string("contents of ") + name;
      writeBytes(plan() / name, bytes);
      if (name != unlisted)
        manifest += manifestLine(name, bytes);
    }
    writeManifest(manifest);
    return loadPlan(plan());
  }
};

TEST_F(CudaPlanTest, CudaKernelsAreRead) {
  Expected<Plan> p = loadWithCudaFiles(planWithCudaKernels());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_FALSE(p->x86Kernels.has_value());
  ASSERT_TRUE(p->cudaKernels.has_value());
  const CudaKernelsInfo &cuda = *p->cudaKernels;
  EXPECT_EQ(cuda.blockSize, 256);
  ASSERT_EQ(cuda.binaries.size(), 2u);
  EXPECT_EQ(cuda.binaries[0].chip, "sm_80");
  EXPECT_EQ(cuda.binaries[0].ptxFile, "kernels/sm_80.ptx");
  EXPECT_EQ(cuda.binaries[0].cubinFile, std::optional<std::string>("kernels/sm_80.cubin"));
  EXPECT_FALSE(cuda.binaries[1].cubinFile.has_value());
  ASSERT_EQ(cuda.functions.size(), 1u);
  const CudaFunction &fb = cuda.functions[0];
  EXPECT_EQ(fb.name, "forward_backward");
  EXPECT_EQ(fb.calls, std::vector<std::string>{"mtc_batch_matmul_f32"});
  ASSERT_EQ(fb.launches.size(), 1u);
  EXPECT_EQ(cuda.numLaunches(), 1u);
  const CudaLaunch &launch = fb.launches[0];
  EXPECT_EQ(launch.kernel, "forward_backward_kernel_0");
  EXPECT_EQ(launch.grid, (std::array<int64_t, 3>{2, 1, 1}));
  EXPECT_EQ(launch.block, (std::array<int64_t, 3>{256, 1, 1}));
  ASSERT_EQ(launch.args.size(), 3u);
  EXPECT_EQ(launch.args[0].kind, CudaLaunchArgument::Kind::Argument);
  EXPECT_EQ(launch.args[0].index, 2);
  EXPECT_EQ(launch.args[0].bytes, 512);
  EXPECT_EQ(launch.args[1].kind, CudaLaunchArgument::Kind::Temporary);
  EXPECT_EQ(launch.args[2].kind, CudaLaunchArgument::Kind::Scalar);
  EXPECT_EQ(launch.args[2].scalarType, "index");
  // The summary lists them, and which chip has no cubin.
  std::string summary = describePlan(*p);
  EXPECT_CONTAINS(summary, "gpu kernels: 1 CUDA kernels in 1 functions (blocks of up to 256 "
                           "threads); no executor launches them yet");
  EXPECT_CONTAINS(summary, "sm_80  kernels/sm_80.ptx, kernels/sm_80.cubin");
  EXPECT_CONTAINS(summary, "sm_90  kernels/sm_90.ptx (PTX only");
}

TEST_F(CudaPlanTest, CudaFilesMustBeListedAndIntact) {
  for (const char *name : {"kernels/sm_80.ptx", "kernels/sm_80.cubin", "kernels/sm_90.ptx"}) {
    Expected<Plan> p = loadWithCudaFiles(planWithCudaKernels(), name);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.error().message(), where() + ": plan.json names the kernel file '" + name +
                                       "', which MANIFEST does not list");
  }
  // A truncated cubin is refused like any MANIFEST entry.
  ASSERT_TRUE(loadWithCudaFiles(planWithCudaKernels()).ok());
  writeBytes(plan() / "kernels" / "sm_80.cubin", "contents");
  EXPECT_CONTAINS(loadError(), "kernels/sm_80.cubin is 8 bytes, MANIFEST says 31");
}

TEST_F(CudaPlanTest, CudaSectionErrors) {
  const std::string launch = "kernels.cuda.functions.forward_backward.launches[0]";
  auto expectError = [&](const std::function<void(JsonValue &)> &edit, const std::string &what) {
    JsonValue v = planWithCudaKernels();
    edit(v);
    writePlan(v);
    EXPECT_CONTAINS(loadError(), what);
  };
  expectError([](JsonValue &v) { cudaSection(v).set("binaries", JsonArray{}); },
              "kernels.cuda.binaries: lists no chip");
  expectError(
      [](JsonValue &v) {
        cudaSection(v).set("binaries", JsonArray{JsonObject{{"chip", "sm_80"}, {"ptx", "../a.ptx"}}});
      },
      "kernels.cuda.binaries[0].ptx: '../a.ptx' is not a plan file name");
  expectError(
      [](JsonValue &v) {
        JsonObject sm80{{"chip", "sm_80"}, {"ptx", "kernels/sm_80.ptx"}};
        cudaSection(v).set("binaries", JsonArray{sm80, sm80});
      },
      "kernels.cuda.binaries[1].chip: lists sm_80 twice");
  expectError([](JsonValue &v) { cudaSection(v).set("block_size", 2048); },
              "kernels.cuda.block_size: expected an integer from 1 to 1024");
  expectError([](JsonValue &v) { firstLaunch(v).set("grid", JsonArray{2, 1}); },
              launch + ".grid: must be [x, y, z], found 2 sizes");
  expectError([](JsonValue &v) { firstLaunch(v).set("block", JsonArray{0, 1, 1}); },
              launch + ".block[0]: expected a positive size");
  expectError([](JsonValue &v) { firstLaunch(v).set("block", JsonArray{64, 32, 1}); },
              launch + ".block: has more than 1024 threads");
  expectError(
      [](JsonValue &v) {
        (*firstLaunch(v).find("args")->getArray())[0] = JsonObject{{"kind", "texture"}};
      },
      launch + ".args[0].kind: unknown launch argument kind 'texture' (arg, temp, view or scalar)");
}

TEST(BufferKindTest, NamesRoundTrip) {
  for (BufferKind kind : {BufferKind::Input, BufferKind::Param, BufferKind::State, BufferKind::Grad,
                          BufferKind::Loss, BufferKind::Step, BufferKind::GradScale,
                          BufferKind::GradNorm, BufferKind::Lr})
    EXPECT_EQ(parseBufferKind(bufferKindName(kind)), kind);
  EXPECT_EQ(bufferKindName(BufferKind::GradScale), "grad_scale");
  EXPECT_FALSE(parseBufferKind("weights").has_value());
}

//===----------------------------------------------------------------------===//
// Mesh and layouts
//===----------------------------------------------------------------------===//

namespace {

JsonValue meshJson(std::initializer_list<std::pair<const char *, int64_t>> axes) {
  JsonArray a;
  for (const auto &[name, size] : axes)
    a.push_back(JsonObject{{"name", name}, {"size", size}});
  return JsonObject{{"axes", std::move(a)}};
}

JsonValue split(std::initializer_list<std::pair<const char *, JsonArray>> dims) {
  JsonObject s;
  for (const auto &[dim, axes] : dims)
    s.set(dim, axes);
  return JsonObject{{"split", std::move(s)}};
}

/// The valid plan with mesh tp=2 (and cp=2 when asked), wte split on vocab and block.b on
/// hidden.
JsonValue meshPlan(bool twoAxes = false) {
  JsonValue v = validPlan();
  JsonObject &o = *v.getObject();
  o.set("mesh", twoAxes ? meshJson({{"tp", 2}, {"cp", 2}}) : meshJson({{"tp", 2}}));
  (*(*o.find("params")->getArray())[0].getObject()).set("layout", split({{"vocab", {"tp"}}}));
  (*(*o.find("params")->getArray())[3].getObject())
      .set("layout", split({{"hidden", twoAxes ? JsonArray{"tp", "cp"} : JsonArray{"tp"}}}));
  return v;
}

} // namespace

TEST_F(PlanTest, MeshAndLayouts) {
  writePlan(meshPlan(/*twoAxes=*/true));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->mesh.size(), 2u);
  EXPECT_EQ(p->mesh[0], (MeshAxis{"tp", 2}));
  EXPECT_EQ(p->mesh[1], (MeshAxis{"cp", 2}));
  EXPECT_EQ(p->meshSize(), 4);
  EXPECT_EQ(p->params[0].layout, (ParamLayout{{{0, {0}}}}));
  EXPECT_TRUE(p->params[1].layout.replicated());
  EXPECT_EQ(p->params[3].layout, (ParamLayout{{{1, {0, 1}}}}));
  EXPECT_EQ(formatDims(p->localDims(p->params[0])), "[vocab=8, hidden=8]");
  EXPECT_EQ(formatDims(p->localDims(p->params[3])), "[layers=2, hidden=2]");
  EXPECT_EQ(p->localDims(p->params[1]), p->params[1].dims);
  EXPECT_EQ(p->describeLayout(p->params[3]), "hidden over tp x cp");
  // The tables keep the global dims.
  EXPECT_EQ(formatDims(p->params[0].dims), "[vocab=16, hidden=8]");
  std::string summary = describePlan(*p);
  EXPECT_CONTAINS(summary, "mesh:        tp=2 x cp=2 (4 ranks per model copy; data parallel "
                           "over the rest)\n");
  EXPECT_CONTAINS(summary, "f32[vocab=16, hidden=8] normal(0.02) decay split vocab over tp "
                           "(local [vocab=8, hidden=8])\n");
  EXPECT_CONTAINS(summary, "split hidden over tp x cp (local [layers=2, hidden=2])\n");

  // No mesh: one rank, everything replicated; an empty split list is no split.
  JsonValue v = validPlan();
  (*(*v.getObject()->find("params")->getArray())[0].getObject())
      .set("layout", split({{"vocab", JsonArray{}}}));
  writePlan(v);
  Expected<Plan> q = loadPlan(plan());
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_TRUE(q->mesh.empty());
  EXPECT_EQ(q->meshSize(), 1);
  EXPECT_TRUE(q->params[0].layout.replicated());
}

TEST_F(PlanTest, MeshErrors) {
  expectPlanJsonError(edited([](JsonObject &o) { o.set("mesh", JsonArray{}); }),
                      "mesh: expected an object, found an array");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("mesh", JsonObject{}); }),
                      "mesh: missing key 'axes'");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("mesh", meshJson({{"tp", 0}})); }),
                      "mesh.axes[0].size: expected a positive integer (the axis' number of "
                      "ranks), found the integer 0");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("mesh", meshJson({{"tp", 2}, {"tp", 2}})); }),
                      "mesh.axes[1].name: duplicate mesh axis 'tp'");
  expectPlanJsonError(edited([](JsonObject &o) { o.set("mesh", meshJson({{"", 2}})); }),
                      "mesh.axes[0].name: expected a non-empty name");
}

TEST_F(PlanTest, LayoutErrors) {
  auto withLayout = [](size_t param, JsonValue layout, bool mesh = true) {
    return edited([&](JsonObject &o) {
      if (mesh)
        o.set("mesh", meshJson({{"tp", 2}, {"cp", 3}}));
      paramAt(o, param).set("layout", layout);
    });
  };
  expectPlanJsonError(withLayout(0, split({{"heads", {"tp"}}})),
                      "params[0].layout.split.heads: parameter 'wte' has no dimension 'heads' "
                      "(its dims are [vocab=16, hidden=8])");
  expectPlanJsonError(withLayout(0, split({{"vocab", {"pp"}}})),
                      "params[0].layout.split.vocab[0]: parameter 'wte': dimension 'vocab' is "
                      "split over axis 'pp', which the mesh does not have (mesh axes: tp, cp)");
  expectPlanJsonError(withLayout(0, split({{"vocab", {"tp"}}}), /*mesh=*/false),
                      "params[0].layout.split.vocab[0]: parameter 'wte': dimension 'vocab' is "
                      "split over axis 'tp', which the mesh does not have (the plan has no mesh)");
  expectPlanJsonError(withLayout(0, split({{"vocab", {"cp"}}})),
                      "params[0].layout.split.vocab: parameter 'wte': dimension 'vocab' (size 16) "
                      "does not divide evenly over axis 'cp' (size 3)");
  expectPlanJsonError(withLayout(0, split({{"hidden", {"tp", "cp"}}})),
                      "params[0].layout.split.hidden: parameter 'wte': dimension 'hidden' (size "
                      "8) does not divide evenly over axes 'tp' (size 2) x 'cp' (size 3)");
  expectPlanJsonError(withLayout(0, split({{"vocab", {"tp"}}, {"hidden", {"tp"}}})),
                      "params[0].layout.split.hidden[0]: parameter 'wte': axis 'tp' splits both "
                      "dimension 'vocab' and dimension 'hidden'");
  expectPlanJsonError(withLayout(0, split({{"vocab", {"tp", "tp"}}})),
                      "axis 'tp' splits both dimension 'vocab' and dimension 'vocab'");
  expectPlanJsonError(withLayout(2, split({{"hidden", {"tp"}}})),
                      "params[2].layout.split.hidden: parameter 'block.wq' has two dimensions "
                      "named 'hidden'");
  expectPlanJsonError(withLayout(0, JsonObject{{"split", JsonArray{}}}),
                      "params[0].layout.split: expected an object, found an array");
  expectPlanJsonError(withLayout(0, split({{"vocab", {3}}})),
                      "params[0].layout.split.vocab[0]: expected a string, found the integer 3");
}

TEST_F(PlanTest, KernelBuffersHoldTheLocalShards) {
  // wte [vocab=16, hidden=8] split on vocab over tp=2: the kernels must declare [vocab=8, ...].
  auto withMesh = [](int64_t localVocab) {
    JsonValue v = planWithKernels("kernels/x86_64.so");
    JsonObject &o = *v.getObject();
    o.set("mesh", meshJson({{"tp", 2}}));
    paramAt(o, 0).set("layout", split({{"vocab", {"tp"}}}));
    JsonObject &fb = *(*(*o.find("kernels")->getObject()->find("x86_64"))
                            .getObject()
                            ->find("functions"))
                          .getObject()
                          ->find("forward_backward")
                          ->getObject();
    (*fb.find("inputs")->getArray())[1] =
        kernelBuffer("param", "wte", "f32", dimList({{"vocab", localVocab}, {"hidden", 8}}));
    (*fb.find("outputs")->getArray())[1] =
        kernelBuffer("grad", "wte", "f32", dimList({{"vocab", localVocab}, {"hidden", 8}}));
    return v;
  };
  expectPlanJsonError(withMesh(16),
                      "kernels.x86_64.functions.forward_backward.inputs[1].dims: param 'wte' is "
                      "[vocab=16, hidden=8], but the layout of parameter 'wte' (vocab over tp) "
                      "gives the local dims [vocab=8, hidden=8]");
  expectPlanJsonError(withMesh(4), "forward_backward.inputs[1].dims: param 'wte' is [vocab=4, "
                                   "hidden=8], but the layout");
  // The local dims load (a size that differs from the model's `vocab` is fine there).
  Expected<Plan> p = loadWithKernelFile(withMesh(8));
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->x86Kernels->forwardBackward->inputs[1].dims, p->localDims(p->params[0]));
  // Without a mesh the model's sizes are still enforced on every buffer.
  JsonValue noMesh = withMesh(8);
  noMesh.getObject()->erase("mesh");
  paramAt(*noMesh.getObject(), 0).erase("layout");
  expectPlanJsonError(noMesh, "kernels.x86_64.functions.forward_backward.inputs[1].dims[0]: "
                              "dimension 'vocab' has size 8 here but 16 in dims");
}

//===----------------------------------------------------------------------===//
// The distributed optimizer: a data-parallel mesh axis and optimizer layouts
//===----------------------------------------------------------------------===//

namespace {

/// The valid plan on mesh dp=2 x tp=2 with dp its data-parallel axis: wte [vocab, hidden]
/// split on vocab over tp, its state also on hidden over dp; lnf.g's state on hidden over dp;
/// block.wq's state on layers over dp; block.b split on hidden over tp, its state whole over dp
/// (no optimizer_layout).
JsonValue distributedOptimizerPlan() {
  JsonValue v = validPlan();
  JsonObject &o = *v.getObject();
  JsonValue mesh = meshJson({{"dp", 2}, {"tp", 2}});
  mesh.getObject()->set("data_parallel_axis", "dp");
  o.set("mesh", std::move(mesh));
  auto param = [&](size_t i) -> JsonObject & {
    return *(*o.find("params")->getArray())[i].getObject();
  };
  param(0).set("layout", split({{"vocab", {"tp"}}}));
  param(0).set("optimizer_layout", split({{"vocab", {"tp"}}, {"hidden", {"dp"}}}));
  param(1).set("optimizer_layout", split({{"hidden", {"dp"}}}));
  param(2).set("optimizer_layout", split({{"layers", {"dp"}}}));
  param(3).set("layout", split({{"hidden", {"tp"}}}));
  return v;
}

} // namespace

TEST_F(PlanTest, DataParallelAxisAndOptimizerLayouts) {
  writePlan(distributedOptimizerPlan());
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->dataParallelAxis.has_value());
  EXPECT_EQ(*p->dataParallelAxis, 0u);
  EXPECT_EQ(p->meshSize(), 4);
  const ParamInfo &wte = p->params[0], &g = p->params[1], &wq = p->params[2], &b = p->params[3];
  // Splits in dim order: vocab (0) over tp (axis 1), hidden (1) over dp (axis 0).
  EXPECT_EQ(wte.layout, (ParamLayout{{{0, {1}}}}));
  ASSERT_TRUE(wte.optimizerLayout.has_value());
  EXPECT_EQ(*wte.optimizerLayout, (ParamLayout{{{0, {1}}, {1, {0}}}}));
  EXPECT_EQ(&wte.stateLayout(), &*wte.optimizerLayout);
  EXPECT_EQ(formatDims(p->localDims(wte)), "[vocab=8, hidden=8]");
  EXPECT_EQ(formatDims(p->optimizerLocalDims(wte)), "[vocab=8, hidden=4]");
  EXPECT_EQ(p->dataParallelShardDim(wte), 1u);
  EXPECT_EQ(p->dataParallelShardDim(g), 0u);
  EXPECT_EQ(formatDims(p->optimizerLocalDims(g)), "[hidden=4]");
  EXPECT_EQ(p->dataParallelShardDim(wq), 0u);
  EXPECT_EQ(formatDims(p->optimizerLocalDims(wq)), "[layers=1, hidden=8, hidden=8]");
  // No optimizer_layout: the state has the parameter's layout, whole over dp.
  EXPECT_FALSE(b.optimizerLayout.has_value());
  EXPECT_EQ(&b.stateLayout(), &b.layout);
  EXPECT_FALSE(p->dataParallelShardDim(b).has_value());
  EXPECT_EQ(p->optimizerLocalDims(b), p->localDims(b));
  // States take their parameter's optimizer layout.
  EXPECT_EQ(p->stateLayout(p->states[0]), *wte.optimizerLayout);
  EXPECT_EQ(p->stateLayout(p->states[1]), *wq.optimizerLayout);
  EXPECT_EQ(p->describeLayout(wte.dims, *wte.optimizerLayout), "vocab over tp, hidden over dp");

  std::string summary = describePlan(*p);
  EXPECT_CONTAINS(summary, "mesh:        dp=2 x tp=2 (4 ranks; data parallel over axis 'dp' "
                           "with the distributed optimizer)\n");
  EXPECT_CONTAINS(summary, "split vocab over tp (local [vocab=8, hidden=8]); optimizer state "
                           "split vocab over tp, hidden over dp (local [vocab=8, hidden=4])\n");
  EXPECT_CONTAINS(summary, "f32[hidden=8] ones; optimizer state split hidden over dp (local "
                           "[hidden=4])\n");
  EXPECT_CONTAINS(summary, "split hidden over tp (local [layers=2, hidden=4])\n");

  // The world is exactly the mesh; the data-parallel index is the coordinate on dp.
  for (int64_t r = 0; r < 4; ++r) {
    Expected<MeshPlacement> placement = placePlanRank(*p, r, 4);
    ASSERT_TRUE(placement.ok()) << placement.error().message();
    EXPECT_EQ(placement->dpIndex, r / 2);
    EXPECT_EQ(placement->dpSize, 2);
    EXPECT_EQ(placement->meshIndex, r);
    EXPECT_EQ(placement->coordinates, (std::vector<int64_t>{r / 2, r % 2}));
  }
  for (int64_t world : {1, 2, 8}) {
    Expected<MeshPlacement> placement = placePlanRank(*p, 0, world);
    ASSERT_FALSE(placement.ok());
    EXPECT_EQ(placement.error().message(),
              concat("the plan runs on a mesh of 4 ranks (dp=2 x tp=2) whose axis 'dp' is data "
                     "parallelism (the distributed optimizer shards the optimizer state over "
                     "it), but the job has ",
                     world, world == 1 ? " rank" : " ranks",
                     ": the number of ranks must be 4 (recompile with another data-parallel "
                     "degree to change it)"));
  }

  // Only the data-parallel axis, without tensor parallelism.
  JsonValue dpOnly = validPlan();
  JsonValue mesh = meshJson({{"dp", 4}});
  mesh.getObject()->set("data_parallel_axis", "dp");
  dpOnly.getObject()->set("mesh", std::move(mesh));
  paramAt(*dpOnly.getObject(), 0).set("optimizer_layout", split({{"vocab", {"dp"}}}));
  writePlan(dpOnly);
  Expected<Plan> q = loadPlan(plan());
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ(formatDims(q->optimizerLocalDims(q->params[0])), "[vocab=4, hidden=8]");
  EXPECT_TRUE(q->params[0].layout.replicated());
  EXPECT_EQ(q->zeroStage, 1) << "a data-parallel axis without zero_stage is ZeRO-1";

  // ZeRO-2.
  dpOnly.getObject()->find("mesh")->getObject()->set("zero_stage", 2);
  writePlan(dpOnly);
  Expected<Plan> zero2 = loadPlan(plan());
  ASSERT_TRUE(zero2.ok()) << zero2.error().message();
  EXPECT_EQ(zero2->zeroStage, 2);
}

TEST_F(PlanTest, DataParallelAxisErrors) {
  auto withMesh = [](std::initializer_list<std::pair<const char *, int64_t>> axes, JsonValue dp) {
    return edited([&](JsonObject &o) {
      JsonValue mesh = meshJson(axes);
      mesh.getObject()->set("data_parallel_axis", dp);
      o.set("mesh", std::move(mesh));
    });
  };
  expectPlanJsonError(withMesh({{"dp", 2}, {"tp", 2}}, "dq"),
                      "mesh.data_parallel_axis: 'dq' is not an axis of the mesh (mesh axes: dp, "
                      "tp)");
  expectPlanJsonError(withMesh({}, "dp"),
                      "mesh.data_parallel_axis: 'dp' is not an axis of the mesh (the mesh has no "
                      "axes)");
  expectPlanJsonError(withMesh({{"tp", 2}, {"dp", 2}}, "dp"),
                      "mesh.data_parallel_axis: the data-parallel axis 'dp' must be the mesh's "
                      "first (outermost) axis, but it is axis 1 (mesh axes: tp, dp)");
  expectPlanJsonError(withMesh({{"dp", 2}}, 3),
                      "mesh.data_parallel_axis: expected a string, found the integer 3");
  // The ZeRO stage: 1, 2 or 3, and only with a data-parallel axis.
  auto withStage = [](bool dpAxis, int64_t stage) {
    return edited([&](JsonObject &o) {
      JsonValue mesh = meshJson({{"dp", 2}});
      if (dpAxis)
        mesh.getObject()->set("data_parallel_axis", "dp");
      mesh.getObject()->set("zero_stage", stage);
      o.set("mesh", std::move(mesh));
    });
  };
  expectPlanJsonError(withStage(true, 4),
                      "mesh.zero_stage: expected an integer from 1 to 3, found the integer 4");
  expectPlanJsonError(withStage(false, 2), "mesh.zero_stage: a ZeRO stage needs a data-parallel "
                                           "axis (mesh.data_parallel_axis)");
  // Parameters are whole over the data-parallel axis, but under ZeRO-3.
  auto withDataParallelLayout = [](std::optional<int64_t> stage) {
    return edited([&](JsonObject &o) {
      JsonValue mesh = meshJson({{"dp", 2}, {"tp", 2}});
      mesh.getObject()->set("data_parallel_axis", "dp");
      if (stage)
        mesh.getObject()->set("zero_stage", *stage);
      o.set("mesh", std::move(mesh));
      paramAt(o, 0).set("layout", split({{"vocab", {"dp"}}}));
    });
  };
  for (std::optional<int64_t> stage : {std::optional<int64_t>(), std::optional<int64_t>(2)})
    expectPlanJsonError(withDataParallelLayout(stage),
                        "params[0].layout.split.vocab[0]: parameter 'wte': dimension 'vocab' is "
                        "split over the data-parallel axis 'dp'; parameters are whole on every "
                        "data-parallel rank (only the optimizer state is split over it, by "
                        "optimizer_layout) but under ZeRO-3 (mesh.zero_stage 3)");
  Expected<Plan> sharded = parsePlanJson(withDataParallelLayout(3).serialize(), "p.plan/plan.json");
  ASSERT_TRUE(sharded) << sharded.error().message();
  EXPECT_EQ(sharded->zeroStage, 3);
  EXPECT_EQ(sharded->localDims(sharded->params[0])[0].size, sharded->params[0].dims[0].size / 2)
      << "a ZeRO-3 parameter is this rank's shard";
}

TEST_F(PlanTest, OptimizerLayoutErrors) {
  auto withOptimizerLayout = [](size_t param, JsonValue layout, int64_t dp = 2) {
    JsonValue v = distributedOptimizerPlan();
    JsonObject &o = *v.getObject();
    JsonValue mesh = meshJson({{"dp", dp}, {"tp", 2}});
    mesh.getObject()->set("data_parallel_axis", "dp");
    o.set("mesh", std::move(mesh));
    paramAt(o, param).set("optimizer_layout", std::move(layout));
    return v;
  };
  const std::string rule = "(the optimizer layout is the parameter's layout plus one more "
                           "dimension split over the data-parallel axis 'dp')";
  // Only with a data-parallel axis.
  JsonValue noAxis = distributedOptimizerPlan();
  noAxis.getObject()->set("mesh", meshJson({{"dp", 2}, {"tp", 2}}));
  expectPlanJsonError(noAxis, "params[0].optimizer_layout: parameter 'wte' has an optimizer "
                              "layout, but the mesh names no data_parallel_axis (the distributed "
                              "optimizer splits the optimizer state over it)");
  expectPlanJsonError(edited([](JsonObject &o) {
                        paramAt(o, 1).set("optimizer_layout", split({{"hidden", {"dp"}}}));
                      }),
                      "params[1].optimizer_layout: parameter 'lnf.g' has an optimizer layout, "
                      "but the mesh names no data_parallel_axis");
  // It keeps the layout's splits.
  expectPlanJsonError(withOptimizerLayout(0, split({{"hidden", {"dp"}}})),
                      "params[0].optimizer_layout.split: parameter 'wte': its layout splits "
                      "dimension 'vocab' over tp but its optimizer layout does not split it " +
                          rule);
  expectPlanJsonError(withOptimizerLayout(0, split({{"vocab", {"tp", "dp"}}})),
                      "params[0].optimizer_layout.split: parameter 'wte': its layout splits "
                      "dimension 'vocab' over tp but its optimizer layout splits it over tp x dp " +
                          rule);
  // It adds exactly one split, over the data-parallel axis alone.
  expectPlanJsonError(withOptimizerLayout(1, split({{"hidden", {"tp"}}})),
                      "params[1].optimizer_layout.split.hidden: parameter 'lnf.g': its optimizer "
                      "layout splits dimension 'hidden' over tp, which its layout does not split; "
                      "that dimension must be split over the data-parallel axis 'dp' alone " +
                          rule);
  expectPlanJsonError(withOptimizerLayout(1, split({{"hidden", {"dp", "tp"}}})),
                      "params[1].optimizer_layout.split.hidden: parameter 'lnf.g': its optimizer "
                      "layout splits dimension 'hidden' over dp x tp, which its layout does not "
                      "split");
  expectPlanJsonError(withOptimizerLayout(0, split({{"vocab", {"tp"}}})),
                      "params[0].optimizer_layout.split: parameter 'wte': its optimizer layout "
                      "splits no dimension over the data-parallel axis 'dp' (leave "
                      "optimizer_layout out when the state is whole) " +
                          rule);
  expectPlanJsonError(withOptimizerLayout(1, JsonObject{}),
                      "params[1].optimizer_layout.split: parameter 'lnf.g': its optimizer layout "
                      "splits no dimension over the data-parallel axis 'dp'");
  expectPlanJsonError(withOptimizerLayout(3, split({{"hidden", {"tp"}}, {"layers", {"dp"}},
                                                    {"hidden", {"dp"}}})),
                      "axis 'dp' splits both dimension");
  // Checked like layouts: dimensions, axes, divisibility.
  expectPlanJsonError(withOptimizerLayout(0, split({{"vocab", {"tp"}}, {"hidden", {"dp"}}}), 3),
                      "params[0].optimizer_layout.split.hidden: parameter 'wte': dimension "
                      "'hidden' (size 8) does not divide evenly over axis 'dp' (size 3)");
  expectPlanJsonError(withOptimizerLayout(1, split({{"heads", {"dp"}}})),
                      "params[1].optimizer_layout.split.heads: parameter 'lnf.g' has no dimension "
                      "'heads' (its dims are [hidden=8])");
  expectPlanJsonError(withOptimizerLayout(1, split({{"hidden", {"ep"}}})),
                      "params[1].optimizer_layout.split.hidden[0]: parameter 'lnf.g': dimension "
                      "'hidden' is split over axis 'ep', which the mesh does not have (mesh "
                      "axes: dp, tp)");
  expectPlanJsonError(withOptimizerLayout(1, JsonArray{}),
                      "params[1].optimizer_layout: expected an object, found an array");
}

TEST_F(PlanTest, OptimizerStepBuffersHoldTheOptimizerShards) {
  // wte [vocab=16, hidden=8]: param [vocab=8, hidden=8] (tp), grad of optimizer_step and state
  // [vocab=8, hidden=4] (tp and dp); forward_backward's grad keeps the param layout.
  auto withKernels = [](JsonValue fbGradDims, JsonValue optGradDims, JsonValue stateDims) {
    JsonValue v = planWithKernels("kernels/x86_64.so");
    JsonValue d = distributedOptimizerPlan();
    JsonObject &o = *v.getObject();
    o.set("mesh", *d.getObject()->find("mesh"));
    o.set("params", *d.getObject()->find("params"));
    JsonObject &functions = *(*o.find("kernels")->getObject()->find("x86_64"))
                                 .getObject()
                                 ->find("functions")
                                 ->getObject();
    JsonObject &fb = *functions.find("forward_backward")->getObject();
    JsonValue local = dimList({{"vocab", 8}, {"hidden", 8}});
    (*fb.find("inputs")->getArray())[1] = kernelBuffer("param", "wte", "f32", local);
    (*fb.find("outputs")->getArray())[1] = kernelBuffer("grad", "wte", "f32", fbGradDims);
    functions.set("optimizer_step",
                  JsonObject{{"symbol", "_mtc_packed_optimizer_step"},
                             {"inputs", JsonArray{kernelBuffer("grad", "wte", "f32", optGradDims),
                                                  kernelBuffer("param", "wte", "f32", local),
                                                  kernelBuffer("state", "wte.exp_avg", "f32",
                                                               stateDims)}},
                             {"outputs", JsonArray{kernelBuffer("param", "wte", "f32", local),
                                                   kernelBuffer("state", "wte.exp_avg", "f32",
                                                                stateDims)}}});
    return v;
  };
  JsonValue tpLocal = dimList({{"vocab", 8}, {"hidden", 8}});
  JsonValue shard = dimList({{"vocab", 8}, {"hidden", 4}});
  expectPlanJsonError(withKernels(tpLocal, tpLocal, shard),
                      "kernels.x86_64.functions.optimizer_step.inputs[0].dims: grad 'wte' is "
                      "[vocab=8, hidden=8], but the optimizer layout of parameter 'wte' (vocab "
                      "over tp, hidden over dp) gives the local dims [vocab=8, hidden=4]");
  expectPlanJsonError(withKernels(tpLocal, shard, tpLocal),
                      "kernels.x86_64.functions.optimizer_step.inputs[2].dims: state "
                      "'wte.exp_avg' is [vocab=8, hidden=8], but the optimizer layout of "
                      "parameter 'wte' (vocab over tp, hidden over dp) gives the local dims "
                      "[vocab=8, hidden=4]");
  expectPlanJsonError(withKernels(shard, shard, shard),
                      "kernels.x86_64.functions.forward_backward.outputs[1].dims: grad 'wte' is "
                      "[vocab=8, hidden=4], but the layout of parameter 'wte' (vocab over tp) "
                      "gives the local dims [vocab=8, hidden=8]");
  Expected<Plan> p = loadWithKernelFile(withKernels(tpLocal, shard, shard));
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->x86Kernels->optimizerStep->inputs[0].dims, p->optimizerLocalDims(p->params[0]));
}

TEST_F(PlanTest, PipelineIsOptionalAndChecked) {
  writePlan(validPlan());
  Expected<Plan> plain = loadPlan(plan());
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  EXPECT_FALSE(plain->pipeline) << "a plan without \"pipeline\" runs as one stage";

  JsonValue pipeline = test::pipelineJson(
      test::buildPipeline(test::TestScheduleKind::OneFOneB, 2, {1, 2, 4}));
  writePlan(edited([&](JsonObject &o) { o.set("pipeline", pipeline); }));
  Expected<Plan> p = loadPlan(plan());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->pipeline);
  EXPECT_EQ(p->pipeline->stages, 2);
  EXPECT_EQ(p->pipeline->schedules.size(), 3u);

  // The loader's errors name the plan and the field.
  (*pipeline.getObject()).set("stages", 0);
  expectPlanJsonError(edited([&](JsonObject &o) { o.set("pipeline", pipeline); }),
                      "pipeline.stages: expected an integer from 1 to 1024, found integer 0");
}

//===----------------------------------------------------------------------===//
// The pipeline's chunk and stage functions
//===----------------------------------------------------------------------===//

namespace {

/// `chunk<c>.<role>` over layers [first, first + n): reads the token ids (chunk 0) or an
/// activation, and block.b's layers.
JsonObject chunkFunction(int64_t c, int64_t first, int64_t n) {
  JsonArray inputs{
      c == 0 ? kernelBuffer("input", "tokens", "i32", dimList({{"batch", 4}, {"seq", 8}}))
             : kernelBuffer("activation", "activation", "f32",
                            dimList({{"batch", 4}, {"seq", 8}, {"hidden", 8}})),
      kernelBuffer("param", "block.b", "f32", dimList({{"layers", n}, {"hidden", 8}}))};
  return JsonObject{{"symbol", concat("_mtc_chunk", c)},
                    {"chunk", c},
                    {"layers", JsonArray{first, n}},
                    {"inputs", std::move(inputs)},
                    {"outputs", JsonArray{}}};
}

/// `stage<s>.<role>`: returns the stage's squared gradient norm (grad_squares) or the
/// learning rate (the other roles).
JsonObject stageFunction(int64_t s, const char *role) {
  const char *output = std::string_view(role) == "grad_squares" ? "grad_squares" : "lr";
  return JsonObject{{"symbol", concat("_mtc_stage", s, "_", role)},
                    {"stage", s},
                    {"inputs", JsonArray{}},
                    {"outputs", JsonArray{kernelBuffer(output, output, "f32", JsonArray{})}}};
}

/// The valid plan cut into 2 stages of one layer each (1F1B for 2 micro-batches), with the
/// functions chunk<c>.forward and .backward, stage<s>.grad_squares and .optimizer_step, edited
/// by `edit` (the "functions" object).
JsonValue planWithPipelineKernels(const std::function<void(JsonObject &)> &edit = {}) {
  JsonValue v = validPlan();
  JsonObject functions;
  for (int64_t c = 0; c < 2; ++c) {
    functions.set(concat("chunk", c, ".forward"), chunkFunction(c, c, 1));
    functions.set(concat("chunk", c, ".backward"), chunkFunction(c, c, 1));
  }
  for (int64_t s = 0; s < 2; ++s) {
    functions.set(concat("stage", s, ".grad_squares"), stageFunction(s, "grad_squares"));
    functions.set(concat("stage", s, ".optimizer_step"), stageFunction(s, "optimizer_step"));
  }
  if (edit)
    edit(functions);
  v.getObject()->set("pipeline", test::pipelineJson(test::buildPipeline(
                                     test::TestScheduleKind::OneFOneB, 2, {2})));
  v.getObject()->set(
      "kernels",
      JsonObject{{"x86_64", JsonObject{{"file", "kernels/x86_64.so"},
                                       {"functions", std::move(functions)}}}});
  return v;
}

/// parsePlanJson's error for `json` (failing the test if it parsed).
std::string parseError(const JsonValue &json) {
  Expected<Plan> p = parsePlanJson(json.serialize(), "p.plan/plan.json");
  EXPECT_FALSE(p.ok()) << "parsed: " << json.serialize();
  return p.ok() ? std::string() : p.error().message();
}

JsonObject &functionAt(JsonObject &functions, std::string_view name) {
  return *functions.find(name)->getObject();
}

} // namespace

TEST(PipelineKernelsTest, ChunkAndStageFunctionsAreRead) {
  Expected<Plan> p = parsePlanJson(planWithPipelineKernels().serialize(), "p.plan/plan.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(p->x86Kernels);
  const KernelsInfo &k = *p->x86Kernels;
  ASSERT_EQ(k.chunks.size(), 2u);
  for (int64_t c = 0; c < 2; ++c) {
    SCOPED_TRACE(concat("chunk ", c));
    const ChunkKernels &chunk = k.chunks[size_t(c)];
    EXPECT_EQ(chunk.firstLayer, c);
    EXPECT_EQ(chunk.numLayers, 1);
    ASSERT_TRUE(chunk.forward);
    EXPECT_EQ(chunk.forward->symbol, concat("_mtc_chunk", c));
    ASSERT_EQ(chunk.forward->inputs.size(), 2u);
    EXPECT_EQ(chunk.forward->inputs[0].kind, c == 0 ? BufferKind::Input : BufferKind::Activation);
    EXPECT_EQ(chunk.forward->inputs[1].dims, (std::vector<Dim>{{"layers", 1}, {"hidden", 8}}));
    EXPECT_TRUE(chunk.backward);
    EXPECT_FALSE(chunk.backwardInput);
    EXPECT_FALSE(chunk.backwardWeight);
  }
  ASSERT_EQ(k.stages.size(), 2u);
  for (int64_t s = 0; s < 2; ++s) {
    ASSERT_TRUE(k.stages[size_t(s)].gradSquares);
    ASSERT_TRUE(k.stages[size_t(s)].optimizerStep);
    EXPECT_EQ(k.stages[size_t(s)].optimizerStep->symbol,
              concat("_mtc_stage", s, "_optimizer_step"));
    EXPECT_EQ(k.stages[size_t(s)].gradSquares->outputs[0].kind, BufferKind::GradSquares);
    EXPECT_EQ(k.stages[size_t(s)].optimizerStep->outputs[0].kind, BufferKind::Lr);
  }
  EXPECT_FALSE(k.forwardBackward) << "a pipeline plan's step is its chunks'";

  // The B/W split, and the cut's layers in an uneven split (layers 0-1 and 2 of 3).
  JsonValue split = planWithPipelineKernels([](JsonObject &f) {
    for (int64_t c = 0; c < 2; ++c) {
      JsonValue backward = *f.find(concat("chunk", c, ".backward"));
      f.erase(concat("chunk", c, ".backward"));
      f.set(concat("chunk", c, ".backward_input"), backward);
      f.set(concat("chunk", c, ".backward_weight"), backward);
    }
    for (std::string role : {"forward", "backward_input", "backward_weight"}) {
      functionAt(f, "chunk0." + role).set("layers", JsonArray{0, 2});
      functionAt(f, "chunk1." + role).set("layers", JsonArray{2, 1});
    }
  });
  JsonObject &pipeline = *split.getObject()->find("pipeline")->getObject();
  pipeline.set("chunk_layers", JsonArray{2, 1});
  split.getObject()->find("dims")->getObject()->set("layers", 3);
  p = parsePlanJson(split.serialize(), "p.plan/plan.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->x86Kernels->chunks[0].numLayers, 2);
  EXPECT_EQ(p->x86Kernels->chunks[1].firstLayer, 2);
  EXPECT_EQ(p->x86Kernels->chunks[1].numLayers, 1);
  EXPECT_FALSE(p->x86Kernels->chunks[1].backward);
  EXPECT_TRUE(p->x86Kernels->chunks[1].backwardInput);
  EXPECT_TRUE(p->x86Kernels->chunks[1].backwardWeight);

  // Without a pipeline, chunk and stage functions are not read.
  JsonValue plain = planWithPipelineKernels();
  plain.getObject()->erase("pipeline");
  p = parsePlanJson(plain.serialize(), "p.plan/plan.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->x86Kernels->chunks.empty());
  EXPECT_TRUE(p->x86Kernels->stages.empty());
}

TEST(PipelineKernelsTest, ChunkFunctionErrors) {
  const std::string functions = "p.plan/plan.json: kernels.x86_64.functions.";
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { f.set("chunk2.forward", chunkFunction(2, 2, 1)); })),
            functions + "chunk2.forward: names chunk 2, but the pipeline has 2 chunks");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { f.set("chunk1.fwd", chunkFunction(1, 1, 1)); })),
            functions + "chunk1.fwd: unknown chunk function 'fwd' (expected forward, backward, "
                        "backward_input or backward_weight)");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { functionAt(f, "chunk1.forward").set("chunk", 0); })),
            functions + "chunk1.forward.chunk: must be 1, the chunk the name gives");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { functionAt(f, "chunk1.forward").erase("chunk"); })),
            functions + "chunk1.forward: missing key 'chunk'");
  EXPECT_EQ(parseError(planWithPipelineKernels([](JsonObject &f) {
              functionAt(f, "chunk1.backward").set("layers", JsonArray{0, 1});
            })),
            functions + "chunk1.backward.layers: must be [1, 1], the chunk's layers in "
                        "pipeline.chunk_layers");
  EXPECT_EQ(parseError(planWithPipelineKernels([](JsonObject &f) {
              functionAt(f, "chunk0.forward").set("layers", JsonArray{0, 2});
            })),
            functions + "chunk0.forward.layers: must be [0, 1], the chunk's layers in "
                        "pipeline.chunk_layers");
  EXPECT_EQ(parseError(planWithPipelineKernels([](JsonObject &f) {
              functionAt(f, "chunk0.forward").set("layers", JsonArray{0});
            })),
            functions + "chunk0.forward.layers: must be [0, 1], the chunk's layers in "
                        "pipeline.chunk_layers");
  EXPECT_EQ(parseError(planWithPipelineKernels([](JsonObject &f) {
              functionAt(f, "chunk0.forward").set("layers", JsonArray{0, 1, 5});
            })),
            functions + "chunk0.forward.layers: must be [0, 1], the chunk's layers in "
                        "pipeline.chunk_layers");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { functionAt(f, "chunk0.forward").set("layers", 1); })),
            functions + "chunk0.forward.layers: expected an array, found the integer 1");
}

// Megatron's --eod-mask-loss and --reset-position-ids under pipeline parallelism: each chunk
// function takes the data inputs it reads, by the step's names (the loss mask with the labels
// where the loss is, the position ids where the position table is read), with the step's
// dtypes and dims.
TEST(PipelineKernelsTest, ChunksTakeTheDataInputsTheyRead) {
  const JsonValue ids = dimList({{"batch", 4}, {"seq", 8}});
  auto documents = [&](const std::function<void(JsonObject &)> &edit) {
    JsonValue v = planWithPipelineKernels([&](JsonObject &f) {
      for (const char *role : {"forward", "backward"}) {
        JsonArray &first = *functionAt(f, concat("chunk0.", role)).find("inputs")->getArray();
        first.push_back(kernelBuffer("input", "position_ids", "i32", ids));
        JsonArray &last = *functionAt(f, concat("chunk1.", role)).find("inputs")->getArray();
        last.push_back(kernelBuffer("input", "labels", "i32", ids));
        last.push_back(kernelBuffer("input", "loss_mask", "f32", ids));
      }
      if (edit)
        edit(f);
    });
    JsonObject &o = *v.getObject();
    functionAt(o, "train").set("eod_mask_loss", true);
    functionAt(o, "train").set("reset_position_ids", true);
    JsonArray &inputs = *o.find("inputs")->getArray();
    inputs.push_back(JsonObject{{"name", "loss_mask"}, {"dtype", "f32"}, {"dims", ids}});
    inputs.push_back(JsonObject{{"name", "position_ids"}, {"dtype", "i32"}, {"dims", ids}});
    return v;
  };
  Expected<Plan> p = parsePlanJson(documents({}).serialize(), "p.plan/plan.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->eodMaskLoss);
  EXPECT_TRUE(p->resetPositionIds);
  const KernelFunction &last = *p->x86Kernels->chunks[1].forward;
  ASSERT_EQ(last.inputs.size(), 4u);
  EXPECT_EQ(last.inputs[3].kind, BufferKind::Input);
  EXPECT_EQ(last.inputs[3].name, "loss_mask");
  EXPECT_EQ(last.inputs[3].dtype, PlanDType::F32);

  const std::string functions = "p.plan/plan.json: kernels.x86_64.functions";
  // The loss's chunk without the mask; no chunk reading the position ids.
  EXPECT_EQ(parseError(documents([](JsonObject &f) {
              functionAt(f, "chunk1.backward").find("inputs")->getArray()->pop_back();
            })),
            functions + ".chunk1.backward.inputs: takes the labels but no loss mask, but "
                        "train.eod_mask_loss is true");
  EXPECT_EQ(parseError(documents([](JsonObject &f) {
              for (const char *role : {"forward", "backward"})
                functionAt(f, concat("chunk0.", role)).find("inputs")->getArray()->pop_back();
            })),
            functions + ": no chunk function takes the position ids, but "
                        "train.reset_position_ids is true");
  // A data input the step does not take, another dtype or dims than the step's, one taken
  // twice.
  EXPECT_EQ(parseError(planWithPipelineKernels([&](JsonObject &f) {
              functionAt(f, "chunk1.forward")
                  .find("inputs")
                  ->getArray()
                  ->push_back(kernelBuffer("input", "loss_mask", "f32", ids));
            })),
            functions + ".chunk1.forward.inputs[2].name: 'loss_mask' is not one of the step's "
                        "data inputs (inputs)");
  EXPECT_EQ(parseError(documents([&](JsonObject &f) {
              (*functionAt(f, "chunk1.forward").find("inputs")->getArray())[3] =
                  kernelBuffer("input", "loss_mask", "i32", ids);
            })),
            functions + ".chunk1.forward.inputs[3]: i32 [batch=4, seq=8], but the step's "
                        "'loss_mask' is f32 [batch=4, seq=8] (inputs)");
  EXPECT_EQ(parseError(documents([&](JsonObject &f) {
              (*functionAt(f, "chunk0.forward").find("inputs")->getArray())[2] =
                  kernelBuffer("input", "position_ids", "i32", dimList({{"batch", 4}}));
            })),
            functions + ".chunk0.forward.inputs[2]: i32 [batch=4], but the step's "
                        "'position_ids' is i32 [batch=4, seq=8] (inputs)");
  EXPECT_EQ(parseError(documents([&](JsonObject &f) {
              functionAt(f, "chunk0.forward")
                  .find("inputs")
                  ->getArray()
                  ->push_back(kernelBuffer("input", "tokens", "i32", ids));
            })),
            functions + ".chunk0.forward.inputs[3].name: 'tokens' is taken twice");
}

TEST(PipelineKernelsTest, StageFunctionErrors) {
  const std::string functions = "p.plan/plan.json: kernels.x86_64.functions.";
  EXPECT_EQ(parseError(planWithPipelineKernels([](JsonObject &f) {
              f.set("stage2.optimizer_step", stageFunction(2, "optimizer_step"));
            })),
            functions + "stage2.optimizer_step: names stage 2, but the pipeline has 2 stages");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { f.set("stage0.step", stageFunction(0, "step")); })),
            functions + "stage0.step: unknown stage function 'step' (expected grad_squares or "
                        "optimizer_step)");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { functionAt(f, "stage1.grad_squares").set("stage", 0); })),
            functions + "stage1.grad_squares.stage: must be 1, the stage the name gives");
  EXPECT_EQ(parseError(planWithPipelineKernels(
                [](JsonObject &f) { functionAt(f, "stage1.grad_squares").set("stage", -1); })),
            functions + "stage1.grad_squares.stage: expected a stage index, found the integer -1");
}

TEST(PipelineKernelsTest, SharedParamsAndActivationBytesThroughThePlan) {
  JsonValue v = planWithPipelineKernels();
  JsonObject &pipeline = *v.getObject()->find("pipeline")->getObject();
  pipeline.set("shared_params", JsonObject{{"wte", JsonArray{0, 1}}});
  JsonObject &schedule = *(*pipeline.find("schedules")->getArray())[0].getObject();
  (*schedule.find("stages")->getArray())[1].getObject()->set("activation_bytes", 4096);
  Expected<Plan> p = parsePlanJson(v.serialize(), "p.plan/plan.json");
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->pipeline->sharedParams.size(), 1u);
  EXPECT_EQ(p->pipeline->sharedParams[0].name, "wte");
  EXPECT_EQ(p->pipeline->sharedParams[0].chunks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p->pipeline->schedules[0].stages[0].activationBytes, -1) << "absent";
  EXPECT_EQ(p->pipeline->schedules[0].stages[1].activationBytes, 4096);

  pipeline.set("shared_params", JsonObject{{"wte", JsonArray{1, 0}}});
  EXPECT_EQ(parseError(v), "p.plan/plan.json: pipeline.shared_params.wte: must list at least two "
                           "distinct chunks in ascending order");
}

// A misspelled shared parameter would train with the tied gradient's parts never summed over
// the stages holding it: the loader refuses it.
TEST(PipelineKernelsTest, SharedParamsMustNameAParameter) {
  JsonValue v = planWithPipelineKernels();
  JsonObject &pipeline = *v.getObject()->find("pipeline")->getObject();
  pipeline.set("shared_params", JsonObject{{"wtee", JsonArray{0, 1}}});
  std::string message = parseError(v);
  EXPECT_CONTAINS(message, "pipeline.shared_params.wtee");
  EXPECT_CONTAINS(message, "no parameter named 'wtee'");
}
