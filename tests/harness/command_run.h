// Runs a `quench` subcommand in-process as the program would (argv[0] the command's name) and
// keeps its exit code and both output streams, for the command tests.
#pragma once

#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace quench::testing_support {

struct CommandRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

using CommandFunction = int (*)(int argc, char** argv, std::ostream& out, std::ostream& err);

inline CommandRun run_command(CommandFunction command, const std::string& name,
                              std::vector<std::string> args) {
  args.insert(args.begin(), name);
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  std::ostringstream out, err;
  CommandRun run;
  run.exit_code = command(static_cast<int>(argv.size()), argv.data(), out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

}  // namespace quench::testing_support
