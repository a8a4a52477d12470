// `quench serve`: the OpenAI-compatible server (openai_server.h) on a model directory, or on the
// built-in tiny model when --model is absent. Runs until SIGINT or SIGTERM.
#pragma once

#include <ostream>

namespace quench {

// argv[0] is "serve". Returns the exit code: 0 stopped by a signal, 1 the server failed (bind,
// model load), 2 bad flags.
int run_serve_command(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace quench
