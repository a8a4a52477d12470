#include "quench/server/jinja/lexer.h"

#include <algorithm>

#include "quench/server/jinja/text.h"
#include "quench/tokenizer/utf8.h"

namespace quench::jinja {
namespace {

std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = pos;
      while (true) {
        start = src_.find('{', start);
        if (start == std::string::npos || start + 1 >= src_.size()) {
          start = std::string::npos;
          break;
        }
        const char k = src_[start + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++start;
      }
      if (start == std::string::npos) {
        emit_text(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, start - pos);
      const char kind = src_[start + 1];
      size_t p = start + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      if (sign == '-') {
        text = py_strip(text, false, true);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: only spaces and tabs between the line's start and the tag.
        const size_t line_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_pos > 0 || line_starting) &&
            text.find_first_not_of(" \t", line_pos) == std::string::npos) {
          text.resize(line_pos);
        }
      }
      emit_text(text, pos);
      if (kind == '#') {
        pos = comment(start, p);
      } else if (kind == '%' && raw_begin(p, &pos)) {
        pos = raw_body(pos);
      } else {
        pos = tag(kind, start, p);
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back({TokenKind::kEnd, "", at(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos at(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<int32_t>(it - line_starts_.begin() + 1),
            static_cast<int32_t>(offset - *it + 1)};
  }

  void emit_text(const std::string& text, size_t offset) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, text, at(offset)});
  }

  size_t skip_py_space(size_t p) const {
    const size_t rest = src_.size() - p;
    const std::string stripped = py_strip(std::string_view(src_).substr(p), true, false);
    return p + (rest - stripped.size());
  }

  // After a block or comment end: `-` strips all whitespace, `+` nothing, otherwise trim_blocks
  // drops one newline.
  size_t after_block_end(size_t end_of_tag, char sign) const {
    if (sign == '-') return skip_py_space(end_of_tag);
    if (sign == '+') return end_of_tag;
    return end_of_tag < src_.size() && src_[end_of_tag] == '\n' ? end_of_tag + 1 : end_of_tag;
  }

  size_t comment(size_t start, size_t p) {
    const size_t e = src_.find("#}", p);
    if (e == std::string::npos) syntax_error(at(start), "missing end of comment tag '#}'");
    const char sign = e > p && (src_[e - 1] == '-' || src_[e - 1] == '+') ? src_[e - 1] : 0;
    return after_block_end(e + 2, sign);
  }

  // `{% raw %}` (p is just past the begin tag's sign); sets *after past its end tag.
  bool raw_begin(size_t p, size_t* after) const {
    size_t q = p;
    while (q < src_.size() && is_ascii_space(src_[q]))
      ++q;
    if (src_.compare(q, 3, "raw") != 0) return false;
    q += 3;
    while (q < src_.size() && is_ascii_space(src_[q]))
      ++q;
    if (src_.compare(q, 3, "-%}") == 0) {
      *after = skip_py_space(q + 3);
      return true;
    }
    if (src_.compare(q, 2, "%}") == 0) {
      *after = q + 2;
      return true;
    }
    return false;
  }

