#include "quench/server/openai_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>

#include "quench/core/error.h"
#include "quench/core/log.h"
#include "quench/server/async_engine.h"
#include "quench/server/chat_template.h"
#include "quench/server/openai_protocol.h"
#include "quench/server/reasoning/reasoning_streamer.h"
#include "quench/server/server_metrics.h"
#include "quench/server/tool_calls/tool_call_parser.h"
#include "quench/server/tool_calls/tool_call_streamer.h"
#include "quench/tokenizer/incremental_detokenizer.h"

namespace quench {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);

// Never throws on invalid UTF-8 (an error message may quote a client's bytes): replaced by U+FFFD.
std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type = "BadRequestError") {
  send_json(res, status, error_json(status, message, type));
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string sse(const json& chunk) {
  return "data: " + dump_json(chunk) + "\n\n";
}

}  // namespace

struct OpenAiServer::State {
  ServeOptions options;
  httplib::Server http;
  std::thread http_thread;
  std::thread load_thread;
  int32_t port = 0;

  mutable std::mutex mutex;
  std::condition_variable load_done;
  bool loaded = false;
  std::string load_error;
  std::unique_ptr<AsyncEngine> engine;
  ServedModel served;
  ServerMetrics metrics;
  std::atomic<int64_t> next_id{0};

  AsyncEngine* ready_engine() const {
    const std::lock_guard<std::mutex> lock(mutex);
    return loaded && load_error.empty() ? engine.get() : nullptr;
  }
  void load();
  void routes();
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
};

void OpenAiServer::State::load() {
  try {
    const auto start = Clock::now();
    auto llm = std::make_unique<LlmEngine>(options.engine);
    ServedModel model;
    model.name = options.served_model_name;
    model.max_model_len = llm->scheduler_config().max_model_len;
    model.vocab_size = llm->config().vocab_size;
    model.tokenizer = llm->tokenizer();
    if (!options.tool_call_parser.empty())
      model.tools.parser = &tool_call_parser(options.tool_call_parser);
    model.tools.enable_auto_tool_choice = options.enable_auto_tool_choice;
    if (!options.reasoning_parser.empty())
      model.reasoning_parser = &reasoning_parser(options.reasoning_parser);
    try {
      model.chat_template = ChatTemplate::from_model_dir(options.engine.model_dir);
    } catch (const Error& e) {
      model.chat_template_error = e.what();
      log_warning(
          str_cat("chat template not loaded, /v1/chat/completions will answer 400: ", e.what()));
    }
    const SchedulerConfig& sc = llm->scheduler_config();
    const int64_t cache_tokens = static_cast<int64_t>(sc.num_pages - 1) * sc.page_size;
    log_info(str_cat(
        "Loaded ", model_architecture_name(llm->config().architecture), " on ",
        llm->model().device_name(), " from ", options.engine.model_dir, " (",
        llm->checkpoint_bytes() >> 20, " MiB of weights) in ",
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(),
        " ms; tokenizer: ", model.tokenizer ? "tokenizer.json" : "none (token-id prompts only)",
        "; chat template: ",
        model.chat_template                 ? model.chat_template->origin()
        : model.chat_template_error.empty() ? "none"
                                            : "failed to load"));
    log_info(str_cat("KV cache: ", cache_tokens, " tokens of ",
                     dtype_name(options.engine.kv_cache_dtype), ", max concurrency ",
                     static_cast<double>(cache_tokens) / sc.max_model_len, "x for ",
                     sc.max_model_len, "-token requests"));
    auto engine_thread = std::make_unique<AsyncEngine>(
        std::move(llm), std::chrono::seconds(options.log_interval_seconds));
    const std::lock_guard<std::mutex> lock(mutex);
    served = model;
    engine = std::move(engine_thread);
    loaded = true;
  } catch (const std::exception& e) {
    const std::lock_guard<std::mutex> lock(mutex);
    load_error = e.what();
    loaded = true;
    log_error(str_cat("loading the model failed: ", e.what()));
  }
  load_done.notify_all();
}

