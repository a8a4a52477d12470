// GPU decode attention against the CPU reference (SPEC §3 tolerances) over the grid of query /
// KV / output dtypes, GQA group sizes, head dims, page sizes, layouts and lengths (1 to 128k),
// with non-unit per-head scales, windows, soft-cap, sinks, padding requests and multi-token
// (speculative) queries. Every case runs in every workspace mode (decode_test_support.h): with a
// workspace (split-KV where the launcher picks it, merged by the last split CTAs, twice, and by
// the merge kernel on arrival and after the main grid) and without one (one CTA per request and
// KV head).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "decode_test_support.h"
#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/decode_test_cases.h"
#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {
namespace {

class DecodeAttentionGpu : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeAttentionGpu, MatchesReference) {
  expect_decode_matches_reference(GetParam().config);
}

INSTANTIATE_TEST_SUITE_P(Grid, DecodeAttentionGpu, ::testing::ValuesIn(decode_grid_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) {
                           return info.param.name;
                         });

// A decode step captured in a CUDA graph and replayed gives the same result (no host state).
TEST(DecodeAttentionGpuGraph, CapturedLaunchMatchesReference) {
  AttentionProblemConfig c =
      decode_grid_config(DType::kFP8E4M3, DType::kBF16, 4, 128, 16, KvLayout::kNHD, 7);
  c.seqs = {{1, 2000}, {0, 0}, {1, 33}};
  AttentionProblem problem(c);
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  const AttentionParams& params = device.params();
  const DeviceBuffer workspace = zeroed_decode_workspace(params);
  CapturedDecodeGraph graph([&](cudaStream_t stream) {
    decode_attention(params, workspace.get(), workspace.bytes(), stream);
  });
  for (int replay = 0; replay < 2; ++replay) {
    device.poison_outputs();
    graph.replay();
    const CompareResult out = device.compare_output(tolerance::kDecodeBf16QFp8Kv);
    EXPECT_TRUE(out.ok) << "replay " << replay << ": " << out.summary();
  }
}

// The in-kernel split merge (the last split CTA of each request and KV head merges; its arrival
// counters at the start of the workspace return to zero after every call).
class DecodeAttentionGpuSplitMerge : public ::testing::Test {
 protected:
  // FP8 KV with per-head scales and sinks; one long request, a padding request (seq_len 0),
  // one with a window shorter than its length and one of a single tile: with 2 KV heads the
  // launcher splits every request (4 x 2 work items on a GPU of >= 100 SMs).
  static AttentionProblemConfig split_config(int32_t group, uint64_t seed) {
    AttentionProblemConfig c =
        decode_grid_config(DType::kFP8E4M3, DType::kBF16, group, 128, 16, KvLayout::kNHD, seed);
    c.seqs = {{1, 6000}, {0, 0}, {1, 3000}, {1, 40}};
    c.sinks = true;
    // ~16 keys carry each row, spread over the splits: a partial merged with a wrong weight or
    // from the wrong split moves the output past the tolerance (flat rows averaging 6000 N(0, 1)
    // values sit under its absolute part).
    c.q_magnitude = peaked_q_magnitude(6000);
    return c;
  }

  static void expect_matches(const AttentionDeviceProblem& device, const std::string& what) {
    const CompareResult out = device.compare_output(tolerance::kDecodeBf16QFp8Kv);
    EXPECT_TRUE(out.ok) << what << ": output: " << out.summary();
    const CompareResult lse = device.compare_lse(Tolerance{2e-3, 5e-3});
    EXPECT_TRUE(lse.ok) << what << ": lse: " << lse.summary();
  }
};

// A window: the split CTAs past the window's tiles are empty and still count themselves in.
TEST_F(DecodeAttentionGpuSplitMerge, WindowWithEmptySplitsMatchesReference) {
  AttentionProblemConfig c = split_config(4, 31);
  c.window_left = 700;
  c.nan_before_window = true;
  AttentionProblem problem(c);
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  ASSERT_GT(decode_attention_num_splits(device.params()), 1) << "the test needs KV splits";
  const DeviceBuffer workspace = zeroed_decode_workspace(device.params());
  const DecodeSplitMerge merges[] = {
      DecodeSplitMerge::kLastSplitCta, DecodeSplitMerge::kMergeKernel,
      DecodeSplitMerge::kLastSplitCta, DecodeSplitMerge::kMergeKernel};
  for (int run = 0; run < 4; ++run) {
    device.poison_outputs();
    decode_attention(device.params(), workspace.get(), workspace.bytes(), nullptr, merges[run]);
    QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
    expect_matches(device, "run " + std::to_string(run) +
                               (run % 2 == 0 ? " (last split CTA)" : " (merge kernel)"));
    expect_merge_counters_zero(workspace);
  }
}

