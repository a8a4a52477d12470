// Structured output: a byte-at-a-time recogniser of the prefixes of the JSON texts a JsonSchema
// admits (RFC 8259: strings with escapes, numbers, true / false / null, nested objects and
// arrays up to kMaxDepth), or, for JsonSchema::text_pattern, of the raw texts its pattern
// matches; JsonTokenMasks turns it into vocabulary masks. JSON mode is the schema
// JsonSchema::any_object(). What the schema adds to the grammar, checked at the byte
// where it is decided:
//  - a value's first byte must start one of its node's types (an integer takes no '.' or
//    exponent); enum / const values must be typed exactly as listed (compact JSON);
//  - an object's keys: a listed property at most once, typed exactly as listed (escapes
//    included), or any other key where additionalProperties allows one; with patternProperties
//    or propertyNames, another key only where the key automaton gives it a value's node, the
//    keys decoded and stepped through it and written in JSON's canonical spelling (characters as
//    themselves, escapes only for '"', '\' and control characters: \b \f \n \r \t, else
//    \u00xx in lowercase hex), so that a listed property has one spelling; '}' only once every
//    required property is present (and minProperties keys); ',' only while another key may
//    follow (maxProperties keys at most, room kept for the missing required ones); a tagged union's
//    object starts with its tag, whose value picks the alternative for the rest; any other
//    union follows each alternative in a prefix of its own (forks_), dropping it at the first
//    byte it refuses, until one of them ends the value;
//  - arrays: minItems / maxItems decide where ']' and ',' are allowed; strings: minLength /
//    maxLength count code points (an escape is one);
//  - a number with bounds: typed without an exponent, each digit or '.' admitted only where the
//    text can still become a number within the bounds (NumberBounds::may_continue), and the
//    number ends only within them;
//  - a string with a pattern: its characters are decoded (UTF-8, escapes, surrogate pairs) and
//    stepped through the pattern's automaton; a byte is admitted only where the string can still
//    end admissibly (StringPattern::any_live), and the closing quote only where it may end.
// Whitespace between the JSON text's tokens is allowed, at most kMaxWhitespaceRun characters in a
// row, so that output cannot idle on whitespace forever.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quench/engine/structured_output/grammar_prefix.h"
#include "quench/engine/structured_output/json_schema.h"

namespace quench {

class JsonSchemaPrefix {
 public:
  static constexpr size_t kMaxDepth = 32;
  static constexpr int kMaxWhitespaceRun = 16;

  // Holds a reference: `schema` must outlive the prefix (a request's SamplingParams own it).
  explicit JsonSchemaPrefix(const JsonSchema& schema);

  // Feeds bytes; false (and the state is then unusable) when they leave the schema's prefixes.
  // Bytes after the top-level value closed are refused.
  bool feed(std::string_view bytes);
  bool complete() const { return mode_ == Mode::kDone; }
  // Raw text (JsonSchema::text_pattern): whether the text may end here, on the end-of-sequence
  // token (complete() says it must). Never for JSON, which ends where its value closes.
  bool may_stop() const;
  // Two prefixes with the same key accept the same continuations (the schema's id included).
  std::string key() const;
  // Raw text of a grammar not yet finished: the recogniser this prefix feeds every byte to, as
  // it is (JsonTokenMasks walks it without the prefix around it). Else null.
  const GrammarPrefix* grammar() const { return mode_ == Mode::kGrammar ? &*grammar_ : nullptr; }

 private:
  enum class Mode : uint8_t {
    kStart,         // before the top-level value
    kKeyOrClose,    // after '{'
    kKey,           // after ',' in an object
    kColon,         // after a key
    kValue,         // after ':' or ',' in an array
    kValueOrClose,  // after '['
    kCommaOrClose,  // after a value inside an object or array
    kString,        // inside a string
    kEscape,        // after '\' in a string
    kUnicode,       // in the 4 hex digits of \u
    kMinus,         // after a number's '-'
    kZero,          // a number's leading 0
    kInteger,       // integer digits (not a leading 0)
    kDot,           // after '.'
    kFraction,      // fraction digits
    kExponent,      // after 'e' / 'E'
    kExponentSign,  // after the exponent's sign
    kExponentDigits,
    kLiteral,  // inside true / false / null
    kEnum,     // inside an enum / const value: text_ against the node's literals
    kFork,     // inside a union's value: bytes go to forks_
    kText,     // raw text (JsonSchema::text_pattern): UTF-8 bytes stepped through the pattern
    kGrammar,  // raw text (JsonSchema::text_grammar): bytes fed to grammar_
    kDone,
  };
  // An open object or array.
  struct Frame {
    int32_t node = 0;    // the node whose object / array constraints apply
    bool object = true;  // '{' (else '[')
    uint64_t seen = 0;   // objects: bit i = property i is present
    int64_t items = 0;   // values so far (objects: keys)
    int32_t value = 0;   // objects: the node of the value after the current key
  };

