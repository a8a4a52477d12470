// The binary operators with Python's semantics: + - * / // % ** on numbers (bool counts as an
// int, int op float gives float, / always float, // and % floor), + on strings and lists,
// * repeating them, % formatting a string, ~ concatenating str() of both sides, comparisons,
// and (not) in. Undefined operands raise as jinja2's Undefined does, except for ~ and ==.
#pragma once

#include <string>

#include "quench/server/jinja/value.h"

namespace quench::jinja {

// Results larger than this many bytes are refused (a guard against `'x' * 10**12`).
constexpr size_t kMaxValueBytes = size_t{64} << 20;

Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);

}  // namespace quench::jinja
