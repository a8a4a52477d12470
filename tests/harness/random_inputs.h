// Seeded random inputs for tests and benchmarks. Never zeros: values are drawn so that wrong
// indexing or unwritten outputs show up as errors.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace quench::testing_support {

class RandomInputs {
 public:
  explicit RandomInputs(uint64_t seed) : engine_(seed) {}

  // n floats uniform in [lo, hi).
  std::vector<float> uniform(size_t n, float lo = -1.0f, float hi = 1.0f);
  // n floats from N(mean, stddev).
  std::vector<float> normal(size_t n, float mean = 0.0f, float stddev = 1.0f);
  int32_t uniform_int(int32_t lo, int32_t hi_inclusive);
  float uniform_float(float lo, float hi);
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace quench::testing_support
