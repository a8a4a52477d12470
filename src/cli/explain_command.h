// `quench explain`: prints the attention kernel decision table (phase, kernel, q dtype, KV dtype,
// output dtype, reason) for a model and a GPU arch, with no GPU and no weights needed.
#pragma once

namespace quench::cli {

// argv[0] is "explain". Returns the exit code: 0 printed, 1 no kernel can serve the
// configuration, 2 bad flags or an unreadable config.json.
int run_explain_command(int argc, char** argv);

// One paragraph describing the flags (for `quench explain --help`).
const char* explain_usage();

}  // namespace quench::cli
