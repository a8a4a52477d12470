// The serving benchmark's client: sends a random dataset (prompts of random token ids of
// input_len tokens, max_tokens = output_len with ignore_eos, greedy) to an OpenAI-compatible
// /v1/completions endpoint with streaming, at a Poisson request rate (or all at once) and under
// an optional concurrency cap, and records each request's TTFT, inter-token gaps and latency
// (serving_metrics.h). Works against quench serve and against vLLM alike.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "quench/benchmark/serving_metrics.h"

namespace quench {

struct ServingBenchmarkOptions {
  std::string host = "127.0.0.1";
  int32_t port = 8000;
  std::string model;  // empty: the first model /v1/models lists
  int32_t num_prompts = 100;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0.0;  // lengths drawn uniformly from [len * (1 - r), len * (1 + r)]
  double request_rate = std::numeric_limits<double>::infinity();  // requests / s (Poisson)
  int32_t max_concurrency = 0;                                    // 0 = no cap
  int32_t vocab_size = 0;  // 0: /v1/models' vocab_size (quench reports it), else 32000
  uint64_t seed = 0;
  // Sampling of every request (greedy by default, as vLLM's benchmark sends it); top_p 1 and
  // top_k 0 are not sent.
  double temperature = 0.0;
  double top_p = 1.0;
  int32_t top_k = 0;
  // >= 0: every request asks for its tokens' logprobs with this many top entries (checked in the
  // answers). echo (with logprobs): the prompt's tokens' logprobs too, as loglikelihood
  // evaluations ask; such requests cannot stream, so their TTFT is the whole request.
  int32_t logprobs = -1;
  bool echo = false;
  // Not 1: every request asks for this repetition penalty (a logit adjustment; not sent at 1).
  double repetition_penalty = 1.0;
};

struct ServingBenchmarkResult {
  std::string model;
  std::vector<RequestRecord> records;
  ServingSummary summary;
};

// Throws quench::Error when the server cannot be reached or options are out of range.
ServingBenchmarkResult run_serving_benchmark(const ServingBenchmarkOptions& options);

}  // namespace quench
