#include "quench/server/jinja/operators.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/server/jinja/filters.h"
#include "quench/server/jinja/tests.h"

namespace quench::jinja {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail(str_cat("unsupported operand type(s) for ", op, ": '", type_name(a), "' and '", type_name(b),
               "'"));
}

void require_defined(const Value& v) {
  if (v.is_undefined())
    fail(v.undefined_hint().empty() ? "undefined value in an expression" : v.undefined_hint());
}

// a op b on int64, refusing overflow (Python ints do not overflow; quench's do not wrap).
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  QUENCH_REQUIRE(!op(a, b, &r), "integer overflow");
  return r;
}
bool add(int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
}
bool sub(int64_t a, int64_t b, int64_t* r) {
  return __builtin_sub_overflow(a, b, r);
}
bool mul(int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
}

Value repeat(const Json& seq, int64_t times) {
  const int64_t n = std::max<int64_t>(times, 0);
  if (seq.is_string()) {
    const std::string& s = seq.get_ref<const std::string&>();
    QUENCH_REQUIRE(s.empty() || static_cast<uint64_t>(n) <= kMaxValueBytes / s.size(),
                   "string repetition result is larger than ", kMaxValueBytes, " bytes");
    std::string out;
    for (int64_t i = 0; i < n; ++i)
      out += s;
    return Value(out);
  }
  QUENCH_REQUIRE(seq.empty() || static_cast<uint64_t>(n) <= kMaxValueBytes / seq.size(),
                 "list repetition result is too large");
  Json out = Json::array();
  for (int64_t i = 0; i < n; ++i)
    for (const Json& x : seq)
      out.push_back(x);
  return Value(std::move(out));
}

Value arithmetic(const std::string& op, const Json& x, const Json& y) {
  const bool floats = x.is_number_float() || y.is_number_float();
  if (op == "/") {
    QUENCH_REQUIRE(as_double(y) != 0.0, "division by zero");
    return Value(as_double(x) / as_double(y));
  }
  if (floats) {
    const double a = as_double(x), b = as_double(y);
    if (op == "+") return Value(a + b);
    if (op == "-") return Value(a - b);
    if (op == "*") return Value(a * b);
    if (op == "**") return Value(std::pow(a, b));
    QUENCH_REQUIRE(b != 0.0, "float division by zero");
    if (op == "//") return Value(std::floor(a / b));
    double m = std::fmod(a, b);
    if (m != 0.0 && ((m < 0) != (b < 0))) m += b;
    return Value(m);
  }
  const int64_t a = as_int(x), b = as_int(y);
  if (op == "+") return Value(checked(add, a, b));
  if (op == "-") return Value(checked(sub, a, b));
  if (op == "*") return Value(checked(mul, a, b));
  if (op == "**") {
    if (b < 0) return Value(std::pow(static_cast<double>(a), static_cast<double>(b)));
    int64_t result = 1;
    for (int64_t i = 0; i < b; ++i) {
      result = checked(mul, result, a);
      if (result == 0 || result == 1) break;
    }
    return Value(result);
  }
  QUENCH_REQUIRE(b != 0, "integer division or modulo by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  if (op == "//") return Value(q);
  return Value(a - q * b);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(to_str(a) + to_str(b));
  if (op == "==") return Value(equal(a, b));
  if (op == "!=") return Value(!equal(a, b));
  if (op == "in") return Value(value_in(b, a));
  if (op == "not in") return Value(!value_in(b, a));
  require_defined(a);
  require_defined(b);
  if (!a.is_data() || !b.is_data()) unsupported(op, a, b);
  const Json& x = a.json();
  const Json& y = b.json();
  if (op == "<") return Value(less(x, y));
  if (op == ">") return Value(less(y, x));
  if (op == "<=") return Value(!less(y, x));
  if (op == ">=") return Value(!less(x, y));
  if (is_numeric(x) && is_numeric(y)) return arithmetic(op, x, y);
  if (op == "+") {
    if (x.is_string() && y.is_string()) {
      QUENCH_REQUIRE(
          x.get_ref<const std::string&>().size() + y.get_ref<const std::string&>().size() <=
              kMaxValueBytes,
          "string concatenation result is larger than ", kMaxValueBytes, " bytes");
      return Value(x.get<std::string>() + y.get<std::string>());
    }
    if (x.is_array() && y.is_array()) {
      Json out = x;
      for (const Json& v : y)
        out.push_back(v);
      return Value(std::move(out));
    }
    if (x.is_string() || y.is_string()) {
      fail(str_cat("can only concatenate str (not \"", type_name(x.is_string() ? y : x),
                   "\") to str"));
    }
  }
  if (op == "*") {
    if ((x.is_string() || x.is_array()) && y.is_number_integer()) return repeat(x, as_int(y));
    if ((y.is_string() || y.is_array()) && x.is_number_integer()) return repeat(y, as_int(x));
  }
  if (op == "%" && x.is_string()) {
    std::vector<Value> args;
    if (y.is_array()) {
      for (const Json& v : y)
        args.emplace_back(v);
    } else {
      args.push_back(b);
    }
    return Value(percent_format(x.get<std::string>(), args));
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  require_defined(v);
  QUENCH_REQUIRE(v.is_data() && is_numeric(v.json()), "bad operand type for unary -: '",
                 type_name(v), "'");
  if (v.json().is_number_float()) return Value(-v.json().get<double>());
  return Value(checked(sub, 0, as_int(v.json())));
}

}  // namespace quench::jinja
