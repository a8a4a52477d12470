// The functions every template can call, as HF provides them: raise_exception(msg) (the
// template's own error, passed to the client verbatim), strftime_now(fmt) (local time), and
// jinja2's range(), namespace() and dict().
#pragma once

#include <optional>
#include <string>

#include "quench/server/jinja/value.h"

namespace quench::jinja {

// range() refuses to build lists longer than this.
constexpr int64_t kMaxRangeLength = 1'000'000;

// The global named `name`, or nullopt.
std::optional<Value> find_global(const std::string& name);

}  // namespace quench::jinja
