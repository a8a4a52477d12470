// Structured output: a number schema's minimum / maximum / exclusiveMinimum / exclusiveMaximum
// and multipleOf, checked on the number's text as JsonSchemaPrefix types it. The arithmetic is
// exact (decimal digits, never a double), and the test is on what the text can still become: a
// prefix is admitted only where some number starting with it lies within the bounds, so that the
// output never types a number it cannot finish. A bounded number is written without an exponent
// (every value has such a form), which keeps the set of its completions a few intervals.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace quench {

// An exact decimal: (-1)^negative x digits x 10^exponent, digits without leading or trailing
// zeros ("" is zero, never negative).
struct Decimal {
  bool negative = false;
  std::string digits;
  int64_t exponent = 0;

  // A JSON number's text (an exponent allowed); false where it is not one.
  static bool parse(std::string_view text, Decimal& out);
  bool is_zero() const { return digits.empty(); }
};
int compare(const Decimal& a, const Decimal& b);  // -1, 0, 1

class NumberBounds {
 public:
  // From the schema's bound keywords and multipleOf; null where it has none. Throws
  // quench::Error naming the keyword when a bound is not a number, when multipleOf is not a
  // positive number of at most 17 significant digits, or when the keywords admit no value (no
  // integer, where integer_only).
  static std::shared_ptr<const NumberBounds> compile(const nlohmann::json& schema,
                                                     bool integer_only, const std::string& path);

  // Whether `prefix`, the start of a number's text without an exponent ("-", "12", "0.",
  // "-3.25"), can still become (or already is) a number within the bounds and a multiple of
  // multipleOf; integer_only: one without a fraction.
  bool may_continue(std::string_view prefix, bool integer_only) const;
  // Whether the complete number text lies within the bounds and is a multiple of multipleOf.
  bool contains(std::string_view number) const;

  // A positive step units x 10^-scale (multipleOf; 1 for integers); units 0: none.
  struct Step {
    uint64_t units = 0;
    int64_t scale = 0;
  };

 private:
  struct Bound {
    bool present = false;
    bool exclusive = false;
    Decimal value;
  };
  // Whether some value of [a, b) lies within the bounds lo / hi and is a multiple of `step`.
  static bool meets(const Decimal& a, const Decimal& b, const Step& step, const Bound& lo,
                    const Bound& hi);
  Bound min_, max_;
  Step multiple_of_;       // multipleOf, or none
  Step integer_multiple_;  // the least common multiple of multipleOf (if any) and 1
};

}  // namespace quench
