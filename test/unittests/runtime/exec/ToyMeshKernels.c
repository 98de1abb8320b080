/*===- ToyMeshKernels.c - Hand-written tensor-parallel "kernels" for tests -===*
 *
 * A stand-in for a plan compiled with tensor parallelism, for TrainerMeshTest: the packed
 * calling convention of docs/plan-format.md ("Kernels"): the kernel context, passed on to
 * every collective, then each buffer an MLIR ranked memref descriptor {allocated, aligned,
 * offset, sizes[rank], strides[rank]}; the mesh collectives the runtime exports
 * (runtime/exec/KernelABI.h), resolved at dlopen; and the exported context version, which
 * MTC_TOY_CONTEXT_VERSION overrides for the test of a refused object (KernelLibraryTest).
 * Compiled as C99, it also checks that the ABI header is plain C.
 *
 * The model: one parameter w (any shape, possibly this rank's shard), its Adam-like state m.
 *   forward_backward(tokens, labels, w) -> loss = t * sum(w^2) over the whole tensor,
 *                                          grad = 2 t w     (t = tokens[0] % 5 + 1)
 *   optimizer_step(step, scale, g, w, m) -> grad_norm = |g * scale| over the whole tensor,
 *                                          lr = 0.1; w -= lr * g * scale, m += g * scale in
 *                                          place, unless the norm is not finite
 *   forward(tokens, labels, w)          -> loss = t * sum(w^2), plus 1000 when the call has an
 *                                          active dropout key (evaluation must run without)
 * The sums over the whole tensor all-reduce each shard's partial sum (f64) over mesh axis 0.
 * bad_forward_backward also calls a collective on an axis the mesh does not have.
 * workspace_forward_backward asks for a workspace of 256 bytes (as compiled functions with
 * temporaries do), writes the grad's elements into it and back, hands it back, and returns
 * its address in the first two elements of the grad (uint32 halves, for the test to compare).
 *
 *===----------------------------------------------------------------------===*/

#include "runtime/exec/KernelABI.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef MTC_TOY_CONTEXT_VERSION
#define MTC_TOY_CONTEXT_VERSION MTC_KERNEL_CONTEXT_VERSION
#endif
const uint32_t mtc_kernel_context_version = MTC_TOY_CONTEXT_VERSION;

static float *f32(void *descriptor) { return ((float **)descriptor)[1]; }

/* Elements of a rank-2 buffer. */
static int64_t elements2(void *descriptor) {
  const int64_t *d = (const int64_t *)descriptor;
  return d[3] * d[4];
}

void toy_forward_backward(MtcKernelContext *context, void **d) {
  const int32_t *tokens = ((const int32_t **)d[0])[1];
  const float *w = f32(d[2]);
  float *loss = f32(d[3]), *g = f32(d[4]);
  int64_t n = elements2(d[2]);
  float t = (float)(tokens[0] % 5 + 1);
  double partial = 0, total = 0;
  for (int64_t i = 0; i < n; ++i)
    partial += (double)w[i] * (double)w[i];
  mtc_all_reduce(context, 0, MTC_F64, MTC_SUM, &partial, &total, 1);
  *loss = (float)(total * t);
  for (int64_t i = 0; i < n; ++i)
    g[i] = 2.0f * w[i] * t;
}

void toy_forward(MtcKernelContext *context, void **d) {
  const int32_t *tokens = ((const int32_t **)d[0])[1];
  const float *w = f32(d[2]);
  float *loss = f32(d[3]);
  int64_t n = elements2(d[2]);
  double partial = 0, total = 0;
  for (int64_t i = 0; i < n; ++i)
    partial += (double)w[i] * (double)w[i];
  mtc_all_reduce(context, 0, MTC_F64, MTC_SUM, &partial, &total, 1);
  *loss = (float)(total * (double)(tokens[0] % 5 + 1));
  if (mtc_dropout_key(context, 0, MTC_DROPOUT_KEY_ACTIVE))
    *loss += 1000.0f;
}

void toy_bad_forward_backward(MtcKernelContext *context, void **d) {
  toy_forward_backward(context, d);
  double x = 1, y = 0;
  mtc_all_reduce(context, 3, MTC_F64, MTC_SUM, &x, &y, 1);
}

void toy_optimizer_step(MtcKernelContext *context, void **d) {
  float scale = *f32(d[1]);
  const float *g = f32(d[2]);
  float *w = f32(d[3]), *m = f32(d[4]), *norm = f32(d[5]), *lr = f32(d[6]);
  int64_t n = elements2(d[3]);
  double sq = 0, total = 0;
  for (int64_t i = 0; i < n; ++i)
    sq += (double)(g[i] * scale) * (double)(g[i] * scale);
  mtc_all_reduce(context, 0, MTC_F64, MTC_SUM, &sq, &total, 1);
  *norm = (float)sqrt(total);
  *lr = 0.1f;
  if (!isfinite(*norm))
    return;
  for (int64_t i = 0; i < n; ++i) {
    w[i] -= 0.1f * g[i] * scale;
    m[i] += g[i] * scale;
  }
}

