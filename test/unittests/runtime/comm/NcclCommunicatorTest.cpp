//===- NcclCommunicatorTest.cpp - NCCL backend: builds, fails cleanly without a GPU -===//
//
// With a GPU this runs a one-rank all-reduce on device memory; without one it checks that
// creation returns an Error instead of crashing. Multi-rank NCCL is not tested here.
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
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dev), sizeof host), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_TRUE((*comm)->allReduceSum(dev, 4).ok());
  float back[4] = {};
  ASSERT_EQ(cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[3], 4);
  EXPECT_TRUE((*comm)->barrier().ok());
  cudaFree(dev);
}

} // namespace
} // namespace mtc::rt::test

#endif // MTC_HAVE_NCCL
