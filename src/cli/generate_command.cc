#include "generate_command.h"

#include <iostream>

#include "quench/engine/generate_command.h"

namespace quench::cli {

int run_generate_command(int argc, char** argv) {
  return quench::run_generate_command(argc, argv, std::cout, std::cerr);
}

}  // namespace quench::cli
