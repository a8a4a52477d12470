// A chat template compiled once and rendered per request: the public face of the interpreter
// for the Jinja2 subset HF chat templates use (see lexer.h, parser.h and renderer.h for the
// rules). Parsing happens in the constructor, so a template that cannot work fails at model
// load, not at the first request.
#pragma once

#include <memory>
#include <string>

#include "quench/server/jinja/ast.h"
#include "quench/server/jinja/renderer.h"

namespace quench::jinja {

class Template {
 public:
  // Throws quench::Error naming the line and column of the first syntax error.
  explicit Template(const std::string& source);

  // `variables`: a JSON object. Throws RaisedError (raise_exception's message) or quench::Error.
  std::string render(const Json& variables, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Body> body_;  // shared: copies of a Template share the parsed tree
};

}  // namespace quench::jinja
