// Template source to tokens, with jinja2's whitespace rules as HF configures them: newlines
// normalised to \n and one trailing newline dropped; `{%-`/`{{-`/`{#-` strip all whitespace
// before the tag and `-%}`/`-}}`/`-#}` all after it; trim_blocks drops the first newline after a
// block or comment tag; lstrip_blocks drops spaces and tabs from the start of a line up to a block
// or comment tag; `{%+` and `+%}` turn those two off for one tag. Text between tags becomes one
// kText token; inside tags the expression tokens follow the tag's begin token. Comments vanish
// here and {% raw %} bodies come out as text.
#pragma once

#include <string>
#include <vector>

#include "quench/server/jinja/template_error.h"

namespace quench::jinja {

enum class TokenKind : uint8_t {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEnd,       // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;
  SourcePos pos;
};

// Throws quench::Error naming the line and column of an unterminated tag, comment or string or
// of a character no token starts with.
std::vector<Token> lex_template(const std::string& source);

}  // namespace quench::jinja
