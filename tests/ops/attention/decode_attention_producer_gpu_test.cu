// The decode pipeline's edge cases, aimed at the sm_90 TMA variant (producer warp, one TMA box
// per page, mbarrier ring; decode_kv_tma_producer.cuh) but run by whichever kernel the GPU
// selects:
// - ring wrap: long single-split requests stream dozens of tiles through every stage;
// - invisible tokens at both ends of a tile (window start mid-tile, partial last tile) over a
//   cache whose unused slots, spare pages and slots before every window are NaN: TMA loads
//   whole pages, so the loaded NaN rows, and the stale rows of pages it skips, must be kept out
//   of the output by the mask (keys) and by zeroing in registers (values). Window 200 over 3000
//   tokens at page 16 skips a whole page of the first tile (stale shared memory) and loads one
//   with 15 NaN rows before the window;
// - page sizes 16/32/64 x NHD/HND, for one 128-byte box per page (hd128 e4m3), a box half
//   zero-filled past head_dim (hd64 e4m3) and two boxes per page (hd128 bf16); hd256 e5m2 runs
//   the cp.async kernel everywhere (no TMA variant);
// - multi-token rows, whose rows see different windows inside one tile.
// Every case runs with a workspace (split-KV, merged in the kernel and by the merge kernel) and
// without one (one split: most tiles).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode_test_support.h"
#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/device_buffer.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {
namespace {

struct ProducerCase {
  std::string name;
  AttentionProblemConfig config;
};

std::vector<ProducerCase> producer_cases() {
  std::vector<ProducerCase> cases;
  uint64_t seed = 4000;
  struct Kv {
    const char* name;
    DType dtype;
    int32_t head_dim;
  };
  const Kv kvs[] = {{"e4m3_hd128", DType::kFP8E4M3, 128},
                    {"e5m2_hd256", DType::kFP8E5M2, 256},
                    {"e4m3_hd64", DType::kFP8E4M3, 64},
                    {"bf16_hd128", DType::kBF16, 128}};
  for (const Kv& kv : kvs) {
    for (int32_t page : {16, 32, 64}) {
      for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
        AttentionProblemConfig c;
        c.num_kv_heads = 2;
        c.num_q_heads = 8;
        c.head_dim = kv.head_dim;
        c.page_size = page;
        c.layout = layout;
        c.kv_dtype = kv.dtype;
        c.k_scale = is_fp8(kv.dtype) ? 0.02f : 0.5f;
        c.v_scale = is_fp8(kv.dtype) ? 0.03f : 1.7f;
        c.per_head_kv_scales = true;
        // Ignored for a bf16 query and output, and not 1 so that applying them fails.
        c.q_scale = 7.0f;
        c.o_scale = 0.3f;
        c.seed = ++seed;
        const std::string base =
            std::string(kv.name) + "_p" + std::to_string(page) + "_" + kv_layout_name(layout);
        // Ring wrap, no window: 5000 = 78 tiles + 8 tokens (56 invisible at the end); 4096 ends
        // on a tile edge; 37 is one partial tile.
        c.seqs = {{1, 5000}, {1, 4096}, {1, 37}};
        cases.push_back({"ring_" + base, c});
        // Window start mid-tile (1037 - 1 - 200 = 836: 4 invisible tokens at the front of tile
        // 13) and partial last tile (1037: 51 invisible at the end); 3000 / 700 wrap the ring.
        c.window_left = 200;
        c.nan_before_window = true;
        c.seqs = {{1, 1037}, {1, 3000}, {1, 130}};
        cases.push_back({"window_" + base, c});
        // Multi-token rows: each query token's window starts at a different key of one tile.
        c.window_left = 90;
        c.seqs = {{5, 2021}, {3, 70}, {0, 0}, {2, 640}};
        cases.push_back({"multi_token_window_" + base, c});
      }
    }
  }
  return cases;
}

class DecodeAttentionProducerGpu : public ::testing::TestWithParam<ProducerCase> {};

TEST_P(DecodeAttentionProducerGpu, MatchesReference) {
  expect_decode_matches_reference(GetParam().config);
}

INSTANTIATE_TEST_SUITE_P(Pipeline, DecodeAttentionProducerGpu,
                         ::testing::ValuesIn(producer_cases()),
                         [](const ::testing::TestParamInfo<ProducerCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace quench::testing_support
