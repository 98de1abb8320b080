//===- KernelLibrary.cpp - A plan's compiled step, loaded with dlopen -----===//

#include "runtime/exec/KernelLibrary.h"

#include "runtime/exec/PipelineStage.h"

#include <algorithm>
#include <cstdint>
#include <dlfcn.h>
#include <optional>
#include <tuple>
#include <vector>

namespace mtc::rt {
namespace {

/// Checks one buffer of `fn` against the plan's tables; `where` names it for messages.
/// `optimizerStep`: the buffer is an optimizer step's, whose gradients are laid out by the
/// optimizer layout (as states always are). `layers`: the function is a pipeline chunk's or
/// stage's, whose layer parameters hold that many layers of the stack.
Error checkBuffer(const Plan &plan, const KernelBuffer &b, const std::string &where,
                  bool optimizerStep, std::optional<int64_t> layers) {
  // A layer parameter's local dims, its `layers` dimension resized for a chunk or stage.
  auto localDims = [&](const ParamInfo &p, const ParamLayout &layout) {
    std::vector<Dim> local = plan.localDims(p.dims, layout);
    if (layers && p.layer && !local.empty() && local.front().name == "layers")
      local.front().size = *layers;
    return local;
  };
  auto mismatch = [&](std::string_view table, const std::vector<Dim> &dims) {
    return makeError(where, ": ", bufferKindName(b.kind), " '", b.name, "' is ",
                     formatDims(b.dims), " but the ", table, " table says ", formatDims(dims));
  };
  // Parameters, states and gradients are this rank's shards: the local dims of the layout.
  auto localMismatch = [&](const ParamInfo &p, const ParamLayout &layout,
                           const std::vector<Dim> &local) {
    return makeError(where, ": ", bufferKindName(b.kind), " '", b.name, "' is ",
                     formatDims(b.dims), " but the ",
                     &layout == &p.layout ? "layout" : "optimizer layout", " of parameter '",
                     p.name, "' (", plan.describeLayout(p.dims, layout),
                     ") gives the local dims ", formatDims(local));
  };
  switch (b.kind) {
  case BufferKind::Input:
    // decode_step's absolute position of its token (i32 [seq=1]).
    if (b.name == "position") {
      if (b.dtype != PlanDType::I32 || b.dims.size() != 1)
        return makeError(where, ": input 'position' must be i32 [seq], found ",
                         planDTypeName(b.dtype), " ", formatDims(b.dims));
      return Error::success();
    }
    // The loss mask of eod_mask_loss, f32 with the labels' dims (the plan loader checked them).
    if (b.name == kLossMaskInput) {
      if (b.dtype != PlanDType::F32 || b.dims.size() != 2)
        return makeError(where, ": input 'loss_mask' must be f32 [batch, seq], found ",
                         planDTypeName(b.dtype), " ", formatDims(b.dims));
      return Error::success();
    }
    if (b.dtype != PlanDType::I32 || b.dims.size() != 2)
      return makeError(where, ": input '", b.name, "' must be i32 token ids [batch, seq], found ",
                       planDTypeName(b.dtype), " ", formatDims(b.dims));
    return Error::success();
  case BufferKind::Param:
  case BufferKind::Grad: {
    const ParamInfo *p = plan.findParam(b.name);
    if (!p)
      return makeError(where, ": ", bufferKindName(b.kind), " '", b.name,
                       "' is not a parameter of the plan");
    const ParamLayout &layout =
        b.kind == BufferKind::Grad && optimizerStep ? p->stateLayout() : p->layout;
    if (std::vector<Dim> local = localDims(*p, layout); local != b.dims)
      return layout.replicated() ? mismatch("parameter", local) : localMismatch(*p, layout, local);
    break;
  }
  case BufferKind::State: {
    const StateInfo *found = nullptr;
    for (const StateInfo &s : plan.states)
      if (s.name == b.name)
        found = &s;
    if (!found)
      return makeError(where, ": state '", b.name, "' is not in the plan's optimizer state table");
    const ParamInfo &p = plan.params[found->paramIndex];
    const ParamLayout &layout = p.stateLayout();
    if (std::vector<Dim> local = localDims(p, layout); local != b.dims)
      return layout.replicated() ? mismatch("state", local) : localMismatch(p, layout, local);
    break;
  }
  case BufferKind::Residual:
  case BufferKind::Stash:
    // Values a chunk's backward reads from its forward, in their own element type (a
    // router's chosen experts are i32): the runtime only holds them.
    return Error::success();
  case BufferKind::Activation:
  case BufferKind::ActivationGrad:
    // Values passed between chunks (and stages): the producer's dims are the consumer's by
    // construction; the runtime holds and sends their bytes, f32 or, under mixed precision,
    // bf16 or f16.
    if (b.dtype != PlanDType::F32 && b.dtype != PlanDType::BF16 && b.dtype != PlanDType::F16)
      return makeError(where, ": ", bufferKindName(b.kind), " '", b.name, "' is ",
                       planDTypeName(b.dtype), "; activations must be f32, bf16 or f16");
    return Error::success();
  case BufferKind::ExpertLoad:
    // Counts of tokens, not model values: i64 rows of expert counts.
    if (b.dtype != PlanDType::I64 || b.dims.size() != 2)
      return makeError(where, ": expert_load must be i64 counts [layers, experts], found ",
                       planDTypeName(b.dtype), " ", formatDims(b.dims));
    return Error::success();
  case BufferKind::Logits:
  case BufferKind::Keys:
  case BufferKind::Values:
    // Whole on every rank; the plan loader checked them against the tokens and vocabulary
    // (the caches of cached generation, on one rank, against each other).
    break;
  case BufferKind::Loss:
  case BufferKind::Step:
  case BufferKind::GradScale:
  case BufferKind::GradNorm:
  case BufferKind::Lr:
  case BufferKind::GradSquares:
    if (!b.dims.empty())
      return makeError(where, ": ", bufferKindName(b.kind), " must be a scalar, found ",
                       formatDims(b.dims));
    break;
  }
  // Mixed precision keeps the model state in f32 (master parameters, gradients, optimizer
  // state) and the scalars of the step; only what flows between chunks may be narrower.
  if (b.dtype != PlanDType::F32)
    return makeError(where, ": ", bufferKindName(b.kind), " '", b.name, "' is ",
                     planDTypeName(b.dtype), "; parameters, gradients, optimizer states, the "
                     "loss, the logits and the step's scalars must be f32");
  return Error::success();
}

/// Resolves `fn` (named `name` in the plan) into `out`; `optimizerStep` and `layers` as for
/// checkBuffer.
Error resolve(void *library, const Plan &plan, const std::optional<KernelFunction> &fn,
              std::string_view name, bool required, LoadedKernel &out, bool optimizerStep = false,
              std::optional<int64_t> layers = std::nullopt) {
  std::string where = concat(plan.dir.string(), ": kernels.x86_64.functions.", name);
  if (!fn) {
    if (required)
      return makeError(plan.dir.string(), ": the plan's kernels have no '", name, "' function");
    return Error::success();
  }
  for (const auto *side : {&fn->inputs, &fn->outputs})
    for (const KernelBuffer &b : *side)
      if (Error err = checkBuffer(plan, b, where, optimizerStep, layers); !err.ok())
        return err;
  void *symbol = ::dlsym(library, fn->symbol.c_str());
  if (!symbol)
    return makeError(where, ": the kernel library has no symbol '", fn->symbol, "'");
  out.function = &*fn;
  out.entry = reinterpret_cast<MtcPackedEntry>(symbol);
  return Error::success();
}

} // namespace

KernelLibrary::Handle::~Handle() {
  if (library)
    ::dlclose(library);
}

KernelLibrary::~KernelLibrary() = default;

Expected<KernelLibrary> KernelLibrary::load(const Plan &plan, std::optional<int64_t> stage) {
  if (!plan.x86Kernels && plan.cudaKernels)
    return makeError(plan.dir.string(),
                     ": the plan has CUDA kernels only, no x86 kernels (kernels/x86_64.so) for "
                     "this CPU, and mtrun cannot run CUDA kernels yet: compile it with "
                     "`mtc compile --target=x86,cuda`");
  if (!plan.x86Kernels)
    return makeError(plan.dir.string(), ": the plan has no compiled step for this CPU (compile "
                                        "it with `mtc compile --target=x86`)");
  if (stage && (!plan.pipeline || *stage < 0 || *stage >= plan.pipeline->stages))
    return makeError(plan.dir.string(), ": no pipeline stage ", *stage, " in the plan");
  return openKernels(plan, *plan.x86Kernels, /*hostArena=*/true, stage);
}

Expected<KernelLibrary> KernelLibrary::loadCudaHost(const Plan &plan) {
  if (!plan.cudaKernels)
    return makeError(plan.dir.string(), ": the plan has no CUDA kernels (compile it with "
                                        "`mtc compile --target=cuda` or --target=x86,cuda)");
  if (!plan.cudaKernels->host)
    return makeError(plan.dir.string(), ": the plan's CUDA kernels have no host code "
                                        "(kernels.cuda.host): it was compiled by an mtc that "
                                        "did not emit it; recompile the plan with this mtc");
  return openKernels(plan, *plan.cudaKernels->host, /*hostArena=*/false, std::nullopt);
}

Expected<KernelLibrary> KernelLibrary::openKernels(const Plan &plan, const KernelsInfo &k,
                                                   bool hostArena, std::optional<int64_t> stage) {
  std::filesystem::path file = plan.dir / k.file;
  KernelLibrary lib;
  lib.handle_ = std::make_unique<Handle>();
  // RTLD_NOW: an unresolved import (mtc_dropout_key, libm) fails here, not mid-step.
  lib.handle_->library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle_->library) {
    const char *why = ::dlerror();
    return makeError(file, ": cannot load the compiled step: ", why ? why : "unknown error");
  }
  void *library = lib.handle_->library;
  // The object passes the context on unread, so only the version it was compiled for tells
  // whether its calls of the imports have this runtime's signatures.
  const auto *version =
      static_cast<const uint32_t *>(::dlsym(library, MTC_ABI_KERNEL_CONTEXT_VERSION));
  if (!version)
    return makeError(file, ": the compiled step exports no ", MTC_ABI_KERNEL_CONTEXT_VERSION,
                     ": it was compiled for a kernel ABI without a context (version 0), and "
                     "this runtime passes kernel context version ",
                     MTC_KERNEL_CONTEXT_VERSION, " (recompile the plan with this mtc)");
  if (*version != MTC_KERNEL_CONTEXT_VERSION)
    return makeError(file, ": the compiled step was compiled for kernel context version ", *version,
                     ", and this runtime passes version ", MTC_KERNEL_CONTEXT_VERSION,
                     " (recompile the plan with this mtc)");
  // A pipeline plan has no whole-model step: its ranks train through the chunks below.
  const bool wholeStep = !plan.pipeline;
  if (Error err = resolve(library, plan, k.forwardBackward, "forward_backward", wholeStep,
                          lib.forwardBackward_);
      !err.ok())
    return err;
  if (Error err = resolve(library, plan, k.optimizerStep, "optimizer_step", wholeStep,
                          lib.optimizerStep_, /*optimizerStep=*/true);
      !err.ok())
    return err;
  if (Error err = resolve(library, plan, k.forward, "forward", false, lib.forward_); !err.ok())
    return err;
  if (Error err = resolve(library, plan, k.logits, "logits", false, lib.logits_); !err.ok())
    return err;
  if (Error err = resolve(library, plan, k.prefill, "prefill", false, lib.prefill_); !err.ok())
    return err;
  if (Error err = resolve(library, plan, k.decodeStep, "decode_step", false, lib.decodeStep_);
      !err.ok())
    return err;
  std::vector<LoadedKernel *> loaded = {&lib.forward_, &lib.forwardBackward_, &lib.optimizerStep_,
                                        &lib.logits_, &lib.prefill_, &lib.decodeStep_};
  // The pipeline's functions: every chunk's and stage's that the plan has (which a stage
  // needs depends on its schedule; the trainer checks).
  lib.chunks_.resize(k.chunks.size());
  for (size_t c = 0; c < k.chunks.size(); ++c) {
    const ChunkKernels &ck = k.chunks[c];
    LoadedChunk &lc = lib.chunks_[c];
    for (auto [fn, role, out] :
         {std::tuple{&ck.forward, "forward", &lc.forward},
          std::tuple{&ck.backward, "backward", &lc.backward},
          std::tuple{&ck.backwardInput, "backward_input", &lc.backwardInput},
          std::tuple{&ck.backwardWeight, "backward_weight", &lc.backwardWeight}}) {
      if (Error err = resolve(library, plan, *fn, concat("chunk", c, '.', role), false, *out,
                              false, ck.numLayers);
          !err.ok())
        return err;
      loaded.push_back(out);
    }
  }
  // A stage's functions take its tensors (PipelineStage.h): checked against its tables.
  lib.stages_.resize(k.stages.size());
  for (size_t s = 0; s < k.stages.size(); ++s) {
    Expected<StageHoldings> holdings = stageHoldings(plan, int64_t(s));
    if (!holdings)
      return holdings.takeError();
    Plan tables = stagePlan(plan, *holdings);
    for (auto [fn, role, out] :
         {std::tuple{&k.stages[s].gradSquares, "grad_squares", &lib.stages_[s].gradSquares},
          std::tuple{&k.stages[s].optimizerStep, "optimizer_step", &lib.stages_[s].optimizerStep}}) {
      if (Error err = resolve(library, tables, *fn, concat("stage", s, '.', role), false, *out,
                              /*optimizerStep=*/true);
          !err.ok())
        return err;
      loaded.push_back(out);
    }
  }
  // With a stage, only its functions share the arena (the ones its rank calls).
  if (stage) {
    std::vector<LoadedKernel *> own;
    for (size_t c = 0; c < lib.chunks_.size(); ++c)
      if (plan.pipeline->chunkStages[c] == *stage)
        for (LoadedKernel *kernel : {&lib.chunks_[c].forward, &lib.chunks_[c].backward,
                                     &lib.chunks_[c].backwardInput, &lib.chunks_[c].backwardWeight})
          own.push_back(kernel);
    if (size_t(*stage) < lib.stages_.size())
      for (LoadedKernel *kernel :
           {&lib.stages_[size_t(*stage)].gradSquares, &lib.stages_[size_t(*stage)].optimizerStep})
        own.push_back(kernel);
    loaded = std::move(own);
  }
  int64_t arenaBytes = 0;
  for (const LoadedKernel *kernel : loaded)
    if (kernel->function && kernel->function->arena)
      arenaBytes = std::max(arenaBytes, kernel->function->arena->bytes);
  if (arenaBytes > 0 && hostArena) {
    lib.arena_ = std::make_unique<KernelArena>(arenaBytes);
    for (LoadedKernel *kernel : loaded)
      if (kernel->function && kernel->function->arena)
        kernel->arena = lib.arena_.get();
  }
  return lib;
}

