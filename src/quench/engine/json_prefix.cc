#include "quench/engine/json_prefix.h"

#include "quench/tokenizer/tokenizer.h"

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

}  // namespace

bool JsonObjectPrefix::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed_byte(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string JsonObjectPrefix::key() const {
  std::string k;
  k += static_cast<char>(mode_);
  k += string_is_key_ ? 'k' : 'v';
  k += static_cast<char>('0' + hex_left_);
  k += static_cast<char>('0' + whitespace_run_);
  k += literal_;
  k += '|';
  k += stack_;
  return k;
}

void JsonObjectPrefix::value_done() {
  mode_ = stack_.empty() ? Mode::kDone : Mode::kCommaOrClose;
}

bool JsonObjectPrefix::close_container() {
  stack_.pop_back();
  value_done();
  return true;
}

// A value's first byte (mode kValue or kValueOrClose).
bool JsonObjectPrefix::start_value(unsigned char c) {
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxDepth) return false;
      stack_ += static_cast<char>(c);
      mode_ = c == '{' ? Mode::kKeyOrClose : Mode::kValueOrClose;
      return true;
    case '"':
      mode_ = Mode::kString, string_is_key_ = false;
      return true;
    case '-':
      mode_ = Mode::kMinus;
      return true;
    case '0':
      mode_ = Mode::kZero;
      return true;
    case 't':
      mode_ = Mode::kLiteral, literal_ = "rue";
      return true;
    case 'f':
      mode_ = Mode::kLiteral, literal_ = "alse";
      return true;
    case 'n':
      mode_ = Mode::kLiteral, literal_ = "ull";
      return true;
    default:
      if (c >= '1' && c <= '9') {
        mode_ = Mode::kInteger;
        return true;
      }
      return false;
  }
}

bool JsonObjectPrefix::feed_byte(unsigned char c) {
  // Between the JSON text's tokens: whitespace, in bounded runs.
  const bool between = mode_ == Mode::kStart || mode_ == Mode::kKeyOrClose || mode_ == Mode::kKey ||
                       mode_ == Mode::kColon || mode_ == Mode::kValue ||
                       mode_ == Mode::kValueOrClose || mode_ == Mode::kCommaOrClose;
  if (between && is_whitespace(c)) return ++whitespace_run_ <= kMaxWhitespaceRun;
  whitespace_run_ = 0;
  switch (mode_) {
    case Mode::kStart:
      if (c != '{') return false;
      stack_.assign(1, '{');  // (not = "{": GCC 12 warns of a memcpy overlap there)
      mode_ = Mode::kKeyOrClose;
      return true;
    case Mode::kKeyOrClose:
      if (c == '}') return close_container();
      [[fallthrough]];
    case Mode::kKey:
      if (c != '"') return false;
      mode_ = Mode::kString, string_is_key_ = true;
      return true;
    case Mode::kColon:
      if (c != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kValueOrClose:
      if (c == ']') return close_container();
      return start_value(c);
    case Mode::kValue:
      return start_value(c);
    case Mode::kCommaOrClose:
      if (c == ',') {
        mode_ = stack_.back() == '{' ? Mode::kKey : Mode::kValue;
        return true;
      }
      if (c != (stack_.back() == '{' ? '}' : ']')) return false;
      return close_container();
    case Mode::kString:
      if (c == '"') {
        if (string_is_key_) {
          mode_ = Mode::kColon;
        } else {
          value_done();
        }
        return true;
      }
      if (c == '\\') {
        mode_ = Mode::kEscape;
        return true;
      }
      return c >= 0x20;  // control characters must be escaped; UTF-8 bytes pass as they are
    case Mode::kEscape:
      if (c == 'u') {
        mode_ = Mode::kUnicode, hex_left_ = 4;
        return true;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
          c == 't') {
        mode_ = Mode::kString;
        return true;
      }
      return false;
    case Mode::kUnicode:
      if (!is_hex(c)) return false;
      if (--hex_left_ == 0) mode_ = Mode::kString;
      return true;
    case Mode::kLiteral:
      if (c != static_cast<unsigned char>(*literal_)) return false;
      if (*++literal_ == '\0') value_done();
      return true;
    case Mode::kMinus:
      if (c == '0') {
        mode_ = Mode::kZero;
        return true;
      }
      if (c >= '1' && c <= '9') {
        mode_ = Mode::kInteger;
        return true;
      }
      return false;
    case Mode::kInteger:
      if (is_digit(c)) return true;
      [[fallthrough]];
    case Mode::kZero:
      if (c == '.') {
        mode_ = Mode::kDot;
        return true;
      }
      if (c == 'e' || c == 'E') {
        mode_ = Mode::kExponent;
        return true;
      }
      value_done();  // the number ended; the byte belongs to what follows it
      return feed_byte(c);
    case Mode::kDot:
      if (!is_digit(c)) return false;
      mode_ = Mode::kFraction;
      return true;
    case Mode::kFraction:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') {
        mode_ = Mode::kExponent;
        return true;
      }
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
      value_done();
      return feed_byte(c);
    case Mode::kDone:
    default:
      return false;
  }
}

JsonTokenMasks::JsonTokenMasks(const Tokenizer& tokenizer) {
  bytes_.resize(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id, true, true);
  }
}

const JsonTokenMasks::Mask& JsonTokenMasks::mask(const JsonObjectPrefix& prefix) {
  const std::string key = prefix.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto mask = std::make_shared<Mask>();
  mask->allowed.assign(bytes_.size(), 0);
  mask->bits.assign((bytes_.size() + 31) / 32, 0u);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty()) continue;
    JsonObjectPrefix next = prefix;
    if (next.feed(bytes_[id])) {
      mask->allowed[id] = 1;
      mask->bits[id / 32] |= 1u << (id % 32);
    }
  }
  if (cache_.size() >= kMaxCached) cache_.clear();
  return *cache_.emplace(key, std::move(mask)).first->second;
}

const std::vector<uint8_t>& JsonTokenMasks::allowed(const JsonObjectPrefix& prefix) {
  return mask(prefix).allowed;
}

const std::vector<uint32_t>& JsonTokenMasks::allowed_bits(const JsonObjectPrefix& prefix) {
  return mask(prefix).bits;
}

}  // namespace quench
