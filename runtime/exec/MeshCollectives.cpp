//===- MeshCollectives.cpp - The collectives compiled kernels call --------===//

#include "runtime/exec/MeshCollectives.h"

#include "runtime/exec/KernelLibrary.h"

#include "runtime/comm/ElementTypes.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

namespace mtc::rt {
namespace {

/// The element types compiled kernels communicate: floating-point activations and
/// gradients (bf16 and f16 ones under mixed precision), and integer token ids and routing
/// indices.
bool isKernelDtype(int64_t dtype) { return isElementType(dtype); }

size_t elementSize(int64_t dtype) {
  return isKernelDtype(dtype) ? rt::elementSize(static_cast<MtcElementType>(dtype)) : 0;
}

std::string_view dtypeName(int64_t dtype) {
  return isKernelDtype(dtype) ? elementTypeName(static_cast<MtcElementType>(dtype))
                              : "an unknown dtype";
}

/// One call of a collective: checks its arguments against the kernel call's mesh, runs the
/// collective on the axis (`run`), and turns every failure into the MeshCall's sticky error.
class Call {
public:
  Call(MeshCall *meshCall, const char *function, std::string description, int64_t axis,
       int64_t dtype, int64_t count)
      : function_(function), description_(std::move(description)), axis_(axis), dtype_(dtype),
        count_(count), meshCall_(meshCall) {}

  /// The axis the call runs over, or null after recording why it cannot run (no mesh, an
  /// earlier failure, bad arguments): then the caller writes zeros to `out`.
  const MeshAxisGroup *start() {
    if (!meshCall_ || !meshCall_->ok())
      return nullptr;
    const MeshContext &mesh = meshCall_->mesh();
    if (axis_ < 0 || axis_ >= static_cast<int64_t>(mesh.axes.size())) {
      fail(concat("mesh axis ", axis_, " is out of range (the plan's mesh has ", mesh.axes.size(),
                  mesh.axes.size() == 1 ? " axis)" : " axes)"));
      return nullptr;
    }
    if (!isKernelDtype(dtype_)) {
      fail(concat("unknown dtype ", dtype_, " (0 = f32, 1 = f64, 2 = bf16, 3 = f16, 4 = i32, 5 = i64)"));
      return nullptr;
    }
    if (count_ < 0) {
      fail(concat("negative element count ", count_));
      return nullptr;
    }
    const MeshAxisGroup &group = mesh.axes[size_t(axis_)];
    if (group.size > 1 && (!group.comm || group.comm->size() != group.size ||
                           group.comm->rank() != group.coordinate)) {
      fail("no communicator for the axis (internal error: the mesh was not built for this plan)");
      return nullptr;
    }
    return &group;
  }

  /// Records a failure of this call in the MeshCall.
  void fail(std::string_view why) {
    if (!meshCall_)
      return;
    const MeshContext &mesh = meshCall_->mesh();
    std::string where;
    if (axis_ >= 0 && axis_ < static_cast<int64_t>(mesh.axes.size())) {
      const MeshAxisGroup &g = mesh.axes[size_t(axis_)];
      where = concat(" over mesh axis '", g.name, "' (world rank ", mesh.worldRank, ", coordinate ",
                     g.coordinate, " of ", g.size, ")");
    } else {
      where = concat(" on world rank ", mesh.worldRank);
    }
    meshCall_->recordFailure(makeError(function_, " (", description_, ", ", count_, " ",
                                       dtypeName(dtype_), " elements)", where, ": ", why));
  }
  void fail(const Error &err) { fail(std::string_view(err.message())); }

