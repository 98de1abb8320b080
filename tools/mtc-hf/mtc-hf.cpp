//===- mtc-hf.cpp - Hugging Face checkpoints in and out -------------------===//
//
// `mtc-hf import PLAN --hf DIR --save CKPT` reads a Hugging Face model directory into an mtc
// checkpoint of the plan at step 0; `mtc-hf export PLAN --load CKPT --out DIR` writes a
// checkpoint's parameters as a Hugging Face model directory (runtime/hf/HuggingFace.h).
// Plain C++20 linking only the runtime.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Checkpoint.h"
#include "runtime/hf/HuggingFace.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/CommandLine.h"
#include "runtime/support/Error.h"
#include "runtime/support/OutputPaths.h"

#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <vector>

using namespace mtc::rt;

namespace {

constexpr const char *kUsage =
    "usage: mtc-hf COMMAND PLAN [options]\n"
    "\n"
    "commands:\n"
    "  import PLAN --hf DIR --save CKPT\n"
    "      read the Hugging Face model directory DIR (config.json and model.safetensors, or\n"
    "      model.safetensors.index.json and its shards; F32, F16 or BF16 tensors) into the\n"
    "      checkpoint CKPT of PLAN at step 0 with zero optimizer state: `mtrun PLAN --load\n"
    "      CKPT` trains from the imported weights, its first step being step 1\n"
    "  export PLAN --load CKPT --out DIR [--dtype f32|bf16]\n"
    "      write the parameters of the checkpoint CKPT of PLAN as the Hugging Face model\n"
    "      directory DIR (a new or empty directory): config.json and model.safetensors\n"
    "      (default f32), for transformers' from_pretrained(DIR)\n"
    "  --help\n"
    "\n"
    "Models: GPT-2 (GPT2LMHeadModel), Llama (LlamaForCausalLM) and Mixtral (MixtralForCausalLM,\n"
    "dropless dispatch only), recognised from the plan's\n"
    "parameters; docs/user-guide.md, \"Hugging Face checkpoints\".\n";

/// The command's arguments from argv[2] on.
Expected<CommandLine> parseArgs(int argc, char **argv, std::vector<std::string_view> values) {
  return parseCommandLine(argc, argv, 2, {std::move(values), {}, {}, " (see mtc-hf --help)"});
}

int fail(const Error &err) {
  std::fprintf(stderr, "mtc-hf: error: %s\n", err.message().c_str());
  return 1;
}

/// The plan, and its model as a Hugging Face architecture.
Expected<std::pair<Plan, hf::ModelMap>> loadModel(const std::string &planDir) {
  Expected<Plan> plan = loadPlan(planDir);
  if (!plan)
    return plan.takeError();
  Expected<hf::PlanOps> ops = hf::readPlanOps(*plan);
  if (!ops)
    return ops.takeError();
  Expected<hf::ModelMap> model = hf::mapModel(*plan, *ops);
  if (!model)
    return model.takeError().withContext(planDir);
  return std::pair{std::move(*plan), std::move(*model)};
}

std::string join(const std::vector<std::string> &items) {
  std::string s;
  for (const std::string &item : items)
    s += concat(s.empty() ? "" : ", ", item);
  return s;
}

int importCommand(int argc, char **argv) {
  Expected<CommandLine> args = parseArgs(argc, argv, {"--hf", "--save"});
  if (!args)
    return fail(args.error());
  if (args->positional.size() != 1)
    return fail(makeError("import takes one PLAN (see mtc-hf --help)"));
  if (!args->values.count("--hf"))
    return fail(makeError("import needs --hf DIR, the Hugging Face model directory"));
  if (!args->values.count("--save"))
    return fail(makeError("import needs --save CKPT, the checkpoint directory to write"));
  const std::string &hfDir = args->values["--hf"], &save = args->values["--save"];
  Expected<std::pair<Plan, hf::ModelMap>> loaded = loadModel(args->positional[0]);
  if (!loaded)
    return fail(loaded.error());
  const auto &[plan, model] = *loaded;
  if (Error err = checkOutputDirectory(save, "--save"); !err.ok())
    return fail(err);
  hf::ImportSummary summary;
  Expected<TrainingState> state = hf::importDirectory(hfDir, plan, model, &summary);
  if (!state)
    return fail(state.error());
  if (Error err = saveCheckpoint(save, plan, *state); !err.ok())
    return fail(err);
  std::printf("imported %lld tensors (%s) of %s from %s into the checkpoint %s at step 0%s\n",
              static_cast<long long>(summary.tensors), join(summary.dtypes).c_str(),
              std::string(hf::architectureName(model.arch)).c_str(), hfDir.c_str(), save.c_str(),
              summary.ignored
                  ? concat(" (", summary.ignored, " buffers or tied copies skipped)").c_str()
                  : "");
  std::printf("train from it with: mtrun %s --load %s\n", args->positional[0].c_str(),
              save.c_str());
  return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
}

int exportCommand(int argc, char **argv) {
  Expected<CommandLine> args = parseArgs(argc, argv, {"--load", "--out", "--dtype"});
  if (!args)
    return fail(args.error());
  if (args->positional.size() != 1)
    return fail(makeError("export takes one PLAN (see mtc-hf --help)"));
  if (!args->values.count("--load"))
    return fail(makeError("export needs --load CKPT, the checkpoint to export"));
  if (!args->values.count("--out"))
    return fail(makeError("export needs --out DIR, the Hugging Face model directory to write"));
  std::string dtypeName = args->values.count("--dtype") ? args->values["--dtype"] : "f32";
  if (dtypeName != "f32" && dtypeName != "bf16")
    return fail(makeError("--dtype expects f32 or bf16, got '", dtypeName, "'"));
  const DType dtype = dtypeName == "f32" ? DType::F32 : DType::BF16;
  const std::string &load = args->values["--load"], &out = args->values["--out"];
  Expected<std::pair<Plan, hf::ModelMap>> loaded = loadModel(args->positional[0]);
  if (!loaded)
    return fail(loaded.error());
  const auto &[plan, model] = *loaded;
  if (Error err = checkOutputDirectory(out, "--out"); !err.ok())
    return fail(err);
  Expected<TrainingState> state = loadCheckpoint(load, plan);
  if (!state)
    return fail(state.error());
  if (Error err = hf::exportDirectory(out, plan, model, *state, dtype); !err.ok())
    return fail(err);
  std::printf("exported the checkpoint %s (step %lld) as %s: %s with %zu tensors (%s)\n",
              load.c_str(), static_cast<long long>(state->step), out.c_str(),
              std::string(hf::architectureName(model.arch)).c_str(), model.tensors.size(),
              dtypeName.c_str());
  return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
}

} // namespace

int main(int argc, char **argv) {
  try {
    std::string_view command = argc > 1 ? argv[1] : "";
    // `mtc-hf import --help` too: the usage covers both commands.
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      }
    if (command == "import")
      return importCommand(argc, argv);
    if (command == "export")
      return exportCommand(argc, argv);
    return fail(makeError(command.empty() ? std::string("no command given (see mtc-hf --help)")
                                          : concat("unknown command '", command,
                                                   "' (import, export; see mtc-hf --help)")));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mtc-hf: error: %s\n", e.what());
    return 1;
  }
}
