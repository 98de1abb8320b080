//===- CublasLtGemm.cpp - Row-major GEMMs on cuBLASLt --------------------===//

#include "runtime/device/cuda/CublasLtGemm.h"

#include "runtime/device/cuda/CudaError.h"
#include "runtime/device/cuda/Stream.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <unordered_map>

namespace mtc::rt::cuda {

uint32_t operandAlignment(std::initializer_list<const void *> pointers) {
  uint32_t alignment = 256;
  for (const void *p : pointers) {
    if (!p)
      continue;
    auto address = reinterpret_cast<uintptr_t>(p);
    while (alignment > 1 && address % alignment != 0)
      alignment /= 2;
  }
  return alignment;
}

size_t GemmCacheKeyHash::operator()(const GemmCacheKey &key) const {
  return GemmDescriptionHash()(key.description) * 31 + key.alignment;
}

namespace {

/// RAII owners of cuBLASLt's descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t handle = nullptr;
  MatmulDesc() = default;
  MatmulDesc(const MatmulDesc &) = delete;
  MatmulDesc &operator=(const MatmulDesc &) = delete;
  ~MatmulDesc() {
    if (handle)
      cublasLtMatmulDescDestroy(handle);
  }
};
struct MatrixLayout {
  cublasLtMatrixLayout_t handle = nullptr;
  MatrixLayout() = default;
  MatrixLayout(const MatrixLayout &) = delete;
  MatrixLayout &operator=(const MatrixLayout &) = delete;
  ~MatrixLayout() {
    if (handle)
      cublasLtMatrixLayoutDestroy(handle);
  }
};
struct MatmulPreference {
  cublasLtMatmulPreference_t handle = nullptr;
  MatmulPreference() = default;
  MatmulPreference(const MatmulPreference &) = delete;
  MatmulPreference &operator=(const MatmulPreference &) = delete;
  ~MatmulPreference() {
    if (handle)
      cublasLtMatmulPreferenceDestroy(handle);
  }
};

/// A product's descriptors and the algorithm the heuristic chose for it.
struct PreparedGemm {
  MatmulDesc desc;
  MatrixLayout a, b, c;
  cublasLtMatmulAlgo_t algo{};
};

cudaDataType_t cudaType(MtcElementType type) {
  switch (type) {
  case MTC_BF16:
    return CUDA_R_16BF;
  case MTC_F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

cublasLtEpilogue_t cublasEpilogue(GemmEpilogue epilogue) {
  switch (epilogue) {
  case GemmEpilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case GemmEpilogue::Gelu:
    return CUBLASLT_EPILOGUE_GELU;
  case GemmEpilogue::BiasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  // cuBLASLt's A is our B and the other way round (GemmDescription.h).
  case GemmEpilogue::BiasGradA:
    return CUBLASLT_EPILOGUE_BGRADB;
  case GemmEpilogue::BiasGradB:
    return CUBLASLT_EPILOGUE_BGRADA;
  case GemmEpilogue::None:
    break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

template <class T>
Error setDescAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                       const T &value, const char *what) {
  return cublasStatus(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value), what);
}

Error makeLayout(MatrixLayout &layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                 int64_t batch, int64_t stride) {
  if (Error e = cublasStatus(
          cublasLtMatrixLayoutCreate(&layout.handle, type, uint64_t(rows), uint64_t(cols), ld),
          "creating a matrix layout");
      !e.ok())
    return e;
  if (batch == 1)
    return Error::success();
  int32_t count = static_cast<int32_t>(batch);
  if (Error e =
          cublasStatus(cublasLtMatrixLayoutSetAttribute(
                           layout.handle, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                       "setting a layout's batch count");
      !e.ok())
    return e;
  return cublasStatus(cublasLtMatrixLayoutSetAttribute(layout.handle,
                                                       CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                       &stride, sizeof stride),
                      "setting a layout's batch stride");
}

} // namespace

struct CublasLtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
  std::unordered_map<GemmCacheKey, std::unique_ptr<PreparedGemm>, GemmCacheKeyHash> cache;
  int64_t hits = 0;

  ~Impl() {
    cache.clear();
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cublasLtDestroy(handle);
  }

  Expected<PreparedGemm *> prepare(const GemmCacheKey &key, const void *vector);
};

Expected<PreparedGemm *> CublasLtGemm::Impl::prepare(const GemmCacheKey &key, const void *vector) {
  if (auto it = cache.find(key); it != cache.end()) {
    ++hits;
    return it->second.get();
  }
  const GemmDescription &d = key.description;
  ColumnMajorGemm cm = toColumnMajor(d);
  auto prepared = std::make_unique<PreparedGemm>();

  cublasComputeType_t compute = d.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (Error e = cublasStatus(cublasLtMatmulDescCreate(&prepared->desc.handle, compute, CUDA_R_32F),
                             "creating a matmul descriptor");
      !e.ok())
    return e;
  cublasOperation_t opA = cm.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = cm.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (Error e = setDescAttribute(prepared->desc.handle, CUBLASLT_MATMUL_DESC_TRANSA, opA,
                                 "setting transa");
      !e.ok())
    return e;
  if (Error e = setDescAttribute(prepared->desc.handle, CUBLASLT_MATMUL_DESC_TRANSB, opB,
                                 "setting transb");
      !e.ok())
    return e;
  cublasLtEpilogue_t epilogue = cublasEpilogue(d.epilogue);
  if (Error e = setDescAttribute(prepared->desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue,
                                 "setting the epilogue");
      !e.ok())
    return e;
  if (vector) {
    // The heuristic reads the vector's alignment; the pointer is set again on every run.
    if (Error e = setDescAttribute(prepared->desc.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector,
                                   "setting the bias vector");
        !e.ok())
      return e;
  }

  cudaDataType_t type = cudaType(d.dtype);
  if (Error e = makeLayout(prepared->a, type, cm.rowsA, cm.colsA, cm.lda, d.batch, cm.strideA);
      !e.ok())
    return e;
  if (Error e = makeLayout(prepared->b, type, cm.rowsB, cm.colsB, cm.ldb, d.batch, cm.strideB);
      !e.ok())
    return e;
  if (Error e = makeLayout(prepared->c, cudaType(d.outputType()), cm.m, cm.n, cm.ldc, d.batch,
                           cm.strideC);
      !e.ok())
    return e;

  MatmulPreference preference;
  if (Error e = cublasStatus(cublasLtMatmulPreferenceCreate(&preference.handle),
                             "creating a matmul preference");
      !e.ok())
    return e;
  uint64_t maxWorkspace = static_cast<uint64_t>(workspaceBytes);
  if (Error e = cublasStatus(cublasLtMatmulPreferenceSetAttribute(
                                 preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                 &maxWorkspace, sizeof maxWorkspace),
                             "setting the workspace size");
      !e.ok())
    return e;
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    uint32_t alignment = key.alignment;
    if (Error e = cublasStatus(cublasLtMatmulPreferenceSetAttribute(preference.handle, attribute,
                                                                    &alignment, sizeof alignment),
                               "setting the operands' alignment");
        !e.ok())
      return e;
  }

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (Error e = cublasStatus(cublasLtMatmulAlgoGetHeuristic(handle, prepared->desc.handle,
                                                            prepared->a.handle, prepared->b.handle,
                                                            prepared->c.handle, prepared->c.handle,
                                                            preference.handle, 1, &result, &found),
                             "asking cuBLASLt's heuristic for an algorithm");
      !e.ok())
    return e;
  if (found == 0)
    return makeError("cuBLASLt has no algorithm for this product");
  prepared->algo = result.algo;
  PreparedGemm *raw = prepared.get();
  cache.emplace(key, std::move(prepared));
  return raw;
}

CublasLtGemm::CublasLtGemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CublasLtGemm::CublasLtGemm(CublasLtGemm &&) noexcept = default;
CublasLtGemm &CublasLtGemm::operator=(CublasLtGemm &&) noexcept = default;
CublasLtGemm::~CublasLtGemm() = default;

Expected<CublasLtGemm> CublasLtGemm::create(const CublasLtGemmOptions &options) {
  if (options.workspaceBytes < 0)
    return makeError("cuBLASLt: workspace of ", options.workspaceBytes, " bytes");
  auto impl = std::make_unique<Impl>();
  if (Error e = cublasStatus(cublasLtCreate(&impl->handle), "creating the cuBLASLt handle");
      !e.ok())
    return e;
  impl->workspaceBytes = options.workspaceBytes;
  if (options.workspaceBytes > 0) {
    if (Error e = cudaStatus(
            cudaMalloc(&impl->workspace, size_t(options.workspaceBytes)),
            concat("allocating the cuBLASLt workspace (", options.workspaceBytes, " bytes)"));
        !e.ok())
      return e;
  }
  return CublasLtGemm(std::move(impl));
}

Error CublasLtGemm::run(const GemmDescription &d, const GemmOperands &operands,
                        const Stream &stream) {
  if (Error e = validateGemm(d); !e.ok())
    return e;
  auto what = [&] { return concat("GEMM ", d.m, "x", d.n, "x", d.k); };
  if (!operands.a || !operands.b || !operands.c)
    return makeError(what(), ": A, B and C must be device pointers (one is null)");
  if (readsBias(d.epilogue) && !operands.bias)
    return makeError(what(), ": the bias epilogue needs a bias vector");
  if (writesBiasGradient(d.epilogue) && !operands.biasGradient)
    return makeError(what(), ": the bias-gradient epilogue needs a vector to write");

  // The bias and the bias gradient are both cuBLASLt's bias pointer.
  const void *vector = readsBias(d.epilogue)            ? operands.bias
                       : writesBiasGradient(d.epilogue) ? operands.biasGradient
                                                        : nullptr;
  GemmCacheKey key{d, operandAlignment({operands.a, operands.b, operands.c, vector})};
  Expected<PreparedGemm *> prepared = impl_->prepare(key, vector);
  if (!prepared)
    return prepared.takeError().withContext(what());
  PreparedGemm &p = **prepared;
  if (vector) {
    if (Error e = setDescAttribute(p.desc.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector,
                                   "setting the bias vector");
        !e.ok())
      return std::move(e).withContext(what());
  }
  // The column-major product's A is our B and its B our A (GemmDescription.h).
  return cublasStatus(cublasLtMatmul(impl_->handle, p.desc.handle, &operands.alpha, operands.b,
                                     p.a.handle, operands.a, p.b.handle, &operands.beta, operands.c,
                                     p.c.handle, operands.c, p.c.handle, &p.algo, impl_->workspace,
                                     size_t(impl_->workspaceBytes), stream.handle()),
                      what());
}

size_t CublasLtGemm::cachedProducts() const { return impl_->cache.size(); }
int64_t CublasLtGemm::cacheHits() const { return impl_->hits; }

} // namespace mtc::rt::cuda