  /// Runs `body(axis)` (returning an Error) when the call can start; false, with the
  /// failure recorded (an error, an exception), when it could not or failed: the caller
  /// then writes zeros to `out`.
  template <class Body> bool run(Body &&body) {
    try {
      const MeshAxisGroup *group = start();
      if (!group)
        return false;
      Error err = body(*group);
      if (err.ok())
        return true;
      fail(err);
    } catch (const std::bad_alloc &) {
      fail("out of memory");
    } catch (const std::exception &e) {
      fail(e.what());
    }
    return false;
  }

private:
  const char *function_;
  std::string description_;
  int64_t axis_, dtype_, count_;
  MeshCall *meshCall_;

public:
  MeshCall *meshCall() const { return meshCall_; }
};

/// Where the call's buffers live (null: this process's memory).
MeshMemory *memoryOf(const MeshCall *meshCall) {
  return meshCall ? meshCall->mesh().memory : nullptr;
}

void zeroFill(MeshMemory *memory, void *out, int64_t dtype, int64_t count) {
  if (!out || count <= 0 || !isKernelDtype(dtype))
    return;
  size_t bytes = size_t(count) * elementSize(dtype);
  if (!memory) {
    std::memset(out, 0, bytes);
    return;
  }
  // The call's failure is recorded already; a failed clear adds nothing to it.
  (void)memory->clear(out, bytes);
}

/// `bytes` from `in` to `out` (which do not overlap) in the call's memory.
Error copyBytes(MeshMemory *memory, void *out, const void *in, size_t bytes) {
  if (!memory) {
    std::memcpy(out, in, bytes);
    return Error::success();
  }
  return memory->copy(out, in, bytes);
}

/// Before a communicator operation on device buffers: what the kernels and copies queued
/// before it must have written its input (MeshMemory).
Error ready(MeshMemory *memory) { return memory ? memory->synchronize() : Error::success(); }

/// Zeroes the output of a failed gather or exchange: its size(axis) blocks of `count`
/// elements, or the first block when the axis (so their number) is unknown.
void zeroFillBlocks(const MeshCall *meshCall, int64_t axis, void *out, int64_t dtype,
                    int64_t count) {
  int64_t blocks = 1;
  if (meshCall && axis >= 0 && axis < static_cast<int64_t>(meshCall->mesh().axes.size()))
    blocks = meshCall->mesh().axes[size_t(axis)].size;
  zeroFill(memoryOf(meshCall), out, dtype, count * blocks);
}

/// The communicator's code of a checked `dtype` (the kernels pass the same codes).
MtcElementType elementTypeOf(int64_t dtype) { return static_cast<MtcElementType>(dtype); }

Error allReduce(MeshMemory *memory, const MeshAxisGroup &g, int64_t dtype, int64_t op,
                const void *in, void *out, int64_t count) {
  size_t n = size_t(count);
  // Device buffers: the communicator's max (NCCL's; a maximum is exact, so every rank holds
  // the same value, though NCCL's NaN handling is its own).
  if (op == MTC_SUM || g.size == 1 || memory) {
    if (Error err = copyBytes(memory, out, in, n * elementSize(dtype)); !err.ok())
      return err;
    if (g.size == 1)
      return Error::success();
    if (Error err = ready(memory); !err.ok())
      return err;
    return g.comm->allReduce(out, n, elementTypeOf(dtype), op == MTC_SUM ? MTC_SUM : MTC_MAX);
  }
  // max: every rank gathers every value and reduces them in coordinate order (a NaN wins),
  // so every rank holds the same bits.
  size_t bytes = n * elementSize(dtype);
  std::vector<std::byte> gathered(bytes * size_t(g.size));
  if (Error err = g.comm->allGather(in, gathered.data(), n, elementTypeOf(dtype)); !err.ok())
    return err;
  ReduceFunction reduce = reduceFunction(elementTypeOf(dtype), MTC_MAX);
  std::memcpy(out, gathered.data(), bytes);
  for (int64_t c = 1; c < g.size; ++c)
    reduce(out, out, gathered.data() + size_t(c) * bytes, n);
  return Error::success();
}

} // namespace

Error MeshCall::takeError() {
  Error e = std::move(error_);
  error_ = Error::success();
  return e;
}

MeshCall *MeshCall::of(const MtcKernelContext *context) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  return checked ? static_cast<MeshCall *>(checked->mesh) : nullptr;
}

