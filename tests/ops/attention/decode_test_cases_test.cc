// The decode GPU test grid can fail: for every case, SPEC's decode tolerance around the CPU
// reference's output excludes zero for enough of its elements that a kernel writing zeros, or
// dropping part of V, is caught. N(0, 1) values averaged over thousands of keys shrink like
// 1 / sqrt(keys) below the absolute tolerance (0.06 for bf16 q over FP8 KV): the long-context
// cases therefore draw larger queries (peaked_q_magnitude), whose peaked softmax keeps outputs
// of order one. Runs on the CPU: the GPU suite cannot check its own power to fail.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/decode_test_cases.h"

namespace quench::testing_support {
namespace {

// Outputs a zeroed output gets wrong at the case's tolerance, as a fraction of all outputs.
double zero_output_failure_fraction(const AttentionProblem& problem, Tolerance tolerance) {
  const std::vector<float> expected = problem.expected_values();
  int64_t failing = 0;
  for (float e : expected) {
    if (std::fabs(e) > tolerance.atol + tolerance.rtol * std::fabs(e)) ++failing;
  }
  return expected.empty() ? 0.0
                          : static_cast<double>(failing) / static_cast<double>(expected.size());
}

// The least share of a case's outputs that must lie outside the tolerance around zero. Every
// case of the grid has 31% or more (the 128k-token case; the others 36% or more); the long
// cases had none before they drew larger queries.
constexpr double kMinZeroOutputFailures = 0.25;

TEST(DecodeTestCases, ZeroOutputFailsEveryCase) {
  for (const DecodeCase& c : decode_grid_cases()) {
    AttentionProblem problem(c.config);
    problem.compute_reference();
    const Tolerance tolerance =
        attention_tolerance(true, c.config.q_dtype, c.config.kv_dtype, c.config.out_dtype);
    EXPECT_GE(zero_output_failure_fraction(problem, tolerance), kMinZeroOutputFailures)
        << c.name << ": too few outputs lie outside the tolerance around zero for the case to "
        << "catch a kernel that writes zeros or drops part of V";
  }
}

}  // namespace
}  // namespace quench::testing_support
