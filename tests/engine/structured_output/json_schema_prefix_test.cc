// Structured output: the schema-driven prefix recogniser accepts every prefix of the texts a
// schema admits and refuses at the first byte that leaves them: JSON mode (any object: escapes,
// numbers, literals, nesting, whitespace) and each schema keyword (properties, required,
// additionalProperties, items with minItems / maxItems, minLength / maxLength, enum / const,
// anyOf, $ref recursion, integer vs number). The token masks allow exactly the tokens whose bytes
// it accepts, per schema; on the engine a structured request only ever holds a prefix and ends,
// finish "stop", when its text closes.
#include "quench/engine/structured_output/json_schema_prefix.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_token_masks.h"

namespace quench {
namespace {

using nlohmann::json;

std::shared_ptr<const JsonSchema> schema_of(const char* text) {
  return JsonSchema::compile(json::parse(text));
}

using testing_support::string_property_schema;

// Every prefix of `text` is accepted byte by byte; the whole is complete (and is JSON).
void expect_admitted(const JsonSchema& schema, const std::string& text) {
  JsonSchemaPrefix p(schema);
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_FALSE(p.complete()) << text << " complete before byte " << i;
    ASSERT_TRUE(p.feed(text.substr(i, 1))) << text << " refused at byte " << i;
  }
  EXPECT_TRUE(p.complete()) << text;
  EXPECT_TRUE(json::accept(text)) << text;  // the test's texts are JSON
}

using testing_support::expect_refused_at;

// ---- JSON mode: any object ----

TEST(JsonSchemaPrefix, AnyObjectAcceptsValidObjects) {
  const JsonSchema& any = *JsonSchema::any_object();
  for (const std::string& text :
       {std::string("{}"), std::string(" {\"a\": 1}"),
        std::string("{\"a\":[1,-0.5,2e10,3.25E-3,0,true,false,null,\"x\"]}"),
        std::string("{\"k\\\"\\\\\\/\\n\\u00e9\": {\"n\": {\"m\": []}}, \"z\": \"\xc3\xa9\"}"),
        std::string("{\n  \"a\" : [ { } , [ ] ]\n}")}) {
    expect_admitted(any, text);
  }
}

TEST(JsonSchemaPrefix, AnyObjectRefusesAtTheFirstWrongByte) {
  const JsonSchema& any = *JsonSchema::any_object();
  expect_refused_at(any, "[1]", 0);                // the top level is an object
  expect_refused_at(any, "{'a': 1}", 1);           // single quotes
  expect_refused_at(any, "{\"a\" 1}", 5);          // no colon
  expect_refused_at(any, "{\"a\": 01}", 7);        // a leading zero
  expect_refused_at(any, "{\"a\": 1,}", 8);        // a trailing comma
  expect_refused_at(any, "{\"a\": tru }", 9);      // a broken literal
  expect_refused_at(any, "{\"a\": \"\x01\"}", 7);  // a raw control character
  expect_refused_at(any, "{\"a\": \"\\x\"}", 8);   // an unknown escape
  expect_refused_at(any, "{\"a\": 1]", 7);         // the wrong closer
  expect_refused_at(any, "{} ", 2);                // nothing after the object
  expect_refused_at(any, "{\"a\": 1.}", 8);        // a fraction needs digits
  // Whitespace runs are bounded.
  const std::string spaces(JsonSchemaPrefix::kMaxWhitespaceRun + 1, ' ');
  expect_refused_at(any, "{" + spaces, 1 + JsonSchemaPrefix::kMaxWhitespaceRun);
}

TEST(JsonSchemaPrefix, NestingIsBounded) {
  std::string deep = "{\"a\":";
  for (size_t i = 1; i < JsonSchemaPrefix::kMaxDepth; ++i)
    deep += "[";
  expect_refused_at(*JsonSchema::any_object(), deep + "[", deep.size());
}

// ---- schemas ----

constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                 "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["name", "age"],
  "additionalProperties": false})";

