//===- CommandLine.cpp - The options of the runtime's command-line tools --===//

#include "runtime/support/CommandLine.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace mtc::rt {
namespace {

bool contains(const std::vector<std::string_view> &names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

} // namespace

std::optional<std::string> CommandLine::value(std::string_view name) const {
  auto it = values.find(name);
  return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
}

Expected<CommandLine> parseCommandLine(int argc, char **argv, int first,
                                       const CommandLineSpec &spec) {
  CommandLine line;
  for (int i = first; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      line.positional.emplace_back(arg);
      continue;
    }
    std::string_view name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    bool once = contains(spec.values, name), repeatable = contains(spec.repeatable, name),
         flag = contains(spec.flags, name);
    if (!once && !repeatable && !flag)
      return makeError("unknown option '", arg, "'", spec.unknownHint);
    if (line.values.count(name) || line.flags.count(name))
      return makeError(name, " given twice");
    if (flag) {
      if (inlineValue)
        return makeError(name, " takes no value");
      line.flags.emplace(name);
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= argc)
        return makeError(name, " needs a value");
      value = argv[++i];
    }
    if (value.empty())
      return makeError(name, " needs a non-empty value");
    if (repeatable)
      line.repeated[std::string(name)].emplace_back(value);
    else
      line.values[std::string(name)] = std::string(value);
  }
  return line;
}

Expected<int64_t> parseInteger(const std::optional<std::string> &value, std::string_view flag,
                               int64_t fallback, int64_t min, int64_t max) {
  if (!value)
    return fallback;
  int64_t n = 0;
  auto [end, err] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (err != std::errc() || end != value->data() + value->size() || n < min || n > max)
    return makeError(flag, " expects an integer from ", min, " to ", max, ", got '", *value, "'");
  return n;
}

Expected<double> parseNumber(const std::optional<std::string> &value, std::string_view flag,
                             double fallback) {
  if (!value)
    return fallback;
  double x = 0;
  auto [end, err] = std::from_chars(value->data(), value->data() + value->size(), x);
  if (err != std::errc() || end != value->data() + value->size() || !std::isfinite(x))
    return makeError(flag, " expects a number, got '", *value, "'");
  return x;
}

} // namespace mtc::rt
