#include "quench/ops/attention/decode/decode_split_plan.h"

#include <algorithm>
#include <cmath>

#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {

int64_t choose_num_splits(int64_t base, int64_t slots, int64_t target_ctas, int64_t tiles) {
  if (base <= 0 || tiles <= 0) return 1;
  if (base < slots) {
    const int64_t splits = std::max<int64_t>(
        1, std::min({target_ctas / base, tiles / kMinTilesPerSplit, int64_t{kMaxSplits}}));
    const int64_t tiles_per_split = (tiles + splits - 1) / splits;
    return std::max<int64_t>(1, (tiles + tiles_per_split - 1) / tiles_per_split);
  }
  auto wave_efficiency = [&](int64_t splits) {
    const double waves = static_cast<double>(base * splits) / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  int64_t best = 1;
  for (int64_t splits = 2; splits <= 3 && tiles / splits >= kMinTilesPerLongSplit; ++splits) {
    if (wave_efficiency(splits) > wave_efficiency(best) + 0.05) best = splits;
  }
  return best;
}

SmallGridRing default_small_grid_ring(int32_t stage_bytes) {
  return stage_bytes <= kShallowRingMaxStageBytes ? SmallGridRing::kShallow : SmallGridRing::kDeep;
}

namespace {

// ring_stages before the cap.
int32_t uncapped_ring_stages(const RingDepthInputs& in, SmallGridRing ring) {
  const bool small_grid = in.ctas_per_sm >= 1 && in.ctas_per_sm < in.occupancy_ctas;
  if (!small_grid) return in.default_stages;
  switch (ring) {
    case SmallGridRing::kShallow:
      return std::min(2, in.default_stages);
    case SmallGridRing::kDeep:
      if (in.deepest_stages <= in.default_stages) return in.default_stages;
      return static_cast<int32_t>(
          std::clamp<int64_t>(in.split_tiles, in.default_stages, in.deepest_stages));
    case SmallGridRing::kFullOccupancy:
      break;
  }
  return in.default_stages;
}

}  // namespace

int32_t ring_stages(const RingDepthInputs& in, SmallGridRing ring) {
  const int32_t stages = uncapped_ring_stages(in, ring);
  return in.max_stages > 0 ? std::min(stages, in.max_stages) : stages;
}

int64_t split_target_ctas(int64_t base, int64_t slots, int32_t sm_count, int64_t tiles,
                          int32_t split_ctas) {
  const int64_t per_sm_target =
      std::min<int64_t>(slots, int64_t{sm_count} * (split_ctas > 0 ? split_ctas : kSplitCtasPerSm));
  if (split_ctas > 0) return per_sm_target;
  if (split_ctas == 0 || base <= 0 || tiles <= 0) return slots;
  const int64_t fill_splits = choose_num_splits(base, slots, slots, tiles);
  return tiles / fill_splits < kMinTilesPerFillSplit ? per_sm_target : slots;
}

bool early_merge_launch_pays(int64_t grid_ctas, int64_t slots, int64_t merge_rows,
                             int32_t sm_count) {
  return grid_ctas < slots && merge_rows <= sm_count;
}

}  // namespace quench::decode