TEST(JsonSchemaPrefix, PropertiesRequiredAndNoOthers) {
  const auto person = schema_of(kPerson);
  expect_admitted(*person, R"({"name": "Bo", "age": 42})");
  expect_admitted(*person, R"({ "age" : -1 , "tags": ["a", ""], "name":""})");
  expect_refused_at(*person, R"({"name": "Bo"})", 13);  // age is required
  expect_refused_at(*person, R"({})", 1);               // so are both
  expect_refused_at(*person, R"({"nam": 1})", 5);       // a key that is not listed
  expect_refused_at(*person, R"({"x": 1})", 2);         // nor starts one
  expect_refused_at(*person, R"({"age": 4.5})", 9);     // an integer
  expect_refused_at(*person, R"({"age": 4e5})", 9);
  expect_refused_at(*person, R"({"name": 3})", 9);            // a string
  expect_refused_at(*person, R"({"age": 1, "age": 2})", 12);  // no key twice
  expect_refused_at(*person, R"({"tags": [1]})", 10);         // items are strings
  // Every property present: no further key.
  expect_refused_at(*person, R"({"name": "", "age": 1, "tags": [],)", 33);
}

TEST(JsonSchemaPrefix, AdditionalPropertiesFollowTheirSchema) {
  const auto s = schema_of(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                               "additionalProperties": {"type": "string"}})");
  expect_admitted(*s, R"({"a": 1, "b": "x", "ab": "y", "": ""})");
  expect_refused_at(*s, R"({"b": 1})", 6);
  expect_refused_at(*s, R"({"a": "x"})", 6);
  expect_refused_at(*s, R"({"a": 1, "a": 2})", 11);  // a listed key, twice
  // Without additionalProperties any other key takes any value (JSON Schema's default).
  const auto open = schema_of(R"({"type": "object", "properties": {"a": {"type": "null"}}})");
  expect_admitted(*open, R"({"b": [1, {"c": true}], "a": null})");
  expect_refused_at(*open, R"({"a": 0})", 6);
}

TEST(JsonSchemaPrefix, ArrayBoundsAndStringLengths) {
  const auto s = schema_of(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1,
                               "maxItems": 2})");
  expect_admitted(*s, "[true]");
  expect_admitted(*s, "[ true , false ]");
  expect_refused_at(*s, "[]", 1);
  expect_refused_at(*s, "[true,false,", 11);
  expect_refused_at(*s, "[true,false ,", 12);
  expect_refused_at(*s, "[1", 1);
  const auto l = schema_of(R"({"type": "object", "properties": {
                               "s": {"type": "string", "minLength": 2, "maxLength": 3}}})");
  expect_admitted(*l, R"({"s": "ab"})");
  expect_admitted(*l, R"({"s": "a\u00e9c"})");               // an escape is one character
  expect_admitted(*l, "{\"s\": \"\xc3\xa9\xe2\x82\xac\"}");  // two code points in five bytes
  expect_refused_at(*l, R"({"s": "a"})", 8);                 // too short at the closing quote
  expect_refused_at(*l, R"({"s": "abcd"})", 10);             // too long at the fourth character
  expect_refused_at(*l, R"({"s": "ab\n\n"})", 11);
}

