//===- ClusterTest.cpp - cluster files: presets, parsing, errors ----------===//

#include "compiler/costmodel/Cluster.h"

#include "gtest/gtest.h"

using namespace mtc::costmodel;

namespace {

/// A valid cluster file, with `extra` top-level keys, `device` keys and `peaks`.
std::string clusterText(const std::string &extra = "", const std::string &device = "",
                        const std::string &peaks = R"("f32": 1e12, "bf16": 4e12)") {
  return R"({"format": "mtc-cluster", "version": 1, "name": "test", "kind": "gpu",
             "devices_per_node": 4, )" +
         extra + R"(
             "device": {"name": "dev", "memory_bytes": 1000, "peak_flops": {)" +
         peaks + R"(},
                        "gemm_efficiency": [{"flops": 1e6, "efficiency": 0.1},
                                            {"flops": 1e10, "efficiency": 0.9}],
                        "memory_bandwidth": 1e11, "kernel_overhead": 1e-6)" +
         device + R"(},
             "intra_node": {"bandwidth": 1e11, "latency": 1e-6},
             "inter_node": {"bandwidth": 1e10, "latency": 1e-5}})";
}

std::string errorOf(const std::string &text) {
  llvm::Expected<Cluster> cluster = parseCluster(text, "c.json");
  if (cluster)
    return "no error";
  return llvm::toString(cluster.takeError());
}

TEST(ClusterTest, ParsesAValidFile) {
  llvm::Expected<Cluster> cluster = parseCluster(clusterText(), "c.json");
  ASSERT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
  EXPECT_EQ(cluster->devicesPerNode, 4);
  EXPECT_EQ(cluster->peakFlops.at("bf16"), 4e12);
  EXPECT_EQ(cluster->interNode.latency, 1e-5);
  // Log-linear between the points, constant outside them.
  EXPECT_DOUBLE_EQ(cluster->gemmEfficiencyAt(1e3), 0.1);
  EXPECT_DOUBLE_EQ(cluster->gemmEfficiencyAt(1e8), 0.5);
  EXPECT_DOUBLE_EQ(cluster->gemmEfficiencyAt(1e12), 0.9);
}

TEST(ClusterTest, RoundTripsThroughJSON) {
  llvm::Expected<Cluster> cluster = parseCluster(clusterText(), "c.json");
  ASSERT_TRUE(static_cast<bool>(cluster));
  std::string text;
  llvm::raw_string_ostream(text) << cluster->toJSON();
  llvm::Expected<Cluster> again = parseCluster(text, "again.json");
  ASSERT_TRUE(static_cast<bool>(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(again->peakFlops, cluster->peakFlops);
  EXPECT_EQ(again->gemmEfficiency.size(), 2u);
}

TEST(ClusterTest, PresetsParse) {
  std::vector<llvm::StringRef> names = clusterPresetNames();
  for (llvm::StringRef name : {"dgx-a100-80gb", "dgx-h100", "host"})
    EXPECT_TRUE(llvm::is_contained(names, name)) << name.str();
  for (llvm::StringRef name : names) {
    llvm::Expected<Cluster> cluster = loadCluster(name);
    ASSERT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
    EXPECT_EQ(cluster->name, name);
  }
  // The datasheet figures the presets cite (docs/cost-model.md).
  llvm::Expected<Cluster> a100 = loadCluster("dgx-a100-80gb");
  ASSERT_TRUE(static_cast<bool>(a100));
  EXPECT_EQ(a100->peakFlops.at("bf16"), 312e12);
  EXPECT_EQ(a100->intraNode.bandwidth, 300e9);
  EXPECT_EQ(a100->interNode.bandwidth, 25e9);
  llvm::Expected<Cluster> h100 = loadCluster("dgx-h100");
  ASSERT_TRUE(static_cast<bool>(h100));
  EXPECT_EQ(h100->peakFlops.at("bf16"), 989.4e12);
  EXPECT_EQ(h100->intraNode.bandwidth, 450e9);
  EXPECT_EQ(h100->interNode.bandwidth, 50e9);
}

TEST(ClusterTest, UnknownPresetListsThePresets) {
  llvm::Expected<Cluster> cluster = loadCluster("dgx-b200");
  ASSERT_FALSE(static_cast<bool>(cluster));
  std::string message = llvm::toString(cluster.takeError());
  EXPECT_NE(message.find("unknown cluster preset 'dgx-b200'"), std::string::npos) << message;
  EXPECT_NE(message.find("dgx-h100"), std::string::npos) << message;
}

// Tests that a link's measured message times parse, interpolate log-log between their
// points (the first point's time below them, the bandwidth above them), survive the round
// trip, and that an empty or unordered list is refused naming the point.
TEST(ClusterTest, MessageTimes) {
  std::string text = clusterText();
  const std::string intraLatency = R"("latency": 1e-6})";
  text.replace(text.find(intraLatency), intraLatency.size(),
               R"("latency": 1e-6, "message_times": [{"bytes": 4, "seconds": 1e-5},
                                                     {"bytes": 4096, "seconds": 1e-3}]})");
  llvm::Expected<Cluster> cluster = parseCluster(text, "c.json");
  ASSERT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
  const Link &link = cluster->intraNode;
  ASSERT_EQ(link.messageTimes.size(), 2u);
  EXPECT_DOUBLE_EQ(link.messageTime(1), 1e-5);
  EXPECT_NEAR(link.messageTime(128), 1e-4, 1e-16); // halfway in log(bytes): 4 * 32 of 4 * 1024
  EXPECT_DOUBLE_EQ(link.messageTime(4096 + 1e11), 1e-3 + 1);
  // Without points: alpha + bytes / beta.
  EXPECT_DOUBLE_EQ(cluster->interNode.messageTime(1e10), 1e-5 + 1);
  std::string again;
  llvm::raw_string_ostream(again) << cluster->toJSON();
  llvm::Expected<Cluster> reparsed = parseCluster(again, "again.json");
  ASSERT_TRUE(static_cast<bool>(reparsed)) << llvm::toString(reparsed.takeError());
  EXPECT_EQ(reparsed->intraNode.messageTimes.size(), 2u);
  EXPECT_TRUE(reparsed->interNode.messageTimes.empty());

  std::string unordered = text;
  unordered.replace(unordered.find(R"("bytes": 4096)"), 13, R"("bytes": 2)");
  EXPECT_EQ(errorOf(unordered),
            "c.json: intra_node.message_times[1].bytes: points must be in increasing bytes");
  std::string empty = clusterText();
  empty.replace(empty.find(intraLatency), intraLatency.size(),
                R"("latency": 1e-6, "message_times": []})");
  EXPECT_EQ(errorOf(empty), "c.json: intra_node.message_times: expected a non-empty array");
  std::string slow = text;
  slow.replace(slow.find(R"("seconds": 1e-3)"), 15, R"("seconds": 60)");
  EXPECT_EQ(errorOf(slow),
            "c.json: intra_node.message_times[1].seconds: 60 s is out of range (0, 10]");
}

