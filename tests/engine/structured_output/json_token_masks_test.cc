// JsonTokenMasks over a dense vocabulary: every string of one to three bytes over a small
// alphabet (letters, digits, a space, punctuation, the quote and the backslash) beside the 256
// single bytes. In byte order each token then follows one that shares all but its last bytes
// with it, so the shortcuts that decide a token without walking it (a uniform run's steps, a
// decision carried over from the token before) meet every case of where the shared bytes end:
// before, at and after the byte that decided the token before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/byte_level_tokenizer_json.h"
#include "harness/structured_output_checks.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {
namespace {

// Every string of one to three bytes over `alphabet`, and the 256 single bytes where
// `with_every_byte` (without them the first token in byte order is one the prefixes below decide,
// not a control byte that is always walked).
std::set<std::string> dense_vocabulary(const std::string& alphabet, bool with_every_byte) {
  std::set<std::string> tokens;
  for (int b = 0; with_every_byte && b < 256; ++b)
    tokens.insert(std::string(1, static_cast<char>(b)));
  for (char a : alphabet) {
    tokens.insert(std::string{a});
    for (char b : alphabet) {
      tokens.insert(std::string{a, b});
      for (char c : alphabet)
        tokens.insert(std::string{a, b, c});
    }
  }
  return tokens;
}

TEST(JsonTokenMasks, DenseVocabularyFollowsThePrefix) {
  // Letters, then digits that loop; one or two letters and the closing quote; a length bound; a
  // union's keys (free once they leave "name" / "meows" / "barks"); a plain string.
  const auto letters_then_digits =
      testing_support::string_property_schema(R"("pattern": "^[a-z]{2}[0-9]+$")");
  const auto one_or_two_letters =
      testing_support::string_property_schema(R"("pattern": "^[a-z]{1,2}$")");
  const auto bounded = testing_support::string_property_schema(R"("maxLength": 2)");
  const auto pets = JsonSchema::compile(nlohmann::json::parse(R"({"type": "object",
      "properties": {"pet": {"anyOf": [
          {"type": "object", "properties": {"name": {"type": "string"}, "meows": {"type": "boolean"}}},
          {"type": "object", "properties": {"name": {"type": "string"}, "barks": {"type": "integer"}}}]}}})"));
  const auto plain = testing_support::string_property_schema(R"("minLength": 0)");
  const std::vector<std::pair<const JsonSchema*, std::string>> cases = {
      {letters_then_digits.get(), "{\"s\": \""},
      {letters_then_digits.get(), "{\"s\": \"a"},
      {letters_then_digits.get(), "{\"s\": \"ab"},
      {letters_then_digits.get(), "{\"s\": \"ab1"},
      {one_or_two_letters.get(), "{\"s\": \""},
      {one_or_two_letters.get(), "{\"s\": \"b"},
      {bounded.get(), "{\"s\": \""},
      {bounded.get(), "{\"s\": \"a"},
      {pets.get(), "{\"pet\": {\""},
      {pets.get(), "{\"pet\": {\"na"},
      {pets.get(), "{\"pet\": {\"b"},
      {pets.get(), "{\"pet\": {\"a"},
      {plain.get(), "{\"s\": \"a"}};
  for (const bool with_every_byte : {true, false}) {
    const Tokenizer tokenizer = testing_support::byte_level_tokenizer(
        dense_vocabulary("ab19 !\"\\", with_every_byte), "json_token_masks_test");
    JsonTokenMasks masks(tokenizer, {});
    for (const auto& [schema, text] : cases) {
      JsonSchemaPrefix prefix(*schema);
      ASSERT_TRUE(prefix.feed(text)) << text;
      testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, {}, text);
    }
  }
}

}  // namespace
}  // namespace quench