// FP8 and NVFP4 outputs written by each merge's epilogue (the last split CTA's ItemMerge, the
// merge kernel's RowMerge) at head_dim 64 with 3 rows per work item (a warp's quads cover 16
// elements of one row and the rest of another) and head_dim 128.
TEST_F(DecodeAttentionGpuSplitMerge, OutputDtypesThroughEveryMergeMatchReference) {
  for (const auto& [head_dim, group] : {std::pair{64, 3}, std::pair{128, 4}}) {
    for (DType out : {DType::kFP8E4M3, DType::kNVFP4}) {
      AttentionProblemConfig c = split_config(group, 40 + head_dim + group);
      c.head_dim = head_dim;
      c.out_dtype = out;
      c.o_scale = 0.02f;
      c.out_scale_row_offset = 7;
      AttentionProblem problem(c);
      problem.compute_reference();
      AttentionDeviceProblem device(problem);
      ASSERT_GT(decode_attention_num_splits(device.params()), 1) << "the test needs KV splits";
      const DeviceBuffer workspace = zeroed_decode_workspace(device.params());
      for (DecodeSplitMerge merge :
           {DecodeSplitMerge::kLastSplitCta, DecodeSplitMerge::kMergeKernel}) {
        device.poison_outputs();
        decode_attention(device.params(), workspace.get(), workspace.bytes(), nullptr, merge);
        QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
        const std::string what =
            "hd" + std::to_string(head_dim) + " g" + std::to_string(group) + " out " +
            dtype_name(out) +
            (merge == DecodeSplitMerge::kLastSplitCta ? " (last split CTA)" : " (merge kernel)");
        const CompareResult result =
            device.compare_output(attention_tolerance(true, c.q_dtype, c.kv_dtype, out));
        EXPECT_TRUE(result.ok) << what << ": output: " << result.summary();
        expect_merge_counters_zero(workspace);
      }
    }
  }
}

// A CUDA graph of back-to-back calls on one workspace (merged by the last split CTAs, by the
// merge kernel on arrival, after the main grid, and by the last split CTAs again), replayed:
// every call starts from the counters the previous one left (and, on sm_90, each kernel is a
// programmatic dependent of the one before it).
TEST_F(DecodeAttentionGpuSplitMerge, GraphReplaysReuseTheWorkspace) {
  AttentionProblem problem(split_config(4, 32));
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  const AttentionParams& params = device.params();
  ASSERT_GT(decode_attention_num_splits(params), 1) << "the test needs KV splits";
  const DeviceBuffer workspace = zeroed_decode_workspace(params);
  CapturedDecodeGraph graph([&](cudaStream_t stream) {
    for (DecodeSplitMerge merge :
         {DecodeSplitMerge::kLastSplitCta, DecodeSplitMerge::kMergeKernel,
          DecodeSplitMerge::kMergeKernelAfterGrid, DecodeSplitMerge::kLastSplitCta}) {
      decode_attention(params, workspace.get(), workspace.bytes(), stream, merge);
    }
  });
  for (int replay = 0; replay < 3; ++replay) {
    device.poison_outputs();
    graph.replay();
    expect_matches(device, "replay " + std::to_string(replay));
    expect_merge_counters_zero(workspace);
  }
}

