#include "quench/server/jinja/tests.h"

#include <cmath>
#include <functional>
#include <unordered_map>

#include "quench/core/error.h"
#include "quench/server/jinja/text.h"

namespace quench::jinja {
namespace {

using TestFn = std::function<bool(const Value&, const CallArgs&)>;

const Value& required(const CallArgs& args, const char* test) {
  const Value* v = args.find(0, "value");
  QUENCH_REQUIRE(v != nullptr, "test '", test, "' needs an argument");
  return *v;
}

Json data_of(const Value& v, const char* test) {
  QUENCH_REQUIRE(v.is_data(), "test '", test, "' cannot compare a ", type_name(v));
  return v.json();
}

bool contains(const Value& container, const Value& item);

int64_t integer_of(const Value& v, const char* test) {
  QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()), "test '", test, "' needs a number, got ",
                 type_name(v));
  return as_int(v.json());
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const auto* table = new std::unordered_map<std::string, TestFn>{
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.is_bool() && v.json().get<bool>(); }},
      {"false",
       [](const Value& v, const CallArgs&) { return v.is_bool() && !v.json().get<bool>(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.is_integer(); }},
      {"float",
       [](const Value& v, const CallArgs&) { return v.is_data() && v.json().is_number_float(); }},
      {"number",
       [](const Value& v, const CallArgs&) { return v.is_data() && is_numeric(v.json()); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_dict(); }},
      {"iterable",
       [](const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence",
       [](const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"callable",
       [](const Value& v, const CallArgs&) { return v.kind() == Value::Kind::kCallable; }},
      {"odd", [](const Value& v, const CallArgs&) { return integer_of(v, "odd") % 2 != 0; }},
      {"even", [](const Value& v, const CallArgs&) { return integer_of(v, "even") % 2 == 0; }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const int64_t d = integer_of(required(a, "divisibleby"), "divisibleby");
         QUENCH_REQUIRE(d != 0, "divisibleby 0");
         return integer_of(v, "divisibleby") % d == 0;
       }},
      {"lower",
       [](const Value& v, const CallArgs&) {
         return v.is_string() && ascii_lower(v.str()) == v.str() && ascii_upper(v.str()) != v.str();
       }},
      {"upper",
       [](const Value& v, const CallArgs&) {
         return v.is_string() && ascii_upper(v.str()) == v.str() && ascii_lower(v.str()) != v.str();
       }},
      {"eq", [](const Value& v, const CallArgs& a) { return equal(v, required(a, "eq")); }},
      {"ne", [](const Value& v, const CallArgs& a) { return !equal(v, required(a, "ne")); }},
      {"lt",
       [](const Value& v, const CallArgs& a) {
         return less(data_of(v, "lt"), data_of(required(a, "lt"), "lt"));
       }},
      {"gt",
       [](const Value& v, const CallArgs& a) {
         return less(data_of(required(a, "gt"), "gt"), data_of(v, "gt"));
       }},
      {"le",
       [](const Value& v, const CallArgs& a) {
         return !less(data_of(required(a, "le"), "le"), data_of(v, "le"));
       }},
      {"ge",
       [](const Value& v, const CallArgs& a) {
         return !less(data_of(v, "ge"), data_of(required(a, "ge"), "ge"));
       }},
      {"in", [](const Value& v, const CallArgs& a) { return contains(required(a, "in"), v); }},
      {"sameas",
       [](const Value& v, const CallArgs& a) {
         const Value& other = required(a, "sameas");
         if (v.is_data() && other.is_data())
           return v.json().type() == other.json().type() && equal(v, other);
         return equal(v, other);
       }},
  };
  return *table;
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  QUENCH_REQUIRE(container.is_data(), "argument of type '", type_name(container),
                 "' is not iterable");
  const Json& c = container.json();
  if (c.is_string()) {
    QUENCH_REQUIRE(item.is_string(), "'in <string>' requires string as left operand, not ",
                   type_name(item));
    return c.get_ref<const std::string&>().find(item.str()) != std::string::npos;
  }
  if (c.is_array()) {
    if (!item.is_data()) return false;
    for (const Json& x : c)
      if (equal(x, item.json())) return true;
    return false;
  }
  if (c.is_object()) return item.is_string() && c.contains(item.str());
  fail(str_cat("argument of type '", type_name(c), "' is not iterable"));
}

}  // namespace

bool value_in(const Value& container, const Value& item) {
  return contains(container, item);
}

bool apply_test(const std::string& name, const Value& value, const CallArgs& args) {
  static const std::unordered_map<std::string, std::string> kAliases = {
      {"==", "eq"},       {"equalto", "eq"}, {"!=", "ne"},   {"<", "lt"},
      {"lessthan", "lt"}, {"<=", "le"},      {">", "gt"},    {"greaterthan", "gt"},
      {">=", "ge"},       {"escaped", ""},   {"filter", ""}, {"test", ""}};
  std::string key = name;
  if (const auto alias = kAliases.find(name); alias != kAliases.end()) key = alias->second;
  const auto it = tests().find(key);
  if (it == tests().end()) {
    std::string known;
    for (const char* n :
         {"defined", "undefined", "none",        "boolean", "true",     "false",    "integer",
          "float",   "number",    "string",      "mapping", "iterable", "sequence", "callable",
          "odd",     "even",      "divisibleby", "lower",   "upper",    "eq",       "ne",
          "lt",      "le",        "gt",          "ge",      "in",       "sameas"})
      known += (known.empty() ? "" : ", ") + std::string(n);
    fail(str_cat("unknown test '", name, "'; known: ", known));
  }
  return it->second(value, args);
}

}  // namespace quench::jinja