/* The distributed optimizer (ZeRO-1) toy, for TrainerMeshTest: mesh axes 0 = dp (the plan's
 * data-parallel axis, or size 1) and 1 = tp (size 1 when absent). Two parameters:
 *   w [rows, cols]  rows split over tp; with the distributed optimizer its gradient and
 *                   state m are also split over dp along cols (a block of columns per rank,
 *                   not contiguous in memory);
 *   v [k]           whole everywhere, state n whole (no optimizer layout).
 *   zero_forward_backward(tokens, labels, w, v) -> loss = t (sum(w^2) + sum(v^2)),
 *                                                  gw = 2 t w, gv = 2 t v
 *   zero_optimizer_step(step, scale, gw, gv, w, v, m, n)
 *       -> grad_norm = |(gw, gv) * scale|, lr = 0.1; w, v, m, n updated in place
 * where the update is the one toy_optimizer_step makes. gw and m are the rank's dp shard
 * (cols / dp columns starting at coordinate * cols / dp) when their buffer has fewer columns
 * than w: the step updates that block of w and all-gathers the blocks over dp (axis 0), as a
 * compiled distributed-optimizer step does; the norm's squares of gw are all-reduced over dp
 * and tp, those of gv (whole everywhere) are not. */

static int64_t dimOf(void *descriptor, int d) { return ((const int64_t *)descriptor)[3 + d]; }

void toy_zero_forward_backward(MtcKernelContext *context, void **d) {
  const int32_t *tokens = ((const int32_t **)d[0])[1];
  const float *w = f32(d[2]), *v = f32(d[3]);
  float *loss = f32(d[4]), *gw = f32(d[5]), *gv = f32(d[6]);
  int64_t nw = elements2(d[2]), nv = dimOf(d[3], 0);
  float t = (float)(tokens[0] % 5 + 1);
  double partial = 0, total = 0, vs = 0;
  for (int64_t i = 0; i < nw; ++i)
    partial += (double)w[i] * (double)w[i];
  mtc_all_reduce(context, 1, MTC_F64, MTC_SUM, &partial, &total, 1);
  for (int64_t i = 0; i < nv; ++i)
    vs += (double)v[i] * (double)v[i];
  *loss = (float)((total + vs) * t);
  for (int64_t i = 0; i < nw; ++i)
    gw[i] = 2.0f * w[i] * t;
  for (int64_t i = 0; i < nv; ++i)
    gv[i] = 2.0f * v[i] * t;
}

void toy_zero_optimizer_step(MtcKernelContext *context, void **d) {
  float scale = *f32(d[1]);
  const float *gw = f32(d[2]), *gv = f32(d[3]);
  float *w = f32(d[4]), *v = f32(d[5]), *m = f32(d[6]), *n = f32(d[7]), *norm = f32(d[8]),
        *lr = f32(d[9]);
  int64_t rows = dimOf(d[4], 0), cols = dimOf(d[4], 1), shardCols = dimOf(d[2], 1);
  int64_t nv = dimOf(d[5], 0);
  int64_t dp = cols / shardCols, c0 = mtc_mesh_coordinate(context, 0) * shardCols;
  if (dp == 1)
    c0 = 0;
  double sq = 0, total = 0, vs = 0;
  for (int64_t i = 0; i < rows * shardCols; ++i)
    sq += (double)(gw[i] * scale) * (double)(gw[i] * scale);
  for (int64_t axis = 0; axis < 2; ++axis) {
    mtc_all_reduce(context, axis, MTC_F64, MTC_SUM, &sq, &total, 1);
    sq = total;
  }
  for (int64_t i = 0; i < nv; ++i)
    vs += (double)(gv[i] * scale) * (double)(gv[i] * scale);
  *norm = (float)sqrt(sq + vs);
  *lr = 0.1f;
  if (!isfinite(*norm))
    return;
  /* The shard of w, updated, then gathered: block c of `gathered` is rank c's [rows, shardCols]. */
  float shard[64], gathered[256];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < shardCols; ++c) {
      int64_t i = r * shardCols + c;
      shard[i] = w[r * cols + c0 + c] - 0.1f * gw[i] * scale;
      m[i] += gw[i] * scale;
    }
  if (dp == 1) {
    for (int64_t i = 0; i < rows * cols; ++i)
      w[i] = shard[i];
  } else {
    mtc_all_gather(context, 0, 0, shard, gathered, rows * shardCols);
    for (int64_t b = 0; b < dp; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < shardCols; ++c)
          w[r * cols + b * shardCols + c] = gathered[(b * rows + r) * shardCols + c];
  }
  for (int64_t i = 0; i < nv; ++i) {
    v[i] -= 0.1f * gv[i] * scale;
    n[i] += gv[i] * scale;
  }
}

void toy_workspace_forward_backward(MtcKernelContext *context, void **d) {
  toy_forward_backward(context, d);
  float *g = f32(d[4]);
  float *workspace = (float *)mtc_kernel_workspace(context, 256);
  for (int i = 0; i < 8; ++i)
    workspace[i] = g[i];
  for (int i = 0; i < 8; ++i)
    g[i] = workspace[i];
  uint64_t address = (uint64_t)(uintptr_t)workspace;
  uint32_t halves[2] = {(uint32_t)address, (uint32_t)(address >> 32)};
  memcpy(&g[0], &halves[0], 4);
  memcpy(&g[1], &halves[1], 4);
  mtc_kernel_workspace_release(context, workspace);
}