// A key or a string without a pattern takes exactly the prefixes of well-formed JSON string
// contents (so every text the mask lets through parses): every pair of bytes after the opening
// quote is accepted where some tail completes it into a string nlohmann::json parses, in a
// value of JSON mode and in a key.
TEST(JsonSchemaPrefix, PlainStringsTakeWellFormedUtf8AndPairedSurrogatesOnly) {
  // Every two-byte prefix of a string's contents ends in one of these tails' reach: a finished
  // character, an escape's letter or \u digits, or a UTF-8 sequence short of 1-3 continuation
  // bytes (after E0 and F0 the first of them is narrower).
  const std::vector<std::string> tails = {"",         "n",        "0041",         "\x80",
                                          "\x80\x80", "\xA0\x80", "\x80\x80\x80", "\x90\x80\x80"};
  const auto any = JsonSchema::any_object();
  for (const bool key : {false, true}) {
    const std::string open = key ? "{\"" : "{\"s\": \"";
    const std::string close = key ? "\": 1}" : "\"}";
    JsonSchemaPrefix start(*any);
    ASSERT_TRUE(start.feed(open));
    int accepted = 0;
    for (int b1 = 0; b1 < 256; ++b1) {
      JsonSchemaPrefix first = start;
      const char c1 = static_cast<char>(b1);
      const bool first_ok = first.feed(std::string_view(&c1, 1));
      for (int b2 = 0; b2 < 256; ++b2) {
        // Pairs whose quote closes the string leave it: other tests own what follows.
        if (b1 == '"' || (b2 == '"' && b1 != '\\')) continue;
        const std::string pair = {c1, static_cast<char>(b2)};
        bool completes = false;
        for (const std::string& tail : tails)
          completes = completes || json::accept(open + pair + tail + close);
        JsonSchemaPrefix second = first;
        const bool ok = first_ok && second.feed(pair.substr(1));
        ASSERT_EQ(ok, completes) << (key ? "key" : "value") << " bytes " << std::hex << b1 << " "
                                 << b2;
        accepted += ok;
      }
    }
    EXPECT_GT(accepted, 15000);  // the oracle is not vacuous: 16869 pairs are well formed
  }
  // Longer forms, byte-exact.
  const auto s = testing_support::one_property_object("s", {{"type", "string"}});
  const std::string at = "{\"s\": \"";
  for (const char* valid : {"\xED\x9F\xBF", "\xF4\x8F\xBF\xBF", "\xF0\x90\x80\x80",
                            "\\uD83D\\uDE00", "\\udbff\\udfff", "\\uD7FF\\uE000"})
    EXPECT_TRUE(testing_support::admits_whole(*s, at + valid + "\"}")) << valid;
  expect_refused_at(*s, at + "\\uD83Dx", at.size() + 6);      // a high half needs a low one
  expect_refused_at(*s, at + "\\uD83D\"", at.size() + 6);     // ... also before the string ends
  expect_refused_at(*s, at + "\\uD83D\\n", at.size() + 7);    // ... by \u
  expect_refused_at(*s, at + "\\uD83D\\u00", at.size() + 8);  // ... in DC00-DFFF
  expect_refused_at(*s, at + "\\uD83D\\uD8", at.size() + 9);
  expect_refused_at(*s, at + "\\uDD", at.size() + 3);  // a lone low half
  expect_refused_at(*s, at + "\xE2\x82" + "a", at.size() + 2);
  expect_refused_at(*s, at + "\xF4\x8F\xBF\xBF\xBF", at.size() + 4);
}

// maxLength counts characters: a UTF-8 sequence and a surrogate pair's two escapes are one each.
TEST(JsonSchemaPrefix, StringLengthsCountCharactersNotBytesOrEscapes) {
  const auto two =
      testing_support::one_property_object("s", {{"type", "string"}, {"maxLength", 2}});
  const std::string at = "{\"s\": \"";
  for (const char* valid : {"\xC3\xA9\xE2\x82\xAC", "\\uD83D\\uDE00a", "\xF0\x9F\x98\x80\\n"})
    EXPECT_TRUE(testing_support::admits_whole(*two, at + valid + "\"}")) << valid;
  expect_refused_at(*two, at + "\xC3\xA9\xE2\x82\xAC" + "a", at.size() + 5);
  expect_refused_at(*two, at + "\\uD83D\\uDE00ab", at.size() + 13);
  const auto three =
      testing_support::one_property_object("s", {{"type", "string"}, {"minLength", 3}});
  expect_refused_at(*three, at + "\\uD83D\\uDE00a\"", at.size() + 13);
}

