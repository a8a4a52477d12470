#include "quench/server/tool_calls/pythonic_parser.h"

#include <nlohmann/json.hpp>

#include "quench/server/tool_calls/call_text.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kStart = "<|python_start|>";
constexpr std::string_view kEnd = "<|python_end|>";

bool is_identifier_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_identifier_char(char c) {
  return is_identifier_start(c) || (c >= '0' && c <= '9');
}

// A recursive-descent reader of the call list; every method returns false at the first byte
// that is not the grammar's, or where the text ends first.
class CallListReader {
 public:
  explicit CallListReader(std::string_view text, size_t pos) : text_(text), pos_(pos) {}

  bool calls(std::vector<ToolCallSegment>& out) {
    if (!literal('[')) return false;
    blank();
    if (peek() == ']') return false;  // no calls: not a call list
    while (true) {
      const size_t begin = pos_;
      std::string name;
      Json arguments = Json::object();
      if (!call(name, arguments)) return false;
      out.push_back(
          {begin, pos_,
           FunctionCall{name, arguments.dump(-1, ' ', false, Json::error_handler_t::replace)}});
      blank();
      if (peek() == ',') {
        ++pos_;
        blank();
        continue;
      }
      return literal(']');
    }
  }

  size_t pos() const { return pos_; }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void blank() { pos_ = skip_blank(text_, pos_); }
  bool literal(char c) {
    blank();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool identifier(std::string& out) {
    blank();
    if (!is_identifier_start(peek())) return false;
    const size_t begin = pos_;
    while (pos_ < text_.size() && is_identifier_char(text_[pos_]))
      ++pos_;
    out = std::string(text_.substr(begin, pos_ - begin));
    return true;
  }
  bool call(std::string& name, Json& arguments) {
    if (!identifier(name) || !literal('(')) return false;
    blank();
    while (peek() != ')') {
      std::string key;
      Json value;
      if (!identifier(key) || !literal('=') || !value_of(value, 0)) return false;
      if (arguments.contains(key)) return false;  // a keyword given twice
      arguments[key] = std::move(value);
      blank();
      if (peek() == ',') {
        ++pos_;
        blank();
      } else if (peek() != ')') {
        return false;
      }
    }
    ++pos_;
    return true;
  }
  bool value_of(Json& out, int depth) {
    if (depth > 32) return false;
    blank();
    const char c = peek();
    if (c == '"' || c == '\'') return string(out);
    if (c == '[' || c == '{') return container(out, depth);
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    std::string word;
    if (!identifier(word)) return false;
    if (word == "True" || word == "False") {
      out = word == "True";
    } else if (word == "None") {
      out = nullptr;
    } else {
      return false;
    }
    return true;
  }
  bool container(Json& out, int depth) {
    const bool dict = peek() == '{';
    ++pos_;
    out = dict ? Json::object() : Json::array();
    blank();
    while (peek() != (dict ? '}' : ']')) {
      if (dict) {
        Json key;
        blank();
        if ((peek() != '"' && peek() != '\'') || !string(key) || !literal(':')) return false;
        Json value;
        if (!value_of(value, depth + 1)) return false;
        out[key.get<std::string>()] = std::move(value);
      } else {
        Json value;
        if (!value_of(value, depth + 1)) return false;
        out.push_back(std::move(value));
      }
      blank();
      if (peek() == ',') {
        ++pos_;
        blank();
      } else if (peek() != (dict ? '}' : ']')) {
        return false;
      }
    }
    ++pos_;
    return true;
  }
  bool number(Json& out) {
    const size_t begin = pos_;
    if (peek() == '-') ++pos_;
    bool digits = false, fraction = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        digits = true;
      } else if (c == '.' || c == 'e' || c == 'E' || ((c == '+' || c == '-') && fraction)) {
        fraction = true;
      } else {
        break;
      }
      ++pos_;
    }
    if (!digits) return false;
    const std::string_view t = text_.substr(begin, pos_ - begin);
    out = Json::parse(t, nullptr, false);  // Python's number forms that JSON shares
    return !out.is_discarded() && out.is_number();
  }
  // A Python string literal in single or double quotes, with its escapes (\\, \', \", \n, \t,
  // \r, \uXXXX, \xXX).
  bool string(Json& out) {
    const char quote = text_[pos_++];
    std::string s;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_++];
      if (c == '\n') return false;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (pos_ >= text_.size()) return false;
      c = text_[pos_++];
      const size_t hex = c == 'u' ? 4 : c == 'x' ? 2 : 0;
      if (hex > 0) {
        if (pos_ + hex > text_.size()) return false;
        uint32_t cp = 0;
        for (size_t i = 0; i < hex; ++i) {
          const char h = text_[pos_++];
          const int v = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (v < 0) return false;
          cp = cp * 16 + static_cast<uint32_t>(v);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;
        append_utf8(cp, s);
        continue;
      }
      const std::string_view from = "\\'\"ntr0", to = "\\'\"\n\t\r";
      const size_t at = from.find(c);
      if (at == std::string_view::npos) return false;
      s += at == 6 ? '\0' : to[at];
    }
    if (pos_ >= text_.size()) return false;
    ++pos_;
    out = std::move(s);
    return true;
  }

  std::string_view text_;
  size_t pos_;
};

}  // namespace

std::vector<ToolCallSegment> PythonicToolCallParser::scan(std::string_view text, bool final) const {
  const std::vector<ToolCallSegment> all_content = {{0, text.size(), std::nullopt}};
  size_t start = skip_blank(text, 0);
  const std::string_view rest = text.substr(start);
  if (rest.starts_with(kStart)) start = skip_blank(text, start + kStart.size());
  const bool may_be_calls =
      rest.empty() || rest.starts_with(kStart) || kStart.starts_with(rest) || rest.front() == '[';
  if (!may_be_calls) return all_content;
  // A list of calls is one only if nothing follows it: decided when the output ends.
  if (!final) return {};
  if (start == text.size()) return all_content;
  std::vector<ToolCallSegment> calls;
  CallListReader reader(text, start);
  if (!reader.calls(calls)) return all_content;
  // Only blanks and the closing tag may follow the list.
  size_t end = skip_blank(text, reader.pos());
  if (text.substr(end).starts_with(kEnd)) end = skip_blank(text, end + kEnd.size());
  return end == text.size() ? calls : all_content;
}

}  // namespace quench
