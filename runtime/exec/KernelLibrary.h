//===- KernelLibrary.h - A plan's compiled step, loaded with dlopen -*- C++ -*-===//
//
// `KernelLibrary::load(plan)` opens the plan's `kernels/x86_64.so` (verified against
// MANIFEST when the plan was loaded), checks that it was compiled for this runtime's kernel
// context (its exported `mtc_kernel_context_version`, runtime/exec/KernelABI.h), resolves the
// packed entry point of each step function (`void symbol(MtcKernelContext *, void
// **descriptors)`, docs/plan-format.md "Kernels") and checks its calling convention against
// the plan's tables: every parameter, state and gradient buffer names a table entry of the
// same dims and an f32 dtype, inputs are i32 token ids, scalars are f32. `call` builds one
// MLIR ranked memref descriptor per buffer and the call's kernel context, and calls the
// function.
//
// `KernelLibrary::loadCudaHost(plan)` opens the plan's CUDA host code
// (`kernels.cuda.host`, `kernels/cuda_host.so`) the same way: same version check, same
// entry points and calling convention, but its buffers and workspace are device memory, so
// the library holds no arena and the caller passes the device workspace and its GPU state
// in KernelCallState. Its imports (KernelABI.h's GPU section) must be defined by the
// process: the CUDA executor's, or a test's recording ones.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_KERNELLIBRARY_H
#define MTC_RUNTIME_EXEC_KERNELLIBRARY_H

#include "runtime/exec/KernelMemory.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace mtc::rt {

class MeshCall;
struct DropoutCall;

/// A resolved step function and the buffers it takes.
struct LoadedKernel {
  const KernelFunction *function = nullptr; // in the plan
  MtcPackedEntry entry = nullptr;
  /// Where its temporaries live when the plan has an arena for it (the library's).
  const KernelArena *arena = nullptr;
};

/// A pipeline model chunk's functions (those the plan has; an absent one has no entry).
struct LoadedChunk {
  LoadedKernel forward, backward, backwardInput, backwardWeight;
};

/// A pipeline stage's optimizer functions.
struct LoadedStage {
  LoadedKernel gradSquares, optimizerStep;
};

/// What a kernel call reaches through its kernel context besides its temporaries' arena:
/// its collectives' mesh (MeshCollectives.h) and its dropout key (DropoutKey.h), each null
/// when it has none (no communication; no dropout).
struct KernelCallState {
  MeshCall *mesh = nullptr;
  DropoutCall *dropout = nullptr;
  /// What `mt.loss_scale` reads (fp16's loss scale; LossScaler.h).
  float lossScale = 1.0f;
  /// The CUDA host code's: MtcKernelContext::gpu (the executor's state of the call) and
  /// the device workspace, used when the library has no arena for the function.
  void *gpu = nullptr;
  void *workspace = nullptr;
  uint64_t workspaceBytes = 0;
};

class KernelLibrary {
public:
  /// Opens the plan's x86-64 kernels; the plan must outlive the library. An error names the
  /// plan and what is missing or inconsistent (no kernels: compile with --kernels=x86).
  /// A pipeline plan has no whole-model step (forward_backward, optimizer_step: its ranks
  /// call their chunks' and stage's functions); given the `stage` a rank runs, the arena is
  /// sized for that stage's functions alone (its chunks' and its own) and only they use it (the
  /// others, never called by that rank, would take their workspace from the heap).
  static Expected<KernelLibrary> load(const Plan &plan,
                                      std::optional<int64_t> stage = std::nullopt);
  /// Opens the plan's CUDA host code (see the file comment); an error when the plan has
  /// none or it does not load, was compiled for another kernel context version, or does
  /// not match the plan's calling convention.
  static Expected<KernelLibrary> loadCudaHost(const Plan &plan);

  KernelLibrary(KernelLibrary &&) noexcept = default;
  KernelLibrary &operator=(KernelLibrary &&) noexcept = default;
  ~KernelLibrary();

  const LoadedKernel &forwardBackward() const { return forwardBackward_; }
  const LoadedKernel &optimizerStep() const { return optimizerStep_; }
  /// The forward alone (evaluation), if the plan has it.
  const LoadedKernel *forward() const { return forward_.entry ? &forward_ : nullptr; }
  /// The logits of the token ids (generation), if the plan has them.
  const LoadedKernel *logits() const { return logits_.entry ? &logits_ : nullptr; }
  /// Cached generation's functions, if the plan has them (both or neither).
  const LoadedKernel *prefill() const { return prefill_.entry ? &prefill_ : nullptr; }
  const LoadedKernel *decodeStep() const { return decodeStep_.entry ? &decodeStep_ : nullptr; }
  /// With pipeline parallelism: the functions of model chunk `c` and of stage `s` (indices
  /// below the plan's chunk and stage counts; empty vectors without a pipeline).
  const std::vector<LoadedChunk> &chunks() const { return chunks_; }
  const std::vector<LoadedStage> &stages() const { return stages_; }

  /// Calls `kernel` with `buffers[i]` as the data of the i-th buffer of its inputs then
  /// outputs (row-major, as many elements as the buffer's dims) and a kernel context over
  /// `state` whose workspace is the function's arena bytes of the library's arena, where
  /// the compiled code places the temporaries (KernelMemory.h). Outputs must not alias
  /// inputs. The calls of one library share its arena, so they must not overlap in time
  /// (each rank of a process loads its own library).
  static void call(const LoadedKernel &kernel, std::span<void *const> buffers,
                   const KernelCallState &state = {});
  /// The arena the functions' workspaces share (the largest plan of those that use it; they
  /// run one at a time on the thread that calls them), or null when the plan has none.
  const KernelArena *arena() const { return arena_.get(); }

private:
  struct Handle {
    void *library = nullptr;
    ~Handle();
  };
  KernelLibrary() = default;
  /// Opens `k.file` of the plan and resolves `k`'s functions; with `hostArena`, the arena
  /// their workspaces share (those of `stage`'s functions alone, given one) is allocated here.
  static Expected<KernelLibrary> openKernels(const Plan &plan, const KernelsInfo &k, bool hostArena,
                                             std::optional<int64_t> stage);

  std::unique_ptr<Handle> handle_;
  std::unique_ptr<KernelArena> arena_;
  LoadedKernel forward_, forwardBackward_, optimizerStep_, logits_, prefill_, decodeStep_;
  std::vector<LoadedChunk> chunks_;
  std::vector<LoadedStage> stages_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_KERNELLIBRARY_H
