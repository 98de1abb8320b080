//===- Cluster.h - cluster descriptions for the cost model ------*- C++ -*-===//
//
// A cluster file (docs/cost-model.md, "Cluster files") describes the machines a plan would
// run on: devices per node, each device's memory, peak FLOP/s per element type, GEMM
// efficiency curve, memory bandwidth and per-kernel overhead, and the bandwidth and latency
// of the links inside a node and between nodes. Presets ship with mtc
// (compiler/costmodel/clusters/*.json); `mtc calibrate` writes one for this host.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_COSTMODEL_CLUSTER_H
#define MTC_COMPILER_COSTMODEL_CLUSTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace mtc::costmodel {

/// One point of a GEMM efficiency curve: a matrix product of `flops` (2 m n k) runs at
/// `efficiency` x the peak.
struct GemmPoint {
  double flops = 0;
  double efficiency = 0;
};

/// One point of a link's measured message times: a message of `bytes` takes `seconds`.
struct MessagePoint {
  double bytes = 0;
  double seconds = 0;
};

/// A link class: alpha (latency, seconds per message) and beta (bytes per second one rank
/// sends in one direction), or, where `mtc calibrate` measured the runtime's own messages,
/// the time of a message by its size (messageTimes, in increasing bytes), which then
/// replaces alpha + bytes / beta.
struct Link {
  double bandwidth = 0;
  double latency = 0;
  std::vector<MessagePoint> messageTimes;

  /// The time of one message of `bytes`: interpolated linearly in log(bytes) and
  /// log(seconds) between the measured points, the first point's time below them, and the
  /// last point's time plus the rest at `bandwidth` above them; alpha + bytes / beta
  /// without points.
  double messageTime(double bytes) const;
};

struct Cluster {
  std::string name;
  std::string description;
  /// "gpu": one rank per device. "cpu": a node's ranks share its cores evenly (the devices
  /// are the cores; mtrun gives each rank cores / ranks threads).
  std::string kind = "gpu";
  int64_t devicesPerNode = 1;
  std::string deviceName;
  int64_t memoryBytes = 0;
  /// Dense peak FLOP/s per element type ("f32", "tf32", "bf16", "f16", "fp8", "f64").
  std::map<std::string, double> peakFlops;
  /// Increasing in flops; efficiency is interpolated linearly in log(flops) between points
  /// and held constant beyond the ends.
  std::vector<GemmPoint> gemmEfficiency;
  /// Bytes per second of the device memory (elementwise kernels are taken to stream).
  double memoryBandwidth = 0;
  /// Seconds each kernel (op) costs beyond its FLOPs and bytes: launch or loop overhead.
  double kernelOverhead = 0;
  Link intraNode, interNode;

  /// The GEMM efficiency for one product of `flops`.
  double gemmEfficiencyAt(double flops) const;

  llvm::json::Value toJSON() const;
};

/// The `peak_flops` key of a training precision as the DSL spells it (docs/dsl.md: fp32,
/// bf16, fp16; cluster files: f32, bf16, f16); other names are returned as they are.
std::string peakFlopsKey(llvm::StringRef precision);

/// The cluster file format's name and version (`format`, `version`).
inline constexpr llvm::StringLiteral kClusterFormat = "mtc-cluster";
inline constexpr int64_t kClusterVersion = 1;

/// Parses and checks a cluster file's text; `where` (the file name) prefixes every error:
/// "a100.json: device.peak_flops.bf16: 3e+21 FLOP/s is out of range (0, 1e+18]".
llvm::Expected<Cluster> parseCluster(llvm::StringRef text, llvm::StringRef where);

/// The names of the presets that ship with mtc.
std::vector<llvm::StringRef> clusterPresetNames();

/// A preset by name, or a cluster file by path (a name with a '/' or ending in .json).
llvm::Expected<Cluster> loadCluster(llvm::StringRef nameOrPath);

} // namespace mtc::costmodel

#endif // MTC_COMPILER_COSTMODEL_CLUSTER_H