void expect_compile_error(const char* schema, const std::string& needle) {
  try {
    schema_of(schema);
    ADD_FAILURE() << "compiled: " << schema;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaPrefix, PropertyCounts) {
  const auto two_or_three = schema_of(R"({"type": "object", "minProperties": 2,
      "maxProperties": 3, "additionalProperties": {"type": "integer"}})");
  expect_admitted(*two_or_three, R"({"a": 1, "b": 2})");
  expect_admitted(*two_or_three, R"({"a": 1, "b": 2, "c": 3})");
  expect_refused_at(*two_or_three, R"({"a": 1})", 7);                    // one key: too few
  expect_refused_at(*two_or_three, R"({"a": 1, "b": 2, "c": 3, )", 23);  // a fourth: too many
  // Room is kept for the required keys: with one key typed and r missing, the next must be r.
  const auto keep_room = schema_of(R"({"type": "object", "properties": {"r": {"type":
      "integer"}, "o": {"type": "integer"}}, "required": ["r"], "maxProperties": 2})");
  expect_admitted(*keep_room, R"({"a": 1, "r": 2})");
  expect_admitted(*keep_room, R"({"o": 1, "r": 2})");
  expect_refused_at(*keep_room, R"({"a": 1, "b": 2})", 10);
  expect_refused_at(*keep_room, R"({"a": 1, "o": 2})", 10);
  expect_compile_error(R"({"type": "object", "properties": {"a": {}}, "required": ["a"],
      "maxProperties": 0})",
                       "maxProperties 0 is below");
  expect_compile_error(R"({"type": "object", "properties": {"a": {}}, "minProperties": 2,
      "additionalProperties": false})",
                       "minProperties 2 exceeds the 1 keys");
}

TEST(JsonSchemaPrefix, Tuples) {
  // pydantic's Tuple[int, str]: prefixItems, no items past them, both required.
  const auto pair = schema_of(R"({"type": "array", "prefixItems": [{"type": "integer"},
      {"type": "string"}], "items": false, "minItems": 2})");
  expect_admitted(*pair, R"([1, "a"])");
  expect_refused_at(*pair, R"(["a")", 1);
  expect_refused_at(*pair, R"([1, 2])", 4);
  expect_refused_at(*pair, R"([1])", 2);
  expect_refused_at(*pair, R"([1, "a", 3])", 7);  // no comma after the last
  // A prefix, then any number of booleans (the items past the tuple).
  const auto rest = schema_of(R"({"type": "array", "prefixItems": [{"type": "integer"}],
      "items": {"type": "boolean"}})");
  expect_admitted(*rest, "[]");
  expect_admitted(*rest, "[7, true, false]");
  expect_refused_at(*rest, "[7, 8", 4);
  // Draft 7's form: items as a list, additionalItems.
  const auto draft7 = schema_of(R"({"type": "array", "items": [{"type": "string"}],
      "additionalItems": false})");
  expect_admitted(*draft7, R"(["x"])");
  expect_refused_at(*draft7, R"(["x", )", 4);
}

TEST(JsonSchemaPrefix, EnumConstAndNumbers) {
  const auto s = schema_of(R"({"type": "object", "properties": {
      "color": {"enum": ["red", "green", null, 12, 1, "a\"b"]},
      "one": {"const": {"k": [1, 2]}},
      "n": {"type": "number"}}})");
  for (const char* text :
       {R"({"color": "red"})", R"({"color":null})", R"({"color": 12})", R"({"color": 1 })",
        R"({"color": "a\"b"})", R"({"one": {"k":[1,2]}})", R"({"n": -1.5e+3, "color": "green"})"}) {
    expect_admitted(*s, text);
  }
  expect_refused_at(*s, R"({"color": "blue"})", 11);
  expect_refused_at(*s, R"({"color": 123})", 12);
  expect_refused_at(*s, R"({"color": "red )", 14);
  expect_refused_at(*s, R"({"one": {"k": [1,2]}})", 13);  // typed exactly as listed (compact)
}

