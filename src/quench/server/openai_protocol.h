// The OpenAI API as quench serves it (vLLM's dialect, so that clients and benchmarks written for
// vLLM work unchanged): request bodies parsed and checked into engine requests, and the JSON of
// responses, stream chunks and errors. No HTTP here (openai_server.h), so every rule is tested
// without a socket.
//
// /v1/completions: prompt (string, token ids, or a one-element list of either), max_tokens
// (default 16), temperature (default 1), top_p, top_k (vLLM: 0 or -1 = off), seed, stop (a string
// or a list), stream, stream_options.include_usage, ignore_eos (vLLM), n (choices per prompt).
// /v1/chat/completions: messages (content a string or a list of text parts), max_tokens or
// max_completion_tokens (default: what max_model_len leaves), vLLM's add_generation_prompt
// (default true) and chat_template_kwargs (extra template variables, e.g. enable_thinking); tools,
// tool_choice and parallel_tool_calls (checked in tool_calls/tool_request.h; messages with tool
// calls in chat_messages.h; docs/serving.md, "Tool calling").
// logprobs: completions an integer k, chat logprobs: true with top_logprobs k; completions echo
// (not streamed) adds the prompt's text and logprobs; response_format text, json_object or
// json_schema (engine/structured_output/). Fields quench does not implement yet (best_of other
// than 1) are refused with 400 naming the field, never silently ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "quench/engine/sampler.h"
#include "quench/engine/sampling_params.h"
#include "quench/engine/sequence.h"
#include "quench/server/api_error.h"
#include "quench/server/chat_template.h"
#include "quench/server/reasoning/reasoning_parser.h"
#include "quench/server/tool_calls/tool_call.h"
#include "quench/server/tool_calls/tool_request.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {

struct ApiRequest {
  // One prompt, or several (a list of strings or of token-id lists); each is sampled n times,
  // choices ordered prompt by prompt (OpenAI's order).
  std::vector<std::vector<int32_t>> prompts;
  int32_t n = 1;
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the counts
  bool echo = false;           // completions: the prompt's text (and logprobs) before the output
  // Chat with tool_choice "auto" (the server's parser) or a forced function (the request's own
  // ForcedFunctionParser): what finds calls in the output; null: plain text.
  std::shared_ptr<const ToolCallParser> tool_call_parser;
  bool parallel_tool_calls = true;  // false: only the first call is returned
  // Chat with the server's --reasoning-parser: what splits reasoning off the output before any
  // tool calls are read from the rest (structured output then holds after the reasoning:
  // params.reasoning_gate).
  const ReasoningParser* reasoning_parser = nullptr;
  // include_reasoning (vLLM's field): false drops the split-off reasoning from the response
  // (the content is still only the answer).
  bool include_reasoning = true;
};

struct ServedModel {
  std::string name;  // what "model" must say (absent also accepted)
  int32_t max_model_len = 0;
  int32_t vocab_size = 0;  // reported by /v1/models (a quench extension, for benchmarks)
  const Tokenizer* tokenizer = nullptr;  // null: only token-id prompts
  // null: /v1/chat/completions answers 400, naming chat_template_error when the model's
  // template failed to load.
  std::optional<ChatTemplate> chat_template;
  std::string chat_template_error;
  ToolServing tools;  // --tool-call-parser, --enable-auto-tool-choice
  const ReasoningParser* reasoning_parser = nullptr;  // --reasoning-parser; null: none
};

// Throws ApiError. `body` is the parsed JSON (a parse failure is the caller's 400).
ApiRequest parse_completion_request(const nlohmann::json& body, const ServedModel& model);
// Chat takes the body with its key order, which the template sees in tools and tool arguments.
ApiRequest parse_chat_request(const nlohmann::ordered_json& body, const ServedModel& model);

