#include "quench/server/async_engine.h"

#include "quench/core/error.h"
#include "quench/core/log.h"

namespace quench {

bool RequestStream::wait(std::vector<int32_t>& tokens, std::chrono::milliseconds timeout,
                         std::vector<TokenLogprobs>* logprobs) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !pending_.empty() || finished_; });
  tokens.insert(tokens.end(), pending_.begin(), pending_.end());
  if (logprobs != nullptr)
    logprobs->insert(logprobs->end(), pending_logprobs_.begin(), pending_logprobs_.end());
  const bool had = !pending_.empty();
  pending_.clear();
  pending_logprobs_.clear();
  return !(finished_ && !had);
}

bool RequestStream::finished() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

FinishReason RequestStream::finish_reason() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

void RequestStream::push(int32_t token, TokenLogprobs logprobs) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(token);
    pending_logprobs_.push_back(std::move(logprobs));
  }
  ready_.notify_all();
}

void RequestStream::finish(FinishReason reason, std::string error, int64_t stop_text_offset,
                           std::vector<std::optional<TokenLogprobs>> prompt_logprobs) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_text_offset_ = stop_text_offset;
    prompt_logprobs_ = std::move(prompt_logprobs);
    finished_ = true;
    reason_ = reason;
    error_ = std::move(error);
  }
  ready_.notify_all();
}

AsyncEngine::AsyncEngine(std::unique_ptr<LlmEngine> engine, std::chrono::seconds log_interval)
    : engine_(std::move(engine)), log_interval_(log_interval) {
  thread_ = std::thread([this] { run(); });
}

AsyncEngine::~AsyncEngine() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestStream> AsyncEngine::submit(std::vector<int32_t> prompt,
                                                   const SamplingParams& params) {
  engine_->check_request(prompt, params);
  auto stream = std::make_shared<RequestStream>();
  stream->prompt_tokens_ = static_cast<int32_t>(prompt.size());
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    submitted_.push_back({std::move(prompt), {params, stream}});
  }
  work_.notify_all();
  return stream;
}

void AsyncEngine::abort(const std::shared_ptr<RequestStream>& stream) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    aborted_.push_back(stream);
  }
  work_.notify_all();
}

void AsyncEngine::log_throughput() {
  if (log_interval_.count() <= 0) return;
  const auto now = RequestStream::Clock::now();
  const double seconds = std::chrono::duration<double>(now - last_log_).count();
  if (seconds < static_cast<double>(log_interval_.count())) return;
  const int64_t prompt = counters_.prompt_tokens, generation = counters_.generation_tokens;
  log_info(str_cat(
      "Avg prompt throughput: ",
      static_cast<int64_t>(static_cast<double>(prompt - logged_prompt_tokens_) / seconds),
      " tokens/s, Avg generation throughput: ",
      static_cast<int64_t>(static_cast<double>(generation - logged_generation_tokens_) / seconds),
      " tokens/s, Running: ", counters_.running.load(),
      " reqs, Waiting: ", counters_.waiting.load(),
      " reqs, KV cache usage: ", static_cast<int>(100.0 * counters_.kv_cache_usage.load()), "%"));
  last_log_ = now;
  logged_prompt_tokens_ = prompt;
  logged_generation_tokens_ = generation;
}

void AsyncEngine::run() {
  std::unordered_map<int64_t, std::shared_ptr<RequestStream>> in_flight;
  for (;;) {
    decltype(submitted_) submitted;
    std::vector<std::shared_ptr<RequestStream>> aborted;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] {
        return stop_ || !submitted_.empty() || !aborted_.empty() || engine_->has_unfinished();
      });
      if (stop_) break;
      submitted.swap(submitted_);
      aborted.swap(aborted_);
    }
    for (auto& [prompt, rest] : submitted) {
      auto& [params, stream] = rest;
      const auto n = static_cast<int64_t>(prompt.size());
      try {
        stream->engine_id_ = engine_->add_request(std::move(prompt), params);
        in_flight[stream->engine_id_] = stream;
        counters_.prompt_tokens += n;
      } catch (const Error& e) {
        stream->finish(FinishReason::kNone, e.what());
      }
    }
    for (const auto& stream : aborted) {
      if (stream->engine_id_ >= 0 && engine_->abort_request(stream->engine_id_)) {
        in_flight.erase(stream->engine_id_);
        ++counters_.aborted;
        stream->finish(FinishReason::kNone, "aborted");
      }
    }
    if (!engine_->has_unfinished()) continue;
    try {
      std::vector<TokenEvent> tokens;
      EngineStepStats stats;
      const std::vector<RequestOutput> done = engine_->step(&stats, &tokens);
      ++counters_.steps;
      counters_.preemptions += stats.preempted;
      counters_.generation_tokens += static_cast<int64_t>(tokens.size());
      for (const TokenEvent& t : tokens) {
        const auto it = in_flight.find(t.id);
        if (it != in_flight.end()) it->second->push(t.token, t.logprobs);
      }
      for (const RequestOutput& out : done) {
        const auto it = in_flight.find(out.id);
        if (it == in_flight.end()) continue;
        (out.finish_reason == FinishReason::kStop ? counters_.finished_stop
                                                  : counters_.finished_length)++;
        it->second->finish(out.finish_reason, {}, out.stop_text_offset, out.prompt_logprobs);
        in_flight.erase(it);
      }
    } catch (const std::exception& e) {
      // A failed step must not take the server down: every request in flight ends with the error.
      log_error(str_cat("engine step failed: ", e.what()));
      for (auto& [id, stream] : in_flight) {
        engine_->abort_request(id);
        stream->finish(FinishReason::kNone, str_cat("engine step failed: ", e.what()));
      }
      in_flight.clear();
    }
    counters_.running = engine_->num_running();
    counters_.waiting = engine_->num_waiting();
    counters_.kv_cache_usage = engine_->kv_cache_usage();
    counters_.prefix_query_tokens = engine_->prefix_query_tokens();
    counters_.prefix_hit_tokens = engine_->prefix_hit_tokens();
    counters_.spec_draft_tokens = engine_->spec_drafted_tokens();
    counters_.spec_accepted_tokens = engine_->spec_accepted_tokens();
    counters_.decode_steps.set(engine_->decode_step_times());
    counters_.prefill_steps.set(engine_->prefill_step_times());
    log_throughput();
  }
  for (auto& [id, stream] : in_flight)
    stream->finish(FinishReason::kNone, "server shutting down");
  for (auto& [prompt, rest] : submitted_)
    rest.second->finish(FinishReason::kNone, "server shutting down");
}

}  // namespace quench