TEST(JsonSchemaPrefix, AnyOfOfDifferentTypesAndTypeLists) {
  const auto s = schema_of(R"({"type": "object", "properties": {
      "x": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
      "y": {"type": ["string", "array"], "items": {"type": "integer"}, "maxLength": 1},
      "z": {"oneOf": [{"enum": ["a", "b"]}, {"type": "null"}]},
      "w": {"anyOf": [{"type": "object", "properties": {"q": {"type": "boolean"}},
                       "additionalProperties": false},
                      {"type": "string", "maxLength": 0}]}}})");
  expect_admitted(*s, R"({"x": null, "y": "a", "z": "b", "w": {"q": true}})");
  expect_admitted(*s, R"({"x": -3, "y": [1, 2], "z": null, "w": ""})");
  expect_refused_at(*s, R"({"x": "3"})", 6);
  expect_refused_at(*s, R"({"y": "ab"})", 8);
  expect_refused_at(*s, R"({"z": "c"})", 7);
  expect_refused_at(*s, R"({"w": {"r": 1}})", 8);
  expect_refused_at(*s, R"({"w": "a"})", 7);
}

TEST(JsonSchemaPrefix, RecursiveReferences) {
  const auto tree = schema_of(R"({
    "$defs": {"Node": {"type": "object",
                       "properties": {"v": {"type": "integer"},
                                      "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                                      "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                       "required": ["v"], "additionalProperties": false}},
    "$ref": "#/$defs/Node"})");
  expect_admitted(*tree, R"({"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3, "next": {"v": 4}}]})");
  expect_admitted(*tree, R"({"next": null, "v": 0})");
  expect_refused_at(*tree, R"({"v": 1, "kids": [{"kids": []}]})", 29);  // an inner node lacks v
  expect_refused_at(*tree, R"({"v": 1, "next": {"w": 1}})", 19);
}

// pydantic's other shapes: a description beside a $ref as allOf of one schema, and
// Optional[Any] (anyOf with an alternative of anything) as anything.
TEST(JsonSchemaPrefix, AllOfOfOneSchemaAndOptionalAny) {
  const auto s = schema_of(R"({"type": "object",
      "$defs": {"Unit": {"enum": ["C", "F"]}},
      "properties": {"u": {"allOf": [{"$ref": "#/$defs/Unit"}], "description": "unit"},
                     "a": {"anyOf": [{}, {"type": "null"}]}},
      "additionalProperties": false})");
  expect_admitted(*s, R"({"u": "F", "a": [1, {"b": null}]})");
  expect_admitted(*s, R"({"a": null})");
  expect_refused_at(*s, R"({"u": "K"})", 7);
}

// Objects told apart by a tag (pydantic's discriminated unions, forced tool calls over several
// tools): the tag comes first, and its value picks the alternative for the rest of the object.
TEST(JsonSchemaPrefix, TaggedUnionsOfObjects) {
  const auto s = schema_of(R"({"type": "object", "required": ["pet"],
    "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"},
                                      {"type": "null"}],
                           "discriminator": {"propertyName": "kind"}}},
    "$defs": {
      "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
              "required": ["kind", "lives"], "additionalProperties": false},
      "Dog": {"type": "object", "properties": {"good": {"type": "boolean"}, "kind": {"enum": ["dog"]}},
              "required": ["kind"], "additionalProperties": false}}})");
  expect_admitted(*s, R"({"pet": {"kind": "cat", "lives": 9}})");
  expect_admitted(*s, R"({"pet": {"kind":"dog"}})");
  expect_admitted(*s, R"({"pet": {"kind": "dog", "good": true}})");
  expect_admitted(*s, R"({"pet": null})");
  expect_refused_at(*s, R"({"pet": {"lives": 9}})", 10);     // the tag comes first
  expect_refused_at(*s, R"({"pet": {"kind": "cow"}})", 19);  // a tag that is not listed
  expect_refused_at(*s, R"({"pet": {"kind": "cat", "good": true}})", 25);   // a cat has no "good"
  expect_refused_at(*s, R"({"pet": {"kind": "cat"}})", 22);                 // and needs "lives"
  expect_refused_at(*s, R"({"pet": {"kind": "dog", "kind": "dog"}})", 25);  // no key twice
  expect_refused_at(*s, R"({"pet": {}})", 9);
}