// A request body as JSON, keys in the order sent. Throws ApiError 400 where it is not JSON or
// nests deeper than kMaxRequestDepth arrays and objects: what reads a request (the protocol
// parsers, chat templates, the JSON Schema compiler) recurses through it, so depth is bounded
// before any of them runs.
inline constexpr int kMaxRequestDepth = 128;
nlohmann::ordered_json parse_request_body(const std::string& text);

// vLLM's error body: {"object": "error", "message", "type", "param": null, "code"}.
nlohmann::json error_json(int status, const std::string& message, const std::string& type);

struct ResponseIds {
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

nlohmann::json usage_json(int32_t prompt_tokens, int32_t completion_tokens);
// The most choices one request may ask for (prompts x n).
inline constexpr int32_t kMaxChoices = 64;

struct ChoiceResult {
  std::string text;
  FinishReason reason = FinishReason::kNone;
  nlohmann::json logprobs;  // null, or completion_logprobs_json / chat_logprobs_json
  // Chat: calls found in the output (extract_tool_calls); `text` is then the content outside
  // them, "" giving null content, and the finish reason is "tool_calls".
  std::vector<ToolCall> tool_calls;
  // Chat with a reasoning parser: the output's reasoning (message.reasoning_content), absent
  // where it had none; `text` is then the content after it.
  std::optional<std::string> reasoning;
};

// The logprobs of generated tokens in OpenAI's two shapes. Completions (legacy): {"tokens",
// "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"} with offsets counted from
// `text_offset`; chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
// Token strings are each token's own text (a partial character shows as U+FFFD); a model without
// a tokenizer (null) names them "token_id:<id>", as vLLM's return_tokens_as_token_ids does.
nlohmann::json completion_logprobs_json(const Tokenizer* tokenizer,
                                        const std::vector<int32_t>& tokens,
                                        const std::vector<TokenLogprobs>& logprobs,
                                        int64_t text_offset);
// Completions logprobs with echo: the prompt's tokens first (the first without a logprob:
// nothing comes before it), then the generated ones, offsets running over both.
nlohmann::json echo_logprobs_json(const Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                                  const std::vector<std::optional<TokenLogprobs>>& prompt_logprobs,
                                  const std::vector<int32_t>& tokens,
                                  const std::vector<TokenLogprobs>& logprobs);
nlohmann::json chat_logprobs_json(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens,
                                  const std::vector<TokenLogprobs>& logprobs);

// Whole responses; choice i gets index i.
nlohmann::json completion_json(const ResponseIds& ids, const std::vector<ChoiceResult>& choices,
                               int32_t prompt_tokens, int32_t completion_tokens);
nlohmann::json chat_json(const ResponseIds& ids, const std::vector<ChoiceResult>& choices,
                         int32_t prompt_tokens, int32_t completion_tokens);
// Stream chunks of choice `index`: text (or the assistant role first, for chat) and, on its last,
// the reason.
nlohmann::json completion_chunk_json(const ResponseIds& ids, const std::string& text,
                                     std::optional<FinishReason> reason, int32_t index = 0,
                                     nlohmann::json logprobs = nullptr);
nlohmann::json chat_chunk_json(const ResponseIds& ids, const std::optional<std::string>& role,
                               const std::string& text, std::optional<FinishReason> reason,
                               int32_t index = 0, nlohmann::json logprobs = nullptr);
// A chat chunk of any delta (e.g. {"tool_calls": [...]}) and finish reason (null, or a string such
// as "tool_calls", which the engine's FinishReason does not name).
nlohmann::json chat_delta_chunk_json(const ResponseIds& ids, nlohmann::json delta,
                                     nlohmann::json finish_reason, int32_t index = 0,
                                     nlohmann::json logprobs = nullptr);
// The include_usage chunk: no choices, the counts.
nlohmann::json usage_chunk_json(const ResponseIds& ids, bool chat, int32_t prompt_tokens,
                                int32_t completion_tokens);

}  // namespace quench
