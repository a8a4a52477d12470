// The interpreter's edges that fixtures do not reach: syntax errors naming line, column and what
// was expected; runtime errors naming their position; jinja2's Undefined rules; and the guards
// that make hostile templates fail instead of hanging or exhausting memory.
#include "quench/server/jinja/template.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"

namespace quench::jinja {
namespace {

std::string render(const std::string& source, const Json& vars = Json::object()) {
  return Template(source).render(vars);
}

TEST(JinjaTemplate, SyntaxErrorsNameLineColumnAndWhatWasExpected) {
  EXPECT_QUENCH_ERROR(Template("ok\n{% if x %}never closed"),
                      {"line 2", "expected {% elif %} or {% else %} or {% endif %}"});
  EXPECT_QUENCH_ERROR(Template("{{ 1 + }}"), {"line 1, column 8", "expected an expression"});
  EXPECT_QUENCH_ERROR(Template("a\n  {{ x"), {"line 2, column 3", "'}}'"});
  EXPECT_QUENCH_ERROR(Template("{% frobnicate %}"), {"unknown tag 'frobnicate'", "supported"});
  EXPECT_QUENCH_ERROR(Template("{% for x in y %}{% endif %}"),
                      {"unexpected {% endif %}", "{% endfor %}"});
  EXPECT_QUENCH_ERROR(Template("{{ 'open }}"), {"unterminated string"});
  EXPECT_QUENCH_ERROR(Template("{# no end"), {"missing end of comment"});
  EXPECT_QUENCH_ERROR(Template("{% break %}"), {"outside a for loop"});
  EXPECT_QUENCH_ERROR(
      Template("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"),
      {"nesting deeper than"});
}

TEST(JinjaTemplate, RuntimeErrorsNameTheirPosition) {
  EXPECT_QUENCH_ERROR(render("x\n{{ 1 | frobnicate }}"),
                      {"line 2, column 6", "unknown filter 'frobnicate'", "trim"});
  EXPECT_QUENCH_ERROR(render("{{ 'a' + 1 }}"), {"line 1, column 8", "concatenate"});
  EXPECT_QUENCH_ERROR(render("{{ 1 // 0 }}"), {"division"});
  EXPECT_QUENCH_ERROR(render("{{ x is frobbed }}"), {"unknown test 'frobbed'"});
  EXPECT_QUENCH_ERROR(render("{{ messages.append(1) }}", {{"messages", Json::array()}}),
                      {"unsafe"});
  EXPECT_QUENCH_ERROR(render("{% set x.y = 1 %}", {{"x", 1}}), {"namespace"});
}

TEST(JinjaTemplate, UndefinedPrintsEmptyAndRaisesWhenUsedFurther) {
  EXPECT_EQ(
      render("[{{ missing }}][{{ d.nope }}][{{ missing | length }}]", {{"d", Json::object()}}),
      "[][][0]");
  EXPECT_QUENCH_ERROR(render("{{ missing.attr }}"), {"'missing' is undefined"});
  EXPECT_QUENCH_ERROR(render("{{ d.nope.deeper }}", {{"d", Json::object()}}),
                      {"'dict object' has no attribute 'nope'"});
  EXPECT_QUENCH_ERROR(render("{{ missing + 1 }}"), {"'missing' is undefined"});
  EXPECT_QUENCH_ERROR(render("{{ missing | tojson }}"), {"not JSON serializable"});
  EXPECT_EQ(render("{{ missing ~ 'x' }} {{ missing == missing }} {{ not missing }}"),
            "x True True");
}

TEST(JinjaTemplate, RaiseExceptionKeepsItsMessage) {
  try {
    render("{{ raise_exception('Roles must alternate') }}");
    FAIL() << "no error";
  } catch (const RaisedError& e) {
    EXPECT_EQ(std::string(e.what()), "Roles must alternate");
  }
}

TEST(JinjaTemplate, GuardsStopRunawayTemplates) {
  EXPECT_QUENCH_ERROR(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
                      {"nested deeper than"});
  EXPECT_QUENCH_ERROR(render("{{ range(100000000) }}"), {"longer than the limit"});
  EXPECT_QUENCH_ERROR(render("{{ 'x' * 1000000000 }}"), {"larger than"});
  RenderLimits small;
  small.max_output_bytes = 100;
  EXPECT_QUENCH_ERROR(
      Template("{% for i in range(1000) %}xx{% endfor %}").render(Json::object(), small),
      {"output exceeds 100 bytes"});
  small = RenderLimits{};
  small.max_steps = 1000;
  EXPECT_QUENCH_ERROR(
      Template("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}")
          .render(Json::object(), small),
      {"more than 1000 steps"});
}

TEST(JinjaTemplate, WhitespaceControlAndNewlines) {
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n"), "a\nb\n");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("  {{ 'v' }}"), "  v");
}

}  // namespace
}  // namespace quench::jinja
