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
#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {
namespace {

struct DecodeCase {
  std::string name;
  AttentionProblemConfig config;
};

std::string short_dtype(DType d) {
  switch (d) {
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kFP8E4M3:
      return "e4m3";
    case DType::kFP8E5M2:
      return "e5m2";
    case DType::kNVFP4:
      return "nvfp4";
    default:
      return dtype_name(d);
  }
}

// Four decode requests of lengths 1, 17, 1000 and 4096 (one token each), 2 KV heads.
AttentionProblemConfig grid_config(DType kv, DType q, int32_t group, int32_t head_dim,
                                   int32_t page_size, KvLayout layout, uint64_t seed) {
  AttentionProblemConfig c;
  c.seqs = {{1, 1}, {1, 17}, {1, 1000}, {1, 4096}};
  c.num_kv_heads = 2;
  c.num_q_heads = 2 * group;
  c.head_dim = head_dim;
  c.page_size = page_size;
  c.layout = layout;
  c.q_dtype = q;
  c.kv_dtype = kv;
  // Stored = x / scale: FP8 scales put N(0,1) values well inside e4m3's range.
  c.k_scale = is_fp8(kv) ? 0.02f : 0.5f;
  c.v_scale = is_fp8(kv) ? 0.03f : 1.7f;
  c.per_head_kv_scales = true;
  c.seed = seed;
  return c;
}

std::string grid_name(const AttentionProblemConfig& c) {
  return "kv_" + short_dtype(c.kv_dtype) + "_q_" + short_dtype(c.q_dtype) + "_g" +
         std::to_string(c.num_q_heads / c.num_kv_heads) + "_hd" + std::to_string(c.head_dim) +
         "_p" + std::to_string(c.page_size) + "_" + kv_layout_name(c.layout) + "_out_" +
         short_dtype(c.out_dtype);
}

std::vector<DecodeCase> decode_cases() {
  std::vector<DecodeCase> cases;
  uint64_t seed = 100;
  // Dtypes x head dims (group 4, page 16, NHD).
  for (DType kv : {DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2}) {
    for (DType q : {DType::kBF16, DType::kF16}) {
      if (q == DType::kF16 && kv == DType::kBF16) continue;  // the contract has no f16 x bf16
      for (int32_t hd : {64, 128, 256}) {
        AttentionProblemConfig c = grid_config(kv, q, 4, hd, 16, KvLayout::kNHD, ++seed);
        cases.push_back({"dtypes_" + grid_name(c), c});
      }
    }
  }
  // Group sizes x pages x layouts (e4m3, bf16 query, hd128).
  for (int32_t group : {1, 4, 8, 16}) {
    for (int32_t page : {16, 32, 64}) {
      for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
        AttentionProblemConfig c =
            grid_config(DType::kFP8E4M3, DType::kBF16, group, 128, page, layout, ++seed);
        cases.push_back({"groups_" + grid_name(c), c});
      }
    }
  }
  // Both tile loops of the sm_90 kernel: <= 8 query rows per request and KV head (group x query
  // tokens) run the swapped-operand loop, more the row-major one; FP8 and bf16 KV, pages of 16
  // and 64, plain and with a window + soft-cap (both mask passes, the rescale).
  for (int32_t group : {1, 4, 8, 16}) {
    for (DType kv : {DType::kFP8E4M3, DType::kBF16}) {
      for (int32_t page : {16, 64}) {
        for (bool window_softcap : {false, true}) {
          AttentionProblemConfig c =
              grid_config(kv, DType::kBF16, group, 128, page, KvLayout::kNHD, ++seed);
          std::string name = "loops_" + grid_name(c);
          if (window_softcap) {
            c.window_left = 150;
            c.logit_soft_cap = 25.0f;
            name += "_window_softcap";
          }
          cases.push_back({name, c});
        }
      }
    }
  }
  // Swapped loop at head_dim 64 (one K chunk group, 8-byte V loads) and with e5m2 / f16 query.
  for (DType kv : {DType::kFP8E4M3, DType::kFP8E5M2, DType::kBF16}) {
    for (int32_t group : {2, 8}) {
      const DType q = kv == DType::kFP8E5M2 ? DType::kF16 : DType::kBF16;
      AttentionProblemConfig c = grid_config(kv, q, group, 64, 32, KvLayout::kHND, ++seed);
      cases.push_back({"loops_" + grid_name(c), c});
    }
  }
  // Output dtypes.
  for (DType kv : {DType::kFP8E4M3, DType::kBF16}) {
    for (DType out : {DType::kFP8E4M3, DType::kFP8E5M2, DType::kNVFP4}) {
      AttentionProblemConfig c = grid_config(kv, DType::kBF16, 8, 128, 16, KvLayout::kNHD, ++seed);
      c.out_dtype = out;
      c.o_scale = 0.01f;
      c.out_scale_row_offset = 5;
      cases.push_back({"out_" + grid_name(c), c});
    }
  }
  // Output dtypes where a row's quads (4 elements per thread, 4 threads per NVFP4 block) leave
  // part of a warp idle: head_dim 64 with 1 or 3 rows per work item, head_dim 256.
  for (const auto& [head_dim, group] : {std::pair{64, 1}, std::pair{64, 3}, std::pair{256, 2}}) {
    for (DType out : {DType::kFP8E4M3, DType::kNVFP4}) {
      AttentionProblemConfig c =
          grid_config(DType::kFP8E4M3, DType::kBF16, group, head_dim, 16, KvLayout::kNHD, ++seed);
      c.out_dtype = out;
      c.o_scale = 0.02f;
      c.out_scale_row_offset = 3;
      cases.push_back({"out_" + grid_name(c), c});
    }
  }
  auto feature = [&](const std::string& name, auto&& edit) {
    AttentionProblemConfig c =
        grid_config(DType::kFP8E4M3, DType::kBF16, 4, 128, 16, KvLayout::kNHD, ++seed);
    edit(c);
    cases.push_back({name, c});
  };
  feature("window_100", [](AttentionProblemConfig& c) { c.window_left = 100; });
  feature("window_0_hnd_p32", [](AttentionProblemConfig& c) {
    c.window_left = 0;
    c.layout = KvLayout::kHND;
    c.page_size = 32;
  });
  feature("softcap_20", [](AttentionProblemConfig& c) { c.logit_soft_cap = 20.0f; });
  feature("sinks", [](AttentionProblemConfig& c) { c.sinks = true; });
  feature("sinks_softcap_window_nvfp4", [](AttentionProblemConfig& c) {
    c.sinks = true;
    c.logit_soft_cap = 30.0f;
    c.window_left = 700;
    c.out_dtype = DType::kNVFP4;
  });
  feature("padding_requests", [](AttentionProblemConfig& c) {
    c.seqs = {{0, 0}, {1, 300}, {0, 0}, {1, 5}, {0, 0}};
  });
  feature("multi_token_g4", [](AttentionProblemConfig& c) {
    c.seqs = {{4, 100}, {8, 1000}, {2, 2}, {3, 4096}, {0, 0}};
  });
  // Multi-token queries that fit the swapped loop: rows = tokens x heads <= 8, causal among
  // themselves.
  feature("multi_token_g4_swapped", [](AttentionProblemConfig& c) {
    c.seqs = {{2, 100}, {1, 1000}, {2, 2}, {2, 4096}, {0, 0}};
  });
  feature("multi_token_g1_swapped_window_p64", [](AttentionProblemConfig& c) {
    c.num_q_heads = 2;
    c.seqs = {{8, 999}, {5, 64}, {1, 3000}, {8, 8}};
    c.window_left = 70;
    c.page_size = 64;
  });
  feature("multi_token_g2_swapped_bf16kv_softcap", [](AttentionProblemConfig& c) {
    c.num_q_heads = 4;
    c.kv_dtype = DType::kBF16;
    c.k_scale = 0.5f;
    c.v_scale = 1.5f;
    c.logit_soft_cap = 30.0f;
    c.seqs = {{4, 333}, {3, 65}, {1, 2048}};
  });
  feature("multi_token_g8_window_hnd_p32", [](AttentionProblemConfig& c) {
    c.num_q_heads = 16;
    c.seqs = {{8, 999}, {5, 64}, {1, 3000}};
    c.window_left = 70;
    c.layout = KvLayout::kHND;
    c.page_size = 32;
  });
  feature("multi_token_g1_bf16kv_hd256_fp8out", [](AttentionProblemConfig& c) {
    c.num_q_heads = 2;
    c.head_dim = 256;
    c.kv_dtype = DType::kBF16;
    c.k_scale = 0.5f;
    c.v_scale = 1.5f;
    c.seqs = {{7, 777}, {2, 40}};
    c.out_dtype = DType::kFP8E4M3;
    c.o_scale = 0.01f;
  });
  // GQA group 3: a row group of 16 rows ends inside a token's 3 rows, so the merge kernel
  // cannot count a token's splits in one CTA and waits for the main grid instead.
  feature("multi_token_g3_straddling_row_groups", [](AttentionProblemConfig& c) {
    c.num_q_heads = 6;
    c.seqs = {{6, 500}, {1, 2000}, {0, 0}};
  });
  feature("batch_64_no_split", [](AttentionProblemConfig& c) {
    c.num_kv_heads = 8;
    c.num_q_heads = 32;
    c.seqs = random_decode_seqs(64, 1, 700, 7);
  });
  feature("long_32k", [](AttentionProblemConfig& c) {
    c.num_kv_heads = 1;
    c.seqs = {{1, 32768}};
  });
  // The bench's B1 x 32k shape (8 KV heads): splits of 16 tiles, two CTAs per SM (FP8: a ring of
  // two stages, bf16: the deep ring), each split's 64 page ids in two of the producer's 32-entry
  // batches.
  feature("long_32k_hkv8_small_grid", [](AttentionProblemConfig& c) {
    c.num_kv_heads = 8;
    c.num_q_heads = 32;
    c.seqs = {{1, 32768}};
  });
  // Windows that start mid-page: each split's first tile (and page batch) is unaligned, splits
  // cross batches, and the cache before the window holds NaN.
  feature("long_window_unaligned_batches", [](AttentionProblemConfig& c) {
    c.num_kv_heads = 8;
    c.num_q_heads = 32;
    c.seqs = {{1, 30000}, {1, 13001}};
    c.window_left = 12000;
    c.nan_before_window = true;
  });
  feature("long_128k_g8_p64_e5m2", [](AttentionProblemConfig& c) {
    c.num_kv_heads = 1;
    c.num_q_heads = 8;
    c.page_size = 64;
    c.kv_dtype = DType::kFP8E5M2;
    c.seqs = {{1, 131072}};
  });
  return cases;
}