namespace {

// One choice of a response: its engine stream and, when streaming, the text sent so far.
struct ChoiceState {
  int32_t index = 0;
  std::vector<int32_t> prompt;
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<IncrementalDetokenizer> detokenizer;
  std::string text;  // the stable text so far
  size_t sent = 0;   // bytes of it sent
  int32_t completion_tokens = 0;
  int64_t logprob_text_offset = 0;  // the completions logprobs' text_offset of the next token
  bool sent_role = false;
  bool finished = false;
  std::unique_ptr<ToolCallStreamer> tools;       // chat with tool_choice "auto": what may be sent
  std::unique_ptr<ReasoningStreamer> reasoning;  // chat with a reasoning parser
  size_t content_sent = 0;  // bytes of the content (the text after any reasoning) sent
};

// The text of a finished choice from all its tokens (special tokens skipped, or shown but for a
// last one), cut at a stop string.
std::string final_text(const Tokenizer* tokenizer, const std::vector<int32_t>& tokens,
                       const RequestStream& stream, bool skip_special_tokens) {
  std::string text = tokenizer != nullptr
                         ? decode_output_text(*tokenizer, tokens, skip_special_tokens,
                                              ended_on_its_last_token(stream.finish_reason(),
                                                                      stream.stop_text_offset()))
                         : std::string();
  if (stream.stop_text_offset() >= 0)
    text.resize(std::min(text.size(), static_cast<size_t>(stream.stop_text_offset())));
  return text;
}

// The content a choice has not sent yet, of `content` (all its content so far), marked sent.
std::string take_content(ChoiceState& c, std::string_view content) {
  if (content.size() <= c.content_sent) return "";
  std::string text(content.substr(c.content_sent));
  c.content_sent = content.size();
  return text;
}

}  // namespace