// Two shapes (GQA group 4 and 2, different split counts and partial sizes) take turns on one
// workspace sized for the larger, with every merge place: the counter block stays where it is.
TEST_F(DecodeAttentionGpuSplitMerge, ShapesShareOneWorkspace) {
  AttentionProblem first(split_config(4, 33));
  AttentionProblemConfig c = split_config(2, 34);
  c.seqs = {{1, 9000}, {1, 300}};
  c.q_magnitude = peaked_q_magnitude(9000);
  AttentionProblem second(c);
  first.compute_reference();
  second.compute_reference();
  AttentionDeviceProblem first_device(first);
  AttentionDeviceProblem second_device(second);
  const DeviceBuffer workspace =
      zeroed_decode_workspace(decode_attention_workspace_bytes(first_device.params()) >
                                      decode_attention_workspace_bytes(second_device.params())
                                  ? first_device.params()
                                  : second_device.params());
  const DecodeSplitMerge merges[] = {DecodeSplitMerge::kLastSplitCta,
                                     DecodeSplitMerge::kMergeKernel,
                                     DecodeSplitMerge::kMergeKernelAfterGrid};
  for (int turn = 0; turn < 6; ++turn) {
    AttentionDeviceProblem& device = turn % 2 == 0 ? first_device : second_device;
    device.poison_outputs();
    decode_attention(device.params(), workspace.get(), workspace.bytes(), nullptr,
                     merges[turn / 2]);
    QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
    expect_matches(device,
                   "turn " + std::to_string(turn) + (turn % 2 == 0 ? " (group 4)" : " (group 2)"));
    expect_merge_counters_zero(workspace);
  }
}

// The last split CTA merges all its work item's rows at once (ItemMerge): 32+ splits of one
// long request, with 4 and 8 query rows (group 4 and 8, the swapped loop) and 16 (group 8 x 2
// query tokens), at every head dim (one float4 unit per thread and fewer or more units than
// threads), with sinks and non-unit per-head scales; against the merge kernel's run on the same
// workspace.
TEST_F(DecodeAttentionGpuSplitMerge, LastSplitCtaMergesManySplitsAndRows) {
  for (int32_t group : {4, 8}) {
    for (int32_t head_dim : {64, 128, 256}) {
      for (int32_t tokens : {1, 2}) {
        if (tokens == 2 && group == 4) continue;
        AttentionProblemConfig c = split_config(group, 40 + group + head_dim + tokens);
        c.head_dim = head_dim;
        c.seqs = {{tokens, 4096}};
        c.q_magnitude = peaked_q_magnitude(4096);
        AttentionProblem problem(c);
        problem.compute_reference();
        AttentionDeviceProblem device(problem);
        const std::string what = "group " + std::to_string(group) + ", hd " +
                                 std::to_string(head_dim) + ", " + std::to_string(tokens) +
                                 " query token(s)";
        ASSERT_GE(decode_attention_num_splits(device.params()), 32) << what;
        const DeviceBuffer workspace = zeroed_decode_workspace(device.params());
        for (DecodeSplitMerge merge :
             {DecodeSplitMerge::kLastSplitCta, DecodeSplitMerge::kMergeKernel,
              DecodeSplitMerge::kLastSplitCta}) {
          device.poison_outputs();
          decode_attention(device.params(), workspace.get(), workspace.bytes(), nullptr, merge);
          QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
          expect_matches(device,
                         what + (merge == DecodeSplitMerge::kLastSplitCta ? " (last split CTA)"
                                                                          : " (merge kernel)"));
          expect_merge_counters_zero(workspace);
        }
      }
    }
  }
}

// An all-padding batch launches nothing and writes nothing.
TEST(DecodeAttentionGpuPadding, AllPaddingBatchWritesNothing) {
  AttentionProblemConfig c =
      decode_grid_config(DType::kFP8E4M3, DType::kBF16, 4, 128, 16, KvLayout::kNHD, 8);
  c.seqs = {{0, 0}, {0, 0}};
  AttentionProblem problem(c);
  AttentionDeviceProblem device(problem);
  const DeviceBuffer workspace = zeroed_decode_workspace(device.params());
  decode_attention(device.params(), workspace.get(), workspace.bytes(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(device.download_out(), problem.poisoned_out());
}

TEST(DecodeAttentionGpuValidation, RejectsFp8QueryAndNamesAllowedDtypes) {
  AttentionProblemConfig c =
      decode_grid_config(DType::kFP8E4M3, DType::kFP8E4M3, 4, 128, 16, KvLayout::kNHD, 9);
  c.q_scale = 0.05f;
  AttentionProblem problem(c);
  AttentionDeviceProblem device(problem);
  try {
    decode_attention(device.params(), nullptr, 0, nullptr);
    FAIL() << "an FP8 query must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: bf16, f16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace quench::testing_support
