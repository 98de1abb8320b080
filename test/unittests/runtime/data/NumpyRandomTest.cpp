//===- NumpyRandomTest.cpp - numpy's legacy RandomState shuffle -----------===//
//
// The expected values are numpy's own (numpy 1.24, Debian's python3-numpy); each test gives
// the Python that prints them.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/NumpyRandom.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

using namespace mtc::rt;

namespace {

template <class T> std::vector<T> shuffled(NumpyRandomState &random, size_t n, T first = 0) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), first);
  random.shuffle(std::span<T>(v));
  return v;
}

// import numpy as np; r = np.random.RandomState(1234); a = np.arange(10); r.shuffle(a)
// b = np.arange(7, dtype=np.int32); r.shuffle(b); print(list(a), list(b))
TEST(NumpyRandomTest, ShuffleThenShuffleAgainWithTheSameState) {
  NumpyRandomState random(1234);
  EXPECT_EQ(shuffled<int64_t>(random, 10), (std::vector<int64_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(shuffled<int32_t>(random, 7), (std::vector<int32_t>{6, 4, 0, 5, 3, 2, 1}));
}

// for s in (0, 4294967295): r = np.random.RandomState(s); a = np.arange(12); r.shuffle(a);
// print(list(a))
TEST(NumpyRandomTest, SeedsAtBothEnds) {
  NumpyRandomState zero(0), top(4294967295u);
  EXPECT_EQ(shuffled<int>(zero, 12), (std::vector<int>{6, 11, 4, 10, 2, 8, 1, 7, 9, 3, 0, 5}));
  EXPECT_EQ(shuffled<int>(top, 12), (std::vector<int>{11, 8, 5, 9, 1, 10, 6, 0, 4, 7, 2, 3}));
}

// Nothing to draw for 0 or 1 element: the state is untouched, as numpy's loop never runs.
TEST(NumpyRandomTest, EmptyAndSingleDrawNothing) {
  NumpyRandomState a(1234), b(1234);
  std::vector<int> none, one{5};
  a.shuffle(std::span<int>(none));
  a.shuffle(std::span<int>(one));
  EXPECT_EQ(one, std::vector<int>{5});
  EXPECT_EQ(shuffled<int64_t>(a, 10), shuffled<int64_t>(b, 10));
}

// The 32-bit masked draws of random_interval, as legacy randint draws them:
// r = np.random.RandomState(42); print([int(r.randint(0, 1001)) for _ in range(5)])
TEST(NumpyRandomTest, IntervalBelow32Bits) {
  NumpyRandomState random(42);
  std::vector<uint64_t> got;
  for (int i = 0; i < 5; ++i)
    got.push_back(random.interval(1000));
  EXPECT_EQ(got, (std::vector<uint64_t>{102, 435, 860, 270, 106}));
}

// Above 2^32 - 1 a draw is two 32-bit draws, the first the high word; legacy randint of
// uint64 draws the same way, without and with rejections (mask 2^33 - 1 over 5e9 + 1 values):
// r = np.random.RandomState(7)
// print([int(r.randint(0, 2**40, dtype=np.uint64)) for _ in range(3)])
// r = np.random.RandomState(7)
// print([int(r.randint(0, 5000000001, dtype=np.uint64)) for _ in range(3)])
TEST(NumpyRandomTest, IntervalAbove32Bits) {
  NumpyRandomState a(7), b(7);
  std::vector<uint64_t> wide, rejected;
  for (int i = 0; i < 3; ++i) {
    wide.push_back(a.interval((uint64_t(1) << 40) - 1));
    rejected.push_back(b.interval(5000000000ull));
  }
  EXPECT_EQ(wide, (std::vector<uint64_t>{752595690692ull, 108744157686ull, 291964244179ull}));
  EXPECT_EQ(rejected, (std::vector<uint64_t>{1322904761ull, 1133316631ull, 372560217ull}));
}

} // namespace
