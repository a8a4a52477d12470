// `quench serve`: the OpenAI-compatible server; the work lives in quench/server/serve_command.h.
#pragma once

namespace quench::cli {

int run_serve_command(int argc, char** argv);

}  // namespace quench::cli