void OpenAiServer::State::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  AsyncEngine* engine_ptr = ready_engine();
  if (engine_ptr == nullptr)
    return send_error(res, 503, "the model is loading", "ServiceUnavailableError");
  AsyncEngine& async = *engine_ptr;
  nlohmann::ordered_json body;  // chat templates see tools and tool arguments in the order sent
  try {
    body = parse_request_body(req.body);
  } catch (const ApiError& e) {
    return send_error(res, e.status, e.what(), e.type);
  }
  ApiRequest request;
  try {
    request =
        chat ? parse_chat_request(body, served) : parse_completion_request(json(body), served);
  } catch (const ApiError& e) {
    return send_error(res, e.status, e.what(), e.type);
  }
  // Each prompt n times; a seeded request gives its choices consecutive seeds, so that they
  // differ from each other and repeat from run to run.
  auto choices = std::make_shared<std::vector<ChoiceState>>();
  int32_t prompt_tokens = 0;
  try {
    for (const std::vector<int32_t>& prompt : request.prompts) {
      prompt_tokens += static_cast<int32_t>(prompt.size());
      for (int32_t k = 0; k < request.n; ++k) {
        SamplingParams params = request.params;
        if (params.seed) params.seed = *params.seed + static_cast<uint64_t>(k);
        ChoiceState c;
        c.index = static_cast<int32_t>(choices->size());
        c.prompt = prompt;
        c.stream = async.submit(prompt, params);
        if (served.tokenizer != nullptr)
          c.detokenizer = std::make_unique<IncrementalDetokenizer>(*served.tokenizer,
                                                                   params.skip_special_tokens);
        if (request.tool_call_parser != nullptr) {
          c.tools = std::make_unique<ToolCallStreamer>(*request.tool_call_parser,
                                                       request.parallel_tool_calls);
        }
        if (request.reasoning_parser != nullptr)
          c.reasoning = std::make_unique<ReasoningStreamer>(*request.reasoning_parser);
        choices->push_back(std::move(c));
      }
    }
  } catch (const Error& e) {
    for (const ChoiceState& c : *choices)
      async.abort(c.stream);
    return send_error(res, 400, e.what());
  }
  const ResponseIds ids{str_cat(chat ? "chatcmpl-" : "cmpl-", next_id++), unix_seconds(),
                        served.name};
  const Clock::time_point arrival = Clock::now();
  auto seconds_since_arrival = [arrival] {
    return std::chrono::duration<double>(Clock::now() - arrival).count();
  };

  if (!request.stream) {
    std::vector<ChoiceResult> results;
    int32_t completion_tokens = 0;
    bool first = true;
    for (ChoiceState& c : *choices) {
      std::vector<int32_t> tokens;
      std::vector<TokenLogprobs> logprobs;
      while (c.stream->wait(tokens, kPoll, &logprobs)) {
        if (first && !tokens.empty()) {
          metrics.time_to_first_token.observe(seconds_since_arrival());
          first = false;
        }
      }
      if (!c.stream->error().empty()) {
        for (const ChoiceState& other : *choices)
          async.abort(other.stream);
        return send_error(res, 500, c.stream->error(), "InternalServerError");
      }
      completion_tokens += static_cast<int32_t>(tokens.size());
      // Without a tokenizer the text is empty; the token counts are still in usage.
      ChoiceResult result{
          final_text(served.tokenizer, tokens, *c.stream, request.params.skip_special_tokens),
          c.stream->finish_reason(),
          nullptr,
          {},
          std::nullopt};
      if (request.echo && served.tokenizer != nullptr) {
        result.text = served.tokenizer->decode(c.prompt, false, true) + result.text;
      }
      if (request.reasoning_parser != nullptr) {
        ReasoningOutput split = extract_reasoning(*request.reasoning_parser, result.text);
        if (request.include_reasoning) result.reasoning = std::move(split.reasoning);
        result.text = std::move(split.content);
      }
      if (request.tool_call_parser != nullptr) {
        ToolCallOutput out =
            extract_tool_calls(*request.tool_call_parser, result.text, request.parallel_tool_calls);
        result.text = std::move(out.content);
        result.tool_calls = std::move(out.calls);
      }
      // (Chat needs a tokenizer for its template; completions name tokens by id without one.)
      if (request.params.logprobs >= 0) {
        if (chat) {
          if (served.tokenizer != nullptr)
            result.logprobs = chat_logprobs_json(*served.tokenizer, tokens, logprobs);
        } else if (request.echo) {
          result.logprobs = echo_logprobs_json(served.tokenizer, c.prompt,
                                               c.stream->prompt_logprobs(), tokens, logprobs);
        } else {
          result.logprobs = completion_logprobs_json(served.tokenizer, tokens, logprobs, 0);
        }
      }
      results.push_back(std::move(result));
    }
    metrics.e2e_latency.observe(seconds_since_arrival());
    return send_json(res, 200,
                     chat ? chat_json(ids, results, prompt_tokens, completion_tokens)
                          : completion_json(ids, results, prompt_tokens, completion_tokens));
  }

  // With stop strings, the last (longest - 1) bytes wait: they may be the start of a stop string
  // that the next tokens complete, and a client must never see a stop string.
  size_t holdback = 0;
  for (const std::string& stop : request.params.stop)
    holdback = std::max(holdback, stop.size() - 1);
  auto done = std::make_shared<bool>(false);
  auto first_token = std::make_shared<bool>(true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, choices, done, first_token, ids, chat, request, prompt_tokens, holdback,
       seconds_since_arrival](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        // An exception must not leave the provider (the HTTP library would not survive it): the
        // client gets an error event, the requests are aborted by the releaser.
        try {
          const auto unfinished = static_cast<int32_t>(std::count_if(
              choices->begin(), choices->end(), [](const ChoiceState& c) { return !c.finished; }));
          for (ChoiceState& c : *choices) {
            if (c.finished) continue;
            if (chat && !c.sent_role) {
              c.sent_role = true;
              if (!write(sse(
                      chat_chunk_json(ids, std::string("assistant"), "", std::nullopt, c.index))))
                return false;
            }
            std::vector<int32_t> tokens;
            std::vector<TokenLogprobs> logprobs;
            const bool more = c.stream->wait(tokens, kPoll / std::max(unfinished, 1), &logprobs);
            if (!sink.is_writable()) return false;  // the client left
            if (!tokens.empty()) {
              if (*first_token) {
                metrics.time_to_first_token.observe(seconds_since_arrival());
                *first_token = false;
              }
              c.completion_tokens += static_cast<int32_t>(tokens.size());
              if (c.detokenizer) c.text += c.detokenizer->push(tokens);
              // Up to the hold-back, never inside a character (chunks are JSON strings), and
              // cut at a stop string these very tokens completed (the engine's finish may come
              // a moment after its tokens).
              size_t end = c.text.size() > holdback ? c.text.size() - holdback : 0;
              for (const std::string& stop : request.params.stop) {
                end = std::min(end, c.text.find(stop, c.sent > holdback ? c.sent - holdback : 0));
              }
              while (end > c.sent && end < c.text.size() &&
                     (static_cast<uint8_t>(c.text[end]) & 0xC0) == 0x80)
                --end;
              c.sent = std::max(c.sent, end);
              // Of the text that may be sent: the reasoning, then the content after it.
              const std::string_view sendable = std::string_view(c.text).substr(0, c.sent);
              std::string reasoning;
              std::string_view content = sendable;
              if (c.reasoning) {
                ReasoningStreamer::Delta r = c.reasoning->update(sendable, false);
                reasoning = std::move(r.reasoning);
                content = r.content;
              }
              std::string text = take_content(c, content);
              json tool_calls = json::array();
              if (c.tools) {  // of the content, what is not (part of) a call
                ToolCallStreamer::Delta d = c.tools->update(content, false);
                text = std::move(d.content);
                tool_calls = std::move(d.tool_calls);
              }
              if (!reasoning.empty() && request.include_reasoning &&
                  !write(sse(chat_delta_chunk_json(
                      ids, {{"reasoning_content", std::move(reasoning)}}, nullptr, c.index))))
                return false;
              json lp = nullptr;
              if (request.params.logprobs >= 0) {
                if (chat) {
                  if (served.tokenizer != nullptr)
                    lp = chat_logprobs_json(*served.tokenizer, tokens, logprobs);
                } else {
                  lp = completion_logprobs_json(served.tokenizer, tokens, logprobs,
                                                c.logprob_text_offset);
                  for (const auto& t : lp["tokens"])
                    c.logprob_text_offset += static_cast<int64_t>(t.get<std::string>().size());
                }
              }
              if (!text.empty() || !c.detokenizer || !lp.is_null()) {
                const json chunk =
                    chat ? chat_chunk_json(ids, std::nullopt, text, std::nullopt, c.index,
                                           std::move(lp))
                         : completion_chunk_json(ids, text, std::nullopt, c.index, std::move(lp));
                if (!write(sse(chunk))) return false;
              }
              if (!tool_calls.empty() &&
                  !write(sse(chat_delta_chunk_json(ids, {{"tool_calls", std::move(tool_calls)}},
                                                   nullptr, c.index))))
                return false;
            }
            if (more) continue;
            if (!c.stream->error().empty()) {
              write(sse(error_json(500, c.stream->error(), "InternalServerError")));
              write("data: [DONE]\n\n");
              sink.done();
              return true;  // not *done: the releaser aborts the other choices
            }
            if (c.detokenizer) {
              c.text += c.detokenizer->finish(
                  ended_on_its_last_token(c.stream->finish_reason(), c.stream->stop_text_offset()));
            }
            if (c.stream->stop_text_offset() >= 0) {
              c.text.resize(
                  std::min(c.text.size(), static_cast<size_t>(c.stream->stop_text_offset())));
            }
            std::string_view content = c.text;
            if (c.reasoning) {
              ReasoningStreamer::Delta r = c.reasoning->update(c.text, true);
              content = r.content;
              if (!r.reasoning.empty() && request.include_reasoning) {
                write(sse(chat_delta_chunk_json(
                    ids, {{"reasoning_content", std::move(r.reasoning)}}, nullptr, c.index)));
              }
            }
            std::string rest = take_content(c, content);
            const FinishReason reason = c.stream->finish_reason();
            if (c.tools) {
              ToolCallStreamer::Delta d = c.tools->update(content, true);
              if (!d.tool_calls.empty()) {
                write(sse(chat_delta_chunk_json(ids, {{"tool_calls", std::move(d.tool_calls)}},
                                                nullptr, c.index)));
              }
              if (c.tools->called()) {
                json delta = json::object();
                if (!d.content.empty()) delta["content"] = std::move(d.content);
                write(sse(chat_delta_chunk_json(ids, std::move(delta), "tool_calls", c.index)));
                c.finished = true;
                continue;
              }
              rest = std::move(d.content);
            }
            write(sse(chat ? chat_chunk_json(ids, std::nullopt, rest, reason, c.index)
                           : completion_chunk_json(ids, rest, reason, c.index)));
            c.finished = true;
          }
          if (std::any_of(choices->begin(), choices->end(),
                          [](const ChoiceState& c) { return !c.finished; })) {
            return true;
          }
          metrics.e2e_latency.observe(seconds_since_arrival());
          if (request.include_usage) {
            int32_t completion_tokens = 0;
            for (const ChoiceState& c : *choices)
              completion_tokens += c.completion_tokens;
            write(sse(usage_chunk_json(ids, chat, prompt_tokens, completion_tokens)));
          }
          write("data: [DONE]\n\n");
          *done = true;
        } catch (const std::exception& e) {
          write(
              sse(error_json(500, str_cat("streaming failed: ", e.what()), "InternalServerError")));
          write("data: [DONE]\n\n");
        }
        sink.done();
        return true;
      },
      [this, choices, done](bool success) {
        if (!success || !*done) {
          if (AsyncEngine* e = ready_engine()) {
            for (const ChoiceState& c : *choices)
              e->abort(c.stream);
          }
        }
      });
}

