// The server end to end over HTTP on the built-in tiny model: health and models, a greedy
// completion equal to the engine's own result, streaming whose deltas add up to the same text and
// end in [DONE], concurrent clients each getting what they would get alone, chat through the
// template, 4xx for bad requests, metrics that count what happened, a client that leaves
// mid-stream has its request aborted, a model that fails to load is reported, not crashed on, and
// tools reach the template and are refused or streamed as --enable-auto-tool-choice says.
#include "quench/server/openai_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "harness/expect_error.h"
#include "harness/scratch_dir.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

using nlohmann::json;

std::string model_dir() {
  static const std::string dir = [] {
    const std::string d = testing_support::scratch_dir("quench_server_test", "tiny");
    write_tiny_model(d, TinyModelSpec{});
    return d;
  }();
  return dir;
}

// The tiny model with the Qwen3-style fixture template, which shows tools to the model.
std::string tools_model_dir() {
  static const std::string dir = [] {
    const std::string d = testing_support::scratch_dir("quench_server_test", "tiny_tools");
    write_tiny_model(d, TinyModelSpec{});
    std::filesystem::copy_file(QUENCH_TEST_DATA_DIR "/chat_templates/qwen3.jinja",
                               d + "/chat_template.jinja");
    return d;
  }();
  return dir;
}

struct RunningServer {
  explicit RunningServer(const std::function<void(ServeOptions&)>& configure = nullptr) {
    ServeOptions o;
    o.engine.model_dir = model_dir();
    o.engine.max_model_len = 256;
    o.engine.max_num_batched_tokens = 64;
    o.port = 0;
    o.served_model_name = "tiny";
    o.log_interval_seconds = 0;
    if (configure) configure(o);
    server = std::make_unique<OpenAiServer>(o);
    port = server->start();
    EXPECT_TRUE(server->wait_until_loaded()) << server->load_error();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
  json post(const std::string& path, const json& body, int want_status = 200) const {
    auto res = client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, want_status) << res->body;
    return json::parse(res->body);
  }
  std::unique_ptr<OpenAiServer> server;
  int32_t port = 0;
};

// Greedy tokens of the engine alone, for comparison.
std::vector<int32_t> engine_greedy(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  EngineOptions o;
  o.model_dir = model_dir();
  o.max_model_len = 256;
  LlmEngine engine(o);
  SamplingParams s;
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  return engine.generate({prompt}, s)[0].output;
}

// The SSE events of a streamed response body: the JSON of each "data:" line, and whether
// "[DONE]" came last.
std::vector<json> sse_events(const std::string& body, bool* done) {
  std::vector<json> events;
  *done = false;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    if (data == "[DONE]") {
      *done = end + 2 == body.size();
    } else {
      events.push_back(json::parse(data));
    }
    at = end;
  }
  return events;
}

// The events of `body` streamed to /v1/chat/completions: a 200 whose stream ends in [DONE].
std::vector<json> streamed_chat_events(const RunningServer& s, json body) {
  body["stream"] = true;
  auto res = s.client().Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return {};
  EXPECT_EQ(res->status, 200);
  bool done = false;
  std::vector<json> events = sse_events(res->body, &done);
  EXPECT_TRUE(done) << res->body;
  return events;
}

TEST(OpenAiServer, HealthModelsAndAGreedyCompletionEqualToTheEngine) {
  const RunningServer s;
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = s.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny");
  const std::vector<int32_t> prompt = {1, 300, 301, 302, 303};
  const json r = s.post("/v1/completions", {{"model", "tiny"},
                                            {"prompt", prompt},
                                            {"max_tokens", 6},
                                            {"temperature", 0},
                                            {"ignore_eos", true}});
  const Tokenizer tokenizer = Tokenizer::from_file(model_dir() + "/tokenizer.json");
  EXPECT_EQ(r["choices"][0]["text"], tokenizer.decode(engine_greedy(prompt, 6), true));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(r["usage"]["completion_tokens"], 6);
}

