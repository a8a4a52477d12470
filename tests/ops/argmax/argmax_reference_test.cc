// Greedy's choice per row: the first of equal largest values, as std::max_element; a row with a
// NaN or an infinity anywhere gives -1 (the engine reports it; it must not pick a token).
#include "quench/ops/argmax/argmax_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(ArgmaxReference, FirstOfEqualMaximaAsMaxElement) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> small(-3, 3);  // many ties
  const int32_t rows = 50, cols = 37;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v)
    x = static_cast<float>(small(rng));
  std::vector<int32_t> out(static_cast<size_t>(rows));
  argmax_rows_reference(v.data(), rows, cols, out.data());
  for (int32_t r = 0; r < rows; ++r) {
    const auto begin = v.begin() + r * cols;
    EXPECT_EQ(out[static_cast<size_t>(r)], std::max_element(begin, begin + cols) - begin) << r;
  }
}

TEST(ArgmaxReference, NonFiniteRowsGiveMinusOne) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {1, 2, 3, nan, 5, 6, 7, -inf, 9, 0, inf, 1, -5, -5, -6, -5};
  std::vector<int32_t> out(4);
  argmax_rows_reference(v.data(), 4, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, -1, 0}));
  EXPECT_QUENCH_ERROR(argmax_rows_reference(v.data(), 1, 0, out.data()), {"cols 0"});
}

}  // namespace
}  // namespace quench
