// The quench command-line program: `quench <command> [flags]`. Each command lives in its own
// file; this one only dispatches.
#include <cstdio>
#include <cstring>
#include <exception>

#include "bench_serve_command.h"
#include "explain_command.h"
#include "generate_command.h"
#include "layer_command.h"
#include "serve_command.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the command name
};

constexpr Command kCommands[] = {
    {"bench-serve", "measure TTFT, TPOT, ITL and throughput of a server (vLLM's definitions)",
     quench::cli::run_bench_serve_command},
    {"explain", "print the attention kernel chosen per phase, with dtypes and reasons",
     quench::cli::run_explain_command},
    {"generate", "generate tokens with a model (default: a built-in tiny one) on the CPU backend",
     quench::cli::run_generate_command},
    {"serve", "serve a model over the OpenAI API (default: the built-in tiny one)",
     quench::cli::run_serve_command},
    {"layer", "run one decoder layer's FP8 attention path on a built-in default and report it",
     quench::cli::run_layer_command},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: quench <command> [flags]   (quench <command> --help for its flags)\n");
  std::fprintf(out, "commands:\n");
  for (const Command& c : kCommands)
    std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
  print_usage(stderr);
  return 2;
}
