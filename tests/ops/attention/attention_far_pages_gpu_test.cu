// Attention kernels over a KV cache whose pages lie past 4 GiB. Every other GPU test's cache is a
// few MiB, while a serving engine's K (or V) cache of one layer on a 141 GB GPU is often several
// GiB: a page offset computed in 32 bits anywhere (page * page_bytes in int, a wrapped TMA
// coordinate) would pass them all and read the wrong page in production. Here the same problem
// runs at page 0 and at page first_page of a pool whose first 4 GiB hold NaN
// (AttentionDeviceProblem's first_page): the outputs and LSE must be the same bytes, and the run
// at page 0 must match the CPU reference. Each path that indexes the cache its own way runs:
// decode's TMA loops (swapped and row-major) and its cp.async loop (head_dim 256), the generic
// prefill kernel, and the Hopper prefill kernel of every operand kind, per tile and persistent.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "decode_test_support.h"
#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/decode_test_cases.h"
#include "harness/device_buffer.h"
#include "prefill_test_support.h"
#include "quench/ops/attention/decode/decode_attention.h"
#include "quench/ops/attention/prefill/generic/prefill_attention_generic.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench::testing_support {
namespace {

using AttentionRun = std::function<void(const AttentionParams&)>;

// Bytes of one page of one cache tensor.
int64_t page_bytes(const KvCacheLayout& kv) {
  return kv.tensor_bytes() / kv.num_pages;
}

// Where two downloads of the same buffer first differ, or "" when they are the same bytes.
template <typename T>
std::string first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return str_cat("sizes ", a.size(), " and ", b.size());
  const auto* x = reinterpret_cast<const uint8_t*>(a.data());
  const auto* y = reinterpret_cast<const uint8_t*>(b.data());
  const size_t bytes = a.size() * sizeof(T);
  for (size_t i = 0; i < bytes; ++i) {
    if (x[i] != y[i]) {
      int64_t differing = 0;
      for (size_t j = i; j < bytes; ++j)
        differing += x[j] != y[j] ? 1 : 0;
      return str_cat("byte ", i, " (element ", i / sizeof(T), ") first, ", differing, " of ", bytes,
                     " bytes differ");
    }
  }
  return "";
}

// Runs `run` on the problem of `config` at page 0 (checked against the reference at `tolerance`)
// and past 4 GiB (the same bytes expected).
void expect_same_output_past_4gib(const AttentionProblemConfig& config, const AttentionRun& run,
                                  Tolerance tolerance) {
  SCOPED_TRACE(describe(config));
  AttentionProblem problem(config);
  problem.compute_reference();

  AttentionDeviceProblem near(problem);
  run(near.params());
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const CompareResult out = near.compare_output(tolerance);
  ASSERT_TRUE(out.ok) << "at page 0, vs the reference: " << out.summary();

  // The first page whose byte offset in either cache tensor is past 2^32.
  const KvCacheLayout& kv = problem.kv_layout();
  const int32_t first_page = static_cast<int32_t>((int64_t{1} << 32) / page_bytes(kv) + 1);
  const int64_t pool_bytes = 2 * page_bytes(kv) * (first_page + kv.num_pages);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  QUENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (static_cast<int64_t>(free_bytes) < pool_bytes + (int64_t{1} << 30)) {
    GTEST_SKIP() << "needs " << pool_bytes << " bytes of device memory for the K and V pools, "
                 << free_bytes << " free";
  }
  AttentionDeviceProblem far(problem, first_page);
  run(far.params());
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::string at =
      str_cat(" (pages from ", first_page, ", byte ", first_page * page_bytes(kv), ")");
  EXPECT_EQ(first_difference(far.download_out(), near.download_out()), "") << "output" << at;
  EXPECT_EQ(first_difference(far.download_lse(), near.download_lse()), "") << "lse" << at;
}

