#include "quench/benchmark/serving_benchmark.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <thread>

#include "quench/core/error.h"

namespace quench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One echo completion (not streamed): the answer must hold a logprob for every prompt token but
// the first (null) and for every generated one.
void send_echo_request(const ServingBenchmarkOptions& o, const json& body, RequestRecord& record) {
  httplib::Client client(o.host, o.port);
  client.set_read_timeout(3600, 0);
  const Clock::time_point start = Clock::now();
  const auto res = client.Post("/v1/completions", body.dump(), "application/json");
  const Clock::time_point end = Clock::now();
  if (!res) {
    record.error = str_cat("request failed: ", httplib::to_string(res.error()));
    return;
  }
  if (res->status != 200) {
    record.error = str_cat("HTTP ", res->status, ": ", res->body);
    return;
  }
  const json answer = json::parse(res->body, nullptr, false);
  if (answer.is_discarded() || !answer.contains("usage") || !answer.contains("choices") ||
      answer["choices"].empty()) {
    record.error = "the answer is not a completion";
    return;
  }
  record.output_tokens = answer["usage"].value("completion_tokens", 0);
  const json logprobs = answer["choices"][0].value("logprobs", json());
  const size_t expected = static_cast<size_t>(record.prompt_tokens + record.output_tokens);
  if (!logprobs.is_object() || !logprobs.contains("token_logprobs") ||
      logprobs["token_logprobs"].size() != expected) {
    record.error = str_cat("the answer holds no logprob for each of the ", expected,
                           " prompt and generated tokens");
    return;
  }
  record.ttft_s = record.latency_s = seconds_between(start, end);
  record.success = true;
}

// One streamed completion; fills its record.
void send_request(const ServingBenchmarkOptions& o, const std::string& model,
                  const std::vector<int32_t>& prompt, int32_t max_tokens, RequestRecord& record) {
  record.prompt_tokens = static_cast<int32_t>(prompt.size());
  json body = {{"model", model},
               {"prompt", prompt},
               {"max_tokens", max_tokens},
               {"temperature", o.temperature},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (o.top_p < 1.0) body["top_p"] = o.top_p;
  if (o.top_k > 0) body["top_k"] = o.top_k;
  if (o.logprobs >= 0) body["logprobs"] = o.logprobs;
  if (o.repetition_penalty != 1.0) body["repetition_penalty"] = o.repetition_penalty;
  if (o.echo) {
    body["echo"] = true;
    body["stream"] = false;
    body.erase("stream_options");
    send_echo_request(o, body, record);
    return;
  }
  httplib::Client client(o.host, o.port);
  client.set_read_timeout(3600, 0);
  std::string buffer;
  size_t logprob_entries = 0;  // streamed tokens' logprobs
  bool first = true;
  Clock::time_point last;
  const Clock::time_point start = Clock::now();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    buffer.append(data, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      const json chunk = json::parse(payload, nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("choices") && !chunk["choices"].empty()) {
        const json logprobs = chunk["choices"][0].value("logprobs", json());
        if (logprobs.is_object() && logprobs.contains("token_logprobs"))
          logprob_entries += logprobs["token_logprobs"].size();
        if (first) {
          record.ttft_s = seconds_between(start, now);
          first = false;
        } else {
          record.itl_s.push_back(seconds_between(last, now));
        }
        last = now;
      } else if (chunk.contains("usage") && chunk["usage"].is_object()) {
        record.output_tokens = chunk["usage"].value("completion_tokens", 0);
      } else if (chunk.contains("message")) {
        record.error = chunk["message"].get<std::string>();
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!client.send(req, res, error)) {
    record.error = str_cat("request failed: ", httplib::to_string(error));
    return;
  }
  if (res.status != 200) {
    record.error = str_cat("HTTP ", res.status, ": ", res.body);
    return;
  }
  record.latency_s = first ? seconds_between(start, Clock::now()) : seconds_between(start, last);
  if (o.logprobs >= 0 && record.error.empty() &&
      logprob_entries != static_cast<size_t>(record.output_tokens)) {
    record.error = str_cat("the stream held ", logprob_entries, " logprobs for ",
                           record.output_tokens, " generated tokens");
  }
  record.success = record.error.empty() && !first;
}

}  // namespace

ServingBenchmarkResult run_serving_benchmark(const ServingBenchmarkOptions& o) {
  QUENCH_REQUIRE(o.num_prompts >= 1, "num_prompts ", o.num_prompts, " must be >= 1");
  QUENCH_REQUIRE(o.input_len >= 1 && o.output_len >= 1, "input and output lengths must be >= 1");
  QUENCH_REQUIRE(o.range_ratio >= 0.0 && o.range_ratio < 1.0, "range_ratio ", o.range_ratio,
                 " must be in [0, 1)");
  QUENCH_REQUIRE(o.request_rate > 0.0, "request_rate ", o.request_rate,
                 " must be > 0 (inf = all at once)");
  ServingBenchmarkResult result;
  httplib::Client probe(o.host, o.port);
  auto models = probe.Get("/v1/models");
  QUENCH_REQUIRE(models && models->status == 200, "cannot reach http://", o.host, ":", o.port,
                 "/v1/models (is the server up?)");
  const json listed = json::parse(models->body);
  result.model = o.model.empty() ? listed["data"][0]["id"].get<std::string>() : o.model;
  int32_t vocab = o.vocab_size;
  if (vocab == 0) vocab = listed["data"][0].value("vocab_size", 32000);

  // The dataset: ids from the upper part of the vocabulary (clear of special tokens at its start).
  std::mt19937_64 rng(o.seed);
  const int32_t first_id = std::min(vocab - 1, std::max(16, vocab / 16));
  std::uniform_int_distribution<int32_t> token(first_id, vocab - 1);
  auto length = [&](int32_t mean) {
    const auto lo = static_cast<int32_t>(std::floor(mean * (1.0 - o.range_ratio)));
    const auto hi = static_cast<int32_t>(std::ceil(mean * (1.0 + o.range_ratio)));
    return std::max(1, std::uniform_int_distribution<int32_t>(lo, hi)(rng));
  };
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.num_prompts));
  std::vector<int32_t> output_lens(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i].resize(static_cast<size_t>(length(o.input_len)));
    for (int32_t& t : prompts[i])
      t = token(rng);
    output_lens[i] = length(o.output_len);
  }

  result.records.resize(prompts.size());
  std::counting_semaphore<> slots(o.max_concurrency > 0 ? o.max_concurrency : o.num_prompts);
  std::exponential_distribution<double> gap(std::isinf(o.request_rate) ? 1.0 : o.request_rate);
  std::vector<std::thread> clients;
  const Clock::time_point start = Clock::now();
  Clock::time_point next = start;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!std::isinf(o.request_rate)) {
      next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
      std::this_thread::sleep_until(next);
    }
    slots.acquire();
    clients.emplace_back([&, i] {
      send_request(o, result.model, prompts[i], output_lens[i], result.records[i]);
      slots.release();
    });
  }
  for (auto& c : clients)
    c.join();
  result.summary = summarize(result.records, seconds_between(start, Clock::now()));
  return result;
}

}  // namespace quench
