//===- BindingOverrides.h - Command-line values for dims and model arguments -*- C++ -*-===//
//
// `mtc compile --dim NAME=N`: the size of a dimension of `dims {}` or the value of a model
// argument (`model gpt(layers = 2)`) set from the command line, as Megatron's --vocab-size,
// --seq-length or --num-layers set them; typically the vocabulary a tokenizer fixes. The
// override replaces the binding's expression in the AST before anything is lowered, so the
// dimensions computed from it (head_dim = hidden / heads) follow and every check of the
// frontend applies to the new value; diagnostics about it point at the binding it replaced.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_BINDINGOVERRIDES_H
#define MTC_FRONTEND_BINDINGOVERRIDES_H

#include "frontend/AST.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mtc::frontend {

struct BindingOverride {
  std::string name;
  int64_t value = 0;
};

/// Parses one `NAME=N` (N a positive integer). The error names the text and what is wrong.
llvm::Expected<BindingOverride> parseBindingOverride(llvm::StringRef text);

/// Sets each override's binding in `ast` (a `dims {}` entry or the model's argument of that
/// name) to its value. Fails, changing nothing, when a name is given twice or names neither a
/// dimension nor a model argument (the error lists those the model has).
llvm::Error applyBindingOverrides(Module &ast, llvm::ArrayRef<BindingOverride> overrides);

} // namespace mtc::frontend

#endif // MTC_FRONTEND_BINDINGOVERRIDES_H