void MeshCall::recordFailure(Error error) {
  if (error_.ok() && !error.ok())
    error_ = std::move(error);
}

Error callInMesh(const LoadedKernel &kernel, std::span<void *const> buffers,
                 const MeshContext &mesh, DropoutCall *dropout, float lossScale) {
  MeshCall call(mesh);
  KernelLibrary::call(kernel, buffers, {&call, dropout, lossScale});
  return call.takeError();
}

} // namespace mtc::rt

using namespace mtc::rt;

extern "C" void mtc_all_reduce(MtcKernelContext *context, int64_t axis, int64_t dtype, int64_t op,
                               const void *in, void *out, int64_t count) {
  Call call(MeshCall::of(context), "mtc_all_reduce",
            op == MTC_SUM   ? "sum"
            : op == MTC_MAX ? "max"
                            : "unknown op",
            axis, dtype, count);
  if (call.run([&](const MeshAxisGroup &g) {
        if (op != MTC_SUM && op != MTC_MAX)
          return makeError("unknown reduction ", op, " (0 = sum, 1 = max)");
        return allReduce(memoryOf(call.meshCall()), g, dtype, op, in, out, count);
      }))
    return;
  zeroFill(memoryOf(call.meshCall()), out, dtype, count);
}

extern "C" void mtc_all_gather(MtcKernelContext *context, int64_t axis, int64_t dtype,
                               const void *in, void *out, int64_t count) {
  MeshCall *meshCall = MeshCall::of(context);
  Call call(meshCall, "mtc_all_gather", "concatenation", axis, dtype, count);
  if (call.run([&](const MeshAxisGroup &g) {
        size_t bytes = size_t(count) * elementSize(dtype);
        if (g.size == 1)
          return copyBytes(memoryOf(meshCall), out, in, bytes);
        if (Error err = ready(memoryOf(meshCall)); !err.ok())
          return err;
        return g.comm->allGather(in, out, size_t(count), elementTypeOf(dtype));
      }))
    return;
  zeroFillBlocks(meshCall, axis, out, dtype, count);
}

extern "C" void mtc_reduce_scatter(MtcKernelContext *context, int64_t axis, int64_t dtype,
                                   const void *in, void *out, int64_t count) {
  MeshCall *meshCall = MeshCall::of(context);
  Call call(meshCall, "mtc_reduce_scatter", "sum", axis, dtype, count);
  if (call.run([&](const MeshAxisGroup &g) {
        size_t n = size_t(count);
        if (g.size == 1)
          return copyBytes(memoryOf(meshCall), out, in, n * elementSize(dtype));
        if (Error err = ready(memoryOf(meshCall)); !err.ok())
          return err;
        return g.comm->reduceScatter(in, out, n, elementTypeOf(dtype), MTC_SUM);
      }))
    return;
  zeroFill(memoryOf(meshCall), out, dtype, count);
}

extern "C" void mtc_all_to_all(MtcKernelContext *context, int64_t axis, int64_t dtype,
                               const void *in, void *out, int64_t count) {
  MeshCall *meshCall = MeshCall::of(context);
  Call call(meshCall, "mtc_all_to_all", "exchange of blocks", axis, dtype, count);
  if (call.run([&](const MeshAxisGroup &g) {
        if (g.size == 1)
          return copyBytes(memoryOf(meshCall), out, in, size_t(count) * elementSize(dtype));
        if (Error err = ready(memoryOf(meshCall)); !err.ok())
          return err;
        return g.comm->allToAll(in, out, size_t(count), elementTypeOf(dtype));
      }))
    return;
  zeroFillBlocks(meshCall, axis, out, dtype, count);
}

