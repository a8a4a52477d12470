#include "quench/layer/layer_accuracy.h"

#include <cmath>
#include <cstdio>

#include "quench/core/error.h"

namespace quench {

OutputError compare_outputs(const std::vector<float>& a, const std::vector<float>& b) {
  QUENCH_REQUIRE(a.size() == b.size(), "outputs of ", a.size(), " and ", b.size(),
                 " elements cannot be compared");
  OutputError e;
  double diff2 = 0.0;
  double base2 = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) {
      if (e.non_finite++ == 0) e.first_non_finite = static_cast<int64_t>(i);
      continue;
    }
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    diff2 += d * d;
    base2 += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  e.rel_l2 = base2 > 0.0 ? std::sqrt(diff2 / base2) : std::sqrt(diff2);
  return e;
}

std::string describe_output_error(const OutputError& e) {
  char text[128];
  std::snprintf(text, sizeof(text), "max abs %.2e  rel L2 %.2e", e.max_abs, e.rel_l2);
  std::string s = text;
  if (e.non_finite > 0) {
    s += str_cat("  NON-FINITE: ", e.non_finite, " elements, first at ", e.first_non_finite);
  }
  return s;
}

}  // namespace quench
