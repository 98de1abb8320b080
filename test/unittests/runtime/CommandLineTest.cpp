//===- CommandLineTest.cpp - runtime/support/CommandLine ------------------===//

#include "runtime/support/CommandLine.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mtc::rt;

namespace {

/// Parses `args` (after a command name) by a spec with `--value`, a repeatable `--many` and
/// a flag `--flag`.
Expected<CommandLine> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tool");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parseCommandLine(int(argv.size()), argv.data(), 1,
                          {{"--value"}, {"--many"}, {"--flag"}, " (see tool --help)"});
}

std::string errorOf(std::vector<std::string> args) {
  Expected<CommandLine> line = parse(std::move(args));
  return line ? "no error" : line.error().message();
}

TEST(CommandLineTest, ParsesValuesFlagsAndPositionals) {
  Expected<CommandLine> line =
      parse({"plan", "--value", "1", "--many=a", "-", "--many", "b", "--flag"});
  ASSERT_TRUE(line) << line.error().message();
  EXPECT_EQ(line->positional, (std::vector<std::string>{"plan", "-"}));
  EXPECT_EQ(line->value("--value"), "1");
  EXPECT_EQ(line->value("--many"), std::nullopt) << "a repeatable option is in `repeated`";
  EXPECT_EQ(line->repeated.at("--many"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(line->flags.count("--flag"), 1u);
}

TEST(CommandLineTest, NamesEveryMistake) {
  EXPECT_EQ(errorOf({"--other"}), "unknown option '--other' (see tool --help)");
  EXPECT_EQ(errorOf({"-x"}), "unknown option '-x' (see tool --help)");
  EXPECT_EQ(errorOf({"--value", "1", "--value=2"}), "--value given twice");
  EXPECT_EQ(errorOf({"--flag", "--flag"}), "--flag given twice");
  EXPECT_EQ(errorOf({"--flag=yes"}), "--flag takes no value");
  EXPECT_EQ(errorOf({"--value"}), "--value needs a value");
  EXPECT_EQ(errorOf({"--value="}), "--value needs a non-empty value");
  EXPECT_EQ(errorOf({"--many", ""}), "--many needs a non-empty value");
}

TEST(CommandLineTest, ParsesNumbersWhole) {
  EXPECT_EQ(*parseInteger(std::nullopt, "--n", 7, 0, 10), 7);
  EXPECT_EQ(*parseInteger(std::string("10"), "--n", 7, 0, 10), 10);
  for (const char *bad : {"11", "-1", "1x", "", "0x1"}) {
    Expected<int64_t> n = parseInteger(std::string(bad), "--n", 7, 0, 10);
    ASSERT_FALSE(n) << bad;
    EXPECT_EQ(n.error().message(), std::string("--n expects an integer from 0 to 10, got '") +
                                       bad + "'");
  }
  EXPECT_EQ(*parseNumber(std::string("0.5"), "--x", 1), 0.5);
  EXPECT_EQ(*parseNumber(std::nullopt, "--x", 1), 1);
  for (const char *bad : {"inf", "nan", "1e999", "0.5.", "x"}) {
    Expected<double> x = parseNumber(std::string(bad), "--x", 1);
    ASSERT_FALSE(x) << bad;
    EXPECT_EQ(x.error().message(), std::string("--x expects a number, got '") + bad + "'");
  }
}

} // namespace
