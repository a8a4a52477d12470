// The GPU logprobs against row_logprobs_reference, through each kernel (one CTA per row, one or
// two passes; a cluster of CTAs per row on sm_90; the launcher's own choice): random rows at
// non-unit scales and offsets (logits around 30, spread 4), rows with ties everywhere (the lower
// id must win across threads, warps and a cluster's parts), vocabularies from 1 to Qwen's 151936
// (the small ones leave parts of a cluster without columns), every top from 0 to 20 that the row
// allows, rows picked out of order, and rows with a NaN or an infinity. Top ids must match exactly;
// log-probabilities within 5e-5 + 1e-6 x |value| (the device sums its exponentials in fp32, the
// reference in double: ~1e-6 relative on a 150k-term sum).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "quench/core/cluster_launch.cuh"
#include "quench/core/cuda_device.h"
#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/logprobs/row_logprobs.h"
#include "quench/ops/logprobs/row_logprobs_reference.h"

namespace quench {
namespace {

template <typename T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> host(n);
  if (n > 0)
    check_cuda(cudaMemcpy(host.data(), b.as<void>(), n * sizeof(T), cudaMemcpyDeviceToHost),
               "download");
  return host;
}

bool within_tolerance(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(static_cast<double>(got) - want) <= 5e-5 + 1e-6 * std::fabs(want);
}

// One launch over host arrays: row i reads tokens[i], or tokens[index[i]] where index is given.
struct Launched {
  std::vector<float> logprob, top_logprobs;
  std::vector<int32_t> top_ids;
};
Launched launch_row_logprobs(const std::vector<float>& logits, int32_t vocab,
                             const std::vector<int32_t>& rows, const std::vector<int32_t>& tokens,
                             const std::vector<int32_t>& index, int32_t top,
                             RowLogprobsKernel kernel) {
  const DeviceBuffer d_logits = upload(logits);
  const DeviceBuffer d_rows = upload(rows), d_tokens = upload(tokens), d_index = upload(index);
  DeviceBuffer d_logprob(std::max<size_t>(rows.size(), 1) * sizeof(float));
  const size_t top_entries = rows.size() * static_cast<size_t>(top);
  DeviceBuffer d_ids(std::max<size_t>(top_entries, 1) * sizeof(int32_t));
  DeviceBuffer d_top(std::max<size_t>(top_entries, 1) * sizeof(float));
  RowLogprobsArgs a;
  a.logits = d_logits.as<float>();
  a.vocab = vocab;
  a.rows = d_rows.as<int32_t>();
  a.tokens = d_tokens.as<int32_t>();
  a.token_index = index.empty() ? nullptr : d_index.as<int32_t>();
  a.n = static_cast<int32_t>(rows.size());
  a.top = top;
  a.logprob = d_logprob.as<float>();
  a.top_ids = d_ids.as<int32_t>();
  a.top_logprobs = d_top.as<float>();
  a.kernel = kernel;
  row_logprobs_cuda(a, nullptr);
  check_cuda(cudaDeviceSynchronize(), "row_logprobs");
  return {download<float>(d_logprob, rows.size()), download<float>(d_top, top_entries),
          download<int32_t>(d_ids, top_entries)};
}

// The kernels to test on this GPU: the cluster kernel where it runs (sm_90).
std::vector<RowLogprobsKernel> kernels_here() {
  const CudaDeviceProperties gpu = require_current_cuda_device_properties("test");
  std::vector<RowLogprobsKernel> k = {RowLogprobsKernel::kAuto, RowLogprobsKernel::kOneCtaPerRow};
  if (runs_cluster_kernels(gpu)) k.push_back(RowLogprobsKernel::kClusterPerRow);
  return k;
}

const char* kernel_name(RowLogprobsKernel k) {
  switch (k) {
    case RowLogprobsKernel::kAuto:
      return "auto";
    case RowLogprobsKernel::kOneCtaPerRow:
      return "one CTA per row";
    case RowLogprobsKernel::kClusterPerRow:
      return "cluster per row";
  }
  return "?";
}

void expect_matches_reference(const std::vector<float>& logits, int32_t vocab, int32_t num_rows,
                              const std::vector<int32_t>& rows, const std::vector<int32_t>& tokens,
                              int32_t top, const char* what, RowLogprobsKernel kernel) {
  SCOPED_TRACE(kernel_name(kernel));
  const auto n = static_cast<int32_t>(rows.size());
  const Launched got = launch_row_logprobs(logits, vocab, rows, tokens, {}, top, kernel);
  const std::vector<float>& logprob = got.logprob;
  const std::vector<int32_t>& ids = got.top_ids;
  const std::vector<float>& top_lp = got.top_logprobs;
  ASSERT_LE(*std::max_element(rows.begin(), rows.end()), num_rows - 1);
  for (int32_t i = 0; i < n; ++i) {
    const std::span<const float> row(logits.data() + static_cast<size_t>(rows[i]) * vocab,
                                     static_cast<size_t>(vocab));
    const TokenLogprobs want = row_logprobs_reference(row, tokens[i], top);
    EXPECT_TRUE(within_tolerance(logprob[i], want.logprob))
        << what << " vocab " << vocab << " top " << top << " row " << i << ": " << logprob[i]
        << " vs " << want.logprob;
    for (int32_t k = 0; k < top; ++k) {
      const size_t o = static_cast<size_t>(i) * top + k;
      if (want.top.empty()) {  // no softmax: ids -1, NaN values
        EXPECT_EQ(ids[o], -1) << what << " row " << i;
        EXPECT_TRUE(std::isnan(top_lp[o])) << what << " row " << i;
        continue;
      }
      ASSERT_EQ(ids[o], want.top[k].first)
          << what << " vocab " << vocab << " top " << top << " row " << i << " entry " << k;
      EXPECT_TRUE(within_tolerance(top_lp[o], want.top[k].second))
          << what << " vocab " << vocab << " row " << i << " entry " << k << ": " << top_lp[o]
          << " vs " << want.top[k].second;
    }
  }
}

TEST(RowLogprobsGpu, MatchesTheReference) {
  std::mt19937 rng(23);
  for (const int32_t vocab : {1, 7, 20, 513, 32000, 128256, 151936}) {
    const int32_t num_rows = 9;
    std::normal_distribution<float> logit(30.0f, 4.0f);
    std::uniform_int_distribution<int32_t> column(0, vocab - 1);
    std::vector<float> logits(static_cast<size_t>(num_rows) * vocab);
    for (int32_t r = 0; r < num_rows; ++r) {
      float* row = logits.data() + static_cast<size_t>(r) * vocab;
      for (int32_t c = 0; c < vocab; ++c)
        // Rows 0-2 in steps of 0.5: ties all over the top entries.
        row[c] = r < 3 ? std::round(logit(rng) * 2.0f) * 0.5f : logit(rng);
      if (r == 5) row[column(rng)] = std::numeric_limits<float>::quiet_NaN();
      if (r == 6) row[column(rng)] = std::numeric_limits<float>::infinity();
      if (r == 7) row[column(rng)] = -std::numeric_limits<float>::infinity();
    }
    // Rows out of order, one twice; each with its own token.
    const std::vector<int32_t> rows = {8, 0, 3, 1, 5, 2, 6, 7, 4, 0};
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < rows.size(); ++i)
      tokens.push_back(column(rng));
    for (const int32_t top : {0, 1, 5, 20}) {
      if (top > vocab) continue;
      for (const RowLogprobsKernel kernel : kernels_here())
        expect_matches_reference(logits, vocab, num_rows, rows, tokens, top, "random", kernel);
    }
  }
}

