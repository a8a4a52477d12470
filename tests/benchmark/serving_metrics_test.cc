// vLLM's serving-benchmark definitions on hand-made records: TPOT excludes the first token and
// skips one-token replies, ITL pools every gap, percentiles interpolate as numpy's, failures are
// counted and left out of every latency, and the printout carries every line.
#include "quench/benchmark/serving_metrics.h"

#include <gtest/gtest.h>

namespace quench {
namespace {

TEST(ServingMetrics, PercentilesInterpolateLinearly) {
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
  EXPECT_DOUBLE_EQ(percentile({3.0}, 99), 3.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 99), 4.96);  // numpy.percentile([1..5], 99)
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 0), 10.0);
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 100), 20.0);
}

TEST(ServingMetrics, VllmDefinitions) {
  RequestRecord a{true, "", 100, 5, 0.2, 1.0, {0.2, 0.2, 0.2, 0.2}};
  RequestRecord b{true, "", 50, 1, 0.4, 0.4, {}};  // one token: no TPOT
  RequestRecord failed{false, "HTTP 500", 70, 0, 0.0, 0.0, {}};
  const ServingSummary s = summarize({a, b, failed}, 2.0);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.total_input_tokens, 150);
  EXPECT_EQ(s.total_output_tokens, 6);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 78.0);
  EXPECT_DOUBLE_EQ(s.ttft.mean_ms, 300.0);
  EXPECT_DOUBLE_EQ(s.tpot.mean_ms, 200.0);  // (1.0 - 0.2) / 4, request a only
  EXPECT_DOUBLE_EQ(s.itl.median_ms, 200.0);
  EXPECT_DOUBLE_EQ(s.e2el.mean_ms, 700.0);
  const std::string text = format_serving_summary(s);
  for (const char* line : {"Serving Benchmark Result", "Successful requests:", "Failed requests:",
                           "Output token throughput (tok/s):", "Mean TTFT (ms):", "P99 TPOT (ms):",
                           "Median ITL (ms):", "Mean E2EL (ms):"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace quench
