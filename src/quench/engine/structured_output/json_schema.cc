#include "quench/engine/structured_output/json_schema.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "quench/core/error.h"
#include "quench/engine/structured_output/grammar_prefix.h"
#include "quench/engine/structured_output/regex_syntax.h"
#include "quench/engine/structured_output/schema_all_of.h"
#include "quench/engine/structured_output/string_formats.h"
#include "quench/tokenizer/utf8.h"

namespace quench {

using json = nlohmann::json;

namespace {

constexpr const char* kSupported =
    "type, properties, required, additionalProperties, patternProperties, propertyNames (pattern, "
    "minLength, maxLength, enum, const, format), minProperties, maxProperties, items, "
    "prefixItems, additionalItems, "
    "minItems, maxItems, minLength, "
    "maxLength, pattern, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, enum, "
    "const, anyOf, "
    "oneOf, allOf (merged: equal patterns, formats and multipleOf), $ref, $defs, definitions, "
    "format (enforced: date, time, "
    "date-time, uuid, ipv4, email) and annotations (title, description, default, examples, other "
    "formats, ...)";

// Keywords that describe and do not constrain: accepted, not enforced.
const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> keywords = {
      "title",    "description", "default",  "examples",     "$schema",          "$id",
      "$comment", "deprecated",  "readOnly", "writeOnly",    "contentMediaType", "contentEncoding",
      "$defs",    "definitions", "strict",   "discriminator"};  // OpenAPI's tag name: the compiler
                                                                // finds the tag itself
  return keywords;
}

// Whether a keyword only describes (accepted, not enforced): the annotations, and a format
// quench does not enforce (string_formats.h). An enforced format constrains like any keyword.
bool annotates(const std::string& key, const json& value) {
  if (key == "format") {
    return !value.is_string() || string_format_pattern(value.get<std::string>()).empty();
  }
  return annotation_keywords().count(key) != 0;
}

uint8_t type_bit(const std::string& name, const std::string& path) {
  if (name == "object") return kJsonObject;
  if (name == "array") return kJsonArray;
  if (name == "string") return kJsonString;
  if (name == "number") return kJsonNumber | kJsonInteger;
  if (name == "integer") return kJsonInteger;
  if (name == "boolean") return kJsonBoolean;
  if (name == "null") return kJsonNull;
  throw Error(str_cat("JSON schema ", path, ": type \"", name,
                      "\" is unknown; allowed: object, array, string, number, integer, boolean, "
                      "null"));
}

uint8_t value_type(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return kJsonObject;
    case json::value_t::array:
      return kJsonArray;
    case json::value_t::string:
      return kJsonString;
    case json::value_t::boolean:
      return kJsonBoolean;
    case json::value_t::null:
      return kJsonNull;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return kJsonInteger;
    default:
      return kJsonNumber;
  }
}

// Whether values of the two type sets can start with the same byte (the prefix picks an anyOf's
// alternative at the value's first byte where they cannot).
bool first_bytes_overlap(uint8_t a, uint8_t b) {
  const uint8_t type_classes[] = {kJsonObject,  kJsonArray, kJsonString, kJsonNumber | kJsonInteger,
                                  kJsonBoolean, kJsonNull};
  for (uint8_t type_class : type_classes) {
    if ((a & type_class) && (b & type_class)) return true;
  }
  return false;
}

int64_t count_keyword(const json& s, const char* key, const std::string& path) {
  const json& v = s.at(key);
  QUENCH_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 0, "JSON schema ", path, ": '", key,
                 "' must be a non-negative integer, not ", v.dump());
  return v.get<int64_t>();
}

std::atomic<uint64_t> next_schema_id{1};

}  // namespace

