// Tokens to the syntax tree, with jinja2's grammar and operator precedence (loosest first):
// `x if c else y`, or, and, not, comparisons and (not) in, + -, ~, * / // %, **, unary - +,
// then postfix .attr [item] [a:b:c] (call), then `| filter` and `is test`. Statements: if/elif/
// else, for (with `if` filter, else, tuple targets), set (plain, namespace attribute, block),
// macro, call, filter, with, break, continue, generation, raw (in the lexer). Nesting is capped
// so that a hostile template cannot overflow the stack.
#pragma once

#include <vector>

#include "quench/server/jinja/ast.h"
#include "quench/server/jinja/lexer.h"

namespace quench::jinja {

// Throws quench::Error naming the line, column and what was expected.
Body parse_template(const std::vector<Token>& tokens);

}  // namespace quench::jinja