// ---- the compiler's refusals ----

TEST(JsonSchema, RefusesWhatItCannotEnforceByName) {
  expect_compile_error(
      R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "a(?=b)c"}}})",
      "lookahead / lookbehind assertions are not supported");
  expect_compile_error(
      R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "a(?=b)c"}}})",
      "#/properties/s");
  expect_compile_error(R"({"type": "object", "properties": {"s": {"type": "string",
                           "not": {"const": "x"}}}})",
                       "'not' is not supported");
  expect_compile_error(R"({"type": "object", "dependentRequired": {"a": ["b"]}})",
                       "'dependentRequired' is not supported");
  expect_compile_error(R"({"type": "string"})", "root must describe an object or an array");
  expect_compile_error(R"({"type": "object", "properties": {"r": {"$ref": "#/$defs/Missing"}}})",
                       "does not resolve");
  expect_compile_error(R"({"type": "object", "required": ["a"]})", "is not in 'properties'");
  expect_compile_error(R"({"type": "array", "minItems": 3, "maxItems": 2})", "exceeds maxItems");
  expect_compile_error(R"({"type": "objekt"})", "type \"objekt\" is unknown");
  expect_compile_error(
      R"({"type": "object", "properties": {"e": {"type": "string", "enum": [1]}}})",
      "is not of the schema's 'type'");
  expect_compile_error(R"({"type": "object", "properties": {"f": false}})", "admits no value");
  expect_compile_error(R"({"type": "array", "prefixItems": [{}], "items": [{}]})",
                       "use one tuple form");
  expect_compile_error(R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})",
                       "exceeds maxItems 1");
  expect_compile_error(R"({"type": "object", "properties": {"x": {"allOf": [
                           {"pattern": "^a"}, {"pattern": "b$"}]}}})",
                       "allOf's parts give 'pattern' different values");
  // A $ref's target is checked like any schema.
  expect_compile_error(R"({"type": "object", "$defs": {"D": {"type": "integer", "contains": {}}},
                           "properties": {"d": {"$ref": "#/$defs/D"}}})",
                       "'contains' is not supported");
  // Annotations are accepted (and not enforced).
  EXPECT_NO_THROW(schema_of(R"({"title": "T", "description": "d", "type": "object",
      "properties": {"when": {"type": "string", "format": "date-time", "default": "x"}},
      "$schema": "https://json-schema.org/draft/2020-12/schema"})"));
}

// ---- masks ----

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_json_schema_prefix_test", name);
}

// The mask allows exactly the tokens whose bytes the prefix accepts (checked token by token, for
// JSON mode and a schema), and two schemas at the same text get their own masks.
TEST(JsonTokenMasks, AllowExactlyTheTokensThePrefixAccepts) {
  const LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("masks")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  JsonTokenMasks masks(tokenizer, engine.eos_token_ids());
  const auto person = schema_of(kPerson);
  std::vector<std::vector<uint32_t>> seen;
  for (const auto& [schema, text] : std::vector<std::pair<const JsonSchema*, std::string>>{
           {JsonSchema::any_object().get(), "{\"a\": [1, "},
           {JsonSchema::any_object().get(), "{\"na"},
           {person.get(), "{\"na"},
           {person.get(), "{\"name\": \"x\", "}}) {
    JsonSchemaPrefix prefix(*schema);
    ASSERT_TRUE(prefix.feed(text)) << text;
    seen.push_back(testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix,
                                                               engine.eos_token_ids(), text));
  }
  // After {"na, any key may go on; the person schema only lets "name" go on.
  EXPECT_NE(seen[1], seen[2]);
}

