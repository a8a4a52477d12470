#include "harness/random_inputs.h"

namespace quench::testing_support {

std::vector<float> RandomInputs::uniform(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& x : out)
    x = dist(engine_);
  return out;
}

std::vector<float> RandomInputs::normal(size_t n, float mean, float stddev) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> out(n);
  for (auto& x : out)
    x = dist(engine_);
  return out;
}

int32_t RandomInputs::uniform_int(int32_t lo, int32_t hi_inclusive) {
  return std::uniform_int_distribution<int32_t>(lo, hi_inclusive)(engine_);
}

float RandomInputs::uniform_float(float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(engine_);
}

}  // namespace quench::testing_support
