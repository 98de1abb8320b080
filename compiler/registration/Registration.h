//===- Registration.h - the one place tools register things -----*- C++ -*-===//
//
// `mtc` and `mt-opt` call these and nothing else, so both tools always know the same
// dialects and passes.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_REGISTRATION_REGISTRATION_H
#define MTC_COMPILER_REGISTRATION_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mtc {

/// The project's dialects and the upstream dialects its pipelines produce.
void registerAllDialects(mlir::DialectRegistry &registry);

/// The project's passes and pass pipelines.
void registerAllPasses();

} // namespace mtc

#endif // MTC_COMPILER_REGISTRATION_REGISTRATION_H
