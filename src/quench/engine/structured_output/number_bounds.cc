#include "quench/engine/structured_output/number_bounds.h"

#include <nlohmann/json.hpp>

#include "quench/core/error.h"

namespace quench {
namespace {

// Bounds whose decimal exponent is larger than this are refused (their digits are spelt out).
constexpr int64_t kMaxBoundExponent = 400;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// A decimal of digit text `digits` (leading zeros allowed) times 10^exponent, normalized.
Decimal make_decimal(bool negative, std::string_view digits, int64_t exponent) {
  size_t first = 0;
  while (first < digits.size() && digits[first] == '0')
    ++first;
  size_t last = digits.size();
  while (last > first && digits[last - 1] == '0')
    --last, ++exponent;
  Decimal d;
  d.digits = std::string(digits.substr(first, last - first));
  d.exponent = d.digits.empty() ? 0 : exponent;
  d.negative = negative && !d.digits.empty();
  return d;
}

// Magnitudes: the decimal string of an integer-valued decimal, and +1 / -1 on such strings.
std::string integer_text(const Decimal& d) {
  return d.digits.empty() ? "0" : d.digits + std::string(static_cast<size_t>(d.exponent), '0');
}
std::string plus_one(std::string s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  return "1" + s;
}
std::string minus_one(std::string s) {  // s > 0
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '0') {
      --s[i];
      return s;
    }
    s[i] = '9';
  }
  return s;
}

bool is_integer(const Decimal& d) {
  return d.exponent >= 0;
}
// The integer part (towards zero).
Decimal truncated(const Decimal& d) {
  if (is_integer(d)) return d;
  const int64_t keep = static_cast<int64_t>(d.digits.size()) + d.exponent;
  if (keep <= 0) return Decimal{};
  return make_decimal(d.negative, std::string_view(d.digits).substr(0, static_cast<size_t>(keep)),
                      0);
}
// x + 1 for an integer x.
Decimal integer_plus_one(const Decimal& x) {
  if (!x.negative) return make_decimal(false, plus_one(integer_text(x)), 0);
  return make_decimal(true, minus_one(integer_text(x)), 0);
}
// The least integer n with n > x (strictly) or n >= x.
Decimal least_integer_above(const Decimal& x, bool strictly) {
  const Decimal t = truncated(x);
  if (compare(t, x) == 0) return strictly ? integer_plus_one(t) : t;
  return x.negative ? t : integer_plus_one(t);  // a fraction: truncation is below x iff x > 0
}

}  // namespace

bool Decimal::parse(std::string_view text, Decimal& out) {
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  std::string digits;
  size_t int_digits = 0;
  while (i < text.size() && is_digit(text[i]))
    digits += text[i++], ++int_digits;
  if (int_digits == 0) return false;
  int64_t exponent = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t before = digits.size();
    while (i < text.size() && is_digit(text[i]))
      digits += text[i++], --exponent;
    if (digits.size() == before) return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool minus = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    int64_t e = 0;
    const size_t start = i;
    while (i < text.size() && is_digit(text[i])) {
      e = std::min<int64_t>(e * 10 + (text[i++] - '0'), int64_t{1} << 40);
    }
    if (i == start) return false;
    exponent += minus ? -e : e;
  }
  if (i != text.size()) return false;
  out = make_decimal(negative, digits, exponent);
  return true;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int flip = a.negative ? -1 : 1;
  if (a.is_zero() || b.is_zero()) {
    if (a.is_zero() && b.is_zero()) return 0;
    return a.is_zero() ? -flip : flip;  // zero against a magnitude of the same sign
  }
  // Orders of magnitude, then the digits left-aligned.
  const int64_t a_order = static_cast<int64_t>(a.digits.size()) + a.exponent;
  const int64_t b_order = static_cast<int64_t>(b.digits.size()) + b.exponent;
  if (a_order != b_order) return a_order < b_order ? -flip : flip;
  const int c = a.digits.compare(b.digits);  // no trailing zeros: a prefix is the smaller
  return c == 0 ? 0 : (c < 0 ? -flip : flip);
}

