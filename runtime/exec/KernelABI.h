/*===- KernelABI.h - Where compiled kernels and the runtime meet (C99) ----===*
 *
 * The one place that names every function a compiled object imports from the process that
 * loads it and every function it exports to it, with their signatures and the integer codes
 * passed through them. Plain C99 without C++ dependencies: the runtime includes it where it
 * defines the imports (so a signature that drifts from this header does not compile), and
 * the code generator includes it for the names it emits calls to and the codes it passes
 * (compiler/codegen/CPU/CPUCodegen.h, compiler/codegen/ToLinalg/MTToLinalg.h). Names and
 * codes never change meaning once given; new ones are appended.
 *
 * Imported by the object (defined by the runtime, runtime/exec/):
 *   collectives     mtc_all_reduce, mtc_all_gather, mtc_reduce_scatter, mtc_all_to_all,
 *                   mtc_shift, mtc_all_to_all_filled, mtc_mesh_coordinate
 *                   (MeshCollectives.h: semantics, error handling)
 *   GEMM            _mlir_ciface_mtc_batch_matmul_f32 (Gemm.h)
 *   dropout         mtc_dropout_key, mtc_dropout_layer (DropoutKey.h)
 *   loss scale      mtc_loss_scale (LossScaler.h)
 *   workspace       mtc_kernel_workspace, mtc_kernel_workspace_release (KernelMemory.h)
 *   allocation      mtc_kernel_alloc, mtc_kernel_calloc, mtc_kernel_aligned_alloc,
 *                   mtc_kernel_free (KernelMemory.h): what the compiler could not place
 *   GPU host code   mtc_gpu_launch, mtc_gpu_workspace, mtc_gpu_workspace_release,
 *                   _mlir_ciface_mtc_gpu_batch_matmul_f32 (runtime/device/cuda/
 *                   GpuHostCalls.h): imported by a CUDA plan's kernels/cuda_host.so only
 * Exported by the object, per public function f of the plan:
 *   _mlir_ciface_f(context, descriptor *...)   one memref descriptor per argument, then results
 *   _mtc_packed_f(context, void **descriptors) the same, descriptors packed in one array
 * and once: mtc_kernel_context_version, the MTC_KERNEL_CONTEXT_VERSION it was compiled for.
 * Linked into the object, neither imported nor exported by the runtime:
 *   mtc_dropout_keep_element               Philox's decision (compiler/codegen/CPU/DropoutKeep.c)
 *
 * The kernel context. Every function the object exports and every runtime import but the
 * dropout decision takes an `MtcKernelContext *` first: the runtime's state of the call in
 * progress (this rank's mesh and its communicators, the dropout key and layer instance, the
 * workspace of the temporaries). The caller builds one per call (KernelLibrary::call); the
 * compiled code passes it on unread to every call it makes (mtc-thread-kernel-context), so
 * two calls on two threads, or two functions of one rank with their own workspaces, never
 * share state. Nothing is per-thread. A null context, or one whose size and version are not
 * this header's, reads as "no state": collectives copy nothing and write zeros, the mesh
 * coordinate is 0, dropout keeps every element, temporaries come from the heap.
 *
 * The workspace. The compiler places the temporaries of each function at fixed offsets in
 * one workspace (compiler/codegen/CPU/Workspace.h; mtc-workspace-views compiles the offsets
 * in as views, and the plan's `arena.bytes` says how large it must be). The caller passes
 * it in the context (`workspace`, `workspace_bytes`: 64-byte aligned, null/0 for none); the
 * compiled code reads it through mtc_kernel_workspace, not from the field, so that a call
 * without one (a null context, a workspace smaller than the function's views reach) still
 * runs, on a block the runtime allocates and mtc_kernel_workspace_release frees. Functions
 * of one call (a step and the layers it calls) share the workspace: their offsets are
 * planned together.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MTC_RUNTIME_EXEC_KERNELABI_H
#define MTC_RUNTIME_EXEC_KERNELABI_H

#include "runtime/comm/CollectiveTypes.h" /* MtcElementType, MtcReduction: the codes */
#include "runtime/support/Philox.h"       /* mtc_dropout_key_word: the words of a key */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Names, as the compiler emits them.
 *===----------------------------------------------------------------------===*/

