/* Philox.h compiled as strict C99: the same functions the C++ tests use, with C linkage. */
#include "runtime/support/Philox.h"

void mtc_test_philox_c99(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
float mtc_test_uniform_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step);
float mtc_test_normal_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step);
int mtc_test_keep_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step,
                      float keep_prob);
void mtc_test_normal_pair_c99(uint32_t a, uint32_t b, float *z0, float *z1);

void mtc_test_philox_c99(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  mtc_philox4x32_10(ctr, key, out);
}

float mtc_test_uniform_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step) {
  return mtc_philox_uniform(seed, tensor_id, index, step);
}

float mtc_test_normal_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step) {
  return mtc_philox_normal(seed, tensor_id, index, step);
}

int mtc_test_keep_c99(uint64_t seed, uint32_t tensor_id, uint64_t index, uint32_t step,
                      float keep_prob) {
  return mtc_dropout_keep(seed, tensor_id, index, step, keep_prob);
}

void mtc_test_normal_pair_c99(uint32_t a, uint32_t b, float *z0, float *z1) {
  mtc_normal_pair(a, b, z0, z1);
}
