// The kernels' benchmark A/B switches (docs/kernel_switches.md) are environment variables with a
// finite set of values. One reader for all of them, so that every switch treats unset and empty
// alike, names its default in one place (the first allowed value) and rejects a misspelt value
// with the allowed ones instead of silently running the default.
#pragma once

#include <initializer_list>
#include <string>

namespace quench {

// The value of environment variable `name` when it is one of `allowed`; the first of `allowed`
// (the switch's default) when it is unset or empty, so that a caller never tells "unset" from its
// default (comparing "" with "auto" once made QUENCH_LINEAR's default cuBLAS). Any other value
// throws quench::Error naming the switch, the value and the allowed ones. `allowed` must not be
// empty. Callers read a switch once (a function-local static), not per launch.
std::string env_switch(const char* name, std::initializer_list<const char*> allowed);

// The same for a numeric switch: the value of `name` when it is a decimal number (digits only) in
// [min, max] (0 <= min); `unset` when the variable is unset or empty. Anything else ("2x", " 3",
// "-1", out of range) throws quench::Error naming the switch, the value and the range.
int env_switch_int(const char* name, int min, int max, int unset);

}  // namespace quench
