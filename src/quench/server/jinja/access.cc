#include "quench/server/jinja/access.h"

#include <algorithm>

#include "quench/core/error.h"
#include "quench/server/jinja/text.h"

namespace quench::jinja {
namespace {

std::string arg_str(const CallArgs& a, size_t index, const char* name, const char* method) {
  const Value* v = a.find(index, name);
  QUENCH_REQUIRE(v != nullptr && v->is_string(), method, "() needs a string argument '", name, "'");
  return v->str();
}

bool has_arg(const CallArgs& a, size_t index, const char* name) {
  const Value* v = a.find(index, name);
  return v != nullptr && !v->is_none();
}

int64_t arg_int(const CallArgs& a, size_t index, const char* name, int64_t fallback) {
  const Value* v = a.find(index, name);
  if (v == nullptr || v->is_none()) return fallback;
  QUENCH_REQUIRE(v->is_data() && is_numeric(v->json()) && !v->json().is_number_float(),
                 "argument '", name, "' must be an integer, got ", type_name(*v));
  return as_int(v->json());
}

Json string_list(const std::vector<std::string>& parts) {
  Json out = Json::array();
  for (const std::string& p : parts)
    out.push_back(p);
  return out;
}

// Python's str.format with {} / {0} / {name} fields and {{ }} escapes; no format specs.
std::string py_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = fmt.find('}', i);
      QUENCH_REQUIRE(close != std::string::npos, "format(): unmatched '{' in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      QUENCH_REQUIRE(field.find_first_of(":!.[") == std::string::npos, "format(): field '{", field,
                     "}' is not supported; use {}, {0} or {name}");
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < a.positional.size() ? &a.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (std::all_of(field.begin(), field.end(),
                             [](char d) { return d >= '0' && d <= '9'; })) {
        const size_t index = std::stoul(field);
        v = index < a.positional.size() ? &a.positional[index] : nullptr;
      } else {
        for (const auto& [key, value] : a.keyword)
          if (key == field) v = &value;
      }
      QUENCH_REQUIRE(v != nullptr, "format(): no argument for field '{", field, "}'");
      out += to_str(*v);
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

bool all_code_points(const std::string& s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}

// starts/endswith with a string or a list (tuple) of candidates.
bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.str());
  QUENCH_REQUIRE(affix.is_list(), prefix ? "startswith" : "endswith",
                 "() needs a string or a list of strings");
  for (const Json& a : affix.json())
    if (a.is_string() && one(a.get<std::string>())) return true;
  return false;
}

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  using Fn = std::function<Value(const CallArgs&)>;
  Fn fn;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    fn = [s, left, right, name](const CallArgs& a) {
      a.check(name.c_str(), 1, {"chars"});
      if (!has_arg(a, 0, "chars")) return Value(py_strip(s, left, right));
      return Value(py_strip(s, left, right, arg_str(a, 0, "chars", name.c_str()), true));
    };
  } else if (name == "split" || name == "rsplit") {
    fn = [s, name](const CallArgs& a) {
      a.check(name.c_str(), 2, {"sep", "maxsplit"});
      const bool sep_given = has_arg(a, 0, "sep");
      const std::string sep = sep_given ? arg_str(a, 0, "sep", "split") : "";
      QUENCH_REQUIRE(!sep_given || !sep.empty(), "split(): empty separator");
      const int64_t maxsplit = arg_int(a, 1, "maxsplit", -1);
      QUENCH_REQUIRE(name == "split" || maxsplit < 0, "rsplit() with maxsplit is not supported");
      return Value(string_list(py_split(s, sep, sep_given, maxsplit)));
    };
  } else if (name == "splitlines") {
    fn = [s](const CallArgs& a) {
      a.check("splitlines", 0, {});
      return Value(string_list(py_splitlines(s)));
    };
  } else if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    fn = [s, prefix](const CallArgs& a) {
      const Value* v = a.find(0, "prefix");
      QUENCH_REQUIRE(v != nullptr, prefix ? "startswith" : "endswith", "() needs an argument");
      return Value(affix_match(s, *v, prefix));
    };
  } else if (name == "upper") {
    fn = [s](const CallArgs&) { return Value(ascii_upper(s)); };
  } else if (name == "lower") {
    fn = [s](const CallArgs&) { return Value(ascii_lower(s)); };
  } else if (name == "title") {
    fn = [s](const CallArgs&) { return Value(py_title(s)); };
  } else if (name == "capitalize") {
    fn = [s](const CallArgs&) { return Value(py_capitalize(s)); };
  } else if (name == "replace") {
    fn = [s](const CallArgs& a) {
      a.check("replace", 3, {"old", "new", "count"});
      return Value(py_replace(s, arg_str(a, 0, "old", "replace"), arg_str(a, 1, "new", "replace"),
                              arg_int(a, 2, "count", -1)));
    };
  } else if (name == "format") {
    fn = [s](const CallArgs& a) { return Value(py_format(s, a)); };
  } else if (name == "find" || name == "rfind" || name == "count") {
    fn = [s, name](const CallArgs& a) {
      a.check(name.c_str(), 1, {"sub"});
      const std::string sub = arg_str(a, 0, "sub", name.c_str());
      if (name == "count") {
        if (sub.empty()) return Value(code_point_count(s) + 1);
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
          ++n;
        return Value(n);
      }
      const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
      return Value(at == std::string::npos ? int64_t{-1}
                                           : code_point_count(std::string_view(s).substr(0, at)));
    };
  } else if (name == "join") {
    fn = [s](const CallArgs& a) {
      const Value* v = a.find(0, "iterable");
      QUENCH_REQUIRE(v != nullptr, "join() needs an argument");
      std::string out;
      bool first = true;
      for (const Json& item : iterate(*v)) {
        QUENCH_REQUIRE(item.is_string(), "join(): expected str instance, ", type_name(item),
                       " found");
        out += (first ? "" : s) + item.get<std::string>();
        first = false;
      }
      return Value(out);
    };
  } else if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    fn = [s, prefix, name](const CallArgs& a) {
      const std::string affix = arg_str(a, 0, "affix", name.c_str());
      if (!affix_match(s, Value(affix), prefix)) return Value(s);
      return Value(prefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
    };
  } else if (name == "isdigit") {
    fn = [s](const CallArgs&) {
      return Value(all_code_points(s, [](char c) { return c >= '0' && c <= '9'; }));
    };
  } else if (name == "isalpha") {
    fn = [s](const CallArgs&) {
      return Value(all_code_points(
          s, [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }));
    };
  } else if (name == "isspace") {
    fn = [s](const CallArgs&) { return Value(!s.empty() && py_strip(s, true, true).empty()); };
  } else if (name == "islower" || name == "isupper") {
    const bool lower = name == "islower";
    fn = [s, lower](const CallArgs&) {
      const bool cased = ascii_lower(s) != ascii_upper(s);
      return Value(cased && (lower ? ascii_lower(s) == s : ascii_upper(s) == s));
    };
  } else {
    return std::nullopt;
  }
  return Value::callable("str." + name, std::move(fn));
}