// Inside a string that takes every printable ASCII byte as itself, the masks take tokens of
// such bytes without walking them (JsonTokenMasks::plain_); everywhere else they walk. Both must
// allow exactly the tokens the prefix accepts: in plain strings (JSON mode, a schema's value and
// key), and in strings where a plain byte changes the state: a length bound, a pattern, an enum,
// an escape, a code point cut in the middle.
TEST(JsonTokenMasks, InsideStringsAllowExactlyTheTokensThePrefixAccepts) {
  const LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("string_masks")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  JsonTokenMasks masks(tokenizer, engine.eos_token_ids());
  const auto person = schema_of(kPerson);
  const auto bounded = string_property_schema(R"("maxLength": 3)");
  const auto patterned = string_property_schema(R"("pattern": "^[a-z]+-[0-9]+$")");
  const auto enumerated = string_property_schema(R"("enum": ["the cat", "the dog"])");
  // Counted classes: a run of bytes that steps the prefix uniformly decides tokens by length.
  const auto counted = string_property_schema(R"("pattern": "^[A-Za-z ]{1,6}$")");
  const auto counted_then = string_property_schema(R"("pattern": "^[a-z]{3}[0-9a-z]+$")");
  const auto counted_split = string_property_schema(R"("pattern": "^[a-z]{2}(ab|cd)$")");
  const auto long_bounded = string_property_schema(R"("maxLength": 5)");
  // A run whose bytes change from step to step: letters, then (letters refused) digits, which
  // then loop.
  const auto letters_then_digits = string_property_schema(R"("pattern": "^[a-z]{2}[0-9]+$")");
  // Keys: one that may still become a property name of either alternative, and is free once it
  // cannot (the first byte that leaves the names, then every plain byte loops); keys under a
  // counted propertyNames pattern.
  const auto pets = schema_of(R"({"type": "object", "properties": {"pet": {"anyOf": [
      {"type": "object", "properties": {"name": {"type": "string"}, "meows": {"type": "boolean"}}},
      {"type": "object", "properties": {"name": {"type": "string"}, "barks": {"type": "integer"}}}]}}})");
  const auto named_keys = schema_of(R"({"type": "object",
      "propertyNames": {"pattern": "^[a-z_]{1,5}$"}, "additionalProperties": {"type": "integer"}})");
  for (const auto& [schema, text] : std::vector<std::pair<const JsonSchema*, std::string>>{
           {JsonSchema::any_object().get(), "{\"a\": \"xy"},
           {JsonSchema::any_object().get(), "{\"a\": \"x\\"},
           {JsonSchema::any_object().get(), "{\"a\": \"\xc3"},
           {JsonSchema::any_object().get(), "{\"k"},
           {person.get(), "{\"name\": \"Jo"},
           {person.get(), "{\"name\": \""},
           {bounded.get(), "{\"s\": \"a"},
           {bounded.get(), "{\"s\": \"ab"},
           {patterned.get(), "{\"s\": \"ab"},
           {enumerated.get(), "{\"s\": \"the "},
           {counted.get(), "{\"s\": \""},
           {counted.get(), "{\"s\": \"ab"},
           {counted.get(), "{\"s\": \"ab cde"},
           {counted_then.get(), "{\"s\": \"a"},
           {counted_then.get(), "{\"s\": \"abc"},
           {counted_split.get(), "{\"s\": \""},
           {long_bounded.get(), "{\"s\": \"x"},
           {long_bounded.get(), "{\"s\": \"x\\n"},
           {letters_then_digits.get(), "{\"s\": \""},
           {letters_then_digits.get(), "{\"s\": \"a"},
           {letters_then_digits.get(), "{\"s\": \"ab"},
           {pets.get(), "{\"pet\": {\""},
           {pets.get(), "{\"pet\": {\"na"},
           {pets.get(), "{\"pet\": {\"m"},
           {named_keys.get(), "{\"ab"}}) {
    JsonSchemaPrefix prefix(*schema);
    ASSERT_TRUE(prefix.feed(text)) << text;
    testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, engine.eos_token_ids(),
                                                text);
  }
}

