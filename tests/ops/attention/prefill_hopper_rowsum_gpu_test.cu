// GPU tests of where the warp-specialized Hopper prefill kernels sum the softmax rows
// (HopperRowSum): on the tensor cores (issue_p_row_sum in prefill_hopper_tile.cuh: P * ONES,
// one m64n8 wgmma beside each P·V k step, the default) and on the ALU (fp32 adds in the
// softmax, QUENCH_PREFILL_ROWSUM=alu), each named here, so the environment does not reach
// them. Every operand kind and head_dim on both schedules against the CPU reference at the
// SPEC §3 tolerances (LSE too: the tensor-core sum is over the rounded P of P·V, bf16 or e4m3),
// with soft-cap, sliding window, sinks and per-head scales; and each choice writes the same
// bytes on every schedule. Skipped unless the device is sm_90.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "prefill_test_support.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench::testing_support {
namespace {

struct RowSumCase {
  HopperRowSum row_sum;
  const char* name;
};
constexpr RowSumCase kRowSums[] = {{HopperRowSum::kTensorCores, "tensor-core row sums"},
                                   {HopperRowSum::kAlu, "ALU row sums"}};

struct ScheduleCase {
  HopperSchedule schedule;
  const char* name;
};
constexpr ScheduleCase kSchedules[] = {{HopperSchedule::kPerTile, "per tile"},
                                       {HopperSchedule::kPersistent, "persistent"}};

// What run_choice launches (PrefillKernel is a plain function pointer, so the choice is set
// here before each run).
struct RunChoice {
  HopperPvPrecision precision = HopperPvPrecision::kBf16;
  HopperSchedule schedule = HopperSchedule::kPerTile;
  HopperRowSum row_sum = HopperRowSum::kTensorCores;
};
RunChoice g_choice;

void run_choice(const AttentionParams& params, cudaStream_t stream) {
  prefill_attention_hopper(params, stream, g_choice.precision, g_choice.schedule,
                           HopperHeadDim256Kernel::kWarpSpecialized, g_choice.row_sum);
}

HopperPvPrecision precision_of(const HopperKindCase& kind) {
  return is_fp8_pv(kind) ? HopperPvPrecision::kFp8 : HopperPvPrecision::kBf16;
}

// Every kind at every head_dim it serves (FP8 q: 128 only), either row sum, either schedule:
// a ragged batch after cached prefixes on 16-token pages in HND, GQA group 4, sinks and
// per-head scales, LSE compared. Rows over one key (a sum of exactly P = 1) where the kind's
// tolerance allows short rows; FP8 P·V rows need long prefixes (3-bit P, see
// prefill_hopper_ws_gpu_test.cu).
TEST(PrefillHopperRowSum, EveryKindAndHeadDimMatchesReference) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 3100;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const int head_dim : {64, 128, 256}) {
      if (head_dim != 128 && kind.dtypes.q != DType::kBF16) continue;
      for (const RowSumCase& row_sum : kRowSums) {
        for (const ScheduleCase& schedule : kSchedules) {
          SCOPED_TRACE(
              str_cat(kind.name, " head_dim ", head_dim, ", ", row_sum.name, ", ", schedule.name));
          AttentionProblemConfig c = base_config(kind.dtypes, head_dim, seed);
          c.num_q_heads = 8;
          c.num_kv_heads = 2;
          c.page_size = 16;
          c.layout = KvLayout::kHND;
          c.sinks = true;
          c.per_head_kv_scales = true;
          if (is_fp8_pv(kind)) {
            c.seqs = {{70, 1100}, {0, 0}, {128, 1300}, {1, 1000}};
          } else {
            c.seqs = random_prefill_seqs(3, 1, 300, 700, seed);
            c.seqs.insert(c.seqs.begin() + 1, SeqShape{1, 1});
          }
          g_choice = {precision_of(kind), schedule.schedule, row_sum.row_sum};
          expect_matches_reference(c, run_choice);
        }
      }
      ++seed;
    }
  }
}

// Soft-cap and a sliding window whose first KV tile is past 0 (the masked tiles' P = 0 join
// the sum as zeros), at head_dim 128 for every kind, either row sum, either schedule. FP8 P·V
// keeps the logits within +-5 (see SlidingWindowOverTheRing in prefill_hopper_ws_gpu_test.cu).
TEST(PrefillHopperRowSum, SoftCapAndWindowMatchReference) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 3200;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const RowSumCase& row_sum : kRowSums) {
      for (const ScheduleCase& schedule : kSchedules) {
        SCOPED_TRACE(str_cat(kind.name, ", ", row_sum.name, ", ", schedule.name));
        AttentionProblemConfig c = base_config(kind.dtypes, 128, seed);
        c.num_q_heads = 8;
        c.num_kv_heads = 2;
        c.page_size = 32;
        c.window_left = is_fp8_pv(kind) ? 900 : 300;
        c.logit_soft_cap = is_fp8_pv(kind) ? 5.0f : 30.0f;
        c.sm_scale = 0.3f;
        c.sinks = true;
        c.seqs = {{300, 2000}, {129, 1500}};
        g_choice = {precision_of(kind), schedule.schedule, row_sum.row_sum};
        expect_matches_reference(c, run_choice);
      }
    }
    ++seed;
  }
}

// With either row sum, the persistent kernel (twice), the persistent kernel on one CTA per
// item and the per-tile kernel write the same output and LSE bytes: the row sums are part of
// the arithmetic both kernels share. Soft-cap, window and sinks on, ~700 work items.
TEST(PrefillHopperRowSum, SchedulesAreBitIdenticalWithEitherSum) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 3300;
  for (const HopperKindCase& kind : kHopperKinds) {
    for (const RowSumCase& row_sum : kRowSums) {
      SCOPED_TRACE(str_cat(kind.name, ", ", row_sum.name));
      AttentionProblemConfig c = base_config(kind.dtypes, 128, seed);
      c.num_q_heads = 32;
      c.num_kv_heads = 8;
      c.page_size = 16;
      c.window_left = 700;
      c.logit_soft_cap = 30.0f;
      c.sinks = true;
      c.per_head_kv_scales = true;
      c.seqs = {{2000, 2400}, {1, 1}, {0, 0}, {130, 130}, {64, 2000}, {300, 800}, {7, 1500}};
      AttentionProblem problem(c);
      AttentionDeviceProblem device(problem);
      const auto run = [&](HopperSchedule schedule) {
        device.poison_outputs();
        g_choice = {precision_of(kind), schedule, row_sum.row_sum};
        run_choice(device.params(), nullptr);
        QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
        return std::make_pair(device.download_out(), device.download_lse());
      };
      const auto first = run(HopperSchedule::kPersistent);
      const std::pair<HopperSchedule, const char*> others[] = {
          {HopperSchedule::kPersistent, "persistent (again)"},
          {HopperSchedule::kOneItemPerCta, "one item per CTA"},
          {HopperSchedule::kPerTile, "per-tile kernel"}};
      for (const auto& [schedule, name] : others) {
        const auto again = run(schedule);
        EXPECT_TRUE(again.first == first.first) << name << ": output bytes differ from persistent";
        // Bytes, not floats: a NaN written by one schedule must match a NaN of the other.
        const bool same_lse =
            again.second.size() == first.second.size() &&
            (first.second.empty() || std::memcmp(again.second.data(), first.second.data(),
                                                 first.second.size() * sizeof(float)) == 0);
        EXPECT_TRUE(same_lse) << name << ": LSE bytes differ from persistent";
      }
    }
    ++seed;
  }
}

}  // namespace
}  // namespace quench::testing_support
