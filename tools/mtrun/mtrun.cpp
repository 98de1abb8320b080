//===- mtrun.cpp - The runtime driver -------------------------------------===//
//
// `mtrun PLAN [options]` loads and verifies a plan written by `mtc compile -o PLAN`
// (docs/plan-format.md). For now it can describe the plan (`--info`) and initialise the
// model and export it to safetensors (`--export-safetensors FILE`); training arrives with
// the executor. Plain C++20: no LLVM.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/ParamInit.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanSummary.h"
#include "runtime/support/Error.h"
#include "runtime/support/Safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#ifndef MTC_VERSION
#define MTC_VERSION "unknown"
#endif

using namespace mtc::rt;

namespace {

struct Options {
  std::optional<std::string> plan;
  bool info = false;
  std::optional<std::string> exportSafetensors;
  bool help = false;
  bool version = false;
};

/// One command-line option. `value` names its argument (empty: a flag).
struct OptionSpec {
  std::string_view name;
  std::string_view value;
  std::string_view help;
  void (*apply)(Options &, std::string_view value);
  /// Whether it was given (for the "given twice" check); set by the parser.
  bool (*given)(const Options &);
};

constexpr OptionSpec kOptions[] = {
    {"--info", "", "print a summary of the verified plan",
     [](Options &o, std::string_view) { o.info = true; }, [](const Options &o) { return o.info; }},
    {"--export-safetensors", "FILE",
     "initialise every parameter and write them to FILE (safetensors, F32)",
     [](Options &o, std::string_view v) { o.exportSafetensors = std::string(v); },
     [](const Options &o) { return o.exportSafetensors.has_value(); }},
    {"--help", "", "print this help and exit", [](Options &o, std::string_view) { o.help = true; },
     [](const Options &o) { return o.help; }},
    {"--version", "", "print the version and exit",
     [](Options &o, std::string_view) { o.version = true; },
     [](const Options &o) { return o.version; }},
};

void printUsage() {
  std::printf("usage: mtrun PLAN [options]\n\n"
              "Loads and verifies the plan directory PLAN (written by `mtc compile -o PLAN`).\n\n"
              "options:\n");
  for (const OptionSpec &o : kOptions) {
    std::string left = std::string(o.name);
    if (!o.value.empty())
      left.append(" ").append(o.value);
    std::printf("  %-26s %.*s\n", left.c_str(), static_cast<int>(o.help.size()), o.help.data());
  }
  std::printf("\nTraining (running the plan's step programs) arrives with the executor.\n");
}

/// Parses argv by the table; `--opt=value` and `--opt value` both work, `--` ends options.
Expected<Options> parseArgs(int argc, char **argv) {
  Options opts;
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (optionsEnded || arg.empty() || arg[0] != '-' || arg == "-") {
      if (opts.plan)
        return makeError("unexpected argument '", arg, "' (mtrun takes one PLAN)");
      opts.plan = std::string(arg);
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    if (arg == "-h")
      arg = "--help";
    std::string_view name = arg, inlineValue;
    bool hasInlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inlineValue = arg.substr(eq + 1);
      hasInlineValue = true;
    }
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &o : kOptions)
      if (o.name == name)
        spec = &o;
    if (!spec)
      return makeError("unknown option '", arg, "' (see mtrun --help)");
    if (spec->given(opts))
      return makeError(spec->name, " given twice");
    std::string_view value;
    if (spec->value.empty()) {
      if (hasInlineValue)
        return makeError(spec->name, " takes no value");
    } else if (hasInlineValue) {
      value = inlineValue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return makeError(spec->name, " needs a value (", spec->name, " ", spec->value, ")");
    }
    if (!spec->value.empty() && value.empty())
      return makeError(spec->name, " needs a non-empty ", spec->value);
    spec->apply(opts, value);
  }
  return opts;
}

Error exportSafetensors(const Plan &plan, const std::string &file) {
  Expected<HostParams> params = HostParams::initialize(plan);
  if (!params)
    return params.takeError().withContext("initialising the parameters");
  std::vector<TensorRef> refs = params->tensorRefs();
  SafetensorsMetadata metadata = {
      {"format", "mtc"},
      {"model", plan.model},
      {"seed", concat(plan.seed)},
      {"plan_sha256", plan.planSha256},
  };
  return writeSafetensors(file, refs, metadata);
}

int fail(const Error &err) {
  std::fprintf(stderr, "mtrun: error: %s\n", err.message().c_str());
  return 1;
}

int run(int argc, char **argv) {
  Expected<Options> opts = parseArgs(argc, argv);
  if (!opts)
    return fail(opts.error());
  if (opts->help) {
    printUsage();
    return 0;
  }
  if (opts->version) {
    std::printf("mtrun %s (plan format %d)\n", MTC_VERSION, kPlanFormatVersion);
    return 0;
  }
  if (!opts->plan)
    return fail(makeError("no PLAN given (usage: mtrun PLAN [options]; see mtrun --help)"));
  if (!opts->info && !opts->exportSafetensors)
    return fail(makeError("nothing to do: give --info or --export-safetensors FILE (training "
                          "arrives with the executor)"));

  Expected<Plan> plan = loadPlan(*opts->plan);
  if (!plan)
    return fail(plan.error());
  if (opts->info)
    std::fputs(describePlan(*plan).c_str(), stdout);
  if (opts->exportSafetensors) {
    if (Error err = exportSafetensors(*plan, *opts->exportSafetensors); !err.ok())
      return fail(err);
  }
  if (std::fflush(stdout) != 0)
    return fail(makeError("cannot write the output"));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mtrun: error: %s\n", e.what());
    return 1;
  }
}
