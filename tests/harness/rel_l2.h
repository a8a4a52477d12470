// The relative L2 distance ||got - want|| / ||want|| that the model tests compare logits by.
#pragma once

#include <cmath>
#include <span>

namespace quench::testing_support {

template <typename Want>
double rel_l2(std::span<const float> got, std::span<const Want> want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = static_cast<double>(want[i]);
    diff += (got[i] - w) * (got[i] - w);
    norm += w * w;
  }
  return std::sqrt(diff / norm);
}

}  // namespace quench::testing_support