#define MTC_ABI_ALL_REDUCE "mtc_all_reduce"
#define MTC_ABI_ALL_GATHER "mtc_all_gather"
#define MTC_ABI_REDUCE_SCATTER "mtc_reduce_scatter"
#define MTC_ABI_MESH_COORDINATE "mtc_mesh_coordinate"
#define MTC_ABI_ALL_TO_ALL "mtc_all_to_all"
#define MTC_ABI_SHIFT "mtc_shift"
#define MTC_ABI_ALL_TO_ALL_FILLED "mtc_all_to_all_filled"
#define MTC_ABI_DROPOUT_KEY "mtc_dropout_key"
#define MTC_ABI_DROPOUT_LAYER "mtc_dropout_layer"
#define MTC_ABI_DROPOUT_KEEP_ELEMENT "mtc_dropout_keep_element"
#define MTC_ABI_LOSS_SCALE "mtc_loss_scale"
#define MTC_ABI_KERNEL_ALLOC "mtc_kernel_alloc"
#define MTC_ABI_KERNEL_CALLOC "mtc_kernel_calloc"
#define MTC_ABI_KERNEL_ALIGNED_ALLOC "mtc_kernel_aligned_alloc"
#define MTC_ABI_KERNEL_FREE "mtc_kernel_free"
#define MTC_ABI_KERNEL_WORKSPACE "mtc_kernel_workspace"
#define MTC_ABI_KERNEL_WORKSPACE_RELEASE "mtc_kernel_workspace_release"
/* The GEMM as the compiler declares it (a func.func with llvm.emit_c_interface); the
 * object imports MTC_ABI_C_INTERFACE_PREFIX MTC_ABI_BATCH_MATMUL_F32. */
#define MTC_ABI_BATCH_MATMUL_F32 "mtc_batch_matmul_f32"
/* The bf16 GEMM (bf16 inputs, f32 result), declared the same way. */
#define MTC_ABI_BATCH_MATMUL_BF16 "mtc_batch_matmul_bf16"
/* Prefixes of the exported entry points of a public function f. */
#define MTC_ABI_C_INTERFACE_PREFIX "_mlir_ciface_"
#define MTC_ABI_PACKED_ENTRY_PREFIX "_mtc_packed_"

/* The exported version of the context an object was compiled for (a const uint32_t); the
 * runtime refuses an object without it or with another (KernelLibrary::load). */
#define MTC_ABI_KERNEL_CONTEXT_VERSION "mtc_kernel_context_version"

/* X(name) for every symbol the object imports from the runtime (for tests and loaders that
 * check the runtime exports them all). */
#define MTC_ABI_FOR_EACH_IMPORT(X)                                                             \
  X(mtc_all_reduce)                                                                            \
  X(mtc_all_gather)                                                                            \
  X(mtc_reduce_scatter)                                                                        \
  X(mtc_mesh_coordinate)                                                                       \
  X(mtc_all_to_all)                                                                            \
  X(mtc_shift)                                                                                 \
  X(mtc_all_to_all_filled)                                                                     \
  X(_mlir_ciface_mtc_batch_matmul_f32)                                                         \
  X(_mlir_ciface_mtc_batch_matmul_bf16)                                                        \
  X(mtc_dropout_key)                                                                           \
  X(mtc_dropout_layer)                                                                         \
  X(mtc_kernel_alloc)                                                                          \
  X(mtc_kernel_calloc)                                                                         \
  X(mtc_kernel_aligned_alloc)                                                                  \
  X(mtc_kernel_free)                                                                           \
  X(mtc_kernel_workspace)                                                                      \
  X(mtc_kernel_workspace_release)                                                              \
  X(mtc_loss_scale)

/*===----------------------------------------------------------------------===*
 * The kernel context: what one call of a compiled function reaches the runtime through.
 * The compiled code never reads it; the pointers are the runtime's own objects, opaque
 * here (null: the call has none), but for the workspace, plain memory (device memory in
 * a call of the GPU host object). `gpu` is the GPU executor's state of the call (its
 * kernels and stream), null on the CPU.
 *===----------------------------------------------------------------------===*/