TEST(ClusterTest, Errors) {
  EXPECT_NE(errorOf("{").find("c.json: not JSON"), std::string::npos);
  EXPECT_EQ(errorOf("[]"), "c.json: expected a JSON object");
  EXPECT_EQ(errorOf(clusterText(R"("gpus": 8,)")),
            "c.json: gpus: unknown key (expected one of format, version, name, description, "
            "kind, devices_per_node, device, intra_node, inter_node)");
  EXPECT_EQ(errorOf(clusterText("", R"(, "hbm": 1)")),
            "c.json: device.hbm: unknown key (expected one of name, memory_bytes, peak_flops, "
            "gemm_efficiency, memory_bandwidth, kernel_overhead)");
  EXPECT_EQ(errorOf(clusterText("", "", R"("f32": 1e12, "bf16": -1)")),
            "c.json: device.peak_flops.bf16: -1 FLOP/s is out of range (0, 1e+18]");
  EXPECT_EQ(errorOf(clusterText("", "", R"("f32": 1e12, "bf16": 3e21)")),
            "c.json: device.peak_flops.bf16: 3e+21 FLOP/s is out of range (0, 1e+18]");
  EXPECT_EQ(errorOf(clusterText("", "", R"("bf16": 1e12)")),
            "c.json: device.peak_flops.f32: missing (every cluster needs the f32 peak)");
  EXPECT_EQ(errorOf(clusterText("", "", R"("f32": 1e12, "int4": 1e12)")),
            "c.json: device.peak_flops.int4: unknown element type (expected one of f64, f32, "
            "tf32, bf16, f16, fp8)");
  std::string text = clusterText();
  std::string noInter = text.substr(0, text.find(",\n             \"inter_node\"")) + "}";
  EXPECT_EQ(errorOf(noInter), "c.json: inter_node: missing");
  std::string microseconds = text;
  microseconds.replace(microseconds.find("\"latency\": 1e-5"), 15, "\"latency\": 5");
  EXPECT_EQ(errorOf(microseconds), "c.json: inter_node.latency: 5 s is out of range [0, 0.1]");
  std::string decreasing = text;
  decreasing.replace(decreasing.find("1e10"), 4, "1e5");
  EXPECT_EQ(errorOf(decreasing),
            "c.json: device.gemm_efficiency[1].flops: points must be in increasing flops");
  std::string version = text;
  version.replace(version.find("\"version\": 1"), 12, "\"version\": 2");
  EXPECT_EQ(errorOf(version),
            "c.json: version: version 2 is not supported (this mtc reads version 1)");
  std::string kind = text;
  kind.replace(kind.find("\"gpu\""), 5, "\"tpu\"");
  EXPECT_EQ(errorOf(kind), "c.json: kind: 'tpu' (expected gpu or cpu)");
  std::string devices = text;
  devices.replace(devices.find("\"devices_per_node\": 4"), 21, "\"devices_per_node\": 0");
  EXPECT_EQ(errorOf(devices), "c.json: devices_per_node: 0 is out of range [1, 4096]");
}

// Tests that the DSL's precisions name the cluster file's peaks (mtc simulate and the
// layout search both read the peak of a model's precision through it).
TEST(Cluster, PrecisionsNameTheirPeaks) {
  EXPECT_EQ(peakFlopsKey("fp32"), "f32");
  EXPECT_EQ(peakFlopsKey("fp16"), "f16");
  EXPECT_EQ(peakFlopsKey("bf16"), "bf16");
  EXPECT_EQ(peakFlopsKey("tf32"), "tf32");
}

} // namespace
