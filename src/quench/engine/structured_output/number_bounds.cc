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

// +1 / -1 on magnitudes' digit strings.
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

// Digit strings (leading zeros allowed) against a step's units (below 10^17, as compile
// requires, so that a remainder times 10 plus a digit, and a digit times units plus a carry, fit
// in 64 bits).

// The quotient of digits / units (with leading zeros) and the remainder.
uint64_t divide(std::string_view digits, uint64_t units, std::string& quotient) {
  uint64_t r = 0;
  quotient.clear();
  for (char c : digits) {
    r = r * 10 + static_cast<uint64_t>(c - '0');
    quotient += static_cast<char>('0' + r / units);
    r %= units;
  }
  return r;
}

std::string times(std::string_view digits, uint64_t units) {
  std::string out(digits.size(), '0');
  uint64_t carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    const uint64_t v = static_cast<uint64_t>(digits[i] - '0') * units + carry;
    out[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  return carry == 0 ? out : std::to_string(carry) + out;
}

// floor(|x| / step) as digits, and whether the division is exact.
std::string quotient_of(const Decimal& x, const NumberBounds::Step& step, bool& exact) {
  // |x| / step = digits x 10^(exponent + scale) / units.
  const int64_t shift = x.exponent + step.scale;
  std::string quotient;
  if (shift >= 0) {
    exact =
        divide(x.digits + std::string(static_cast<size_t>(shift), '0'), step.units, quotient) == 0;
    return quotient;
  }
  // The digits dropped by the shift are not all zeros (a Decimal has no trailing zero).
  exact = false;
  const auto keep = static_cast<int64_t>(x.digits.size()) + shift;
  if (keep <= 0) return "0";
  divide(std::string_view(x.digits).substr(0, static_cast<size_t>(keep)), step.units, quotient);
  return quotient;
}

bool is_multiple(const Decimal& x, const NumberBounds::Step& step) {
  if (step.units == 0 || x.is_zero()) return true;
  bool exact = false;
  quotient_of(x, step, exact);
  return exact;
}

// The least multiple of `step` above x (strictly) or at least x.
Decimal least_multiple(const Decimal& x, bool strictly, const NumberBounds::Step& step) {
  if (x.is_zero())
    return strictly ? make_decimal(false, std::to_string(step.units), -step.scale) : Decimal{};
  bool exact = false;
  std::string k = quotient_of(x, step, exact);  // floor(|x| / step)
  if (!x.negative) {
    if (!exact || strictly) k = plus_one(k);  // the next multiple up
  } else if (exact && strictly) {
    k = minus_one(k);  // -k step = x: one step nearer zero
  }
  return make_decimal(x.negative, times(k, step.units), -step.scale);
}

uint64_t gcd(uint64_t a, uint64_t b) {
  while (b != 0)
    a %= b, std::swap(a, b);
  return a;
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
  if (schema.contains("multipleOf")) {
    const nlohmann::json& v = schema.at("multipleOf");
    Decimal d;
    QUENCH_REQUIRE(v.is_number() && Decimal::parse(v.dump(), d) && !d.negative && !d.is_zero(),
                   "JSON schema ", path, ": 'multipleOf' must be a number above 0, not ", v.dump());
    // units x 10^-scale: the digits, with the exponent's zeros where it is positive.
    const std::string units =
        d.exponent > 0 ? d.digits + std::string(static_cast<size_t>(d.exponent), '0') : d.digits;
    QUENCH_REQUIRE(units.size() <= 17 && d.exponent >= -kMaxBoundExponent, "JSON schema ", path,
                   ": 'multipleOf' ", v.dump(),
                   " has more than 17 significant digits or a scale "
                   "below 10^-",
                   kMaxBoundExponent);
    bounds->multiple_of_ = {std::stoull(units), d.exponent > 0 ? 0 : -d.exponent};
  }
  if (!bounds->min_.present && !bounds->max_.present && bounds->multiple_of_.units == 0)
    return nullptr;
  // An integer that is a multiple of units x 10^-scale is a multiple of the least common
  // multiple, units / gcd(units, 10^scale) (10^scale's factors are 2s and 5s).
  Step& integer = bounds->integer_multiple_;
  integer = {1, 0};
  if (const Step& m = bounds->multiple_of_; m.units != 0) {
    uint64_t units = m.units;
    for (int64_t i = 0; i < m.scale; ++i) {
      const uint64_t g = gcd(units, 10);
      if (g == 1) break;
      units /= g;
    }
    integer.units = units;
  }
  const Step& step = integer_only ? bounds->integer_multiple_ : bounds->multiple_of_;
  // Some value must lie within: the least one past the lower bound (0 where there is none, or
  // the largest multiple under the upper bound).
  const Bound &lo = bounds->min_, &hi = bounds->max_;
  bool any = true;
  if (lo.present && hi.present) {
    const Decimal least = step.units != 0 ? least_multiple(lo.value, lo.exclusive, step) : lo.value;
    const bool included = step.units != 0 || !lo.exclusive;
    const int c = compare(least, hi.value);
    any = c < 0 || (c == 0 && included && !hi.exclusive);
  }
  const char* what = integer_only ? "integer" : "number";
  QUENCH_REQUIRE(any, "JSON schema ", path, ": the bounds admit no ", what,
                 bounds->multiple_of_.units != 0 ? " that is a multiple of multipleOf" : "");
  return bounds;
}

bool NumberBounds::meets(const Decimal& a, const Decimal& b, const Step& step, const Bound& lo,
                         const Bound& hi) {
  // The least candidate: a, or the lower bound where it lies above a; then the least multiple
  // of the step from there.
  Decimal least = a;
  bool least_included = true;  // [a, ...: a itself is a candidate
  if (lo.present) {
    const int c = compare(lo.value, a);
    if (c > 0 || (c == 0 && lo.exclusive)) least = lo.value, least_included = !lo.exclusive;
  }
  if (step.units != 0) least = least_multiple(least, !least_included, step), least_included = true;
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
  const Step& step = integer_only ? integer_multiple_ : multiple_of_;
  if (rest.empty()) {  // "-": any magnitude (every bound and step is below 10^(kMaxBoundExponent +
                       // 1))
    return meets(Decimal{}, make_decimal(false, "1", kMaxBoundExponent + 1), step, lo, hi);
  }
  const size_t dot = rest.find('.');
  const std::string_view int_part = rest.substr(0, dot);
  if (dot != std::string_view::npos) {
    // I.F: [I.F, I.F + 10^-|F|) (F empty: [I, I + 1)).
    const std::string_view frac = rest.substr(dot + 1);
    std::string digits = std::string(int_part) + std::string(frac);
    const auto exponent = -static_cast<int64_t>(frac.size());
    return meets(make_decimal(false, digits, exponent),
                 make_decimal(false, plus_one(digits), exponent), multiple_of_, lo, hi);
  }
  if (int_part == "0") {  // 0, or 0.F: [0, 1); an integer: 0 only
    const Decimal zero;
    return meets(zero, make_decimal(false, "1", 0), step, lo, hi);
  }
  // I followed by k more digits (and a fraction): [I 10^k, (I + 1) 10^k) for k = 0, 1, ...
  const std::string next = plus_one(std::string(int_part));
  for (int64_t k = 0;; ++k) {
    const Decimal a = make_decimal(false, int_part, k);
    if (meets(a, make_decimal(false, next, k), step, lo, hi)) return true;
    // Unbounded above, a longer one fits: its interval lies past the lower bound and is wider
    // than the step once k is large enough.
    if (!hi.present) return true;
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
  return is_multiple(v, multiple_of_);
}

}  // namespace quench
