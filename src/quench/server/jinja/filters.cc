#include "quench/server/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "quench/core/error.h"
#include "quench/server/jinja/access.h"
#include "quench/server/jinja/tests.h"
#include "quench/server/jinja/text.h"

namespace quench::jinja {
namespace {

using FilterFn = std::function<Value(const Value&, const CallArgs&)>;

bool flag(const CallArgs& a, size_t index, const char* name, bool fallback) {
  const Value* v = a.find(index, name);
  return v == nullptr ? fallback : truthy(*v);
}

const Value* arg(const CallArgs& a, size_t index, const char* name) {
  const Value* v = a.find(index, name);
  return v != nullptr && !v->is_none() ? v : nullptr;
}

std::string str_arg(const CallArgs& a, size_t index, const char* name, const char* filter) {
  const Value* v = a.find(index, name);
  QUENCH_REQUIRE(v != nullptr && v->is_string(), "filter '", filter, "' needs a string argument '",
                 name, "'");
  return v->str();
}

int64_t int_arg(const CallArgs& a, size_t index, const char* name, int64_t fallback) {
  const Value* v = arg(a, index, name);
  if (v == nullptr) return fallback;
  QUENCH_REQUIRE(v->is_data() && is_numeric(v->json()), "argument '", name,
                 "' must be a number, got ", type_name(*v));
  return as_int(v->json());
}

// jinja2's attribute paths: "a.b" and "0" look up each part, item first.
Value attribute_path(const Value& v, const std::string& path) {
  Value out = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    out = digits ? get_item(out, Value(std::stoll(part))) : get_item(out, Value(part));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

Json list_of(const std::vector<Json>& items) {
  return Json(items);
}

// The arguments after the first `skip` positional ones (map's and select's pass-through).
CallArgs rest(const CallArgs& a, size_t skip) {
  CallArgs out;
  for (size_t i = skip; i < a.positional.size(); ++i)
    out.positional.push_back(a.positional[i]);
  out.keyword = a.keyword;
  return out;
}

Value select(const Value& input, const CallArgs& a, bool by_attribute, bool keep) {
  size_t first_test_arg = 0;
  std::string attribute;
  if (by_attribute) {
    attribute = str_arg(a, 0, "attribute", keep ? "selectattr" : "rejectattr");
    first_test_arg = 1;
  }
  const Value* test =
      first_test_arg < a.positional.size() ? &a.positional[first_test_arg] : nullptr;
  QUENCH_REQUIRE(test == nullptr || test->is_string(), "the test name must be a string");
  const CallArgs test_args = rest(a, first_test_arg + 1);
  Json out = Json::array();
  for (const Json& item : iterate(input)) {
    const Value subject = by_attribute ? attribute_path(Value(item), attribute) : Value(item);
    const bool passed = test ? apply_test(test->str(), subject, test_args) : truthy(subject);
    if (passed == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Json sort_key(const Json& j, bool case_sensitive) {
  if (!case_sensitive && j.is_string()) return ascii_lower(j.get<std::string>());
  return j;
}

std::string jinja_title(const std::string& s) {
  // Words start after spaces, dashes and opening brackets; each word is capitalised.
  std::string out;
  bool word_start = true;
  for (char c : s) {
    const bool boundary = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' ||
                          is_py_space(static_cast<unsigned char>(c));
    if (boundary) {
      out += c;
      word_start = true;
    } else if (word_start) {
      out += ascii_upper(std::string(1, c));
      word_start = false;
    } else {
      out += ascii_lower(std::string(1, c));
    }
  }
  return out;
}

std::string indent(const std::string& s, const Value* width, bool first, bool blank) {
  std::string pad(4, ' ');
  if (width != nullptr && width->is_string()) {
    pad = width->str();
  } else if (width != nullptr) {
    QUENCH_REQUIRE(width->is_data() && is_numeric(width->json()),
                   "indent width must be a number or a string");
    pad = std::string(static_cast<size_t>(std::max<int64_t>(as_int(width->json()), 0)), ' ');
  }
  const std::vector<std::string> lines = py_splitlines(s + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool pad_it = i == 0 ? first : (blank || !lines[i].empty());
    out += (pad_it ? pad : "") + lines[i];
  }
  return out;
}

}  // namespace

std::string percent_format(const std::string& fmt, const std::vector<Value>& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    QUENCH_REQUIRE(i + 1 < fmt.size(), "format: incomplete format");
    size_t j = i + 1;
    std::string precision;
    if (fmt[j] == '.') {
      ++j;
      while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9')
        precision += fmt[j++];
    }
    QUENCH_REQUIRE(j < fmt.size(), "format: incomplete format");
    const char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    QUENCH_REQUIRE(next < args.size(), "format: not enough arguments for format string");
    const Value& v = args[next++];
    if (conv == 's') {
      out += to_str(v);
    } else if (conv == 'r') {
      out += repr(v.to_json());
    } else if (conv == 'd' || conv == 'i' || conv == 'f') {
      QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()), "format: %", std::string(1, conv),
                     " needs a number, not ", type_name(v));
      if (conv == 'f') {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.*f", precision.empty() ? 6 : std::stoi(precision),
                      as_double(v.json()));
        out += buf;
      } else {
        out += std::to_string(as_int(v.json()));
      }
    } else {
      fail(str_cat("format: unsupported conversion %", std::string(1, conv),
                   "; supported: %s %r %d %i %f %%"));
    }
  }
  return out;
}

namespace {

Value to_int(const Value& input, const CallArgs& a) {
  const Value* fallback = a.find(0, "default");
  const Value def = fallback ? *fallback : Value(int64_t{0});
  if (!input.is_data()) return def;
  const Json& j = input.json();
  if (is_numeric(j)) return Value(as_int(j));
  if (!j.is_string()) return def;
  const std::string s = py_strip(j.get<std::string>(), true, true);
  try {
    size_t used = 0;
    const int64_t v = std::stoll(s, &used, 10);
    if (used == s.size()) return Value(v);
    const double d = std::stod(s, &used);
    if (used == s.size() && std::isfinite(d)) return Value(static_cast<int64_t>(d));
  } catch (const std::exception&) {
  }
  return def;
}

Value to_float(const Value& input, const CallArgs& a) {
  const Value* fallback = a.find(0, "default");
  const Value def = fallback ? *fallback : Value(0.0);
  if (!input.is_data()) return def;
  const Json& j = input.json();
  if (is_numeric(j)) return Value(as_double(j));
  if (!j.is_string()) return def;
  const std::string s = py_strip(j.get<std::string>(), true, true);
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return Value(d);
  } catch (const std::exception&) {
  }
  return def;
}

// HF's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson(const Value& input, const CallArgs& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  QUENCH_REQUIRE(input.is_data(), "Object of type ", type_name(input), " is not JSON serializable",
                 input.is_undefined() ? " (" + input.undefined_hint() + ")" : "");
  JsonDumpOptions o;
  if (const Value* ind = arg(a, 1, "indent")) {
    if (ind->is_string()) {
      o.indent_text = ind->str();
      o.indent = 0;
    } else {
      o.indent = std::max<int64_t>(int_arg(a, 1, "indent", 0), 0);
    }
    o.item_separator = ",";
  }
  if (const Value* seps = arg(a, 2, "separators")) {
    QUENCH_REQUIRE(seps->is_list() && seps->json().size() == 2 && seps->json()[0].is_string() &&
                       seps->json()[1].is_string(),
                   "tojson separators must be a pair of strings");
    o.item_separator = seps->json()[0].get<std::string>();
    o.key_separator = seps->json()[1].get<std::string>();
  }
  o.sort_keys = flag(a, 3, "sort_keys", false);
  return Value(py_json_dumps(input.json(), o));
}