  // One alternative of a union from the value's first byte on: `node` as the top-level value,
  // within `depth_limit` open containers.
  JsonSchemaPrefix(const JsonSchema& schema, int32_t node, size_t depth_limit);
  // What a fork made of a byte.
  enum class ForkStep : uint8_t { kRefused, kTaken, kEndedWith, kEndedBefore };
  ForkStep feed_fork(unsigned char c);
  bool feed_forks(unsigned char c);
  bool feed_byte(unsigned char c);
  bool start_value(int32_t node, unsigned char c);
  bool feed_enum(unsigned char c);
  void end_enum();
  bool feed_string(unsigned char c);
  bool feed_pattern_string(unsigned char c);
  bool feed_automaton_key(unsigned char c);
  bool start_utf8_sequence(unsigned char c);
  unsigned char continuation_min() const;
  unsigned char continuation_max() const;
  bool feed_utf8(unsigned char c);
  bool take_code_point(uint32_t cp);
  void end_text_if_final();
  bool number_may_take(unsigned char c);
  bool number_may_end();
  bool utf8_range_live() const;
  bool hex_range_live() const;
  bool start_key();
  bool end_key();
  bool may_close(const Frame& f) const;
  bool may_continue(const Frame& f) const;
  bool only_required_keys_fit(const Frame& f) const;
  bool close_container();
  void value_done();
  int32_t next_value_node() const;  // the node the value about to start follows
  const JsonSchemaNode& node(int32_t index) const { return schema_->node(index); }

  const JsonSchema* schema_;
  int32_t root_ = 0;  // the top-level value's node (a fork's alternative)
  size_t depth_limit_ = kMaxDepth;
  Mode mode_ = Mode::kStart;
  std::vector<Frame> stack_;
  bool string_is_key_ = false;
  bool key_match_ = false;   // the key being typed is matched against the listed properties
  int32_t string_node_ = 0;  // a string value's node (its length bounds)
  int64_t chars_ = 0;        // a bounded string value's code points so far
  int32_t enum_node_ = 0;    // kEnum: the node whose literals the value must be
  bool integer_only_ = false;
  int32_t number_node_ = 0;  // a number value's node (its bounds; text_ holds a bounded one)
  int hex_left_ = 0;         // kUnicode
  // A string value with a pattern: the automaton's states, and the character being decoded
  // (its UTF-8 bits or \u hex digits so far, the UTF-8 bytes still to come and the least code
  // point its length may encode, a high surrogate's escape waiting for the low half's).
  StringPattern::State pattern_state_ = StringPattern::kDead;
  uint32_t code_point_ = 0;
  int utf8_left_ = 0;
  uint32_t utf8_min_ = 0;
  uint32_t high_surrogate_ = 0;
  // A key's or a string's without a pattern: its UTF-8 lead while it narrows the next byte
  // (E0, ED, F0, F4), else 0; utf8_left_ counts the bytes still to come.
  unsigned char utf8_lead_ = 0;
  // A key of an object with a key automaton (patternProperties / propertyNames): its state.
  KeyAutomaton::State key_state_ = 0;
  const char* literal_ = "";  // kLiteral: the rest of the literal
  int whitespace_run_ = 0;
  std::string text_;  // a matched key's, an enum value's or a bounded number's bytes so far
  // kGrammar: the grammar's recogniser.
  std::optional<GrammarPrefix> grammar_;
  // kFork: the alternatives still possible, each a prefix of its own (in the union's order).
  std::vector<JsonSchemaPrefix> forks_;
};

}  // namespace quench
