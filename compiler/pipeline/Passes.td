//===- Passes.td - pipeline-parallel passes -----------------*- tablegen -*-===//

#ifndef MTC_COMPILER_PIPELINE_PASSES_TD
#define MTC_COMPILER_PIPELINE_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Schedules
//===----------------------------------------------------------------------===//

def MTSGenerateSchedulePass : Pass<"mts-generate-schedule", "::mlir::ModuleOp"> {
  let summary = "Append a generated pipeline schedule (mts.schedule) to the module";
  let description = [{
    Generates the `mts.schedule` of one training step with `kind` (gpipe, 1f1b,
    interleaved, zb-h1, zb-v), `stages`, `virtual-stages` and `micro-batches` at the end of the
    module (see the mts dialect for the schedules). Parameters the kind cannot schedule
    are an error. The compiler calls `mtc::pipeline::buildSchedule` directly; the pass
    exists so that tests can look at every generator's output.
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"1f1b\"",
           "Schedule: gpipe, 1f1b, interleaved, zb-h1 or zb-v">,
    Option<"stages", "stages", "int64_t", "1", "Pipeline stages (P)">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Model chunks per stage (V)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches of one step (m)">,
  ];
  let dependentDialects = ["::mtc::mts::MTSDialect"];
}

#endif // MTC_COMPILER_PIPELINE_PASSES_TD
