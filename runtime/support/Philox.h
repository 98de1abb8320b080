/*===- Philox.h - Philox4x32-10 counter-based RNG (C99 / C++ / CUDA) -----===*
 *
 * One implementation of the project's random numbers, shared by the runtime (C++), generated
 * CPU kernels (C) and CUDA kernels: everything above the `__cplusplus` section is C99 made of
 * `static inline` functions, marked `__host__ __device__` under nvcc.
 *
 * Philox4x32-10 is the counter-based generator of Salmon et al., "Parallel random numbers: as
 * easy as 1, 2, 3" (SC'11), as in Random123, cuRAND and PyTorch: a 128-bit counter and a
 * 64-bit key map to 128 random bits through 10 rounds; no state is carried between calls.
 *
 * Keying (docs/runtime.md, "Keying"). The random words of element `i` of tensor `t` at step `s` of a
 * run with seed `seed` are
 *
 *     key     = { seed & 0xffffffff, seed >> 32 }
 *     counter = { i & 0xffffffff, i >> 32, t, s }
 *     words   = philox4x32_10(counter, key)            (4 x uint32)
 *
 * where `i` is the element's *global* row-major index in the full (unsharded) tensor. Each
 * element owns one counter, so any shard generates its slice [begin, end) alone and the global
 * values do not depend on the layout, the number of ranks or the order of generation.
 * Parameters are initialised with s = 0; dropout masks use the training step as s and the
 * global index in the global-batch activation (so micro-batching and data parallelism do not
 * change masks). Tensor ids are one namespace for parameters and dropout sites (one id per
 * site and layer repeat): parameters use their index in the plan's table with s = 0; dropout
 * site `stream` of repeat `i` of a layer uses mtc_dropout_tensor_id(stream, i) (i = -1
 * outside layers) with s = step + 1, so the two never share a counter.
 *
 * Values from the words of one element:
 *   uniform  u = (words[0] >> 8) * 2^-24                  in [0, 1), 24 random bits, exact
 *   normal   z = Box-Muller cosine branch of (words[0], words[1]):
 *              u1 = ((words[0] >> 8) + 1) * 2^-24      in (0, 1]  (log never sees 0)
 *              u2 =  (words[1] >> 8)      * 2^-24      in [0, 1)
 *              z  = sqrt(-2 ln u1) * cos(2 pi u2)      (computed in double, rounded to float)
 *   keep     dropout keeps the element iff u < keep_prob (exact float comparison)
 * words[2] and words[3] are reserved. Uniforms and dropout masks are bit-identical on every
 * target; normals are computed in double precision so CPU (glibc) and GPU (CUDA libdevice)
 * agree after rounding to float except in rare double-rounding cases.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MTC_RUNTIME_SUPPORT_PHILOX_H
#define MTC_RUNTIME_SUPPORT_PHILOX_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MTC_PHILOX_FN static inline __host__ __device__
#else
#define MTC_PHILOX_FN static inline
#endif

#define MTC_PHILOX_M0 0xD2511F53u
#define MTC_PHILOX_M1 0xCD9E8D57u
#define MTC_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define MTC_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* One Philox round on ctr (in place) with round key k0, k1. */
MTC_PHILOX_FN void mtc_philox_round(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
  uint64_t p0 = (uint64_t)MTC_PHILOX_M0 * (uint64_t)ctr[0];
  uint64_t p1 = (uint64_t)MTC_PHILOX_M1 * (uint64_t)ctr[2];
  uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
  uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
  uint32_t c1 = ctr[1], c3 = ctr[3];
  ctr[0] = hi1 ^ c1 ^ k0;
  ctr[1] = lo1;
  ctr[2] = hi0 ^ c3 ^ k1;
  ctr[3] = lo0;
}

