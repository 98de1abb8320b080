//===- PlanLoaderFuzzer.cpp - libFuzzer target for the plan loader --------===//
//
// The input is a plan.json. It is parsed as mtrun and `mtc inspect` read it: written into a
// plan directory whose MANIFEST lists it with its true size and SHA-256 (and a kernel file,
// so plans naming one get past that check), then `loadPlan`. A plan the loader accepts must be
// one the rest of the runtime can use, so every accessor that trusts the loader's checks runs
// on it: the summary `mtc inspect` prints, and each parameter's and state's local dims and
// layout on the mesh. The same bytes also go to the MANIFEST parser. Any crash or sanitizer
// report is a bug: a malformed plan must be an error naming the plan. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/fuzz/FuzzSupport.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanSummary.h"
#include "runtime/plan/ScheduleChart.h"
#include "runtime/support/Sha256.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

using namespace mtc::rt;

namespace {

constexpr std::string_view kKernelFile = "kernels/x86_64.so";
constexpr std::string_view kKernelBytes = "not an ELF file: the loader only checks its hash";

std::unique_ptr<fuzz::ScratchDirectory> scratch;

std::string manifestLine(std::string_view name, std::string_view bytes) {
  return concat(sha256Hex(bytes), ' ', bytes.size(), ' ', name, '\n');
}

void check(bool condition) {
  if (!condition)
    __builtin_trap();
}

/// What the runtime does with an accepted plan before it allocates anything.
void useAcceptedPlan(const Plan &plan) {
  check(!describePlan(plan).empty());
  check(plan.meshSize() >= 1);
  for (const ParamInfo &param : plan.params) {
    check(numElements(param.dims) >= 0);
    std::vector<Dim> local = plan.localDims(param);
    check(local.size() == param.dims.size());
    check(plan.optimizerLocalDims(param).size() == param.dims.size());
    (void)plan.describeLayout(param);
    (void)plan.dataParallelShardDim(param);
  }
  for (const StateInfo &state : plan.states) {
    check(state.paramIndex < plan.params.size());
    (void)plan.stateLayout(state);
  }
  // `mtc inspect --schedule` draws every schedule an accepted pipeline holds.
  if (plan.pipeline)
    for (const PipelineSchedule &schedule : plan.pipeline->schedules) {
      check(plan.pipeline->forMicroBatches(schedule.microBatches).ok());
      check(!scheduleGrid(*plan.pipeline, schedule).empty());
      check(!scheduleSvg(*plan.pipeline, schedule).empty());
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  scratch = std::make_unique<fuzz::ScratchDirectory>();
  std::filesystem::create_directories(scratch->path() / "model.plan" / "kernels");
  fuzz::writeFileOrDie(scratch->path() / "model.plan" / kKernelFile, kKernelBytes);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);

  // The MANIFEST parser on the raw bytes: whatever it accepts names safe files, once each.
  if (auto manifest = parseManifest(input, "fuzz.plan"))
    for (const ManifestEntry &entry : manifest->second)
      check(isSafePlanFileName(entry.name));

  std::filesystem::path dir = scratch->path() / "model.plan";
  fuzz::writeFileOrDie(dir / "plan.json", input);
  fuzz::writeFileOrDie(dir / "MANIFEST", concat("mtc-plan ", kPlanFormatVersion, "\n", manifestLine("plan.json", input),
                                                manifestLine(kKernelFile, kKernelBytes)));
  Expected<Plan> plan = loadPlan(dir);
  if (!plan) {
    check(!plan.error().message().empty());
    return 0;
  }
  useAcceptedPlan(*plan);
  return 0;
}
