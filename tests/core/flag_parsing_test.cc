#include "quench/core/flag_parsing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

const FlagTable kFlags = {{"--size", true}, {"--fast", false}};

std::map<std::string, std::string> split(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args)
    argv.push_back(arg.data());
  return split_flags(static_cast<int>(argv.size()), argv.data(), kFlags, "USAGE");
}

TEST(FlagParsing, SplitsBothValueSpellingsAndKeepsTheLast) {
  const auto flags = split({"cmd", "--size", "7", "--fast", "--size=9"});
  EXPECT_EQ(flags.size(), 2u);
  EXPECT_EQ(flags.at("--size"), "9");
  EXPECT_EQ(flags.at("--fast"), "");
}

TEST(FlagParsing, SplitRejectsUnknownMissingAndExtraValues) {
  EXPECT_QUENCH_ERROR(split({"cmd", "--big"}), {"unknown argument '--big'", "USAGE"});
  EXPECT_QUENCH_ERROR(split({"cmd", "--size"}), {"--size needs a value", "USAGE"});
  EXPECT_QUENCH_ERROR(split({"cmd", "--fast=1"}), {"--fast takes no value"});
  EXPECT_THROW(split({"cmd", "--big"}), UsageError);
}

TEST(FlagParsing, IntegersMustBeWholeAndAtLeastTheMinimum) {
  EXPECT_EQ(parse_int_flag("--n", "42", 1), 42);
  EXPECT_EQ(parse_int_flag<uint64_t>("--seed", "18446744073709551615", 0), UINT64_MAX);
  EXPECT_QUENCH_ERROR(parse_int_flag("--n", "0", 1), {"--n '0'", "integer >= 1"});
  EXPECT_QUENCH_ERROR(parse_int_flag("--n", "4x", 1), {"--n '4x'", "integer >= 1"});
  EXPECT_QUENCH_ERROR(parse_int_flag("--n", "", 0), {"--n ''", "integer >= 0"});
}

TEST(FlagParsing, BoundedIntegersNameTheirRange) {
  EXPECT_EQ(parse_int_flag("--n", "1024", 0, 1024), 1024);
  EXPECT_QUENCH_ERROR(parse_int_flag("--n", "1025", 0, 1024),
                      {"--n '1025'", "integer in [0, 1024]"});
  EXPECT_QUENCH_ERROR(parse_int_flag("--n", "-1", 0, 1024), {"--n '-1'", "integer in [0, 1024]"});
  EXPECT_QUENCH_ERROR(parse_int_flag("--n", "9999999999", 0, 1024), {"integer in [0, 1024]"});
}

TEST(FlagParsing, AllowedValuesAreListedInTheError) {
  EXPECT_NO_THROW(require_allowed_flag_value("--page-size", "32", 32, {16, 32, 64}));
  EXPECT_QUENCH_ERROR(require_allowed_flag_value("--page-size", "08", 8, {16, 32, 64}),
                      {"--page-size '08' is not supported; allowed: 16, 32, 64"});
  EXPECT_NO_THROW(require_allowed_flag_value("--device", "gpu", {"cpu", "gpu"}));
  EXPECT_QUENCH_ERROR(require_allowed_flag_value("--device", "tpu", {"cpu", "gpu"}),
                      {"--device 'tpu' is not supported; allowed: cpu, gpu"});
}

TEST(FlagParsing, ParserErrorsBecomeUsageErrorsNamingTheFlag) {
  EXPECT_EQ(parse_flag_value("--x", [] { return 3; }), 3);
  try {
    parse_flag_value("--layout", []() -> int { fail("unknown KV layout 'Q'"); });
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--layout: unknown KV layout 'Q'");
  }
  // A usage error from inside passes through without a second prefix.
  try {
    parse_flag_value("--a", [] { return parse_int_flag("--b", "x", 0); });
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--b 'x' must be an integer >= 0");
  }
}

}  // namespace
}  // namespace quench
