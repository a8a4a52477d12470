// The decode kernel's FP8 rows for the o projection (AttentionParams::out_fp8): in every
// workspace mode (the epilogues of the main kernel, the last split CTA's merge and the merge
// kernel), bit for bit the codes and 128-column scales that quantize_fp8_dynamic_rows_cuda
// writes from the same run's bf16 output, both scale orders, with multi-token queries, a padding
// request, FP8 and bf16 caches and GQA groups 1 to 8; the bf16 output beside them unchanged (and
// still the reference's); with out null, the same codes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode_test_support.h"
#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/decode_test_cases.h"
#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_attention.h"
#include "quench/ops/quantize/quantize_fp8_dynamic.h"

namespace quench::testing_support {
namespace {

// FP8 rows of `rows` x `width` over poisoned memory (codes 0x7f = NaN, scales -1).
struct PoisonedFp8Rows {
  DeviceBuffer codes, scales;
  Fp8RowsOut out;
  PoisonedFp8Rows(int32_t rows, int32_t width, bool by_group)
      : codes(
            DeviceBuffer::from_host(std::vector<uint8_t>(static_cast<size_t>(rows) * width, 0x7f))),
        scales(DeviceBuffer::from_host(
            std::vector<float>(static_cast<size_t>(rows) * width / 128, -1.0f))) {
    out = Fp8RowsOut{codes.as<uint8_t>(), scales.as<float>(), 128, {rows, by_group}};
  }
};

struct Fp8RowsCase {
  const char* name;
  DType kv;
  int32_t group;
  int32_t page;
  KvLayout layout;
  std::vector<SeqShape> seqs;
};

void expect_fp8_rows_match_the_quantized_output(const Fp8RowsCase& k, uint64_t seed) {
  SCOPED_TRACE(k.name);
  AttentionProblemConfig c =
      decode_grid_config(k.kv, DType::kBF16, k.group, 128, k.page, k.layout, seed);
  c.seqs = k.seqs;
  c.per_head_kv_scales = true;
  AttentionProblem problem(c);
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  const int32_t rows = problem.num_tokens();
  const int32_t width = c.num_q_heads * 128;
  const Tolerance tolerance =
      k.kv == DType::kBF16 ? tolerance::kDecodeBf16 : tolerance::kDecodeBf16QFp8Kv;
  const DeviceBuffer workspace = zeroed_decode_workspace(device.params());
  const int splits = decode_attention_num_splits(device.params());
  for (const DecodeWorkspaceMode& mode : decode_workspace_modes()) {
    for (const bool by_group : {true, false}) {
      SCOPED_TRACE(decode_workspace_mode_trace(mode, splits) + ", scales " +
                   (by_group ? "by group" : "by row"));
      const auto launch = [&](const AttentionParams& p) {
        run_decode_in_workspace_mode(p, workspace, mode);
      };
      // bf16 output and FP8 rows together.
      PoisonedFp8Rows got(rows, width, by_group);
      AttentionParams p = device.params();
      p.out_fp8 = got.out;
      device.poison_outputs();
      launch(p);
      const CompareResult out = device.compare_output(tolerance);
      EXPECT_TRUE(out.ok) << "bf16 output beside the FP8 rows: " << out.summary();
      // The chain the rows replace: the o projection's own pass over that bf16 output.
      const DeviceBuffer bf16 = DeviceBuffer::from_host(device.download_out());
      PoisonedFp8Rows want(rows, width, by_group);
      quantize_fp8_dynamic_rows_cuda(rows, width, 128, bf16.as<uint16_t>(), want.out.data,
                                     want.out.scales, want.out.layout, nullptr);
      QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<uint8_t> want_codes = want.codes.to_host<uint8_t>();
      const std::vector<float> want_scales = want.scales.to_host<float>();
      EXPECT_EQ(got.codes.to_host<uint8_t>(), want_codes);
      EXPECT_EQ(got.scales.to_host<float>(), want_scales);
      // The FP8 rows alone (the runner's o projection reads nothing else).
      PoisonedFp8Rows alone(rows, width, by_group);
      p.out = nullptr;
      p.out_fp8 = alone.out;
      launch(p);
      EXPECT_EQ(alone.codes.to_host<uint8_t>(), want_codes) << "out null";
      EXPECT_EQ(alone.scales.to_host<float>(), want_scales) << "out null";
    }
  }
}

TEST(DecodeAttentionGpuFp8Rows, MatchTheBf16OutputQuantizedBitForBit) {
  const std::vector<Fp8RowsCase> cases = {
      // Split-KV (one long request), a padding request, a 3-token (speculative) query.
      {"e4m3 g4 page16 NHD, splits",
       DType::kFP8E4M3,
       4,
       16,
       KvLayout::kNHD,
       {{1, 6000}, {0, 0}, {3, 3000}, {1, 40}}},
      {"bf16 g1 page64 HND", DType::kBF16, 1, 64, KvLayout::kHND, {{1, 700}, {2, 17}, {1, 1}}},
      {"e4m3 g8 page32 NHD, many requests",
       DType::kFP8E4M3,
       8,
       32,
       KvLayout::kNHD,
       {{1, 900}, {1, 33}, {1, 512}, {1, 1500}, {1, 64}, {1, 200}, {1, 7}, {1, 1024}}},
  };
  uint64_t seed = 71;
  for (const Fp8RowsCase& k : cases)
    expect_fp8_rows_match_the_quantized_output(k, seed++);
}

}  // namespace
}  // namespace quench::testing_support
