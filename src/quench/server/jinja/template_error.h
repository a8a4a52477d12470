// Where template errors point and the one error the template itself raises. Syntax errors name
// the line and column and what was expected; runtime errors are thrown as plain quench::Error
// by values, filters and methods and get the position of the expression being evaluated added
// by the renderer. raise_exception(msg) is the template's own, deliberate error (a chat template
// refusing a role order): its message reaches the client unchanged.
#pragma once

#include <cstdint>
#include <string>

#include "quench/core/error.h"

namespace quench::jinja {

struct SourcePos {
  int32_t line = 1;    // 1-based, after \r\n and \r became \n
  int32_t column = 1;  // 1-based, in bytes
};

inline std::string describe(SourcePos pos) {
  return str_cat("line ", pos.line, ", column ", pos.column);
}

class RaisedError : public Error {
 public:
  using Error::Error;
};

template <typename... Parts>
[[noreturn]] void syntax_error(SourcePos pos, Parts&&... parts) {
  fail(str_cat("chat template syntax error at ", describe(pos), ": ",
               std::forward<Parts>(parts)...));
}

}  // namespace quench::jinja