/* Bumped whenever MtcKernelContext or a signature below changes; 0 is "no context" (objects
 * compiled before the context existed), 1 the context with an arena the runtime served
 * allocations from in order (before the workspace's offsets were compiled in), 2 the context
 * without the loss scale and `gpu`, 3 the imports without the bf16 GEMM, 4 the GPU imports
 * without theirs. */
#define MTC_KERNEL_CONTEXT_VERSION 5u

typedef struct MtcKernelContext {
  uint32_t size;    /* sizeof(MtcKernelContext) where it was built */
  uint32_t version; /* MTC_KERNEL_CONTEXT_VERSION where it was built */
  void *mesh;       /* mtc::rt::MeshCall: the rank's mesh axes and the call's first failure */
  void *dropout;    /* mtc::rt::DropoutCall: the key and the current layer instance */
  void *workspace;   /* where the placed temporaries live: 64-byte aligned, null for none */
  uint64_t workspace_bytes; /* its size */
  float loss_scale;         /* what mtc_loss_scale returns (fp16's dynamic loss scale); 0: 1 */
  void *gpu;        /* mtc::rt::cuda::GpuCall: the call's kernels and stream; null on the CPU */
} MtcKernelContext;

/* A context over these (each pointer may be null), with no loss scale (1). */
static inline MtcKernelContext mtc_kernel_context(void *mesh, void *dropout, void *workspace,
                                                  uint64_t workspace_bytes) {
  MtcKernelContext context;
  context.size = (uint32_t)sizeof(MtcKernelContext);
  context.version = MTC_KERNEL_CONTEXT_VERSION;
  context.mesh = mesh;
  context.dropout = dropout;
  context.workspace = workspace;
  context.workspace_bytes = workspace ? workspace_bytes : 0;
  context.loss_scale = 1.0f;
  context.gpu = (void *)0;
  return context;
}

/* `context` when it is one of this header's (non-null, its size and version this header's),
 * else null: what the runtime's imports read their state through. */
static inline const MtcKernelContext *mtc_kernel_context_checked(const MtcKernelContext *context) {
  return context && context->size == sizeof(MtcKernelContext) &&
                 context->version == MTC_KERNEL_CONTEXT_VERSION
             ? context
             : (const MtcKernelContext *)0;
}

/*===----------------------------------------------------------------------===*
 * Collectives (runtime/exec/MeshCollectives.h). `axis` is the position of the mesh axis in
 * the plan's mesh, `dtype` an MtcElementType (f32, f64, i32, i64 today), `op` an MtcReduction
 * (sum and max today); buffers are contiguous and row-major, passed as addresses.
 *===----------------------------------------------------------------------===*/

void mtc_all_reduce(MtcKernelContext *context, int64_t axis, int64_t dtype, int64_t op,
                    const void *in, void *out, int64_t count);
void mtc_all_gather(MtcKernelContext *context, int64_t axis, int64_t dtype, const void *in,
                    void *out, int64_t count);
void mtc_reduce_scatter(MtcKernelContext *context, int64_t axis, int64_t dtype, const void *in,
                        void *out, int64_t count);
int64_t mtc_mesh_coordinate(MtcKernelContext *context, int64_t axis);
/* Block c (`count` elements) of `in` goes to coordinate c; block c of `out` comes from it. */
void mtc_all_to_all(MtcKernelContext *context, int64_t axis, int64_t dtype, const void *in,
                    void *out, int64_t count);
/* `in` goes to the coordinate `offset` steps further along the axis, `out` comes from the one
 * `offset` steps before (modulo the axis size when `rotate` is non-zero; otherwise nothing
 * is sent past the ends and `out` is zero where no rank is before). */
void mtc_shift(MtcKernelContext *context, int64_t axis, int64_t dtype, int64_t offset,
               int64_t rotate, const void *in, void *out, int64_t count);
/* mtc_all_to_all of expert slots moving only the filled ones (MeshCollectives.h): blocks
 * [size(axis)][a][b][row]; `counts` this rank's filled slots per expert. */
