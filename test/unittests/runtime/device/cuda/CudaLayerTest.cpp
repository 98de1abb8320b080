//===- CudaLayerTest.cpp - Loading the CUDA layer module ------------------===//

#include "runtime/device/cuda/CudaLayer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace mtc::rt;
using namespace mtc::rt::cuda;

namespace {

std::string loadError(const std::string &path) {
  Expected<CudaLayer> layer = CudaLayer::load(path);
  EXPECT_FALSE(layer) << path << " loaded";
  return layer ? std::string() : layer.error().message();
}

std::filesystem::path scratch(const std::string &name) {
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "mtc-cuda-layer";
  std::filesystem::create_directories(dir);
  return dir / name;
}

TEST(CudaLayer, TheBuiltLayerLoadsAndAnswersWithoutAGpu) {
  Expected<CudaLayer> layer = CudaLayer::load(MTC_TEST_CUDA_LAYER);
  ASSERT_TRUE(layer) << layer.error().message();
  const CudaLayerFunctions &cuda = layer->functions();
  EXPECT_EQ(cuda.abiVersion, kCudaLayerAbiVersion);
  // Through the module's own copy of CudaDevice.cpp: on a machine without a GPU the count is
  // the named error; two local ranks never share one GPU either way.
  Expected<int> devices = cuda.visibleDeviceCount();
  if (!devices)
    EXPECT_EQ(devices.error().message().rfind("no CUDA device", 0), 0u)
        << devices.error().message();
  Error shared = cuda.checkDevicesForLocalRanks(2, 1);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.message().find("2 ranks on this host need a GPU each"), std::string::npos)
      << shared.message();
  ASSERT_TRUE(cuda.backend);
  DeviceBackend backend = cuda.backend(CudaJob{});
  EXPECT_TRUE(backend.loadKernels && backend.createTrainer);
}

TEST(CudaLayer, AMissingModuleSaysHowToGetOne) {
  std::string message = loadError(scratch("absent.so").string());
  EXPECT_NE(message.find("absent.so is missing (build the project with the CUDA toolkit"),
            std::string::npos)
      << message;
}

TEST(CudaLayer, ADirectoryIsNotALayer) {
  std::filesystem::path dir = scratch("directory.so");
  std::filesystem::create_directories(dir);
  EXPECT_NE(loadError(dir.string()).find("directory.so is not a file"), std::string::npos);
}

TEST(CudaLayer, AFileThatIsNoSharedObjectIsNamedWithTheLoadersReason) {
  std::filesystem::path file = scratch("text.so");
  std::ofstream(file) << "not a shared object\n";
  std::string message = loadError(file.string());
  EXPECT_NE(message.find("cannot load the CUDA layer " + file.string() + ": "),
            std::string::npos)
      << message;
}

TEST(CudaLayer, ASharedObjectWithoutTheEntryPointIsRefused) {
  std::string message = loadError(MTC_TEST_NOT_A_CUDA_LAYER);
  EXPECT_NE(message.find("is not an mtc CUDA layer (it has no 'mtc_cuda_layer')"),
            std::string::npos)
      << message;
}

TEST(CudaLayer, ALayerOfAnotherBuildIsRefused) {
  std::string message = loadError(MTC_TEST_OTHER_ABI_CUDA_LAYER);
  EXPECT_NE(message.find("is of another build (ABI version 0, this program's " +
                         std::to_string(kCudaLayerAbiVersion) + "): rebuild the project"),
            std::string::npos)
      << message;
}

} // namespace