void OpenAiServer::State::routes() {
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!loaded) return send_error(res, 503, "the model is loading", "ServiceUnavailableError");
    if (!load_error.empty()) return send_error(res, 500, load_error, "InternalServerError");
    res.status = 200;
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_engine() == nullptr)
      return send_error(res, 503, "the model is loading", "ServiceUnavailableError");
    send_json(res, 200,
              {{"object", "list"},
               {"data",
                {{{"id", served.name},
                  {"object", "model"},
                  {"created", unix_seconds()},
                  {"owned_by", "quench"},
                  {"root", options.engine.model_dir},
                  {"max_model_len", served.max_model_len},
                  {"vocab_size", served.vocab_size}}}}});
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, false);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, true);
  });
  // The tokenizer endpoints need a loaded model with a tokenizer.json; false after answering.
  auto tokenizer_ready = [this](httplib::Response& res) {
    if (ready_engine() == nullptr) {
      send_error(res, 503, "the model is loading", "ServiceUnavailableError");
      return false;
    }
    if (served.tokenizer == nullptr) {
      send_error(res, 400, "this model has no tokenizer.json");
      return false;
    }
    return true;
  };
  http.Post("/tokenize", [this, tokenizer_ready](const httplib::Request& req,
                                                 httplib::Response& res) {
    if (!tokenizer_ready(res)) return;
    try {
      const auto body = parse_request_body(req.body);
      std::vector<int32_t> tokens;
      if (body.contains("messages")) {
        nlohmann::ordered_json chat = body;
        chat.erase("max_tokens");
        tokens = parse_chat_request(chat, served).prompts.front();
      } else {
        if (!body.contains("prompt") || !body.at("prompt").is_string())
          return send_error(res, 400, "'prompt' must be a string");
        tokens = served.tokenizer->encode(body.at("prompt").get<std::string>(),
                                          body.value("add_special_tokens", true));
      }
      send_json(
          res, 200,
          {{"count", tokens.size()}, {"max_model_len", served.max_model_len}, {"tokens", tokens}});
    } catch (const ApiError& e) {
      send_error(res, e.status, e.what(), e.type);
    } catch (const json::exception& e) {
      send_error(res, 400, str_cat("the request body is not valid JSON: ", e.what()));
    } catch (const Error& e) {
      send_error(res, 400, e.what());
    }
  });
  http.Post("/detokenize", [this, tokenizer_ready](const httplib::Request& req,
                                                   httplib::Response& res) {
    if (!tokenizer_ready(res)) return;
    try {
      const json body = json(parse_request_body(req.body));
      if (!body.contains("tokens") || !body.at("tokens").is_array())
        return send_error(res, 400, "'tokens' must be a list of token ids");
      send_json(
          res, 200,
          {{"prompt", served.tokenizer->decode(body.at("tokens").get<std::vector<int32_t>>())}});
    } catch (const ApiError& e) {
      send_error(res, e.status, e.what(), e.type);
    } catch (const json::exception& e) {
      send_error(res, 400, str_cat("'tokens' must be a list of token ids: ", e.what()));
    } catch (const Error& e) {
      send_error(res, 400, e.what());
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    AsyncEngine* e = ready_engine();
    if (e == nullptr)
      return send_error(res, 503, "the model is loading", "ServiceUnavailableError");
    res.set_content(metrics.format(served.name, e->counters()), "text/plain; version=0.0.4");
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        send_error(res, 500, message, "InternalServerError");
      });
  // Errors that the HTTP layer answers before any handler runs come without a body: give each
  // one the JSON error a client can show.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, 404, str_cat("no route ", req.method, " ", req.path), "NotFoundError");
    } else if (res.status == 413) {
      // The HTTP library caps form-encoded bodies at CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH
      // bytes, and `curl -d` sends JSON labelled as a form unless told otherwise.
      send_error(res, 413,
                 str_cat("the request body is ", req.get_header_value("Content-Length"),
                         " bytes sent as '", req.get_header_value("Content-Type"),
                         "'; bodies of that type are capped at ",
                         CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH,
                         " bytes; send the request as 'Content-Type: application/json' (curl: -H "
                         "'Content-Type: application/json')"),
                 "RequestEntityTooLargeError");
    } else if (res.status >= 400) {
      send_error(res, res.status,
                 str_cat("the HTTP layer rejected ", req.method, " ", req.path, " with status ",
                         res.status),
                 res.status >= 500 ? "InternalServerError" : "BadRequestError");
    }
  });
}

