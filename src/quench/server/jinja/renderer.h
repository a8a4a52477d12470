// Runs a parsed template: statements write text, expressions evaluate to Values. Scoping is
// jinja2's: each for-loop iteration, macro call and with block gets a fresh scope whose writes
// vanish at its end (hence namespace()), `if` does not. Guards make a hostile template fail
// instead of hanging or exhausting memory: a cap on executed steps, on output size and on macro
// recursion depth.
#pragma once

#include <string>

#include "quench/server/jinja/ast.h"

namespace quench::jinja {

struct RenderLimits {
  int64_t max_steps = 20'000'000;  // statements executed plus loop iterations
  size_t max_output_bytes = size_t{64} << 20;
  int32_t max_call_depth = 64;  // nested macro calls
};

// `variables` is a JSON object of the render's variables. Throws RaisedError for
// raise_exception() (its message unchanged) and quench::Error naming the line and column for
// any other failure.
std::string render_template(const Body& body, const Json& variables,
                            const RenderLimits& limits = {});

}  // namespace quench::jinja