TEST(OpenAiServer, StreamingDeltasAddUpToTheWholeAndEndInDone) {
  const RunningServer s;
  const json body = {{"prompt", "The quick brown fox"},
                     {"max_tokens", 12},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const std::string whole = s.post("/v1/completions", body)["choices"][0]["text"];
  json streaming = body;
  streaming["stream"] = true;
  streaming["stream_options"] = {{"include_usage", true}};
  auto res = s.client().Post("/v1/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  bool done = false;
  const std::vector<json> events = sse_events(res->body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += events[i]["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, whole);
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 12);
}

TEST(OpenAiServer, StopStringsCutTheTextStreamedOrNot) {
  const RunningServer s;
  json body = {{"prompt", "The quick brown fox"},
               {"max_tokens", 30},
               {"temperature", 0},
               {"ignore_eos", true}};
  const std::string whole = s.post("/v1/completions", body)["choices"][0]["text"];
  ASSERT_GT(whole.size(), 12u);
  // A stop string of two characters from the middle of the text.
  auto next_char = [&](size_t i) {
    do
      ++i;
    while (i < whole.size() && (static_cast<uint8_t>(whole[i]) & 0xC0) == 0x80);
    return i;
  };
  size_t at = whole.size() / 2;
  while (at > 0 && (static_cast<uint8_t>(whole[at]) & 0xC0) == 0x80)
    --at;
  const std::string stop = whole.substr(at, next_char(next_char(at)) - at);
  const std::string want = whole.substr(0, whole.find(stop));
  body["stop"] = {stop};
  const json cut = s.post("/v1/completions", body);
  EXPECT_EQ(cut["choices"][0]["text"], want);
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  auto res = s.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  bool done = false;
  const std::vector<json> events = sse_events(res->body, &done);
  EXPECT_TRUE(done);
  std::string streamed;
  for (const json& e : events)
    streamed += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiServer, SeveralChoicesStreamedOrNot) {
  const RunningServer s;
  json body = {{"prompt", {"The quick", "brown fox"}},
               {"n", 2},
               {"max_tokens", 6},
               {"temperature", 1.0},
               {"seed", 11},
               {"ignore_eos", true}};
  const json whole = s.post("/v1/completions", body);
  ASSERT_EQ(whole["choices"].size(), 4u);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 24);
  std::vector<std::string> texts;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(whole["choices"][i]["index"], i);
    texts.push_back(whole["choices"][i]["text"]);
  }
  EXPECT_NE(texts[0], texts[1]);  // the choices of one prompt draw with different seeds
  body["stream"] = true;
  auto res = s.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  bool done = false;
  std::vector<std::string> streamed(4);
  for (const json& e : sse_events(res->body, &done)) {
    streamed[e["choices"][0]["index"].get<size_t>()] += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(streamed, texts);  // the same seeds, the same draws
}

TEST(OpenAiServer, LogprobsOfEveryGeneratedToken) {
  const RunningServer s;
  const json r = s.post("/v1/completions", {{"prompt", "The quick brown"},
                                            {"max_tokens", 5},
                                            {"temperature", 0},
                                            {"ignore_eos", true},
                                            {"logprobs", 2}});
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const double chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0);
    ASSERT_EQ(lp["top_logprobs"][i].size(), 2u);
    double best = -1e30;
    for (const auto& [token, value] : lp["top_logprobs"][i].items())
      best = std::max(best, value.get<double>());
    EXPECT_DOUBLE_EQ(chosen, best);  // greedy: the chosen token is the most likely
  }
  std::string joined;
  for (const auto& t : lp["tokens"])
    joined += t.get<std::string>();
  EXPECT_EQ(joined, r["choices"][0]["text"]);
  const json chat =
      s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                      {"max_tokens", 3},
                                      {"temperature", 0},
                                      {"ignore_eos", true},
                                      {"logprobs", true},
                                      {"top_logprobs", 1}});
  EXPECT_EQ(chat["choices"][0]["logprobs"]["content"].size(), 3u);
  json streaming = {{"prompt", "The quick brown"}, {"max_tokens", 5}, {"temperature", 0},
                    {"ignore_eos", true},          {"logprobs", 1},   {"stream", true}};
  auto res = s.client().Post("/v1/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(res);
  bool done = false;
  size_t streamed = 0;
  for (const json& e : sse_events(res->body, &done)) {
    const json& l = e["choices"][0]["logprobs"];
    if (!l.is_null()) streamed += l["token_logprobs"].size();
  }
  EXPECT_EQ(streamed, 5u);
}

