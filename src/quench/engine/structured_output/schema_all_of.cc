#include "quench/engine/structured_output/schema_all_of.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "quench/core/error.h"
#include "quench/engine/structured_output/number_bounds.h"

namespace quench {
namespace {

using json = nlohmann::json;

// Merges nest this deep at most: two recursive models merged into each other would not end.
constexpr int kMaxDepth = 32;
// anyOf distributed over another part's anyOf multiplies the alternatives.
constexpr size_t kMaxAlternatives = 64;

constexpr const char* kLowerBounds[] = {"minLength", "minItems", "minProperties", "minimum",
                                        "exclusiveMinimum"};
constexpr const char* kUpperBounds[] = {"maxLength", "maxItems", "maxProperties", "maximum",
                                        "exclusiveMaximum"};

bool is_one_of(const std::string& key, const char* const (&keys)[5]) {
  for (const char* k : keys)
    if (key == k) return true;
  return false;
}

// -1, 0, 1 for two JSON numbers, exactly.
int compare_numbers(const json& a, const json& b) {
  Decimal x, y;
  Decimal::parse(a.dump(), x);
  Decimal::parse(b.dump(), y);
  return compare(x, y);
}

std::vector<std::string> type_names(const json& type) {
  if (type.is_string()) return {type.get<std::string>()};
  std::vector<std::string> names;
  if (type.is_array()) {
    for (const json& t : type)
      if (t.is_string()) names.push_back(t.get<std::string>());
  }
  return names;
}

// The types both lists admit ("integer" lies within "number").
json intersect_types(const json& a, const json& b) {
  const std::vector<std::string> x = type_names(a), y = type_names(b);
  auto has = [](const std::vector<std::string>& v, const std::string& t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  json both = json::array();
  for (const std::string& t : x) {
    std::string common;
    if (has(y, t)) {
      common = t;
    } else if ((t == "integer" && has(y, "number")) || (t == "number" && has(y, "integer"))) {
      common = "integer";
    }
    if (!common.empty() && std::find(both.begin(), both.end(), common) == both.end())
      both.push_back(common);
  }
  return both.size() == 1 ? both[0] : both;
}

// A schema's enum and const as one list of allowed values; nullopt where it has neither.
std::optional<std::vector<json>> allowed_values(const json& s) {
  std::optional<std::vector<json>> values;
  if (s.contains("enum") && s.at("enum").is_array())
    values = std::vector<json>(s.at("enum").begin(), s.at("enum").end());
  if (s.contains("const")) {
    const json& c = s.at("const");
    if (!values || std::find(values->begin(), values->end(), c) != values->end()) {
      values = std::vector<json>{c};
    } else {
      values = std::vector<json>{};
    }
  }
  return values;
}

json without(json s, const char* key) {
  s.erase(key);
  return s;
}

class AllOfMerger {
 public:
  AllOfMerger(const SchemaRefResolver& resolve, const SchemaAnnotationTest& annotates)
      : resolve_(resolve), annotates_(annotates) {}

  // The schema of the values both admit; nullopt where none is (the merge found it out from
  // types, enum values or required keys; other contradictions are the compiler's to report).
  std::optional<json> merge(const json& first, const json& second, const std::string& where,
                            int depth) {
    QUENCH_REQUIRE(depth <= kMaxDepth, "JSON schema ", where, ": allOf's parts nest deeper than ",
                   kMaxDepth,
                   " levels (recursive models merged into each other are not supported)");
    // A part that admits anything changes nothing (and a recursive model merged with one is not
    // expanded again).
    auto admits_anything = [](const json& s) {
      return (s.is_boolean() && s.get<bool>()) || (s.is_object() && s.empty());
    };
    if (admits_anything(second) || first == second) return first;
    if (admits_anything(first)) return second;
    const json a = expand(first, where, depth), b = expand(second, where, depth);
    if (a.is_boolean()) return a.get<bool>() ? std::optional<json>(b) : std::nullopt;
    if (b.is_boolean()) return b.get<bool>() ? std::optional<json>(a) : std::nullopt;
    QUENCH_REQUIRE(a.is_object() && b.is_object(), "JSON schema ", where,
                   ": a schema must be an object or a boolean");
    if (auto distributed = distribute(a, b, where, depth)) return *distributed;
    if (auto distributed = distribute(b, a, where, depth)) return *distributed;
    return merge_plain(a, b, where, depth);
  }

  // Why the last merge that admitted nothing did not (for the error, where it reaches the top).
  const std::string& reason() const { return reason_; }

 private:
  // The schema with its top-level $ref and allOf merged in (false where they admit nothing).
  json expand(const json& s, const std::string& where, int depth) {
    if (!s.is_object()) return s;
    if (s.contains("$ref")) {
      QUENCH_REQUIRE(s.at("$ref").is_string(), "JSON schema ", where, ": '$ref' must be a string");
      const std::string ref = s.at("$ref").get<std::string>();
      const json* target = resolve_(ref);
      QUENCH_REQUIRE(target != nullptr, "JSON schema ", where, ": '$ref' ", ref,
                     " does not resolve; allowed: \"#\", \"#/$defs/NAME\" or "
                     "\"#/definitions/NAME\" of this document");
      return merge(*target, without(s, "$ref"), where, depth + 1).value_or(json(false));
    }
    if (s.contains("allOf")) {
      const json& parts = s.at("allOf");
      QUENCH_REQUIRE(parts.is_array() && !parts.empty(), "JSON schema ", where,
                     ": 'allOf' must be a non-empty list of schemas");
      std::optional<json> merged = without(s, "allOf");
      for (size_t i = 0; i < parts.size() && merged; ++i)
        merged = merge(*merged, parts[i], str_cat(where, "/allOf/", i), depth + 1);
      return merged.value_or(json(false));
    }
    return s;
  }

  // anyOf / oneOf in `a`: each alternative merged with the rest of `a` and with `b`; those that
  // admit nothing dropped. nullopt where `a` has neither keyword.
  std::optional<std::optional<json>> distribute(const json& a, const json& b,
                                                const std::string& where, int depth) {
    const bool any_of = a.contains("anyOf"), one_of = a.contains("oneOf");
    if (!any_of && !one_of) return std::nullopt;
    QUENCH_REQUIRE(!(any_of && one_of), "JSON schema ", where,
                   ": 'anyOf' and 'oneOf' together are not supported");
    const char* keyword = any_of ? "anyOf" : "oneOf";
    const json& alternatives = a.at(keyword);
    QUENCH_REQUIRE(alternatives.is_array() && !alternatives.empty(), "JSON schema ", where, ": '",
                   keyword, "' must be a non-empty list of schemas");
    const json rest = without(a, keyword);
    json kept = json::array();
    for (size_t i = 0; i < alternatives.size(); ++i) {
      const std::string at = str_cat(where, "/", keyword, "/", i);
      std::optional<json> m = merge(rest, alternatives[i], at, depth + 1);
      if (m) m = merge(*m, b, at, depth + 1);
      if (m) kept.push_back(std::move(*m));
      QUENCH_REQUIRE(kept.size() <= kMaxAlternatives, "JSON schema ", where,
                     ": allOf over anyOf / oneOf makes more than ", kMaxAlternatives,
                     " alternatives");
    }
    if (kept.empty()) return std::optional<json>{};
    if (kept.size() == 1) return std::optional<json>(kept[0]);
    return std::optional<json>(json{{keyword, kept}});
  }

  std::optional<json> merge_plain(const json& a, const json& b, const std::string& where,
                                  int depth) {
    json result = a;
    for (const auto& [key, vb] : b.items()) {
      if (key == "properties" || key == "additionalProperties" || key == "required" ||
          key == "items" || key == "enum" || key == "const")
        continue;  // merged below
      if (!result.contains(key)) {
        result[key] = vb;
        continue;
      }
      const json& va = result.at(key);
      if (va == vb || (annotates_(key, va) && annotates_(key, vb))) continue;
      if (key == "type") {
        result[key] = intersect_types(va, vb);
        if (result[key].empty())
          return no_value(
              str_cat(where, ": types ", va.dump(), " and ", vb.dump(), " meet nowhere"));
      } else if ((is_one_of(key, kLowerBounds) || is_one_of(key, kUpperBounds)) && va.is_number() &&
                 vb.is_number()) {
        const bool larger = compare_numbers(vb, va) > 0;
        if (larger == is_one_of(key, kLowerBounds)) result[key] = vb;
      } else {
        throw Error(str_cat("JSON schema ", where, ": allOf's parts give '", key,
                            "' different values (", va.dump(), " and ", vb.dump(),
                            "); only equal ones are merged"));
      }
    }
    // enum / const: the values both allow.
    const auto values_a = allowed_values(a), values_b = allowed_values(b);
    if (values_a || values_b) {
      std::vector<json> common = values_a ? *values_a : *values_b;
      if (values_a && values_b) {
        std::erase_if(common, [&](const json& v) {
          return std::find(values_b->begin(), values_b->end(), v) == values_b->end();
        });
      }
      if (common.empty()) return no_value(str_cat(where, ": no enum / const value is common"));
      result.erase("const");
      result["enum"] = common;
    }
    if (!merge_object(a, b, where, depth, result)) return std::nullopt;
    merge_items(a, b, where, depth, result);
    return result;
  }

  // properties / additionalProperties / required. False where no object meets both.
  bool merge_object(const json& a, const json& b, const std::string& where, int depth,
                    json& result) {
    auto has_any = [](const json& s) {
      return s.contains("properties") || s.contains("additionalProperties") ||
             s.contains("required") || s.contains("patternProperties") ||
             s.contains("propertyNames");
    };
    if (!has_any(a) && !has_any(b)) return true;
    // Which keys a part's additionalProperties covers depends on its patternProperties, so a
    // part with key rules merges only with parts that say nothing of keys.
    auto has_key_rules = [](const json& s) {
      return s.contains("patternProperties") || s.contains("propertyNames");
    };
    if (has_any(a) && has_any(b) && (has_key_rules(a) || has_key_rules(b))) {
      throw Error(str_cat("JSON schema ", where,
                          ": allOf's parts both constrain an object's keys, one with "
                          "patternProperties / propertyNames; these are merged only with parts "
                          "without properties, additionalProperties or required"));
    }
    const json empty = json::object();
    const json& listed_a = a.contains("properties") ? a.at("properties") : empty;
    const json& listed_b = b.contains("properties") ? b.at("properties") : empty;
    QUENCH_REQUIRE(listed_a.is_object() && listed_b.is_object(), "JSON schema ", where,
                   ": 'properties' must be an object");
    const json rest_a = a.value("additionalProperties", json(true));
    const json rest_b = b.value("additionalProperties", json(true));
    const json rest =
        merge(rest_a, rest_b, where + "/additionalProperties", depth + 1).value_or(json(false));
    const bool rest_closed = rest.is_boolean() && !rest.get<bool>();
    // Each key listed by either part: what the first says of it, merged with the second's.
    json properties = json::object();
    std::vector<std::string> keys;
    for (const auto& [key, _] : listed_a.items())
      keys.push_back(key);
    for (const auto& [key, _] : listed_b.items())
      if (!listed_a.contains(key)) keys.push_back(key);
    for (const std::string& key : keys) {
      const json& sa = listed_a.contains(key) ? listed_a.at(key) : rest_a;
      const json& sb = listed_b.contains(key) ? listed_b.at(key) : rest_b;
      const std::string at = str_cat(where, "/properties/", key);
      std::optional<json> m = merge(sa, sb, at, depth + 1);
      if (!m) {
        // The key may not appear: left out, where the merged parts take no other keys either.
        QUENCH_REQUIRE(rest_closed, "JSON schema ", at,
                       ": allOf's parts admit no common value for this property, while other "
                       "keys are allowed (not expressible here: make additionalProperties false)");
        continue;
      }
      properties[key] = std::move(*m);
    }
    json required = json::array();
    for (const json* side : {&a, &b}) {
      if (!side->contains("required")) continue;
      const json& list = side->at("required");
      QUENCH_REQUIRE(list.is_array(), "JSON schema ", where,
                     ": 'required' must be a list of property names");
      for (const json& name : list) {
        QUENCH_REQUIRE(name.is_string(), "JSON schema ", where,
                       ": 'required' must be a list of property names");
        if (std::find(required.begin(), required.end(), name) != required.end()) continue;
        const std::string key = name.get<std::string>();
        const bool listed = listed_a.contains(key) || listed_b.contains(key);
        if (listed ? !properties.contains(key) : rest_closed) {  // required, yet may not appear
          no_value(str_cat(where, ": required property '", key,
                           "' is one another part forbids (its additionalProperties)"));
          return false;
        }
        required.push_back(name);
      }
    }
    result.erase("properties");
    result.erase("additionalProperties");
    result.erase("required");
    if (!properties.empty()) result["properties"] = std::move(properties);
    if (a.contains("additionalProperties") || b.contains("additionalProperties"))
      result["additionalProperties"] = rest;
    if (!required.empty()) result["required"] = std::move(required);
    return true;
  }

  // items: one schema each, merged; a tuple's items list only where equal.
  void merge_items(const json& a, const json& b, const std::string& where, int depth,
                   json& result) {
    if (!a.contains("items") || !b.contains("items")) {
      if (b.contains("items")) result["items"] = b.at("items");
      return;
    }
    const json &ia = a.at("items"), &ib = b.at("items");
    if (ia == ib) return;
    QUENCH_REQUIRE(!ia.is_array() && !ib.is_array(), "JSON schema ", where,
                   ": allOf's parts give 'items' different tuples; only equal ones are merged");
    const std::optional<json> m = merge(ia, ib, where + "/items", depth + 1);
    // Items that admit nothing leave only the empty array.
    if (m) {
      result["items"] = *m;
    } else {
      result.erase("items");
      result["maxItems"] = 0;
    }
  }

  std::nullopt_t no_value(std::string reason) {
    reason_ = std::move(reason);
    return std::nullopt;
  }

  const SchemaRefResolver& resolve_;
  const SchemaAnnotationTest& annotates_;
  std::string reason_;
};

}  // namespace

json merge_all_of(const json& schema, const SchemaRefResolver& resolve,
                  const SchemaAnnotationTest& annotates, const std::string& path) {
  const json& parts = schema.at("allOf");
  QUENCH_REQUIRE(parts.is_array() && !parts.empty(), "JSON schema ", path,
                 ": 'allOf' must be a non-empty list of schemas");
  AllOfMerger merger(resolve, annotates);
  std::optional<json> merged = without(schema, "allOf");
  for (size_t i = 0; i < parts.size(); ++i) {
    merged = merger.merge(*merged, parts[i], str_cat(path, "/allOf/", i), 0);
    QUENCH_REQUIRE(merged.has_value(), "JSON schema ", path,
                   ": allOf's parts admit no common value (from part ", i, " on: ", merger.reason(),
                   ")");
  }
  // All parts true: any value.
  return merged->is_boolean() ? json::object() : *merged;
}

std::optional<json> merge_schemas(const std::vector<json>& parts, const SchemaRefResolver& resolve,
                                  const SchemaAnnotationTest& annotates, const std::string& path) {
  QUENCH_REQUIRE(!parts.empty(), "JSON schema ", path, ": no schemas to merge");
  AllOfMerger merger(resolve, annotates);
  std::optional<json> merged = parts[0];
  for (size_t i = 1; i < parts.size() && merged; ++i)
    merged = merger.merge(*merged, parts[i], path, 0);
  if (merged && merged->is_boolean()) {
    if (!merged->get<bool>()) return std::nullopt;
    return json::object();
  }
  return merged;
}

}  // namespace quench
