// The engine on a thread of its own, for a server: HTTP threads submit requests and read their
// tokens as they are sampled; the engine thread runs step after step while work is in flight and
// sleeps when none is. LlmEngine itself is single-threaded; this is the only place that touches
// it after construction.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "quench/engine/llm_engine.h"

namespace quench {

// One request's tokens as they arrive, and how it ended.
class RequestStream {
 public:
  using Clock = std::chrono::steady_clock;

  // Waits until new tokens or the end arrive (or `timeout` passes); moves new tokens into
  // `tokens`. Returns false once the request has ended and everything was read.
  bool wait(std::vector<int32_t>& tokens, std::chrono::milliseconds timeout,
            std::vector<TokenLogprobs>* logprobs = nullptr);
  bool finished() const;
  FinishReason finish_reason() const;
  const std::string& error() const { return error_; }  // set when the engine failed the request
  // Where a matched stop string starts in the output text (RequestOutput), -1 for none.
  int64_t stop_text_offset() const { return stop_text_offset_; }
  // The prompt tokens' logprobs when asked for (SamplingParams::prompt_logprobs), once finished.
  const std::vector<std::optional<TokenLogprobs>>& prompt_logprobs() const {
    return prompt_logprobs_;
  }
  int32_t prompt_tokens() const { return prompt_tokens_; }
  Clock::time_point arrival() const { return arrival_; }

 private:
  friend class AsyncEngine;
  void push(int32_t token, TokenLogprobs logprobs);
  void finish(FinishReason reason, std::string error = {}, int64_t stop_text_offset = -1,
              std::vector<std::optional<TokenLogprobs>> prompt_logprobs = {});

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int32_t> pending_;
  std::vector<TokenLogprobs> pending_logprobs_;  // beside pending_ when the request asked
  bool finished_ = false;
  FinishReason reason_ = FinishReason::kNone;
  std::string error_;
  int64_t stop_text_offset_ = -1;
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs_;
  int64_t engine_id_ = -1;
  int32_t prompt_tokens_ = 0;
  Clock::time_point arrival_ = Clock::now();
};

// Counts the server reports on /metrics, updated by the engine thread.
struct AsyncEngineCounters {
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> generation_tokens{0};
  std::atomic<int64_t> finished_stop{0};
  std::atomic<int64_t> finished_length{0};
  std::atomic<int64_t> aborted{0};
  std::atomic<int64_t> preemptions{0};
  std::atomic<int32_t> running{0};
  std::atomic<int32_t> waiting{0};
  std::atomic<int64_t> steps{0};
  std::atomic<double> kv_cache_usage{0.0};
  std::atomic<int64_t> prefix_query_tokens{0};
  std::atomic<int64_t> prefix_hit_tokens{0};
  std::atomic<int64_t> spec_draft_tokens{0};     // n-gram drafts verified
  std::atomic<int64_t> spec_accepted_tokens{0};  // and accepted
  // Engine steps by kind ("decode": decode-only, "prefill": with prefill rows) and their time
  // (StepTimeTotals): the whole step, inside the model runner, and the GPU stream's share.
  struct StepTimes {
    std::atomic<int64_t> steps{0};
    std::atomic<double> seconds{0.0};
    std::atomic<double> runner_seconds{0.0};
    std::atomic<double> device_seconds{0.0};
    void set(const StepTimeTotals& t) {
      steps = t.steps;
      seconds = t.wall_ms / 1000.0;
      runner_seconds = t.forward_ms / 1000.0;
      device_seconds = t.device_ms / 1000.0;
    }
  };
  StepTimes decode_steps, prefill_steps;
};

class AsyncEngine {
 public:
  // Every `log_interval` with work in flight, one INFO line with the prompt and generation
  // throughput since the last line, the running and waiting requests and the KV cache usage
  // (0 = never).
  explicit AsyncEngine(std::unique_ptr<LlmEngine> engine,
                       std::chrono::seconds log_interval = std::chrono::seconds(10));
  ~AsyncEngine();  // stops the thread; requests still in flight end with an error
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Checks the request (throws quench::Error naming the problem, see LlmEngine::check_request)
  // and queues it.
  std::shared_ptr<RequestStream> submit(std::vector<int32_t> prompt, const SamplingParams& params);
  // The client went away: the request is dropped at the next step boundary.
  void abort(const std::shared_ptr<RequestStream>& stream);

  const LlmEngine& engine() const { return *engine_; }  // configuration only from other threads
  const AsyncEngineCounters& counters() const { return counters_; }

 private:
  void run();

  void log_throughput();

  std::unique_ptr<LlmEngine> engine_;
  std::chrono::seconds log_interval_;
  RequestStream::Clock::time_point last_log_ = RequestStream::Clock::now();
  int64_t logged_prompt_tokens_ = 0;
  int64_t logged_generation_tokens_ = 0;
  AsyncEngineCounters counters_;
  std::mutex mutex_;
  std::condition_variable work_;
  bool stop_ = false;
  std::deque<
      std::pair<std::vector<int32_t>, std::pair<SamplingParams, std::shared_ptr<RequestStream>>>>
      submitted_;
  std::vector<std::shared_ptr<RequestStream>> aborted_;
  std::thread thread_;
};

}  // namespace quench
