// The `is` tests (`x is defined`, `n is divisibleby 3`, ...) with jinja2's meanings, also used by
// the select/reject/selectattr/rejectattr filters.
#pragma once

#include <string>

#include "quench/server/jinja/value.h"

namespace quench::jinja {

// Throws quench::Error for an unknown test, listing the known ones.
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

// Python's `item in container`: substring, list element or dict key; undefined contains nothing.
bool value_in(const Value& container, const Value& item);

}  // namespace quench::jinja