std::shared_ptr<const NumberBounds> NumberBounds::compile(const nlohmann::json& schema,
                                                          bool integer_only,
                                                          const std::string& path) {
  auto bounds = std::make_shared<NumberBounds>();
  auto read = [&](const char* key, bool exclusive, bool lower) {
    if (!schema.contains(key)) return;
    const nlohmann::json& v = schema.at(key);
    QUENCH_REQUIRE(v.is_number(), "JSON schema ", path, ": '", key, "' must be a number, not ",
                   v.dump(),
                   exclusive ? " (draft 4's boolean exclusiveMinimum / exclusiveMaximum is not "
                               "supported: give the bound itself)"
                             : "");
    Bound b;
    b.present = true, b.exclusive = exclusive;
    QUENCH_REQUIRE(
        Decimal::parse(v.dump(), b.value) &&
            static_cast<int64_t>(b.value.digits.size()) + b.value.exponent <= kMaxBoundExponent,
        "JSON schema ", path, ": '", key, "' ", v.dump(), " is not a finite number of ", "at most ",
        kMaxBoundExponent, " digits");
    Bound& into = lower ? bounds->min_ : bounds->max_;
    // The tighter of minimum and exclusiveMinimum (maximum and exclusiveMaximum) applies.
    const int c = into.present ? compare(b.value, into.value) : 0;
    if (!into.present || (lower ? c > 0 : c < 0) || (c == 0 && exclusive)) into = b;
  };
  read("minimum", false, true);
  read("exclusiveMinimum", true, true);
  read("maximum", false, false);
  read("exclusiveMaximum", true, false);
  if (!bounds->min_.present && !bounds->max_.present) return nullptr;
  // Some value must lie within: the least one above the lower bound, where both are given.
  if (bounds->min_.present && bounds->max_.present) {
    const Bound &lo = bounds->min_, &hi = bounds->max_;
    bool any;
    if (integer_only) {
      const Decimal n = least_integer_above(lo.value, lo.exclusive);
      const int c = compare(n, hi.value);
      any = c < 0 || (c == 0 && !hi.exclusive);
    } else {
      const int c = compare(lo.value, hi.value);
      any = c < 0 || (c == 0 && !lo.exclusive && !hi.exclusive);
    }
    QUENCH_REQUIRE(any, "JSON schema ", path, ": the bounds admit no ",
                   integer_only ? "integer" : "number");
  }
  return bounds;
}

bool NumberBounds::meets(const Decimal& a, const Decimal& b, bool integer_only, const Bound& lo,
                         const Bound& hi) {
  // The least candidate: a, or the least value (integer) past the lower bound.
  Decimal least = a;
  bool least_included = true;  // [a, ...: a itself is a candidate
  if (lo.present) {
    const int c = compare(lo.value, a);
    if (c > 0 || (c == 0 && lo.exclusive)) {
      if (integer_only) {
        least = least_integer_above(lo.value, lo.exclusive);
      } else {
        least = lo.value, least_included = !lo.exclusive;
      }
    }
  }
  // It must lie below b (the interval is half-open) and within the upper bound.
  if (compare(least, b) >= 0) return false;
  if (!hi.present) return true;
  const int c = compare(least, hi.value);
  if (c < 0) return true;
  return c == 0 && least_included && !hi.exclusive;
}

bool NumberBounds::may_continue(std::string_view prefix, bool integer_only) const {
  const bool negative = !prefix.empty() && prefix[0] == '-';
  const std::string_view rest = prefix.substr(negative ? 1 : 0);
  // Bounds on the magnitude m (the value is -m for a negative text).
  Bound lo = min_, hi = max_;
  if (negative) {
    lo = max_, hi = min_;
    if (lo.present) lo.value.negative = !lo.value.negative && !lo.value.is_zero();
    if (hi.present) hi.value.negative = !hi.value.negative && !hi.value.is_zero();
  }
  if (rest.empty()) {  // "-": any magnitude (every bound is below 10^(kMaxBoundExponent + 1))
    return meets(Decimal{}, make_decimal(false, "1", kMaxBoundExponent + 1), integer_only, lo, hi);
  }
  const size_t dot = rest.find('.');
  const std::string_view int_part = rest.substr(0, dot);
  if (dot != std::string_view::npos) {
    // I.F: [I.F, I.F + 10^-|F|) (F empty: [I, I + 1)).
    const std::string_view frac = rest.substr(dot + 1);
    std::string digits = std::string(int_part) + std::string(frac);
    const auto exponent = -static_cast<int64_t>(frac.size());
    return meets(make_decimal(false, digits, exponent),
                 make_decimal(false, plus_one(digits), exponent), false, lo, hi);
  }
  if (int_part == "0") {  // 0, or 0.F: [0, 1); an integer: 0 only
    const Decimal zero;
    return meets(zero, make_decimal(false, "1", 0), integer_only, lo, hi);
  }
  // I followed by k more digits (and a fraction): [I 10^k, (I + 1) 10^k) for k = 0, 1, ...
  const std::string next = plus_one(std::string(int_part));
  for (int64_t k = 0;; ++k) {
    const Decimal a = make_decimal(false, int_part, k);
    if (meets(a, make_decimal(false, next, k), integer_only, lo, hi)) return true;
    if (!hi.present) return true;                 // unbounded above: a longer one fits
    if (compare(a, hi.value) >= 0) return false;  // every later interval starts above
  }
}

bool NumberBounds::contains(std::string_view number) const {
  Decimal v;
  if (!Decimal::parse(number, v)) return false;
  if (min_.present) {
    const int c = compare(v, min_.value);
    if (c < 0 || (c == 0 && min_.exclusive)) return false;
  }
  if (max_.present) {
    const int c = compare(v, max_.value);
    if (c > 0 || (c == 0 && max_.exclusive)) return false;
  }
  return true;
}

}  // namespace quench
