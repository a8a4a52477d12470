#include "quench/server/serve_command.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <thread>

#include "quench/core/error.h"
#include "quench/core/flag_parsing.h"
#include "quench/engine/engine_flags.h"
#include "quench/server/openai_server.h"
#include "quench/server/reasoning/reasoning_parser.h"
#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {
namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void request_stop(int) {
  g_stop_requested =
      true;  // the only async-signal-safe thing to do; the main loop stops the server
}

const char* serve_usage() {
  static const std::string usage =
      std::string(
          "usage: quench serve [--host ADDR] [--port N] [--served-model-name NAME]\n"
          "  [--http-threads N] [--log-interval SECONDS]\n"
          "  [--tool-call-parser hermes|llama3_json|mistral|pythonic] "
          "[--enable-auto-tool-choice]\n"
          "  [--reasoning-parser deepseek_r1|qwen3]\n") +
      engine_flags_usage();
  return usage.c_str();
}

const FlagTable& known_flags() {
  static const FlagTable flags =
      command_flag_table({"--host", "--port", "--served-model-name", "--http-threads",
                          "--log-interval", "--tool-call-parser", "--reasoning-parser"},
                         {"--enable-auto-tool-choice"});
  return flags;
}

// The parser name a flag gives (empty when absent), checked by `lookup`, which throws for an
// unknown name: a usage error naming the allowed ones.
template <class Lookup>
std::string parser_flag(const std::map<std::string, std::string>& flags, const char* flag,
                        Lookup lookup, const char* allowed) {
  const auto it = flags.find(flag);
  if (it == flags.end()) return "";
  try {
    lookup(it->second);
  } catch (const Error&) {
    throw UsageError(str_cat(flag, " '", it->second, "' is not supported; allowed: ", allowed));
  }
  return it->second;
}

}  // namespace

int run_serve_command(int argc, char** argv, std::ostream& out, std::ostream& err) {
  ServeOptions options;
  std::optional<std::string> builtin;
  try {
    const auto flags = split_flags(argc, argv, known_flags(), serve_usage());
    if (flags.count("--help")) {
      out << serve_usage();
      return 0;
    }
    builtin = engine_options_from_flags(flags, options.engine);
    if (auto it = flags.find("--host"); it != flags.end()) options.host = it->second;
    if (auto it = flags.find("--port"); it != flags.end())
      options.port = parse_int_flag<int32_t>("--port", it->second, 0, 65535);
    if (auto it = flags.find("--served-model-name"); it != flags.end())
      options.served_model_name = it->second;
    if (auto it = flags.find("--http-threads"); it != flags.end()) {
      options.http_threads = parse_int_flag<int32_t>("--http-threads", it->second, 1, 4096);
    }
    if (auto it = flags.find("--log-interval"); it != flags.end()) {
      options.log_interval_seconds = parse_int_flag<int32_t>("--log-interval", it->second, 0);
    }
    options.tool_call_parser =
        parser_flag(flags, "--tool-call-parser", tool_call_parser, tool_call_parser_names());
    options.enable_auto_tool_choice = flags.count("--enable-auto-tool-choice") > 0;
    options.reasoning_parser =
        parser_flag(flags, "--reasoning-parser", reasoning_parser, reasoning_parser_names());
    if (options.enable_auto_tool_choice && options.tool_call_parser.empty()) {
      throw UsageError(str_cat("--enable-auto-tool-choice needs --tool-call-parser (one of ",
                               tool_call_parser_names(), ")"));
    }
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  try {
    std::unique_ptr<BuiltinModelDir> builtin_dir;
    if (builtin) {
      builtin_dir = std::make_unique<BuiltinModelDir>(*builtin);
      options.engine.model_dir = builtin_dir->path();
      if (options.served_model_name.empty()) options.served_model_name = "quench-" + *builtin;
    }
    OpenAiServer server(options);
    const int32_t port = server.start();
    out << "quench serve: listening on http://" << options.host << ":" << port << " (model "
        << server.served_model_name() << ", loading)" << std::endl;
    if (!server.wait_until_loaded()) {
      err << "error: " << server.load_error() << "\n";
      return 1;
    }
    out << "quench serve: ready (/v1/completions, /v1/chat/completions, /v1/models, /health, "
           "/metrics, "
           "/tokenize, /detokenize)"
        << std::endl;
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
    while (!g_stop_requested)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    out << "quench serve: stopping" << std::endl;
    server.stop();
    return 0;
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace quench
