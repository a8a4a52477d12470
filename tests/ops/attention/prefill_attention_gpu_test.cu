// GPU tests of the prefill attention kernels against the CPU reference (attention_reference):
// a grid over dtypes x GQA group x head_dim x page size x layout x chunk/prefix lengths with
// non-unit scales; window, soft-cap, sinks, per-head scales, padding sequences and every output
// dtype; a long-context needle (FP8 error at most 2x the bf16 error); decode consistency.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/device_buffer.h"
#include "harness/random_inputs.h"
#include "prefill_test_support.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/prefill/generic/prefill_attention_generic.h"

namespace quench::testing_support {
namespace {

// Every query/KV/output combination the engine uses (SPEC §1.1), plus e5m2 and f16 queries.
const DtypeCase kDtypeCases[] = {
    {DType::kBF16, DType::kBF16, DType::kBF16},
    {DType::kFP8E4M3, DType::kFP8E4M3, DType::kBF16},
    {DType::kBF16, DType::kFP8E4M3, DType::kBF16},
    {DType::kFP8E4M3, DType::kFP8E4M3, DType::kFP8E4M3},
    {DType::kFP8E4M3, DType::kFP8E4M3, DType::kNVFP4},
    {DType::kF16, DType::kFP8E5M2, DType::kFP8E5M2},
    {DType::kFP8E5M2, DType::kFP8E5M2, DType::kBF16},
};

// Grid: each (dtype combination, head_dim) runs once, cycling page size, layout, GQA group and
// sequence shapes so every value of each axis meets every other axis at least once overall.
TEST(PrefillAttentionGeneric, Grid) {
  const int head_dims[] = {64, 128, 256};
  const int pages[] = {16, 32, 64};
  const int groups[] = {1, 4, 8};
  int index = 0;
  for (const DtypeCase& dtypes : kDtypeCases) {
    for (const int head_dim : head_dims) {
      AttentionProblemConfig c = base_config(dtypes, head_dim, 100 + static_cast<uint64_t>(index));
      c.page_size = pages[index % 3];
      c.layout = (index / 3) % 2 == 0 ? KvLayout::kNHD : KvLayout::kHND;
      c.num_kv_heads = 2;
      c.num_q_heads = 2 * groups[(index + index / 3) % 3];
      // Ragged: chunks of 1..150 rows after cached prefixes of 0..200 tokens, one exact tile.
      c.seqs = random_prefill_seqs(3, 1, 150, 200, 7 + static_cast<uint64_t>(index));
      c.seqs.push_back(SeqShape{64, 64});
      // FP8 outputs too: a value the kernel's bf16 P moves across an FP8 rounding boundary
      // passes by the rounding slack (compare.h), so their outputs stay of order one (long
      // prefixes shrank them to ~N(0, 0.05), under the absolute tolerance).
      expect_matches_reference(c, prefill_attention_generic);
      ++index;
    }
  }
}

TEST(PrefillAttentionGeneric, SlidingWindowSoftCapSinksPerHeadScales) {
  for (const int head_dim : {64, 128, 256}) {
    for (const DtypeCase& dtypes : {kDtypeCases[0], kDtypeCases[1], kDtypeCases[2]}) {
      AttentionProblemConfig c =
          base_config(dtypes, head_dim, 300 + static_cast<uint64_t>(head_dim));
      c.num_q_heads = 8;
      c.num_kv_heads = 2;
      c.page_size = head_dim == 128 ? 16 : 64;
      c.layout = head_dim == 64 ? KvLayout::kHND : KvLayout::kNHD;
      c.window_left = 37;
      c.logit_soft_cap = 30.0f;
      c.sm_scale = 0.3f;  // scores large enough for the cap to bend them
      c.sinks = true;
      c.per_head_kv_scales = true;
      c.seqs = {{90, 300}, {1, 77}, {200, 200}};
      expect_matches_reference(c, prefill_attention_generic);
    }
  }
}

TEST(PrefillAttentionGeneric, GraphPaddingAndNvfp4RowOffset) {
  AttentionProblemConfig c = base_config(kDtypeCases[4], 128, 401);
  c.seqs = {{0, 0}, {33, 100}, {0, 0}, {70, 70}};
  c.out_scale_row_offset = 5;
  c.num_q_heads = 4;
  c.num_kv_heads = 4;
  expect_matches_reference(c, prefill_attention_generic);
}

TEST(PrefillAttentionGeneric, ManyTilesLongPrefix) {
  for (const DtypeCase& dtypes : {kDtypeCases[1], kDtypeCases[2]}) {
    AttentionProblemConfig c = base_config(dtypes, 128, 501);
    c.num_q_heads = 8;
    c.num_kv_heads = 1;
    c.page_size = 16;
    c.seqs = {{300, 3000}, {257, 257}};
    expect_matches_reference(c, prefill_attention_generic);
  }
}

TEST(PrefillAttentionGeneric, RejectsUnsupportedConfigurations) {
  AttentionParams p;
  p.kv.head_dim = 96;
  p.kv.num_kv_heads = 1;
  p.num_q_heads = 1;
  EXPECT_NE(prefill_attention_generic_unsupported_reason(p).find("head_dim=96"), std::string::npos);
  p.kv.head_dim = 128;
  p.kv.page_size = 8;
  EXPECT_NE(prefill_attention_generic_unsupported_reason(p).find("page_size=8"), std::string::npos);
  p.kv.page_size = 16;
  p.num_q_heads = 3;
  p.kv.num_kv_heads = 2;
  EXPECT_THROW(prefill_attention_generic(p, nullptr), Error);
}

// Decode consistency (expect_last_prefill_row_equals_decode, prefill_test_support.h).
TEST(PrefillAttentionGeneric, LastPrefillRowEqualsDecode) {
  const PrefillKernel generic = [](const AttentionParams& p, cudaStream_t stream) {
    prefill_attention_generic(p, stream);
  };
  for (const DtypeCase& dtypes : {kDtypeCases[1], kDtypeCases[2]}) {
    expect_last_prefill_row_equals_decode(dtypes, generic, "generic", 601, false);
  }
}

}  // namespace
}  // namespace quench::testing_support
