//===- Passes.td - CPU backend passes ------------------------*- tablegen -*-===//

#ifndef MTC_COMPILER_CODEGEN_CPU_PASSES_TD
#define MTC_COMPILER_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

// In the order mtc-cpu-pipeline (compiler/pipelines/) runs them.

def EraseMTDeclarationsPass : Pass<"mtc-erase-mt-declarations", "::mlir::ModuleOp"> {
  let summary = "Erase the mt declarations left at module level";
  let description = [{
    The first step of the CPU backend. After mt-to-linalg the functions hold no `mt` op,
    but the module still declares the parameters and the optimizer state (`mt.param`,
    `mt.state`, ...): they are not code, and their verifiers look for the layer functions
    the lowering to LLVM replaces. Every op of the `mt` dialect directly in the module's
    body is erased; functions and other ops are left alone.
  }];
}

def RequestCInterfacesPass : Pass<"mtc-request-c-interfaces", "::mlir::ModuleOp"> {
  let summary = "Mark every public function with a body for a C interface";
  let description = [{
    Sets `llvm.emit_c_interface` on every public `func.func` with a body, so that
    `convert-func-to-llvm` emits `_mlir_ciface_<name>`, the entry point the runtime calls
    (through `_mtc_packed_<name>`, see compiler/codegen/CPU/CPUCodegen.h). Private functions
    (layers called by the step) and declarations are left alone.
  }];
}