TEST(OpenAiServer, EchoScoresThePromptAsLoglikelihoodHarnessesAsk) {
  // What lm-evaluation-harness sends for a loglikelihood: the context and continuation as one
  // prompt, echo, logprobs 1, one generated token; it reads the prompt tokens' logprobs back.
  const RunningServer s;
  const json r = s.post("/v1/completions", {{"prompt", "The quick brown fox"},
                                            {"max_tokens", 1},
                                            {"temperature", 0},
                                            {"echo", true},
                                            {"logprobs", 1}});
  const Tokenizer tokenizer = Tokenizer::from_file(model_dir() + "/tokenizer.json");
  const std::vector<int32_t> prompt = tokenizer.encode("The quick brown fox");
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), prompt.size() + 1);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());  // the first prompt token has no context
  for (size_t i = 1; i < lp["token_logprobs"].size(); ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
  }
  const std::string text = r["choices"][0]["text"];
  EXPECT_EQ(text.rfind(tokenizer.decode(prompt), 0), 0u);  // the echoed prompt comes first
  const size_t last = lp["text_offset"].size() - 1;
  EXPECT_EQ(lp["text_offset"][last], tokenizer.decode(prompt).size());
  EXPECT_EQ(
      s.post("/v1/completions", {{"prompt", "x"}, {"echo", true}, {"stream", true}}, 400)["code"],
      400);
}

TEST(OpenAiServer, ConcurrentClientsGetWhatTheyWouldGetAlone) {
  const RunningServer s;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 5 + 9 * i; ++k)
      p.push_back(10 + (k * 31 + i * 7) % 490);
    prompts.push_back(p);
  }
  std::vector<std::string> got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      got[i] = s.post("/v1/completions", {{"prompt", prompts[i]},
                                          {"max_tokens", 8},
                                          {"temperature", 0},
                                          {"ignore_eos", true}})["choices"][0]["text"];
    });
  }
  for (auto& c : clients)
    c.join();
  const Tokenizer tokenizer = Tokenizer::from_file(model_dir() + "/tokenizer.json");
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], tokenizer.decode(engine_greedy(prompts[i], 8), true)) << "client " << i;
  }
  auto metrics = s.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find(
                "quench:request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 6"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("quench:generation_tokens_total{model_name=\"tiny\"} 48"),
            std::string::npos);
  // No speculation configured: the counters are there, at zero.
  EXPECT_NE(metrics->body.find("quench:spec_decode_num_draft_tokens_total{model_name=\"tiny\"} 0"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("quench:time_to_first_token_seconds_count{model_name=\"tiny\"} 6"),
            std::string::npos);
  // Engine steps by kind, with their time; no GPU time on the CPU backend.
  const auto value_of = [&](const std::string& sample) {
    const size_t at = metrics->body.find(sample + " ");
    EXPECT_NE(at, std::string::npos) << sample;
    return at == std::string::npos ? -1.0 : std::stod(metrics->body.substr(at + sample.size() + 1));
  };
  EXPECT_GT(value_of("quench:engine_steps_total{model_name=\"tiny\",kind=\"decode\"}"), 0.0);
  EXPECT_GT(value_of("quench:engine_steps_total{model_name=\"tiny\",kind=\"prefill\"}"), 0.0);
  const double seconds =
      value_of("quench:engine_step_seconds_total{model_name=\"tiny\",kind=\"decode\"}");
  const double runner =
      value_of("quench:engine_step_runner_seconds_total{model_name=\"tiny\",kind=\"decode\"}");
  EXPECT_GT(runner, 0.0);
  EXPECT_GE(seconds, runner);
  EXPECT_EQ(
      value_of("quench:engine_step_device_seconds_total{model_name=\"tiny\",kind=\"decode\"}"),
      0.0);
}

