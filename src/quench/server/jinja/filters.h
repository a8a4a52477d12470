// The `| filter` functions with jinja2's names, arguments and results (trim, length, tojson,
// join, default, map, selectattr, indent, ...), tojson being HF's: json.dumps with
// ensure_ascii=False and the given indent, separators and sort_keys.
#pragma once

#include <string>
#include <vector>

#include "quench/server/jinja/value.h"

namespace quench::jinja {

// Throws quench::Error for an unknown filter (listing the known ones) or bad arguments.
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);

// Python's printf-style `fmt % args` with %s %r %d %i %f %.Nf %% (the format filter and the %
// operator on a string).
std::string percent_format(const std::string& fmt, const std::vector<Value>& args);

}  // namespace quench::jinja
