#include "quench/engine/structured_output/json_schema_prefix.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

bool is_whitespace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(unsigned char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
uint32_t hex_value(unsigned char c) {
  return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}
template <typename T>
void append_bytes(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

JsonSchemaPrefix::JsonSchemaPrefix(const JsonSchema& schema)
    : schema_(&schema), root_(schema.root()) {
  if (schema.raw_text() && node(root_).grammar) {
    mode_ = Mode::kGrammar;
    grammar_.emplace(*node(root_).grammar);
    if (grammar_->finished()) mode_ = Mode::kDone;  // a grammar of the empty text only
  } else if (schema.raw_text()) {
    mode_ = Mode::kText;
    string_node_ = root_;
    pattern_state_ = node(root_).pattern->start();
    end_text_if_final();  // a pattern of the empty text only
  }
}

JsonSchemaPrefix::JsonSchemaPrefix(const JsonSchema& schema, int32_t node, size_t depth_limit)
    : schema_(&schema), root_(node), depth_limit_(depth_limit) {}

bool JsonSchemaPrefix::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed_byte(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string JsonSchemaPrefix::key() const {
  std::string k;
  append_bytes(k, schema_->id());
  k += static_cast<char>(mode_);
  k += static_cast<char>((string_is_key_ ? 1 : 0) | (key_match_ ? 2 : 0) | (integer_only_ ? 4 : 0));
  k += static_cast<char>('0' + hex_left_);
  k += static_cast<char>('0' + whitespace_run_);
  append_bytes(k, string_node_);
  append_bytes(k, chars_);
  append_bytes(k, enum_node_);
  append_bytes(k, number_node_);
  append_bytes(k, pattern_state_);
  append_bytes(k, code_point_);
  append_bytes(k, utf8_left_);
  append_bytes(k, utf8_min_);
  append_bytes(k, high_surrogate_);
  append_bytes(k, utf8_lead_);
  append_bytes(k, key_state_);
  if (grammar_) grammar_->append_key(k);
  k += literal_;
  k += '|';
  k += text_;
  k += '|';
  k += static_cast<char>('0' + forks_.size());
  for (const JsonSchemaPrefix& f : forks_) {
    const std::string fork = f.key();
    append_bytes(k, fork.size());
    k += fork;
  }
  for (const Frame& f : stack_) {
    append_bytes(k, f.node);
    k += f.object ? '{' : '[';
    append_bytes(k, f.seen);
    append_bytes(k, f.items);
    append_bytes(k, f.value);
  }
  return k;
}

int32_t JsonSchemaPrefix::next_value_node() const {
  if (stack_.empty()) return root_;
  const Frame& f = stack_.back();
  if (f.object) return f.value;
  const JsonSchemaNode& n = node(f.node);
  return f.items < static_cast<int64_t>(n.prefix_items.size())
             ? n.prefix_items[static_cast<size_t>(f.items)]
             : n.items;
}

// A value ended. The value's own state goes back to its resting values, so that prefixes that
// differ only in values already done share a key (and a cached mask).
void JsonSchemaPrefix::value_done() {
  string_node_ = 0, chars_ = 0, enum_node_ = 0, integer_only_ = false, number_node_ = 0;
  pattern_state_ = StringPattern::kDead;
  code_point_ = 0, utf8_left_ = 0, utf8_min_ = 0, high_surrogate_ = 0, utf8_lead_ = 0;
  if (stack_.empty()) {
    mode_ = Mode::kDone;
    return;
  }
  mode_ = Mode::kCommaOrClose;
  Frame& f = stack_.back();
  if (f.object) {
    f.value = 0;
  } else {
    ++f.items;
  }
}

// Whether the open container may close here: every required property present, or minItems
// values.
bool JsonSchemaPrefix::may_close(const Frame& f) const {
  const JsonSchemaNode& n = node(f.node);
  return f.object ? (f.seen & n.required) == n.required && f.items >= n.min_properties
                  : f.items >= n.min_items;
}

// An object's keys so far (f.items) and its required properties still missing leave no room
// under maxProperties for any other key: the next key must be a missing required one.
bool JsonSchemaPrefix::only_required_keys_fit(const Frame& f) const {
  const JsonSchemaNode& n = node(f.node);
  return n.max_properties >= 0 &&
         f.items + __builtin_popcountll(n.required & ~f.seen) >= n.max_properties;
}

// Whether another key / value may follow in the open container.
bool JsonSchemaPrefix::may_continue(const Frame& f) const {
  const JsonSchemaNode& n = node(f.node);
  if (!f.object) return n.max_items < 0 || f.items < n.max_items;
  if (n.max_properties >= 0 && f.items >= n.max_properties) return false;
  if (only_required_keys_fit(f)) return (n.required & ~f.seen) != 0;
  if (n.key_automaton ? n.key_automaton->unlisted_keys() : n.additional != JsonSchema::kNoNode)
    return true;
  const uint64_t all =
      n.property_keys.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << n.property_keys.size()) - 1;
  return (f.seen & all) != all;
}

// The open container's closing byte: allowed once it may close (may_close).
bool JsonSchemaPrefix::close_container() {
  if (!may_close(stack_.back())) return false;
  stack_.pop_back();
  value_done();
  return true;
}

// A value's first byte, for `index`'s node (modes kStart, kValue, kValueOrClose).
bool JsonSchemaPrefix::start_value(int32_t index, unsigned char c) {
  if (index == JsonSchema::kNoNode) return false;
  const JsonSchemaNode& n = node(index);
  if (!n.alternatives.empty()) {
    // A union: a prefix per alternative that takes the first byte.
    forks_.clear();
    for (int32_t alternative : n.alternatives) {
      JsonSchemaPrefix fork(*schema_, alternative, depth_limit_ - stack_.size());
      if (fork.feed_fork(c) == ForkStep::kTaken) forks_.push_back(std::move(fork));
    }
    if (forks_.empty()) return false;
    mode_ = Mode::kFork;
    return true;
  }
  if (!n.literals.empty()) {
    mode_ = Mode::kEnum, enum_node_ = index;
    text_.clear();
    return feed_enum(c);
  }
  switch (c) {
    case '{':
    case '[': {
      const bool object = c == '{';
      if (!(n.types & (object ? kJsonObject : kJsonArray)) || stack_.size() >= depth_limit_) {
        return false;
      }
      Frame f;
      f.object = object;
      f.node = object ? n.object_node : n.array_node;
      if (object) f.seen = node(f.node).absent_keys;
      stack_.push_back(f);
      mode_ = object ? Mode::kKeyOrClose : Mode::kValueOrClose;
      return true;
    }
    case '"':
      if (!(n.types & kJsonString)) return false;
      mode_ = Mode::kString, string_is_key_ = false, key_match_ = false;
      string_node_ = n.string_node, chars_ = 0;
      if (const StringPattern* pattern = node(string_node_).pattern.get())
        pattern_state_ = pattern->start();
      return true;
    case 't':
    case 'f':
      if (!(n.types & kJsonBoolean)) return false;
      mode_ = Mode::kLiteral, literal_ = c == 't' ? "rue" : "alse";
      return true;
    case 'n':
      if (!(n.types & kJsonNull)) return false;
      mode_ = Mode::kLiteral, literal_ = "ull";
      return true;
    default:
      if (!(n.types & (kJsonNumber | kJsonInteger)) || !(c == '-' || is_digit(c))) return false;
      integer_only_ = !(n.types & kJsonNumber);
      number_node_ = n.number_node;
      text_.clear();
      if (!number_may_take(c)) return false;
      mode_ = c == '-' ? Mode::kMinus : c == '0' ? Mode::kZero : Mode::kInteger;
      return true;
  }
}

// An enum / const value's next byte: it must keep the text a prefix of a listed value. A listed
// value that no other extends ends with its last byte; one that others extend (a number: 1 and
// 12) ends at the first byte that extends none.
bool JsonSchemaPrefix::feed_enum(unsigned char c) {
  const std::vector<std::string>& literals = node(enum_node_).literals;
  text_ += static_cast<char>(c);
  bool prefix = false, longer = false, exact = false;
  for (const std::string& l : literals) {
    if (!starts_with(l, text_)) continue;
    prefix = true;
    (l.size() == text_.size() ? exact : longer) = true;
  }
  if (prefix) {
    if (exact && !longer) end_enum();
    return true;
  }
  text_.pop_back();
  if (std::find(literals.begin(), literals.end(), text_) == literals.end()) return false;
  end_enum();
  return feed_byte(c);
}

// An enum / const value (text_) is complete. Where it is the tag of a tagged union's object, the
// object goes on in the alternative the tag names, with the tag present.
void JsonSchemaPrefix::end_enum() {
  if (!stack_.empty() && stack_.back().object) {
    Frame& f = stack_.back();
    const JsonSchemaNode& n = node(f.node);
    if (!n.tag_key.empty() && enum_node_ == n.property_nodes[0]) {
      const std::vector<std::string>& tags = node(enum_node_).literals;
      const auto tag =
          static_cast<size_t>(std::find(tags.begin(), tags.end(), text_) - tags.begin());
      const JsonSchemaNode& alternative = node(n.tag_nodes[tag]);
      const auto key = static_cast<size_t>(
          std::find(alternative.property_keys.begin(), alternative.property_keys.end(), n.tag_key) -
          alternative.property_keys.begin());
      f.node = n.tag_nodes[tag];
      f.seen = (uint64_t{1} << key) | alternative.absent_keys;
    }
  }
  text_.clear();
  value_done();
}

// The opening quote of a key ('"' in kKeyOrClose / kKey).
bool JsonSchemaPrefix::start_key() {
  if (!may_continue(stack_.back())) return false;
  mode_ = Mode::kString, string_is_key_ = true;
  const JsonSchemaNode& n = node(stack_.back().node);
  key_match_ = !n.property_keys.empty();
  key_state_ = n.key_automaton ? n.key_automaton->start() : 0;
  text_.clear();
  return true;
}

// The closing quote of a key: the value after it follows the property's node, or
// additionalProperties'.
bool JsonSchemaPrefix::end_key() {
  Frame& f = stack_.back();
  const JsonSchemaNode& n = node(f.node);
  mode_ = Mode::kColon;
  const bool matched = key_match_;
  const KeyAutomaton::State key_state = key_state_;
  string_is_key_ = false, key_match_ = false, key_state_ = 0;
  const bool required_only = only_required_keys_fit(f);
  ++f.items;
  if (matched) {
    for (size_t i = 0; i < n.property_keys.size(); ++i) {
      if (n.property_keys[i] != text_) continue;
      const uint64_t bit = uint64_t{1} << i;
      if ((f.seen & bit) || (required_only && !(n.required & bit))) return false;  // a duplicate
      f.seen |= bit;
      f.value = n.property_nodes[i];
      text_.clear();
      return true;
    }
  }
  text_.clear();
  f.value = n.key_automaton ? n.key_automaton->outcome(key_state) : n.additional;
  return f.value != JsonSchema::kNoNode && !required_only;
}

// A byte inside a string (modes kString, kEscape, kUnicode). Keys and strings without a pattern
// take any well-formed JSON string: UTF-8 by Unicode's table 3-7 (no overlong form, no surrogate,
// nothing past U+10FFFF) and \u escapes whose surrogates come in pairs, so that every JSON text
// the mask lets through parses. Only what the next byte may be is kept (the continuation bytes
// still to come and, after E0, ED, F0 or F4, the first one's narrower range; whether a low
// surrogate's escape must follow), so that such strings share mask keys whatever their text.
bool JsonSchemaPrefix::feed_string(unsigned char c) {
  if (!string_is_key_ && node(string_node_).pattern) return feed_pattern_string(c);
  if (string_is_key_ && node(stack_.back().node).key_automaton) return feed_automaton_key(c);
  bool new_char = false;  // the byte starts a character (a length bound counts it)
  switch (mode_) {
    case Mode::kString:
      if (utf8_left_ > 0) {
        if (c < continuation_min() || c > continuation_max()) return false;
        --utf8_left_, utf8_lead_ = 0;
        break;
      }
      if (high_surrogate_ != 0) {  // only the low half's escape may follow
        if (c != '\\') return false;
        mode_ = Mode::kEscape;
        break;
      }
      if (c == '"') {
        if (string_is_key_) return end_key();
        if (chars_ < node(string_node_).min_length) return false;
        chars_ = 0;
        value_done();
        return true;
      }
      if (c < 0x20) return false;  // control characters must be escaped
      new_char = true;
      if (c == '\\') {
        mode_ = Mode::kEscape;
      } else if (c >= 0x80 && !start_utf8_sequence(c)) {
        return false;
      }
      break;
    case Mode::kEscape:
      if (c == 'u') {
        mode_ = Mode::kUnicode, hex_left_ = 4, code_point_ = 0;
      } else if (high_surrogate_ == 0 && c != 0 && std::strchr("\"\\/bfnrt", c) != nullptr) {
        mode_ = Mode::kString;
      } else {
        return false;
      }
      break;
    default: {  // kUnicode
      if (!is_hex(c)) return false;
      code_point_ = code_point_ * 16 + hex_value(c);
      --hex_left_;
      // The units the digits so far may still become: after a high surrogate only a low one,
      // elsewhere anything but a lone low surrogate.
      const uint32_t lo = code_point_ << (4 * hex_left_);
      const uint32_t hi = lo | ((1u << (4 * hex_left_)) - 1);
      const bool low_half = lo <= 0xDFFF && hi >= 0xDC00;
      if (high_surrogate_ != 0 ? !low_half : (lo >= 0xDC00 && hi <= 0xDFFF)) return false;
      if (hex_left_ > 0) break;
      // The pair's value does not matter here; one marker keeps the keys shared.
      high_surrogate_ =
          high_surrogate_ == 0 && code_point_ >= 0xD800 && code_point_ <= 0xDBFF ? 0xD800 : 0;
      code_point_ = 0;
      mode_ = Mode::kString;
      break;
    }
  }
  if (string_is_key_) {
    if (!key_match_) return true;
    text_ += static_cast<char>(c);
    const Frame& f = stack_.back();
    const JsonSchemaNode& n = node(f.node);
    const bool required_only = only_required_keys_fit(f);
    bool listed = false;
    for (size_t i = 0; i < n.property_keys.size(); ++i) {
      if (!starts_with(n.property_keys[i], text_)) continue;
      const uint64_t bit = uint64_t{1} << i;
      // May still become a listed property (a missing required one where only those fit).
      if (!(f.seen & bit) && (!required_only || (n.required & bit))) return true;
      listed = true;  // a key that cannot come here so far: refused unless it goes on
    }
    if (n.additional == JsonSchema::kNoNode || required_only) return false;
    // A key no listed property starts with: any key from here on, no need to keep its bytes.
    if (!listed) key_match_ = false, text_.clear();
    return true;
  }
  // A string value: count characters (a UTF-8 lead byte, or the backslash of an escape; a
  // surrogate pair's second escape is the same character) where the node bounds them.
  const JsonSchemaNode& n = node(string_node_);
  if (!new_char || (n.min_length == 0 && n.max_length < 0)) return true;
  ++chars_;
  return n.max_length < 0 || chars_ <= n.max_length;
}

// A byte of a key in an object with a key automaton (patternProperties / propertyNames), in
// JSON's canonical spelling (json_schema_prefix.h): each character decoded, or, while it is
// undecided (a UTF-8 lead, an escape's first bytes), the code points it may still become. The
// byte is admitted where the key may still become a listed property that can come here, or an
// unlisted key with a value's node: the automaton's keys through those code points must
// outnumber the listed properties among them (a listed name is never an unlisted key).
bool JsonSchemaPrefix::feed_automaton_key(unsigned char c) {
  const Frame& f = stack_.back();
  const JsonSchemaNode& n = node(f.node);
  const KeyAutomaton& keys = *n.key_automaton;
  // Control characters without a short escape: \u00xx.
  static constexpr uint32_t kLongEscapes[][2] = {{0x00, 0x07}, {0x0B, 0x0B}, {0x0E, 0x1F}};
  struct Range {
    uint32_t lo, hi;
  };
  // The undecided character's code points: at most three ranges (no allocation per byte: masks
  // feed every token through here).
  std::array<Range, 3> candidates;
  size_t ranges = 0;
  bool decided = false;  // the character is code_point_
  auto long_escapes_within = [&](uint32_t lo, uint32_t hi) {
    for (const auto& r : kLongEscapes) {
      const uint32_t a = std::max(lo, r[0]), b = std::min(hi, r[1]);
      if (a <= b) candidates[ranges++] = {a, b};
    }
  };
  switch (mode_) {
    case Mode::kString:
      if (utf8_left_ > 0) {
        if (c < continuation_min() || c > continuation_max()) return false;
        code_point_ = (code_point_ << 6) | (c & 0x3Fu);
        --utf8_left_, utf8_lead_ = 0;
        decided = utf8_left_ == 0;
      } else if (c == '"') {
        return end_key();
      } else if (c == '\\') {
        mode_ = Mode::kEscape;
        candidates = {{{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}};
        ranges = 3;
        break;
      } else if (c < 0x20) {
        return false;  // control characters must be escaped
      } else if (c < 0x80) {
        code_point_ = c, decided = true;
      } else {
        if (!start_utf8_sequence(c)) return false;
        code_point_ = c & (utf8_left_ == 1 ? 0x1Fu : utf8_left_ == 2 ? 0x0Fu : 0x07u);
      }
      if (!decided) {
        const int free_bits = 6 * utf8_left_;
        const uint32_t least = utf8_left_ == 3 ? 0x10000 : utf8_left_ == 2 ? 0x800 : 0x80;
        const uint32_t lo = code_point_ << free_bits;
        candidates[0] = {std::max(lo, least), lo | ((1u << free_bits) - 1)};
        ranges = 1;
      }
      break;
    case Mode::kEscape: {
      const char* escapes = "\"\\bfnrt";
      const char* decoded = "\"\\\b\f\n\r\t";
      if (c == 'u') {
        mode_ = Mode::kUnicode, hex_left_ = 4, code_point_ = 0;
        long_escapes_within(0x00, 0x1F);
        break;
      }
      const char* at = c != 0 ? std::strchr(escapes, c) : nullptr;
      if (at == nullptr) return false;
      code_point_ = static_cast<unsigned char>(decoded[at - escapes]), decided = true;
      mode_ = Mode::kString;
      break;
    }
    default: {  // kUnicode: 0, 0, then 0 or 1, then a lowercase hex digit
      const int digit = 4 - hex_left_;
      const bool canonical = digit < 2   ? c == '0'
                             : digit < 3 ? c == '0' || c == '1'
                                         : is_digit(c) || (c >= 'a' && c <= 'f');
      if (!canonical) return false;
      code_point_ = code_point_ * 16 + hex_value(c);
      const int free_bits = 4 * --hex_left_;
      const uint32_t lo = code_point_ << free_bits;
      long_escapes_within(lo, lo | ((1u << free_bits) - 1));
      if (ranges == 0) return false;  // a character with a short escape
      decided = hex_left_ == 0;
      if (decided) mode_ = Mode::kString;
      break;
    }
  }
  const bool required_only = only_required_keys_fit(f);
  bool listed_may = false;   // an unseen listed property that may come here starts so
  int64_t listed_among = 0;  // listed properties that start so and reach an outcome as keys
  if (key_match_) {
    text_ += static_cast<char>(c);
    bool any = false;
    for (size_t i = 0; i < n.property_keys.size(); ++i) {
      if (!starts_with(n.property_keys[i], text_)) continue;
      const uint64_t bit = uint64_t{1} << i;
      any = true;
      listed_may = listed_may || (!(f.seen & bit) && (!required_only || (n.required & bit)));
      if (keys.listed_reaching() & bit) ++listed_among;
    }
    // No listed property starts so: its bytes no longer matter.
    if (!any) key_match_ = false, text_.clear();
  }
  int64_t unlisted = 0;  // the automaton's keys from here, listed ones included
  if (decided) {
    key_state_ = keys.step(key_state_, code_point_);
    code_point_ = 0;
    unlisted = keys.completions(key_state_);
  } else {
    for (size_t i = 0; i < ranges; ++i)
      unlisted += keys.completions_via(key_state_, candidates[i].lo, candidates[i].hi);
  }
  return listed_may || (!required_only && unlisted > listed_among);
}

// A UTF-8 lead byte of a string without a pattern: C0, C1 and F5-FF never start a sequence.
// Only E0, ED, F0 and F4 narrow the next byte, so only they are kept (in the key).
bool JsonSchemaPrefix::start_utf8_sequence(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) {
    utf8_left_ = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    utf8_left_ = 2;
  } else if (c >= 0xF0 && c <= 0xF4) {
    utf8_left_ = 3;
  } else {
    return false;
  }
  utf8_lead_ = (c == 0xE0 || c == 0xED || c == 0xF0 || c == 0xF4) ? c : 0;
  return true;
}

// The next continuation byte's range: after E0 no overlong form (A0-BF), after ED no surrogate
// (80-9F), after F0 no overlong form (90-BF), after F4 nothing past U+10FFFF (80-8F).
unsigned char JsonSchemaPrefix::continuation_min() const {
  return utf8_lead_ == 0xE0 ? 0xA0 : utf8_lead_ == 0xF0 ? 0x90 : 0x80;
}

unsigned char JsonSchemaPrefix::continuation_max() const {
  return utf8_lead_ == 0xED ? 0x9F : utf8_lead_ == 0xF4 ? 0x8F : 0xBF;
}

// A byte of a string value with a pattern (modes kString, kEscape, kUnicode).
bool JsonSchemaPrefix::feed_pattern_string(unsigned char c) {
  const StringPattern& pattern = *node(string_node_).pattern;
  switch (mode_) {
    case Mode::kString:
      if (high_surrogate_ != 0) {  // only the low half's escape may follow
        if (c != '\\') return false;
        mode_ = Mode::kEscape;
        return true;
      }
      if (utf8_left_ > 0) return feed_utf8(c);
      if (c == '"') {
        if (!pattern.may_end(pattern_state_, chars_)) return false;
        value_done();
        return true;
      }
      if (c == '\\') {
        mode_ = Mode::kEscape;
        return pattern.any_live(pattern_state_, 0, kMaxCodePoint, chars_);
      }
      if (c < 0x20) return false;  // control characters must be escaped
      return feed_utf8(c);
    case Mode::kEscape: {
      if (c == 'u') {
        mode_ = Mode::kUnicode, hex_left_ = 4, code_point_ = 0;
        return hex_range_live();
      }
      if (high_surrogate_ != 0) return false;
      const char* escapes = "\"\\/bfnrt";
      const char* decoded = "\"\\/\b\f\n\r\t";
      const char* at = c != 0 ? std::strchr(escapes, c) : nullptr;
      if (at == nullptr) return false;
      return take_code_point(static_cast<unsigned char>(decoded[at - escapes]));
    }
    default: {  // kUnicode
      if (!is_hex(c)) return false;
      code_point_ = code_point_ * 16 + hex_value(c);
      if (--hex_left_ > 0) return hex_range_live();
      const uint32_t unit = code_point_;
      if (high_surrogate_ != 0) {
        const uint32_t cp = surrogate_pair_code_point(high_surrogate_, unit);
        high_surrogate_ = 0;
        return take_code_point(cp);
      }
      if (unit >= 0xD800 && unit <= 0xDBFF) {
        // A high surrogate: its character is one of the 1024 its low half may pick.
        const uint32_t first = surrogate_pair_code_point(unit, 0xDC00);
        if (!pattern.any_live(pattern_state_, first, first + 0x3FF, chars_)) return false;
        high_surrogate_ = unit, code_point_ = 0, mode_ = Mode::kString;
        return true;
      }
      return take_code_point(unit);
    }
  }
}

// A fork's byte: taken, refused, the byte that ended its value (a closing quote or bracket, a
// literal's last letter), or one after a value that had ended before it (a number's).
JsonSchemaPrefix::ForkStep JsonSchemaPrefix::feed_fork(unsigned char c) {
  if (feed_byte(c)) return mode_ == Mode::kDone ? ForkStep::kEndedWith : ForkStep::kTaken;
  // A top-level number ends at the first byte that cannot go on it (value_done, then the byte
  // was refused after the value).
  return mode_ == Mode::kDone ? ForkStep::kEndedBefore : ForkStep::kRefused;
}

// A byte of a union's value: every alternative still possible takes it or drops out. While one
// takes it, the value goes on (an alternative that ended with it, say the enum 12 beside an
// integer schema, stays as a finished fork: the value may end there); where none does, the value
// ended with the byte (a closing bracket or quote, a literal's last letter) or before it (a
// number, or a finished fork), which then belongs to what follows.
bool JsonSchemaPrefix::feed_forks(unsigned char c) {
  bool taken = false, ended_with = false, ended_before = false;
  size_t kept = 0;
  for (size_t i = 0; i < forks_.size(); ++i) {
    const ForkStep step = forks_[i].feed_fork(c);
    taken = taken || step == ForkStep::kTaken;
    ended_with = ended_with || step == ForkStep::kEndedWith;
    ended_before = ended_before || step == ForkStep::kEndedBefore;
    if (step == ForkStep::kTaken || step == ForkStep::kEndedWith) {
      if (kept != i) forks_[kept] = std::move(forks_[i]);
      ++kept;
    }
  }
  forks_.erase(forks_.begin() + static_cast<std::ptrdiff_t>(kept), forks_.end());
  if (taken) return true;
  forks_.clear();
  if (!ended_with && !ended_before) return false;
  value_done();
  return ended_with || feed_byte(c);
}

// A number's next byte (its first, a digit, '.' or an exponent's 'e'): where the node bounds it,
// admitted only while the text can still become a number within the bounds (never an exponent).
bool JsonSchemaPrefix::number_may_take(unsigned char c) {
  const NumberBounds* bounds = node(number_node_).number_bounds.get();
  if (bounds == nullptr) return true;
  if (c == 'e' || c == 'E') return false;
  text_ += static_cast<char>(c);
  if (bounds->may_continue(text_, integer_only_)) return true;
  text_.pop_back();
  return false;
}

// Whether the number may end here (the text is a number within its bounds, if any); it ends.
bool JsonSchemaPrefix::number_may_end() {
  const NumberBounds* bounds = node(number_node_).number_bounds.get();
  if (bounds == nullptr) return true;
  if (!bounds->contains(text_)) return false;
  text_.clear();
  return true;
}

// A raw byte of a pattern string or of raw text: an ASCII character, or a UTF-8 sequence's
// byte (C0, C1 and F5-FF never start one; E0 / F0 leads reject overlong forms through
// utf8_min_, ED's surrogates through the pattern's classes, which hold none).
bool JsonSchemaPrefix::feed_utf8(unsigned char c) {
  if (utf8_left_ > 0) {
    if ((c & 0xC0) != 0x80) return false;
    code_point_ = (code_point_ << 6) | (c & 0x3Fu);
    if (--utf8_left_ == 0) return take_code_point(code_point_);
    return utf8_range_live();
  }
  if (c < 0x80) return take_code_point(c);
  Utf8Lead lead;
  if (!utf8_lead(c, lead)) return false;
  utf8_left_ = lead.continuation_bytes, code_point_ = lead.bits, utf8_min_ = lead.least;
  return utf8_range_live();
}

// A pattern string's (or raw text's) next character, decoded: admitted where the text can still
// end. Raw text is complete where it matches and nothing may follow.
bool JsonSchemaPrefix::take_code_point(uint32_t cp) {
  const StringPattern& pattern = *node(string_node_).pattern;
  const StringPattern::State next = pattern.step(pattern_state_, cp);
  if (!pattern.can_finish(next, chars_ + 1)) return false;
  pattern_state_ = next;
  // Counted only where bounds read it: an unbounded pattern's prefixes in one state then share
  // a key (and a cached mask) whatever their length.
  if (pattern.bounded()) ++chars_;
  code_point_ = 0, utf8_min_ = 0;
  if (mode_ == Mode::kText) {
    end_text_if_final();
  } else {
    mode_ = Mode::kString;
  }
  return true;
}

void JsonSchemaPrefix::end_text_if_final() {
  const StringPattern& pattern = *node(string_node_).pattern;
  if (pattern.may_end(pattern_state_, chars_) &&
      !pattern.any_live(pattern_state_, 0, kMaxCodePoint, chars_)) {
    mode_ = Mode::kDone;
  }
}

bool JsonSchemaPrefix::may_stop() const {
  if (mode_ == Mode::kGrammar) return grammar_->may_stop();
  return mode_ == Mode::kText && utf8_left_ == 0 &&
         node(string_node_).pattern->may_end(pattern_state_, chars_);
}

// The code points a UTF-8 sequence's bytes so far may still become: one must be live.
bool JsonSchemaPrefix::utf8_range_live() const {
  const int free_bits = 6 * utf8_left_;
  const uint32_t lo = std::max(code_point_ << free_bits, utf8_min_);
  const uint32_t hi = std::min((code_point_ << free_bits) | ((1u << free_bits) - 1), kMaxCodePoint);
  return lo <= hi && node(string_node_).pattern->any_live(pattern_state_, lo, hi, chars_);
}

// The code points a \u escape's hex digits so far may still become (with a second escape where
// they make a high surrogate; after a high surrogate, the low halves of its pair): one must be
// live.
bool JsonSchemaPrefix::hex_range_live() const {
  const StringPattern& pattern = *node(string_node_).pattern;
  const int free_bits = 4 * hex_left_;
  uint32_t lo = code_point_ << free_bits;
  uint32_t hi = lo | ((1u << free_bits) - 1);
  const auto pair = surrogate_pair_code_point;
  if (high_surrogate_ != 0) {
    lo = std::max(lo, 0xDC00u), hi = std::min(hi, 0xDFFFu);
    return lo <= hi && pattern.any_live(pattern_state_, pair(high_surrogate_, lo),
                                        pair(high_surrogate_, hi), chars_);
  }
  // Units outside the surrogates are the code point; high surrogates pair with any low half;
  // a lone low surrogate is never a character.
  if (lo <= 0xD7FF && pattern.any_live(pattern_state_, lo, std::min(hi, 0xD7FFu), chars_))
    return true;
  if (hi >= 0xE000 && pattern.any_live(pattern_state_, std::max(lo, 0xE000u), hi, chars_))
    return true;
  const uint32_t high_lo = std::max(lo, 0xD800u), high_hi = std::min(hi, 0xDBFFu);
  return high_lo <= high_hi &&
         pattern.any_live(pattern_state_, pair(high_lo, 0xDC00), pair(high_hi, 0xDFFF), chars_);
}

bool JsonSchemaPrefix::feed_byte(unsigned char c) {
  // Between the JSON text's tokens: whitespace, in bounded runs.
  const bool between = mode_ == Mode::kStart || mode_ == Mode::kKeyOrClose || mode_ == Mode::kKey ||
                       mode_ == Mode::kColon || mode_ == Mode::kValue ||
                       mode_ == Mode::kValueOrClose || mode_ == Mode::kCommaOrClose;
  if (between && is_whitespace(c)) return ++whitespace_run_ <= kMaxWhitespaceRun;
  whitespace_run_ = 0;
  switch (mode_) {
    case Mode::kStart:
      return start_value(root_, c);
    case Mode::kText:
      return feed_utf8(c);
    case Mode::kGrammar:
      if (!grammar_->feed_byte(c)) return false;
      if (grammar_->finished()) mode_ = Mode::kDone;
      return true;
    case Mode::kFork:
      return feed_forks(c);
    case Mode::kKeyOrClose:
      if (c == '}') return close_container();
      [[fallthrough]];
    case Mode::kKey:
      return c == '"' && start_key();
    case Mode::kColon:
      if (c != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kValueOrClose:
      if (c == ']') return close_container();
      if (!may_continue(stack_.back())) return false;
      return start_value(next_value_node(), c);
    case Mode::kValue:
      return start_value(next_value_node(), c);
    case Mode::kCommaOrClose: {
      const Frame& f = stack_.back();
      if (c == ',') {
        if (!may_continue(f)) return false;
        mode_ = f.object ? Mode::kKey : Mode::kValue;
        return true;
      }
      return c == (f.object ? '}' : ']') && close_container();
    }
    case Mode::kString:
    case Mode::kEscape:
    case Mode::kUnicode:
      return feed_string(c);
    case Mode::kEnum:
      return feed_enum(c);
    case Mode::kLiteral:
      if (c != static_cast<unsigned char>(*literal_)) return false;
      if (*++literal_ == '\0') literal_ = "", value_done();
      return true;
    case Mode::kMinus:
      if (!is_digit(c) || !number_may_take(c)) return false;
      mode_ = c == '0' ? Mode::kZero : Mode::kInteger;
      return true;
    case Mode::kInteger:
      if (is_digit(c)) return number_may_take(c);
      [[fallthrough]];
    case Mode::kZero:
      if (c == '.' || c == 'e' || c == 'E') {
        if (integer_only_ || !number_may_take(c)) return false;
        mode_ = c == '.' ? Mode::kDot : Mode::kExponent;
        return true;
      }
      if (!number_may_end()) return false;
      value_done();  // the number ended; the byte belongs to what follows it
      return feed_byte(c);
    case Mode::kDot:
      if (!is_digit(c) || !number_may_take(c)) return false;
      mode_ = Mode::kFraction;
      return true;
    case Mode::kFraction:
      if (is_digit(c)) return number_may_take(c);
      if (c == 'e' || c == 'E') {
        if (!number_may_take(c)) return false;
        mode_ = Mode::kExponent;
        return true;
      }
      if (!number_may_end()) return false;
      value_done();
      return feed_byte(c);
    case Mode::kExponent:
      if (c == '+' || c == '-') {
        mode_ = Mode::kExponentSign;
        return true;
      }
      [[fallthrough]];
    case Mode::kExponentSign:
      if (!is_digit(c)) return false;
      mode_ = Mode::kExponentDigits;
      return true;
    case Mode::kExponentDigits:
      if (is_digit(c)) return true;
      value_done();  // (never bounded: a bounded number takes no exponent)
      return feed_byte(c);
    case Mode::kDone:
    default:
      return false;
  }
}

}  // namespace quench
