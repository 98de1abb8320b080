/*===- ToyMeshKernels.c - Hand-written tensor-parallel "kernels" for tests -===*
 *
 * A stand-in for a plan compiled with tensor parallelism, for TrainerMeshTest: the packed
 * calling convention of docs/plan-format.md ("Kernels"), each buffer an MLIR ranked memref
 * descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}, and the mesh
 * collectives the runtime exports (runtime/exec/MeshCollectives.h), resolved at dlopen.
 *
 * The model: one parameter w (any shape, possibly this rank's shard), its Adam-like state m.
 *   forward_backward(tokens, labels, w) -> loss = t * sum(w^2) over the whole tensor,
 *                                          grad = 2 t w     (t = tokens[0] % 5 + 1)
 *   optimizer_step(step, scale, g, w, m) -> grad_norm = |g * scale| over the whole tensor,
 *                                          lr = 0.1, w - lr * g * scale, m + g * scale
 * The sums over the whole tensor all-reduce each shard's partial sum (f64) over mesh axis 0.
 * bad_forward_backward also calls a collective on an axis the mesh does not have.
 *
 *===----------------------------------------------------------------------===*/

#include <math.h>
#include <stdint.h>

void mtc_all_reduce(int64_t axis, int64_t dtype, int64_t op, const void *in, void *out,
                    int64_t count);
int64_t mtc_mesh_coordinate(int64_t axis);

static float *f32(void *descriptor) { return ((float **)descriptor)[1]; }

/* Elements of a rank-2 buffer. */
static int64_t elements2(void *descriptor) {
  const int64_t *d = (const int64_t *)descriptor;
  return d[3] * d[4];
}

void toy_forward_backward(void **d) {
  const int32_t *tokens = ((const int32_t **)d[0])[1];
  const float *w = f32(d[2]);
  float *loss = f32(d[3]), *g = f32(d[4]);
  int64_t n = elements2(d[2]);
  float t = (float)(tokens[0] % 5 + 1);
  double partial = 0, total = 0;
  for (int64_t i = 0; i < n; ++i)
    partial += (double)w[i] * (double)w[i];
  mtc_all_reduce(0, 1, 0, &partial, &total, 1);
  *loss = (float)(total * t);
  for (int64_t i = 0; i < n; ++i)
    g[i] = 2.0f * w[i] * t;
}

void toy_bad_forward_backward(void **d) {
  toy_forward_backward(d);
  double x = 1, y = 0;
  mtc_all_reduce(3, 1, 0, &x, &y, 1);
}

void toy_optimizer_step(void **d) {
  float scale = *f32(d[1]);
  const float *g = f32(d[2]), *w = f32(d[3]), *m = f32(d[4]);
  float *norm = f32(d[5]), *lr = f32(d[6]), *w2 = f32(d[7]), *m2 = f32(d[8]);
  int64_t n = elements2(d[3]);
  double sq = 0, total = 0;
  for (int64_t i = 0; i < n; ++i)
    sq += (double)(g[i] * scale) * (double)(g[i] * scale);
  mtc_all_reduce(0, 1, 0, &sq, &total, 1);
  *norm = (float)sqrt(total);
  *lr = 0.1f;
  for (int64_t i = 0; i < n; ++i) {
    w2[i] = w[i] - 0.1f * g[i] * scale;
    m2[i] = m[i] + g[i] * scale;
  }
}