// Compiles one schema document into a JsonSchema's node graph. $refs are compiled once each (a
// node index is reserved before its body, so recursive schemas close on themselves).
class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(const json& document)
      : document_(document), schema_(std::make_shared<JsonSchema>()) {
    schema_->nodes_.push_back(JsonSchemaNode{});  // kAnyNode: any value
    schema_->id_ = next_schema_id.fetch_add(1);
  }

  std::shared_ptr<const JsonSchema> compile_root() {
    schema_->root_ = compile(document_, "#");
    const JsonSchemaNode& root = schema_->node(schema_->root_);
    QUENCH_REQUIRE(root.literals.empty() && (root.types & ~(kJsonObject | kJsonArray)) == 0,
                   "JSON schema #: the root must describe an object or an array (\"type\": "
                   "\"object\"), so that the output has a closing byte to end on");
    return schema_;
  }

 private:
  int32_t reserve() {
    schema_->nodes_.push_back(JsonSchemaNode{});
    return static_cast<int32_t>(schema_->nodes_.size() - 1);
  }
  JsonSchemaNode& at(int32_t index) { return schema_->nodes_[static_cast<size_t>(index)]; }

  int32_t compile(const json& s, const std::string& path) {
    // Schemas nest through this recursion: bounded, so that no request exhausts the stack.
    QUENCH_REQUIRE(depth_ < JsonSchema::kMaxSchemaDepth, "JSON schema ", path.substr(0, 200),
                   "...: schemas nest deeper than ", JsonSchema::kMaxSchemaDepth, " levels");
    ++depth_;
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    if (s.is_boolean()) {
      QUENCH_REQUIRE(s.get<bool>(), "JSON schema ", path,
                     ": the schema false admits no value; a property that must not appear is "
                     "one left out of 'properties' with additionalProperties false");
      return JsonSchema::kAnyNode;
    }
    check_keywords(s, path);
    bool constrains = false;  // {} and annotations alone (not an enforced format) admit anything
    for (auto it = s.begin(); it != s.end(); ++it)
      constrains = constrains || !annotates(it.key(), it.value());
    if (!constrains) return JsonSchema::kAnyNode;
    if (s.contains("allOf")) return compile_all_of(s, path);  // merges what stands beside it
    if (s.contains("$ref")) return compile_ref(s, path);
    if (s.contains("anyOf") || s.contains("oneOf")) return compile_any_of(s, path);
    const int32_t index = reserve();
    compile_into(s, path, index);
    return index;
  }

  // 'type': one name or a list of them, as JsonTypeBit bits.
  static uint8_t compile_types(const json& type, const std::string& path) {
    if (type.is_string()) return type_bit(type.get<std::string>(), path);
    QUENCH_REQUIRE(type.is_array() && !type.empty(), "JSON schema ", path,
                   ": 'type' must be a type name or a non-empty list of them");
    uint8_t types = 0;
    for (const json& t : type) {
      QUENCH_REQUIRE(t.is_string(), "JSON schema ", path, ": 'type' lists ", t.dump());
      types |= type_bit(t.get<std::string>(), path);
    }
    return types;
  }

  static void check_keywords(const json& s, const std::string& path) {
    QUENCH_REQUIRE(s.is_object(), "JSON schema ", path,
                   ": a schema must be an object or a boolean, not ", s.dump());
    static const std::set<std::string> supported = {"type",
                                                    "properties",
                                                    "required",
                                                    "additionalProperties",
                                                    "patternProperties",
                                                    "propertyNames",
                                                    "minProperties",
                                                    "maxProperties",
                                                    "items",
                                                    "prefixItems",
                                                    "additionalItems",
                                                    "minItems",
                                                    "maxItems",
                                                    "minLength",
                                                    "maxLength",
                                                    "pattern",
                                                    "format",
                                                    "enum",
                                                    "const",
                                                    "anyOf",
                                                    "oneOf",
                                                    "allOf",
                                                    "$ref",
                                                    "minimum",
                                                    "maximum",
                                                    "exclusiveMinimum",
                                                    "exclusiveMaximum",
                                                    "multipleOf"};
    for (const auto& [key, value] : s.items()) {
      QUENCH_REQUIRE(supported.count(key) != 0 || annotates(key, value), "JSON schema ", path,
                     ": keyword '", key, "' is not supported; supported: ", kSupported);
    }
  }

  // Only annotations may stand beside `keyword`: a constraint there would need merging into
  // `move_into`, which the compiler does not do.
  static void require_alone(const json& s, const std::string& keyword, const std::string& path,
                            const char* move_into) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      QUENCH_REQUIRE(it.key() == keyword || annotates(it.key(), it.value()), "JSON schema ", path,
                     ": '", it.key(), "' beside '", keyword, "' is not supported (move it into ",
                     move_into, ")");
    }
  }

  // allOf: its parts (and the keywords beside it) merged into one schema (schema_all_of.h),
  // which is compiled like any other. allOf of one schema beside annotations (pydantic's way of
  // putting a description beside a $ref) is that schema, compiled as it stands so that a $ref
  // keeps its one node.
  int32_t compile_all_of(const json& s, const std::string& path) {
    const json& all = s.at("allOf");
    bool alone = true;
    for (auto it = s.begin(); it != s.end(); ++it)
      alone = alone && (it.key() == "allOf" || annotates(it.key(), it.value()));
    if (alone && all.is_array() && all.size() == 1) return compile(all[0], path + "/allOf/0");
    const json merged = merge_all_of(
        s, [this](const std::string& ref) { return resolve_ref(ref); }, annotates, path);
    return compile(merged, path);
  }

  // The target of a $ref in this document: "#", "#/$defs/NAME" or "#/definitions/NAME".
  const json* resolve_ref(const std::string& ref) const {
    if (ref == "#") return &document_;
    for (const char* section : {"#/$defs/", "#/definitions/"}) {
      const std::string prefix = section;
      if (ref.rfind(prefix, 0) != 0) continue;
      const std::string name = ref.substr(prefix.size());
      const std::string section_key = prefix.substr(2, prefix.size() - 3);
      if (!document_.is_object() || !document_.contains(section_key)) continue;
      const json& defs = document_.at(section_key);
      if (defs.is_object() && defs.contains(name)) return &defs.at(name);
    }
    return nullptr;
  }

  int32_t compile_ref(const json& s, const std::string& path) {
    require_alone(s, "$ref", path, "the referenced schema");
    QUENCH_REQUIRE(s.at("$ref").is_string(), "JSON schema ", path, ": '$ref' must be a string");
    const std::string ref = s.at("$ref").get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) {
      QUENCH_REQUIRE(it->second != kInProgress, "JSON schema ", path, ": '$ref' ", ref,
                     " refers to itself through anyOf / $ref alone, with no object or array "
                     "between");
      return it->second;
    }
    const json* target = resolve_ref(ref);
    QUENCH_REQUIRE(target != nullptr, "JSON schema ", path, ": '$ref' ", ref,
                   " does not resolve; allowed: \"#\", \"#/$defs/NAME\" or "
                   "\"#/definitions/NAME\" of this document");
    // Object and array bodies reserve their node before compiling their children, so a
    // reference back to them resolves; anyOf and $ref bodies would read an unfinished node.
    if (target->is_object() && !target->contains("$ref") && !target->contains("anyOf") &&
        !target->contains("oneOf") && !target->contains("allOf")) {
      check_keywords(*target, ref);
      const int32_t index = reserve();
      refs_[ref] = index;
      compile_into(*target, ref, index);
      return index;
    }
    refs_[ref] = kInProgress;
    const int32_t index = compile(*target, ref);
    refs_[ref] = index;
    return index;
  }

  // anyOf / oneOf whose alternatives start with different bytes: one node whose types are the
  // alternatives' together, each kind's constraints delegated to the alternative that admits it.
  int32_t compile_any_of(const json& s, const std::string& path) {
    QUENCH_REQUIRE(!(s.contains("anyOf") && s.contains("oneOf")), "JSON schema ", path,
                   ": 'anyOf' and 'oneOf' together are not supported");
    const char* keyword = s.contains("anyOf") ? "anyOf" : "oneOf";
    require_alone(s, keyword, path, "the alternatives");
    const json& alternatives = s.at(keyword);
    QUENCH_REQUIRE(alternatives.is_array() && !alternatives.empty(), "JSON schema ", path, ": '",
                   keyword, "' must be a non-empty list of schemas");
    std::vector<int32_t> nodes;
    for (size_t i = 0; i < alternatives.size(); ++i)
      nodes.push_back(compile(alternatives[i], str_cat(path, "/", keyword, "/", i)));
    if (nodes.size() == 1) return nodes[0];
    // An alternative that admits anything (Optional[Any]) makes the union anything.
    for (int32_t n : nodes)
      if (n == JsonSchema::kAnyNode) return JsonSchema::kAnyNode;
    // A union among the alternatives: the prefix follows them all.
    for (int32_t n : nodes)
      if (!at(n).alternatives.empty()) return union_node(nodes);
    JsonSchemaNode merged;
    merged.types = 0;
    bool any_literals = false;
    for (int32_t n : nodes)
      any_literals = any_literals || !at(n).literals.empty();
    if (any_literals) {
      // Enums beside null or booleans: one list of literal texts.
      for (int32_t n : nodes) {
        const JsonSchemaNode& alt = at(n);
        if (!alt.literals.empty()) {
          merged.literals.insert(merged.literals.end(), alt.literals.begin(), alt.literals.end());
        } else if (alt.types == kJsonNull) {
          merged.literals.push_back("null");
        } else if (alt.types == kJsonBoolean) {
          merged.literals.push_back("true");
          merged.literals.push_back("false");
        } else {
          return union_node(nodes);  // an enum beside a string / number schema, ...
        }
        merged.types |= alt.types;
      }
      const int32_t index = reserve();
      at(index) = std::move(merged);
      return index;
    }
    merged.object_node = merged.array_node = merged.string_node = merged.number_node =
        JsonSchema::kNoNode;
    // Objects of several alternatives: a tagged union, which stands in the merge as one
    // object alternative.
    std::vector<int32_t> objects;
    for (int32_t n : nodes)
      if (at(n).types & kJsonObject) objects.push_back(n);
    if (objects.size() > 1) {
      const int32_t tagged = compile_tagged_union(objects);
      if (tagged == JsonSchema::kNoNode) return union_node(nodes);
      std::vector<int32_t> others = {tagged};
      for (int32_t n : nodes)
        if (!(at(n).types & kJsonObject)) others.push_back(n);
      nodes = std::move(others);
    }
    // Alternatives of different types: the value's first byte picks one. Two that admit one
    // type: the union follows them all.
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (first_bytes_overlap(at(nodes[i]).types, at(nodes[j]).types)) return union_node(nodes);
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      const JsonSchemaNode& alt = at(nodes[i]);
      merged.types |= alt.types;
      if (alt.types & kJsonObject) merged.object_node = alt.object_node;
      if (alt.types & kJsonArray) merged.array_node = alt.array_node;
      if (alt.types & kJsonString) merged.string_node = alt.string_node;
      if (alt.types & (kJsonNumber | kJsonInteger)) merged.number_node = alt.number_node;
    }
    const int32_t index = reserve();
    at(index) = std::move(merged);
    return index;
  }

  // Object alternatives told apart by a tag: a property every one of them requires, whose schema
  // is one string (const, or an enum of one), different in each. The union's node asks for the
  // tag first (JsonSchemaNode::tag_key); its value picks the alternative the object goes on in.
  // The first property of the first alternative that qualifies is the tag.
  int32_t compile_tagged_union(const std::vector<int32_t>& objects) {
    for (int32_t n : objects) {
      // Only whole, plain object schemas can be split by a tag (not one still being compiled:
      // a reference back to a schema that contains the union).
      if (at(n).types != kJsonObject || !at(n).literals.empty() || in_progress_.count(n) != 0 ||
          !at(n).alternatives.empty()) {
        return JsonSchema::kNoNode;
      }
    }
    const JsonSchemaNode& first = at(objects[0]);
    for (size_t p = 0; p < first.property_keys.size(); ++p) {
      const std::string key = first.property_keys[p];  // a copy: reserve() below moves nodes
      std::vector<std::string> tags;
      std::vector<int32_t> chosen;
      for (int32_t n : objects) {
        const JsonSchemaNode& alt = at(n);
        size_t i = 0;
        while (i < alt.property_keys.size() && alt.property_keys[i] != key)
          ++i;
        if (i == alt.property_keys.size() || !(alt.required & (uint64_t{1} << i))) break;
        const JsonSchemaNode& value = at(alt.property_nodes[i]);
        if (value.literals.size() != 1 || value.literals[0].front() != '"') break;
        if (std::find(tags.begin(), tags.end(), value.literals[0]) != tags.end()) break;
        tags.push_back(value.literals[0]);
        chosen.push_back(n);
      }
      if (chosen.size() != objects.size()) continue;
      JsonSchemaNode values;
      values.types = kJsonString;
      values.literals = tags;
      const int32_t values_index = reserve();
      at(values_index) = std::move(values);
      JsonSchemaNode tagged;
      tagged.types = kJsonObject;
      tagged.property_keys = {key};
      tagged.property_nodes = {values_index};
      tagged.required = 1;
      tagged.additional = JsonSchema::kNoNode;
      tagged.tag_key = key;
      tagged.tag_nodes = chosen;
      const int32_t index = reserve();
      tagged.object_node = tagged.array_node = tagged.string_node = tagged.number_node = index;
      at(index) = std::move(tagged);
      return index;
    }
    return JsonSchema::kNoNode;  // no tag
  }

  // A union the prefix follows alternative by alternative.
  int32_t union_node(const std::vector<int32_t>& alternatives) {
    JsonSchemaNode n;
    n.types = 0;
    for (int32_t a : alternatives)
      n.types |= at(a).types;
    n.alternatives = alternatives;
    const int32_t index = reserve();
    n.object_node = n.array_node = n.string_node = n.number_node = index;
    at(index) = std::move(n);
    return index;
  }

  // The body of an object / array / scalar schema into the reserved node `index`. Its types are
  // set before its children compile (a $ref back to it reads them).
  void compile_into(const json& s, const std::string& path, int32_t index) {
    in_progress_.insert(index);
    JsonSchemaNode node;
    node.object_node = node.array_node = node.string_node = node.number_node = index;
    if (s.contains("type")) node.types = compile_types(s.at("type"), path);
    if (s.contains("enum") || s.contains("const")) {
      QUENCH_REQUIRE(!(s.contains("enum") && s.contains("const")), "JSON schema ", path,
                     ": 'enum' and 'const' together are not supported");
      const json values = s.contains("const") ? json::array({s.at("const")}) : s.at("enum");
      QUENCH_REQUIRE(values.is_array() && !values.empty(), "JSON schema ", path,
                     ": 'enum' must be a non-empty list");
      uint8_t types = 0;
      for (const json& v : values) {
        const uint8_t t = value_type(v);
        QUENCH_REQUIRE(
            (node.types & t) != 0 || (t == kJsonInteger && (node.types & kJsonNumber) != 0),
            "JSON schema ", path, ": the enum value ", v.dump(), " is not of the schema's 'type'");
        node.literals.push_back(v.dump());
        types |= t == kJsonInteger ? (kJsonInteger | kJsonNumber) : t;
      }
      node.types = types;
    }
    at(index).types = node.types;
    at(index).object_node = at(index).array_node = at(index).string_node = at(index).number_node =
        index;
    compile_object(s, path, node);
    compile_array(s, path, node);
    if (s.contains("minLength")) node.min_length = count_keyword(s, "minLength", path);
    if (s.contains("maxLength")) node.max_length = count_keyword(s, "maxLength", path);
    QUENCH_REQUIRE(node.max_length < 0 || node.min_length <= node.max_length, "JSON schema ", path,
                   ": minLength ", node.min_length, " exceeds maxLength ", node.max_length);
    if (s.contains("pattern")) {
      compile_pattern(s.at("pattern"), path, node);
    } else if (s.contains("format") && s.at("format").is_string() && (node.types & kJsonString)) {
      const std::string format = s.at("format").get<std::string>();
      const std::string pattern = string_format_pattern(format);
      try {
        if (!pattern.empty()) compile_pattern(json(pattern), path, node);
      } catch (const Error& e) {
        throw Error(str_cat(e.what(), " (the pattern of 'format' \"", format, "\")"));
      }
    }
    compile_number_bounds(s, path, node);
    at(index) = std::move(node);
    in_progress_.erase(index);
  }

  static void compile_pattern(const json& pattern, const std::string& path, JsonSchemaNode& node) {
    QUENCH_REQUIRE(pattern.is_string(), "JSON schema ", path, ": 'pattern' must be a string");
    try {
      node.pattern =
          StringPattern::compile(pattern.get<std::string>(), node.min_length, node.max_length);
    } catch (const Error& e) {
      throw Error(str_cat("JSON schema ", path, ": ", e.what()));
    }
    // An enum's strings must match too (the prefix types enum values as listed).
    for (const std::string& literal : node.literals) {
      const json value = json::parse(literal);
      QUENCH_REQUIRE(!value.is_string() || node.pattern->matches(value.get<std::string>()),
                     "JSON schema ", path, ": the enum value ", literal,
                     " does not match the pattern ", pattern.dump());
    }
  }

  static void compile_number_bounds(const json& s, const std::string& path, JsonSchemaNode& node) {
    const bool integer_only = (node.types & kJsonNumber) == 0;
    node.number_bounds = NumberBounds::compile(s, integer_only, path);
    if (!node.number_bounds) return;
    // An enum's numbers must lie within (the prefix types enum values as listed).
    for (const std::string& literal : node.literals) {
      QUENCH_REQUIRE(!json::parse(literal).is_number() || node.number_bounds->contains(literal),
                     "JSON schema ", path, ": the enum value ", literal,
                     " lies outside the schema's bounds or is not a multiple of its multipleOf");
    }
  }

  void compile_object(const json& s, const std::string& path, JsonSchemaNode& node) {
    std::vector<std::string> listed_names;  // decoded, per property
    std::vector<json> listed_schemas;
    if (s.contains("properties")) {
      const json& properties = s.at("properties");
      QUENCH_REQUIRE(properties.is_object(), "JSON schema ", path,
                     ": 'properties' must be an object");
      QUENCH_REQUIRE(properties.size() <= JsonSchema::kMaxProperties, "JSON schema ", path, ": ",
                     properties.size(), " properties; at most ", JsonSchema::kMaxProperties,
                     " per object are supported");
      for (const auto& [name, property] : properties.items()) {
        const std::string quoted = json(name).dump();
        node.property_keys.push_back(quoted.substr(1, quoted.size() - 2));
        node.property_nodes.push_back(compile(property, str_cat(path, "/properties/", name)));
        listed_names.push_back(name);
        listed_schemas.push_back(property);
      }
    }
    if (s.contains("required")) {
      const json& required = s.at("required");
      QUENCH_REQUIRE(required.is_array(), "JSON schema ", path,
                     ": 'required' must be a list of property names");
      for (const json& name : required) {
        QUENCH_REQUIRE(name.is_string(), "JSON schema ", path, ": 'required' lists ", name.dump());
        const std::string quoted = json(name).dump();
        const std::string key = quoted.substr(1, quoted.size() - 2);
        size_t i = 0;
        while (i < node.property_keys.size() && node.property_keys[i] != key)
          ++i;
        QUENCH_REQUIRE(i < node.property_keys.size(), "JSON schema ", path, ": required property ",
                       quoted,
                       " is not in 'properties' (a required property must be listed there)");
        node.required |= uint64_t{1} << i;
      }
    }
    if (s.contains("additionalProperties")) {
      const json& additional = s.at("additionalProperties");
      node.additional = additional.is_boolean() && !additional.get<bool>()
                            ? JsonSchema::kNoNode
                            : compile(additional, path + "/additionalProperties");
    }
    if (s.contains("minProperties")) node.min_properties = count_keyword(s, "minProperties", path);
    if (s.contains("maxProperties")) node.max_properties = count_keyword(s, "maxProperties", path);
    compile_key_rules(s, path, listed_names, listed_schemas, node);
    const auto required = static_cast<int64_t>(__builtin_popcountll(node.required));
    QUENCH_REQUIRE(
        node.max_properties < 0 ||
            (node.min_properties <= node.max_properties && required <= node.max_properties),
        "JSON schema ", path, ": maxProperties ", node.max_properties, " is below minProperties ",
        node.min_properties, " or the ", required, " required properties");
    // The most keys an object may have: its listed properties that may appear, and the unlisted
    // keys (any number where additionalProperties allows them, else those the key automaton has).
    int64_t most = static_cast<int64_t>(node.property_keys.size()) -
                   static_cast<int64_t>(__builtin_popcountll(node.absent_keys));
    if (const KeyAutomaton* keys = node.key_automaton.get()) {
      most += keys->completions(keys->start()) -
              static_cast<int64_t>(__builtin_popcountll(keys->listed_reaching()));
    } else if (node.additional != JsonSchema::kNoNode) {
      most = KeyAutomaton::kCountCap;
    }
    QUENCH_REQUIRE(node.min_properties <= most, "JSON schema ", path, ": minProperties ",
                   node.min_properties, " exceeds the ", most,
                   " keys an object may have (additionalProperties, patternProperties and "
                   "propertyNames allow no more)");
  }

  // patternProperties and propertyNames: the key automaton (key_automaton.h) of the object's
  // unlisted keys; a listed property's value also meets the schemas of the patterns its name
  // matches, and a listed property that fails propertyNames may not appear.
  void compile_key_rules(const json& s, const std::string& path,
                         const std::vector<std::string>& listed_names,
                         const std::vector<json>& listed_schemas, JsonSchemaNode& node) {
    if (!s.contains("patternProperties") && !s.contains("propertyNames")) return;
    KeyAutomaton::Spec spec;
    std::vector<json> pattern_schemas;
    if (s.contains("patternProperties")) {
      const json& patterns = s.at("patternProperties");
      QUENCH_REQUIRE(patterns.is_object(), "JSON schema ", path,
                     ": 'patternProperties' must be an object of patterns and schemas");
      for (const auto& [pattern, schema] : patterns.items()) {
        spec.patterns.push_back(
            compile_key_pattern(pattern, false, str_cat(path, "/patternProperties/", pattern)));
        pattern_schemas.push_back(schema);
      }
    }
    bool any_key = true;  // propertyNames false (or no string): no key may appear
    if (s.contains("propertyNames"))
      any_key = compile_property_names(s.at("propertyNames"), path + "/propertyNames", spec);
    const std::string patterns_path = path + "/patternProperties";
    // The value of a key the patterns of `matched` match: the merge of their schemas.
    auto matched_schemas = [&](uint64_t matched) {
      std::vector<json> parts;
      for (size_t i = 0; i < pattern_schemas.size(); ++i)
        if (matched & (uint64_t{1} << i)) parts.push_back(pattern_schemas[i]);
      return parts;
    };
    for (size_t i = 0; i < node.property_keys.size(); ++i) {
      const std::string& name = listed_names[i];
      const uint64_t bit = uint64_t{1} << i;
      bool named = any_key;
      for (const auto& pattern : spec.names)
        named = named && pattern->matches(name);
      const auto length = static_cast<int64_t>(decode_utf8(name).size());
      named =
          named && length >= spec.min_length && (spec.max_length < 0 || length <= spec.max_length);
      uint64_t matched = 0;
      for (size_t p = 0; p < spec.patterns.size(); ++p)
        if (spec.patterns[p]->matches(name)) matched |= uint64_t{1} << p;
      const std::string at = str_cat(path, "/properties/", name);
      if (named && matched != 0) {
        std::vector<json> parts = {listed_schemas[i]};
        for (json& part : matched_schemas(matched))
          parts.push_back(std::move(part));
        const int32_t value = compile_conjunction(parts, at);
        if (value != JsonSchema::kNoNode) {
          node.property_nodes[i] = value;
        } else {
          named = false;
        }
      }
      if (named) continue;
      QUENCH_REQUIRE(!(node.required & bit), "JSON schema ", at,
                     ": a required property that propertyNames refuses, or whose schema and a "
                     "matching patternProperties schema admit no common value");
      node.absent_keys |= bit;
    }
    if (!any_key) {
      node.additional = JsonSchema::kNoNode;
      return;
    }
    spec.listed = listed_names;
    const int32_t additional = node.additional;
    spec.outcome = [&](uint64_t matched) {
      if (matched == 0) return additional;
      return compile_conjunction(matched_schemas(matched), patterns_path);
    };
    node.key_automaton = KeyAutomaton::build(spec, path);
    // Few keys in all: they become listed properties, so that each appears at most once (the
    // prefix does not remember which unlisted keys an object has had).
    const KeyAutomaton& keys = *node.key_automaton;
    const int64_t room = static_cast<int64_t>(JsonSchema::kMaxProperties) -
                         static_cast<int64_t>(node.property_keys.size()) +
                         __builtin_popcountll(keys.listed_reaching());
    const std::vector<std::string> finite = keys.finite_keys(room);
    if (finite.empty() && keys.completions(keys.start()) != 0) return;
    for (const std::string& key : finite) {
      if (std::find(listed_names.begin(), listed_names.end(), key) != listed_names.end()) continue;
      const std::string quoted = json(key).dump();
      node.property_keys.push_back(quoted.substr(1, quoted.size() - 2));
      node.property_nodes.push_back(keys.outcome_of(key));
    }
    node.additional = JsonSchema::kNoNode;
    node.key_automaton = nullptr;
  }

  // A key pattern: search semantics (patternProperties, propertyNames' pattern), or the whole key
  // (propertyNames' enum).
  static std::shared_ptr<const StringPattern> compile_key_pattern(const std::string& pattern,
                                                                  bool full_match,
                                                                  const std::string& path) {
    try {
      return StringPattern::compile(pattern, 0, -1, full_match);
    } catch (const Error& e) {
      throw Error(str_cat("JSON schema ", path, ": ", e.what()));
    }
  }

  // propertyNames: a string schema each key meets, as patterns and length bounds into `spec`.
  // False where no key may appear (the schema false, a type without string, an enum without a
  // string).
  static bool compile_property_names(const json& names, const std::string& path,
                                     KeyAutomaton::Spec& spec) {
    if (names.is_boolean()) return names.get<bool>();
    QUENCH_REQUIRE(names.is_object(), "JSON schema ", path,
                   ": 'propertyNames' must be a schema or a boolean");
    static const std::set<std::string> supported = {"type", "pattern", "minLength", "maxLength",
                                                    "enum", "const",   "format"};
    for (const auto& [key, value] : names.items()) {
      QUENCH_REQUIRE(supported.count(key) != 0 || annotates(key, value), "JSON schema ", path,
                     ": keyword '", key,
                     "' is not supported in propertyNames; supported: type, pattern, minLength, "
                     "maxLength, enum, const, format (date, time, date-time, uuid, ipv4, email)");
    }
    if (names.contains("type") && !(compile_types(names.at("type"), path) & kJsonString))
      return false;
    if (names.contains("minLength")) spec.min_length = count_keyword(names, "minLength", path);
    if (names.contains("maxLength")) spec.max_length = count_keyword(names, "maxLength", path);
    QUENCH_REQUIRE(spec.max_length < 0 || spec.min_length <= spec.max_length, "JSON schema ", path,
                   ": minLength ", spec.min_length, " exceeds maxLength ", spec.max_length);
    if (names.contains("pattern")) {
      QUENCH_REQUIRE(names.at("pattern").is_string(), "JSON schema ", path,
                     ": 'pattern' must be a string");
      spec.names.push_back(
          compile_key_pattern(names.at("pattern").get<std::string>(), false, path + "/pattern"));
    }
    if (names.contains("format") && !annotates("format", names.at("format"))) {
      spec.names.push_back(compile_key_pattern(
          string_format_pattern(names.at("format").get<std::string>()), false, path + "/format"));
    }
    if (names.contains("enum") || names.contains("const")) {
      QUENCH_REQUIRE(!(names.contains("enum") && names.contains("const")), "JSON schema ", path,
                     ": 'enum' and 'const' together are not supported");
      const json values =
          names.contains("const") ? json::array({names.at("const")}) : names.at("enum");
      QUENCH_REQUIRE(values.is_array() && !values.empty(), "JSON schema ", path,
                     ": 'enum' must be a non-empty list");
      std::string alternation;
      for (const json& v : values) {
        if (!v.is_string()) continue;  // never a key
        if (!alternation.empty()) alternation += '|';
        alternation += regex_literal(v.get<std::string>());
      }
      if (alternation.empty()) return false;
      spec.names.push_back(compile_key_pattern(alternation, true, path + "/enum"));
    }
    return true;
  }

  // The node of the values every schema of `parts` admits; kNoNode where none is (a pattern's
  // schema false forbids the keys it matches).
  int32_t compile_conjunction(const std::vector<json>& parts, const std::string& path) {
    for (const json& part : parts)
      if (part.is_boolean() && !part.get<bool>()) return JsonSchema::kNoNode;
    if (parts.size() == 1) return compile(parts[0], path);
    const std::optional<json> merged = merge_schemas(
        parts, [this](const std::string& ref) { return resolve_ref(ref); }, annotates, path);
    return merged ? compile(*merged, path) : JsonSchema::kNoNode;
  }

  // items (one schema), the tuple forms prefixItems (2020-12) and items as a list with
  // additionalItems (drafts 4-7), minItems and maxItems. Items past the tuple take `items` /
  // `additionalItems` (false: none past it).
  void compile_array(const json& s, const std::string& path, JsonSchemaNode& node) {
    const bool list_items = s.contains("items") && s.at("items").is_array();
    QUENCH_REQUIRE(!(list_items && s.contains("prefixItems")), "JSON schema ", path,
                   ": 'prefixItems' beside a list of 'items' (use one tuple form)");
    const char* tuple_key = list_items ? "items" : "prefixItems";
    const char* rest_key = list_items ? "additionalItems" : "items";
    if (s.contains(tuple_key)) {
      const json& tuple = s.at(tuple_key);
      QUENCH_REQUIRE(tuple.is_array(), "JSON schema ", path, ": '", tuple_key,
                     "' must be a list of schemas");
      for (size_t i = 0; i < tuple.size(); ++i)
        node.prefix_items.push_back(compile(tuple[i], str_cat(path, "/", tuple_key, "/", i)));
    }
    QUENCH_REQUIRE(!s.contains("additionalItems") || list_items, "JSON schema ", path,
                   ": 'additionalItems' needs 'items' as a list (or use prefixItems and items)");
    if (s.contains(rest_key)) {
      const json& rest = s.at(rest_key);
      QUENCH_REQUIRE(rest.is_object() || rest.is_boolean(), "JSON schema ", path, ": '", rest_key,
                     "' must be a schema or a boolean");
      if (rest.is_boolean() && !rest.get<bool>()) {
        node.max_items = static_cast<int64_t>(node.prefix_items.size());
      } else {
        node.items = compile(rest, path + "/" + rest_key);
      }
    }
    if (s.contains("minItems")) node.min_items = count_keyword(s, "minItems", path);
    if (s.contains("maxItems")) {
      const int64_t most = count_keyword(s, "maxItems", path);
      node.max_items = node.max_items >= 0 ? std::min(node.max_items, most) : most;
    }
    QUENCH_REQUIRE(
        node.max_items < 0 || node.min_items <= node.max_items, "JSON schema ", path, ": minItems ",
        node.min_items, " exceeds maxItems ", node.max_items,
        node.prefix_items.empty() ? "" : " (or the tuple's length, where no items may follow it)");
  }

  static constexpr int32_t kInProgress = -2;
  int depth_ = 0;  // compile() calls open
  const json& document_;
  std::shared_ptr<JsonSchema> schema_;
  std::map<std::string, int32_t> refs_;
  std::set<int32_t> in_progress_;  // nodes whose body is being compiled (their children first)
};

