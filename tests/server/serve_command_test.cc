// `quench serve`'s tool and reasoning flags: an unknown parser or --enable-auto-tool-choice
// without one is a usage error (exit code 2) naming the allowed parsers, before anything is
// loaded.
#include "quench/server/serve_command.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace quench {
namespace {

// The exit code and stderr of `quench serve ARGS...`.
std::pair<int, std::string> serve(std::vector<std::string> args) {
  args.insert(args.begin(), "serve");
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  std::ostringstream out, err;
  const int code = run_serve_command(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, err.str()};
}

TEST(ServeCommand, ToolFlagsAreCheckedUpFront) {
  const auto [unknown, unknown_err] = serve({"--tool-call-parser", "granite"});
  EXPECT_EQ(unknown, 2);
  EXPECT_NE(unknown_err.find("--tool-call-parser 'granite' is not supported; allowed: hermes, "
                             "llama3_json, mistral, pythonic"),
            std::string::npos)
      << unknown_err;
  const auto [lonely, lonely_err] = serve({"--enable-auto-tool-choice"});
  EXPECT_EQ(lonely, 2);
  EXPECT_NE(lonely_err.find("--enable-auto-tool-choice needs --tool-call-parser"),
            std::string::npos)
      << lonely_err;
}

TEST(ServeCommand, ReasoningParserIsCheckedUpFront) {
  const auto [code, err] = serve({"--reasoning-parser", "granite"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--reasoning-parser 'granite' is not supported; allowed: deepseek_r1, qwen3"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace quench