class DecodeAttentionGpu : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeAttentionGpu, MatchesReference) {
  expect_decode_matches_reference(GetParam().config);
}

INSTANTIATE_TEST_SUITE_P(Grid, DecodeAttentionGpu, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) {
                           return info.param.name;
                         });

// A decode step captured in a CUDA graph and replayed gives the same result (no host state).
TEST(DecodeAttentionGpuGraph, CapturedLaunchMatchesReference) {
  AttentionProblemConfig c =
      grid_config(DType::kFP8E4M3, DType::kBF16, 4, 128, 16, KvLayout::kNHD, 7);
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
        grid_config(DType::kFP8E4M3, DType::kBF16, group, 128, 16, KvLayout::kNHD, seed);
    c.seqs = {{1, 6000}, {0, 0}, {1, 3000}, {1, 40}};
    c.sinks = true;
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
      for (DecodeSplitMerge merge : {DecodeSplitMerge::kLastSplitCta, DecodeSplitMerge::kMergeKernel}) {
        device.poison_outputs();
        decode_attention(device.params(), workspace.get(), workspace.bytes(), nullptr, merge);
        QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
        const std::string what =
            "hd" + std::to_string(head_dim) + " g" + std::to_string(group) + " out " +
            dtype_name(out) +
            (merge == DecodeSplitMerge::kLastSplitCta ? " (last split CTA)" : " (merge kernel)");
        const CompareResult result = device.compare_output(
            attention_tolerance(true, c.q_dtype, c.kv_dtype, out));
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
      grid_config(DType::kFP8E4M3, DType::kBF16, 4, 128, 16, KvLayout::kNHD, 8);
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
      grid_config(DType::kFP8E4M3, DType::kFP8E4M3, 4, 128, 16, KvLayout::kNHD, 9);
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
