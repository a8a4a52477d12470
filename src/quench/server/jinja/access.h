// `x.name` and `x[key]` with jinja2's lookup rules: attribute access tries Python's attribute
// first (the str/dict/list methods templates call, bound to their object) and then the item;
// subscription tries the item first. A missing key, index or attribute is Undefined; using
// Undefined further (its attribute, its item) raises, as jinja2's default Undefined does.
// Slices follow Python's rules on lists and on strings (by code point).
#pragma once

#include <optional>
#include <string>

#include "quench/server/jinja/value.h"

namespace quench::jinja {

Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);
Value get_slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step);

// Elements as a for loop sees them: list items, dict keys, string code points; undefined is
// empty. Throws for anything else.
std::vector<Json> iterate(const Value& v);

}  // namespace quench::jinja