extern "C" void mtc_shift(MtcKernelContext *context, int64_t axis, int64_t dtype, int64_t offset,
                          int64_t rotate, const void *in, void *out, int64_t count) {
  MeshCall *meshCall = MeshCall::of(context);
  MeshMemory *memory = memoryOf(meshCall);
  Call call(meshCall, "mtc_shift",
            concat("shift by ", offset, rotate ? " around the ring" : ""), axis, dtype, count);
  if (call.run([&](const MeshAxisGroup &g) -> Error {
        if (offset == 0 || offset >= g.size || -offset >= g.size)
          return makeError("offset ", offset, " is not a step to another rank along an axis of ",
                           g.size);
        int64_t dst = g.coordinate + offset, src = g.coordinate - offset;
        if (rotate) {
          dst = ((dst % g.size) + g.size) % g.size;
          src = ((src % g.size) + g.size) % g.size;
        }
        bool sends = dst >= 0 && dst < g.size, receives = src >= 0 && src < g.size;
        size_t n = size_t(count);
        MtcElementType type = elementTypeOf(dtype);
        if (!receives)
          zeroFill(memory, out, dtype, count);
        if (Error err = ready(memory); !err.ok())
          return err;
        if (sends && receives)
          return g.comm->sendRecv(in, n, int(dst), out, n, int(src), type);
        if (sends)
          return g.comm->send(in, n, type, int(dst));
        if (receives)
          return g.comm->recv(out, n, type, int(src));
        return Error::success();
      }))
    return;
  zeroFill(memory, out, dtype, count);
}

namespace {

/// mtc_all_to_all_filled's rows: block p of `parts`, each [a][b] rows of `row` elements;
/// `filled(p, x, y)` whether the row at (x, y) of block p holds a slot that was filled.
struct SlotRows {
  int64_t parts, a, b, row;
  bool slotsFirst;
  /// Filled slots per (block, expert of the block's part).
  const int64_t *counts;
  int64_t expertsPerPart() const { return slotsFirst ? b : a; }
  bool filled(int64_t p, int64_t x, int64_t y) const {
    int64_t expert = slotsFirst ? y : x, slot = slotsFirst ? x : y;
    return slot < counts[p * expertsPerPart() + expert];
  }
  int64_t rowOffset(int64_t p, int64_t x, int64_t y) const { return ((p * a + x) * b + y) * row; }
};

/// Copies the filled rows of every block of `from` (laid out as `rows`) to `packed`, block
/// after block; the elements each block packed in `elements`.
void packFilled(const SlotRows &rows, const char *from, char *packed, size_t elementSize,
                std::vector<size_t> &elements) {
  size_t at = 0, rowBytes = size_t(rows.row) * elementSize;
  for (int64_t p = 0; p < rows.parts; ++p) {
    size_t begin = at;
    for (int64_t x = 0; x < rows.a; ++x)
      for (int64_t y = 0; y < rows.b; ++y)
        if (rows.filled(p, x, y)) {
          std::memcpy(packed + at, from + size_t(rows.rowOffset(p, x, y)) * elementSize, rowBytes);
          at += rowBytes;
        }
    elements[size_t(p)] = (at - begin) / elementSize;
  }
}

/// The inverse in place: `data` holds the filled rows packed at its start; each moves to
/// its place, every other row becomes zero. Backwards, so that a row never lands on
/// packed rows not moved yet (a row's place is at or after its packed position).
void unpackFilled(const SlotRows &rows, char *data, size_t elementSize, size_t packedBytes) {
  size_t at = packedBytes, rowBytes = size_t(rows.row) * elementSize;
  for (int64_t p = rows.parts; p-- > 0;)
    for (int64_t x = rows.a; x-- > 0;)
      for (int64_t y = rows.b; y-- > 0;) {
        char *place = data + size_t(rows.rowOffset(p, x, y)) * elementSize;
        if (rows.filled(p, x, y)) {
          at -= rowBytes;
          std::memmove(place, data + at, rowBytes);
        } else {
          std::memset(place, 0, rowBytes);
        }
      }
}

} // namespace

