// Structured output's enforced string formats: each admits its valid values and refuses near
// misses (RFC 3339 dates by month, times with their offset, uuids, dotted quads, plain email
// addresses); on a schema the format is enforced unless a pattern stands beside it, and other
// format names stay annotations.
#include "quench/engine/structured_output/string_formats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "quench/core/error.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/string_pattern.h"

namespace quench {
namespace {

using nlohmann::json;

struct FormatCase {
  const char* format;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

TEST(StringFormats, AdmitValidValuesAndRefuseNearMisses) {
  const std::vector<FormatCase> cases = {
      {"date",
       {"2024-02-29", "1999-12-31", "0001-01-01", "2023-04-30"},
       {"2024-02-30", "2024-13-01", "2024-04-31", "24-01-01", "2024-1-01", "2024-00-10"}},
      {"time",
       {"23:59:60Z", "00:00:00.123+05:30", "12:30:00z", "07:08:09-23:59"},
       {"24:00:00Z", "12:00:00", "12:60:00Z", "12:00:00.Z", "12:00:00+24:00"}},
      {"date-time",
       {"2024-01-01T12:00:00Z", "2024-01-01t12:00:00.5-01:00"},
       {"2024-01-01 12:00:00Z", "2024-01-01T12:00:00", "2024-02-31T00:00:00Z"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"}},
      {"ipv4",
       {"255.255.255.255", "0.0.0.0", "192.168.1.10"},
       {"256.1.1.1", "01.1.1.1", "1.1.1", "1.1.1.1.1"}},
      {"email", {"a.b+c@example.co.uk", "x@y.io"}, {"a b@x.com", "a@b", "@x.com", "a@@b.com"}},
  };
  for (const FormatCase& c : cases) {
    const std::string pattern = string_format_pattern(c.format);
    ASSERT_FALSE(pattern.empty()) << c.format;
    const auto compiled = StringPattern::compile(pattern, 0, -1);
    for (const char* v : c.valid)
      EXPECT_TRUE(compiled->matches(v)) << c.format << ": " << v;
    for (const char* v : c.invalid)
      EXPECT_FALSE(compiled->matches(v)) << c.format << ": " << v;
  }
  EXPECT_EQ(string_format_pattern("uri"), "");
}

bool admits(const json& property, const std::string& value) {
  return testing_support::admits_whole(*testing_support::one_property_object("s", property),
                                       json{{"s", value}}.dump());
}

TEST(StringFormats, EnforcedOnSchemasUnlessAPatternStandsBeside) {
  EXPECT_TRUE(admits({{"type", "string"}, {"format", "date"}}, "2024-05-06"));
  EXPECT_FALSE(admits({{"type", "string"}, {"format", "date"}}, "May 6"));
  // Optional[date] and a format on an untyped schema.
  EXPECT_TRUE(admits({{"anyOf", {{{"type", "string"}, {"format", "date"}}, {{"type", "null"}}}}},
                     "2024-05-06"));
  EXPECT_FALSE(admits({{"format", "uuid"}}, "not-a-uuid"));
  // A pattern wins; other formats are annotations.
  EXPECT_TRUE(admits({{"type", "string"}, {"format", "date"}, {"pattern", "^May"}}, "May 6"));
  EXPECT_TRUE(admits({{"type", "string"}, {"format", "uri"}}, "anything at all"));
  // An enforced format is a constraint: beside a $ref it is refused (never silently dropped);
  // another format there stays an annotation.
  const json defs = {{"D", {{"type", "string"}}}};
  for (const auto& [format, refused] :
       std::vector<std::pair<std::string, bool>>{{"date", true}, {"uri", false}}) {
    const json schema = {{"type", "object"},
                         {"$defs", defs},
                         {"properties", {{"d", {{"$ref", "#/$defs/D"}, {"format", format}}}}}};
    if (refused) {
      EXPECT_THROW(JsonSchema::compile(schema), Error) << format;
    } else {
      EXPECT_NO_THROW(JsonSchema::compile(schema)) << format;
    }
  }
  // Length bounds that no value of the format meets are an error naming the format.
  try {
    JsonSchema::compile(
        json{{"type", "object"},
             {"properties", {{"d", {{"type", "string"}, {"format", "date"}, {"maxLength", 8}}}}}});
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'format' \"date\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace quench
