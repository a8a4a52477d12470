// The OpenAI-compatible HTTP server (cpp-httplib): /v1/completions and /v1/chat/completions
// (JSON or SSE streaming ending in "data: [DONE]"), /v1/models, /health (503 while the model
// loads), /metrics (Prometheus), /tokenize and /detokenize. The model loads on a thread of its
// own after the socket is bound, so load balancers see the server coming up. Every bad request
// gets a 4xx with vLLM's error body; an exception in a handler is a 500 for that request only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "quench/engine/llm_engine.h"

namespace quench {

struct ServeOptions {
  EngineOptions engine;
  std::string host = "127.0.0.1";
  int32_t port = 8000;                // 0: any free port (start() returns it)
  std::string served_model_name;      // default: the model directory's last component
  int32_t http_threads = 64;          // concurrent connections (a streaming request holds one)
  int32_t log_interval_seconds = 10;  // the periodic throughput line; 0 = off
  // Tool calling (vLLM's flags): the parser that finds calls in chat output ("hermes",
  // "llama3_json"; empty: none), and whether tool_choice "auto" is allowed (it needs the parser).
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  // The parser that splits chat output into reasoning_content and content ("qwen3",
  // "deepseek_r1"; empty: none; server/reasoning/reasoning_parser.h).
  std::string reasoning_parser;
};

class OpenAiServer {
 public:
  // Throws quench::Error for an unknown tool call or reasoning parser, or
  // --enable-auto-tool-choice without a tool call parser.
  explicit OpenAiServer(ServeOptions options);
  ~OpenAiServer();  // stops serving
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds, starts answering and starts loading the model. Returns the port. Throws quench::Error
  // when the address cannot be bound.
  int32_t start();
  // Blocks until the model is loaded (true) or failed to load (false, see load_error()).
  bool wait_until_loaded();
  std::string load_error() const;
  // Blocks while the server runs (until stop() from another thread or a signal handler).
  void wait();
  void stop();
  const std::string& served_model_name() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace quench
