//===- mtc.cpp - the mtc compiler driver ----------------------------------===//
//
// `mtc compile model.mtl`: parse, check and lower a .mtl model to the `mt` dialect, and
// print it or its statistics. Later stages (autodiff, sharding, pipelining, codegen, the
// plan) hang off the same subcommand.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"
#include "Explore.h"
#include "PartitionedCosts.h"
#include "compiler/analysis/FunctionCost.h"
#include "compiler/analysis/ModelStats.h"
#include "compiler/analysis/SavedActivations.h"
#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Workspace.h"
#include "compiler/codegen/GPU/GPUCodegen.h"
#include "compiler/costmodel/Cluster.h"
#include "compiler/costmodel/StepModel.h"
#include "compiler/costmodel/TraceWriter.h"
#include "compiler/pipeline/StageCut.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/plan/CallingConvention.h"
#include "compiler/plan/PipelinePlan.h"
#include "compiler/plan/PlanWriter.h"
#include "compiler/registration/Registration.h"
#include "compiler/sharding/Layout.h"
#include "compiler/sharding/Passes.h"
#include "compiler/transforms/ResetDocuments.h"
#include "dialects/mt/Utils/FusedAttention.h"
#include "dialects/mt/Utils/Vocabulary.h"
#include "frontend/BindingOverrides.h"
#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanSummary.h"
#include "runtime/plan/ScheduleChart.h"
#include "runtime/support/BlasCore.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <cblas.h>

using namespace llvm;

namespace {

cl::OptionCategory compileCategory("Compile options");

cl::SubCommand compileCommand("compile", "Compile a .mtl model");
// Declared here: --bf16 is a flag of both.
cl::SubCommand exploreCommand("explore",
                              "Search the parallel layouts of a model on a cluster: the Pareto "
                              "table of predicted step time and memory");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mtl>"), cl::Required,
                               cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<std::string> outputFile(
    "o",
    cl::desc("Output: the plan directory (default: <model>.plan in the current directory), "
             "or the IR file ('-', the default, for stdout)"),
    cl::value_desc("path"), cl::sub(compileCommand), cl::cat(compileCategory));

enum class EmitKind { Plan, MT, MTTrain };
cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to produce"), cl::init(EmitKind::Plan),
    cl::values(clEnumValN(EmitKind::Plan, "plan", "the plan mtrun executes (docs/plan-format.md)"),
               clEnumValN(EmitKind::MT, "mt", "the global graph in the mt dialect"),
               clEnumValN(EmitKind::MTTrain, "mt-train",
                          "the training step: forward_backward, layer fwd/bwd, optimizer_step")),
    cl::sub(compileCommand), cl::cat(compileCategory));

enum class KernelTarget { None, X86, Cuda };
cl::list<KernelTarget> kernelTargets(
    "target",
    cl::desc("Compiled step functions to put in the plan, comma-separated (default: x86 on an "
             "x86-64 host, else none)"),
    cl::CommaSeparated,
    cl::values(clEnumValN(KernelTarget::None, "none",
                          "none: the plan describes the model, mtrun cannot train it"),
               clEnumValN(KernelTarget::X86, "x86",
                          "kernels/x86_64.so: the whole step for this CPU, and its calling "
                          "convention in plan.json"),
               clEnumValN(KernelTarget::Cuda, "cuda",
                          "kernels/<chip>.ptx (and .cubin where ptxas is found) for each "
                          "--cuda-arch: every kernel of the step, its launches in plan.json "
                          "and kernels/cuda_host.so, the host code mtrun --device cuda runs "
                          "on one GPU")),
    cl::sub(compileCommand), cl::cat(compileCategory));
cl::alias kernelTargetsOld("kernels", cl::desc("Alias for --target"), cl::aliasopt(kernelTargets),
                           cl::cat(compileCategory));

cl::list<std::string> cudaArchitectures(
    "cuda-arch",
    cl::desc("NVIDIA architectures of the CUDA kernels, comma-separated (default: "
             "sm_80,sm_90)"),
    cl::value_desc("sm_NN,..."), cl::CommaSeparated, cl::sub(compileCommand),
    cl::cat(compileCategory));

/// Whether the plan gets `target`'s kernels: those listed, or without --target a plan
/// that mtrun can train where it was compiled (the x86 step on an x86-64 host).
bool hasTarget(KernelTarget target) {
  if (kernelTargets.getNumOccurrences() == 0)
    return target == KernelTarget::X86 &&
           Triple(sys::getProcessTriple()).getArch() == Triple::x86_64;
  return llvm::is_contained(kernelTargets, target);
}