void mtc_all_to_all_filled(MtcKernelContext *context, int64_t axis, int64_t dtype,
                           const void *in, void *out, void *scratch, const int64_t *counts,
                           int64_t slots_first, int64_t a, int64_t b, int64_t row);

/*===----------------------------------------------------------------------===*
 * GEMM (runtime/exec/Gemm.h): c[i] += a[i] x b[i] on rank-3 f32 memref descriptors
 * (StridedMemRefType<float, 3> of mlir/ExecutionEngine/CRunnerUtils.h): element [i][j][l]
 * is at aligned[offset + i * strides[0] + j * strides[1] + l * strides[2]].
 *===----------------------------------------------------------------------===*/

typedef struct MtcMemRef3F32 {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
} MtcMemRef3F32;

void _mlir_ciface_mtc_batch_matmul_f32(MtcKernelContext *context, MtcMemRef3F32 *a,
                                       MtcMemRef3F32 *b, MtcMemRef3F32 *c);

/* The same product of bf16 matrices (a bfloat16 value by its bits) into an f32 result, the
 * products and sums in f32: how a bf16 `mt.contract` is lowered. */
typedef struct MtcMemRef3BF16 {
  uint16_t *allocated;
  uint16_t *aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
} MtcMemRef3BF16;

void _mlir_ciface_mtc_batch_matmul_bf16(MtcKernelContext *context, MtcMemRef3BF16 *a,
                                        MtcMemRef3BF16 *b, MtcMemRef3F32 *c);

/*===----------------------------------------------------------------------===*
 * Dropout (runtime/exec/DropoutKey.h): word `word` (an mtc_dropout_key_word) of the key of
 * dropout site `stream` in the call's current layer instance; the instance a scan is about
 * to run (-1 after it).
 *===----------------------------------------------------------------------===*/

int64_t mtc_dropout_key(MtcKernelContext *context, int64_t stream, int64_t word);
void mtc_dropout_layer(MtcKernelContext *context, int64_t instance);

/* Linked into the object from compiler/codegen/CPU/DropoutKeep.c: Philox.h's
 * mtc_dropout_keep. */
int32_t mtc_dropout_keep_element(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step,
                                 float keep_prob);

/*===----------------------------------------------------------------------===*
 * Loss scale (runtime/exec/LossScaler.h): the factor the call's backward starts from
 * (`mt.loss_scale`, seeded under fp16): the context's `loss_scale`, 1 for a null context or
 * one that holds none (0).
 *===----------------------------------------------------------------------===*/

float mtc_loss_scale(MtcKernelContext *context);

/*===----------------------------------------------------------------------===*
 * Workspace (runtime/exec/KernelMemory.h): the base of the workspace for a function whose
 * views reach `bytes` bytes, 64-byte aligned: the context's when it holds them, else a block
 * of the runtime's (null when out of memory); and its hand-back before the function returns
 * (frees such a block, does nothing to the context's).
 *===----------------------------------------------------------------------===*/

void *mtc_kernel_workspace(MtcKernelContext *context, size_t bytes);
void mtc_kernel_workspace_release(MtcKernelContext *context, void *workspace);

/*===----------------------------------------------------------------------===*
 * Allocation (runtime/exec/KernelMemory.h): the C library's malloc, calloc, aligned_alloc
 * and free, with the call's context in front (mtc-redirect-allocations rewrites the object's
 * calls of the C functions to these), for the temporaries the compiler could not place in
 * the workspace. A block is freed with the context it was allocated with.
 *===----------------------------------------------------------------------===*/

void *mtc_kernel_alloc(MtcKernelContext *context, size_t size);
void *mtc_kernel_calloc(MtcKernelContext *context, size_t count, size_t size);
void *mtc_kernel_aligned_alloc(MtcKernelContext *context, size_t align, size_t size);
void mtc_kernel_free(MtcKernelContext *context, void *pointer);

