// JSON mode (response_format {"type": "json_object"}): a byte-at-a-time recogniser of the
// prefixes of one JSON object (RFC 8259: strings with escapes, numbers, true / false / null,
// nested objects and arrays up to kMaxDepth), and the vocabulary mask it implies. At each step a
// JSON-mode request may only take the tokens whose bytes keep its output a prefix of an object;
// the request ends (finish "stop") when the object closes. Whitespace between tokens of the JSON
// text is allowed, at most kMaxWhitespaceRun characters in a row, so that output cannot idle on
// whitespace forever.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace quench {

class Tokenizer;

class JsonObjectPrefix {
 public:
  static constexpr size_t kMaxDepth = 32;
  static constexpr int kMaxWhitespaceRun = 16;

  // Feeds bytes; false (and the state is then unusable) when they leave the prefixes of a JSON
  // object. Bytes after the object closed are refused.
  bool feed(std::string_view bytes);
  bool complete() const { return mode_ == Mode::kDone; }
  // Two prefixes with the same key accept the same continuations.
  std::string key() const;

 private:
  enum class Mode : uint8_t {
    kStart,         // before the object's '{'
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
    kDone,
  };
  bool feed_byte(unsigned char c);
  bool start_value(unsigned char c);
  void value_done();
  bool close_container();  // the open object or array closes (a value is done); true

  Mode mode_ = Mode::kStart;
  std::string stack_;  // '{' or '[' per open container
  bool string_is_key_ = false;
  int hex_left_ = 0;          // kUnicode
  const char* literal_ = "";  // kLiteral: the rest of the literal
  int whitespace_run_ = 0;
};

// The tokens a JSON-object prefix may take next, for one tokenizer: each token's bytes fed to a
// copy of the prefix. Masks are cached by the prefix's key (a string's inside, for one, always
// gives the same mask), at most kMaxCached of them.
class JsonTokenMasks {
 public:
  explicit JsonTokenMasks(const Tokenizer& tokenizer);
  // [vocab_size] 1 = allowed. Special tokens and ids without bytes are never allowed.
  const std::vector<uint8_t>& allowed(const JsonObjectPrefix& prefix);
  // The same mask packed as logit edits take it (RowLogitEdits::allowed_bits: bit t % 32 of word
  // t / 32), cached beside it: a JSON-mode row packed its 128k-entry mask every step.
  const std::vector<uint32_t>& allowed_bits(const JsonObjectPrefix& prefix);

 private:
  struct Mask {
    std::vector<uint8_t> allowed;
    std::vector<uint32_t> bits;
  };
  const Mask& mask(const JsonObjectPrefix& prefix);

  static constexpr size_t kMaxCached = 4096;
  std::vector<std::string> bytes_;  // per token id; empty = never allowed
  std::unordered_map<std::string, std::shared_ptr<const Mask>> cache_;
};

}  // namespace quench