OpenAiServer::OpenAiServer(ServeOptions options) : state_(std::make_unique<State>()) {
  if (options.served_model_name.empty()) {
    options.served_model_name = std::filesystem::path(options.engine.model_dir).filename().string();
    if (options.served_model_name.empty()) options.served_model_name = options.engine.model_dir;
  }
  QUENCH_REQUIRE(options.http_threads >= 1, "http_threads ", options.http_threads, " must be >= 1");
  if (!options.tool_call_parser.empty()) tool_call_parser(options.tool_call_parser);  // known?
  if (!options.reasoning_parser.empty()) reasoning_parser(options.reasoning_parser);
  QUENCH_REQUIRE(!options.enable_auto_tool_choice || !options.tool_call_parser.empty(),
                 "--enable-auto-tool-choice needs --tool-call-parser (one of ",
                 tool_call_parser_names(), ")");
  state_->options = std::move(options);
}

OpenAiServer::~OpenAiServer() {
  stop();
}

int32_t OpenAiServer::start() {
  State& s = *state_;
  const size_t threads = static_cast<size_t>(s.options.http_threads);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // The HTTP library listens with a backlog of 5 connections. A burst of concurrent clients
  // overflows it: the kernel drops their handshakes (one-second connect retries) and some
  // connections are reset after their request was sent. The listening socket is remembered here
  // and given the system's full backlog once bound.
  auto listening_socket = std::make_shared<socket_t>(-1);
  s.http.set_socket_options([listening_socket](socket_t sock) {
    httplib::default_socket_options(sock);
    *listening_socket = sock;
  });
  s.routes();
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host);
    QUENCH_REQUIRE(s.port > 0, "cannot bind ", s.options.host, " to any port");
  } else {
    QUENCH_REQUIRE(s.http.bind_to_port(s.options.host, s.options.port), "cannot bind ",
                   s.options.host, ":", s.options.port,
                   " (in use, or not an address of this machine)");
    s.port = s.options.port;
  }
  QUENCH_REQUIRE(*listening_socket >= 0 && ::listen(*listening_socket, SOMAXCONN) == 0,
                 "cannot listen on ", s.options.host, ":", s.port, ": ", std::strerror(errno));
  s.http_thread = std::thread([&s] { s.http.listen_after_bind(); });
  s.load_thread = std::thread([&s] { s.load(); });
  return s.port;
}

bool OpenAiServer::wait_until_loaded() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->load_done.wait(lock, [&] { return state_->loaded; });
  return state_->load_error.empty();
}

std::string OpenAiServer::load_error() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->load_error;
}

void OpenAiServer::wait() {
  if (state_->http_thread.joinable()) state_->http_thread.join();
}

void OpenAiServer::stop() {
  State& s = *state_;
  s.http.stop();
  if (s.http_thread.joinable()) s.http_thread.join();
  if (s.load_thread.joinable()) s.load_thread.join();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.engine.reset();
}

const std::string& OpenAiServer::served_model_name() const {
  return state_->options.served_model_name;
}

}  // namespace quench