std::optional<Value> dict_method(const Json& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::callable("dict." + name, [d, name](const CallArgs& a) {
      a.check(name.c_str(), 0, {});
      Json out = Json::array();
      for (const auto& [key, value] : d.items()) {
        if (name == "items") {
          out.push_back(Json::array({key, value}));
        } else {
          out.push_back(name == "keys" ? Json(key) : value);
        }
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return Value::callable("dict.get", [d](const CallArgs& a) {
      a.check("get", 2, {"key", "default"});
      const Value* key = a.find(0, "key");
      QUENCH_REQUIRE(key != nullptr, "get() needs a key");
      if (key->is_string()) {
        const auto it = d.find(key->str());
        if (it != d.end()) return Value(*it);
      }
      const Value* fallback = a.find(1, "default");
      return fallback ? *fallback : Value(Json(nullptr));
    });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Json& l, const std::string& name) {
  if (name == "index" || name == "count") {
    return Value::callable("list." + name, [l, name](const CallArgs& a) {
      const Value* x = a.find(0, "value");
      QUENCH_REQUIRE(x != nullptr, name, "() needs an argument");
      int64_t n = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        if (!x->is_data() || !equal(l[i], x->json())) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++n;
      }
      QUENCH_REQUIRE(name == "count", repr(x->to_json()), " is not in list");
      return Value(n);
    });
  }
  return std::nullopt;
}

bool is_mutating(const std::string& name) {
  for (const char* m : {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                        "update", "setdefault", "popitem"})
    if (name == m) return true;
  return false;
}

Value missing_attribute(const Json& j, const std::string& name) {
  if (is_mutating(name) && (j.is_array() || j.is_object())) {
    return Value::undefined(str_cat("access to attribute '", name, "' of '", type_name(j),
                                    "' object is unsafe (templates cannot modify data)"));
  }
  return Value::undefined(str_cat("'", j.is_null() ? "None" : type_name(j) + " object",
                                  "' has no attribute '", name, "'"));
}

int64_t clamp_index(int64_t i, int64_t n, int64_t step) {
  // Python's slice.indices().
  if (i < 0) {
    i += n;
    if (i < 0) i = step < 0 ? -1 : 0;
  } else if (i >= n) {
    i = step < 0 ? n - 1 : n;
  }
  return i;
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail(object.undefined_hint().empty() ? "undefined value has no attributes"
                                           : object.undefined_hint());
    case Value::Kind::kObject: {
      const auto& attrs = object.object_ptr()->attributes;
      const auto it = attrs.find(name);
      if (it != attrs.end()) return it->second;
      return Value::undefined(str_cat("'Namespace' object has no attribute '", name, "'"));
    }
    case Value::Kind::kCallable:
      return Value::undefined(str_cat("'function' object has no attribute '", name, "'"));
    case Value::Kind::kData:
      break;
  }
  const Json& j = object.json();
  std::optional<Value> method;
  if (j.is_string()) method = string_method(j.get<std::string>(), name);
  if (j.is_object()) method = dict_method(j, name);
  if (j.is_array()) method = list_method(j, name);
  if (method) return *method;
  if (j.is_object()) {
    const auto it = j.find(name);
    if (it != j.end()) return Value(*it);
  }
  return missing_attribute(j, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) {
    fail(object.undefined_hint().empty() ? "undefined value is not subscriptable"
                                         : object.undefined_hint());
  }
  if (object.kind() == Value::Kind::kObject && key.is_string())
    return get_attribute(object, key.str());
  if (!object.is_data())
    return Value::undefined(str_cat(type_name(object), " is not subscriptable"));
  const Json& j = object.json();
  if (j.is_object() && key.is_string()) {
    const auto it = j.find(key.str());
    if (it != j.end()) return Value(*it);
    if (auto method = dict_method(j, key.str())) return *method;
    return Value::undefined(str_cat("'dict object' has no attribute '", key.str(), "'"));
  }
  if ((j.is_array() || j.is_string()) && key.is_data() && is_numeric(key.json()) &&
      !key.json().is_number_float()) {
    int64_t i = as_int(key.json());
    if (j.is_array()) {
      const auto n = static_cast<int64_t>(j.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::undefined(str_cat("list object has no element ", as_int(key.json())));
      return Value(j[static_cast<size_t>(i)]);
    }
    const std::vector<std::string> cps = code_points(j.get_ref<const std::string&>());
    const auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::undefined(str_cat("str object has no element ", as_int(key.json())));
    return Value(cps[static_cast<size_t>(i)]);
  }
  if (key.is_string()) return get_attribute(object, key.str());
  return Value::undefined(str_cat("'", type_name(j), " object' has no element ", to_str(key)));
}

Value get_slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step) {
  if (object.is_undefined()) fail(object.undefined_hint());
  QUENCH_REQUIRE(object.is_list() || object.is_string(), "'", type_name(object),
                 "' object cannot be sliced");
  const int64_t s = step.value_or(1);
  QUENCH_REQUIRE(s != 0, "slice step cannot be zero");
  std::vector<std::string> cps;
  if (object.is_string()) cps = code_points(object.str());
  const auto n = static_cast<int64_t>(object.is_string() ? cps.size() : object.json().size());
  const int64_t begin = start ? clamp_index(*start, n, s) : (s < 0 ? n - 1 : 0);
  const int64_t end = stop ? clamp_index(*stop, n, s) : (s < 0 ? -1 : n);
  Json list = Json::array();
  std::string text;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) {
    if (object.is_string()) {
      text += cps[static_cast<size_t>(i)];
    } else {
      list.push_back(object.json()[static_cast<size_t>(i)]);
    }
  }
  return object.is_string() ? Value(text) : Value(std::move(list));
}

std::vector<Json> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  QUENCH_REQUIRE(v.is_data(), "'", type_name(v), "' object is not iterable");
  const Json& j = v.json();
  std::vector<Json> out;
  if (j.is_array()) {
    out.assign(j.begin(), j.end());
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items())
      out.emplace_back(key);
  } else if (j.is_string()) {
    for (std::string& cp : code_points(j.get_ref<const std::string&>()))
      out.emplace_back(cp);
  } else {
    fail(str_cat("'", type_name(j), "' object is not iterable"));
  }
  return out;
}

}  // namespace quench::jinja