// A burst of clients connecting at once (a benchmark's first wave, a load balancer's retries):
// every connection is accepted and answered at once. The HTTP library's own listen backlog (5)
// made the kernel drop the handshakes beyond it, and those clients waited for the one-second
// retransmission or had their connection reset.
TEST(OpenAiServer, ABurstOfConnectionsIsAnsweredWithoutConnectRetries) {
  const RunningServer s;
  constexpr int kClients = 256;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(s.port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> sockets;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kClients; ++i) {  // every handshake before the server accepts any
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    sockets.push_back(fd);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  }
  const std::string request = "GET /health HTTP/1.1\r\nHost: q\r\nConnection: close\r\n\r\n";
  std::vector<std::string> replies(kClients);
  std::vector<bool> sent(kClients, false), closed(kClients, false);
  int open = kClients;
  // Well under the kernel's first handshake retransmission (1 s): no client may need one.
  const auto deadline = start + std::chrono::milliseconds(700);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> polled;
    for (int i = 0; i < kClients; ++i) {
      if (!closed[i])
        polled.push_back({sockets[i], static_cast<short>(sent[i] ? POLLIN : POLLOUT), 0});
    }
    ASSERT_GE(::poll(polled.data(), polled.size(), 50), 0);
    for (const pollfd& p : polled) {
      const auto i =
          static_cast<size_t>(std::find(sockets.begin(), sockets.end(), p.fd) - sockets.begin());
      if (p.revents == 0) continue;
      if (!sent[i] && (p.revents & POLLOUT)) {
        EXPECT_EQ(::send(p.fd, request.data(), request.size(), MSG_NOSIGNAL),
                  static_cast<ssize_t>(request.size()));
        sent[i] = true;
        continue;
      }
      char buffer[4096];
      const ssize_t n = ::recv(p.fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        replies[i].append(buffer, static_cast<size_t>(n));
      } else {  // the server closed after its answer (or reset the connection: n < 0)
        closed[i] = true;
        --open;
      }
    }
  }
  int answered = 0;
  for (int i = 0; i < kClients; ++i) {
    answered += replies[i].rfind("HTTP/1.1 200", 0) == 0 ? 1 : 0;
    ::close(sockets[i]);
  }
  EXPECT_EQ(answered, kClients) << "clients answered within 700 ms of connecting";
}

