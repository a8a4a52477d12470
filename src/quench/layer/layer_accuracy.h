// Error of one attention output against another, as `quench layer` reports it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace quench {

struct OutputError {
  double max_abs = 0.0;
  double rel_l2 = 0.0;     // ||a - b||_2 / ||b||_2
  int64_t non_finite = 0;  // elements of `a` that are NaN or infinite
  int64_t first_non_finite = -1;
};

// a and b have the same size; b is the baseline.
OutputError compare_outputs(const std::vector<float>& a, const std::vector<float>& b);

// "max abs 1.2e-02  rel L2 3.4e-03" (plus the non-finite count when there is one).
std::string describe_output_error(const OutputError& e);

}  // namespace quench
