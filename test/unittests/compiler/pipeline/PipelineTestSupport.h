//===- PipelineTestSupport.h - example models cut into pipeline chunks -*- C++ -*-===//
//
// The fixture of the interpreter tests of the pipeline passes: an example model with
// more layers than it ships with, given pipeline settings (`mt.parallel`) and run
// through the training pipeline up to the chunk functions.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_COMPILER_PIPELINE_PIPELINETESTSUPPORT_H
#define MTC_TEST_UNITTESTS_COMPILER_PIPELINE_PIPELINETESTSUPPORT_H

#include "compiler/registration/Registration.h"
#include "dialects/mt/IR/MTOps.h"
#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

namespace mtc::pipeline::testing {

/// An example model and its pipeline settings.
struct Case {
  const char *example;
  int layers;
  /// The mt.parallel settings: pp, virtual_stages, pipeline_layers (empty: equal).
  int pp, virtualStages;
  std::vector<int64_t> split;
  /// The schedule (empty: interleaved with virtual stages, else the default).
  std::string schedule = "";
};

inline std::ostream &operator<<(std::ostream &os, const Case &c) {
  os << c.example << " layers=" << c.layers << " pp=" << c.pp << " v=" << c.virtualStages;
  for (int64_t n : c.split)
    os << " " << n;
  if (!c.schedule.empty())
    os << " " << c.schedule;
  return os;
}

class PipelineTest : public ::testing::TestWithParam<Case> {
protected:
  PipelineTest() {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  /// examples/<file> with `layers = 2` replaced by `layers` and `mt.parallel` set from
  /// the case, lowered to mt; null with `errors` on failure.
  mlir::OwningOpRef<mlir::ModuleOp> lower(const Case &c, std::string &errors) {
    std::string path = std::string(MTC_SOURCE_DIR "/examples/") + c.example;
    auto file = llvm::MemoryBuffer::getFile(path);
    if (!file) {
      errors = "cannot read " + path;
      return nullptr;
    }
    std::string text = (*file)->getBuffer().str();
    size_t at = text.find("layers = 2");
    if (at == std::string::npos) {
      errors = "no 'layers = 2' in " + path;
      return nullptr;
    }
    text.replace(at, 10, "layers = " + std::to_string(c.layers));
    llvm::SourceMgr sourceMgr;
    unsigned id = sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, path),
                                               llvm::SMLoc());
    llvm::raw_string_ostream os(errors);
    frontend::Diagnostics diags(sourceMgr, id, os);
    std::unique_ptr<frontend::Module> ast = frontend::parseModule(sourceMgr, id, diags);
    if (!ast || diags.numErrors() != 0)
      return nullptr;
    mlir::OwningOpRef<mlir::ModuleOp> module = frontend::lowerToMT(*ast, context, diags);
    if (!module)
      return nullptr;
    std::string parallel = "#mt.parallel<pp = " + std::to_string(c.pp) +
                           ", virtual_stages = " + std::to_string(c.virtualStages);
    std::string schedule = c.schedule;
    if (schedule.empty() && c.virtualStages > 1)
      schedule = "interleaved";
    if (!schedule.empty())
      parallel += ", schedule = \"" + schedule + "\"";
    if (!c.split.empty()) {
      parallel += ", pipeline_layers = [";
      for (auto [i, layers] : llvm::enumerate(c.split))
        parallel += (i ? ", " : "") + std::to_string(layers);
      parallel += "]";
    }
    mlir::Attribute parallelAttr = mlir::parseAttribute(parallel + ">", &context);
    if (!parallelAttr) {
      errors = "invalid " + parallel;
      return nullptr;
    }
    (*module)->setAttr(mt::MTDialect::kParallelAttrName, parallelAttr);
    return module;
  }

  mlir::MLIRContext context;
};

} // namespace mtc::pipeline::testing

#endif // MTC_TEST_UNITTESTS_COMPILER_PIPELINE_PIPELINETESTSUPPORT_H
