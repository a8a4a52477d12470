#include "layer_command.h"

#include <iostream>

#include "quench/layer/layer_demo.h"

namespace quench::cli {

int run_layer_command(int argc, char** argv) {
  return quench::run_layer_command(argc, argv, std::cout, std::cerr);
}

}  // namespace quench::cli
