//===- MeshCollectives.h - The collectives compiled kernels call --*- C++ -*-===//
//
// A plan compiled with tensor parallelism (`mtc compile --kernels=x86 --tp N`) holds per-rank
// programs that communicate along the plan's mesh axes (docs/plan-format.md, "Mesh and
// layouts") through seven C functions of the kernel ABI (runtime/exec/KernelABI.h), which the
// runtime defines here and executables that link the executor export (like mtc_dropout_key):
//
//   void mtc_all_reduce(MtcKernelContext *context, int64_t axis, int64_t dtype, int64_t op,
//                       const void *in, void *out, int64_t count)
//       out[i] = the reduction (op MTC_SUM or MTC_MAX) of in[i] over the ranks of mesh axis
//       `axis` (this rank's group along it), i < count; in and out do not alias. The result is
//       bitwise identical on every rank of the group: sum is Gloo's ring all-reduce; max
//       gathers every rank's values and reduces them in coordinate order (a NaN wins).
//   void mtc_all_gather(MtcKernelContext *context, int64_t axis, int64_t dtype, const void *in,
//                       void *out, int64_t count)
//       count = elements of `in`; out holds size(axis) * count: block c is the `in` of the
//       rank with coordinate c.
//   void mtc_reduce_scatter(MtcKernelContext *context, int64_t axis, int64_t dtype,
//                           const void *in, void *out, int64_t count)
//       count = elements of `out`; in holds size(axis) * count; out = the sum over the group
//       of block number (my coordinate) of every rank's `in`.
//   void mtc_all_to_all(MtcKernelContext *context, int64_t axis, int64_t dtype,
//                       const void *in, void *out, int64_t count)
//       count = elements of one block; in and out hold size(axis) * count: block c of `in`
//       goes to the rank with coordinate c, block c of `out` is what that rank sent this
//       one (the communicator's allToAll; this rank sends (size - 1) * count elements).
//   void mtc_shift(MtcKernelContext *context, int64_t axis, int64_t dtype, int64_t offset,
//                  int64_t rotate, const void *in, void *out, int64_t count)
//       count = elements of `in` and `out`: `in` goes to coordinate (c + offset) and `out`
//       is what coordinate (c - offset) sent, modulo the axis size when `rotate` is non-zero
//       (a ring: ring attention's key and value blocks); without it a rank with no such
//       peer sends nothing or receives zeros. 0 < |offset| < size. One send-receive pair
//       (the communicator's sendRecv: every rank starts both halves before waiting, so the
//       ring cannot deadlock); this rank sends `count` elements (none past an end).
//   void mtc_all_to_all_filled(MtcKernelContext *context, int64_t axis, int64_t dtype,
//                              const void *in, void *out, void *scratch,
//                              const int64_t *counts, int64_t slots_first, int64_t a,
//                              int64_t b, int64_t row)
//       mtc_all_to_all of expert slots (mtp.all_to_all with filled counts): in and out are
//       size(axis) blocks [a][b][row], scratch (for packing) as large as in. With
//       slots_first the blocks are [slot][expert] (a slots of this rank's part, b experts
//       of the destination's part: from the ranks routing tokens to the experts' ranks),
//       else [expert][slot] (a experts of this rank's, b slots of the destination's part:
//       back). counts[e] (size(axis) * experts-per-rank entries) is how many slots this rank
//       filled for expert e on its token side: a prefix of its slots. A small all-to-all
//       of the counts tells every rank what the others filled; then only the filled rows
//       travel (the communicator's allToAllV) and every other row of `out` is zero.
//   int64_t mtc_mesh_coordinate(MtcKernelContext *context, int64_t axis)
//       this rank's coordinate along the axis.
//
// dtype MTC_F32, MTC_F64, or MTC_I32 / MTC_I64 for token ids and routing indices (the
// communicator's codes, runtime/comm/CollectiveTypes.h, which the ABI reuses). Every
// combination works: the communicator's typed all-reduce, all-gather, reduce-scatter and
// all-to-all carry all four (integer sums wrap). `axis` indexes plan.mesh.axes. An axis of size 1 needs
// no communicator: the collectives copy.
//
// The mesh of the call in progress is the `MeshCall` in the call's kernel context
// (MtcKernelContext::mesh), which the Trainer builds for every kernel call. The C interface
// cannot return errors, so a failing collective (a communicator error or timeout, an axis out
// of range, an unknown dtype or op, a negative count) records the first error in the
// MeshCall; it and every later collective of the same call write zeros to their output and
// communicate nothing (the first `count` elements for mtc_all_gather and mtc_all_to_all when
// the axis is out of range, their extent being unknown). After the kernel returns the Trainer checks the MeshCall
// and fails the step with the message, which names the function, the axis and the rank.
//
// With a MeshMemory in the mesh (device buffers) mtc_all_to_all_filled fails: it packs the
// filled rows on the host.
//
// Without a MeshCall (a null context or mesh, or a context of another ABI version: a kernel
// called outside the Trainer) nothing is communicated: the six collectives write `count`
// zeros to `out` and mtc_mesh_coordinate returns 0; there is nothing to report to, so nothing
// else happens.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_MESHCOLLECTIVES_H
#define MTC_RUNTIME_EXEC_MESHCOLLECTIVES_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/KernelABI.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <string>
#include <span>
#include <vector>