std::shared_ptr<const JsonSchema> JsonSchema::compile(const json& schema) {
  return JsonSchemaCompiler(schema).compile_root();
}

std::shared_ptr<const JsonSchema> JsonSchema::raw_text_schema(JsonSchemaNode text) {
  auto schema = std::make_shared<JsonSchema>();
  schema->nodes_.push_back(JsonSchemaNode{});  // kAnyNode
  text.types = kJsonString;
  text.object_node = text.array_node = text.string_node = text.number_node = 1;
  schema->nodes_.push_back(std::move(text));
  schema->root_ = 1;
  schema->raw_text_ = true;
  schema->id_ = next_schema_id.fetch_add(1);
  return schema;
}

std::shared_ptr<const JsonSchema> JsonSchema::text_pattern(const std::string& regex) {
  JsonSchemaNode text;
  text.pattern = StringPattern::compile(regex, 0, -1, /*full_match=*/true);
  return raw_text_schema(std::move(text));
}

std::shared_ptr<const JsonSchema> JsonSchema::text_grammar(const std::string& gbnf) {
  JsonSchemaNode text;
  text.grammar = Grammar::compile(gbnf);
  QUENCH_REQUIRE(GrammarPrefix(*text.grammar).started(), "grammar: its start needs more than ",
                 GrammarPrefix::kMaxStacks, " stacks or nests rules deeper than ",
                 GrammarPrefix::kMaxDepth, " before the first character");
  return raw_text_schema(std::move(text));
}

std::shared_ptr<const JsonSchema> JsonSchema::any_object() {
  static const std::shared_ptr<const JsonSchema> schema = compile(json{{"type", "object"}});
  return schema;
}

}  // namespace quench
