// The runtime value of the template interpreter. Data is nlohmann::ordered_json (ordered so that
// dict literals and tojson keep insertion order, as Python dicts do); beside data a value can be
// jinja2's Undefined (what a missing variable, key or attribute gives: prints empty, is falsy,
// raises when used further), a namespace (the one mutable object templates have, shared by
// reference so `set ns.x` inside a loop is seen after it) or a callable (globals, macros, bound
// string/dict methods). Python's truthiness, str(), ==, < and json.dumps live here too.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace quench::jinja {

using Json = nlohmann::ordered_json;

class Value;

// Arguments of a call, filter or test: positional then keyword, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`, or nullptr when not given.
  const Value* find(size_t index, const char* name) const;
  // Throws naming `function` when more than `max_positional` positional arguments or a keyword
  // outside `names` is given.
  void check(const char* function, size_t max_positional,
             std::initializer_list<const char*> names) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> call;
};

// Attributes of a namespace() or of a for loop's `loop` (which templates may read but not set).
struct Object {
  std::map<std::string, Value> attributes;
  bool assignable = false;  // namespace(): `set ns.x = ...` allowed
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kData, kObject, kCallable };

  // Undefined; `hint` is the error jinja2 raises when it is used ("'x' is undefined").
  Value() = default;
  Value(Json data) : kind_(Kind::kData), data_(std::make_shared<const Json>(std::move(data))) {}
  static Value undefined(std::string hint);
  static Value object(std::shared_ptr<Object> object);
  static Value callable(std::string name, std::function<Value(const CallArgs&)> call);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_data() const { return kind_ == Kind::kData; }
  // Data only (callers check is_data first).
  const Json& json() const { return *data_; }
  const std::string& undefined_hint() const { return hint_; }
  Object* object_ptr() const { return object_.get(); }
  const Callable* callable_ptr() const { return callable_.get(); }

  bool is_string() const { return is_data() && data_->is_string(); }
  bool is_number() const { return is_data() && data_->is_number(); }
  bool is_integer() const { return is_data() && data_->is_number_integer(); }
  bool is_list() const { return is_data() && data_->is_array(); }
  bool is_dict() const { return is_data() && data_->is_object(); }
  bool is_none() const { return is_data() && data_->is_null(); }
  bool is_bool() const { return is_data() && data_->is_boolean(); }
  const std::string& str() const { return data_->get_ref<const std::string&>(); }

  // Data for storing in a list or dict: undefined becomes None (jinja2 would keep the Undefined
  // object; only its printing differs), namespaces and callables are refused.
  Json to_json() const;

 private:
  Kind kind_ = Kind::kUndefined;
  std::shared_ptr<const Json> data_;
  std::string hint_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<const Callable> callable_;
};

// Python's type name of a value, for error messages ("str", "int", "list", "dict", "NoneType").
std::string type_name(const Value& v);
std::string type_name(const Json& j);

bool truthy(const Value& v);
// str(v) as {{ v }} prints it; undefined prints empty.
std::string to_str(const Value& v);
std::string to_str(const Json& j);
std::string repr(const Json& j);

// Python's ==, treating bool as the int it is and int/float by value.
bool equal(const Value& a, const Value& b);
bool equal(const Json& a, const Json& b);
// Python's <: numbers with numbers, strings with strings, lists element-wise; throws otherwise.
bool less(const Json& a, const Json& b);

// Numbers as Python sees them (bool is an int).
bool is_numeric(const Json& j);
double as_double(const Json& j);
int64_t as_int(const Json& j);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=sort_keys): with no
// indent the separators are ", " and ": ", with one "," and ": " (Python's defaults).
struct JsonDumpOptions {
  int64_t indent = -1;      // -1: none (one line)
  std::string indent_text;  // a string indent, when given as one
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string py_json_dumps(const Json& j, const JsonDumpOptions& options);

}  // namespace quench::jinja