namespace mtc::rt {

/// One mesh axis as this rank sees it.
struct MeshAxisGroup {
  std::string name;             // plan.mesh.axes[i].name
  int64_t size = 1;             // ranks along the axis
  int64_t coordinate = 0;       // this rank's, in [0, size)
  Communicator *comm = nullptr; // the ranks along the axis, rank = coordinate; may be null
                                // when size is 1
};

/// Where the buffers of the kernels' collectives live when they are not this process's
/// memory: a device's (the CUDA trainer's, whose host code passes device pointers and whose
/// communicators are NCCL's, runtime/device/cuda/CudaTrainer.h). The collectives then copy
/// and clear through it instead of memcpy and memset, call `synchronize` before every
/// communicator operation (so that the operation reads what the kernels queued before it
/// wrote), and take the maximum with the communicator's own max all-reduce (a reduction on
/// the host cannot read device memory). An operation's wait returns once its result is in
/// place, so what the kernels queue after the collective returns reads it.
class MeshMemory {
public:
  virtual ~MeshMemory() = default;
  /// Waits until everything queued so far on the memory (kernels, copies) has finished.
  virtual Error synchronize() = 0;
  virtual Error copy(void *out, const void *in, size_t bytes) = 0;
  virtual Error clear(void *out, size_t bytes) = 0;
};

/// What the collectives of a kernel call run over: the axes in plan.mesh order, this
/// rank's world rank (for messages), and where their buffers live (null: this process's
/// memory, as for x86 kernels).
struct MeshContext {
  std::vector<MeshAxisGroup> axes;
  int worldRank = 0;
  MeshMemory *memory = nullptr;
};

/// The mesh side of one kernel call: what its collectives run over, and their first failure.
/// Its address is the `mesh` of the call's MtcKernelContext. `mesh` must outlive it.
class MeshCall {
public:
  explicit MeshCall(const MeshContext &mesh) : mesh_(&mesh) {}
  MeshCall(const MeshCall &) = delete;
  MeshCall &operator=(const MeshCall &) = delete;

  /// Whether no collective of the call failed so far.
  bool ok() const { return error_.ok(); }
  /// The first failure (success when none).
  const Error &error() const { return error_; }
  /// Moves the first failure out (success when none); later collectives run again.
  Error takeError();

  /// The MeshCall of `context` (null when it has none or is not of this ABI version).
  static MeshCall *of(const MtcKernelContext *context);
  const MeshContext &mesh() const { return *mesh_; }
  /// Records `error` unless a failure is already recorded (the first one sticks).
  void recordFailure(Error error);

private:
  const MeshContext *mesh_;
  Error error_;
};

struct DropoutCall;
struct LoadedKernel;

/// Calls `kernel` (KernelLibrary::call) with a MeshCall over `mesh`, `dropout` (null: none)
/// and `lossScale` in its kernel context; fails with the first collective's error.
Error callInMesh(const LoadedKernel &kernel, std::span<void *const> buffers,
                 const MeshContext &mesh, DropoutCall *dropout, float lossScale = 1.0f);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_MESHCOLLECTIVES_H
