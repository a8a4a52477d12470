#include "quench/engine/structured_output/grammar.h"

#include <algorithm>

#include <map>

#include "quench/core/error.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

bool is_name_char(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int hex_digit(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

}  // namespace

// Parses GBNF into rules of alternatives of element sequences, then prunes, checks and flattens
// them into the Grammar.
class GrammarCompiler {
 public:
  using Sequence = std::vector<Grammar::Element>;
  using Alternatives = std::vector<Sequence>;

  explicit GrammarCompiler(const std::string& text) {
    QUENCH_REQUIRE(find_invalid_utf8(text) == std::string::npos,
                   "grammar: the text is not valid UTF-8");
    text_ = decode_utf8(text);
  }

  std::shared_ptr<const Grammar> compile() {
    skip_space();
    while (pos_ < text_.size()) {
      const size_t at = pos_;
      const std::string name = parse_name();
      skip_space();
      if (!consume_text("::="))
        fail(at, str_cat("expected '::=' after the rule name '", name, "'"));
      const int32_t rule = rule_index(name);
      QUENCH_REQUIRE(!defined_[static_cast<size_t>(rule)], "grammar: rule '", name,
                     "' is defined twice");
      defined_[static_cast<size_t>(rule)] = 1;
      Alternatives alternatives = parse_alternatives(name);
      rules_[static_cast<size_t>(rule)] = std::move(alternatives);
      skip_space();
    }
    for (size_t r = 0; r < names_.size(); ++r) {
      QUENCH_REQUIRE(defined_[r], "grammar: rule '", names_[r], "' is used but not defined");
    }
    auto root = ids_.find("root");
    QUENCH_REQUIRE(root != ids_.end(), "grammar: no rule named 'root' (the output's rule)");
    prune_unfinishable(root->second);
    check_repetitions();
    check_left_recursion();
    return flatten(root->second);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line, column = 1;
      } else {
        ++column;
      }
    }
    throw Error(str_cat("grammar: line ", line, ", column ", column, ": ", what));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0;
  }
  bool consume_text(const char* s) {
    size_t n = 0;
    while (s[n] != 0) {
      if (peek(n) != static_cast<unsigned char>(s[n])) return false;
      ++n;
    }
    pos_ += n;
    return true;
  }

  // Spaces, tabs, newlines and # comments.
  void skip_space() {
    while (!at_end()) {
      const uint32_t c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n')
          ++pos_;
      } else {
        return;
      }
    }
  }

  void skip_blanks() {
    while (peek() == ' ' || peek() == '\t')
      ++pos_;
  }

  std::string parse_name() {
    std::string name;
    while (!at_end() && is_name_char(peek()))
      name += static_cast<char>(text_[pos_++]);
    if (name.empty()) fail(pos_, "expected a rule name");
    return name;
  }

  // Whether a rule definition (NAME ::=) starts here: the current rule ends before it.
  bool rule_starts_here() const {
    size_t i = pos_;
    while (i < text_.size() && is_name_char(text_[i]))
      ++i;
    if (i == pos_) return false;
    while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\t'))
      ++i;
    return i + 2 < text_.size() && text_[i] == ':' && text_[i + 1] == ':' && text_[i + 2] == '=';
  }

  int32_t rule_index(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<int32_t>(names_.size()));
    if (inserted) {
      names_.push_back(name);
      rules_.emplace_back();
      defined_.push_back(0);
    }
    return it->second;
  }

  // A rule made by the compiler (a group, a repetition), named after the rule it appears in.
  int32_t new_rule(const std::string& owner, Alternatives alternatives) {
    const std::string name = str_cat(owner, "_", names_.size());
    const int32_t rule = rule_index(name);
    rules_[static_cast<size_t>(rule)] = std::move(alternatives);
    defined_[static_cast<size_t>(rule)] = 1;
    return rule;
  }

  static Grammar::Element rule_element(int32_t rule) {
    Grammar::Element e;
    e.kind = Grammar::Kind::kRule;
    e.rule = rule;
    return e;
  }
  static Grammar::Element chars_element(CodePointClass chars) {
    Grammar::Element e;
    e.kind = Grammar::Kind::kChars;
    e.chars = normalize_class(std::move(chars));
    return e;
  }

  Alternatives parse_alternatives(const std::string& owner) {
    // Groups nest through this recursion: bounded, so that no text exhausts the thread's stack.
    if (++nesting_ > Grammar::kMaxNesting)
      fail(pos_, str_cat("groups nest deeper than ", Grammar::kMaxNesting));
    Alternatives alternatives;
    alternatives.push_back(parse_sequence(owner));
    for (;;) {
      skip_space();
      if (peek() != '|') break;
      ++pos_;
      alternatives.push_back(parse_sequence(owner));
    }
    --nesting_;
    return alternatives;
  }

  Sequence parse_sequence(const std::string& owner) {
    Sequence sequence;
    for (;;) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || rule_starts_here()) return sequence;
      Sequence item = parse_item(owner);
      sequence.insert(sequence.end(), item.begin(), item.end());
    }
  }

  // One primary and its repetitions.
  Sequence parse_item(const std::string& owner) {
    Sequence item = parse_primary(owner);
    for (;;) {
      const uint32_t c = peek();
      if (c != '*' && c != '+' && c != '?' && c != '{') return item;
      const size_t at = pos_;
      int32_t min = 0, max = -1;
      ++pos_;
      if (c == '+') {
        min = 1;
      } else if (c == '?') {
        max = 1;
      } else if (c == '{') {  // spaces may stand around the counts, as llama.cpp reads them
        skip_blanks();
        min = parse_count();
        max = min;
        skip_blanks();
        if (peek() == ',') {
          ++pos_;
          skip_blanks();
          max = peek() == '}' ? -1 : parse_count();
          skip_blanks();
        }
        if (peek() != '}') fail(pos_, "expected '}' closing a repetition count");
        ++pos_;
        if (max >= 0 && max < min)
          fail(at, str_cat("repetition {", min, ",", max, "} has max < min"));
      }
      item = repeat(owner, std::move(item), min, max, at);
    }
  }

  int32_t parse_count() {
    int64_t n = 0;
    const size_t at = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      ++pos_;
      if (n > Grammar::kMaxRepeat)
        fail(at, str_cat("repetition counts above ", Grammar::kMaxRepeat, " are not supported"));
    }
    if (pos_ == at) fail(at, "expected a repetition count");
    return static_cast<int32_t>(n);
  }

  // `item` between min and max times (max -1: no bound). The item becomes one element (a rule of
  // its own unless it is one already); unbounded tails are right-recursive rules.
  Sequence repeat(const std::string& owner, Sequence item, int32_t min, int32_t max, size_t at) {
    Grammar::Element x = item.size() == 1 ? item[0] : rule_element(new_rule(owner, {item}));
    // Copies are counted as they are made: counts multiply a text's size.
    copies_ += static_cast<size_t>(min) + 2 * static_cast<size_t>(std::max(max - min, 0));
    if (copies_ > Grammar::kMaxElements) {
      fail(at, str_cat("repetitions expand to more than ", Grammar::kMaxElements, " elements"));
    }
    Sequence out(static_cast<size_t>(min), x);
    if (max < 0) {
      // star ::= x star | (empty)
      const int32_t star = rule_index(str_cat(owner, "_", names_.size()));
      defined_[static_cast<size_t>(star)] = 1;
      rules_[static_cast<size_t>(star)] = {{x, rule_element(star)}, {}};
      repetitions_.push_back({star, x, at});
      out.push_back(rule_element(star));
      return out;
    }
    // opt_k ::= x opt_(k-1) | (empty), for the max - min optional copies.
    int32_t tail = -1;
    for (int32_t k = 0; k < max - min; ++k) {
      Sequence more = {x};
      if (tail >= 0) more.push_back(rule_element(tail));
      tail = new_rule(owner, {more, {}});
    }
    if (tail >= 0) out.push_back(rule_element(tail));
    return out;
  }

  Sequence parse_primary(const std::string& owner) {
    const size_t at = pos_;
    const uint32_t c = peek();
    if (c == '"') {
      ++pos_;
      Sequence literal;
      while (!at_end() && peek() != '"')
        literal.push_back(chars_element({single(parse_char())}));
      if (at_end()) fail(at, "unterminated literal");
      ++pos_;
      return literal;
    }
    if (c == '[') return {parse_class()};
    if (c == '.') {
      ++pos_;
      return {chars_element({{0, kMaxCodePoint}})};
    }
    if (c == '(') {
      ++pos_;
      Alternatives group = parse_alternatives(owner);
      skip_space();
      if (peek() != ')') fail(at, "unclosed '('");
      ++pos_;
      if (group.size() == 1) return group[0];
      return {rule_element(new_rule(owner, std::move(group)))};
    }
    if (is_name_char(c)) return {rule_element(rule_index(parse_name()))};
    fail(at, str_cat("unexpected '", utf8_of(c), "'"));
  }

  static CodePointRange single(uint32_t cp) { return {cp, cp}; }
  static std::string utf8_of(uint32_t cp) {
    std::string s;
    if (cp <= kMaxCodePoint && (cp < 0xD800 || cp > 0xDFFF)) append_utf8(cp, s);
    return s;
  }

  // A character of a literal or class, escapes decoded.
  uint32_t parse_char() {
    const size_t at = pos_;
    const uint32_t c = text_[pos_++];
    if (c != '\\') return c;
    if (at_end()) fail(at, "a '\\' ends the grammar");
    const uint32_t e = text_[pos_++];
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'x':
        return parse_hex(2, at);
      case 'u':
        return parse_hex(4, at);
      case 'U':
        return parse_hex(8, at);
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        return e;
      default:
        fail(at, str_cat("unknown escape '\\", utf8_of(e), "'; allowed: \\n \\r \\t \\\\ \\\" \\[ ",
                         "\\] \\- \\^ \\xHH \\uHHHH \\UHHHHHHHH"));
    }
  }

  uint32_t parse_hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = at_end() ? -1 : hex_digit(peek());
      if (d < 0) fail(at, str_cat("expected ", digits, " hex digits"));
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
      fail(at, "the escape is not a Unicode scalar value");
    return v;
  }

  Grammar::Element parse_class() {
    const size_t at = pos_;
    ++pos_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointClass ranges;
    while (!at_end() && peek() != ']') {
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail(at, "a class range runs backwards");
      }
      ranges.push_back({lo, hi});
    }
    if (at_end()) fail(at, "unterminated '['");
    ++pos_;
    CodePointClass chars = normalize_class(std::move(ranges));
    return chars_element(negated ? negate_class(chars) : chars);
  }

  // Keeps the alternatives that can finish (every element derives some finite text); the root
  // must keep one.
  void prune_unfinishable(int32_t root) {
    const size_t n = rules_.size();
    std::vector<char> finishes(n, 0);
    auto element_finishes = [&](const Grammar::Element& e) {
      return e.kind == Grammar::Kind::kChars ? !e.chars.empty()
                                             : finishes[static_cast<size_t>(e.rule)] != 0;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (finishes[r]) continue;
        for (const Sequence& s : rules_[r]) {
          bool all = true;
          for (const Grammar::Element& e : s)
            all = all && element_finishes(e);
          if (all) {
            finishes[r] = 1, changed = true;
            break;
          }
        }
      }
    }
    QUENCH_REQUIRE(finishes[static_cast<size_t>(root)], "grammar: rule 'root' admits no text ",
                   "(every alternative needs a rule that never finishes, or an empty class)");
    for (Alternatives& alternatives : rules_) {
      std::erase_if(alternatives, [&](const Sequence& s) {
        for (const Grammar::Element& e : s)
          if (!element_finishes(e)) return true;
        return false;
      });
    }
  }

  std::vector<char> nullable_rules() const {
    std::vector<char> nullable(rules_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules_.size(); ++r) {
        if (nullable[r]) continue;
        for (const Sequence& s : rules_[r]) {
          bool all = true;
          for (const Grammar::Element& e : s)
            all = all && e.kind == Grammar::Kind::kRule && nullable[static_cast<size_t>(e.rule)];
          if (all) {
            nullable[r] = 1, changed = true;
            break;
          }
        }
      }
    }
    return nullable;
  }

  void check_repetitions() {
    const std::vector<char> nullable = nullable_rules();
    for (const Repetition& r : repetitions_) {
      if (r.item.kind == Grammar::Kind::kRule && nullable[static_cast<size_t>(r.item.rule)])
        fail(r.at, "'*', '+' or '{m,}' repeats something that may match the empty text");
    }
  }

  // A rule that reaches itself without consuming a character would expand forever.
  void check_left_recursion() {
    const std::vector<char> nullable = nullable_rules();
    const size_t n = rules_.size();
    std::vector<std::vector<int32_t>> first(n);  // rules a rule may start with
    for (size_t r = 0; r < n; ++r) {
      for (const Sequence& s : rules_[r]) {
        for (const Grammar::Element& e : s) {
          if (e.kind != Grammar::Kind::kRule) break;
          first[r].push_back(e.rule);
          if (!nullable[static_cast<size_t>(e.rule)]) break;
        }
      }
    }
    // Depth first, without recursion (a long chain of rules must not exhaust the thread's
    // stack): a rule still on the path reached again is a cycle.
    std::vector<uint8_t> color(n, 0);             // 0 new, 1 on the path, 2 done
    std::vector<std::pair<size_t, size_t>> path;  // (rule, next of its first rules to visit)
    for (size_t root = 0; root < n; ++root) {
      if (color[root] != 0) continue;
      color[root] = 1;
      path.emplace_back(root, 0);
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == first[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const auto s = static_cast<size_t>(first[r][next++]);
        if (color[s] == 1) {
          throw Error(str_cat("grammar: rule '", names_[s],
                              "' is left-recursive (it can reach itself before any character); "
                              "write the repetition with '*' or right recursion"));
        }
        if (color[s] == 0) {
          color[s] = 1;
          path.emplace_back(s, 0);
        }
      }
    }
  }

  std::shared_ptr<const Grammar> flatten(int32_t root) {
    auto g = std::make_shared<Grammar>();
    g->alternatives_.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& s : rules_[r]) {
        QUENCH_REQUIRE(g->elements_.size() + s.size() < Grammar::kMaxElements,
                       "grammar: more than ", Grammar::kMaxElements,
                       " elements once repetitions are expanded");
        g->alternatives_[r].push_back(static_cast<int32_t>(g->elements_.size()));
        g->elements_.insert(g->elements_.end(), s.begin(), s.end());
        g->elements_.push_back(Grammar::Element{});  // kEnd
      }
    }
    g->root_ = root;
    return g;
  }

  struct Repetition {
    int32_t rule;
    Grammar::Element item;
    size_t at;
  };
  std::vector<uint32_t> text_;
  size_t pos_ = 0;
  int nesting_ = 0;    // parse_alternatives calls open
  size_t copies_ = 0;  // elements repetitions have made
  std::map<std::string, int32_t> ids_;
  std::vector<std::string> names_;
  std::vector<Alternatives> rules_;
  std::vector<char> defined_;
  std::vector<Repetition> repetitions_;
};

std::shared_ptr<const Grammar> Grammar::compile(const std::string& text) {
  return GrammarCompiler(text).compile();
}

}  // namespace quench
