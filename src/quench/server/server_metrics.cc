#include "quench/server/server_metrics.h"

#include <sstream>

namespace quench {

LatencyHistogram::LatencyHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void LatencyHistogram::observe(double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  size_t bucket = 0;
  while (bucket < bounds_.size() && seconds > bounds_[bucket])
    ++bucket;
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

std::string LatencyHistogram::format(const std::string& name, const std::string& help,
                                     const std::string& labels) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{" << labels << ",le=\"";
    if (i < bounds_.size()) {
      out << bounds_[i];
    } else {
      out << "+Inf";
    }
    out << "\"} " << cumulative << "\n";
  }
  out << name << "_sum{" << labels << "} " << sum_ << "\n"
      << name << "_count{" << labels << "} " << count_ << "\n";
  return out.str();
}

ServerMetrics::ServerMetrics()
    : time_to_first_token({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                           2.5, 5.0, 7.5, 10.0}),
      e2e_latency(
          {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0}) {}

std::string ServerMetrics::format(const std::string& model_name,
                                  const AsyncEngineCounters& c) const {
  const std::string labels = "model_name=\"" + model_name + "\"";
  std::ostringstream out;
  auto sample = [&](const char* name, const char* type, const char* help, auto value,
                    const std::string& extra = "") {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << "{" << labels << extra << "} " << value << "\n";
  };
  sample("quench:num_requests_running", "gauge", "Requests in the running batch.",
         c.running.load());
  sample("quench:num_requests_waiting", "gauge", "Requests waiting to be scheduled.",
         c.waiting.load());
  sample("quench:kv_cache_usage_perc", "gauge", "Share of KV cache pages in use (0 to 1).",
         c.kv_cache_usage.load());
  sample("quench:num_preemptions_total", "counter", "Preemptions (sequences recomputed later).",
         c.preemptions.load());
  sample("quench:prompt_tokens_total", "counter", "Prompt tokens admitted.",
         c.prompt_tokens.load());
  sample("quench:prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.", c.prefix_query_tokens.load());
  sample("quench:prefix_cache_hits_total", "counter",
         "Prompt tokens whose KV the prefix cache supplied.", c.prefix_hit_tokens.load());
  sample("quench:generation_tokens_total", "counter", "Tokens generated.",
         c.generation_tokens.load());
  sample("quench:spec_decode_num_draft_tokens_total", "counter",
         "Speculative (n-gram) draft tokens verified.", c.spec_draft_tokens.load());
  sample("quench:spec_decode_num_accepted_tokens_total", "counter",
         "Speculative draft tokens accepted.", c.spec_accepted_tokens.load());
  out << "# HELP quench:request_success_total Finished requests by finish reason.\n"
      << "# TYPE quench:request_success_total counter\n"
      << "quench:request_success_total{" << labels << ",finished_reason=\"stop\"} "
      << c.finished_stop.load() << "\n"
      << "quench:request_success_total{" << labels << ",finished_reason=\"length\"} "
      << c.finished_length.load() << "\n";
  sample("quench:request_aborted_total", "counter",
         "Requests dropped because the client went away.", c.aborted.load());
  // Engine steps by kind: how many, how long they took, and how much of it the model runner and
  // the GPU stream took (seconds - runner seconds is the host's own work; 0 GPU seconds on the
  // CPU).
  using Steps = AsyncEngineCounters::StepTimes;
  const auto by_kind = [&](const char* name, const char* help, auto value) {
    out << "# HELP " << name << " " << help << " By kind: decode-only, or with prefill rows.\n"
        << "# TYPE " << name << " counter\n";
    for (const auto& [kind, t] :
         {std::pair{"decode", &c.decode_steps}, std::pair{"prefill", &c.prefill_steps}})
      out << name << "{" << labels << ",kind=\"" << kind << "\"} " << value(*t) << "\n";
  };
  by_kind("quench:engine_steps_total", "Engine steps.",
          [](const Steps& t) { return static_cast<double>(t.steps.load()); });
  by_kind("quench:engine_step_seconds_total", "Engine step wall time.",
          [](const Steps& t) { return t.seconds.load(); });
  by_kind("quench:engine_step_runner_seconds_total", "Engine step time inside the model runner.",
          [](const Steps& t) { return t.runner_seconds.load(); });
  by_kind("quench:engine_step_device_seconds_total", "Engine step time on the GPU stream.",
          [](const Steps& t) { return t.device_seconds.load(); });
  out << time_to_first_token.format("quench:time_to_first_token_seconds", "Time to first token.",
                                    labels);
  out << e2e_latency.format("quench:e2e_request_latency_seconds",
                            "Request latency from arrival to the last token.", labels);
  return out.str();
}

}  // namespace quench
