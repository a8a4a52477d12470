#include "quench/engine/structured_output/regex_syntax.h"

#include <algorithm>
#include <cstring>

#include "quench/core/error.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// The pattern's code points (JSON gives schemas as UTF-8 text).
std::vector<uint32_t> pattern_code_points(const std::string& text) {
  QUENCH_REQUIRE(find_invalid_utf8(text) == std::string::npos, "pattern: invalid UTF-8");
  return decode_utf8(text);
}

RegexNode class_node(CodePointClass ranges) {
  RegexNode n;
  n.kind = RegexNode::Kind::kClass;
  n.code_points = normalize_class(std::move(ranges));
  return n;
}

CodePointClass digits() {
  return {{'0', '9'}};
}
CodePointClass word_chars() {
  return normalize_class({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
}
// ECMA-262's WhiteSpace and LineTerminator.
CodePointClass space_chars() {
  return normalize_class({{'\t', '\r'},
                          {' ', ' '},
                          {0xA0, 0xA0},
                          {0x1680, 0x1680},
                          {0x2000, 0x200A},
                          {0x2028, 0x2029},
                          {0x202F, 0x202F},
                          {0x205F, 0x205F},
                          {0x3000, 0x3000},
                          {0xFEFF, 0xFEFF}});
}
CodePointClass any_char() {
  return normalize_class({{0, kMaxCodePoint}});
}
// '.': anything but a line terminator.
CodePointClass dot_chars() {
  return negate_class(normalize_class({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
}

class RegexParser {
 public:
  RegexParser(const std::string& pattern, bool full_match)
      : text_(pattern_code_points(pattern)), full_match_(full_match) {}

  RegexNode parse() {
    RegexNode root = parse_alternatives(true);
    if (pos_ < text_.size()) fail("unbalanced ')'");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(str_cat("pattern: ", what, " at offset ", pos_,
                        "; supported: literals, escapes (\\d \\w \\s \\D \\W \\S \\t \\n \\r \\f "
                        "\\v \\0 \\xHH \\uHHHH \\cX), '.', classes [...] with ranges and "
                        "negation, groups, '|', * + ? {n} {n,} {n,m}, and ^ / $ at the ends"));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0xFFFFFFFFu;
  }

  // Alternatives up to ')' or the end. Top-level alternatives take the anchors: without '^' any
  // prefix may come first, without '$' any suffix may follow (JSON Schema's search semantics).
  RegexNode parse_alternatives(bool top_level) {
    RegexNode alternatives;
    alternatives.kind = RegexNode::Kind::kAlternative;
    for (;;) {
      bool anchored_start = false, anchored_end = false;
      if (peek() == '^') {
        if (!top_level) fail("'^' inside a group is not supported");
        anchored_start = true;
        ++pos_;
      }
      RegexNode sequence = parse_sequence(top_level, anchored_end);
      if (top_level && !full_match_) {
        RegexNode wrapped;
        wrapped.kind = RegexNode::Kind::kSequence;
        if (!anchored_start) wrapped.children.push_back(any_string());
        wrapped.children.push_back(std::move(sequence));
        if (!anchored_end) wrapped.children.push_back(any_string());
        sequence = std::move(wrapped);
      }
      alternatives.children.push_back(std::move(sequence));
      if (peek() != '|') break;
      ++pos_;
    }
    if (alternatives.children.size() == 1) return std::move(alternatives.children[0]);
    return alternatives;
  }

  static RegexNode any_string() {
    RegexNode star;
    star.kind = RegexNode::Kind::kRepeat;
    star.children.push_back(class_node(any_char()));
    return star;
  }

  RegexNode parse_sequence(bool top_level, bool& anchored_end) {
    RegexNode sequence;
    sequence.kind = RegexNode::Kind::kSequence;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (!top_level || !(at_end() || peek() == '|')) {
          --pos_;
          fail("'$' before the end of a top-level alternative is not supported");
        }
        anchored_end = true;
        break;
      }
      RegexNode atom = parse_atom();
      parse_quantifier(atom);
      sequence.children.push_back(std::move(atom));
    }
    if (sequence.children.size() == 1) return std::move(sequence.children[0]);
    return sequence;
  }

  // A decimal number of a quantifier; false (position unchanged) where there is none.
  bool parse_count(int32_t& value) {
    const size_t start = pos_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRegexRepeat) {
        pos_ = start;
        fail(str_cat("a repetition count above ", kMaxRegexRepeat));
      }
      ++pos_;
    }
    if (pos_ == start) return false;
    value = static_cast<int32_t>(v);
    return true;
  }

  void parse_quantifier(RegexNode& atom) {
    int32_t min = 0, max = -1;
    switch (peek()) {
      case '*':
        ++pos_;
        break;
      case '+':
        ++pos_, min = 1;
        break;
      case '?':
        ++pos_, max = 1;
        break;
      case '{': {
        // {n}, {n,}, {n,m}; a '{' that starts none of them is a literal (as ECMA-262's web
        // grammar reads it), handled by parse_atom.
        const size_t start = pos_;
        ++pos_;
        if (!parse_count(min)) {
          pos_ = start;
          return;
        }
        max = min;
        if (peek() == ',') {
          ++pos_;
          max = -1;
          parse_count(max);
        }
        if (peek() != '}') {
          pos_ = start;
          return;
        }
        ++pos_;
        if (max >= 0 && max < min) fail("a quantifier {n,m} with m < n");
        break;
      }
      default:
        return;
    }
    if (peek() == '?') ++pos_;  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '?' ||
        (peek() == '{' && peek(1) >= '0' && peek(1) <= '9')) {
      fail("a quantifier after a quantifier");
    }
    RegexNode repeat;
    repeat.kind = RegexNode::Kind::kRepeat;
    repeat.min = min, repeat.max = max;
    repeat.children.push_back(std::move(atom));
    atom = std::move(repeat);
  }

  RegexNode parse_atom() {
    const uint32_t c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            pos_ += 2;  // a named group: the name does not change the language
            while (!at_end() && peek() != '>')
              ++pos_;
            if (at_end()) fail("an unterminated group name");
            ++pos_;
          } else {
            --pos_;
            fail("lookahead / lookbehind assertions are not supported");
          }
        }
        RegexNode inner = parse_alternatives(false);
        if (peek() != ')') fail("an unterminated group");
        ++pos_;
        return inner;
      }
      case '[':
        return parse_class();
      case '.':
        ++pos_;
        return class_node(dot_chars());
      case '\\': {
        ++pos_;
        CodePointClass ranges;
        if (!parse_escape(false, ranges)) fail("a backslash at the end");
        return class_node(std::move(ranges));
      }
      case '*':
      case '+':
      case '?':
        fail("a quantifier with nothing to repeat");
      case '^':
        fail("'^' after the start of a top-level alternative is not supported");
      default:
        ++pos_;
        return class_node({{c, c}});
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const uint32_t h = peek();
      uint32_t d;
      if (h >= '0' && h <= '9') {
        d = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        d = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        d = h - 'A' + 10;
      } else {
        fail(str_cat("an escape needs ", digits, " hex digits"));
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // The escape after a backslash (pos_ at the character after it) into `ranges`. In a class,
  // \b is the backspace; outside it is a word boundary (refused). False at the pattern's end.
  bool parse_escape(bool in_class, CodePointClass& ranges) {
    if (at_end()) return false;
    const uint32_t c = peek();
    ++pos_;
    auto single = [&](uint32_t cp) { ranges = {{cp, cp}}; };
    switch (c) {
      case 'd':
        ranges = digits();
        return true;
      case 'D':
        ranges = negate_class(digits());
        return true;
      case 'w':
        ranges = word_chars();
        return true;
      case 'W':
        ranges = negate_class(word_chars());
        return true;
      case 's':
        ranges = space_chars();
        return true;
      case 'S':
        ranges = negate_class(space_chars());
        return true;
      case 't':
        single('\t');
        return true;
      case 'n':
        single('\n');
        return true;
      case 'r':
        single('\r');
        return true;
      case 'f':
        single('\f');
        return true;
      case 'v':
        single('\v');
        return true;
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("an octal escape");
        single(0);
        return true;
      case 'x':
        single(parse_hex(2));
        return true;
      case 'u': {
        if (peek() == '{') {
          ++pos_;
          uint32_t v = 0;
          int n = 0;
          while (peek() != '}' && n < 6) {
            v = v * 16 + parse_hex(1);
            ++n;
          }
          if (peek() != '}' || n == 0 || v > kMaxCodePoint) fail("an invalid \\u{...} escape");
          ++pos_;
          single(v);
          return true;
        }
        uint32_t v = parse_hex(4);
        // A surrogate pair written as two escapes is one code point.
        if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t save = pos_;
          pos_ += 2;
          const uint32_t low = parse_hex(4);
          if (low >= 0xDC00 && low <= 0xDFFF) {
            v = surrogate_pair_code_point(v, low);
          } else {
            pos_ = save;
          }
        }
        single(v);
        return true;
      }
      case 'c': {
        const uint32_t letter = peek();
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z')))
          fail("\\c needs a letter");
        ++pos_;
        single(letter % 32);
        return true;
      }
      case 'b':
        if (in_class) {
          single('\b');
          return true;
        }
        --pos_;
        fail("word boundaries (\\b) are not supported");
      case 'B':
        --pos_;
        fail("word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        --pos_;
        fail("Unicode property escapes (\\p{...}) are not supported");
      case 'k':
        --pos_;
        fail("named backreferences (\\k<...>) are not supported");
      default:
        if (c >= '1' && c <= '9') {
          --pos_;
          fail("backreferences are not supported");
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          --pos_;
          fail(str_cat("the escape \\", static_cast<char>(c), " is unknown"));
        }
        single(c);  // escaped punctuation (or any other non-letter) stands for itself
        return true;
    }
  }

  RegexNode parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') negated = true, ++pos_;
    CodePointClass ranges;
    // "[]" admits nothing and "[^]" anything, as in ECMA-262.
    while (peek() != ']') {
      if (at_end()) fail("an unterminated class '['");
      CodePointClass lo_part;
      const bool lo_single = parse_class_atom(lo_part);
      if (lo_single && peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFFu) {
        ++pos_;
        CodePointClass hi_part;
        const bool hi_single = parse_class_atom(hi_part);
        if (!hi_single) fail("a class range whose end is a class escape");
        if (hi_part[0].lo < lo_part[0].lo) fail("a class range out of order");
        ranges.push_back({lo_part[0].lo, hi_part[0].lo});
        continue;
      }
      ranges.insert(ranges.end(), lo_part.begin(), lo_part.end());
    }
    ++pos_;  // ']'
    CodePointClass normalized = normalize_class(std::move(ranges));
    return class_node(negated ? negate_class(normalized) : normalized);
  }

  // One class member into `out`; true where it is a single code point (a range may use it).
  bool parse_class_atom(CodePointClass& out) {
    const uint32_t c = peek();
    ++pos_;
    if (c == '\\') {
      if (!parse_escape(true, out)) fail("a backslash at the end");
      // The raw ranges of a single escape (before normalize_class drops a surrogate).
      return out.size() == 1 && out[0].lo == out[0].hi;
    }
    out = {{c, c}};
    return true;
  }

  std::vector<uint32_t> text_;
  bool full_match_ = false;
  size_t pos_ = 0;
};

}  // namespace

CodePointClass normalize_class(CodePointClass ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  CodePointClass merged;
  for (const CodePointRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  // Surrogates are not scalar values: cut them out.
  CodePointClass out;
  for (const CodePointRange& r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

CodePointClass negate_class(const CodePointClass& ranges) {
  CodePointClass out;
  uint32_t next = 0;
  for (const CodePointRange& r : normalize_class(ranges)) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_class(std::move(out));
}

bool class_contains(const CodePointClass& ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const CodePointRange& r) { return v < r.lo; });
  return it != ranges.begin() && cp <= std::prev(it)->hi;
}

RegexNode parse_regex(const std::string& pattern, bool full_match) {
  return RegexParser(pattern, full_match).parse();
}

std::string regex_literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::strchr("\\^$.|?*+()[]{}/-", c) != nullptr && c != '\0') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace quench
