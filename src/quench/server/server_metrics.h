// What /metrics reports, in Prometheus' text format with vLLM's names under a quench: prefix:
// request counts by finish reason, prompt and generation tokens, running and waiting requests,
// KV cache usage, preemptions, and histograms of time to first token and request latency.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "quench/server/async_engine.h"

namespace quench {

// A Prometheus histogram: cumulative counts per upper bound, plus sum and count.
class LatencyHistogram {
 public:
  explicit LatencyHistogram(std::vector<double> bounds);
  void observe(double seconds);
  // "# HELP/# TYPE" lines and the samples of metric `name` with label `labels`.
  std::string format(const std::string& name, const std::string& help,
                     const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative), the last is +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  LatencyHistogram time_to_first_token;
  LatencyHistogram e2e_latency;
  // The whole exposition for the served model.
  std::string format(const std::string& model_name, const AsyncEngineCounters& counters) const;
};

}  // namespace quench
