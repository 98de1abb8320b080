//===- mt-opt.cpp - the mtc optimiser driver for lit tests ----------------===//
//
// mlir-opt with the project's dialects and passes registered: parses, verifies, runs
// passes and prints, for round-trip and pass tests.
//
//===----------------------------------------------------------------------===//

#include "compiler/registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mtc::registerAllDialects(registry);
  mtc::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mtc optimiser driver\n", registry));
}