TEST(OpenAiServer, ChatTokenizeAndBadRequests) {
  const RunningServer s;
  const json chat =
      s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                                      {"max_tokens", 4},
                                      {"temperature", 0}});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_LE(chat["usage"]["completion_tokens"].get<int>(), 4);
  const json tokens = s.post("/tokenize", {{"prompt", "the cache"}});
  const json text = s.post("/detokenize", {{"tokens", tokens["tokens"]}});
  EXPECT_EQ(text["prompt"], "<|begin_of_text|>the cache");
  EXPECT_EQ(s.post("/v1/completions", {{"prompt", "x"}, {"n", 100}}, 400)["message"]
                .get<std::string>()
                .find("'n'"),
            0u);
  EXPECT_EQ(s.post("/v1/completions", {{"prompt", "x"}, {"model", "other"}}, 404)["code"], 404);
  EXPECT_EQ(s.post("/v1/completions", {{"prompt", {1, 99999}}}, 400)["type"], "BadRequestError");
  EXPECT_EQ(s.post("/v1/completions", {{"prompt", std::vector<int32_t>(300, 7)}}, 400)["code"],
            400);
  auto bad_json = s.client().Post("/v1/completions", "{nope", "application/json");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  auto missing = s.client().Get("/v2/anything");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // A long JSON body labelled as a form (curl -d's default) is refused by the HTTP layer; the
  // answer says why and what to send instead.
  const std::string long_body =
      json{{"prompt", std::string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH, 'a')}}.dump();
  auto as_form = s.client().Post("/v1/completions", long_body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(as_form);
  EXPECT_EQ(as_form->status, 413);
  const json refusal = json::parse(as_form->body, nullptr, false);
  ASSERT_TRUE(refusal.is_object()) << as_form->body;
  EXPECT_NE(refusal["message"].get<std::string>().find("application/json"), std::string::npos)
      << refusal.dump();
  // The server is still up and answering after all of that.
  EXPECT_EQ(s.post("/v1/completions",
                   {{"prompt", "ok"}, {"max_tokens", 1}})["usage"]["completion_tokens"],
            1);
}

const json kWeatherTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "Current weather in a city."},
      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};

TEST(OpenAiServer, ToolsReachTheTemplateAndAutoNeedsTheFlag) {
  const RunningServer s([](ServeOptions& o) {
    o.engine.model_dir = tools_model_dir();
    o.engine.max_model_len = 1024;  // the tools section is some 500 tokens of the tiny tokenizer
  });
  const json hi = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  const json plain = s.post("/v1/chat/completions", {{"messages", hi}, {"max_tokens", 1}});
  // tool_choice defaults to "auto", which this server (no --enable-auto-tool-choice) refuses.
  const json refused =
      s.post("/v1/chat/completions", {{"messages", hi}, {"tools", {kWeatherTool}}}, 400);
  EXPECT_NE(refused["message"].get<std::string>().find("--enable-auto-tool-choice"),
            std::string::npos)
      << refused;
  // "none" renders the tools into the prompt (the template's # Tools section) without parsing.
  const json body = {
      {"messages", hi}, {"tools", {kWeatherTool}}, {"tool_choice", "none"}, {"max_tokens", 1}};
  const json with_tools = s.post("/v1/chat/completions", body);
  EXPECT_GT(with_tools["usage"]["prompt_tokens"].get<int>(),
            plain["usage"]["prompt_tokens"].get<int>() + 100);
  EXPECT_EQ(s.post("/tokenize", body)["count"], with_tools["usage"]["prompt_tokens"]);
  // A conversation with a call and its result renders, and a malformed one is a 400.
  const json round_trip = {
      {"role", "assistant"},
      {"content", nullptr},
      {"tool_calls",
       {{{"id", "call_1"},
         {"type", "function"},
         {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}}}}};
  const json result = {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "21C"}};
  EXPECT_EQ(s.post("/v1/chat/completions", {{"messages", {hi[0], round_trip, result}},
                                            {"tools", {kWeatherTool}},
                                            {"tool_choice", "none"},
                                            {"max_tokens", 1}})["object"],
            "chat.completion");
  json broken = round_trip;
  broken["tool_calls"][0]["function"]["arguments"] = "{city: Paris";
  EXPECT_NE(s.post("/v1/chat/completions", {{"messages", {hi[0], broken}}}, 400)["message"]
                .get<std::string>()
                .find("messages[1].tool_calls[0].function.arguments"),
            std::string::npos);
}

