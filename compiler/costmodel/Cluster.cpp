//===- Cluster.cpp - cluster descriptions for the cost model --------------===//

#include "compiler/costmodel/Cluster.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace mtc::costmodel;
namespace json = llvm::json;

namespace {

/// The presets' text, embedded at build time (ClusterPresets.inc, from clusters/*.json).
struct Preset {
  llvm::StringLiteral name;
  llvm::StringLiteral text;
};
constexpr Preset kPresets[] = {
#include "compiler/costmodel/ClusterPresets.inc"
};

/// "1e+18", "0.1", "-1": a number as short as printf's %g writes it.
std::string shortest(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Reads one JSON object, naming every field it complains about by its dotted path, and
/// refusing keys it does not know (a misspelt key must not silently fall back to nothing).
class Reader {
public:
  Reader(const json::Object &object, std::string path, llvm::StringRef where,
         std::initializer_list<llvm::StringRef> keys)
      : object(object), path(std::move(path)), where(where) {
    for (const auto &[key, value] : object)
      if (!llvm::is_contained(keys, key.str()))
        fail(field(key), "unknown key (expected one of " + llvm::join(keys, ", ") + ")");
  }

  std::string field(llvm::StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  const json::Value *require(llvm::StringRef key) {
    const json::Value *value = object.get(key);
    if (!value)
      fail(field(key), "missing");
    return value;
  }

  std::string string(llvm::StringRef key, bool required = true) {
    const json::Value *value = required ? require(key) : object.get(key);
    if (!value)
      return "";
    if (std::optional<llvm::StringRef> s = value->getAsString())
      return s->str();
    fail(field(key), "expected a string");
    return "";
  }

  /// A number in [low, high] (`openLow`: above low), with `unit` for messages.
  double number(llvm::StringRef key, double low, double high, llvm::StringRef unit,
                bool openLow = true) {
    const json::Value *value = require(key);
    return value ? checkNumber(*value, field(key), low, high, unit, openLow) : 0;
  }

  double checkNumber(const json::Value &value, const std::string &at, double low, double high,
                     llvm::StringRef unit, bool openLow) {
    std::optional<double> n = value.getAsNumber();
    if (!n) {
      fail(at, "expected a number");
      return 0;
    }
    if (!std::isfinite(*n) || (openLow ? *n <= low : *n < low) || *n > high)
      fail(at, llvm::formatv("{0} {1} is out of range {2}{3}, {4}]", shortest(*n), unit,
                             openLow ? "(" : "[", shortest(low), shortest(high))
                   .str());
    return *n;
  }

  int64_t integer(llvm::StringRef key, int64_t low, int64_t high) {
    const json::Value *value = require(key);
    if (!value)
      return 0;
    std::optional<int64_t> n = value->getAsInteger();
    if (!n) {
      fail(field(key), "expected an integer");
      return 0;
    }
    if (*n < low || *n > high)
      fail(field(key), llvm::formatv("{0} is out of range [{1}, {2}]", *n, low, high).str());
    return *n;
  }

  const json::Object *subObject(llvm::StringRef key) {
    const json::Value *value = require(key);
    if (!value)
      return nullptr;
    if (const json::Object *o = value->getAsObject())
      return o;
    fail(field(key), "expected an object");
    return nullptr;
  }

  const json::Array *array(llvm::StringRef key) {
    const json::Value *value = require(key);
    if (!value)
      return nullptr;
    if (const json::Array *a = value->getAsArray())
      return a;
    fail(field(key), "expected an array");
    return nullptr;
  }

  /// The first error, if any.
  void fail(const std::string &at, const std::string &message) {
    if (error.empty())
      error = (where + ": " + at + ": " + message).str();
  }

  const json::Object &object;
  std::string path;
  llvm::StringRef where;
  std::string error;
};

// The ranges: generous enough for any machine of the next decade, tight enough to catch
// a unit mistake (a bandwidth in Gb/s where bytes per second belong, a latency in
// microseconds where seconds belong).
constexpr double kMaxFlops = 1e18;     // FLOP/s of one device
constexpr double kMaxBandwidth = 1e14; // bytes per second
constexpr double kMaxLatency = 0.1;    // seconds
constexpr double kMaxMessageTime = 10; // seconds: a measured message of any size
constexpr int64_t kMaxMemory = int64_t(1) << 50;
constexpr int64_t kMaxDevicesPerNode = 4096;

Link readLink(Reader &parent, llvm::StringRef key) {
  Link link;
  const json::Object *o = parent.subObject(key);
  if (!o)
    return link;
  Reader r(*o, parent.field(key), parent.where, {"bandwidth", "latency", "message_times"});
  link.bandwidth = r.number("bandwidth", 0, kMaxBandwidth, "bytes/s");
  link.latency = r.number("latency", 0, kMaxLatency, "s", /*openLow=*/false);
  if (const json::Value *times = o->get("message_times")) {
    const json::Array *points = times->getAsArray();
    if (!points || points->empty())
      r.fail(r.field("message_times"), "expected a non-empty array");
    for (auto [i, point] : llvm::enumerate(points ? *points : json::Array())) {
      std::string at = llvm::formatv("{0}[{1}]", r.field("message_times"), i).str();
      const json::Object *po = point.getAsObject();
      if (!po) {
        r.fail(at, "expected an object {\"bytes\": ..., \"seconds\": ...}");
        break;
      }
      Reader p(*po, at, parent.where, {"bytes", "seconds"});
      MessagePoint m{p.number("bytes", 0, 1e15, "bytes"),
                     p.number("seconds", 0, kMaxMessageTime, "s")};
      if (p.error.empty() && !link.messageTimes.empty() &&
          m.bytes <= link.messageTimes.back().bytes)
        p.fail(at + ".bytes", "points must be in increasing bytes");
      if (!p.error.empty() && r.error.empty())
        r.error = p.error;
      link.messageTimes.push_back(m);
    }
  }
  if (parent.error.empty())
    parent.error = r.error;
  return link;
}

} // namespace

double Link::messageTime(double bytes) const {
  if (messageTimes.empty())
    return latency + bytes / bandwidth;
  if (bytes <= messageTimes.front().bytes)
    return messageTimes.front().seconds;
  if (bytes >= messageTimes.back().bytes)
    return messageTimes.back().seconds + (bytes - messageTimes.back().bytes) / bandwidth;
  auto above =
      llvm::find_if(messageTimes, [&](const MessagePoint &p) { return p.bytes > bytes; });
  const MessagePoint &hi = *above, &lo = *(above - 1);
  double t = std::log(bytes / lo.bytes) / std::log(hi.bytes / lo.bytes);
  return std::exp(std::log(lo.seconds) + t * (std::log(hi.seconds) - std::log(lo.seconds)));
}

double Cluster::gemmEfficiencyAt(double flops) const {
  if (gemmEfficiency.empty())
    return 1;
  if (flops <= gemmEfficiency.front().flops)
    return gemmEfficiency.front().efficiency;
  if (flops >= gemmEfficiency.back().flops)
    return gemmEfficiency.back().efficiency;
  auto above = llvm::find_if(gemmEfficiency, [&](const GemmPoint &p) { return p.flops > flops; });
  const GemmPoint &hi = *above, &lo = *(above - 1);
  double t = std::log(flops / lo.flops) / std::log(hi.flops / lo.flops);
  return lo.efficiency + t * (hi.efficiency - lo.efficiency);
}

json::Value Cluster::toJSON() const {
  json::Object peaks;
  for (const auto &[dtype, flops] : peakFlops)
    peaks[dtype] = flops;
  json::Array curve;
  for (const GemmPoint &p : gemmEfficiency)
    curve.push_back(json::Object{{"flops", p.flops}, {"efficiency", p.efficiency}});
  auto link = [](const Link &l) {
    json::Object o{{"bandwidth", l.bandwidth}, {"latency", l.latency}};
    if (!l.messageTimes.empty()) {
      json::Array times;
      for (const MessagePoint &p : l.messageTimes)
        times.push_back(json::Object{{"bytes", p.bytes}, {"seconds", p.seconds}});
      o["message_times"] = std::move(times);
    }
    return o;
  };
  return json::Object{{"format", kClusterFormat},
                      {"version", kClusterVersion},
                      {"name", name},
                      {"description", description},
                      {"kind", kind},
                      {"devices_per_node", devicesPerNode},
                      {"device", json::Object{{"name", deviceName},
                                              {"memory_bytes", memoryBytes},
                                              {"peak_flops", std::move(peaks)},
                                              {"gemm_efficiency", std::move(curve)},
                                              {"memory_bandwidth", memoryBandwidth},
                                              {"kernel_overhead", kernelOverhead}}},
                      {"intra_node", link(intraNode)},
                      {"inter_node", link(interNode)}};
}

llvm::Expected<Cluster> mtc::costmodel::parseCluster(llvm::StringRef text, llvm::StringRef where) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return llvm::createStringError("%s: not JSON: %s", where.str().c_str(),
                                   llvm::toString(parsed.takeError()).c_str());
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return llvm::createStringError("%s: expected a JSON object", where.str().c_str());
  Cluster c;
  Reader r(*root, "", where,
           {"format", "version", "name", "description", "kind", "devices_per_node", "device",
            "intra_node", "inter_node"});
  if (std::string format = r.string("format"); r.error.empty() && format != kClusterFormat)
    r.fail("format",
           "'" + format + "' is not a cluster file (expected '" + kClusterFormat.str() + "')");
  if (int64_t version = r.integer("version", 0, INT32_MAX);
      r.error.empty() && version != kClusterVersion)
    r.fail("version", llvm::formatv("version {0} is not supported (this mtc reads version {1})",
                                    version, kClusterVersion)
                          .str());
  c.name = r.string("name");
  c.description = r.string("description", /*required=*/false);
  c.kind = r.string("kind");
  if (r.error.empty() && c.kind != "gpu" && c.kind != "cpu")
    r.fail("kind", "'" + c.kind + "' (expected gpu or cpu)");
  c.devicesPerNode = r.integer("devices_per_node", 1, kMaxDevicesPerNode);
  if (const json::Object *device = r.subObject("device"); device && r.error.empty()) {
    Reader d(*device, "device", where,
             {"name", "memory_bytes", "peak_flops", "gemm_efficiency", "memory_bandwidth",
              "kernel_overhead"});
    c.deviceName = d.string("name");
    c.memoryBytes = d.integer("memory_bytes", 1, kMaxMemory);
    if (const json::Object *peaks = d.subObject("peak_flops")) {
      static constexpr llvm::StringLiteral kTypes[] = {"f64", "f32", "tf32", "bf16", "f16", "fp8"};
      for (const auto &[dtype, value] : *peaks) {
        std::string at = d.field("peak_flops") + "." + dtype.str();
        if (!llvm::is_contained(kTypes, dtype.str()))
          d.fail(at, "unknown element type (expected one of f64, f32, tf32, bf16, f16, fp8)");
        else
          c.peakFlops[dtype.str()] = d.checkNumber(value, at, 0, kMaxFlops, "FLOP/s", true);
      }
      if (!c.peakFlops.count("f32"))
        d.fail(d.field("peak_flops") + ".f32", "missing (every cluster needs the f32 peak)");
    }
    if (const json::Array *curve = d.array("gemm_efficiency")) {
      if (curve->empty())
        d.fail("device.gemm_efficiency", "needs at least one point");
      for (auto [i, point] : llvm::enumerate(*curve)) {
        std::string at = llvm::formatv("device.gemm_efficiency[{0}]", i).str();
        const json::Object *o = point.getAsObject();
        if (!o) {
          d.fail(at, "expected an object {\"flops\": ..., \"efficiency\": ...}");
          break;
        }
        Reader p(*o, at, where, {"flops", "efficiency"});
        GemmPoint g{p.number("flops", 0, 1e30, "FLOPs"),
                    p.number("efficiency", 0, 1, "(fraction of the peak)")};
        if (p.error.empty() && !c.gemmEfficiency.empty() &&
            g.flops <= c.gemmEfficiency.back().flops)
          p.fail(at + ".flops", "points must be in increasing flops");
        if (!p.error.empty() && d.error.empty())
          d.error = p.error;
        c.gemmEfficiency.push_back(g);
      }
    }
    c.memoryBandwidth = d.number("memory_bandwidth", 0, kMaxBandwidth, "bytes/s");
    c.kernelOverhead = d.number("kernel_overhead", 0, kMaxLatency, "s", /*openLow=*/false);
    if (r.error.empty())
      r.error = d.error;
  }
  if (r.error.empty())
    c.intraNode = readLink(r, "intra_node");
  if (r.error.empty())
    c.interNode = readLink(r, "inter_node");
  if (!r.error.empty())
    return llvm::createStringError(r.error);
  return c;
}

std::vector<llvm::StringRef> mtc::costmodel::clusterPresetNames() {
  std::vector<llvm::StringRef> names;
  for (const Preset &preset : kPresets)
    names.push_back(preset.name);
  return names;
}

llvm::Expected<Cluster> mtc::costmodel::loadCluster(llvm::StringRef nameOrPath) {
  if (!nameOrPath.contains('/') && !nameOrPath.ends_with(".json")) {
    for (const Preset &preset : kPresets)
      if (preset.name == nameOrPath)
        return parseCluster(preset.text, ("preset " + nameOrPath).str());
    return llvm::createStringError(
        "unknown cluster preset '%s' (presets: %s; or give a cluster file's path)",
        nameOrPath.str().c_str(), llvm::join(clusterPresetNames(), ", ").c_str());
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file = llvm::MemoryBuffer::getFile(nameOrPath);
  if (!file)
    return llvm::createStringError(file.getError(), "cannot read cluster file '%s': %s",
                                   nameOrPath.str().c_str(), file.getError().message().c_str());
  return parseCluster((*file)->getBuffer(), nameOrPath);
}

std::string mtc::costmodel::peakFlopsKey(llvm::StringRef precision) {
  if (precision == "fp32" || precision == "fp16" || precision == "fp64")
    return "f" + precision.drop_front(2).str();
  return precision.str();
}
