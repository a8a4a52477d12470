// Structured output: the ECMA-262 regular expressions of JSON Schema's "pattern", parsed into a
// tree of code-point classes, sequences, alternatives and bounded or unbounded repetitions.
// The subset is the regular one that schemas use: literals and escapes (\d \w \s and their
// negations, \t \n \r \f \v \0, \xHH, \uHHHH, \u{H...}, \cX, escaped punctuation), '.', classes
// with ranges and negation, groups ((...), (?:...), (?<name>...)), alternation, the quantifiers
// * + ? {n} {n,} {n,m} (lazy forms too: the same language), and the anchors ^ / $ at the start /
// end of a top-level alternative. JSON Schema's pattern is unanchored (a match anywhere in the
// string): an alternative without ^ gets any prefix, one without $ any suffix. Backreferences,
// lookaround, word boundaries, Unicode property escapes and anchors elsewhere are refused by name
// (quench::Error with the construct and its offset), never dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quench {

struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};
// Sorted, disjoint and non-adjacent ranges of Unicode scalar values (never a surrogate: JSON
// strings decode to scalar values, so a class of surrogates alone admits nothing).
using CodePointClass = std::vector<CodePointRange>;

struct RegexNode {
  enum class Kind : uint8_t {
    kEmpty,        // the empty string
    kClass,        // one code point of `code_points`
    kSequence,     // children one after another
    kAlternative,  // one of the children
    kRepeat,       // children[0] between min and max times (max -1: no bound)
  };
  Kind kind = Kind::kEmpty;
  CodePointClass code_points;
  std::vector<RegexNode> children;
  int32_t min = 0;
  int32_t max = -1;
};

// Repetition bounds above this are refused (each repetition is a copy in the automaton).
inline constexpr int32_t kMaxRegexRepeat = 1000;

// Throws quench::Error naming what is unsupported or malformed, and where. full_match: the
// expression must match the whole text (anchored at both ends; ^ and $ there change nothing),
// as a guided_regex asks, instead of JSON Schema's match anywhere.
RegexNode parse_regex(const std::string& pattern, bool full_match = false);

// `text` as a regular expression that matches exactly it (metacharacters escaped).
std::string regex_literal(const std::string& text);

// Class algebra, exposed for the automaton and tests.
CodePointClass normalize_class(CodePointClass ranges);  // sorts, merges, drops surrogates
CodePointClass negate_class(const CodePointClass& ranges);
bool class_contains(const CodePointClass& ranges, uint32_t cp);

}  // namespace quench
