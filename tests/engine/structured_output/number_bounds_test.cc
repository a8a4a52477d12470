// Structured output's number bounds and multipleOf: exact decimal comparison; may_continue is
// exactly "some number within the bounds, a multiple of multipleOf, starts with this text"
// (checked against every number of up to six characters, over every number prefix of up to
// four, for bounds of each kind and steps with and without a fraction); the recogniser
// admits a bounded number's bytes accordingly and never dead-ends; and a request with bounded
// properties ends on values within them.
#include "quench/engine/structured_output/number_bounds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema_prefix.h"

namespace quench {
namespace {

using nlohmann::json;

Decimal decimal(const char* text) {
  Decimal d;
  EXPECT_TRUE(Decimal::parse(text, d)) << text;
  return d;
}

TEST(Decimal, ParsesAndComparesExactly) {
  EXPECT_EQ(compare(decimal("0.1"), decimal("0.10")), 0);
  EXPECT_EQ(compare(decimal("1e2"), decimal("100")), 0);
  EXPECT_EQ(compare(decimal("-0"), decimal("0")), 0);
  EXPECT_EQ(compare(decimal("-1.5"), decimal("-1.4")), -1);
  EXPECT_EQ(compare(decimal("2.5E-1"), decimal("0.25")), 0);
  EXPECT_EQ(compare(decimal("12"), decimal("9.99")), 1);
  EXPECT_EQ(compare(decimal("-12"), decimal("-9.99")), -1);
  EXPECT_EQ(compare(decimal("0"), decimal("-0.001")), 1);
  // Beyond a double's precision.
  EXPECT_EQ(compare(decimal("0.10000000000000000001"), decimal("0.1")), 1);
  Decimal d;
  for (const char* bad : {"", "-", "1.", ".5", "1e", "01x", "+1"})
    EXPECT_FALSE(Decimal::parse(bad, d)) << bad;
}

// The prefixes of JSON numbers without an exponent over the digits, '-' and '.'.
bool is_number_prefix(const std::string& t) {
  size_t i = t.size() > 0 && t[0] == '-' ? 1 : 0;
  if (i == t.size()) return true;
  if (t[i] == '0') {
    ++i;
  } else if (t[i] >= '1' && t[i] <= '9') {
    while (i < t.size() && t[i] >= '0' && t[i] <= '9')
      ++i;
  } else {
    return false;
  }
  if (i == t.size()) return true;
  if (t[i] != '.') return false;
  for (++i; i < t.size(); ++i)
    if (t[i] < '0' || t[i] > '9') return false;
  return true;
}
bool is_complete(const std::string& t) {
  return is_number_prefix(t) && !t.empty() && t.back() != '-' && t.back() != '.';
}

// Every number prefix (is_number_prefix) of up to `max_len` characters over `alphabet`, each
// after its parent (children[i]: the indices of the one-character extensions of prefixes[i]).
struct PrefixTree {
  std::vector<std::string> prefixes;
  std::vector<std::vector<size_t>> children;
};
PrefixTree number_prefixes(const std::string& alphabet, size_t max_len) {
  PrefixTree tree;
  tree.prefixes = {""};
  tree.children.emplace_back();
  for (size_t i = 0; i < tree.prefixes.size(); ++i) {
    if (tree.prefixes[i].size() == max_len) continue;
    for (char c : alphabet) {
      std::string next = tree.prefixes[i] + c;
      if (!is_number_prefix(next)) continue;
      tree.children[i].push_back(tree.prefixes.size());
      tree.prefixes.push_back(std::move(next));
      tree.children.emplace_back();
    }
  }
  return tree;
}

TEST(NumberBounds, MayContinueIsExact) {
  struct Case {
    const char* schema;
    bool integer_only;
  };
  const PrefixTree tree = number_prefixes("-.012359", 6);
  for (const Case& c :
       {Case{R"({"minimum": 0, "maximum": 100})", false},
        Case{R"({"exclusiveMinimum": 0.5, "maximum": 2.25})", false},
        Case{R"({"minimum": -3, "exclusiveMaximum": -1})", false},
        Case{R"({"minimum": -5, "maximum": 12})", true}, Case{R"({"exclusiveMinimum": 7})", true},
        Case{R"({"maximum": -20})", false}, Case{R"({"minimum": 150, "maximum": 160})", true},
        Case{R"({"minimum": 0.05, "exclusiveMaximum": 0.1})", false},
        Case{R"({"minimum": 3, "maximum": 3})", false},
        Case{R"({"minimum": -2.5, "maximum": 3.5})", true},
        Case{R"({"exclusiveMinimum": -1.5, "exclusiveMaximum": 2})", true},
        // multipleOf, alone and with bounds: 1. may not go on under 2.5 (no multiple in [1, 2)),
        // 0.5 for integers is every integer, 0.3 for integers is 3.
        Case{R"({"multipleOf": 0.25, "minimum": -1, "maximum": 2})", false},
        Case{R"({"multipleOf": 3, "minimum": -10, "maximum": 20})", true},
        Case{R"({"multipleOf": 2.5, "exclusiveMinimum": 0, "maximum": 10})", false},
        Case{R"({"multipleOf": 0.5})", true}, Case{R"({"multipleOf": 0.3, "maximum": 50})", true},
        Case{R"({"multipleOf": 0.1, "minimum": 0.25, "maximum": 0.55})", false},
        Case{R"({"multipleOf": 0.05, "exclusiveMaximum": 0.3, "minimum": -0.1})", false},
        Case{R"({"multipleOf": 1.5e1, "exclusiveMinimum": -31})", true},
        // An exclusive bound on a multiple: the next multiple up (none in (2, 3) after "2.").
        Case{R"({"multipleOf": 2, "exclusiveMinimum": 2, "maximum": 10})", false}}) {
    const auto bounds = NumberBounds::compile(json::parse(c.schema), c.integer_only, "#");
    ASSERT_NE(bounds, nullptr);
    const json limits = json::parse(c.schema);
    auto within = [&](const std::string& text) {
      const double v = std::stod(text);
      if (c.integer_only && text.find('.') != std::string::npos) return false;
      if (limits.contains("minimum") && v < limits["minimum"].get<double>()) return false;
      if (limits.contains("exclusiveMinimum") && v <= limits["exclusiveMinimum"].get<double>())
        return false;
      if (limits.contains("maximum") && v > limits["maximum"].get<double>()) return false;
      if (limits.contains("exclusiveMaximum") && v >= limits["exclusiveMaximum"].get<double>())
        return false;
      if (limits.contains("multipleOf")) {  // in millionths: every text and step here is exact
        const auto scaled = std::llround(v * 1e6);
        const auto step = std::llround(limits["multipleOf"].get<double>() * 1e6);
        if (scaled % step != 0) return false;
      }
      return true;
    };
    // reachable[i]: some complete number within the bounds starts with prefixes[i] (among the
    // tree's: up to 6 characters, enough for every bound here).
    std::vector<char> reachable(tree.prefixes.size(), 0);
    for (size_t i = tree.prefixes.size(); i-- > 1;) {
      const std::string& t = tree.prefixes[i];
      if (c.integer_only && t.find('.') != std::string::npos) continue;
      reachable[i] = is_complete(t) && within(t);
      for (size_t child : tree.children[i])
        reachable[i] = reachable[i] || reachable[child];
    }
    for (size_t i = 1; i < tree.prefixes.size(); ++i) {
      const std::string& prefix = tree.prefixes[i];
      if (prefix.size() > 4 || (c.integer_only && prefix.find('.') != std::string::npos)) continue;
      EXPECT_EQ(bounds->may_continue(prefix, c.integer_only), reachable[i] != 0)
          << c.schema << " after \"" << prefix << "\"";
      if (is_complete(prefix)) {
        EXPECT_EQ(bounds->contains(prefix), within(prefix)) << c.schema << " on " << prefix;
      }
    }
  }
}

void expect_compile_error(const json& schema, const char* fragment) {
  try {
    JsonSchema::compile(schema);
    ADD_FAILURE() << schema.dump() << " compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << schema.dump() << ": " << e.what();
  }
}

json object_with(const json& property) {
  return testing_support::closed_object({{"n", property}}, {"n"});
}

TEST(NumberBounds, SchemasThatAdmitNothingAreRefused) {
  expect_compile_error(object_with({{"type", "integer"}, {"minimum", 2.5}, {"maximum", 2.9}}),
                       "the bounds admit no integer");
  // ... and the narrowest that admit one are not: -2 in [-2.5, -2], 1 in [1, 1].
  EXPECT_NO_THROW(
      JsonSchema::compile(object_with({{"type", "integer"}, {"minimum", -2.5}, {"maximum", -2}})));
  EXPECT_NO_THROW(JsonSchema::compile(object_with({{"minimum", 1}, {"maximum", 1}})));
  expect_compile_error(object_with({{"exclusiveMinimum", 1}, {"maximum", 1}}),
                       "the bounds admit no number");
  expect_compile_error(object_with({{"minimum", 1}, {"exclusiveMinimum", true}}),
                       "draft 4's boolean");
  expect_compile_error(object_with({{"enum", {1, 5}}, {"maximum", 3}}),
                       "the enum value 5 lies outside");
  expect_compile_error(object_with({{"minimum", "0"}}), "'minimum' must be a number");
  expect_compile_error(
      object_with({{"type", "integer"}, {"minimum", 1}, {"maximum", 2}, {"multipleOf", 3}}),
      "the bounds admit no integer that is a multiple of multipleOf");
  // Integer multiples of 0.4 are the even integers: none in [1, 1.9].
  expect_compile_error(
      object_with({{"type", "integer"}, {"minimum", 1}, {"maximum", 1.9}, {"multipleOf", 0.4}}),
      "admit no integer");
  expect_compile_error(object_with({{"minimum", 1}, {"maximum", 2}, {"multipleOf", 2.5}}),
                       "admit no number");
  EXPECT_NO_THROW(
      JsonSchema::compile(object_with({{"minimum", -5}, {"maximum", -5}, {"multipleOf", 2.5}})));
  // Exclusive bounds on multiples: none in (2, 3], none in (-2, 0); -2 in (-4, -1].
  expect_compile_error(object_with({{"exclusiveMinimum", 2}, {"maximum", 3}, {"multipleOf", 2}}),
                       "admit no number");
  expect_compile_error(
      object_with({{"exclusiveMinimum", -2}, {"exclusiveMaximum", 0}, {"multipleOf", 2}}),
      "admit no number");
  EXPECT_NO_THROW(JsonSchema::compile(
      object_with({{"exclusiveMinimum", -4}, {"maximum", -1}, {"multipleOf", 2}})));
  for (const json& bad : {json(0), json(-2), json("2"), json(1e30)})
    expect_compile_error(object_with({{"multipleOf", bad}}), "'multipleOf'");
  expect_compile_error(object_with({{"enum", {4, 5}}, {"multipleOf", 2}}),
                       "the enum value 5 lies outside the schema's bounds or is not a multiple");
}

bool admits(const JsonSchema& schema, const std::string& number) {
  return testing_support::admits_whole(schema, "{\"n\": " + number + "}");
}

TEST(NumberBounds, ThePrefixRefusesAtTheDecidingByte) {
  const auto month =
      JsonSchema::compile(object_with({{"type", "integer"}, {"minimum", 1}, {"maximum", 12}}));
  for (const char* ok : {"1", "9", "10", "12"})
    EXPECT_TRUE(admits(*month, ok)) << ok;
  for (const auto& [text, at] : std::vector<std::pair<std::string, size_t>>{
           {"0", 0}, {"-1", 0}, {"13", 1}, {"1e1", 1}, {"21", 1}}) {
    JsonSchemaPrefix p(*month);
    ASSERT_TRUE(p.feed("{\"n\": ") && p.feed(text.substr(0, at))) << text;
    EXPECT_FALSE(p.feed(text.substr(at, 1))) << text;
  }
  const auto unit = JsonSchema::compile(
      object_with({{"type", "number"}, {"exclusiveMinimum", 0}, {"exclusiveMaximum", 1}}));
  EXPECT_TRUE(admits(*unit, "0.5"));
  EXPECT_TRUE(admits(*unit, "0.001"));
  EXPECT_FALSE(admits(*unit, "0"));  // the number may not end at 0
  EXPECT_FALSE(admits(*unit, "0.0"));
  JsonSchemaPrefix p(*unit);
  EXPECT_TRUE(p.feed("{\"n\": 0.0"));  // 0.0 may still become 0.01
  EXPECT_FALSE(p.feed("}"));
  // Bounds through anyOf (Optional[int] with bounds) and a $ref.
  const auto optional = JsonSchema::compile(
      object_with({{"anyOf", {{{"type", "integer"}, {"minimum", 5}}, {{"type", "null"}}}}}));
  EXPECT_TRUE(admits(*optional, "null"));
  EXPECT_TRUE(admits(*optional, "50"));
  EXPECT_FALSE(admits(*optional, "4"));
}

// From {"n": , random walks over every admitted byte: never a dead end, and every number that
// ends lies within the bounds.
TEST(NumberBounds, RandomWalksNeverDeadEndAndEndWithin) {
  std::mt19937 rng(3);
  for (const json& property :
       {json{{"type", "integer"}, {"minimum", -7}, {"maximum", 130}},
        json{{"type", "number"}, {"exclusiveMinimum", 0.25}, {"exclusiveMaximum", 0.3}},
        json{{"type", "number"}, {"minimum", -1000.5}},
        json{{"type", "integer"}, {"exclusiveMaximum", -99}},
        json{{"type", "number"}, {"multipleOf", 0.75}, {"minimum", -4}, {"maximum", 4}},
        json{{"type", "integer"}, {"multipleOf", 2.5}, {"exclusiveMinimum", 3}}}) {
    const auto schema = JsonSchema::compile(object_with(property));
    const auto bounds = NumberBounds::compile(property, property["type"] == "integer", "#");
    int ended = 0;
    for (int walk = 0; walk < 100; ++walk) {
      JsonSchemaPrefix p(*schema);
      ASSERT_TRUE(p.feed("{\"n\": "));
      std::string number;
      bool closed = false;
      for (int step = 0; step < 40 && !closed; ++step) {
        std::vector<int> admitted;
        for (int b = 0; b < 256; ++b) {
          if (b == ' ' || b == '\t' || b == '\n' || b == '\r') continue;  // no whitespace first
          JsonSchemaPrefix next = p;
          const char byte = static_cast<char>(b);
          if (next.feed(std::string_view(&byte, 1))) admitted.push_back(b);
        }
        ASSERT_FALSE(admitted.empty()) << property.dump() << " dead end after " << number;
        const bool may_close = std::find(admitted.begin(), admitted.end(), '}') != admitted.end();
        const int b = may_close && rng() % 3 == 0 ? '}' : admitted[rng() % admitted.size()];
        const char byte = static_cast<char>(b);
        ASSERT_TRUE(p.feed(std::string_view(&byte, 1)));
        closed = b == '}';
        if (!closed) number += byte;
      }
      if (!closed) continue;
      ASSERT_TRUE(p.complete());
      EXPECT_TRUE(bounds->contains(number)) << property.dump() << " ended on " << number;
      ++ended;
    }
    EXPECT_GE(ended, 50) << property.dump() << ": too few walks ended to check";
  }
}

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_number_bounds_test", name);
}

TEST(NumberBounds, EngineOutputsLieWithinTheBounds) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("engine")));
  const json property = {{"type", "integer"}, {"minimum", 10}, {"maximum", 999}};
  SamplingParams params = testing_support::greedy(128);
  params.json_schema = JsonSchema::compile(object_with(property));
  for (const auto& [text, finish] :
       testing_support::greedy_and_sampled_outputs(engine, params, 9)) {
    ASSERT_EQ(finish, FinishReason::kStop) << json(text).dump();
    const int64_t n = json::parse(text).at("n").get<int64_t>();
    EXPECT_GE(n, 10) << text;
    EXPECT_LE(n, 999) << text;
  }
}

}  // namespace
}  // namespace quench