def GemmOperandViewsPass : Pass<"mtc-gemm-operand-views", "::mlir::ModuleOp"> {
  let summary = "Read the transposed operands of f32 batched matrix products in place";
  let description = [{
    On buffers (after bufferization, before deallocations are placed). mt-to-linalg copies
    each operand of an f32 contraction into the canonical order of a batched matrix product
    (`linalg.transpose` into a fresh buffer, collapsed to rank 3); the runtime's GEMM reads
    any strides. An operand `collapse_shape(T)`, T written by `linalg.transpose(S)`, becomes
    a strided view of S (`memref.reinterpret_cast`) when each of its three dimensions
    gathers dimensions of S that merge into one stride, and the transpose and T are erased
    when nothing else reads them. A batch over two dimensions that are not neighbours in S
    (attention's batch and heads) splits into an `scf.for` over the outer part of products
    on views offset by the loop index. S must not be written between the transpose and the
    product (both in one block, nothing between them that may write S's allocation).
    The products compute the same sums in the same order.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def ExpandStridedCopiesPass : Pass<"mtc-expand-strided-copies", "::mlir::ModuleOp"> {
  let summary = "Turn copies between strided views into linalg.copy loops";
  let description = [{
    On buffers. `memref.copy` between views that are not contiguous (rows of a tensor taken
    by a slice) lowers to a call of the MLIR runner library's `memrefCopy`, which the
    kernels' shared object does not link. Such a copy becomes `linalg.copy`, which lowers
    to loops; a copy between two buffers with the identity layout stays `memref.copy` (a
    memcpy).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def BatchMatmulToCallsPass : Pass<"mtc-batch-matmul-to-calls", "::mlir::ModuleOp"> {
  let summary = "Call the runtime's GEMMs for f32 and bf16 batched matrix products";
  let description = [{
    On buffers (after mtc-gemm-operand-views). Every f32 `linalg.batch_matmul` with pure
    buffer semantics and the default indexing maps becomes a call of
    `mtc_batch_matmul_f32(A, B, C)`, `C[b] += A[b] x B[b]`, which the process loading the
    kernels defines with a BLAS (runtime/exec/Gemm.h). The operands are cast to fully
    dynamic strided memrefs (`memref.cast`), so that one declaration serves every shape and
    layout; the function is declared private with `llvm.emit_c_interface` on first use.
    A product of two bf16 inputs into an f32 result (how `mt.contract` in bf16 is lowered)
    calls `mtc_batch_matmul_bf16(A, B, C)` instead, the runtime's GEMM on the CPU's bf16
    instructions (on the GPU, mtc-gpu-host-imports renames it to cuBLASLt's), with the same
    casts (bf16 operands). Any other
    mixed-precision product (f16 inputs, or one bf16 input beside an f32 one) reads each
    low-precision input through a new contiguous f32 copy (`memref.alloc` and an
    `arith.extf` generic) before the f32 call. Other element types, and products with their
    own indexing maps, stay linalg and become loops.

    The names are reserved: a symbol `mtc_batch_matmul_f32` or `mtc_batch_matmul_bf16`
    that is not an external function of its type is an error.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect", "::mlir::memref::MemRefDialect"];
}

def EarlyDeallocationPass : Pass<"mtc-early-deallocation", "::mlir::ModuleOp"> {
  let summary = "Free each temporary just after its last use";
  let description = [{
    On buffers, after `buffer-deallocation-pipeline`, which frees every buffer at the end of
    the block that allocates it, so a step function would hold all its temporaries until
    it returns. Each unconditional `memref.dealloc` of a `memref.alloc` of the same block
    moves up to just after the last op of the block that uses the buffer or anything
    derived from it:

    - every memref result of an op that uses the buffer (views, casts, loops carrying it,
      calls) counts as the buffer;
    - an address taken with `memref.extract_aligned_pointer_as_index` counts too, with
      everything computed from it (the runtime's collectives take addresses), and a
      buffer it is stored into (the words of a CUDA kernel launch's parameters);
    - a use nested in a region counts as its ancestor op in the block.

    A buffer with a use outside the block, or used by the block's terminator, keeps its
    free where it is. gpt-tiny's workspace: 22.8 -> 9.2 MiB, the same results bit for bit.
  }];
}

def ReductionLoopOrderPass : Pass<"mtc-reduction-loop-order"> {
  let summary = "Order each reduction's loops like the layout of the tensor it reads";
  let description = [{
    mt-to-linalg iterates a reduction over the result's dimensions, then the reduced ones,
    so that the parallel loops are outer (what the GPU backend maps to threads). On the CPU
    that order reads the input with a stride whenever a kept dimension is the input's
    innermost: a bias gradient, the sum of `[batch, seq, hidden]` over `batch` and `seq`,
    becomes `hidden` outer loops over strided columns, which LLVM vectorises only with
    gathers. This pass interchanges the loops of every `linalg.generic` with a reduction
    iterator to follow the layout of its input read through a permutation (the largest
    such input): the innermost loop walks the input's contiguous dimension, and a kept
    innermost dimension becomes a contiguous accumulation into the result row.

    Each result element still accumulates the same elements in the same order (the
    reduced dimensions keep their relative order). Where the innermost loop then reduces
    (a row sum: softmax's denominator, a norm's mean, cross-entropy's log-sum-exp), the op
    combining each result with its accumulator gets `fastmath<reassoc>`, so that LLVM keeps
    partial sums in vector lanes instead of adding one element at a time: those sums round
    differently from left to right (deterministically, for a given target CPU).
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::linalg::LinalgDialect"];
}

def SelectParallelLoopsPass : Pass<"mtc-select-parallel-loops"> {
  let summary = "Keep scf.parallel only where a loop nest is worth running on threads";
  let description = [{
    On the loops `convert-linalg-to-parallel-loops` writes (an `scf.parallel` over the
    leading parallel dimensions of each linalg op, `scf.for` over a reduction and what
    follows it), before `convert-scf-to-openmp` turns each remaining `scf.parallel` into
    an OpenMP parallel region with a statically scheduled work-sharing loop.

    An `scf.parallel` stays parallel only when it is the outermost loop of its nest and
    the nest does at least `min-work` innermost iterations (the product of the static trip
    counts, summed over sequential sub-nests; a dynamic trip count counts as enough):
    starting a team of threads costs microseconds, more than a small loop takes. Of a
    kept loop, the leading dimensions stay parallel until they give `min-parallel`
    iterations; the others become `scf.for` inside it, so that the innermost loop stays a
    loop LLVM vectorises (OpenMP would collapse all dimensions into one index). Every other
    `scf.parallel` (small, or nested in a loop: the parallel dimensions after a reduction
    dimension) becomes nested `scf.for`s in the order of its dimensions, the loops
    `convert-linalg-to-loops` writes.

    A thread runs whole iterations of the kept loop and a reduction dimension never is
    one of them, so every value is computed by the same operations in the same order for
    any number of threads: the results are bitwise those of the serial loops.
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t", /*default=*/"131072",
           "Innermost iterations a loop nest needs to run on threads">,
    Option<"minParallel", "min-parallel", "int64_t", /*default=*/"64",
           "Iterations of the parallel dimensions kept before the rest become scf.for">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def ApproximateMathPass : Pass<"mtc-approximate-math"> {
  let summary = "Replace f32 transcendental functions with inline polynomial approximations";
  let description = [{
    Rewrites f32 `math.exp`, `math.expm1`, `math.tanh`, `math.log`, `math.log1p`,
    `math.log2` and `math.erf` (scalars or vectors) into upstream MLIR's polynomial
    approximations: arithmetic, comparisons and selects with no call. In a kernel loop a
    call of libm's `expf` or `tanhf` keeps LLVM from vectorising the loop and costs a call
    and a slow path for underflow (softmax exponentiates the causal mask's -3.4e38 on every
    masked score); the approximations vectorise and clamp instead. They are accurate to a
    few ulp in f32 (the CPU backend's tests compare them with libm).

    f64 operations (the gradient checks' kernels) and other functions (`sin`/`cos` of rope
    angles, whose range reduction the approximation does only coarsely) keep their libm
    calls.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def WorkspaceViewsPass : Pass<"mtc-workspace-views", "::mlir::ModuleOp"> {
  let summary = "Place the temporaries at the planner's offsets in one workspace";
  let description = [{
    The first step after bufferization (mtc-cpu-bufferize-pipeline's output, the module
    mtc plans the plan's `arena` on). Plans the temporaries of every entry function (public,
    with a body, called by no function of the module) with planKernelMemory
    (compiler/codegen/CPU/Workspace.h): one workspace, each `memref.alloc` op at one offset
    in every call, or at one offset per phase of its innermost `scf.for` (iteration modulo
    the phases) when the loop carries its buffer into the next iteration. Then each placed
    `memref.alloc` becomes a `memref.view` of the workspace at its offset and the
    `memref.dealloc`s that free only placed allocations are erased.

    A function with placed allocations asks for the workspace at its entry,
    `func.call @mtc_kernel_workspace(%bytes) : (i64) -> !llvm.ptr` with the bytes its views
    reach (an `!llvm.ptr` made a `memref<Nxi8>` through an LLVM descriptor and
    `builtin.unrealized_conversion_cast`, which reconcile-unrealized-casts removes), and
    hands it back before each return (`mtc_kernel_workspace_release`). A block is the
    workspace's pointer plus its offset (`llvm.getelementptr`) made a `memref<Sxi8>`, which
    the view reads at offset 0; the `llvm.insertvalue` of its aligned pointer into its
    descriptor carries `mtc.workspace_ranges`, the byte ranges the block may take, for
    mtc-workspace-alias-scopes. Both functions are runtime
    imports of the kernel ABI (runtime/exec/KernelABI.h), declared here without the
    context, which mtc-thread-kernel-context adds. The functions one call runs share the
    workspace: their offsets are planned together.

    Allocations the planner cannot place (an entry it cannot simulate: a dynamic size, a
    loop with bounds not known at compile time; an op whose blocks need more than four
    phases; an alignment above 64; a buffer a deallocation frees along with one of those)
    stay `memref.alloc`, which mtc-redirect-allocations sends to the runtime's allocator.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def ThreadKernelContextPass : Pass<"mtc-thread-kernel-context", "::mlir::ModuleOp"> {
  let summary = "Pass the kernel context to every function and runtime import";
  let description = [{
    On buffers, before the lowering to LLVM. Every function with a body gets a first
    argument `!llvm.ptr {mtc.kernel_context}`, the runtime's state of the call in progress
    (the rank's mesh, the workspace, the dropout key), and so do the declarations of the
    runtime imports of the kernel ABI (runtime/exec/KernelABI.h: `mtc_all_reduce`,
    `mtc_all_gather`, `mtc_reduce_scatter`, `mtc_all_to_all`, `mtc_all_to_all_filled`,
    `mtc_shift`, `mtc_mesh_coordinate`,
    `mtc_dropout_key`, `mtc_dropout_layer`, `mtc_batch_matmul_f32`, `mtc_batch_matmul_bf16`,
    `mtc_kernel_workspace`,
    `mtc_kernel_workspace_release`; in the host code of a CUDA step `mtc_gpu_launch`,
    `mtc_gpu_workspace`, `mtc_gpu_workspace_release`, `mtc_gpu_batch_matmul_f32`). Every
    call of such a function passes the
    caller's context first. Other declarations (`mtc_dropout_keep_element`, linked into the
    object) are left alone. A use of a threaded function other than a call is an error.
    The C interfaces convert-func-to-llvm then emits (`_mlir_ciface_f`) take the context
    first too, and so the packed entry points (compiler/codegen/CPU/CPUCodegen.h).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def WorkspaceAliasScopesPass : Pass<"mtc-workspace-alias-scopes", "::mlir::ModuleOp"> {
  let summary = "Tell LLVM which blocks of the workspace never share a byte";
  let description = [{
    After finalize-memref-to-llvm. The temporaries mtc-workspace-views places are offsets of
    one pointer, so LLVM's alias analysis no longer knows that two of them are apart (it
    did when each came from its own malloc): a row sum reading one and accumulating into
    another keeps the accumulator in memory, and loops are not vectorised. Each block (the
    op with `mtc.workspace_ranges`, the byte ranges of the workspace it may take) gets an
    alias scope, in one domain; every load, store and
    memory intrinsic whose pointers all derive from such blocks (through getelementptr,
    the descriptors' insertvalue/extractvalue and casts) gets their scopes
    and, as `noalias`, the scopes of every block whose ranges share no byte with theirs.
    Blocks that take the same bytes at different times are never said to be apart, so the
    scopes hold for the whole of a call, in any order LLVM moves the accesses. Accesses
    through the memref arguments of an entry function (public, called by no function of
    the module: buffers of the runtime's, never in the workspace) share one more scope,
    apart from every block but not from each other; those through the memref arguments of
    another function get a scope of that function's, apart from the function's own blocks
    (allocated while the arguments are live). The ranges attribute is removed.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def RedirectAllocationsPass : Pass<"mtc-redirect-allocations", "::mlir::ModuleOp"> {
  let summary = "Allocate the temporaries through the runtime, passing the kernel context";
  let description = [{
    After finalize-memref-to-llvm and mtc-thread-kernel-context. Every call of the C
    library's `malloc`, `calloc`, `aligned_alloc` and `free` becomes a call of the kernel
    ABI's `mtc_kernel_alloc`, `mtc_kernel_calloc`, `mtc_kernel_aligned_alloc` and
    `mtc_kernel_free` (runtime/exec/KernelABI.h) with the calling function's kernel context
    (its first argument, `mtc.kernel_context`) in front: the runtime serves the temporaries
    mtc-workspace-views did not place from the heap. The C declarations nothing calls any more are
    erased. A call of `realloc`, `posix_memalign`, `memalign` or `valloc`, which the runtime
    does not provide, and an allocation in a function without a context are errors.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // MTC_COMPILER_CODEGEN_CPU_PASSES_TD
