//===- PlanSummary.cpp - a plan described for people ----------------------===//

#include "runtime/plan/PlanSummary.h"

#include "runtime/support/Error.h"

#include <cstdio>

using namespace mtc::rt;

namespace {

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

} // namespace

std::string mtc::rt::describePlan(const Plan &plan) {
  std::string out;
  auto printf = [&out](const char *format, auto... args) {
    int size = std::snprintf(nullptr, 0, format, args...);
    std::string line(static_cast<size_t>(size), '\0');
    std::snprintf(line.data(), line.size() + 1, format, args...);
    out += line;
  };
  printf("plan:        %s (format %d, plan.json sha256 %s)\n", plan.dir.c_str(), plan.version,
              plan.planSha256.c_str());
  printf("model:       %s\n", plan.model.c_str());
  printf("compiler:    %s\n", plan.compiler.c_str());
  printf("seed:        %llu\n", static_cast<unsigned long long>(plan.seed));
  std::string dims;
  for (const Dim &d : plan.dims)
    dims.append(dims.empty() ? "" : " ").append(concat(d.name, '=', d.size));
  printf("dims:        %s\n", dims.c_str());
  if (plan.vocabularyPadded())
    printf("vocabulary:  %s: %lld tokens, padded to %lld for tp (the padded classes masked)\n",
           plan.vocabulary.c_str(), static_cast<long long>(plan.vocabularyRealSize),
           static_cast<long long>(*plan.dimSize(plan.vocabulary)));
  std::string inputs;
  for (const InputInfo &in : plan.inputs)
    inputs.append(inputs.empty() ? "" : ", ")
        .append(concat(in.name, ' ', planDTypeName(in.dtype), formatDims(in.dims)));
  printf("inputs:      %s\n", inputs.c_str());
  if (!plan.mesh.empty()) {
    std::string mesh;
    for (const MeshAxis &a : plan.mesh)
      mesh.append(mesh.empty() ? "" : " x ").append(concat(a.name, '=', a.size));
    if (plan.dataParallelAxis)
      printf("mesh:        %s (%lld ranks; data parallel over axis '%s' with the distributed "
             "optimizer%s)\n",
             mesh.c_str(), static_cast<long long>(plan.meshSize()),
             plan.mesh[*plan.dataParallelAxis].name.c_str(),
             plan.zeroStage == 3   ? ", gradient and parameter shards, ZeRO-3"
             : plan.zeroStage == 2 ? " and gradient shards, ZeRO-2"
                                   : "");
    else
      printf("mesh:        %s (%lld ranks per model copy; data parallel over the rest)\n",
             mesh.c_str(), static_cast<long long>(plan.meshSize()));
  }
  if (plan.pipeline) {
    const PipelinePlan &pipeline = *plan.pipeline;
    std::string layers, counts;
    for (int64_t l : pipeline.chunkLayers)
      layers.append(layers.empty() ? "" : "+").append(concat(l));
    for (const PipelineSchedule &s : pipeline.schedules)
      counts.append(counts.empty() ? "" : ", ").append(concat(s.microBatches));
    printf("pipeline:    %s over %lld stages (%lld chunk%s each; layers per chunk %s); schedules "
           "for %s micro-batches\n",
           pipeline.schedule.c_str(), static_cast<long long>(pipeline.stages),
           static_cast<long long>(pipeline.virtualStages), pipeline.virtualStages == 1 ? "" : "s",
           layers.c_str(), counts.c_str());
  }

  int64_t bytes = 0;
  for (const ParamInfo &p : plan.params)
    bytes += p.numElements() * static_cast<int64_t>(planDTypeSize(p.dtype));
  printf("parameters:  %zu tensors, %lld values (%s)\n", plan.params.size(),
              static_cast<long long>(plan.numParameterElements()),
              humanBytes(double(bytes)).c_str());
  size_t nameWidth = 4;
  for (const ParamInfo &p : plan.params)
    nameWidth = std::max(nameWidth, p.name.size());
  for (const ParamInfo &p : plan.params) {
    std::string line = concat(planDTypeName(p.dtype), formatDims(p.dims), ' ', p.init.describe());
    if (p.weightDecay)
      line.append(" decay");
    if (!p.layout.replicated())
      line.append(concat(" split ", plan.describeLayout(p), " (local ",
                         formatDims(plan.localDims(p)), ")"));
    if (p.optimizerLayout && *p.optimizerLayout != p.layout)
      line.append(concat("; optimizer state split ",
                         plan.describeLayout(p.dims, *p.optimizerLayout), " (local ",
                         formatDims(plan.optimizerLocalDims(p)), ")"));
    printf("  %-*s %s\n", static_cast<int>(nameWidth), p.name.c_str(), line.c_str());
  }
  int64_t stateValues = 0;
  for (const StateInfo &s : plan.states)
    stateValues += s.numElements();
  printf("optimizer:   %zu state tensors, %lld values\n", plan.states.size(),
              static_cast<long long>(stateValues));
  const Predictions &pr = plan.predictions;
  printf("predicted:   %lld parameters; flops/token forward %lld, backward %lld\n",
              static_cast<long long>(pr.parameters),
              static_cast<long long>(pr.forwardFlopsPerToken),
              static_cast<long long>(pr.backwardFlopsPerToken));
  printf("memory:      parameters %s, gradients %s, optimizer state %s, saved activations "
              "%s, total %s\n",
              humanBytes(double(pr.memoryBytes.parameters)).c_str(),
              humanBytes(double(pr.memoryBytes.gradients)).c_str(),
              humanBytes(double(pr.memoryBytes.optimizerState)).c_str(),
              humanBytes(double(pr.memoryBytes.savedActivations)).c_str(),
              humanBytes(double(pr.memoryBytes.total)).c_str());
  if (pr.memoryBytes.peak && pr.memoryBytes.workspace)
    printf("peak memory: %s per rank (the compiled step's temporaries %s)\n",
           humanBytes(double(*pr.memoryBytes.peak)).c_str(),
           humanBytes(double(*pr.memoryBytes.workspace)).c_str());
  if (plan.x86Kernels)
    printf("x86 kernels: %s\n", plan.x86Kernels->file.c_str());
  if (plan.cudaKernels) {
    const CudaKernelsInfo &cuda = *plan.cudaKernels;
    size_t launching = 0;
    for (const CudaFunction &f : cuda.functions)
      launching += f.launches.empty() ? 0 : 1;
    printf("gpu kernels: %zu CUDA kernels in %zu functions (blocks of up to %lld threads); no "
           "executor launches them yet\n",
           cuda.numLaunches(), launching, static_cast<long long>(cuda.blockSize));
    for (const CudaBinary &b : cuda.binaries)
      printf("  %-6s %s%s\n", b.chip.c_str(), b.ptxFile.c_str(),
             b.cubinFile ? concat(", ", *b.cubinFile).c_str()
                         : " (PTX only: no ptxas when compiled; the driver compiles it on load)");
  }
  return out;
}