cl::opt<std::string> recompute(
    "recompute", cl::desc("Activation recomputation in the layers' backward: none, selective "
                          "(attention) or full (overrides parallel { recompute })"),
    cl::value_desc("policy"), cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<unsigned> codegenThreads(
    "threads",
    cl::desc("Threads compiling the x86 step (default 0: one per hardware thread); the object "
             "code is the same for every number"),
    cl::value_desc("N"), cl::init(0), cl::sub(compileCommand), cl::cat(compileCategory));

cl::list<std::string> dimOverrides(
    "dim",
    cl::desc("Set a dimension of dims {} or a model argument, overriding the model file "
             "(repeatable; e.g. --dim vocab=50257 for a tokenizer's vocabulary, --dim layers=4)"),
    cl::value_desc("NAME=N"), cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> bf16Flag("bf16",
                       cl::desc("Train in bf16 mixed precision (Megatron's --bf16): f32 master "
                                "weights, gradients and optimizer state, bf16 activations; "
                                "overrides train { precision }"),
                       cl::sub(compileCommand), cl::sub(exploreCommand),
                       cl::cat(compileCategory));
cl::opt<bool> fp16Flag("fp16",
                       cl::desc("Train in fp16 mixed precision (Megatron's --fp16): as --bf16 "
                                "with f16 activations, and the backward seeded with mtrun's "
                                "dynamic loss scale; overrides train { precision }"),
                       cl::sub(compileCommand), cl::sub(exploreCommand),
                       cl::cat(compileCategory));

cl::opt<bool> fusedAttentionFlag(
    "fused-attention",
    cl::desc("Run attention fused, FlashAttention-2's way: an online softmax over key blocks, "
             "no sequence x sequence scores or probabilities in memory, the backward "
             "recomputing them block by block from the saved log-sum-exp"),
    cl::sub(compileCommand), cl::sub(exploreCommand), cl::cat(compileCategory));
cl::alias fusedAttentionMegatron("use-flash-attn", cl::desc("Alias for --fused-attention"),
                                 cl::aliasopt(fusedAttentionFlag), cl::cat(compileCategory));
cl::opt<unsigned> fusedAttentionBlock(
    "fused-attention-block",
    cl::desc("Query and key positions per block of --fused-attention (default 64; the "
             "largest divisor of the sequence length not above it is used)"),
    cl::value_desc("N"), cl::init(mtc::mt::kDefaultFusedAttentionBlock), cl::sub(compileCommand),
    cl::sub(exploreCommand), cl::cat(compileCategory));

LogicalResult flagError(const Twine &message);

/// --fused-attention: the module attribute the passes read (dialects/mt/Utils/
/// FusedAttention.h).
LogicalResult applyFusedAttentionFlag(mlir::ModuleOp module) {
  if (fusedAttentionBlock.getNumOccurrences() && !fusedAttentionFlag)
    return flagError("--fused-attention-block sizes the blocks of --fused-attention: give "
                     "--fused-attention too");
  if (fusedAttentionBlock == 0)
    return flagError("--fused-attention-block must be at least 1");
  if (fusedAttentionFlag)
    module->setAttr(mtc::mt::kFusedAttentionAttrName,
                    mlir::Builder(module.getContext()).getI64IntegerAttr(fusedAttentionBlock));
  return success();
}
cl::opt<bool> resetPositionIdsFlag(
    "reset-position-ids",
    cl::desc("Restart the positions at 0 after each end of document in a sample (Megatron's "
             "--reset-position-ids): the step takes the position ids, which mtrun computes "
             "from the tokens, and reads learned position tables at them"),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> resetAttentionMaskFlag(
    "reset-attention-mask",
    cl::desc("Attend only within each document of a sample (Megatron's "
             "--reset-attention-mask): the step takes the position ids, which mtrun computes "
             "from the tokens, and masks attention to each query's document"),
    cl::sub(compileCommand), cl::cat(compileCategory));

/// --reset-position-ids / --reset-attention-mask: the module attributes mt-reset-documents
/// reads (compiler/transforms/ResetDocuments.h).
void applyResetDocumentsFlags(mlir::ModuleOp module) {
  mlir::Builder b(module.getContext());
  if (resetPositionIdsFlag)
    module->setAttr(mtc::transforms::kResetPositionIdsAttrName, b.getUnitAttr());
  if (resetAttentionMaskFlag)
    module->setAttr(mtc::transforms::kResetAttentionMaskAttrName, b.getUnitAttr());
}

cl::opt<bool> eodMaskLossFlag(
    "eod-mask-loss",
    cl::desc("Leave the positions whose token is an end of document out of the loss "
             "(Megatron's --eod-mask-loss): the step takes a loss mask, which mtrun computes "
             "from the tokens; overrides train { eod_mask_loss }"),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> printStats("stats",
                         cl::desc("Print parameter counts per tensor and in total, FLOPs per "
                                  "token and the memory per rank, instead of the IR (with "
                                  "--target=x86, the peak memory, compiling the step to "
                                  "buffers but not to machine code)"),
                         cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> printSavedActivations(
    "saved-activations",
    cl::desc("With --stats, also list what one instance of each layer keeps for its backward "
             "on one rank (after partitioning, under the recompute policy), tensor by tensor"),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::OptionCategory parallelCategory("Parallelism (override the model's parallel {} block)");

cl::opt<unsigned> tensorParallel("tp", cl::desc("Tensor-parallel degree"), cl::value_desc("N"),
                                 cl::sub(compileCommand), cl::cat(parallelCategory));
cl::alias tensorParallelLong("tensor-model-parallel-size", cl::desc("Alias for --tp"),
                             cl::aliasopt(tensorParallel), cl::cat(parallelCategory));
cl::opt<unsigned> dataParallel("dp",
                               cl::desc("Data-parallel degree to record in the plan (mtrun "
                                        "takes it from the world size)"),
                               cl::value_desc("N"), cl::sub(compileCommand),
                               cl::cat(parallelCategory));
cl::opt<unsigned> expertParallel("ep",
                                 cl::desc("Expert-parallel degree: the experts are split over "
                                          "ep ranks, each routing its part of the micro-batch"),
                                 cl::value_desc("N"), cl::sub(compileCommand),
                                 cl::cat(parallelCategory));
cl::alias expertParallelLong("expert-model-parallel-size", cl::desc("Alias for --ep"),
                             cl::aliasopt(expertParallel), cl::cat(parallelCategory));
cl::opt<unsigned> expertTensorParallel(
    "etp",
    cl::desc("Tensor-parallel degree of the expert weights: tp (the default: split like the "
             "dense layers) or 1 (whole, the experts split over ep x tp: parallel folding)"),
    cl::value_desc("N"), cl::sub(compileCommand), cl::cat(parallelCategory));
cl::alias expertTensorParallelLong("expert-tensor-parallel-size", cl::desc("Alias for --etp"),
                                   cl::aliasopt(expertTensorParallel), cl::cat(parallelCategory));
cl::opt<unsigned> contextParallel("cp",
                                  cl::desc("Context-parallel degree: the sequence is split "
                                           "over cp ranks through every layer"),
                                  cl::value_desc("N"), cl::sub(compileCommand),
                                  cl::cat(parallelCategory));
cl::alias contextParallelLong("context-parallel-size", cl::desc("Alias for --cp"),
                              cl::aliasopt(contextParallel), cl::cat(parallelCategory));
cl::opt<std::string> contextParallelCommType(
    "cp-comm-type",
    cl::desc("How context-parallel attention exchanges keys and values (Megatron's flag): "
             "all_gather, the default (keys and values all-gathered along the sequence, their "
             "gradients reduce-scattered); p2p, ring attention (key and value blocks passed "
             "around the cp ring); a2a and a2a+p2p are not supported yet"),
    cl::value_desc("all_gather|p2p"), cl::init("all_gather"), cl::sub(compileCommand),
    cl::cat(parallelCategory));
cl::opt<bool> sequenceParallel("sp",
                               cl::desc("Sequence parallelism: seq split over tp in the norm "
                                        "and dropout regions"),
                               cl::sub(compileCommand), cl::cat(parallelCategory));
cl::alias sequenceParallelLong("sequence-parallel", cl::desc("Alias for --sp"),
                               cl::aliasopt(sequenceParallel), cl::cat(parallelCategory));
cl::opt<std::string> layoutFlag("layout",
                                cl::desc("Dimensions to mesh axes, e.g. 'heads:tp,ffn:tp,vocab:tp' "
                                         "(replaces Megatron's default)"),
                                cl::value_desc("dim:axis,..."), cl::sub(compileCommand),
                                cl::cat(parallelCategory));
cl::opt<bool> distributedOptimizer(
    "use-distributed-optimizer",
    cl::desc("Shard the optimizer state over the --dp N data-parallel ranks (Megatron's "
             "distributed optimizer; the plan then runs on exactly dp x tp ranks)"),
    cl::sub(compileCommand), cl::cat(parallelCategory));
cl::opt<unsigned> zeroStage(
    "zero-stage",
    cl::desc("What is sharded over the --dp N data-parallel ranks (DeepSpeed's ZeRO stages): "
             "0, nothing; 1, the optimizer state (= --use-distributed-optimizer); 2, also the "
             "gradients, reduce-scattered at each micro-batch and kept only as shards; 3, also "
             "the parameters, gathered where they are used (FSDP; a micro-batch is then the "
             "data-parallel group's, each rank computing micro_batch / dp of its sequences, "
             "micro_batch / (dp x ep) with --ep)"),
    cl::value_desc("0|1|2|3"), cl::sub(compileCommand), cl::cat(parallelCategory));

cl::opt<unsigned> pipelineParallel("pp",
                                   cl::desc("Pipeline-parallel degree: the number of stages "
                                            "the layers are cut into"),
                                   cl::value_desc("N"), cl::sub(compileCommand),
                                   cl::cat(parallelCategory));
cl::alias pipelineParallelLong("pipeline-model-parallel-size", cl::desc("Alias for --pp"),
                               cl::aliasopt(pipelineParallel), cl::cat(parallelCategory));
cl::opt<mtc::mt::PipelineSchedule> scheduleFlag(
    "schedule", cl::desc("Pipeline schedule (default: 1f1b, interleaved with virtual stages)"),
    cl::values(clEnumValN(mtc::mt::PipelineSchedule::GPipe, "gpipe",
                          "all forwards, then all backwards"),
               clEnumValN(mtc::mt::PipelineSchedule::OneFOneB, "1f1b", "one forward, one backward"),
               clEnumValN(mtc::mt::PipelineSchedule::Interleaved, "interleaved",
                          "1F1B over virtual stages (needs --virtual-stages > 1)"),
               clEnumValN(mtc::mt::PipelineSchedule::ZeroBubbleH1, "zb-h1",
                          "zero bubble at 1F1B's memory (Qi et al.)"),
               clEnumValN(mtc::mt::PipelineSchedule::ZeroBubbleH1, "zero-bubble",
                          "alias for zb-h1"),
               clEnumValN(mtc::mt::PipelineSchedule::ZeroBubbleV, "zb-v",
                          "zero bubble, two chunks per stage in a V")),
    cl::sub(compileCommand), cl::cat(parallelCategory));
cl::opt<unsigned> virtualStagesFlag("virtual-stages",
                                    cl::desc("Model chunks per pipeline stage (interleaved "
                                             "schedule)"),
                                    cl::value_desc("V"), cl::sub(compileCommand),
                                    cl::cat(parallelCategory));
cl::alias virtualStagesLong("num-virtual-stages-per-pipeline-rank",
                            cl::desc("Alias for --virtual-stages"), cl::aliasopt(virtualStagesFlag),
                            cl::cat(parallelCategory));
cl::opt<unsigned> layersPerVirtualStage(
    "num-layers-per-virtual-pipeline-stage",
    cl::desc("Layers per model chunk (Megatron's older spelling of the virtual stages: "
             "V = layers / (pp x N))"),
    cl::value_desc("N"), cl::sub(compileCommand), cl::cat(parallelCategory));
cl::list<unsigned> pipelineLayersFlag(
    "pipeline-layers",
    cl::desc("Layers of each model chunk in model order (pp x V entries; chunk c runs on "
             "stage c mod pp), for an uneven cut"),
    cl::value_desc("n,n,..."), cl::CommaSeparated, cl::sub(compileCommand),
    cl::cat(parallelCategory));
cl::opt<unsigned> firstStageLayers(
    "decoder-first-pipeline-num-layers",
    cl::desc("Layers of the first pipeline stage; the stages between the first and last "
             "share the rest evenly"),
    cl::value_desc("N"), cl::sub(compileCommand), cl::cat(parallelCategory));
cl::opt<unsigned> lastStageLayers(
    "decoder-last-pipeline-num-layers",
    cl::desc("Layers of the last pipeline stage; the stages between the first and last share "
             "the rest evenly"),
    cl::value_desc("N"), cl::sub(compileCommand), cl::cat(parallelCategory));

cl::opt<bool> debugInfo("mlir-print-debuginfo",
                        cl::desc("Print source locations (file:line:col) on every op"),
                        cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> autoLayout(
    "auto",
    cl::desc("Search the parallel layout (as `parallel auto` in the model does with --cluster "
             "and --gpus): compile the fastest that fits, saying why (docs/cost-model.md)"),
    cl::sub(compileCommand), cl::cat(parallelCategory));
cl::opt<std::string> autoCluster("cluster",
                                 cl::desc("With --auto: the cluster (a preset or a cluster file)"),
                                 cl::value_desc("preset|file.json"), cl::sub(compileCommand),
                                 cl::cat(parallelCategory));
cl::opt<int64_t> autoGpus("gpus", cl::desc("With --auto: the GPUs (ranks) to train on"),
                          cl::value_desc("N"), cl::sub(compileCommand), cl::cat(parallelCategory));

cl::opt<std::string> exploreInput(cl::Positional, cl::desc("<model.mtl>"), cl::Required,
                                  cl::sub(exploreCommand), cl::cat(compileCategory));
cl::opt<std::string> exploreCluster("cluster",
                                    cl::desc("The cluster: a preset (dgx-a100-80gb, dgx-h100, "
                                             "host) or a cluster file"),
                                    cl::value_desc("preset|file.json"), cl::Required,
                                    cl::sub(exploreCommand), cl::cat(compileCategory));
cl::opt<int64_t> exploreGpus("gpus", cl::desc("The GPUs (ranks) to train on"), cl::value_desc("N"),
                             cl::Required, cl::sub(exploreCommand), cl::cat(compileCategory));
cl::opt<int64_t> exploreRows("rows", cl::desc("Rows of the Pareto table (default 10)"),
                             cl::value_desc("N"), cl::init(10), cl::sub(exploreCommand),
                             cl::cat(compileCategory));
cl::list<std::string> exploreDims("dim",
                                  cl::desc("Set a dimension or model argument, as mtc compile's"),
                                  cl::value_desc("NAME=N"), cl::sub(exploreCommand),
                                  cl::cat(compileCategory));
cl::opt<std::string> exploreEvaluate(
    "evaluate",
    cl::desc("Compose one layout instead of searching: 'tp=2,sp,pp=2,dp=4,vpp=1,mbs=1,"
             "recompute=selective,zero=1' (every key optional)"),
    cl::value_desc("layout"), cl::sub(exploreCommand), cl::cat(compileCategory));
cl::opt<int64_t>
    exploreGlobalBatch("global-batch",
                       cl::desc("Sequences per step (default: the model's train { global_batch })"),
                       cl::value_desc("N"), cl::sub(exploreCommand), cl::cat(compileCategory));

std::string versionText() {
  return (Twine("mtc ") + MTC_VERSION + " (LLVM/MLIR " + LLVM_VERSION_STRING + ")").str();
}

cl::SubCommand inspectCommand("inspect", "Verify a plan and describe it");
cl::opt<std::string> planPath(cl::Positional, cl::desc("<model.plan>"), cl::Required,
                              cl::sub(inspectCommand), cl::cat(compileCategory));

cl::opt<bool> showSchedule("schedule",
                           cl::desc("Draw the plan's pipeline schedule as a text grid (stages x "
                                    "time slots) instead of describing the plan"),
                           cl::sub(inspectCommand), cl::cat(compileCategory));
cl::opt<std::string> scheduleSvg("svg", cl::desc("With --schedule, also draw it as an SVG file"),
                                 cl::value_desc("file"), cl::sub(inspectCommand),
                                 cl::cat(compileCategory));
cl::opt<unsigned> scheduleMicroBatches(
    "micro-batches",
    cl::desc("With --schedule, the schedule for this many micro-batches per step (default: "
             "the most the plan holds)"),
    cl::value_desc("M"), cl::sub(inspectCommand), cl::cat(compileCategory));

/// `--schedule`: the grid of the plan's pipeline schedule, and the SVG with --svg.
int drawSchedule(const mtc::rt::Plan &plan) {
  if (!plan.pipeline) {
    WithColor::error(errs(), "mtc") << plan.dir.string()
                                    << ": the plan has no pipeline schedule (it was compiled "
                                       "without pipeline parallelism)\n";
    return 1;
  }
  const mtc::rt::PipelinePlan &pipeline = *plan.pipeline;
  int64_t m = 0;
  for (const mtc::rt::PipelineSchedule &s : pipeline.schedules)
    m = std::max(m, s.microBatches);
  if (scheduleMicroBatches.getNumOccurrences())
    m = scheduleMicroBatches;
  mtc::rt::Expected<const mtc::rt::PipelineSchedule *> schedule = pipeline.forMicroBatches(m);
  if (!schedule) {
    WithColor::error(errs(), "mtc") << plan.dir.string() << ": "
                                    << schedule.error().message() << "\n";
    return 1;
  }
  outs() << mtc::rt::scheduleGrid(pipeline, **schedule);
  if (scheduleSvg.getNumOccurrences()) {
    std::error_code ec;
    ToolOutputFile out(scheduleSvg, ec, sys::fs::OF_None);
    if (ec) {
      WithColor::error(errs(), "mtc") << "--svg: cannot write '" << scheduleSvg
                                      << "': " << ec.message() << "\n";
      return 1;
    }
    out.os() << mtc::rt::scheduleSvg(pipeline, **schedule);
    out.keep();
  }
  return 0;
}

/// The plan's files are verified against MANIFEST by the runtime's own loader, so
/// `mtc inspect` accepts exactly the plans `mtrun` accepts.
int inspect() {
  if (!showSchedule &&
      (scheduleSvg.getNumOccurrences() || scheduleMicroBatches.getNumOccurrences())) {
    WithColor::error(errs(), "mtc") << "--svg and --micro-batches draw the schedule: give "
                                       "--schedule too\n";
    return 1;
  }
  mtc::rt::Expected<mtc::rt::Plan> plan = mtc::rt::loadPlan(planPath.getValue());
  if (!plan) {
    WithColor::error(errs(), "mtc") << plan.error().message() << "\n";
    return 1;
  }
  if (showSchedule)
    return drawSchedule(*plan);
  outs() << mtc::rt::describePlan(*plan);
  return 0;
}

cl::SubCommand simulateCommand("simulate",
                               "Predict a plan's step time, MFU and memory on a cluster");
cl::opt<std::string> simulatePlan(cl::Positional, cl::desc("<model.plan>"), cl::Required,
                                  cl::sub(simulateCommand), cl::cat(compileCategory));
cl::opt<std::string> clusterFlag(
    "cluster",
    cl::desc("The cluster: a preset (dgx-a100-80gb, dgx-h100, host) or a cluster file "
             "(docs/cost-model.md)"),
    cl::value_desc("preset|file.json"), cl::Required, cl::sub(simulateCommand),
    cl::cat(compileCategory));
cl::opt<unsigned> nodesFlag("nodes", cl::desc("Nodes of the cluster (default 1)"),
                            cl::value_desc("N"), cl::init(1), cl::sub(simulateCommand),
                            cl::cat(compileCategory));
cl::opt<unsigned> ranksPerNodeFlag(
    "gpus-per-node",
    cl::desc("Ranks per node (default: the cluster's devices per node; on a CPU cluster the "
             "ranks share the cores)"),
    cl::value_desc("G"), cl::sub(simulateCommand), cl::cat(compileCategory));
cl::opt<unsigned> simulateGlobalBatch(
    "global-batch",
    cl::desc("Sequences per step, as mtrun's flag (default: the plan's global_batch)"),
    cl::value_desc("N"), cl::sub(simulateCommand), cl::cat(compileCategory));
cl::opt<std::string> dtypeFlag(
    "dtype",
    cl::desc("Element type of the matrix products, for the peak FLOP/s (default: the plan's "
             "precision, f32)"),
    cl::value_desc("f32|tf32|bf16|f16|fp8"), cl::sub(simulateCommand), cl::cat(compileCategory));
cl::opt<std::string> simulateTrace("trace",
                                   cl::desc("Write the predicted step as a Chrome trace"),
                                   cl::value_desc("file.json"), cl::sub(simulateCommand),
                                   cl::cat(compileCategory));

/// `mtc simulate`: the plan as mtrun loads it, the cluster, the cost model (compiler/costmodel).
int simulate() {
  auto fail = [](const Twine &message) {
    WithColor::error(errs(), "mtc") << message << "\n";
    return 1;
  };
  if (nodesFlag == 0)
    return fail("--nodes must be at least 1");
  if (ranksPerNodeFlag.getNumOccurrences() && ranksPerNodeFlag == 0)
    return fail("--gpus-per-node must be at least 1");
  Expected<mtc::costmodel::Cluster> cluster = mtc::costmodel::loadCluster(clusterFlag);
  if (!cluster)
    return fail(toString(cluster.takeError()));
  mtc::rt::Expected<mtc::rt::Plan> plan = mtc::rt::loadPlan(simulatePlan.getValue());
  if (!plan)
    return fail(plan.error().message());
  mtc::costmodel::SimulateOptions options;
  options.nodes = nodesFlag;
  options.ranksPerNode = ranksPerNodeFlag;
  options.globalBatch = simulateGlobalBatch;
  options.dtype = dtypeFlag;
  Expected<mtc::costmodel::Simulation> simulation =
      mtc::costmodel::simulateStep(*plan, *cluster, options);
  if (!simulation)
    return fail(toString(simulation.takeError()));
  mtc::costmodel::printSimulation(*simulation, *plan, *cluster, outs());
  if (simulateTrace.getNumOccurrences()) {
    std::error_code ec;
    ToolOutputFile out(simulateTrace, ec, sys::fs::OF_None);
    if (ec)
      return fail("--trace: cannot write '" + simulateTrace + "': " + ec.message());
    out.os() << formatv("{0:2}", mtc::costmodel::simulationTrace(*simulation)) << "\n";
    out.keep();
    outs() << "wrote the predicted timeline to " << simulateTrace << "\n";
  }
  return 0;
}

cl::SubCommand calibrateCommand("calibrate",
                                "Measure this host and write its cluster file");
cl::opt<std::string> calibrateOutput("output",
                                     cl::desc("The cluster file to write (default: stdout)"),
                                     cl::value_desc("host.json"), cl::init("-"),
                                     cl::sub(calibrateCommand), cl::cat(compileCategory));

/// `mtc calibrate`: Calibrate.h's measurements over the host preset, as a cluster file.
int calibrate() {
  Expected<mtc::costmodel::Cluster> base = mtc::costmodel::loadCluster("host");
  if (!base) {
    WithColor::error(errs(), "mtc") << toString(base.takeError()) << "\n";
    return 1;
  }
  mtc::costmodel::Cluster host = mtc::calibrateHost(*base, errs());
  host.description = "This host, measured by mtc calibrate (docs/cost-model.md).";
  std::error_code ec;
  ToolOutputFile out(calibrateOutput, ec, sys::fs::OF_None);
  if (ec) {
    WithColor::error(errs(), "mtc") << "--output: cannot write '" << calibrateOutput
                                    << "': " << ec.message() << "\n";
    return 1;
  }
  out.os() << formatv("{0:2}", host.toJSON()) << "\n";
  out.keep();
  return 0;
}

/// "mtc: error: ..." for a bad flag value (or another error outside MLIR diagnostics).
LogicalResult flagError(const Twine &message) {
  WithColor::error(errs(), "mtc") << message << "\n";
  return failure();
}

/// --cuda-arch's chips (sm_80 and sm_90 by default).
std::vector<std::string> cudaChips() {
  if (cudaArchitectures.getNumOccurrences() == 0)
    return {"sm_80", "sm_90"};
  return std::vector<std::string>(cudaArchitectures.begin(), cudaArchitectures.end());
}

/// --target and --cuda-arch agree: `none` alone, --cuda-arch only with cuda and only known
/// chips, each once.
LogicalResult checkTargetFlags() {
  if (hasTarget(KernelTarget::None) && kernelTargets.size() > 1)
    return flagError("--target=none cannot be combined with other targets");
  if (cudaArchitectures.getNumOccurrences() == 0)
    return success();
  if (!hasTarget(KernelTarget::Cuda))
    return flagError("--cuda-arch chooses the chips of the CUDA kernels: give --target=cuda "
                     "(or x86,cuda) too");
  std::vector<std::string> chips = cudaChips();
  for (auto [i, chip] : llvm::enumerate(chips)) {
    if (Error err = mtc::codegen::checkGPUArchitecture(chip))
      return flagError("--cuda-arch: " + toString(std::move(err)));
    if (llvm::is_contained(ArrayRef(chips).take_front(i), chip))
      return flagError("--cuda-arch lists " + chip + " twice");
  }
  return success();
}

/// Runs the pass pipeline `build` on `module`; diagnostics go to the context.
LogicalResult runPipeline(mlir::ModuleOp module, void (*build)(mlir::OpPassManager &)) {
  mlir::PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

/// The training step for the CPU backend: decomposed, outlined into pure functions of
/// explicit buffers, partitioned (with tensor parallelism) and lowered to linalg
/// (mtc-partition-pipeline, mtc-to-linalg-pipeline); `kernels` (optional) gets how to call
/// the outlined functions and their communication.
mlir::OwningOpRef<mlir::ModuleOp> lowerStep(mlir::ModuleOp trained,
                                            mtc::PlanKernels *kernels = nullptr) {
  mlir::OwningOpRef<mlir::ModuleOp> module(trained.clone());
  if (failed(runPipeline(*module, mtc::buildPartitionPipeline)))
    return nullptr;
  // The predictions cover the whole-model step too (the plan's communication_bytes and
  // functions); a pipeline plan's code only the functions its ranks call.
  if (kernels) {
    kernels->collectiveBytes = mtc::sharding::predictCollectiveBytes(*module);
    kernels->functionCosts = mtc::computeFunctionCosts(*module);
  }
  mtc::eraseSingleStageEntries(*module);
  if (kernels)
    kernels->callingConvention = mtc::describeCallingConvention(*module);
  if (failed(runPipeline(*module, mtc::buildToLinalgPipeline)))
    return nullptr;
  return module;
}

/// Plans the arenas of the functions the runtime calls (one at a time), in `buffers`
/// (lowerStep's output after mtc-cpu-bufferize-pipeline, or a CUDA step's host code): the
/// workspace is the largest (the runtime holds one arena of that size). With
/// `callingConvention`, each function's entry gets its "arena" (docs/plan-format.md).
FailureOr<int64_t> planArenas(mlir::ModuleOp buffers, json::Object *callingConvention = nullptr) {
  // The plan mtc-workspace-views compiles in (mtc-cpu-to-llvm-pipeline's first pass, on
  // this module): every entry function, the pipeline chunks' included.
  FailureOr<mtc::codegen::WorkspacePlan> plan = mtc::codegen::planKernelMemory(buffers);
  if (failed(plan))
    return failure();
  int64_t workspace = 0;
  for (const mtc::codegen::KernelMemoryPlan &function : plan->functions) {
    workspace = std::max(workspace, function.arenaBytes);
    json::Object *entry =
        callingConvention ? callingConvention->getObject(function.function) : nullptr;
    if (!entry)
      continue;
    json::Array allocations;
    for (auto [size, offset] : llvm::zip_equal(function.sizes, function.offsets))
      allocations.push_back(json::Array{size, offset});
    (*entry)["arena"] = json::Object{{"bytes", function.arenaBytes},
                                     {"peak_bytes", function.peakBytes},
                                     {"allocations", std::move(allocations)}};
  }
  return workspace;
}

/// `llvmDialectModule` compiled to a shared object, its bytes.
FailureOr<std::string> compileSharedObject(mlir::ModuleOp llvmDialectModule) {
  SmallString<128> path;
  if (std::error_code ec = sys::fs::createTemporaryFile("mtc-kernels", "so", path))
    return flagError("cannot create a temporary file: " + ec.message());
  llvm::scope_exit cleanup([&] { sys::fs::remove(path); });
  mtc::codegen::CPUCodegenOptions options;
  options.threads = codegenThreads;
  if (Error err = mtc::codegen::compileToSharedObject(llvmDialectModule, path, options))
    return flagError(toString(std::move(err)));
  ErrorOr<std::unique_ptr<MemoryBuffer>> bytes = MemoryBuffer::getFile(path);
  if (!bytes)
    return flagError("cannot read " + path);
  return (*bytes)->getBuffer().str();
}

/// The training step compiled for the CPU, one stage after the other (`step`, lowerStep's
/// output, is changed): the buffers (mtc-cpu-bufferize-pipeline) whose arenas are planned,
/// the LLVM dialect (mtc-cpu-to-llvm-pipeline), then a shared object.
LogicalResult compileX86Kernels(mlir::ModuleOp step, mtc::PlanKernels &kernels) {
  if (failed(runPipeline(step, mtc::buildCPUBufferizePipeline)))
    return failure();
  FailureOr<int64_t> workspace = planArenas(step, &kernels.callingConvention);
  if (failed(workspace))
    return failure();
  kernels.workspaceBytes = *workspace;
  if (failed(runPipeline(step, mtc::buildCPUToLLVMPipeline)))
    return failure();
  FailureOr<std::string> object = compileSharedObject(step);
  if (failed(object))
    return failure();
  kernels.x86SharedObject = std::move(*object);
  return success();
}

/// The training step's CUDA kernels (`step`, lowerStep's output, is changed): the buffers
/// (mtc-gpu-bufferize-pipeline), PTX for each --cuda-arch, the host code launching them
/// (its temporaries freed after their last uses, mtc-gpu-host-deallocation-pipeline; an x86
/// shared object, its device workspace planned as the x86 kernels' arena), and a
/// cubin of each chip where ptxas is found (a note, not an error, where it is not).
LogicalResult compileCudaKernels(mlir::ModuleOp step, mtc::PlanKernels &kernels) {
  if (failed(runPipeline(step, mtc::buildGPUBufferizePipeline)))
    return failure();
  mtc::codegen::GPUCodegenOptions options;
  Expected<mtc::codegen::GPUStepKernels> compiled =
      mtc::codegen::compileStepKernels(step, cudaChips(), options);
  if (!compiled)
    return flagError(toString(compiled.takeError()));
  mtc::PlanCudaKernels &cuda = kernels.cuda.emplace();
  cuda.step = std::move(*compiled);
  cuda.blockSize = options.blockSize;
  // The host functions take the step's buffers: the calling convention is the step's, with
  // the arenas of the host code's own (device) workspace.
  cuda.callingConvention = kernels.callingConvention;
  mlir::ModuleOp host = *cuda.step.host;
  if (failed(runPipeline(host, mtc::buildGPUHostDeallocationPipeline)))
    return failure();
  FailureOr<int64_t> workspace = planArenas(host, &cuda.callingConvention);
  if (failed(workspace))
    return failure();
  cuda.workspaceBytes = *workspace;
  if (failed(runPipeline(host, mtc::buildGPUHostToLLVMPipeline)))
    return failure();
  FailureOr<std::string> hostObject = compileSharedObject(host);
  if (failed(hostObject))
    return failure();
  cuda.hostSharedObject = std::move(*hostObject);
  std::string ptxas = mtc::codegen::findPtxas(options);
  if (ptxas.empty()) {
    WithColor::note(errs(), "mtc") << "no ptxas found (CUDA toolkit): the plan's CUDA kernels "
                                      "are PTX only, for the driver to compile when loaded\n";
    return success();
  }
  for (const auto &[chip, ptx] : cuda.step.ptx) {
    Expected<std::string> cubin = mtc::codegen::assembleCubin(ptx, chip, ptxas);
    if (!cubin)
      return flagError(toString(cubin.takeError()));
    cuda.cubins.emplace_back(chip, std::move(*cubin));
  }
  return success();
}

/// The training step compiled for each --target: lowered once (lowerStep), then by each
/// backend from its own copy.
FailureOr<mtc::PlanKernels> compileKernels(mlir::ModuleOp trained) {
  mtc::PlanKernels kernels;
  mlir::OwningOpRef<mlir::ModuleOp> step = lowerStep(trained, &kernels);
  if (!step)
    return failure();
  if (hasTarget(KernelTarget::Cuda)) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(step->clone());
    if (failed(compileCudaKernels(*copy, kernels)))
      return failure();
  }
  if (hasTarget(KernelTarget::X86) && failed(compileX86Kernels(*step, kernels)))
    return failure();
  return kernels;
}

/// "--tp 3 does not divide heads = 4" for each dimension `axis` must divide; `exempt` (the
/// vocabulary under tp, which mt-pad-vocabulary pads) need not.
LogicalResult checkDivides(mlir::DictionaryAttr dims, StringRef flag, int64_t factor,
                           ArrayRef<StringRef> names, StringRef exempt = {}) {
  bool ok = true;
  for (StringRef name : names)
    if (auto size = dims.getAs<mlir::IntegerAttr>(name);
        size && size.getInt() % factor != 0 && name != exempt) {
      WithColor::error(errs(), "mtc") << flag << " " << factor << " does not divide " << name
                                      << " = " << size.getInt() << "\n";
      ok = false;
    }
  return success(ok);
}

/// A degree flag's value: at least 1.
LogicalResult readDegree(cl::opt<unsigned> &flag, std::optional<int64_t> &degree) {
  if (flag.getNumOccurrences() == 0)
    return success();
  if (flag == 0)
    return flagError("--" + flag.ArgStr + " must be at least 1");
  degree = flag;
  return success();
}

/// The pipeline flags (--pp, --schedule, --virtual-stages and their Megatron spellings, the
/// split flags) over the model's pipeline settings, checked as the frontend checks the
/// block. A new pp or virtual-stage count without a split flag drops the block's split.
LogicalResult applyPipelineFlags(int64_t numLayers, std::optional<int64_t> &pp,
                                 std::optional<mtc::mt::PipelineSchedule> &schedule,
                                 std::optional<int64_t> &virtualStages,
                                 mlir::DenseI64ArrayAttr &pipelineLayers, mlir::MLIRContext *ctx) {
  using mtc::mt::PipelineSchedule;
  if (failed(readDegree(pipelineParallel, pp)) ||
      failed(readDegree(virtualStagesFlag, virtualStages)))
    return failure();
  if (scheduleFlag.getNumOccurrences())
    schedule = scheduleFlag;
  int64_t stages = pp.value_or(1);
  if (layersPerVirtualStage.getNumOccurrences()) {
    if (virtualStagesFlag.getNumOccurrences())
      return flagError("give --virtual-stages or --num-layers-per-virtual-pipeline-stage, "
                       "not both");
    int64_t perChunk = layersPerVirtualStage;
    if (perChunk == 0 || numLayers % (stages * perChunk) != 0)
      return flagError(formatv("--num-layers-per-virtual-pipeline-stage {0}: {1} layers do not "
                               "split into pp {2} stages of chunks of {0} layers",
                               perChunk, numLayers, stages));
    virtualStages = numLayers / (stages * perChunk);
  }
  bool splitFlags = pipelineLayersFlag.getNumOccurrences() ||
                    firstStageLayers.getNumOccurrences() || lastStageLayers.getNumOccurrences();
  if (!splitFlags &&
      (pipelineParallel.getNumOccurrences() || virtualStagesFlag.getNumOccurrences() ||
       layersPerVirtualStage.getNumOccurrences()))
    pipelineLayers = {};
  int64_t chunks = virtualStages.value_or(schedule == PipelineSchedule::ZeroBubbleV ? 2 : 1);
  if (stages > numLayers)
    return flagError(formatv("pp {0} exceeds the {1} layers there are to cut into pipeline "
                             "stages",
                             stages, numLayers));
  auto describe = [](int64_t n) { return "--virtual-stages " + std::to_string(n); };
  if (std::optional<mtc::mt::PipelineSettingProblem> problem = mtc::mt::checkPipelineSchedule(
          stages, schedule, virtualStages, {"--pp", "--virtual-stages", describe}))
    return flagError(problem->message);

  if (pipelineLayersFlag.getNumOccurrences()) {
    if (firstStageLayers.getNumOccurrences() || lastStageLayers.getNumOccurrences())
      return flagError("give --pipeline-layers or --decoder-first/last-pipeline-num-layers, "
                       "not both");
    SmallVector<int64_t> layers(pipelineLayersFlag.begin(), pipelineLayersFlag.end());
    if (static_cast<int64_t>(layers.size()) != stages * chunks)
      return flagError(formatv("--pipeline-layers lists {0} chunks; pp {1} x {2} virtual "
                               "stages has {3}",
                               layers.size(), stages, chunks, stages * chunks));
    if (llvm::is_contained(layers, 0))
      return flagError("--pipeline-layers: each chunk needs at least 1 layer");
    if (Error error = mtc::mt::checkPipelineLayers(layers, numLayers))
      return flagError("--pipeline-layers: " + toString(std::move(error)));
    pipelineLayers = mlir::DenseI64ArrayAttr::get(ctx, layers);
    return success();
  }
  if (stages == 1 && !splitFlags)
    return success();
  std::optional<int64_t> first, last;
  if (firstStageLayers.getNumOccurrences())
    first = firstStageLayers;
  if (lastStageLayers.getNumOccurrences())
    last = lastStageLayers;
  if (pipelineLayers && !splitFlags)
    return success(); // the block's split, for the block's pp and virtual stages
  Expected<SmallVector<int64_t>> layers =
      mtc::mt::splitPipelineLayers(numLayers, stages, chunks, first, last);
  if (!layers)
    return flagError(toString(layers.takeError()) +
                     (splitFlags ? ""
                                 : "; give the layers of each chunk with "
                                   "--pipeline-layers (or of the first/last stage with "
                                   "--decoder-first/last-pipeline-num-layers)"));
  if (splitFlags)
    pipelineLayers = mlir::DenseI64ArrayAttr::get(ctx, *layers);
  return success();
}

/// --cp-comm-type: the all-gather exchange (the partitioner derives it from the layouts) or
/// ring attention (attention's partition rule); Megatron's all-to-all ones are not written.
LogicalResult checkContextParallelCommType() {
  StringRef type = contextParallelCommType;
  if (mtc::mt::symbolizeContextParallelCommType(type))
    return success();
  if (type == "a2a" || type == "a2a+p2p")
    return flagError("--cp-comm-type " + type +
                     " is not supported yet: context parallelism all-gathers keys and values "
                     "(all_gather) or passes them around a ring (p2p); all-to-all (a2a) does "
                     "not exist yet");
  return flagError("--cp-comm-type '" + type +
                   "' is not a context-parallel communication type: all_gather, p2p, a2a or "
                   "a2a+p2p");
}

/// The command line's parallel flags replace the model's `parallel {}` settings, with the
/// checks the frontend makes of the block.
LogicalResult applyParallelFlags(mlir::ModuleOp module) {
  if (failed(checkContextParallelCommType()))
    return failure();
  bool pipelineFlags = pipelineParallel.getNumOccurrences() || scheduleFlag.getNumOccurrences() ||
                       virtualStagesFlag.getNumOccurrences() ||
                       layersPerVirtualStage.getNumOccurrences() ||
                       pipelineLayersFlag.getNumOccurrences() ||
                       firstStageLayers.getNumOccurrences() || lastStageLayers.getNumOccurrences();
  if (tensorParallel.getNumOccurrences() == 0 && dataParallel.getNumOccurrences() == 0 &&
      expertParallel.getNumOccurrences() == 0 && contextParallel.getNumOccurrences() == 0 &&
      expertTensorParallel.getNumOccurrences() == 0 && !sequenceParallel &&
      layoutFlag.getNumOccurrences() == 0 && !distributedOptimizer &&
      zeroStage.getNumOccurrences() == 0 && !pipelineFlags &&
      contextParallelCommType.getNumOccurrences() == 0)
    return success();
  mlir::MLIRContext *ctx = module.getContext();
  mlir::Builder b(ctx);
  auto dims = module->getAttrOfType<mlir::DictionaryAttr>(mtc::mt::MTDialect::kDimsAttrName);
  // The model's settings (none under `parallel auto`: the flags choose instead).
  mtc::mt::ParallelAttr model = mtc::mt::ParallelAttr::lookup(module);
  if (!model || model.getAutoSearch())
    model = mtc::mt::ParallelAttr::get(ctx);
  std::optional<int64_t> tp = model.getTp(), dp = model.getDp(), pp = model.getPp(),
                         ep = model.getEp(), etp = model.getEtp(), cp = model.getCp(),
                         virtualStages = model.getVirtualStages();
  std::optional<bool> sp = model.getSp(), distributed = model.getDistributedOptimizer();
  std::optional<mtc::mt::PipelineSchedule> schedule = model.getSchedule();
  mlir::DictionaryAttr layoutAttr = model.getLayout();
  mlir::DenseI64ArrayAttr pipelineLayers = model.getPipelineLayers();
  std::optional<mtc::mt::ContextParallelCommType> cpCommType = model.getCpCommType();
  if (contextParallelCommType.getNumOccurrences())
    cpCommType = mtc::mt::symbolizeContextParallelCommType(contextParallelCommType);
  if (failed(readDegree(tensorParallel, tp)) || failed(readDegree(dataParallel, dp)) ||
      failed(readDegree(expertParallel, ep)) || failed(readDegree(contextParallel, cp)) ||
      failed(readDegree(expertTensorParallel, etp)))
    return failure();
  if (expertParallel.getNumOccurrences() &&
      failed(checkDivides(dims, "--ep", ep.value_or(1), {"experts"})))
    return failure();
  if (contextParallel.getNumOccurrences() &&
      failed(checkDivides(dims, "--cp", cp.value_or(1), {"seq"})))
    return failure();
  // Ring attention balances causal work by cutting the sequence in 2 cp chunks.
  if (cp.value_or(1) > 1 && cpCommType == mtc::mt::ContextParallelCommType::P2P &&
      failed(checkDivides(dims, "ring attention (cp_comm_type p2p) cuts seq in 2 x cp chunks:", 2 * *cp,
                          {"seq"})))
    return failure();
  if (pipelineFlags && failed(applyPipelineFlags(mtc::mt::countLayers(module), pp, schedule,
                                                 virtualStages, pipelineLayers, ctx)))
    return failure();
  int64_t tpDegree = tp.value_or(1);
  StringRef vocabulary = mtc::mt::lossClassDim(module);
  if (sequenceParallel)
    sp = true;
  if (distributedOptimizer)
    distributed = true;
  if (zeroStage.getNumOccurrences()) {
    if (zeroStage > 3)
      return flagError("--zero-stage " + Twine(zeroStage.getValue()) +
                       " is not a ZeRO stage: use 0, 1, 2 or 3");
    if (distributedOptimizer && zeroStage != 1)
      return flagError("--use-distributed-optimizer is ZeRO stage 1, but --zero-stage is " +
                       Twine(zeroStage.getValue()) + ": give one of them");
    distributed = zeroStage >= 1;
  }
  if (distributed.value_or(false) && dp.value_or(1) < 2)
    return flagError("the distributed optimizer shards the optimizer state over data-parallel "
                     "ranks, whose number it then fixes: set --dp N (N > 1)");
  if (layoutFlag.getNumOccurrences()) {
    mlir::NamedAttrList layout;
    SmallVector<StringRef> pairs;
    StringRef(layoutFlag).split(pairs, ',', -1, /*KeepEmpty=*/false);
    for (StringRef pair : pairs) {
      auto [dim, axis] = pair.split(':');
      dim = dim.trim();
      axis = axis.trim();
      if (dim.empty() || axis.empty())
        return flagError("--layout: '" + pair + "' is not 'dimension:axis'");
      if (!dims || !dims.get(dim))
        return flagError("--layout names unknown dimension '" + dim + "'");
      if (!llvm::is_contained({"dp", "tp", "pp", "cp", "ep"}, axis))
        return flagError("--layout: unknown mesh axis '" + axis +
                         "'; expected 'dp', 'tp', 'pp', 'cp' or 'ep'");
      if (layout.get(dim))
        return flagError("--layout maps dimension '" + dim + "' twice");
      layout.set(dim, b.getStringAttr(axis));
      if (axis == "tp" && failed(checkDivides(dims, "tp", tpDegree, {dim}, vocabulary)))
        return failure();
    }
    layoutAttr = layout.getDictionary(ctx);
  } else if (failed(checkDivides(
                 dims, "--tp", tpDegree,
                 SmallVector<StringRef>(std::begin(mtc::sharding::kMegatronTensorParallelDims),
                                        std::end(mtc::sharding::kMegatronTensorParallelDims)),
                 vocabulary))) {
    return failure();
  }
  if (sp.value_or(false)) {
    if (tpDegree == 1)
      return flagError("sequence parallelism (--sp) needs tensor parallelism: set --tp above 1");
    if (failed(checkDivides(dims, "--sp over tp", tpDegree, {"seq"})))
      return failure();
  }
  // What the checks above leave to the attribute's verifier is reported at the model.
  auto parallel = mtc::mt::ParallelAttr::getChecked(
      [&] { return mlir::emitError(module.getLoc()); }, ctx, /*autoSearch=*/false, tp, pp, dp, cp,
      ep, etp, sp, schedule, virtualStages, model.getMicroBatches(), model.getRecompute(),
      distributed, layoutAttr, pipelineLayers, cpCommType);
  if (!parallel)
    return failure();
  module->setAttr(mtc::mt::MTDialect::kParallelAttrName, parallel);
  if (zeroStage >= 2)
    module->setAttr(mtc::sharding::kZeroStageAttrName, b.getI64IntegerAttr(zeroStage));
  return success();
}

/// Sets the train block's `key` to the word `word` in the AST before it is lowered (as if
/// the model file said so).
void setTrainWord(mtc::frontend::Module &ast, StringRef key, StringRef word) {
  if (!ast.train) {
    ast.train.emplace();
    ast.train->kind = "train";
  }
  std::vector<mtc::frontend::ConfigEntry> &entries = ast.train->entries;
  auto it = llvm::find_if(
      entries, [&](const mtc::frontend::ConfigEntry &entry) { return entry.key == key; });
  if (it == entries.end()) {
    entries.emplace_back().key = key.str();
    it = std::prev(entries.end());
  }
  auto value = std::make_unique<mtc::frontend::Expr>(mtc::frontend::Expr::Kind::Name);
  value->name = word.str();
  it->value = std::move(value);
}

/// --bf16 / --fp16: the train block's `precision`; --eod-mask-loss: its `eod_mask_loss`.
LogicalResult applyTrainFlags(mtc::frontend::Module &ast) {
  if (bf16Flag && fp16Flag)
    return flagError("give --bf16 or --fp16, not both");
  if (bf16Flag || fp16Flag)
    setTrainWord(ast, "precision", bf16Flag ? "bf16" : "fp16");
  if (eodMaskLossFlag)
    setTrainWord(ast, "eod_mask_loss", "on");
  return success();
}

/// --dim NAME=N: the values set from the command line, in the AST before it is lowered.
LogicalResult applyDimOverrides(mtc::frontend::Module &ast,
                                const cl::list<std::string> &texts = dimOverrides) {
  std::vector<mtc::frontend::BindingOverride> overrides;
  for (const std::string &text : texts) {
    Expected<mtc::frontend::BindingOverride> parsed = mtc::frontend::parseBindingOverride(text);
    if (!parsed)
      return flagError(toString(parsed.takeError()));
    overrides.push_back(std::move(*parsed));
  }
  if (Error error = mtc::frontend::applyBindingOverrides(ast, overrides))
    return flagError(toString(std::move(error)));
  return success();
}

/// The model file parsed, with `dims` (--dim) applied; errors printed.
std::unique_ptr<mtc::frontend::Module> parseModelFile(StringRef path, SourceMgr &sourceMgr,
                                                      const cl::list<std::string> &dims) {
  std::string errorMessage;
  std::unique_ptr<MemoryBuffer> input = mlir::openInputFile(path, &errorMessage);
  if (!input) {
    WithColor::error(errs(), "mtc") << errorMessage << "\n";
    return nullptr;
  }
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  mtc::frontend::Diagnostics diags(sourceMgr, bufferId);
  std::unique_ptr<mtc::frontend::Module> ast =
      mtc::frontend::parseModule(sourceMgr, bufferId, diags);
  if (!ast || diags.numErrors() != 0 || failed(applyDimOverrides(*ast, dims)))
    return nullptr;
  return ast;
}

/// Runs `use` on `ast` lowered to `mt` in a context of its own.
Error withModel(const mtc::frontend::Module &ast, SourceMgr &sourceMgr,
                function_ref<Error(mlir::ModuleOp)> use) {
  mlir::DialectRegistry registry;
  mtc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mtc::frontend::Diagnostics diags(sourceMgr, sourceMgr.getMainFileID());
  mlir::OwningOpRef<mlir::ModuleOp> model = mtc::frontend::lowerToMT(ast, context, diags);
  if (!model)
    return createStringError("the model does not compile");
  if (failed(applyFusedAttentionFlag(*model)))
    return createStringError("invalid --fused-attention flags");
  return use(*model);
}

/// Runs the layout search (Explore.h) on `ast`; the report to stdout.
Expected<mtc::AutoChoice> searchLayout(const mtc::frontend::Module &ast, SourceMgr &sourceMgr,
                                       const mtc::SearchRequest &request, bool table) {
  std::optional<mtc::AutoChoice> choice;
  if (Error err = withModel(ast, sourceMgr, [&](mlir::ModuleOp model) -> Error {
        Expected<mtc::AutoChoice> found = mtc::searchModel(model, request, table, outs());
        if (!found)
          return found.takeError();
        choice = std::move(*found);
        return Error::success();
      }))
    return std::move(err);
  return std::move(*choice);
}

/// `mtc explore MODEL.mtl --cluster C --gpus N`: the Pareto table and the choice.
int explore() {
  SourceMgr sourceMgr;
  std::unique_ptr<mtc::frontend::Module> ast = parseModelFile(exploreInput, sourceMgr, exploreDims);
  if (!ast)
    return 1;
  if (exploreGlobalBatch.getNumOccurrences()) {
    if (exploreGlobalBatch < 1) {
      (void)flagError("--global-batch must be at least 1");
      return 1;
    }
    mtc::setTrainSetting(*ast, "global_batch", exploreGlobalBatch);
  }
  if (exploreRows < 1) {
    (void)flagError("--rows must be at least 1");
    return 1;
  }
  // --bf16 searches the mixed-precision step, as `mtc compile --auto --bf16` compiles it.
  if (failed(applyTrainFlags(*ast)))
    return 1;
  mtc::SearchRequest request{exploreCluster, exploreGpus, exploreRows};
  if (exploreEvaluate.getNumOccurrences()) {
    Error err = withModel(*ast, sourceMgr, [&](mlir::ModuleOp model) {
      return mtc::evaluateLayout(model, request, exploreEvaluate, outs());
    });
    if (err) {
      (void)flagError(toString(std::move(err)));
      return 1;
    }
    return 0;
  }
  Expected<mtc::AutoChoice> choice = searchLayout(*ast, sourceMgr, request, true);
  if (!choice) {
    (void)flagError(toString(choice.takeError()));
    return 1;
  }
  return 0;
}

/// --auto (or `parallel auto` with --cluster and --gpus): the search's choice, its
/// micro-batch set in `ast`; none without them.
LogicalResult chooseAutoLayout(mtc::frontend::Module &ast, SourceMgr &sourceMgr,
                               std::optional<mtc::AutoChoice> &choice) {
  bool given = autoCluster.getNumOccurrences() || autoGpus.getNumOccurrences();
  bool modelAuto = ast.parallel && ast.parallel->isAuto;
  if (!autoLayout && !(modelAuto && given)) {
    if (given)
      return flagError("--cluster and --gpus are the search's (--auto, or `parallel auto` in "
                       "the model)");
    return success();
  }
  if (!autoCluster.getNumOccurrences() || !autoGpus.getNumOccurrences())
    return flagError("--auto searches the layout for a cluster: give --cluster C and --gpus N");
  if (tensorParallel.getNumOccurrences() || pipelineParallel.getNumOccurrences() ||
      dataParallel.getNumOccurrences() || contextParallel.getNumOccurrences() ||
      expertParallel.getNumOccurrences() || sequenceParallel.getNumOccurrences() ||
      zeroStage.getNumOccurrences() || distributedOptimizer.getNumOccurrences() ||
      virtualStagesFlag.getNumOccurrences() || scheduleFlag.getNumOccurrences() ||
      recompute.getNumOccurrences())
    return flagError("--auto chooses the layout: leave out --tp, --pp, --dp, --cp, --ep, --sp, "
                     "--zero-stage, --schedule, --virtual-stages and --recompute");
  Expected<mtc::AutoChoice> chosen =
      searchLayout(ast, sourceMgr, {autoCluster, autoGpus, 10}, false);
  if (!chosen)
    return flagError(toString(chosen.takeError()));
  // Under ZeRO-3 the compiled micro-batch is split over the data-parallel ranks.
  mtc::setTrainSetting(ast, "micro_batch",
                       chosen->layout.microBatch *
                           (chosen->layout.zeroStage == 3 ? chosen->layout.dp : 1));
  choice = std::move(*chosen);
  return success();
}

int compile() {
  std::string errorMessage;
  std::unique_ptr<MemoryBuffer> input = mlir::openInputFile(inputFile, &errorMessage);
  if (!input) {
    WithColor::error(errs(), "mtc") << errorMessage << "\n";
    return 1;
  }
  SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  mtc::frontend::Diagnostics diags(sourceMgr, bufferId);

  std::unique_ptr<mtc::frontend::Module> ast =
      mtc::frontend::parseModule(sourceMgr, bufferId, diags);
  if (!ast || diags.numErrors() != 0)
    return 1;
  if (failed(applyDimOverrides(*ast)) || failed(applyTrainFlags(*ast)))
    return 1;
  std::optional<mtc::AutoChoice> choice;
  if (failed(chooseAutoLayout(*ast, sourceMgr, choice)))
    return 1;

  mlir::DialectRegistry registry;
  mtc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  // Diagnostics point at .mtl source lines; a dump of the IR would bury them.
  context.printOpOnDiagnostic(false);
  // Verifier failures (a frontend bug, not a user error) still print as file:line:col.
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module = mtc::frontend::lowerToMT(*ast, context, diags);
  if (!module)
    return 1;
  if (failed(checkTargetFlags()))
    return 1;
  if (printSavedActivations && !printStats) {
    (void)flagError("--saved-activations is a part of what --stats prints: give --stats too");
    return 1;
  }

  if (failed(applyParallelFlags(*module)) || failed(applyFusedAttentionFlag(*module)))
    return 1;
  applyResetDocumentsFlags(*module);
  if (choice)
    mtc::applyChoice(*module, *choice);

  FailureOr<mtc::ModelStats> stats = mtc::computeModelStats(*module);
  if (failed(stats))
    return 1;
  // The pipeline cut is checked before anything is compiled: a split that drops or
  // invents a layer is an error here, not a surprise in the plan.
  FailureOr<mtc::pipeline::StageCut> cut = mtc::pipeline::computeStageCut(*module);
  if (failed(cut))
    return 1;
  if (emitKind == EmitKind::Plan && !printStats && cut->numChunks() > 1 &&
      failed(mtc::checkPipelineSchedule(*module, *cut)))
    return 1;

  // --stats needs the trained step only to predict the workspace of its kernels.
  bool statsWithKernels =
      printStats && hasTarget(KernelTarget::X86) && kernelTargets.getNumOccurrences() > 0;
  if ((emitKind != EmitKind::MT && !printStats) || statsWithKernels || printSavedActivations) {
    std::string policy = recompute;
    if (policy.empty())
      if (auto parallel = mtc::mt::ParallelAttr::lookup(*module);
          parallel && parallel.getRecompute())
        policy = mtc::mt::stringifyRecomputePolicy(*parallel.getRecompute()).str();
    mtc::TrainingPipelineOptions options;
    options.recompute = policy.empty() ? "none" : policy;
    mlir::PassManager pm(&context);
    mtc::buildTrainingPipeline(pm, options);
    if (failed(pm.run(*module)))
      return 1;
  }

  if (emitKind == EmitKind::Plan && !printStats) {
    std::string path = outputFile;
    if (path.empty() || path == "-")
      path = (sys::path::stem(inputFile) + ".plan").str();
    mtc::PlanSource source{inputFile, sourceMgr.getMemoryBuffer(bufferId)->getBuffer().str(),
                           versionText()};
    std::optional<mtc::PlanKernels> kernels;
    if (hasTarget(KernelTarget::X86) || hasTarget(KernelTarget::Cuda)) {
      FailureOr<mtc::PlanKernels> compiled = compileKernels(*module);
      if (failed(compiled))
        return 1;
      kernels = std::move(*compiled);
    } else {
      // No code: the partitioned step's predictions still (mtc simulate, the search).
      FailureOr<mtc::PlanKernels> costs = mtc::partitionedCosts(*module);
      if (failed(costs))
        return 1;
      kernels = std::move(*costs);
    }
    if (Error err = mtc::writePlan(*module, *stats, source, path, kernels ? &*kernels : nullptr)) {
      WithColor::error(errs(), "mtc") << toString(std::move(err)) << "\n";
      return 1;
    }
    outs() << "wrote " << path << " (" << stats->totalParams << " parameters)\n";
    return 0;
  }

  std::unique_ptr<ToolOutputFile> output =
      mlir::openOutputFile(outputFile.empty() ? std::string("-") : outputFile.getValue(),
                           &errorMessage);
  if (!output) {
    WithColor::error(errs(), "mtc") << errorMessage << "\n";
    return 1;
  }
  if (printStats) {
    mtc::printModelStats(*stats, output->os());
    if (cut->numChunks() > 1) {
      output->os() << "\n";
      mtc::pipeline::printStageCut(*cut, output->os());
    }
    // Without the training pipeline there is no step to size the buffers of: the memory
    // lines need --kernels=x86 (which also gives the workspace).
    if (statsWithKernels) {
      mtc::PlanKernels partitioned;
      mlir::OwningOpRef<mlir::ModuleOp> step = lowerStep(*module, &partitioned);
      if (!step || failed(runPipeline(*step, mtc::buildCPUBufferizePipeline)))
        return 1;
      FailureOr<int64_t> workspace = planArenas(*step);
      if (failed(workspace))
        return 1;
      output->os() << "\n";
      mtc::printMemoryPrediction(mtc::predictMemory(*module, *workspace), output->os());
      const mtc::sharding::CollectiveBytes &sent = partitioned.collectiveBytes;
      output->os() << "\ncommunication per rank (the step's own collectives; data "
                      "parallelism adds its gradient reduction):\n"
                   << llvm::formatv("  forward_backward, per micro-batch {0,14} bytes\n",
                                    sent.forwardBackward)
                   << llvm::formatv("  optimizer_step                    {0,14} bytes\n",
                                    sent.optimizerStep);
    }
    // Read from the partitioned step, where a rank's tensors have their local shapes.
    if (printSavedActivations) {
      mlir::OwningOpRef<mlir::ModuleOp> partitioned((*module).clone());
      if (failed(runPipeline(*partitioned, mtc::buildPartitionPipeline)))
        return 1;
      FailureOr<std::vector<mtc::LayerSavedActivations>> saved =
          mtc::computeSavedActivations(*partitioned);
      if (failed(saved))
        return 1;
      output->os() << "\n";
      mtc::printSavedActivations(*saved, output->os());
    }
  } else {
    mlir::OpPrintingFlags flags;
    if (debugInfo)
      flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    module->print(output->os(), flags);
  }
  output->keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // `mtc calibrate` measures OpenBLAS's sgemm, which Debian's OpenBLAS runs with its SSE3
  // kernels on CPUs newer than itself: measure the kernels this CPU's features allow, as
  // mtrun runs them (runtime/support/BlasCore.h).
  if (argc > 1 && StringRef(argv[1]) == "calibrate")
    mtc::rt::reexecForBlasCore(openblas_get_corename(), argv);
  InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << versionText() << "\n";
  });
  cl::HideUnrelatedOptions({&compileCategory, &parallelCategory}, compileCommand);
  cl::HideUnrelatedOptions(compileCategory, inspectCommand);
  cl::HideUnrelatedOptions(compileCategory, simulateCommand);
  cl::HideUnrelatedOptions(compileCategory, calibrateCommand);
  cl::HideUnrelatedOptions(compileCategory, exploreCommand);
  cl::HideUnrelatedOptions({&compileCategory, &parallelCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "mtc: compiler for parallel transformer training\n\n"
      "  Compiles a model written in the .mtl language (docs/dsl.md) to the mt dialect.\n\n"
      "  mtc compile model.mtl [-o model.plan]             write the plan mtrun executes\n"
      "  mtc compile model.mtl --emit=mt [-o out.mlir]     print the global graph\n"
      "  mtc compile model.mtl --emit=mt-train             print the training step\n"
      "  mtc compile model.mtl --stats                     parameter counts and FLOPs\n"
      "  mtc inspect model.plan                            verify a plan and describe it\n"
      "  mtc inspect model.plan --schedule [--svg F]       draw its pipeline schedule\n"
      "  mtc simulate model.plan --cluster C [--nodes N]   predict its step on a cluster\n"
      "  mtc calibrate [--output host.json]                measure this host\n"
      "  mtc explore model.mtl --cluster C --gpus N        search the parallel layouts\n");
  if (compileCommand)
    return compile();
  if (inspectCommand)
    return inspect();
  if (simulateCommand)
    return simulate();
  if (calibrateCommand)
    return calibrate();
  if (exploreCommand)
    return explore();
  errs() << "mtc: no subcommand given; see 'mtc --help'\n";
  return 1;
}
