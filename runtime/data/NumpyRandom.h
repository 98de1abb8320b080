//===- NumpyRandom.h - numpy's legacy RandomState shuffle -------*- C++ -*-===//
//
// Megatron shuffles its document and sample indices with numpy's legacy
// `numpy.random.RandomState(seed).shuffle`; reproducing its sample order needs the same draws:
//
//   - RandomState(seed) for an integer seed in [0, 2^32) is MT19937 seeded by init_genrand,
//     which is what std::mt19937(seed) does;
//   - shuffle(x) of a 1-D array walks i from n - 1 down to 1 and swaps x[i] with
//     x[random_interval(i)];
//   - random_interval(max) draws values masked to the smallest all-ones mask >= max and
//     rejects those above max, with one 32-bit draw each when max < 2^32, else 64-bit draws
//     made of two 32-bit draws, the first the high word.
//
// The element type does not matter: numpy swaps bytes, the draws depend only on the length.
// Checked against numpy itself (test/unittests/runtime/data/NumpyRandomTest.cpp and the
// Python reference of test/tools/mtc-data).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_NUMPYRANDOM_H
#define MTC_RUNTIME_DATA_NUMPYRANDOM_H

#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace mtc::rt {

class NumpyRandomState {
public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  /// A uniform integer in [0, max] (numpy's random_interval).
  uint64_t interval(uint64_t max) {
    if (max == 0)
      return 0;
    uint64_t mask = max;
    for (int shift = 1; shift <= 32; shift *= 2)
      mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xffffffffu) {
      do
        value = mt_() & mask;
      while (value > max);
    } else {
      do {
        uint64_t high = mt_();
        value = ((high << 32) | mt_()) & mask;
      } while (value > max);
    }
    return value;
  }

  /// Shuffles `values` in place as RandomState.shuffle does.
  template <class T> void shuffle(std::span<T> values) {
    for (size_t i = values.size() > 0 ? values.size() - 1 : 0; i > 0; --i)
      std::swap(values[i], values[size_t(interval(i))]);
  }

private:
  std::mt19937 mt_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_NUMPYRANDOM_H