/* Philox4x32 with 10 rounds: out = philox(ctr, key). `out` may alias `ctr`. */
MTC_PHILOX_FN void mtc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                     uint32_t out[4]) {
  uint32_t x[4];
  uint32_t k0 = key[0], k1 = key[1];
  int r;
  x[0] = ctr[0];
  x[1] = ctr[1];
  x[2] = ctr[2];
  x[3] = ctr[3];
  for (r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += MTC_PHILOX_W0;
      k1 += MTC_PHILOX_W1;
    }
    mtc_philox_round(x, k0, k1);
  }
  out[0] = x[0];
  out[1] = x[1];
  out[2] = x[2];
  out[3] = x[3];
}

/* The four words of element `index` of tensor `tensor_id` at `step` (keying above). */
MTC_PHILOX_FN void mtc_philox_element(uint64_t seed, uint32_t tensor_id, uint64_t index,
                                      uint32_t step, uint32_t out[4]) {
  uint32_t key[2];
  uint32_t ctr[4];
  key[0] = (uint32_t)seed;
  key[1] = (uint32_t)(seed >> 32);
  ctr[0] = (uint32_t)index;
  ctr[1] = (uint32_t)(index >> 32);
  ctr[2] = tensor_id;
  ctr[3] = step;
  mtc_philox4x32_10(ctr, key, out);
}

