// The serving benchmark's figures, with vLLM's definitions (benchmarks/benchmark_serving.py), so
// that numbers from quench and from vLLM compare directly:
//   TTFT  time from sending the request to the first streamed chunk with output;
//   ITL   every gap between consecutive output chunks of a request;
//   TPOT  (latency - TTFT) / (output tokens - 1), per request with more than one output token;
//   E2EL  time from sending to the last chunk;
//   throughputs over the benchmark's wall time; percentiles by linear interpolation (numpy's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quench {

struct RequestRecord {
  bool success = false;
  std::string error;
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;  // the server's usage count
  double ttft_s = 0.0;
  double latency_s = 0.0;
  std::vector<double> itl_s;  // gaps between output chunks
};

struct LatencyStats {
  double mean_ms = 0.0, median_ms = 0.0, p99_ms = 0.0;
};

struct ServingSummary {
  int32_t completed = 0;
  int32_t failed = 0;
  double duration_s = 0.0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0.0;      // completed requests / s
  double output_throughput = 0.0;       // output tokens / s
  double total_token_throughput = 0.0;  // (input + output) tokens / s
  LatencyStats ttft, tpot, itl, e2el;
};

// The q-th percentile (0..100) of `values`, linearly interpolated; 0 for an empty list.
double percentile(std::vector<double> values, double q);

ServingSummary summarize(const std::vector<RequestRecord>& records, double duration_s);

// vLLM's "Serving Benchmark Result" block.
std::string format_serving_summary(const ServingSummary& s);

}  // namespace quench