TEST(RowLogprobsGpu, OneHugeLogitAndAFlatRow) {
  // A row whose softmax is one token (the others' exponentials underflow), and a flat row (every
  // id ties: the top are ids 0..top-1, each log(1/vocab)).
  const int32_t vocab = 50000;
  std::vector<float> logits(2 * static_cast<size_t>(vocab), -3.0f);
  logits[12345] = 2000.0f;
  for (const RowLogprobsKernel kernel : kernels_here())
    expect_matches_reference(logits, vocab, 2, {0, 1}, {12345, 777}, 20, "peaked/flat", kernel);
}

// More rows than kRowLogprobsFewRows: the launcher's one pass per row (and the other kernels on
// the same rows), rows in reverse order.
TEST(RowLogprobsGpu, ManyRowsMatchTheReference) {
  const int32_t vocab = 4099, num_rows = kRowLogprobsFewRows + 9;
  std::mt19937 rng(41);
  std::normal_distribution<float> logit(-7.0f, 2.5f);
  std::vector<float> logits(static_cast<size_t>(num_rows) * vocab);
  for (float& x : logits)
    x = logit(rng);
  std::vector<int32_t> rows, tokens;
  for (int32_t r = num_rows - 1; r >= 0; --r) {
    rows.push_back(r);
    tokens.push_back((r * 131) % vocab);
  }
  for (const int32_t top : {0, 20})
    for (const RowLogprobsKernel kernel : kernels_here())
      expect_matches_reference(logits, vocab, num_rows, rows, tokens, top, "many rows", kernel);
}