void run_decode(const AttentionParams& params) {
  const DeviceBuffer workspace = zeroed_decode_workspace(params);
  decode_attention(params, workspace.get(), workspace.bytes(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());  // before the workspace is freed
}

struct DecodePath {
  DType kv;
  int32_t group;
  int32_t head_dim;
  int32_t page_size;
  KvLayout layout;
  const char* what;
};

// Long and short requests and a graph-padding one, so that the launcher splits the long ones.
TEST(AttentionFarPagesGpu, DecodeReadsPagesPast4GiB) {
  const DecodePath paths[] = {
      {DType::kFP8E4M3, 4, 128, 16, KvLayout::kNHD, "TMA, swapped loop"},
      {DType::kBF16, 16, 128, 64, KvLayout::kHND, "TMA, row-major loop"},
      {DType::kFP8E5M2, 8, 64, 32, KvLayout::kHND, "TMA, head_dim 64"},
      {DType::kFP8E4M3, 4, 256, 32, KvLayout::kNHD, "cp.async, head_dim 256"},
  };
  uint64_t seed = 4100;
  for (const DecodePath& path : paths) {
    SCOPED_TRACE(path.what);
    AttentionProblemConfig c = decode_grid_config(path.kv, DType::kBF16, path.group, path.head_dim,
                                                  path.page_size, path.layout, seed++);
    c.seqs = {{1, 3000}, {0, 0}, {1, 77}, {1, 1200}};
    c.q_magnitude = peaked_q_magnitude(3000);
    expect_same_output_past_4gib(c, run_decode,
                                 attention_tolerance(true, c.q_dtype, c.kv_dtype, c.out_dtype));
  }
}

TEST(AttentionFarPagesGpu, GenericPrefillReadsPagesPast4GiB) {
  uint64_t seed = 4200;
  for (const DType kv : {DType::kFP8E4M3, DType::kBF16}) {
    for (const KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
      AttentionProblemConfig c = base_config({DType::kBF16, kv, DType::kBF16}, 128, seed++);
      c.page_size = layout == KvLayout::kNHD ? 16 : 64;
      c.layout = layout;
      c.seqs = {{200, 700}, {64, 64}};
      expect_same_output_past_4gib(
          c, [](const AttentionParams& p) { prefill_attention_generic(p, nullptr); },
          attention_tolerance(false, c.q_dtype, c.kv_dtype, c.out_dtype));
    }
  }
}

// Every operand kind per tile and persistent (their producers walk the pages apart), in both
// layouts; head_dim 64 and 256 (other TMA boxes) for bf16.
TEST(AttentionFarPagesGpu, HopperPrefillReadsPagesPast4GiB) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 4300;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const HopperSchedule schedule : {HopperSchedule::kPerTile, HopperSchedule::kPersistent}) {
      for (const KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
        AttentionProblemConfig c = base_config(kind.dtypes, 128, seed++);
        c.page_size = layout == KvLayout::kNHD ? 16 : 64;
        c.layout = layout;
        c.seqs = {{300, 1200}, {128, 128}};
        const HopperPvPrecision pv =
            is_fp8_pv(kind) ? HopperPvPrecision::kFp8 : HopperPvPrecision::kBf16;
        SCOPED_TRACE(str_cat(kind.name,
                             schedule == HopperSchedule::kPerTile ? ", per tile" : ", persistent"));
        expect_same_output_past_4gib(
            c,
            [&](const AttentionParams& p) { prefill_attention_hopper(p, nullptr, pv, schedule); },
            attention_tolerance(false, c.q_dtype, c.kv_dtype, c.out_dtype));
      }
    }
  }
  for (const int head_dim : {64, 256}) {
    AttentionProblemConfig c =
        base_config({DType::kBF16, DType::kBF16, DType::kBF16}, head_dim, seed++);
    c.seqs = {{300, 1200}, {128, 128}};
    SCOPED_TRACE(str_cat("bf16, head_dim ", head_dim));
    expect_same_output_past_4gib(
        c, [](const AttentionParams& p) { prefill_attention_hopper(p, nullptr); },
        attention_tolerance(false, c.q_dtype, c.kv_dtype, c.out_dtype));
  }
}

}  // namespace
}  // namespace quench::testing_support
