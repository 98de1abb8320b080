//===- GemmBf16.cpp - The bf16 batched matrix product compiled kernels call -===//

#include "runtime/exec/Gemm.h"

#include "runtime/support/Safetensors.h"
#include "runtime/support/StridedMatrix.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace mtc::rt {
namespace {

/// The output tile one oneDNN call computes: whole rows of the sum, so that a tile's result
/// depends on its shape only, never on how many threads share the tiles.
constexpr int64_t kTileRows = 256;
constexpr int64_t kTileCols = 256;

/// A rows x cols matrix of `Element` at `data` with the given strides (in elements).
template <typename Element> struct Matrix {
  Element *data;
  int64_t rows, cols, rowStride, colStride;

  Matrix transposed() const { return {data, cols, rows, colStride, rowStride}; }
  Element &at(int64_t row, int64_t col) const { return data[row * rowStride + col * colStride]; }
  /// Rows [row, row + count) and columns [col, col + width).
  Matrix block(int64_t row, int64_t count, int64_t col, int64_t width) const {
    return {data + row * rowStride + col * colStride, count, width, rowStride, colStride};
  }
};

/// Matrix `i` of a rank-3 memref descriptor.
template <typename Element, typename MemRef> Matrix<Element> matrixOf(const MemRef &ref, int64_t i) {
  return {ref.aligned + ref.offset + i * ref.strides[0], ref.sizes[1], ref.sizes[2],
          ref.strides[1], ref.strides[2]};
}

template <typename Handle, auto Destroy> struct Destroyer {
  void operator()(Handle handle) const { Destroy(handle); }
};
template <typename Handle, auto Destroy>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Destroyer<Handle, Destroy>>;
using Engine = Owned<dnnl_engine_t, dnnl_engine_destroy>;
using Stream = Owned<dnnl_stream_t, dnnl_stream_destroy>;
using PostOps = Owned<dnnl_post_ops_t, dnnl_post_ops_destroy>;
using Attributes = Owned<dnnl_primitive_attr_t, dnnl_primitive_attr_destroy>;
using PrimitiveDesc = Owned<dnnl_primitive_desc_t, dnnl_primitive_desc_destroy>;
using Primitive = Owned<dnnl_primitive_t, dnnl_primitive_destroy>;
using Memory = Owned<dnnl_memory_t, dnnl_memory_destroy>;

template <typename Element>
bool describe(const Matrix<Element> &m, dnnl_data_type_t type, dnnl_memory_desc_t &desc) {
  dnnl_dims_t dims = {m.rows, m.cols};
  dnnl_dims_t strides = {m.rowStride, m.colStride};
  return dnnl_memory_desc_init_by_strides(&desc, 2, dims, type, strides) == dnnl_success;
}

template <typename Element>
bool wrap(const Matrix<Element> &m, const dnnl_memory_desc_t &desc, dnnl_engine_t engine,
          Memory &memory) {
  dnnl_memory_t created = nullptr;
  // oneDNN's handle is non-const; the inputs are only read.
  void *data = const_cast<std::remove_const_t<Element> *>(m.data);
  if (dnnl_memory_create(&created, &desc, engine, data) != dnnl_success)
    return false;
  memory.reset(created);
  return true;
}

/// oneDNN's engine and stream of one thread.
struct Device {
  Engine engine;
  Stream stream;

  bool open() {
    dnnl_engine_t e = nullptr;
    if (dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success)
      return false;
    engine.reset(e);
    dnnl_stream_t s = nullptr;
    if (dnnl_stream_create(&s, e, dnnl_stream_default_flags) != dnnl_success)
      return false;
    stream.reset(s);
    return true;
  }
};

/// c += a x b by oneDNN's matmul on the calling thread (its bf16 instructions where the CPU
/// has them). False when oneDNN offers no implementation for these layouts on this CPU, c
/// then untouched (a CPU primitive's execution fails only in its argument checks, before
/// it writes).
bool multiplyByOneDnn(Device &device, const Matrix<const uint16_t> &a,
                      const Matrix<const uint16_t> &b, const Matrix<float> &c) {
  dnnl_memory_desc_t aDesc, bDesc, cDesc;
  if (!describe(a, dnnl_bf16, aDesc) || !describe(b, dnnl_bf16, bDesc) ||
      !describe(c, dnnl_f32, cDesc))
    return false;
  dnnl_matmul_desc_t matmul;
  if (dnnl_matmul_desc_init(&matmul, &aDesc, &bDesc, nullptr, &cDesc) != dnnl_success)
    return false;
  // The sum post-op adds the product to what c holds: linalg.batch_matmul's accumulation.
  dnnl_post_ops_t ops = nullptr;
  if (dnnl_post_ops_create(&ops) != dnnl_success)
    return false;
  PostOps postOps(ops);
  dnnl_primitive_attr_t attr = nullptr;
  if (dnnl_post_ops_append_sum(ops, 1.0f) != dnnl_success ||
      dnnl_primitive_attr_create(&attr) != dnnl_success)
    return false;
  Attributes attributes(attr);
  dnnl_primitive_desc_t pd = nullptr;
  if (dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success ||
      dnnl_primitive_desc_create(&pd, &matmul, attr, device.engine.get(), nullptr) != dnnl_success)
    return false;
  PrimitiveDesc primitiveDesc(pd);
  dnnl_primitive_t p = nullptr;
  if (dnnl_primitive_create(&p, pd) != dnnl_success)
    return false;
  Primitive primitive(p);
  Memory aMemory, bMemory, cMemory;
  if (!wrap(a, aDesc, device.engine.get(), aMemory) ||
      !wrap(b, bDesc, device.engine.get(), bMemory) ||
      !wrap(c, cDesc, device.engine.get(), cMemory))
    return false;
  dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, aMemory.get()},
                            {DNNL_ARG_WEIGHTS, bMemory.get()},
                            {DNNL_ARG_DST, cMemory.get()}};
  return dnnl_primitive_execute(p, device.stream.get(), 3, args) == dnnl_success &&
         dnnl_stream_wait(device.stream.get()) == dnnl_success;
}