// Prefixes that differ only in values already done share a key, so they share a cached mask;
// ones that can go on differently do not.
TEST(JsonSchemaPrefix, KeysForgetFinishedValues) {
  const auto person = schema_of(kPerson);
  const auto key_of = [&](const char* text) {
    JsonSchemaPrefix p(*person);
    EXPECT_TRUE(p.feed(text)) << text;
    return p.key();
  };
  EXPECT_EQ(key_of(R"({"name": "a", )"), key_of(R"({"name": "bcd\n", )"));
  EXPECT_EQ(key_of(R"({"age": 1, "tags": [], )"), key_of(R"({"age": -22, "tags": ["x", ""], )"));
  EXPECT_EQ(key_of(R"({"age": 1, "name": "x", )"), key_of(R"({"name": "x", "age": 1, )"));
  EXPECT_NE(key_of(R"({"name": "a", )"), key_of(R"({"age": 1, )"));        // other keys remain
  EXPECT_NE(key_of(R"({"tags": ["a")"), key_of(R"({"tags": ["a", "b")"));  // items so far
  const auto other = schema_of(kPerson);  // the same text, another schema: another key
  JsonSchemaPrefix p(*other);
  ASSERT_TRUE(p.feed("{"));
  EXPECT_NE(p.key(), key_of("{"));
}

// ---- the engine ----

// Every output is a prefix of a JSON object; with '}' pushed up by a bias the object closes at
// once ("{}") and the request ends with finish "stop".
TEST(JsonMode, OutputsStayObjectPrefixesAndEndWhenTheObjectCloses) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("engine")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  SamplingParams s = testing_support::greedy(40);
  s.json_object = true;
  for (const auto& [text, finish] : testing_support::greedy_and_sampled_outputs(engine, s, 7)) {
    JsonSchemaPrefix p(*JsonSchema::any_object());
    EXPECT_TRUE(p.feed(text)) << text;
    if (finish == FinishReason::kStop) {
      EXPECT_TRUE(p.complete()) << text;
      EXPECT_TRUE(json::parse(text).is_object()) << text;
    }
  }
  const std::optional<int32_t> close = tokenizer.token_to_id("}");
  ASSERT_TRUE(close.has_value());
  s.logit_bias = {{*close, 100.0f}};
  const RequestOutput closed = engine.generate({{5, 6, 7}}, s)[0];
  EXPECT_EQ(closed.finish_reason, FinishReason::kStop);
  const std::string text = tokenizer.decode(closed.output, true);
  EXPECT_TRUE(json::parse(text).is_object()) << text;
  EXPECT_EQ(text.find_first_not_of(" \t\n\r"), text.find('{'));
}

// A schema whose texts are few (an enum, a bounded array of booleans): greedy and sampled
// requests end with finish "stop" on a text the schema admits. The tiny model's random weights
// favour newlines, which fill each of the ~15 gaps between the text's tokens up to
// kMaxWhitespaceRun; 512 tokens cover that worst case.
TEST(JsonSchemaMode, OutputsFollowTheSchemaAndEnd) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("schema")));
  const auto schema = schema_of(R"({"type": "object", "properties": {
      "pick": {"enum": ["yes", "no"]}, "flags": {"type": "array", "items": {"type": "boolean"},
      "maxItems": 2}}, "required": ["pick", "flags"], "additionalProperties": false})");
  SamplingParams s = testing_support::greedy(512);
  s.json_schema = schema;
  for (const auto& [text, finish] : testing_support::greedy_and_sampled_outputs(engine, s, 11)) {
    ASSERT_EQ(finish, FinishReason::kStop) << json(text).dump();
    JsonSchemaPrefix p(*schema);
    EXPECT_TRUE(p.feed(text) && p.complete()) << text;
    const json value = json::parse(text);
    EXPECT_TRUE(value.at("pick") == "yes" || value.at("pick") == "no") << text;
    EXPECT_LE(value.at("flags").size(), 2u) << text;
    EXPECT_EQ(value.size(), 2u) << text;
  }
  SamplingParams both = s;
  both.json_object = true;
  EXPECT_THROW(engine.generate({{5, 6, 7}}, both), Error);
}

}  // namespace
}  // namespace quench