extern "C" void mtc_all_to_all_filled(MtcKernelContext *context, int64_t axis, int64_t dtype,
                                      const void *in, void *out, void *scratch,
                                      const int64_t *counts, int64_t slotsFirst, int64_t a,
                                      int64_t b, int64_t row) {
  MeshCall *meshCall = MeshCall::of(context);
  int64_t count = a * b * row;
  Call call(meshCall, "mtc_all_to_all_filled", "exchange of filled expert slots", axis, dtype,
            count);
  if (call.run([&](const MeshAxisGroup &g) -> Error {
        if (memoryOf(meshCall))
          return makeError("the exchange of filled expert slots packs its rows on the host; it "
                           "does not run on device buffers (expert parallelism on a GPU is not "
                           "implemented)");
        if (a < 0 || b < 0 || row < 0)
          return makeError("negative block shape [", a, ", ", b, ", ", row, "]");
        size_t parts = size_t(g.size), perPart = size_t(slotsFirst ? b : a);
        // Filled slots, clamped to the slots a block holds.
        int64_t slots = slotsFirst ? a : b;
        std::vector<int64_t> mine(parts * perPart), theirs(mine.size());
        for (size_t e = 0; e < mine.size(); ++e)
          mine[e] = std::clamp<int64_t>(counts[e], 0, slots);
        if (g.size == 1)
          theirs = mine;
        else if (Error err = g.comm->allToAll(mine.data(), theirs.data(), perPart, MTC_I64);
                 !err.ok())
          return err;
        // Sent: this rank's slots (to the experts' ranks) by its own counts, or its experts'
        // slots (back) by the counts of the ranks they came from; received the other way.
        SlotRows sent{int64_t(parts), a, b, row, slotsFirst != 0,
                      slotsFirst ? mine.data() : theirs.data()};
        SlotRows received = sent;
        received.counts = slotsFirst ? theirs.data() : mine.data();
        size_t size = elementSize(dtype);
        std::vector<size_t> sendCounts(parts), recvCounts(parts);
        packFilled(sent, static_cast<const char *>(in), static_cast<char *>(scratch), size,
                   sendCounts);
        size_t recvTotal = 0;
        for (size_t p = 0; p < parts; ++p) {
          for (int64_t x = 0; x < a; ++x)
            for (int64_t y = 0; y < b; ++y)
              recvCounts[p] += received.filled(int64_t(p), x, y) ? size_t(row) : 0;
          recvTotal += recvCounts[p];
        }
        if (g.size == 1)
          std::memcpy(out, scratch, sendCounts[0] * size);
        else if (Error err = g.comm->allToAllV(scratch, sendCounts, out, recvCounts,
                                               elementTypeOf(dtype));
                 !err.ok())
          return err;
        unpackFilled(received, static_cast<char *>(out), size, recvTotal * size);
        return Error::success();
      }))
    return;
  zeroFillBlocks(meshCall, axis, out, dtype, count);
}

extern "C" int64_t mtc_mesh_coordinate(MtcKernelContext *context, int64_t axis) {
  MeshCall *meshCall = MeshCall::of(context);
  if (!meshCall)
    return 0;
  const MeshContext &mesh = meshCall->mesh();
  if (axis < 0 || axis >= static_cast<int64_t>(mesh.axes.size())) {
    meshCall->recordFailure(makeError("mtc_mesh_coordinate on world rank ", mesh.worldRank,
                                      ": mesh axis ", axis,
                                      " is out of range (the plan's mesh has ", mesh.axes.size(),
                                      mesh.axes.size() == 1 ? " axis)" : " axes)"));
    return 0;
  }
  return mesh.axes[size_t(axis)].coordinate;
}