TEST(OpenAiServer, ChatWithAutoToolsStreamsLikeTheWholeResponse) {
  const RunningServer s([](ServeOptions& o) {
    o.engine.model_dir = tools_model_dir();
    o.engine.max_model_len = 1024;
    o.tool_call_parser = "hermes";
    o.enable_auto_tool_choice = true;
  });
  // Random weights do not call tools: the output is content, the same streamed or not.
  const json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                     {"tools", {kWeatherTool}},
                     {"max_tokens", 16},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const json whole = s.post("/v1/chat/completions", body);
  const json& message = whole["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  ASSERT_TRUE(message["content"].is_string()) << whole;
  EXPECT_FALSE(message.contains("tool_calls"));
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  const std::vector<json> events = streamed_chat_events(s, body);
  ASSERT_GE(events.size(), 2u);
  std::string text;
  for (const json& e : events) {
    const json& delta = e["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("tool_calls"));
    if (delta.contains("content")) text += delta["content"].get<std::string>();
  }
  EXPECT_EQ(text, message["content"]);
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
}

// tool_choice naming a function forces its arguments: the output follows the parameters schema
// (an enum here, so that the random weights must end on {"unit": "C"} or {"unit": "F"}) and
// comes back as one call, whole or streamed (the call in one piece at the end), on a server
// started without tool flags; "required" gives a list of calls; with a response_format beside
// either the request is a 400.
TEST(OpenAiServer, ANamedFunctionIsForcedThroughItsParameters) {
  const RunningServer s([](ServeOptions& o) {
    o.engine.model_dir = tools_model_dir();
    o.engine.max_model_len = 1024;
  });
  const json unit_tool = {{"type", "function"},
                          {"function",
                           {{"name", "get_unit"},
                            {"parameters",
                             {{"type", "object"},
                              {"properties", {{"unit", {{"enum", {"C", "F"}}}}}},
                              {"required", {"unit"}},
                              {"additionalProperties", false}}}}}};
  const json body = {{"messages", {{{"role", "user"}, {"content", "Which unit?"}}}},
                     {"tools", {kWeatherTool, unit_tool}},
                     {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_unit"}}}}},
                     {"max_tokens", 256},
                     {"temperature", 0}};
  const auto check_arguments = [](const json& call) {
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_unit");
    const json arguments = json::parse(call["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(arguments == json({{"unit", "C"}}) || arguments == json({{"unit", "F"}}))
        << arguments;
  };
  const json whole = s.post("/v1/chat/completions", body);
  const json& message = whole["choices"][0]["message"];
  ASSERT_EQ(message["tool_calls"].size(), 1u) << whole;
  check_arguments(message["tool_calls"][0]);
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
  const std::vector<json> events = streamed_chat_events(s, body);
  json calls = json::array();
  for (const json& e : events) {
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("tool_calls"))
      calls.insert(calls.end(), delta["tool_calls"].begin(), delta["tool_calls"].end());
    if (delta.contains("content")) {
      EXPECT_TRUE(delta["content"].get<std::string>().empty()) << e;
    }
  }
  ASSERT_EQ(calls.size(), 1u) << json(events).dump();
  check_arguments(calls[0]);
  EXPECT_EQ(calls[0]["function"]["arguments"], message["tool_calls"][0]["function"]["arguments"]);
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");
  // "required" over two tools, one call at most: a list of one call of either.
  const json now_tool = {
      {"type", "function"},
      {"function",
       {{"name", "now"},
        {"parameters",
         {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}}}}};
  json required = body;
  required["tools"] = {unit_tool, now_tool};
  required["tool_choice"] = "required";
  required["parallel_tool_calls"] = false;
  required["max_tokens"] = 360;  // ~16 gaps of at most 16 whitespace tokens, and the call
  const json listed = s.post("/v1/chat/completions", required);
  const json& listed_calls = listed["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(listed_calls.size(), 1u) << listed;
  if (listed_calls[0]["function"]["name"] == "now") {
    EXPECT_EQ(listed_calls[0]["function"]["arguments"], "{}");
  } else {
    check_arguments(listed_calls[0]);
  }
  EXPECT_EQ(listed["choices"][0]["finish_reason"], "tool_calls");
  json both = body;
  both["response_format"] = {{"type", "json_object"}};
  EXPECT_NE(s.post("/v1/chat/completions", both, 400)["message"].get<std::string>().find(
                "'response_format' must be \"text\""),
            std::string::npos);
}

// skip_special_tokens false shows special tokens in the text, streamed or not, but for the
// end-of-sequence token that ended the request. logit_bias makes the tiny model write them:
// <|start_header_id|> (3) until max_tokens, then <|end_of_text|> (2, its end-of-sequence).
TEST(OpenAiServer, SpecialTokensShownWhenAskedButNotTheOneThatEnded) {
  const RunningServer s;
  auto text_of = [&](json body, bool stream) {
    if (!stream) return s.post("/v1/completions", body)["choices"][0]["text"].get<std::string>();
    body["stream"] = true;
    auto res = s.client().Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    bool done = false;
    std::string text;
    for (const json& e : sse_events(res ? res->body : "", &done))
      text += e["choices"][0]["text"].get<std::string>();
    EXPECT_TRUE(done);
    return text;
  };
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    json header = {{"prompt", "Hi"},
                   {"max_tokens", 3},
                   {"temperature", 0},
                   {"ignore_eos", true},
                   {"logit_bias", {{"3", 100}}}};
    EXPECT_EQ(text_of(header, stream), "");  // skipped by default
    header["skip_special_tokens"] = false;
    // Cut by max_tokens: every one shows, the last too.
    EXPECT_EQ(text_of(header, stream), "<|start_header_id|><|start_header_id|><|start_header_id|>");
    json eos = {{"prompt", "Hi"},
                {"max_tokens", 3},
                {"temperature", 0},
                {"skip_special_tokens", false},
                {"logit_bias", {{"2", 100}}}};
    EXPECT_EQ(text_of(eos, stream), "");  // the end-of-sequence token ended it: not shown
  }
}

// --reasoning-parser on chat: random weights write no </think>, so deepseek_r1 (reasoning from
// the start) makes the whole greedy output reasoning_content with null content, streamed as
// reasoning deltas that add up to it, and leaves a response_format unapplied (the answer would
// start after </think>): the same greedy text. qwen3 (reasoning only after <think>) leaves the
// output content, and under response_format (the tiny vocabulary has no <think> token) the
// answer is constrained from the first token, as without a reasoning parser.
TEST(OpenAiServer, ReasoningParserSplitsChatOutput) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
                     {"max_tokens", 16},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const auto served = [](const std::string& parser) {
    return std::make_unique<RunningServer>([parser](ServeOptions& o) {
      o.engine.model_dir = tools_model_dir();
      o.engine.max_model_len = 1024;
      o.reasoning_parser = parser;
    });
  };
  json constrained = body;
  constrained["response_format"] = {{"type", "json_object"}};
  std::string plain, plain_constrained;
  {
    const auto s = served("");
    const json whole = s->post("/v1/chat/completions", body);
    plain = whole["choices"][0]["message"]["content"].get<std::string>();
    EXPECT_FALSE(whole["choices"][0]["message"].contains("reasoning_content"));
    const json answer = s->post("/v1/chat/completions", constrained);
    plain_constrained = answer["choices"][0]["message"]["content"].get<std::string>();
  }
  ASSERT_NE(plain_constrained, plain);
  ASSERT_FALSE(plain.empty());
  ASSERT_EQ(plain.find("think>"), std::string::npos) << plain;
  {
    const auto s = served("deepseek_r1");
    const json whole = s->post("/v1/chat/completions", body);
    const json& message = whole["choices"][0]["message"];
    EXPECT_EQ(message["reasoning_content"], plain) << whole;
    EXPECT_TRUE(message["content"].is_null()) << whole;
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
    std::string reasoning;
    for (const json& e : streamed_chat_events(*s, body)) {
      const json& delta = e["choices"][0]["delta"];
      if (delta.contains("reasoning_content"))
        reasoning += delta["reasoning_content"].get<std::string>();
      if (delta.contains("content")) {
        EXPECT_EQ(delta["content"], "") << e;
      }
    }
    EXPECT_EQ(reasoning, plain);
    // include_reasoning false: the reasoning is split off and not returned.
    json without = body;
    without["include_reasoning"] = false;
    const json hidden = s->post("/v1/chat/completions", without);
    EXPECT_FALSE(hidden["choices"][0]["message"].contains("reasoning_content")) << hidden;
    EXPECT_EQ(hidden["choices"][0]["message"]["content"], "") << hidden;
    for (const json& e : streamed_chat_events(*s, without)) {
      const json& delta = e["choices"][0]["delta"];
      EXPECT_FALSE(delta.contains("reasoning_content")) << e;
      if (delta.contains("content")) {
        EXPECT_EQ(delta["content"], "") << e;
      }
    }
    without["include_reasoning"] = "no";
    s->post("/v1/chat/completions", without, 400);
    const json reasoned = s->post("/v1/chat/completions", constrained);
    EXPECT_EQ(reasoned["choices"][0]["message"]["reasoning_content"], plain) << reasoned;
    EXPECT_TRUE(reasoned["choices"][0]["message"]["content"].is_null()) << reasoned;
  }
  {
    const auto s = served("qwen3");
    const json whole = s->post("/v1/chat/completions", body);
    EXPECT_EQ(whole["choices"][0]["message"]["content"], plain) << whole;
    EXPECT_FALSE(whole["choices"][0]["message"].contains("reasoning_content"));
    const json answer = s->post("/v1/chat/completions", constrained);
    const json& message = answer["choices"][0]["message"];
    EXPECT_FALSE(message.contains("reasoning_content")) << answer;
    ASSERT_TRUE(message["content"].is_string()) << answer;
    EXPECT_EQ(message["content"], plain_constrained) << answer;
  }
}

TEST(OpenAiServer, ToolFlagsAreChecked) {
  ServeOptions o;
  o.engine.model_dir = model_dir();
  o.tool_call_parser = "granite";
  EXPECT_QUENCH_ERROR(OpenAiServer{o}, {"granite", "hermes, llama3_json, mistral, pythonic"});
  o.tool_call_parser.clear();
  o.enable_auto_tool_choice = true;
  EXPECT_QUENCH_ERROR(OpenAiServer{o}, {"--enable-auto-tool-choice needs --tool-call-parser"});
  o.enable_auto_tool_choice = false;
  o.reasoning_parser = "granite";
  EXPECT_QUENCH_ERROR(OpenAiServer{o}, {"granite", "deepseek_r1, qwen3"});
}

TEST(OpenAiServer, AClientThatLeavesMidStreamIsAborted) {
  const RunningServer s;
  const json body = {
      {"prompt", "a long story"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}};
  httplib::Client c = s.client();
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;
  };  // hang up
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  c.send(req, res, error);
  EXPECT_EQ(chunks, 3);
  bool aborted = false;
  for (int i = 0; i < 100 && !aborted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto m = s.client().Get("/metrics");
    aborted = m && m->body.find("quench:request_aborted_total{model_name=\"tiny\"} 1") !=
                       std::string::npos;
  }
  EXPECT_TRUE(aborted);
}

TEST(OpenAiServer, AModelThatFailsToLoadIsReported) {
  ServeOptions o;
  o.engine.model_dir = testing_support::scratch_dir("quench_server_test", "empty_model");
  o.port = 0;
  o.log_interval_seconds = 0;
  OpenAiServer server(o);
  const int32_t port = server.start();
  EXPECT_FALSE(server.wait_until_loaded());
  EXPECT_NE(server.load_error().find("model.safetensors"), std::string::npos)
      << server.load_error();
  httplib::Client c("127.0.0.1", port);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 500);
  auto completion = c.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 503);
}

}  // namespace
}  // namespace quench
