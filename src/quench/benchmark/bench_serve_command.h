// `quench bench-serve`: the serving benchmark (serving_benchmark.h) against a running
// OpenAI-compatible server, or, with --launch, against quench serve started in this process on
// --model (default: the built-in tiny model), so that one command measures the whole stack.
#pragma once

#include <ostream>

namespace quench {

// argv[0] is "bench-serve". Returns 0 when every request succeeded, 1 otherwise or when the run
// failed, 2 for bad flags.
int run_bench_serve_command(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace quench
