// Structured output: a JSON Schema compiled into the graph of nodes that JsonSchemaPrefix walks
// byte by byte (response_format {"type": "json_schema"}; JSON mode is the schema
// {"type": "object"}). The subset is the one structured-output clients send (OpenAI's strict
// mode, pydantic's model_json_schema()):
//   type (one or a list), properties, required, additionalProperties (bool or schema),
//   patternProperties and propertyNames (pattern, minLength, maxLength, enum, const, format;
//   key_automaton.h), minProperties, maxProperties, items,
//   prefixItems / items as a list with additionalItems (tuples), minItems, maxItems, minLength,
//   maxLength, pattern (regex_syntax.h: the regular subset of ECMA-262), minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum, multipleOf (number_bounds.h), enum, const, anyOf / oneOf
//   (alternatives that start with different bytes are told apart there; objects told apart by a
//   tag, a required property of one string value each, are written tag first, as pydantic's
//   discriminated unions; any other union is followed alternative by alternative, each dropped at
//   the byte it refuses; oneOf is not checked for exclusivity), allOf (schema_all_of.h), $ref to
//   "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion included);
// format: date, time, date-time, uuid, ipv4 and email are enforced as patterns
// (string_formats.h) where the schema has no pattern of its own; annotations (title,
// description, default, examples, other formats, ...) are accepted and not enforced. Any other
// keyword (not, if / then / else, dependentRequired, ...) is refused with an error that names it,
// its place in the schema and the supported keywords: a constraint is never silently dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "quench/engine/structured_output/grammar.h"
#include "quench/engine/structured_output/key_automaton.h"
#include "quench/engine/structured_output/number_bounds.h"
#include "quench/engine/structured_output/string_pattern.h"

namespace quench {

// The JSON value kinds, as bits of JsonSchemaNode::types. kInteger alone admits numbers without
// a fraction or exponent; kNumber admits every number.
enum JsonTypeBit : uint8_t {
  kJsonObject = 1,
  kJsonArray = 2,
  kJsonString = 4,
  kJsonNumber = 8,
  kJsonInteger = 16,
  kJsonBoolean = 32,
  kJsonNull = 64,
};
inline constexpr uint8_t kJsonAnyType = 127;

struct JsonSchemaNode {
  uint8_t types = kJsonAnyType;
  // The nodes whose object / array / string constraints a value of that kind follows: the node
  // itself, or for an anyOf the alternative that admits the kind.
  int32_t object_node = 0;
  int32_t array_node = 0;
  int32_t string_node = 0;
  int32_t number_node = 0;
  // enum / const: the value's text must be one of these (compact JSON, as nlohmann dumps it);
  // empty: no such constraint.
  std::vector<std::string> literals;
  // Objects. property_keys[i] is property i's name as it appears between the quotes of a JSON
  // key (escaped); its value follows property_nodes[i]. Keys not listed take `additional`
  // (kNoNode: none allowed).
  std::vector<std::string> property_keys;
  std::vector<int32_t> property_nodes;
  uint64_t required = 0;  // bit i: property i must be present
  int32_t additional = 0;
  // patternProperties / propertyNames: the keys other than the listed ones, and their values'
  // nodes (key_automaton.h; `additional` is its outcome for keys no pattern matches); null:
  // every unlisted key takes `additional`. Keys of such objects are written in JSON's canonical
  // spelling (see JsonSchemaPrefix).
  std::shared_ptr<const KeyAutomaton> key_automaton;
  // Bit i: property i may not appear (its name fails propertyNames, or its schema and a matching
  // pattern's admit no common value); an object starts with them counted as present.
  uint64_t absent_keys = 0;
  int64_t min_properties = 0;
  int64_t max_properties = -1;  // -1: no bound
  // Arrays: item i follows prefix_items[i] (a tuple's), the items past it `items`.
  std::vector<int32_t> prefix_items;
  int32_t items = 0;
  int64_t min_items = 0;
  int64_t max_items = -1;  // -1: no bound
  // Strings (characters: code points, an escape counting as one).
  int64_t min_length = 0;
  int64_t max_length = -1;
  // "pattern", with the length bounds folded in (the prefix then steps it over the decoded
  // characters instead of counting them); null: none.
  std::shared_ptr<const StringPattern> pattern;
  // JsonSchema::text_grammar's root: the grammar the whole output follows; null: none.
  std::shared_ptr<const Grammar> grammar;
  // Numbers: minimum / maximum / exclusiveMinimum / exclusiveMaximum; null: none.
  std::shared_ptr<const NumberBounds> number_bounds;
  // A tagged union of objects (anyOf / oneOf of objects told apart by one required property of
  // one string value each): the object's first key must be tag_key (property 0, whose node lists
  // the tags); the tag typed picks tag_nodes[i], the alternative of the i-th tag, for the rest of
  // the object. Empty: not a union.
  std::string tag_key;
  std::vector<int32_t> tag_nodes;
  // A union that neither the value's first byte nor a tag decides (anyOf / oneOf of objects
  // without a tag, of two string or number schemas, ...): the prefix follows every alternative at
  // once and drops each where it refuses a byte. Empty: not such a union.
  std::vector<int32_t> alternatives;
};

class JsonSchema {
 public:
  // Node 0 admits any JSON value; kNoNode stands for "nothing" (additionalProperties false).
  static constexpr int32_t kAnyNode = 0;
  static constexpr int32_t kNoNode = -1;
  // Properties an object schema may list (the prefix tracks them in one 64-bit word).
  static constexpr size_t kMaxProperties = 64;
  // Subschemas nest at most this deep (the compiler recurses through them).
  static constexpr int kMaxSchemaDepth = 256;

  // Throws quench::Error naming the unsupported or malformed part. The root must describe
  // objects or arrays (a top-level number has no byte that ends it).
  static std::shared_ptr<const JsonSchema> compile(const nlohmann::json& schema);
  // The schema of JSON mode: any object.
  static std::shared_ptr<const JsonSchema> any_object();
  // Not JSON: the whole output is text that `regex` matches from start to end (guided_regex;
  // guided_choice is the alternation of its choices' regex_literal). The output may end (the
  // end-of-sequence token is allowed) wherever the text matches, and ends where nothing may
  // follow. Throws quench::Error as StringPattern::compile does.
  static std::shared_ptr<const JsonSchema> text_pattern(const std::string& regex);
  // Not JSON: the whole output is a sentence of a GBNF grammar (guided_grammar; grammar.h). The
  // output may end where it is one, and ends where nothing may follow. Throws quench::Error as
  // Grammar::compile does.
  static std::shared_ptr<const JsonSchema> text_grammar(const std::string& gbnf);

  bool raw_text() const { return raw_text_; }

  const JsonSchemaNode& node(int32_t index) const { return nodes_[static_cast<size_t>(index)]; }
  int32_t root() const { return root_; }
  // Distinct for every compiled schema of the process (token masks are cached under it).
  uint64_t id() const { return id_; }

 private:
  friend class JsonSchemaCompiler;
  // A raw-text schema: one node (`text`, a pattern or a grammar) the whole output follows.
  static std::shared_ptr<const JsonSchema> raw_text_schema(JsonSchemaNode text);
  std::vector<JsonSchemaNode> nodes_;
  int32_t root_ = kAnyNode;
  uint64_t id_ = 0;
  bool raw_text_ = false;
};

}  // namespace quench
