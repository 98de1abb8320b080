//===- CublasLtGemm.h - Row-major GEMMs on cuBLASLt -------------*- C++ -*-===//
//
// One cuBLASLt handle and workspace per rank, and a cache of prepared products: the first
// call of a GemmDescription (GemmDescription.h: the row-major mapping) creates cuBLASLt's
// descriptors and asks its heuristic for an algorithm; later calls with an equal description
// and operand alignment reuse both, so a step's thousands of GEMMs of a few shapes query the
// heuristic a few times. The key includes the operands' pointer alignment because cuBLASLt
// picks kernels for the alignment it is promised (arena offsets are 256-byte aligned, so
// a plan's GEMMs share one alignment).
//
// fp32 products use CUBLAS_COMPUTE_32F (full fp32, TF32 off) unless the description allows
// TF32; bf16 and f16 accumulate in fp32. Epilogues: bias (a row vector of length n), GELU
// (tanh approximation), both, and the bias gradients (GemmDescription.h). Not thread-safe:
// one instance per thread that issues GEMMs.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUBLASLTGEMM_H
#define MTC_RUNTIME_DEVICE_CUDA_CUBLASLTGEMM_H

#include "runtime/device/cuda/GemmDescription.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <memory>

namespace mtc::rt::cuda {

class Stream;

/// The largest power of two, at most 256, that divides every non-null pointer's address:
/// the alignment cuBLASLt is promised for them.
uint32_t operandAlignment(std::initializer_list<const void *> pointers);

/// A prepared product's cache key: the description and the operands' alignment.
struct GemmCacheKey {
  GemmDescription description;
  uint32_t alignment = 256;
  bool operator==(const GemmCacheKey &) const = default;
};
struct GemmCacheKeyHash {
  size_t operator()(const GemmCacheKey &key) const;
};

/// Device pointers of one product. `bias` is read by the bias epilogues, `biasGradient`
/// written by the bias-gradient ones; each is required by those and ignored otherwise. C is
/// read (beta != 0) and written in place.
struct GemmOperands {
  const void *a = nullptr;
  const void *b = nullptr;
  void *c = nullptr;
  const void *bias = nullptr;
  void *biasGradient = nullptr;
  float alpha = 1.0f;
  float beta = 0.0f;
};

struct CublasLtGemmOptions {
  /// cuBLASLt's workspace (NVIDIA recommends 32 MiB on Hopper; more lets it pick split-K).
  int64_t workspaceBytes = 32ll << 20;
};

class CublasLtGemm {
public:
  /// Creates the handle and allocates the workspace on the current device (the one whose
  /// streams run() is given). A moved-from CublasLtGemm must not be used.
  static Expected<CublasLtGemm> create(const CublasLtGemmOptions &options = {});

  CublasLtGemm(CublasLtGemm &&) noexcept;
  CublasLtGemm &operator=(CublasLtGemm &&) noexcept;
  ~CublasLtGemm();

  /// Enqueues the product on `stream`. Errors: an invalid description (validateGemm), a
  /// missing operand, no algorithm for it, or cuBLASLt's failure.
  Error run(const GemmDescription &description, const GemmOperands &operands, const Stream &stream);

  /// Prepared products held, and how many run() calls found theirs in the cache.
  size_t cachedProducts() const;
  int64_t cacheHits() const;

private:
  struct Impl;
  explicit CublasLtGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUBLASLTGEMM_H
