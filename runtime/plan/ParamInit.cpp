//===- ParamInit.cpp - Initial parameter values from the plan -------------===//

#include "runtime/plan/ParamInit.h"

#include "runtime/plan/Sharding.h"

#include "runtime/support/Philox.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <new>
#include <system_error>
#include <thread>

namespace mtc::rt {

namespace {

/// initializeParam of elements [begin, end) of the unpadded tensor.
void initializeUnpadded(const ParamInfo &param, uint64_t seed, int64_t begin, int64_t end,
                        float *out) {
  const std::vector<double> &args = param.init.args;
  auto fill = [&](float value) { std::fill(out, out + (end - begin), value); };
  RngStream stream{seed, param.tensorId, /*step=*/0};
  auto b = static_cast<uint64_t>(begin), e = static_cast<uint64_t>(end);
  switch (param.init.kind) {
  case InitKind::Zeros:
    fill(0.0f);
    return;
  case InitKind::Ones:
    fill(1.0f);
    return;
  case InitKind::Constant:
    assert(args.size() == 1 && "constant takes one argument");
    fill(args.empty() ? 0.0f : static_cast<float>(args[0]));
    return;
  case InitKind::Normal: {
    assert((args.size() == 1 || args.size() == 2) && "normal takes std[, mean]");
    float stddev = args.empty() ? 0.0f : static_cast<float>(args[0]);
    float mean = args.size() > 1 ? static_cast<float>(args[1]) : 0.0f;
    fillNormal(stream, b, e, mean, stddev, out);
    return;
  }
  case InitKind::Uniform: {
    assert(args.size() == 2 && "uniform takes low, high");
    float lo = args.size() > 0 ? static_cast<float>(args[0]) : 0.0f;
    float hi = args.size() > 1 ? static_cast<float>(args[1]) : lo;
    fillUniform(stream, b, e, lo, hi, out);
    return;
  }
  }
}

/// initializeParam of a parameter with a padded vocabulary: global index g of the padded
/// tensor is (outer o, vocabulary index v, inner r), g = (o * padded + v) * inner + r. Real
/// elements (v < real) take the values of index (o * real + v) * inner + r of the unpadded
/// tensor, which run on consecutively until v reaches `real`; the padded ones are 0.
void initializePadded(const ParamInfo &param, uint64_t seed, int64_t begin, int64_t end,
                      float *out) {
  const ParamInfo::Padding &padding = *param.padding;
  int64_t padded = param.dims[padding.dim].size, real = padding.realSize;
  int64_t inner = 1;
  for (size_t d = padding.dim + 1; d < param.dims.size(); ++d)
    inner *= param.dims[d].size;
  for (int64_t g = begin; g < end;) {
    int64_t r = g % inner, v = (g / inner) % padded, o = g / inner / padded;
    if (v >= real) {
      int64_t length = std::min(end - g, (padded - v) * inner - r);
      std::fill(out + (g - begin), out + (g - begin + length), 0.0f);
      g += length;
      continue;
    }
    int64_t length = std::min(end - g, (real - v) * inner - r);
    int64_t unpadded = (o * real + v) * inner + r;
    initializeUnpadded(param, seed, unpadded, unpadded + length, out + (g - begin));
    g += length;
  }
}

} // namespace

void initializeParam(const ParamInfo &param, uint64_t seed, int64_t begin, int64_t end,
                     float *out) {
  assert(begin >= 0 && begin <= end && end <= param.numElements() && "slice out of range");
  if (begin < 0 || end <= begin || end > param.numElements())
    return;
  if (param.padding)
    initializePadded(param, seed, begin, end, out);
  else
    initializeUnpadded(param, seed, begin, end, out);
}

const HostParams::Tensor *HostParams::find(std::string_view name) const {
  for (const Tensor &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

int64_t HostParams::numElements() const {
  int64_t n = 0;
  for (const Tensor &t : tensors_)
    n += static_cast<int64_t>(t.values.size());
  return n;
}

std::vector<TensorRef> HostParams::tensorRefs() const {
  std::vector<TensorRef> refs;
  refs.reserve(tensors_.size());
  for (const Tensor &t : tensors_)
    refs.push_back(makeTensorRef(t.name, t.shape, t.values));
  return refs;
}

namespace {

/// Initialises every parameter whole (`coordinates` null) or the shard of the rank at
/// `*coordinates`.
Error initializeImpl(const Plan &plan, const std::vector<int64_t> *coordinates,
                                    unsigned threads, std::vector<HostParams::Tensor> &tensors) {
  using Tensor = HostParams::Tensor;
  std::vector<ShardBox> boxes;
  tensors.reserve(plan.params.size());
  for (const ParamInfo &p : plan.params) {
    if (coordinates)
      boxes.push_back(shardBox(plan, p, *coordinates));
    int64_t n = coordinates ? boxes.back().localElements() : p.numElements();
    try {
      tensors.push_back(Tensor{p.name, coordinates ? boxes.back().localShape : p.shape(),
                               std::vector<float>(static_cast<size_t>(n))});
    } catch (const std::bad_alloc &) {
      return makeError("cannot allocate ", static_cast<uint64_t>(n) * sizeof(float),
                       " bytes for parameter '", p.name, "'");
    } catch (const std::length_error &) {
      return makeError("cannot allocate ", n, " floats for parameter '", p.name, "'");
    }
  }

  // Work items of at most kChunk elements, taken in order by every worker: the values do not
  // depend on who computes which chunk.
  constexpr int64_t kChunk = int64_t(1) << 16;
  struct Item {
    size_t param;
    int64_t begin, end;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < plan.params.size(); ++i)
    for (int64_t b = 0, n = static_cast<int64_t>(tensors[i].values.size()); b < n; b += kChunk)
      items.push_back(Item{i, b, std::min(n, b + kChunk)});

  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < items.size();) {
      const Item &it = items[k];
      float *out = tensors[it.param].values.data() + it.begin;
      if (coordinates)
        initializeShard(plan.params[it.param], plan.seed, boxes[it.param], it.begin, it.end, out);
      else
        initializeParam(plan.params[it.param], plan.seed, it.begin, it.end, out);
    }
  };

  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(1, items.size())));
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error &) {
      break; // fewer threads; the calling thread still finishes the work
    }
  }
  work();
  for (std::thread &w : workers)
    w.join();
  return Error::success();
}

} // namespace

Expected<HostParams> HostParams::initialize(const Plan &plan, unsigned threads) {
  HostParams host;
  if (Error err = initializeImpl(plan, nullptr, threads, host.tensors_); !err.ok())
    return err;
  return host;
}

Expected<HostParams> HostParams::initializeShards(const Plan &plan,
                                                  const std::vector<int64_t> &coordinates,
                                                  unsigned threads) {
  HostParams host;
  if (Error err = initializeImpl(plan, &coordinates, threads, host.tensors_); !err.ok())
    return err;
  return host;
}

} // namespace mtc::rt
