#include "quench/benchmark/serving_metrics.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace quench {
namespace {

LatencyStats stats_ms(const std::vector<double>& seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  s.mean_ms = 1000.0 * std::accumulate(seconds.begin(), seconds.end(), 0.0) /
              static_cast<double>(seconds.size());
  s.median_ms = 1000.0 * percentile(seconds, 50.0);
  s.p99_ms = 1000.0 * percentile(seconds, 99.0);
  return s;
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

ServingSummary summarize(const std::vector<RequestRecord>& records, double duration_s) {
  ServingSummary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.total_input_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.latency_s);
    if (r.output_tokens > 1) tpot.push_back((r.latency_s - r.ttft_s) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  if (duration_s > 0.0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = static_cast<double>(s.total_output_tokens) / duration_s;
    s.total_token_throughput =
        static_cast<double>(s.total_input_tokens + s.total_output_tokens) / duration_s;
  }
  s.ttft = stats_ms(ttft);
  s.tpot = stats_ms(tpot);
  s.itl = stats_ms(itl);
  s.e2el = stats_ms(e2el);
  return s;
}

std::string format_serving_summary(const ServingSummary& s) {
  std::string out;
  char line[128];
  auto row = [&](const char* name, double value, bool integer = false) {
    if (integer) {
      std::snprintf(line, sizeof line, "%-40s %-10.0f\n", name, value);
    } else {
      std::snprintf(line, sizeof line, "%-40s %-10.2f\n", name, value);
    }
    out += line;
  };
  auto header = [&](const char* title, char fill) {
    std::string t = std::string(title);
    const size_t total = 50;
    const size_t left = (total - t.size()) / 2;
    out += std::string(left, fill) + t + std::string(total - left - t.size(), fill) + "\n";
  };
  header(" Serving Benchmark Result ", '=');
  row("Successful requests:", s.completed, true);
  if (s.failed > 0) row("Failed requests:", s.failed, true);
  row("Benchmark duration (s):", s.duration_s);
  row("Total input tokens:", static_cast<double>(s.total_input_tokens), true);
  row("Total generated tokens:", static_cast<double>(s.total_output_tokens), true);
  row("Request throughput (req/s):", s.request_throughput);
  row("Output token throughput (tok/s):", s.output_throughput);
  row("Total Token throughput (tok/s):", s.total_token_throughput);
  auto block = [&](const char* title, const char* abbrev, const LatencyStats& l) {
    header(title, '-');
    row(("Mean " + std::string(abbrev) + " (ms):").c_str(), l.mean_ms);
    row(("Median " + std::string(abbrev) + " (ms):").c_str(), l.median_ms);
    row(("P99 " + std::string(abbrev) + " (ms):").c_str(), l.p99_ms);
  };
  block("Time to First Token", "TTFT", s.ttft);
  block("Time per Output Token (excl. 1st token)", "TPOT", s.tpot);
  block("Inter-token Latency", "ITL", s.itl);
  block("End-to-end Latency", "E2EL", s.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

}  // namespace quench