/* A float in [0, 1) from the top 24 bits of `x` (exact: every value is k * 2^-24). */
MTC_PHILOX_FN float mtc_uniform_float(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* The cosine branch of Box-Muller in double precision (see mtc_normal_pair). */
MTC_PHILOX_FN double mtc_normal_double(uint32_t a, uint32_t b) {
  const double two_pi = 6.283185307179586476925286766559;
  double u1 = (double)((a >> 8) + 1u) * (1.0 / 16777216.0);
  double u2 = (double)(b >> 8) * (1.0 / 16777216.0);
  return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

/* Two independent standard normals from two words by the Box-Muller transform:
 *   u1 = ((a >> 8) + 1) * 2^-24 in (0, 1],  u2 = (b >> 8) * 2^-24 in [0, 1),
 *   r = sqrt(-2 ln u1),  z0 = r cos(2 pi u2),  z1 = r sin(2 pi u2),
 * evaluated in double and rounded to float. |z| <= sqrt(2 ln 2^24) ~= 5.77. */
MTC_PHILOX_FN void mtc_normal_pair(uint32_t a, uint32_t b, float *z0, float *z1) {
  const double two_pi = 6.283185307179586476925286766559;
  double u1 = (double)((a >> 8) + 1u) * (1.0 / 16777216.0);
  double u2 = (double)(b >> 8) * (1.0 / 16777216.0);
  double r = sqrt(-2.0 * log(u1));
  double t = two_pi * u2;
  *z0 = (float)(r * cos(t));
  *z1 = (float)(r * sin(t));
}

/* Value helpers per element (keying above). */
MTC_PHILOX_FN float mtc_philox_uniform(uint64_t seed, uint32_t tensor_id, uint64_t index,
                                       uint32_t step) {
  uint32_t w[4];
  mtc_philox_element(seed, tensor_id, index, step, w);
  return mtc_uniform_float(w[0]);
}

MTC_PHILOX_FN float mtc_philox_normal(uint64_t seed, uint32_t tensor_id, uint64_t index,
                                      uint32_t step) {
  uint32_t w[4];
  mtc_philox_element(seed, tensor_id, index, step, w);
  return (float)mtc_normal_double(w[0], w[1]);
}

/* The tensor id of dropout site `stream` in repeat `layer_instance` of its layer (-1 for a
 * site outside any layer): the stream in the low 20 bits, instance + 1 above. */
MTC_PHILOX_FN uint32_t mtc_dropout_tensor_id(int64_t stream, int64_t layer_instance) {
  return ((uint32_t)stream & 0xFFFFFu) | ((uint32_t)(layer_instance + 1) << 20);
}

/* A dropout element's counter is its global sample (the micro-batch's first sample plus its
 * `batch` coordinate) times this stride plus its row-major offset over the tensor's other
 * dimensions: a sample's mask does not depend on how the global batch is cut into
 * micro-batches or split over ranks. */
#define MTC_DROPOUT_SAMPLE_STRIDE ((int64_t)1 << 40)

/* The words of a dropout key, what the compiled kernels ask the runtime for once per dropout
 * op (mtc_dropout_key, runtime/exec/DropoutKey.h) before deciding every element with
 * mtc_dropout_keep(seed, tensor id, index base + element counter, step, keep_prob). */
enum mtc_dropout_key_word {
  MTC_DROPOUT_KEY_SEED = 0,       /* the run's seed */
  MTC_DROPOUT_KEY_TENSOR_ID = 1,  /* mtc_dropout_tensor_id(stream, layer instance) */
  MTC_DROPOUT_KEY_STEP = 2,       /* the counter's step word: the training step + 1 */
  MTC_DROPOUT_KEY_INDEX_BASE = 3, /* added to the element's counter: the micro-batch's first
                                   * sample times MTC_DROPOUT_SAMPLE_STRIDE */
  MTC_DROPOUT_KEY_ACTIVE = 4,     /* 0: no dropout in this call (every element kept, unscaled) */
  MTC_DROPOUT_KEY_WORDS = 5
};

/* 1 if dropout keeps the element (probability keep_prob), else 0. */
MTC_PHILOX_FN int mtc_dropout_keep(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step,
                                   float keep_prob) {
  return mtc_philox_uniform(seed, tensor_id, index, step) < keep_prob;
}

#ifdef __cplusplus

#include <array>
#include <cstddef>

namespace mtc::rt {

/// The four Philox words of global element `elementIndex` of tensor `tensorId` at `step`
/// for a run seeded with `seed` (keying in the header comment).
inline std::array<uint32_t, 4> philoxStream(uint64_t seed, uint32_t tensorId, uint64_t elementIndex,
                                            uint32_t step = 0) {
  std::array<uint32_t, 4> out;
  mtc_philox_element(seed, tensorId, elementIndex, step, out.data());
  return out;
}

/// Which random stream: the run's seed, the tensor (parameter or dropout site) and the step.
struct RngStream {
  uint64_t seed = 0;
  uint32_t tensorId = 0;
  uint32_t step = 0;
};

/// out[k] = mean + stddev * z(begin + k) for the global indices [begin, end) (out holds
/// end - begin floats; nothing is written when end <= begin). The affine map is applied in
/// double and rounded once.
inline void fillNormal(const RngStream &s, uint64_t begin, uint64_t end, float mean, float stddev,
                       float *out) {
  for (uint64_t i = begin; i < end; ++i) {
    uint32_t w[4];
    mtc_philox_element(s.seed, s.tensorId, i, s.step, w);
    double z = mtc_normal_double(w[0], w[1]);
    out[i - begin] = (float)((double)mean + (double)stddev * z);
  }
}

/// out[k] uniform in [lo, hi) for the global indices [begin, end): lo + (hi - lo) * u in
/// double, rounded to float and kept below hi (rounding could otherwise reach hi).
inline void fillUniform(const RngStream &s, uint64_t begin, uint64_t end, float lo, float hi,
                        float *out) {
  for (uint64_t i = begin; i < end; ++i) {
    uint32_t w[4];
    mtc_philox_element(s.seed, s.tensorId, i, s.step, w);
    double u = (double)(w[0] >> 8) * (1.0 / 16777216.0);
    float v = (float)((double)lo + ((double)hi - (double)lo) * u);
    if (v >= hi && hi > lo)
      v = nextafterf(hi, lo);
    out[i - begin] = v;
  }
}

/// mask[k] = 1 if dropout keeps global element begin + k (probability keepProb), else 0.
inline void fillDropoutMask(const RngStream &s, uint64_t begin, uint64_t end, float keepProb,
                            uint8_t *mask) {
  for (uint64_t i = begin; i < end; ++i)
    mask[i - begin] = (uint8_t)mtc_dropout_keep(s.seed, s.tensorId, i, s.step, keepProb);
}

} // namespace mtc::rt

#endif /* __cplusplus */

#endif /* MTC_RUNTIME_SUPPORT_PHILOX_H */
