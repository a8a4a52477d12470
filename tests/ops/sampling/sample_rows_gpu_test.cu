// The GPU draw against sample_row_reference, token for token: random rows of 1 to 151936 logits
// (some rounded to bf16's 8 bits, so that top-k and nucleus cutoffs fall inside runs of equal
// logits), every mix of temperature, top-k, top-p and min_p, rows that repeat a logits row, and
// rows with a NaN or an infinity. The ctest entry gpu_tests_sampling_block runs it again with the
// cutoffs in one CTA per row (QUENCH_SAMPLING_CUTOFFS=block; the default spreads each row's).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/ops/sampling/sample_rows.h"
#include "quench/ops/sampling/sample_rows_reference.h"

namespace quench {
namespace {

float round_to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

TEST(SampleRowsGpu, MatchesTheReferenceTokenForToken) {
  std::mt19937_64 rng(17);
  const std::vector<RowSampler> mixes = {
      {0.0f, 0, 1.0f, 0.0f},  {1.0f, 0, 1.0f, 0.0f},     {0.7f, 50, 1.0f, 0.0f},
      {1.0f, 0, 0.9f, 0.0f},  {0.8f, 0, 0.95f, 0.0f},    {1.3f, 20, 0.8f, 0.0f},
      {1.0f, 0, 1.0f, 0.05f}, {0.6f, 40, 0.7f, 0.1f},    {2.0f, 1, 1.0f, 0.0f},
      {1.0f, 0, 1e-3f, 0.0f}, {1.5f, 1000, 0.99f, 0.0f}, {0.9f, 7, 0.5f, 0.0f},
      {1e-39f, 0, 1.0f, 0.0f}};
  int compared = 0;
  for (const int32_t vocab : {1, 7, 1000, 4097, 32000, 128256, 151936}) {
    const int32_t logit_rows = 4;
    std::vector<float> logits(static_cast<size_t>(logit_rows) * vocab);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int32_t r = 0; r < logit_rows; ++r) {
      float* row = logits.data() + static_cast<size_t>(r) * vocab;
      for (int32_t i = 0; i < vocab; ++i)
        row[i] = r % 2 == 1 ? round_to_bf16(normal(rng)) : normal(rng) * 1.5f - 2.0f;
    }
    // Row 3 is broken where it is long enough to hold a NaN and an infinity elsewhere.
    if (vocab >= 1000) {
      logits[3 * static_cast<size_t>(vocab) + 17] = std::numeric_limits<float>::quiet_NaN();
    }
    std::vector<int32_t> rows;
    std::vector<RowSampler> samplers;
    for (int32_t r = 0; r < logit_rows; ++r) {
      for (RowSampler s : mixes) {
        for (int repeat = 0; repeat < 3; ++repeat) {
          s.key = rng();
          if (s.top_k >= vocab && repeat == 2) s.top_k = vocab;  // k == vocab: no cutoff
          rows.push_back(r);
          samplers.push_back(s);
        }
      }
    }
    const auto n = static_cast<int32_t>(rows.size());
    std::vector<int32_t> want(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(rows[i]) * vocab,
                                       static_cast<size_t>(vocab));
      want[i] = sample_row_reference(row, samplers[i]);
    }
    const DeviceBuffer d_logits = upload(logits);
    const DeviceBuffer d_rows = upload(rows);
    const DeviceBuffer d_samplers = upload(samplers);
    DeviceBuffer d_out(rows.size() * sizeof(int32_t));
    DeviceBuffer workspace(sample_rows_workspace_bytes(n));
    // All the draws at once (one or two stretches of the race per row), then three draws of row
    // 0 alone (each row's race spread over many CTAs) under temperature alone, top-p alone, and
    // top-k with top-p, each launch told which cutoffs its draws ask for.
    const std::vector<std::pair<size_t, int32_t>> launches = {{0, n}, {3, 3}, {9, 3}, {15, 3}};
    for (const auto& [first, draws] : launches) {
      const SampleRowsCutoffs cutoffs = sample_rows_cutoffs(
          std::span<const RowSampler>(samplers).subspan(first, static_cast<size_t>(draws)), vocab);
      sample_rows_cuda(d_logits.as<float>(), vocab, d_rows.as<int32_t>() + first,
                       d_samplers.as<RowSampler>() + first, draws, workspace.as<void>(),
                       d_out.as<int32_t>(), nullptr, cutoffs);
      std::vector<int32_t> got(static_cast<size_t>(draws));
      check_cuda(cudaMemcpy(got.data(), d_out.as<void>(), got.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost),
                 "download");
      for (size_t j = 0; j < got.size(); ++j) {
        const size_t i = first + j;
        const RowSampler& s = samplers[i];
        EXPECT_EQ(got[j], want[i]) << "vocab " << vocab << " draws " << draws << " row " << rows[i]
                                   << " T " << s.temperature << " top_k " << s.top_k << " top_p "
                                   << s.top_p << " min_p " << s.min_p;
        if (rows[i] == 3 && vocab >= 1000) EXPECT_EQ(got[j], -1);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 7 * (4 * 13 * 3 + 9));
}

TEST(SampleRowsGpu, RejectsBadSizes) {
  EXPECT_THROW(sample_rows_cuda(nullptr, 0, nullptr, nullptr, 1, nullptr, nullptr, nullptr), Error);
  EXPECT_THROW(sample_rows_cuda(nullptr, 10, nullptr, nullptr, 1, nullptr, nullptr, nullptr),
               Error);
  sample_rows_cuda(nullptr, 10, nullptr, nullptr, 0, nullptr, nullptr, nullptr);  // none
}

}  // namespace
}  // namespace quench
