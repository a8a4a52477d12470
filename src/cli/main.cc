// The quench command-line program.
#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  try {
    std::printf("quench: nothing to do yet\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