Value min_max(const Value& input, const CallArgs& a, bool want_max) {
  const bool case_sensitive = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  std::vector<Json> items = iterate(input);
  if (items.empty())
    return Value::undefined(want_max ? "No aggregated item, sequence was empty."
                                     : "No aggregated item, sequence was empty.");
  auto key = [&](const Json& j) {
    const Json k = attribute ? attribute_path(Value(j), to_str(*attribute)).to_json() : j;
    return sort_key(k, case_sensitive);
  };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const bool better =
        want_max ? less(key(items[best]), key(items[i])) : less(key(items[i]), key(items[best]));
    if (better) best = i;
  }
  return Value(items[best]);
}

const std::map<std::string, FilterFn>& filters() {
  static const auto* table = new std::map<std::string, FilterFn>{
      {"trim",
       [](const Value& v, const CallArgs& a) {
         const Value* chars = arg(a, 0, "chars");
         if (chars == nullptr) return Value(py_strip(to_str(v), true, true));
         return Value(py_strip(to_str(v), true, true, to_str(*chars), true));
       }},
      {"length",
       [](const Value& v, const CallArgs&) {
         if (v.is_undefined()) return Value(int64_t{0});
         QUENCH_REQUIRE(v.is_string() || v.is_list() || v.is_dict(), "object of type '",
                        type_name(v), "' has no len()");
         if (v.is_string()) return Value(code_point_count(v.str()));
         return Value(static_cast<int64_t>(v.json().size()));
       }},
      {"tojson", tojson},
      {"upper", [](const Value& v, const CallArgs&) { return Value(ascii_upper(to_str(v))); }},
      {"lower", [](const Value& v, const CallArgs&) { return Value(ascii_lower(to_str(v))); }},
      {"title", [](const Value& v, const CallArgs&) { return Value(jinja_title(to_str(v))); }},
      {"capitalize",
       [](const Value& v, const CallArgs&) { return Value(py_capitalize(to_str(v))); }},
      {"first",
       [](const Value& v, const CallArgs&) {
         const std::vector<Json> items = iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.")
                              : Value(items.front());
       }},
      {"last",
       [](const Value& v, const CallArgs&) {
         const std::vector<Json> items = iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.")
                              : Value(items.back());
       }},
      {"join",
       [](const Value& v, const CallArgs& a) {
         a.check("join", 2, {"d", "attribute"});
         const Value* sep = arg(a, 0, "d");
         const Value* attribute = arg(a, 1, "attribute");
         std::string out;
         bool first = true;
         for (const Json& item : iterate(v)) {
           if (!first && sep) out += to_str(*sep);
           out +=
               attribute ? to_str(attribute_path(Value(item), to_str(*attribute))) : to_str(item);
           first = false;
         }
         return Value(out);
       }},
      {"default",
       [](const Value& v, const CallArgs& a) {
         a.check("default", 2, {"default_value", "boolean"});
         const Value* fallback = a.find(0, "default_value");
         const bool use = v.is_undefined() || (flag(a, 1, "boolean", false) && !truthy(v));
         if (!use) return v;
         return fallback ? *fallback : Value(std::string());
       }},
      {"string", [](const Value& v, const CallArgs&) { return Value(to_str(v)); }},
      {"int", to_int},
      {"float", to_float},
      {"list", [](const Value& v, const CallArgs&) { return Value(list_of(iterate(v))); }},
      {"items",
       [](const Value& v, const CallArgs&) {
         Json out = Json::array();
         if (v.is_undefined()) return Value(out);
         QUENCH_REQUIRE(v.is_dict(), "can only get item pairs from a mapping, not ", type_name(v));
         for (const auto& [key, value] : v.json().items())
           out.push_back(Json::array({key, value}));
         return Value(std::move(out));
       }},
      {"replace",
       [](const Value& v, const CallArgs& a) {
         a.check("replace", 3, {"old", "new", "count"});
         return Value(py_replace(to_str(v), str_arg(a, 0, "old", "replace"),
                                 str_arg(a, 1, "new", "replace"), int_arg(a, 2, "count", -1)));
       }},
      {"reverse",
       [](const Value& v, const CallArgs&) {
         if (v.is_string()) {
           std::vector<std::string> cps = code_points(v.str());
           std::string out;
           for (auto it = cps.rbegin(); it != cps.rend(); ++it)
             out += *it;
           return Value(out);
         }
         std::vector<Json> items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value(list_of(items));
       }},
      {"unique",
       [](const Value& v, const CallArgs& a) {
         a.check("unique", 2, {"case_sensitive", "attribute"});
         const bool case_sensitive = flag(a, 0, "case_sensitive", false);
         const Value* attribute = arg(a, 1, "attribute");
         Json out = Json::array();
         std::vector<Json> seen;
         for (const Json& item : iterate(v)) {
           const Json k = sort_key(
               attribute ? attribute_path(Value(item), to_str(*attribute)).to_json() : item,
               case_sensitive);
           if (std::any_of(seen.begin(), seen.end(), [&](const Json& s) { return equal(s, k); }))
             continue;
           seen.push_back(k);
           out.push_back(item);
         }
         return Value(std::move(out));
       }},
      {"map",
       [](const Value& v, const CallArgs& a) {
         Json out = Json::array();
         const Value* attribute = a.find(99, "attribute");
         if (attribute != nullptr) {
           const Value* fallback = a.find(99, "default");
           for (const Json& item : iterate(v)) {
             Value x = attribute_path(Value(item), to_str(*attribute));
             if (x.is_undefined() && fallback) x = *fallback;
             out.push_back(x.to_json());
           }
           return Value(std::move(out));
         }
         QUENCH_REQUIRE(!a.positional.empty() && a.positional[0].is_string(),
                        "map needs a filter name or attribute=...");
         const CallArgs pass = rest(a, 1);
         for (const Json& item : iterate(v))
           out.push_back(apply_filter(a.positional[0].str(), Value(item), pass).to_json());
         return Value(std::move(out));
       }},
      {"select", [](const Value& v, const CallArgs& a) { return select(v, a, false, true); }},
      {"reject", [](const Value& v, const CallArgs& a) { return select(v, a, false, false); }},
      {"selectattr", [](const Value& v, const CallArgs& a) { return select(v, a, true, true); }},
      {"rejectattr", [](const Value& v, const CallArgs& a) { return select(v, a, true, false); }},
      {"indent",
       [](const Value& v, const CallArgs& a) {
         a.check("indent", 3, {"width", "first", "blank"});
         return Value(indent(to_str(v), arg(a, 0, "width"), flag(a, 1, "first", false),
                             flag(a, 2, "blank", false)));
       }},
      {"safe", [](const Value& v, const CallArgs&) { return v; }},
      {"escape", [](const Value& v, const CallArgs&) { return Value(html_escape(to_str(v))); }},
      {"abs",
       [](const Value& v, const CallArgs&) {
         QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()), "bad operand type for abs(): '",
                        type_name(v), "'");
         if (v.json().is_number_float()) return Value(std::fabs(v.json().get<double>()));
         return Value(std::abs(as_int(v.json())));
       }},
      {"round",
       [](const Value& v, const CallArgs& a) {
         QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()), "round needs a number, got ",
                        type_name(v));
         const double scale = std::pow(10.0, static_cast<double>(int_arg(a, 0, "precision", 0)));
         const std::string method = arg(a, 1, "method") ? to_str(*arg(a, 1, "method")) : "common";
         const double x = as_double(v.json()) * scale;
         const double r = method == "ceil"    ? std::ceil(x)
                          : method == "floor" ? std::floor(x)
                                              : std::nearbyint(x);
         return Value(r / scale);
       }},
      {"sum",
       [](const Value& v, const CallArgs& a) {
         const Value* attribute = arg(a, 0, "attribute");
         Json total = arg(a, 1, "start") ? arg(a, 1, "start")->to_json() : Json(0);
         for (const Json& item : iterate(v)) {
           const Json x =
               attribute ? attribute_path(Value(item), to_str(*attribute)).to_json() : item;
           QUENCH_REQUIRE(is_numeric(x) && is_numeric(total), "sum needs numbers, got ",
                          type_name(x));
           total = x.is_number_float() || total.is_number_float()
                       ? Json(as_double(total) + as_double(x))
                       : Json(as_int(total) + as_int(x));
         }
         return Value(total);
       }},
      {"min", [](const Value& v, const CallArgs& a) { return min_max(v, a, false); }},
      {"max", [](const Value& v, const CallArgs& a) { return min_max(v, a, true); }},
      {"sort",
       [](const Value& v, const CallArgs& a) {
         a.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
         const bool reverse = flag(a, 0, "reverse", false);
         const bool case_sensitive = flag(a, 1, "case_sensitive", false);
         const Value* attribute = arg(a, 2, "attribute");
         std::vector<Json> items = iterate(v);
         auto key = [&](const Json& j) {
           return sort_key(attribute ? attribute_path(Value(j), to_str(*attribute)).to_json() : j,
                           case_sensitive);
         };
         std::stable_sort(items.begin(), items.end(), [&](const Json& x, const Json& y) {
           return reverse ? less(key(y), key(x)) : less(key(x), key(y));
         });
         return Value(list_of(items));
       }},
      {"dictsort",
       [](const Value& v, const CallArgs& a) {
         QUENCH_REQUIRE(v.is_dict(), "dictsort needs a mapping, got ", type_name(v));
         const bool case_sensitive = flag(a, 0, "case_sensitive", false);
         const bool by_value = arg(a, 1, "by") && to_str(*arg(a, 1, "by")) == "value";
         const bool reverse = flag(a, 2, "reverse", false);
         std::vector<Json> items;
         for (const auto& [key, value] : v.json().items())
           items.push_back(Json::array({key, value}));
         std::stable_sort(items.begin(), items.end(), [&](const Json& x, const Json& y) {
           const Json kx = sort_key(x[by_value ? 1 : 0], case_sensitive);
           const Json ky = sort_key(y[by_value ? 1 : 0], case_sensitive);
           return reverse ? less(ky, kx) : less(kx, ky);
         });
         return Value(list_of(items));
       }},
      {"attr", [](const Value& v,
                  const CallArgs& a) { return get_attribute(v, str_arg(a, 0, "name", "attr")); }},
      {"wordcount",
       [](const Value& v, const CallArgs&) {
         return Value(static_cast<int64_t>(py_split(to_str(v), "", false, -1).size()));
       }},
      {"center",
       [](const Value& v, const CallArgs& a) {
         const std::string s = to_str(v);
         const int64_t width = int_arg(a, 0, "width", 80);
         const int64_t n = code_point_count(s);
         if (width <= n) return Value(s);
         const int64_t total = width - n;
         const int64_t left = total / 2 + (total & width & 1);
         return Value(std::string(static_cast<size_t>(left), ' ') + s +
                      std::string(static_cast<size_t>(total - left), ' '));
       }},
      {"format", [](const Value& v,
                    const CallArgs& a) { return Value(percent_format(to_str(v), a.positional)); }},
  };
  return *table;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  static const std::map<std::string, std::string> kAliases = {
      {"count", "length"}, {"d", "default"}, {"e", "escape"}, {"forceescape", "escape"}};
  const auto alias = kAliases.find(name);
  const std::string& key = alias == kAliases.end() ? name : alias->second;
  const auto it = filters().find(key);
  if (it == filters().end()) {
    std::string known;
    for (const auto& entry : filters())
      known += (known.empty() ? "" : ", ") + entry.first;
    fail(str_cat("unknown filter '", name, "'; known: ", known, ", count, d, e"));
  }
  return it->second(input, args);
}

}  // namespace quench::jinja
