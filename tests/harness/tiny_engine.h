// The engine tests' common ground: the built-in tiny model written to a scratch directory, engine
// options small enough for preemption and chunking to happen, and greedy sampling that runs to
// max_tokens.
#pragma once

#include <string>

#include "harness/scratch_dir.h"
#include "quench/engine/llm_engine.h"
#include "quench/model/tiny_model.h"

namespace quench::testing_support {

inline std::string tiny_model_dir(const std::string& prefix, const std::string& name) {
  const std::string dir = scratch_dir(prefix, name);
  write_tiny_model(dir, TinyModelSpec{});
  return dir;
}

// max_model_len 256, 8 sequences, 64 query rows a step.
inline EngineOptions tiny_engine_options(const std::string& dir) {
  EngineOptions o;
  o.model_dir = dir;
  o.max_model_len = 256;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  return o;
}

inline SamplingParams greedy(int32_t max_tokens) {
  SamplingParams s;
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  return s;
}

}  // namespace quench::testing_support