void KernelLibrary::call(const LoadedKernel &kernel, std::span<void *const> buffers,
                         const KernelCallState &state) {
  const KernelFunction &fn = *kernel.function;
  // Descriptor i: {allocated, aligned, offset, sizes[rank], strides[rank]}, all 8 bytes.
  std::vector<std::vector<int64_t>> descriptors;
  descriptors.reserve(fn.inputs.size() + fn.outputs.size());
  std::vector<void *> pointers;
  size_t index = 0;
  for (const auto *side : {&fn.inputs, &fn.outputs})
    for (const KernelBuffer &b : *side) {
      auto data = static_cast<int64_t>(reinterpret_cast<intptr_t>(buffers[index++]));
      size_t rank = b.dims.size();
      std::vector<int64_t> &d = descriptors.emplace_back(3 + 2 * rank);
      d[0] = data;
      d[1] = data;
      d[2] = 0;
      int64_t stride = 1;
      for (size_t i = rank; i-- > 0;) {
        d[3 + i] = b.dims[i].size;
        d[3 + rank + i] = stride;
        stride *= b.dims[i].size;
      }
      pointers.push_back(d.data());
    }
  // The workspace: the function's arena bytes of the library's arena (the compiled code
  // takes a block of the heap if that does not hold its views).
  void *workspace = state.workspace;
  auto workspaceBytes = static_cast<int64_t>(state.workspaceBytes);
  if (kernel.arena && kernel.arena->data()) {
    workspace = kernel.arena->data();
    workspaceBytes = std::min(fn.arena->bytes, kernel.arena->size());
  }
  MtcKernelContext context = mtc_kernel_context(state.mesh, state.dropout, workspace,
                                                static_cast<uint64_t>(workspaceBytes));
  context.loss_scale = state.lossScale;
  context.gpu = state.gpu;
  kernel.entry(&context, pointers.data());
}

} // namespace mtc::rt
