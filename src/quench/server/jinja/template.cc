#include "quench/server/jinja/template.h"

#include "quench/server/jinja/lexer.h"
#include "quench/server/jinja/parser.h"

namespace quench::jinja {

Template::Template(const std::string& source)
    : body_(std::make_shared<const Body>(parse_template(lex_template(source)))) {}

std::string Template::render(const Json& variables, const RenderLimits& limits) const {
  return render_template(*body_, variables, limits);
}

}  // namespace quench::jinja
