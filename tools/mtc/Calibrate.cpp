//===- Calibrate.cpp - measuring this host for the cost model -------------===//

#include "Calibrate.h"

#include "compiler/costmodel/CollectiveModel.h"
#include "runtime/comm/CollectiveBenchmark.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace mtc;
using Clock = std::chrono::steady_clock;

namespace {

/// The best rate of `run` (which does `work` units per call) over calls filling about
/// `budget` seconds: the best, not the mean, because other processes share the cores.
template <typename Fn> double bestRate(Fn run, double work, double budget = 0.3) {
  double best = 0;
  auto end = Clock::now() + std::chrono::duration<double>(budget);
  do {
    auto start = Clock::now();
    run();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, work / std::max(seconds, 1e-9));
  } while (Clock::now() < end);
  return best;
}

double sgemmRate(int n) {
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n, 0.0f);
  return bestRate(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                    n, 1.0f, c.data(), n);
      },
      2.0 * n * n * n);
}

/// a = b + s c over arrays far larger than the caches: 12 bytes per element.
double triadBandwidth() {
  size_t n = size_t(1) << 23;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  return bestRate(
      [&] {
        for (size_t i = 0; i < n; ++i)
          a[i] = b[i] + 0.5f * c[i];
        // Keeps the stores: nothing reads `a` otherwise.
        asm volatile("" : : "r"(a.data()) : "memory");
      },
      12.0 * static_cast<double>(n), 1.0);
}

/// The link two local ranks see: the runtime's all-reduce of up to 1 MiB over 2 ranks swaps
/// the buffers in one message each way (GlooCommunicator::usesPairExchange), so its mean
/// time is the time of one message of B bytes: the link's message times, from sizes that
/// cover what the plans send (a tensor-parallel activation of the tiny models is 128 KiB, a
/// norm's parameters a few hundred bytes). Between ranks that share the cores every message
/// wakes the receiver's threads, and that, not the bytes, is most of a message's time, so
/// it is measured rather than fitted (docs/cost-model.md, "Validation on this host"). The
/// alpha-beta pair is kept for what lies beyond the points and what reads it: alpha half the
/// smallest all-reduce's median, beta the slope between the medians of the two largest
/// (8 MiB runs Gloo's ring).
std::optional<costmodel::Link> measureLink(llvm::raw_ostream &log) {
  std::vector<size_t> sizes = {8,       256,          size_t(1) << 12, size_t(1) << 14,
                               size_t(1) << 16, size_t(1) << 17, size_t(1) << 18,
                               size_t(1) << 20, size_t(1) << 23};
  mtc::rt::Expected<std::vector<mtc::rt::CollectiveSample>> samples =
      mtc::rt::benchmarkLoopbackAllReduce(sizes, 100);
  if (!samples) {
    log << "Gloo all-reduce: " << samples.error().message() << "\n";
    return std::nullopt;
  }
  costmodel::Link link;
  for (const mtc::rt::CollectiveSample &s : *samples) {
    log << llvm::formatv("Gloo all-reduce of {0,8} bytes between 2 local ranks: median {1,9:F1} "
                         "us, mean {2,9:F1} us\n",
                         s.bytes, s.seconds * 1e6, s.meanSeconds * 1e6);
    // The mean, not the median: a step pays for every message, the ones that waited a
    // scheduler tick for a core included (CollectiveSample::meanSeconds).
    if (static_cast<double>(s.bytes) <= costmodel::kPairExchangeMaxBytes)
      link.messageTimes.push_back({static_cast<double>(s.bytes), s.meanSeconds});
  }
  const auto &small = samples->front();
  const auto &large = (*samples)[samples->size() - 1], &below = (*samples)[samples->size() - 2];
  link.latency = small.seconds / 2;
  double slope = (large.seconds - below.seconds) / static_cast<double>(large.bytes - below.bytes);
  if (slope <= 0)
    return std::nullopt;
  link.bandwidth = 1 / slope;
  return link;
}

} // namespace

costmodel::Cluster mtc::calibrateHost(const costmodel::Cluster &base, llvm::raw_ostream &log) {
  costmodel::Cluster host = base;
  // First, while this process has no threads of its own: the benchmark forks its peer.
  if (std::optional<costmodel::Link> link = measureLink(log)) {
    host.intraNode = host.interNode = *link;
    log << llvm::formatv("link: latency {0:F1} us, bandwidth {1:F2} GB/s\n", link->latency * 1e6,
                         link->bandwidth / 1e9);
  } else {
    log << "the link could not be measured: kept from the host preset\n";
  }
  host.kind = "cpu";
  host.devicesPerNode = std::max<unsigned>(1, std::thread::hardware_concurrency());
  host.memoryBytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  host.deviceName = "one core";
  log << llvm::formatv("cores: {0}, memory: {1} bytes\n", host.devicesPerNode, host.memoryBytes);

  // The runtime's kernels call sgemm from each rank's threads; one core is the device.
  openblas_set_num_threads(1);
  std::vector<std::pair<double, double>> rates; // (flops per call, FLOP/s)
  for (int n : {16, 32, 64, 128, 256, 512, 1024}) {
    double flops = 2.0 * n * n * n;
    rates.push_back({flops, sgemmRate(n)});
    log << llvm::formatv("sgemm {0,4}^3: {1,8:F2} GFLOP/s\n", n, rates.back().second / 1e9);
  }
  // The peak is the best rate measured: a CPU's datasheet peak is rarely reached by sgemm,
  // and the efficiencies are relative to what the BLAS does reach.
  double peak = 0;
  for (auto [flops, rate] : rates)
    peak = std::max(peak, rate);
  host.peakFlops = {{"f32", peak}};
  host.gemmEfficiency.clear();
  for (auto [flops, rate] : rates)
    host.gemmEfficiency.push_back({flops, rate / peak});

  host.memoryBandwidth = triadBandwidth();
  log << llvm::formatv("triad: {0:F2} GB/s\n", host.memoryBandwidth / 1e9);
  log << "not measured (from the host preset): kernel_overhead\n";
  return host;
}
