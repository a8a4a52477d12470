#include "quench/server/jinja/globals.h"

#include <cmath>
#include <ctime>

#include "quench/core/error.h"
#include "quench/server/jinja/template_error.h"

namespace quench::jinja {
namespace {

int64_t int_of(const Value& v, const char* what) {
  QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()) && !v.json().is_number_float(), "range() ",
                 what, " must be an integer, got ", type_name(v));
  return as_int(v.json());
}

Value range(const CallArgs& a) {
  a.check("range", 3, {});
  QUENCH_REQUIRE(!a.positional.empty(), "range() needs at least one argument");
  int64_t start = 0, stop = 0, step = 1;
  if (a.positional.size() == 1) {
    stop = int_of(a.positional[0], "stop");
  } else {
    start = int_of(a.positional[0], "start");
    stop = int_of(a.positional[1], "stop");
    if (a.positional.size() == 3) step = int_of(a.positional[2], "step");
  }
  QUENCH_REQUIRE(step != 0, "range() step must not be zero");
  const double length = std::ceil(static_cast<double>(stop - start) / static_cast<double>(step));
  QUENCH_REQUIRE(length <= static_cast<double>(kMaxRangeLength), "range() of ", length,
                 " elements is longer than the limit of ", kMaxRangeLength);
  Json out = Json::array();
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(i);
  return Value(std::move(out));
}

Value make_namespace(const CallArgs& a) {
  auto object = std::make_shared<Object>();
  object->assignable = true;
  for (const Value& initial : a.positional) {
    QUENCH_REQUIRE(initial.is_dict(), "namespace() takes keyword arguments or a dict, got ",
                   type_name(initial));
    for (const auto& [key, value] : initial.json().items())
      object->attributes[key] = Value(value);
  }
  for (const auto& [key, value] : a.keyword)
    object->attributes[key] = value;
  return Value::object(std::move(object));
}

Value make_dict(const CallArgs& a) {
  Json out = Json::object();
  for (const Value& initial : a.positional) {
    QUENCH_REQUIRE(initial.is_dict(), "dict() takes keyword arguments or a dict");
    for (const auto& [key, value] : initial.json().items())
      out[key] = value;
  }
  for (const auto& [key, value] : a.keyword)
    out[key] = value.to_json();
  return Value(std::move(out));
}

Value raise_exception(const CallArgs& a) {
  const Value* message = a.find(0, "message");
  throw RaisedError(message ? to_str(*message) : std::string("raise_exception() called"));
}

Value strftime_now(const CallArgs& a) {
  const Value* format = a.find(0, "format");
  QUENCH_REQUIRE(format != nullptr && format->is_string(), "strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), format->str().c_str(), &local);
  return Value(std::string(buf, n));
}

}  // namespace

std::optional<Value> find_global(const std::string& name) {
  if (name == "range") return Value::callable("range", range);
  if (name == "namespace") return Value::callable("namespace", make_namespace);
  if (name == "dict") return Value::callable("dict", make_dict);
  if (name == "raise_exception") return Value::callable("raise_exception", raise_exception);
  if (name == "strftime_now") return Value::callable("strftime_now", strftime_now);
  return std::nullopt;
}

}  // namespace quench::jinja