/*===----------------------------------------------------------------------===*
 * The GPU host object (kernels/cuda_host.so of a CUDA plan, compiler/codegen/GPU/
 * GPUCodegen.h): x86 code exporting the same entry points and context version as the x86
 * object, whose functions launch the plan's CUDA kernels instead of computing. Every
 * buffer it is passed, and every pointer it passes on, is device memory. It imports the
 * collectives, the mesh coordinate and the dropout key and layer above unchanged (their
 * buffers device pointers: the CUDA trainer's mesh holds NCCL communicators and a
 * MeshMemory on its compute stream, MeshCollectives.h), and instead of the GEMM, the
 * workspace and the allocation functions:
 *
 *   mtc_gpu_launch         launches kernel `kernel` (its name in the plan's PTX) with grid
 *                          (gx, gy, gz) and block (bx, by, bz) on the call's stream; `args`
 *                          holds one 64-bit word per kernel parameter, in order: a buffer's
 *                          device address, or a scalar zero-extended from its bits (index
 *                          and i64 whole, f32 and i32 in the low 32 bits). The runtime
 *                          passes the kernel the address of each word (little endian: the
 *                          scalar's own bytes). A failure is recorded in the call's state.
 *   mtc_gpu_workspace, mtc_gpu_workspace_release
 *                          mtc_kernel_workspace and its release on device memory: the
 *                          context's workspace is a device buffer.
 *   _mlir_ciface_mtc_gpu_batch_matmul_f32, _mlir_ciface_mtc_gpu_batch_matmul_bf16
 *                          _mlir_ciface_mtc_batch_matmul_f32 and _bf16 on device memory (the
 *                          descriptors are host structs holding device addresses).
 *
 * The host object allocates nothing else: a temporary the compiler could not place in the
 * workspace is a compile error for CUDA.
 *===----------------------------------------------------------------------===*/

#define MTC_ABI_GPU_LAUNCH "mtc_gpu_launch"
#define MTC_ABI_GPU_WORKSPACE "mtc_gpu_workspace"
#define MTC_ABI_GPU_WORKSPACE_RELEASE "mtc_gpu_workspace_release"
#define MTC_ABI_GPU_BATCH_MATMUL_F32 "mtc_gpu_batch_matmul_f32"
#define MTC_ABI_GPU_BATCH_MATMUL_BF16 "mtc_gpu_batch_matmul_bf16"

/* X(name) for every symbol the GPU host object may import besides the collectives, mesh
 * coordinate and dropout imports of MTC_ABI_FOR_EACH_IMPORT. */
#define MTC_ABI_FOR_EACH_GPU_IMPORT(X)                                                         \
  X(mtc_gpu_launch)                                                                            \
  X(mtc_gpu_workspace)                                                                         \
  X(mtc_gpu_workspace_release)                                                                 \
  X(_mlir_ciface_mtc_gpu_batch_matmul_f32)                                                     \
  X(_mlir_ciface_mtc_gpu_batch_matmul_bf16)

void mtc_gpu_launch(MtcKernelContext *context, const char *kernel, int64_t gx, int64_t gy,
                    int64_t gz, int64_t bx, int64_t by, int64_t bz, const uint64_t *args,
                    int64_t count);
void *mtc_gpu_workspace(MtcKernelContext *context, size_t bytes);
void mtc_gpu_workspace_release(MtcKernelContext *context, void *workspace);
void _mlir_ciface_mtc_gpu_batch_matmul_f32(MtcKernelContext *context, MtcMemRef3F32 *a,
                                           MtcMemRef3F32 *b, MtcMemRef3F32 *c);
void _mlir_ciface_mtc_gpu_batch_matmul_bf16(MtcKernelContext *context, MtcMemRef3BF16 *a,
                                            MtcMemRef3BF16 *b, MtcMemRef3F32 *c);

/*===----------------------------------------------------------------------===*
 * Exported entry points: _mtc_packed_<f>(context, descriptors) calls
 * _mlir_ciface_<f>(context, descriptors[0], descriptors[1], ...), one descriptor pointer per
 * argument, then one per result.
 *===----------------------------------------------------------------------===*/

typedef void (*MtcPackedEntry)(MtcKernelContext *context, void **descriptors);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MTC_RUNTIME_EXEC_KERNELABI_H */
