// GPU tests aimed at the persistent Hopper prefill kernel (prefill_hopper_persistent_kernel.cuh):
// CTAs that walk several work items of different KV tile counts (the ring's slots and phases,
// the tail barrier and the raw stages run on across items; Q is prefetched under the previous
// item's epilogue; the consumers' ping-pong crosses items), empty items of short sequences in
// a ragged batch, and the register-direct epilogue (bf16, FP8 and NVFP4 outputs, LSE). Every
// operand kind runs against the CPU reference, and the three schedules (persistent, one item per
// CTA, the per-tile kernel) must write the same bytes. Skipped unless the device is sm_90.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "prefill_test_support.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench::testing_support {
namespace {

HopperPvPrecision precision_of(const HopperKindCase& kind) {
  return is_fp8_pv(kind) ? HopperPvPrecision::kFp8 : HopperPvPrecision::kBf16;
}

void run_persistent_bf16_pv(const AttentionParams& params, cudaStream_t stream) {
  prefill_attention_hopper(params, stream, HopperPvPrecision::kBf16, HopperSchedule::kPersistent);
}
void run_persistent_fp8_pv(const AttentionParams& params, cudaStream_t stream) {
  prefill_attention_hopper(params, stream, HopperPvPrecision::kFp8, HopperSchedule::kPersistent);
}

// `count` chunks with q_len in 1..max_q_len after a prefix of 0..399 keys (both hashed from
// seed), plus an empty sequence and a one-token one in between.
std::vector<SeqShape> ragged_seqs(int count, int max_q_len, uint64_t seed) {
  std::vector<SeqShape> seqs;
  for (int i = 0; i < count; ++i) {
    const uint64_t h = (seed + static_cast<uint64_t>(i)) * 0x9e3779b97f4a7c15ull;
    const int q_len = 1 + static_cast<int>((h >> 20) % static_cast<uint64_t>(max_q_len));
    const int prefix = static_cast<int>((h >> 40) % 400);
    seqs.push_back({q_len, prefix + q_len});
    if (i == count / 3) seqs.push_back({0, 0});
    if (i == 2 * count / 3) seqs.push_back({1, 1});
  }
  return seqs;
}

// 16 q / 4 KV heads over a dozen ragged chunks: ~400 work items, so each of the H200's 132 CTAs
// walks 3-4 items with their own tile counts and partial last tiles.
TEST(PrefillHopperPersistent, ManyItemsPerCtaMatchReference) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 2600;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const int head_dim : {64, 128}) {
      if (head_dim == 64 && kind.dtypes.q != DType::kBF16) continue;
      SCOPED_TRACE(str_cat(kind.name, " head_dim ", head_dim));
      AttentionProblemConfig c = base_config(kind.dtypes, head_dim, seed);
      c.num_q_heads = 16;
      c.num_kv_heads = 4;
      c.page_size = 16;
      c.seqs = ragged_seqs(12, 330, seed);
      expect_matches_reference(c, is_fp8_pv(kind) ? run_persistent_fp8_pv : run_persistent_bf16_pv);
      ++seed;
    }
  }
}

struct RunBytes {
  std::vector<uint8_t> out;
  std::vector<uint8_t> block_scales;
  std::vector<float> lse;
};

RunBytes run_schedule(AttentionDeviceProblem& device, const HopperKindCase& kind,
                      HopperSchedule schedule) {
  device.poison_outputs();
  prefill_attention_hopper(device.params(), nullptr, precision_of(kind), schedule);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  return {device.download_out(), device.download_block_scales(), device.download_lse()};
}

// Counts differing elements of two same-sized arrays, naming the first (its index, and the
// token and q head for per-row data of `row_elems` elements per token).
template <class T>
void expect_same(const std::vector<T>& expected, const std::vector<T>& actual, const char* what,
                 const std::string& schedule, int64_t row_elems, int heads) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t differing = 0;
  size_t first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) == 0) continue;
    if (differing == 0) first = i;
    ++differing;
  }
  const int64_t token = static_cast<int64_t>(first) / row_elems;
  const int64_t head = static_cast<int64_t>(first) % row_elems * heads / row_elems;
  EXPECT_EQ(differing, 0u) << schedule << " vs persistent: " << differing << " of " << actual.size()
                           << " " << what << " elements differ, the first at " << first
                           << " (token " << token << ", q head " << head << ")";
}

// The persistent kernel (twice: a race shows up as run-to-run differences), the persistent kernel
// on one CTA per item, and the per-tile kernel write the same output, block-scale and LSE bytes
// (and the first run matches the reference: the FP8-KV kinds run per tile by default, so this
// is where their persistent kernel meets it with every output dtype and feature):
// same arithmetic, only the schedule and the epilogue's path (registers or shared memory)
// differ. Sliding window, soft-cap, sinks and per-head scales on, every output dtype, 32 q / 8
// KV heads over a ragged batch with a 2000-token chunk (~700 items, empty ones included).
TEST(PrefillHopperPersistent, SchedulesAreBitIdentical) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 2700;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const DType out : {DType::kBF16, DType::kFP8E4M3, DType::kNVFP4}) {
      SCOPED_TRACE(str_cat(kind.name, " out ", dtype_name(out)));
      AttentionProblemConfig c = base_config(kind.dtypes, 128, seed++);
      c.out_dtype = out;
      c.num_q_heads = 32;
      c.num_kv_heads = 8;
      c.page_size = 16;
      c.layout = KvLayout::kHND;
      c.window_left = 700;
      // FP8 P·V: cap 5, as PrefillHopperWs.SlidingWindowOverTheRing says why.
      c.logit_soft_cap = is_fp8_pv(kind) ? 5.0f : 30.0f;
      c.sinks = true;
      c.per_head_kv_scales = true;
      c.seqs = {{2000, 2400}, {1, 1}, {0, 0}, {130, 130}, {64, 2000}, {300, 800}, {7, 1500}};
      AttentionProblem problem(c);
      problem.compute_reference();
      AttentionDeviceProblem device(problem);
      const int64_t out_row_bytes = static_cast<int64_t>(dtype_bytes(out, 32 * 128));
      const RunBytes persistent = run_schedule(device, kind, HopperSchedule::kPersistent);
      expect_device_output_matches_reference(problem, device, "persistent");
      const std::pair<HopperSchedule, const char*> others[] = {
          {HopperSchedule::kPersistent, "persistent (again)"},
          {HopperSchedule::kOneItemPerCta, "one item per CTA"},
          {HopperSchedule::kPerTile, "per-tile kernel"}};
      for (const auto& [schedule, name] : others) {
        const RunBytes run = run_schedule(device, kind, schedule);
        expect_same(persistent.out, run.out, "output byte", name, out_row_bytes, 32);
        expect_same(persistent.block_scales, run.block_scales, "block scale", name,
                    out_row_bytes / 8, 32);
        expect_same(persistent.lse, run.lse, "lse", name, 32, 32);
      }
    }
  }
}

}  // namespace
}  // namespace quench::testing_support
