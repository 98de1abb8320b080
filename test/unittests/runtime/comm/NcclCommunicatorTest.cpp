//===- NcclCommunicatorTest.cpp - NCCL backend: builds, fails cleanly without a GPU -===//
//
// With a GPU this runs one-rank operations on device memory (two in flight at once); without
// one it checks that creation returns an Error instead of crashing. Multi-rank NCCL needs one
// GPU per rank and is not tested here.
//
//===----------------------------------------------------------------------===//

#ifdef MTC_HAVE_NCCL

#include "runtime/comm/NcclCommunicator.h"
#include "CommTestUtil.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace mtc::rt::test {
namespace {

TEST(Nccl, OneRankOrACleanError) {
  TestJob job;
  NcclOptions o;
  o.timeout = 5000ms;
  o.rendezvousTimeout = 2000ms;
  auto comm = NcclCommunicator::create(job.storeFor(0), 0, 1, o);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    ASSERT_FALSE(comm.ok());
    EXPECT_NE(comm.error().message().find("nccl: rank 0 of 1"), std::string::npos)
        << comm.error().message();
    GTEST_SKIP() << "no GPU: " << comm.error().message();
  }
  ASSERT_TRUE(comm.ok()) << comm.error().message();
  float host[4] = {1, 2, 3, 4};
  float *dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dev), 2 * sizeof host), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  // Two operations in flight on the stream, waited for in the other order.
  Work sum = (*comm)->startAllReduce(dev, 4, MTC_F32, MTC_SUM);
  size_t counts[1] = {4};
  Work moved = (*comm)->startAllToAllV(dev, counts, dev + 4, counts, MTC_F32);
  EXPECT_TRUE(moved.wait().ok());
  EXPECT_TRUE(sum.wait().ok());
  EXPECT_TRUE((*comm)->allReduce(dev, 4, MTC_F32, MTC_MAX).ok());
  float back[8] = {};
  ASSERT_EQ(cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[3], 4);
  EXPECT_EQ(back[7], 4);
  EXPECT_FALSE((*comm)->allReduce(dev, 4, MtcElementType(9), MTC_SUM).ok());
  EXPECT_TRUE((*comm)->barrier().ok());
  EXPECT_TRUE((*comm)->failure().empty());
  cudaFree(dev);
}

} // namespace
} // namespace mtc::rt::test

#endif // MTC_HAVE_NCCL
