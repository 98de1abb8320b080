//===- CheckpointFuzzer.cpp - libFuzzer target for the checkpoint reader --===//
//
// The input is a checkpoint.safetensors file. It is read as `mtrun --load DIR` reads it:
// written into a checkpoint directory and loaded with `loadCheckpoint` against a small fixed
// plan (two parameters, one of a layer stacked over two instances, and their optimizer
// states), which verifies the structure, the metadata, the tables and every checksum. A
// checkpoint it accepts must hold exactly the plan's tensors at the plan's shapes. The bytes
// also go to the safetensors parser alone, whose tensors are converted to f32 as exports and
// imports do. Any crash or sanitizer report is a bug: a corrupt checkpoint must be an error
// naming the directory. `-mtc_write_seeds=DIR` writes valid checkpoints of the fixed plan
// (saveCheckpoint's own output) as seeds. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Checkpoint.h"
#include "runtime/fuzz/FuzzSupport.h"
#include "runtime/support/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

using namespace mtc::rt;

namespace {

std::unique_ptr<fuzz::ScratchDirectory> scratch;

void check(bool condition) {
  if (!condition)
    __builtin_trap();
}

/// The plan the checkpoints belong to: `wte[vocab=4, hidden=2]` and a layer parameter
/// `block.w[layers=2, hidden=2]`, each with an `exp_avg` state.
const Plan &fixedPlan() {
  static const Plan plan = [] {
    Plan p;
    p.model = "tiny";
    p.seed = 1234;
    p.planSha256 = std::string(64, 'a');
    ParamInfo wte;
    wte.name = "wte";
    wte.dims = {{"vocab", 4}, {"hidden", 2}};
    ParamInfo w;
    w.name = "block.w";
    w.layer = "block";
    w.instances = 2;
    w.tensorId = 1;
    w.dims = {{"layers", 2}, {"hidden", 2}};
    p.params = {wte, w};
    p.states = {StateInfo{"wte.exp_avg", "wte", 0, wte.dims},
                StateInfo{"block.w.exp_avg", "block.w", 1, w.dims}};
    return p;
  }();
  return plan;
}

/// A training state of the fixed plan after `step` steps, with values that differ per tensor.
TrainingState stateAt(int64_t step) {
  TrainingState state;
  state.step = step;
  float value = 0.25f;
  for (const ParamInfo &p : fixedPlan().params)
    state.params.push_back(
        {p.name, dimSizes(p.dims), std::vector<float>(size_t(numElements(p.dims)), value += 1)});
  for (const StateInfo &s : fixedPlan().states)
    state.states.push_back(
        {s.name, dimSizes(s.dims), std::vector<float>(size_t(numElements(s.dims)), -value)});
  return state;
}

/// Writes the seeds: checkpoints at step 0 and 7 (one directory each; their files are the
/// seeds), each checked to load, so that the fuzzer starts on the accepting path.
void writeSeeds(const std::filesystem::path &out) {
  std::filesystem::create_directories(out);
  for (int64_t step : {0, 7}) {
    std::filesystem::path dir = scratch->path() / concat("seed-", step);
    Error err = saveCheckpoint(dir, fixedPlan(), stateAt(step));
    if (err.ok())
      if (Expected<TrainingState> loaded = loadCheckpoint(dir, fixedPlan()); !loaded)
        err = loaded.takeError();
    if (!err.ok()) {
      std::fprintf(stderr, "checkpoint-fuzzer: %s\n", err.message().c_str());
      std::exit(1);
    }
    std::filesystem::copy_file(dir / kCheckpointFileName,
                               out / concat("checkpoint-step", step, ".safetensors"),
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::printf("checkpoint-fuzzer: wrote 2 seeds to %s\n", out.c_str());
  std::exit(0);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  scratch = std::make_unique<fuzz::ScratchDirectory>();
  if (std::optional<std::filesystem::path> seeds = fuzz::seedDirectoryArgument(*argc, *argv))
    writeSeeds(*seeds);
  std::filesystem::create_directories(scratch->path() / "ckpt");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);

  if (Expected<SafetensorsFile> file = SafetensorsFile::parse(bytes))
    for (const SafetensorsFile::Tensor &t : file->tensors())
      if (Expected<std::vector<float>> values = file->toFloat32(t))
        check(values->size() == t.numElements());

  std::filesystem::path dir = scratch->path() / "ckpt";
  fuzz::writeFileOrDie(dir / kCheckpointFileName, bytes);
  Expected<TrainingState> state = loadCheckpoint(dir, fixedPlan());
  if (!state) {
    check(!state.error().message().empty());
    return 0;
  }
  const Plan &plan = fixedPlan();
  check(state->step >= 0);
  check(state->params.size() == plan.params.size() && state->states.size() == plan.states.size());
  for (size_t i = 0; i < plan.params.size(); ++i)
    check(state->params[i].values.size() == size_t(numElements(plan.params[i].dims)));
  for (size_t i = 0; i < plan.states.size(); ++i)
    check(state->states[i].values.size() == size_t(numElements(plan.states[i].dims)));
  return 0;
}
