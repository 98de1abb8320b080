//===- CommandLine.h - The options of the runtime's command-line tools ----*- C++ -*-===//
//
// mtc-data, mtc-hf and `mtrun generate` take GNU-style long options after their command:
// `--name value` or `--name=value` for a value (non-empty; once, or as often as given for a
// repeatable option), `--name` for a flag, and positional arguments. Anything else starting
// with '-' is an unknown option; a lone "-" is positional. Every error names the option.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_COMMANDLINE_H
#define MTC_RUNTIME_SUPPORT_COMMANDLINE_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// What a command takes.
struct CommandLineSpec {
  std::vector<std::string_view> values;     // options with a value, given at most once
  std::vector<std::string_view> repeatable; // options with a value, given any number of times
  std::vector<std::string_view> flags;      // options without a value
  /// Appended to "unknown option '<arg>'": where to look, e.g. " (see mtc-data --help)".
  std::string unknownHint;
};

/// A parsed command line.
struct CommandLine {
  std::vector<std::string> positional;
  std::map<std::string, std::string, std::less<>> values;
  std::map<std::string, std::vector<std::string>, std::less<>> repeated;
  std::set<std::string, std::less<>> flags;

  /// The value of `name`, if given.
  std::optional<std::string> value(std::string_view name) const;
};

/// Parses argv[first, argc) by `spec`.
Expected<CommandLine> parseCommandLine(int argc, char **argv, int first,
                                       const CommandLineSpec &spec);

/// The integer option `flag` (its `value`, whole) in [min, max]; `fallback` when not given.
Expected<int64_t> parseInteger(const std::optional<std::string> &value, std::string_view flag,
                               int64_t fallback, int64_t min, int64_t max);

/// The finite number option `flag` (its `value`, whole); `fallback` when not given.
Expected<double> parseNumber(const std::optional<std::string> &value, std::string_view flag,
                             double fallback);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_COMMANDLINE_H