/// The same product through f32 copies of a and b and the f32 GEMM (Gemm.cpp): the
/// emulation where oneDNN has no bf16 implementation.
void multiplyWidened(const Matrix<const uint16_t> &a, const Matrix<const uint16_t> &b,
                     const Matrix<float> &c) {
  auto widen = [](const Matrix<const uint16_t> &m) {
    std::vector<float> wide(static_cast<size_t>(m.rows * m.cols));
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j)
        wide[static_cast<size_t>(i * m.cols + j)] = bf16ToFloat(BFloat16{m.at(i, j)});
    return wide;
  };
  std::vector<float> aWide = widen(a), bWide = widen(b);
  int64_t m = c.rows, n = c.cols, k = a.cols;
  MemRef3F32 aRef{aWide.data(), aWide.data(), 0, {1, m, k}, {m * k, k, 1}};
  MemRef3F32 bRef{bWide.data(), bWide.data(), 0, {1, k, n}, {k * n, n, 1}};
  MemRef3F32 cRef{c.data, c.data, 0, {1, m, n}, {0, c.rowStride, c.colStride}};
  _mlir_ciface_mtc_batch_matmul_f32(nullptr, &aRef, &bRef, &cRef);
}

} // namespace
} // namespace mtc::rt

// The context is unused, as for the f32 product.
extern "C" void _mlir_ciface_mtc_batch_matmul_bf16(MtcKernelContext *, MtcMemRef3BF16 *a,
                                                   MtcMemRef3BF16 *b, MtcMemRef3F32 *c) {
  using namespace mtc::rt;
  int64_t batch = c->sizes[0], m = c->sizes[1], n = c->sizes[2], k = a->sizes[2];
  // An empty product adds nothing.
  if (batch == 0 || m == 0 || n == 0 || k == 0)
    return;
  // A result with contiguous columns is computed as C^T = B^T A^T, whose rows are.
  std::optional<StridedMatrix> result = stridedMatrix(m, n, c->strides[1], c->strides[2]);
  bool transposedResult = result && result->transposed;
  int64_t rows = transposedResult ? n : m, cols = transposedResult ? m : n;
  int64_t rowTiles = (rows + kTileRows - 1) / kTileRows;
  int64_t colTiles = (cols + kTileCols - 1) / kTileCols;
  int64_t tiles = batch * rowTiles * colTiles;
#pragma omp parallel
  {
    // Each tile on one thread: oneDNN sizes its work by the calling thread's OpenMP
    // threads, and one thread sums each element in one order whatever the team's size.
    omp_set_num_threads(1);
    Device device;
    bool opened = device.open();
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      int64_t i = t / (rowTiles * colTiles);
      int64_t row = (t / colTiles) % rowTiles * kTileRows;
      int64_t col = t % colTiles * kTileCols;
      auto lhs = matrixOf<const uint16_t>(*a, i), rhs = matrixOf<const uint16_t>(*b, i);
      auto out = matrixOf<float>(*c, i);
      if (transposedResult) {
        std::swap(lhs, rhs);
        lhs = lhs.transposed();
        rhs = rhs.transposed();
        out = out.transposed();
      }
      int64_t height = std::min(kTileRows, rows - row), width = std::min(kTileCols, cols - col);
      Matrix<const uint16_t> lhsTile = lhs.block(row, height, 0, k);
      Matrix<const uint16_t> rhsTile = rhs.block(0, k, col, width);
      Matrix<float> outTile = out.block(row, height, col, width);
      if (!opened || !multiplyByOneDnn(device, lhsTile, rhsTile, outTile))
        multiplyWidened(lhsTile, rhsTile, outTile);
    }
  }
}
