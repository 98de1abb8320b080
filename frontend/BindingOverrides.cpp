//===- BindingOverrides.cpp - Command-line values for dims and model arguments -===//

#include "frontend/BindingOverrides.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <limits>

using namespace mtc::frontend;

namespace {

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The bindings an override may name: the dims, then the arguments of each model.
llvm::SmallVector<Binding *> overridableBindings(Module &ast) {
  llvm::SmallVector<Binding *> bindings;
  for (Binding &dim : ast.dims)
    bindings.push_back(&dim);
  for (ModelDecl &model : ast.models)
    for (Binding &arg : model.args)
      bindings.push_back(&arg);
  return bindings;
}

} // namespace

llvm::Expected<BindingOverride> mtc::frontend::parseBindingOverride(llvm::StringRef text) {
  auto [name, value] = text.split('=');
  name = name.trim();
  value = value.trim();
  if (name.empty() || !text.contains('='))
    return makeError("--dim '" + text + "' is not NAME=N (a dimension or model argument and its "
                     "value, e.g. --dim vocab=50257)");
  BindingOverride result;
  result.name = name.str();
  // getAsInteger rejects signs other than '-', fractions, exponents and trailing text.
  if (value.getAsInteger(10, result.value) || result.value < 1)
    return makeError("--dim " + name + ": '" + value + "' is not a positive integer");
  // The frontend evaluates sizes in doubles: beyond 2^53 they would silently round.
  constexpr int64_t kLargest = int64_t(1) << 53;
  if (result.value > kLargest)
    return makeError("--dim " + name + ": " + value + " is larger than 2^53");
  return result;
}

llvm::Error mtc::frontend::applyBindingOverrides(Module &ast,
                                                 llvm::ArrayRef<BindingOverride> overrides) {
  llvm::SmallVector<Binding *> bindings = overridableBindings(ast);
  llvm::SmallVector<std::pair<Binding *, int64_t>> targets;
  llvm::StringSet<> seen;
  for (const BindingOverride &override : overrides) {
    if (!seen.insert(override.name).second)
      return makeError("--dim sets '" + override.name + "' twice");
    auto matching = llvm::make_filter_range(
        bindings, [&](Binding *binding) { return binding->name == override.name; });
    if (matching.empty()) {
      llvm::SmallVector<llvm::StringRef> names;
      for (Binding *binding : bindings)
        names.push_back(binding->name);
      return makeError("--dim names '" + override.name +
                       "', which is neither a dimension of dims {} nor a model argument (the "
                       "model has: " +
                       (names.empty() ? std::string("none") : llvm::join(names, ", ")) + ")");
    }
    for (Binding *binding : matching)
      targets.emplace_back(binding, override.value);
  }
  for (auto [binding, value] : targets) {
    auto number = std::make_unique<Expr>(Expr::Kind::Number);
    number->number = static_cast<double>(value);
    number->isInteger = true;
    number->range = binding->value ? binding->value->range : binding->range;
    binding->value = std::move(number);
  }
  return llvm::Error::success();
}