  size_t raw_body(size_t pos) {
    for (size_t e = src_.find("{%", pos); e != std::string::npos; e = src_.find("{%", e + 2)) {
      size_t q = e + 2;
      const char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q++] : 0;
      while (q < src_.size() && is_ascii_space(src_[q]))
        ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_ascii_space(src_[q]))
        ++q;
      char end_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, e - pos);
      if (sign == '-') text = py_strip(text, false, true);
      emit_text(text, pos);
      return after_block_end(q + 2, end_sign);
    }
    syntax_error(at(pos), "missing {% endraw %} for {% raw %}");
  }

  size_t tag(char kind, size_t start, size_t p) {
    const bool block = kind == '%';
    tokens_.push_back({block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin,
                       block ? "{%" : "{{", at(start)});
    std::vector<char> brackets;
    size_t q = p;
    while (true) {
      while (q < src_.size() && is_ascii_space(src_[q]))
        ++q;
      if (q >= src_.size()) {
        syntax_error(at(start), "unexpected end of template; expected '", block ? "%}" : "}}",
                     "' to close the tag opened here");
      }
      if (brackets.empty()) {
        const char* close = block ? "%}" : "}}";
        const TokenKind end_kind = block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd;
        if (src_[q] == '-' && src_.compare(q + 1, 2, close) == 0) {
          tokens_.push_back({end_kind, close, at(q)});
          return skip_py_space(q + 3);
        }
        if (block && src_[q] == '+' && src_.compare(q + 1, 2, close) == 0) {
          tokens_.push_back({end_kind, close, at(q)});
          return q + 3;
        }
        if (src_.compare(q, 2, close) == 0) {
          tokens_.push_back({end_kind, close, at(q)});
          return block ? after_block_end(q + 2, 0) : q + 2;
        }
      }
      q = token(q, brackets);
    }
  }

  size_t token(size_t q, std::vector<char>& brackets) {
    const SourcePos pos = at(q);
    const char c = src_[q];
    if (is_name_start(c)) {
      size_t e = q + 1;
      while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e])))
        ++e;
      tokens_.push_back({TokenKind::kName, src_.substr(q, e - q), pos});
      return e;
    }
    if (is_digit(c)) {
      size_t e = q;
      while (e < src_.size() && is_digit(src_[e]))
        ++e;
      bool is_float = false;
      if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
        is_float = true;
        ++e;
        while (e < src_.size() && is_digit(src_[e]))
          ++e;
      }
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t x = e + 1;
        if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
        if (x < src_.size() && is_digit(src_[x])) {
          is_float = true;
          e = x;
          while (e < src_.size() && is_digit(src_[e]))
            ++e;
        }
      }
      tokens_.push_back(
          {is_float ? TokenKind::kFloat : TokenKind::kInteger, src_.substr(q, e - q), pos});
      return e;
    }
    if (c == '\'' || c == '"') return string_literal(q, pos);
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(q, 2, op) == 0) {
        tokens_.push_back({TokenKind::kOperator, op, pos});
        return q + 2;
      }
    }
    if (std::string_view("+-*/%~.:|,=<>()[]{}").find(c) != std::string_view::npos) {
      if (c == '(' || c == '[' || c == '{') brackets.push_back(c);
      if (c == ')' || c == ']' || c == '}') {
        const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
        if (brackets.empty() || brackets.back() != open)
          syntax_error(pos, "unexpected '", std::string(1, c), "'");
        brackets.pop_back();
      }
      tokens_.push_back({TokenKind::kOperator, std::string(1, c), pos});
      return q + 1;
    }
    syntax_error(pos, "unexpected character '", std::string(1, c), "'");
  }

  // A Python string literal with its escapes (\n, \t, \\, \', \", \xHH, \uHHHH, ...); unknown
  // escapes keep their backslash, as Python does.
  size_t string_literal(size_t q, SourcePos pos) {
    const char quote = src_[q];
    std::string value;
    size_t i = q + 1;
    while (true) {
      if (i >= src_.size()) syntax_error(pos, "unterminated string literal");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        value += c;
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case 'a':
          value += '\a';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            const char h = i + k < src_.size() ? src_[i + k] : '\0';
            const int v = is_digit(h)              ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (v < 0) syntax_error(at(i), "truncated \\", std::string(1, e), " escape");
            cp = cp * 16 + static_cast<uint32_t>(v);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            syntax_error(at(i), "escape \\", std::string(1, e), " is not a valid code point");
          append_utf8(cp, value);
          i += digits;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(src_[i++] - '0');
            append_utf8(cp, value);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    tokens_.push_back({TokenKind::kString, std::move(value), pos});
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_template(const std::string& source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace quench::jinja
