#include "quench/server/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "quench/core/error.h"
#include "quench/server/jinja/text.h"

namespace quench::jinja {

const Value* CallArgs::find(size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [key, value] : keyword)
    if (key == name) return &value;
  return nullptr;
}

void CallArgs::check(const char* function, size_t max_positional,
                     std::initializer_list<const char*> names) const {
  QUENCH_REQUIRE(positional.size() <= max_positional, function, "() takes at most ", max_positional,
                 " positional arguments, got ", positional.size());
  for (const auto& kw : keyword) {
    bool known = false;
    std::string allowed;
    for (const char* name : names) {
      known = known || kw.first == name;
      allowed += allowed.empty() ? name : std::string(", ") + name;
    }
    QUENCH_REQUIRE(known, function, "() got an unexpected keyword argument '", kw.first,
                   "'; allowed: ", allowed.empty() ? "none" : allowed);
  }
}

Value Value::undefined(std::string hint) {
  Value v;
  v.hint_ = std::move(hint);
  return v;
}

Value Value::object(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::move(object);
  return v;
}

Value Value::callable(std::string name, std::function<Value(const CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

Json Value::to_json() const {
  switch (kind_) {
    case Kind::kData:
      return *data_;
    case Kind::kUndefined:
      return nullptr;
    case Kind::kObject:
      fail("a namespace or loop object cannot be stored in a list or dict");
    case Kind::kCallable:
      fail(str_cat("function '", callable_->name, "' cannot be stored"));
  }
  return nullptr;
}

std::string type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "NoneType";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::string:
      return "str";
    case Json::value_t::array:
      return "list";
    case Json::value_t::object:
      return "dict";
    case Json::value_t::number_float:
      return "float";
    default:
      return "int";
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kObject:
      return "Namespace";
    case Value::Kind::kCallable:
      return "function";
    case Value::Kind::kData:
      break;
  }
  return type_name(v.json());
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kObject:
    case Value::Kind::kCallable:
      return true;
    case Value::Kind::kData:
      break;
  }
  const Json& j = v.json();
  switch (j.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return j.get<bool>();
    case Json::value_t::string:
      return !j.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object:
      return !j.empty();
    case Json::value_t::number_float:
      return j.get<double>() != 0.0;
    default:
      return as_int(j) != 0;
  }
}

std::string repr(const Json& j) {
  if (j.is_string()) return py_string_repr(j.get_ref<const std::string&>());
  return to_str(j);
}

std::string to_str(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return j.get<bool>() ? "True" : "False";
    case Json::value_t::string:
      return j.get<std::string>();
    case Json::value_t::number_float:
      return py_float_repr(j.get<double>());
    case Json::value_t::number_unsigned:
      return std::to_string(j.get<uint64_t>());
    case Json::value_t::number_integer:
      return std::to_string(j.get<int64_t>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i)
        out += (i ? ", " : "") + repr(j[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : j.items()) {
        out += (first ? "" : ", ") + py_string_repr(key) + ": " + repr(value);
        first = false;
      }
      return out + "}";
    }
    default:
      return "";
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kObject:
      return "<Namespace>";
    case Value::Kind::kCallable:
      return str_cat("<function ", v.callable_ptr()->name, ">");
    case Value::Kind::kData:
      break;
  }
  return to_str(v.json());
}

bool is_numeric(const Json& j) {
  return j.is_number() || j.is_boolean();
}

double as_double(const Json& j) {
  if (j.is_boolean()) return j.get<bool>() ? 1.0 : 0.0;
  return j.get<double>();
}

int64_t as_int(const Json& j) {
  if (j.is_boolean()) return j.get<bool>() ? 1 : 0;
  if (j.is_number_float()) return static_cast<int64_t>(j.get<double>());
  if (j.is_number_unsigned()) return static_cast<int64_t>(j.get<uint64_t>());
  return j.get<int64_t>();
}

bool equal(const Json& a, const Json& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_number_float() || b.is_number_float()) return as_double(a) == as_double(b);
    return as_int(a) == as_int(b);
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      const auto it = b.find(key);
      if (it == b.end() || !equal(value, *it)) return false;
    }
    return true;
  }
  return a == b;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_data() && b.is_data()) return equal(a.json(), b.json());
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.kind() == Value::Kind::kObject && b.kind() == Value::Kind::kObject)
    return a.object_ptr() == b.object_ptr();
  return a.kind() == b.kind() && a.callable_ptr() == b.callable_ptr();
}

bool less(const Json& a, const Json& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_number_float() || b.is_number_float()) return as_double(a) < as_double(b);
    return as_int(a) < as_int(b);
  }
  if (a.is_string() && b.is_string())
    return a.get_ref<const std::string&>() < b.get_ref<const std::string&>();
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!equal(a[i], b[i])) return less(a[i], b[i]);
    }
    return a.size() < b.size();
  }
  fail(str_cat("'<' not supported between instances of '", type_name(a), "' and '", type_name(b),
               "'"));
}

namespace {

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void dump(const Json& j, const JsonDumpOptions& o, int64_t depth, std::string& out) {
  const bool pretty = o.indent >= 0 || !o.indent_text.empty();
  auto newline = [&](int64_t level) {
    out += '\n';
    for (int64_t i = 0; i < level; ++i)
      out +=
          o.indent_text.empty() ? std::string(static_cast<size_t>(o.indent), ' ') : o.indent_text;
  };
  switch (j.type()) {
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::boolean:
      out += j.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::string:
      dump_string(j.get_ref<const std::string&>(), out);
      return;
    case Json::value_t::number_float: {
      const double d = j.get<double>();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        out += py_float_repr(d);
      }
      return;
    }
    case Json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out += o.item_separator;
        if (pretty) newline(depth + 1);
        dump(j[i], o, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += ']';
      return;
    }
    case Json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Json*>> items;
      for (const auto& [key, value] : j.items())
        items.emplace_back(key, &value);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (pretty) newline(depth + 1);
        dump_string(items[i].first, out);
        out += o.key_separator;
        dump(*items[i].second, o, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += '}';
      return;
    }
    default:
      out += to_str(j);
      return;
  }
}

}  // namespace

std::string py_json_dumps(const Json& j, const JsonDumpOptions& options) {
  std::string out;
  dump(j, options, 0, out);
  return out;
}

}  // namespace quench::jinja