// Tokens picked on the device reach the kernel through an index into a pool of ids (argmax ids,
// draws, known tokens); a -1 there (a pick over a non-finite row) gives a NaN logprob.
TEST(RowLogprobsGpu, TokensThroughAnIndex) {
  const int32_t vocab = 3000, num_rows = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> logit(-2.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(num_rows) * vocab);
  for (float& x : logits)
    x = logit(rng);
  const std::vector<int32_t> pool = {17, -1, 2999, 0, 1234};
  const std::vector<int32_t> rows = {3, 1, 0, 2}, index = {4, 0, 2, 1};
  const int32_t top = 3;
  for (const RowLogprobsKernel kernel : kernels_here()) {
    SCOPED_TRACE(kernel_name(kernel));
    const Launched got = launch_row_logprobs(logits, vocab, rows, pool, index, top, kernel);
    const std::vector<float>& logprob = got.logprob;
    const std::vector<int32_t>& ids = got.top_ids;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(rows[i]) * vocab,
                                       static_cast<size_t>(vocab));
      const int32_t token = pool[static_cast<size_t>(index[i])];
      // The top list does not depend on the token: the reference's, with any valid one.
      const TokenLogprobs want = row_logprobs_reference(row, std::max(token, 0), top);
      if (token < 0) {
        EXPECT_TRUE(std::isnan(logprob[i])) << i;
      } else {
        EXPECT_TRUE(within_tolerance(logprob[i], want.logprob)) << i;
      }
      for (int32_t k = 0; k < top; ++k)
        EXPECT_EQ(ids[i * top + static_cast<size_t>(k)], want.top[static_cast<size_t>(k)].first)
            << i << " " << k;
    }
  }
}

TEST(RowLogprobsGpu, RefusesBadArguments) {
  RowLogprobsArgs a;
  a.vocab = 10;
  a.n = 1;
  a.top = 21;
  EXPECT_THROW(row_logprobs_cuda(a, nullptr), Error);
  a.top = 11;  // more than the vocabulary
  EXPECT_THROW(row_logprobs_cuda(a, nullptr), Error);
  a.top = 1;  // null arrays
  EXPECT_THROW(row_logprobs_cuda(a, nullptr), Error);
}

// The cluster kernel pinned on a GPU without clusters is refused, not trapped.
TEST(RowLogprobsGpu, ClusterKernelOnlyOnSm90) {
  const CudaDeviceProperties gpu = require_current_cuda_device_properties("test");
  if (runs_cluster_kernels(gpu)) GTEST_SKIP() << "this GPU runs the cluster kernel";
  const std::vector<float> logits(64, 0.0f);
  EXPECT_THROW(launch_row_logprobs(logits, 64, {0}, {0}, {}, 1, RowLogprobsKernel::kClusterPerRow),
               Error);
}

}  // namespace
}  // namespace quench
