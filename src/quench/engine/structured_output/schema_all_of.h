// Structured output: allOf of several schemas, merged into the one schema that admits exactly
// the values every part admits, before it is compiled (JsonSchema's node graph follows one schema
// per value). OpenAPI's composition writes models this way: allOf [{"$ref": Base}, {"properties":
// {...}}].
//
// The merge is exact or refused, never loose:
//   - type: the intersection (integer within number); enum / const: the common values;
//   - required: the union; properties: per key, the merge of what each part says of that key
//     (its listed schema, else its additionalProperties, else anything): a part with
//     additionalProperties false forbids the other parts' extra keys, as JSON Schema reads it;
//     additionalProperties: the merge of the parts';
//   - min* keywords: the larger, max* keywords: the smaller (bounds compared exactly);
//   - items (one schema): the merge; anyOf / oneOf: distributed over the alternatives, an
//     alternative that cannot meet the other parts dropped;
//   - $ref and nested allOf: resolved and merged;
//   - annotations: the first part's;
//   - anything else (two different patterns, formats, multipleOf, tuples): equal in every part
//     that has it, or refused by name, with its place.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace quench {

// The target of a "$ref" string in the document being compiled; null where it does not resolve.
using SchemaRefResolver = std::function<const nlohmann::json*(const std::string& ref)>;
// Whether a keyword only describes (accepted, not enforced: title, description, ...).
using SchemaAnnotationTest = std::function<bool(const std::string& key, const nlohmann::json&)>;

// `schema` holds "allOf" (a list of schemas) and maybe other keywords beside it, which count as
// one more part. Returns the merged schema (no allOf at its top). Throws quench::Error naming the
// keyword that cannot be merged, or saying that the parts admit no common value, at `path`.
nlohmann::json merge_all_of(const nlohmann::json& schema, const SchemaRefResolver& resolve,
                            const SchemaAnnotationTest& annotates, const std::string& path);

// The schema of the values every one of `parts` admits, merged as merge_all_of does; nullopt where
// they admit no common value (patternProperties' schemas of one key, a listed property's schema
// and a pattern's). Throws quench::Error where a keyword cannot be merged exactly.
std::optional<nlohmann::json> merge_schemas(const std::vector<nlohmann::json>& parts,
                                            const SchemaRefResolver& resolve,
                                            const SchemaAnnotationTest& annotates,
                                            const std::string& path);

}  // namespace quench
