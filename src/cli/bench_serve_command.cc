#include "bench_serve_command.h"

#include <iostream>

#include "quench/benchmark/bench_serve_command.h"

namespace quench::cli {

int run_bench_serve_command(int argc, char** argv) {
  return quench::run_bench_serve_command(argc, argv, std::cout, std::cerr);
}

}  // namespace quench::cli
