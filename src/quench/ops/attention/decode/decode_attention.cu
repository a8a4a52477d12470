// Host side of decode attention: validation, launch shape (pipeline depth, KV splits), dispatch
// to the instantiation for (head dim, KV dtype, query dtype), and the split-KV merge.
#include "quench/ops/attention/decode/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "quench/core/alignment.h"
#include "quench/core/cuda_device.h"
#include "quench/core/device_array_check.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/core/log.h"
#include "quench/kv_cache/kv_tensor_map_cache.h"
#include "quench/ops/attention/attention_launch_checks.h"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_split_plan.h"

namespace quench {
namespace {

using decode::choose_num_splits;
using decode::DecodeKernelArgs;
using decode::DecodeKernelInfo;
using decode::early_merge_launch_pays;
using decode::SmallGridRing;
using decode::split_target_ctas;

// Pipeline depth: at least kMinStages tiles (two in flight while one is consumed) where shared
// memory allows, at most kMaxStages; more CTAs per SM (up to what registers allow) come first,
// since their warps hide the latency of the FP8 conversions and MMAs. Two stages (one tile in
// flight per CTA) also do when the SM's CTAs together keep kMinBytesInFlightPerSm of KV loads
// in flight: at 4.8 TB/s over 132 SMs an SM drains ~36 bytes/ns, so 64 KiB covers ~1.8 us of
// DRAM latency. This lets hd128 FP8 run 4 CTAs x 2 stages (16 warps) instead of 3 x 3 (12).
constexpr int kMinStages = 3;
constexpr int kMinBytesInFlightPerSm = 64 * 1024;
constexpr int kMaxCtasPerSm = 4;

void check_cuda(cudaError_t status, const char* what) {
  QUENCH_REQUIRE(status == cudaSuccess, "decode attention: ", what,
                 " failed: ", cudaGetErrorString(status));
}

// tma: the variant with a producer warp loading K/V by tensor TMA (sm_90, head_dim 64 and 128;
// the instantiation falls back to the cp.async kernel elsewhere). swapped: its swapped-operand
// tile loop (query rows as the MMA's n8 side), for launches of at most kSwappedMaxRows query rows
// per request and KV head. wgmma_qk: that loop's Q K^T on FP8 wgmma where the instantiation
// has it (FP8 KV, bf16 q; info.wgmma_qk).
DecodeKernelInfo kernel_info(const AttentionParams& p, bool tma, bool swapped, bool wgmma_qk) {
  switch (p.kv.dtype) {
    case DType::kFP8E4M3:
      return decode::decode_kernel_info_kv_e4m3(p.kv.head_dim, p.q_dtype, tma, swapped, wgmma_qk);
    case DType::kFP8E5M2:
      return decode::decode_kernel_info_kv_e5m2(p.kv.head_dim, p.q_dtype, tma, swapped, wgmma_qk);
    default:
      return decode::decode_kernel_info_kv_bf16(p.kv.head_dim, p.q_dtype, tma, swapped, wgmma_qk);
  }
}

// QUENCH_DECODE_QK=mma|wgmma: how the swapped-operand loop multiplies Q K^T over an FP8 cache:
// K widened to f16 for mma.sync in the warps (mma, the default), or FP8 K straight from the
// stage on warpgroup MMA with q as two e4m3 terms (wgmma; decode_swapped_tile_loop.cuh). An A/B
// switch until the H200 has measured the wgmma form (bench/LOG.md).
bool wgmma_qk_requested() {
  static const bool requested = env_switch("QUENCH_DECODE_QK", {"mma", "wgmma"}) == "wgmma";
  return requested;
}

// Says once per process that QUENCH_DECODE_QK=wgmma met a launch it cannot serve (a bf16 cache,
// an f16 query, head_dim 256, a GPU other than sm_90, more query rows than the swapped loop
// holds), which then runs the default Q K^T: an A/B run should know which kernel it timed.
void note_wgmma_qk_not_taken(const AttentionParams& p, bool swapped) {
  static std::once_flag once;
  std::call_once(once, [&] {
    log_warning(str_cat("QUENCH_DECODE_QK=wgmma: this decode launch (KV ", dtype_name(p.kv.dtype),
                        ", q ", dtype_name(p.q_dtype), ", head_dim ", p.kv.head_dim,
                        swapped ? "" : ", not the sm_90 swapped-operand loop",
                        ") runs Q K^T on mma.sync; wgmma serves FP8 KV with a bf16 query at "
                        "head_dim 64/128 in the swapped loop on sm_90 (said once)"));
  });
}

// QUENCH_DECODE_SWAPPED=0: the row-major loop where the swapped-operand loop would run.
bool swapped_loop_allowed() {
  static const bool allowed = env_switch("QUENCH_DECODE_SWAPPED", {"1", "0"}) != "0";
  return allowed;
}

// QUENCH_DECODE_MERGE=grid|kernel|cta|auto: where split partials are merged (default: grid,
// the merge kernel after the main grid; auto: merge_place's per-launch rule).
DecodeSplitMerge merge_from_env() {
  static const DecodeSplitMerge merge = [] {
    const std::string value = env_switch("QUENCH_DECODE_MERGE", {"grid", "kernel", "cta", "auto"});
    if (value == "cta") return DecodeSplitMerge::kLastSplitCta;
    if (value == "kernel") return DecodeSplitMerge::kMergeKernel;
    if (value == "auto") return DecodeSplitMerge::kAuto;
    return DecodeSplitMerge::kMergeKernelAfterGrid;
  }();
  return merge;
}

// QUENCH_DECODE_SPLITS=1..64: the KV split count of every launch with KV tiles (an A/B switch;
// unset: choose_num_splits).
int32_t splits_from_env() {
  static const int32_t splits = env_switch_int("QUENCH_DECODE_SPLITS", 1, decode::kMaxSplits, 0);
  return splits;
}

// QUENCH_DECODE_SPLIT_CTAS=auto|1|2|3|4|fill: the CTAs per SM that small-batch launches split up
// to (default auto, see split_target_ctas; fill: every CTA slot). 0 = fill, -1 = auto.
int32_t split_ctas_per_sm_from_env() {
  static const int32_t ctas = [] {
    const std::string value =
        env_switch("QUENCH_DECODE_SPLIT_CTAS", {"auto", "1", "2", "3", "4", "fill"});
    if (value == "auto") return -1;
    return value == "fill" ? 0 : std::stoi(value);
  }();
  return ctas;
}

// QUENCH_DECODE_DEEP_RING (an A/B switch, read once): 0 kFullOccupancy, 1 kDeep for every stage
// size (the rule before the seventh session), unset or auto: default_small_grid_ring.
SmallGridRing small_grid_ring(int stage_bytes) {
  static const std::string value = env_switch("QUENCH_DECODE_DEEP_RING", {"auto", "0", "1"});
  if (value == "0") return SmallGridRing::kFullOccupancy;
  if (value == "1") return SmallGridRing::kDeep;
  return decode::default_small_grid_ring(stage_bytes);
}

// QUENCH_DECODE_GRID=splits: blockIdx.x = split (the KV heads of a split dispatched apart).
bool heads_fastest_grid() {
  static const bool heads = env_switch("QUENCH_DECODE_GRID", {"heads", "splits"}) != "splits";
  return heads;
}

// QUENCH_DECODE_STAGES=2..8: at most that many ring stages per CTA (an A/B switch: does less
// in flight per SM stream faster?); unset: no cap.
int max_stages_from_env() {
  static const int cap = env_switch_int("QUENCH_DECODE_STAGES", 2, decode::kMaxStages, 0);
  return cap;
}

// QUENCH_DECODE_PDL=1: the main kernel as a programmatic dependent launch of the kernel before
// it. Off by default: on the H200 it cost 3.5 us at B64 x 4k (1 split: the next call's CTAs
// launch early and hold SM slots while they wait) and ~1 us at B1 x 32k.
bool main_kernel_pdl_enabled() {
  static const bool enabled = env_switch("QUENCH_DECODE_PDL", {"0", "1"}) == "1";
  return enabled;
}

// QUENCH_DECODE_MERGE_EARLY=0: the merge kernel launches from the end of the main CTAs' tile
// loops (DecodeKernelArgs::early_merge_launch false), as before the merge's warm-up pass.
bool early_merge_launch_enabled() {
  static const bool enabled = env_switch("QUENCH_DECODE_MERGE_EARLY", {"1", "0"}) != "0";
  return enabled;
}

// Dynamic shared memory of a CTA with a ring of `stages` stages: the combine buffer reuses the
// pipeline buffers, so whichever is larger sizes the window.
int smem_bytes_for(const DecodeKernelInfo& info, int stages) {
  return info.fixed_bytes + std::max(stages * info.stage_bytes, info.combine_bytes);
}

// How one kernel runs on the current device: pipeline depth, shared memory, occupancy.
// num_stages / smem_bytes: at ctas_per_sm CTAs per SM (the most that fit). stages_at[k]
// (k = 1..the register limit's CTAs per SM): the deepest ring when at most k CTAs share an SM,
// never below num_stages, for launches whose grid leaves every SM fewer CTAs.
struct KernelLaunchConfig {
  int sm_count = 0;
  int ctas_per_sm = 0;
  int num_stages = 0;
  int smem_bytes = 0;
  int stages_at[kMaxCtasPerSm + 1] = {};
};

KernelLaunchConfig compute_launch_config(const DecodeKernelInfo& info, int device) {
  KernelLaunchConfig config;
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, info.fn), "cudaFuncGetAttributes");
  int regs_per_sm = 0, smem_per_sm = 0, smem_per_block = 0, reserved_per_block = 0;
  check_cuda(cudaDeviceGetAttribute(&config.sm_count, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(SM count)");
  check_cuda(cudaDeviceGetAttribute(&regs_per_sm, cudaDevAttrMaxRegistersPerMultiprocessor, device),
             "cudaDeviceGetAttribute(registers per SM)");
  check_cuda(
      cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
      "cudaDeviceGetAttribute(shared memory per SM)");
  check_cuda(
      cudaDeviceGetAttribute(&smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
      "cudaDeviceGetAttribute(shared memory per block)");
  check_cuda(
      cudaDeviceGetAttribute(&reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock, device),
      "cudaDeviceGetAttribute(reserved shared memory per block)");
  // Registers are allocated per thread in multiples of 8.
  const int regs_per_cta = (std::max(1, attributes.numRegs) + 7) / 8 * 8 * info.threads;
  const int max_ctas = std::clamp(regs_per_sm / regs_per_cta, 1, kMaxCtasPerSm);
  auto stages_for = [&](int ctas) {
    const int budget =
        std::min(smem_per_sm / ctas - reserved_per_block, smem_per_block) - info.fixed_bytes;
    return std::min(budget / info.stage_bytes, decode::kMaxStages);
  };
  for (int ctas = max_ctas; ctas >= 1; --ctas) {
    const int stages = stages_for(ctas);
    const bool enough_in_flight =
        stages >= 2 && ctas * (stages - 1) * info.stage_bytes >= kMinBytesInFlightPerSm;
    if (stages >= kMinStages || enough_in_flight || (ctas == 1 && stages >= 2)) {
      config.num_stages = stages;
      break;
    }
  }
  QUENCH_REQUIRE(config.num_stages >= 2, "decode attention: a ", info.stage_bytes,
                 "-byte pipeline stage does not fit twice in ", smem_per_block,
                 " bytes of shared memory");
  config.smem_bytes = smem_bytes_for(info, config.num_stages);
  // Deeper rings for fewer CTAs per SM, never shallower than the default. The attribute admits
  // the deepest (one CTA per SM); occupancy follows each launch's own size.
  int max_smem = config.smem_bytes;
  for (int ctas = 1; ctas <= max_ctas; ++ctas) {
    const int stages = std::max(stages_for(ctas), config.num_stages);
    config.stages_at[ctas] = stages;
    max_smem = std::max(max_smem, smem_bytes_for(info, stages));
  }
  check_cuda(cudaFuncSetAttribute(info.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem),
             "cudaFuncSetAttribute(max dynamic shared memory)");
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&config.ctas_per_sm, info.fn,
                                                           info.threads, config.smem_bytes),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return config;
}

// Computed once per (kernel, device): later calls, CUDA graph captures included, make no
// runtime calls besides cudaGetDevice.
KernelLaunchConfig launch_config(const DecodeKernelInfo& info, int device) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, KernelLaunchConfig> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(info.fn, device);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  const KernelLaunchConfig config = compute_launch_config(info, device);
  cache.emplace(key, config);
  return config;
}

struct LaunchShape {
  DecodeKernelInfo info;
  DecodeKernelArgs args;
  int32_t smem_bytes = 0;
  bool dependent_launch = false;  // sm_90+: both kernels as programmatic dependent launches
  int32_t sm_count = 0;
  int64_t slots = 0;          // CTAs the GPU holds at once (SMs x CTAs per SM)
  int64_t work_items = 0;     // (request, KV head, row group)
  int32_t rows_per_item = 0;  // query rows one CTA holds, at most
  dim3 grid;
};

LaunchShape launch_shape(const AttentionParams& p) {
  LaunchShape shape;
  const CudaDeviceProperties gpu = require_current_cuda_device_properties("decode attention");
  const int device = gpu.device;
  const int major = gpu.compute_capability_major;
  DecodeKernelArgs& args = shape.args;
  args.p = p;
  args.group = p.num_q_heads / p.kv.num_kv_heads;
  const bool tma = major == 9;
  const bool few_rows = static_cast<int64_t>(p.max_q_len) * args.group <= decode::kSwappedMaxRows;
  const bool swapped = tma && few_rows && swapped_loop_allowed();
  shape.info = kernel_info(p, tma, swapped, wgmma_qk_requested());
  if (wgmma_qk_requested() && !shape.info.wgmma_qk) note_wgmma_qk_not_taken(p, swapped);
  args.row_groups =
      std::max(1, (p.max_q_len * args.group + decode::kRowsPerCta - 1) / decode::kRowsPerCta);
  const KernelLaunchConfig config = launch_config(shape.info, device);
  args.num_stages = config.num_stages;
  shape.smem_bytes = config.smem_bytes;
  shape.dependent_launch = major >= 9;
  shape.sm_count = config.sm_count;
  const int64_t slots = static_cast<int64_t>(config.sm_count) * std::max(config.ctas_per_sm, 1);
  const int64_t base = static_cast<int64_t>(p.num_seqs) * p.kv.num_kv_heads * args.row_groups;
  // KV tokens one CTA may visit: the whole sequence, or the window (+1 tile of misalignment).
  int64_t visible = p.max_seq_len;
  if (p.window_left >= 0) {
    visible = std::min<int64_t>(
        visible, static_cast<int64_t>(p.window_left) + p.max_q_len + decode::kTileTokens);
  }
  const int64_t tiles = (visible + decode::kTileTokens - 1) / decode::kTileTokens;
  const int64_t target_ctas =
      split_target_ctas(base, slots, config.sm_count, tiles, split_ctas_per_sm_from_env());
  args.num_splits = static_cast<int32_t>(choose_num_splits(base, slots, target_ctas, tiles));
  if (splits_from_env() > 0 && base > 0 && tiles > 0) args.num_splits = splits_from_env();
  // A grid that leaves every SM fewer CTAs than fit takes small_grid_ring's depth.
  const int64_t grid_ctas = base * args.num_splits;
  shape.slots = slots;
  const int64_t ctas_per_sm = (grid_ctas + config.sm_count - 1) / std::max(config.sm_count, 1);
  decode::RingDepthInputs ring;
  ring.default_stages = config.num_stages;
  ring.occupancy_ctas = config.ctas_per_sm;
  ring.deepest_stages =
      ctas_per_sm >= 1 && ctas_per_sm <= kMaxCtasPerSm ? config.stages_at[ctas_per_sm] : 0;
  ring.ctas_per_sm = ctas_per_sm;
  ring.split_tiles = (tiles + args.num_splits - 1) / args.num_splits;
  ring.max_stages = max_stages_from_env();
  const int stages = decode::ring_stages(ring, small_grid_ring(shape.info.stage_bytes));
  if (stages != config.num_stages) {
    args.num_stages = stages;
    shape.smem_bytes = smem_bytes_for(shape.info, stages);
  }
  shape.work_items = base;
  shape.rows_per_item = std::min(p.max_q_len * args.group, decode::kRowsPerCta);
  args.heads_fastest = heads_fastest_grid();
  const auto splits = static_cast<unsigned>(args.num_splits);
  const auto heads = static_cast<unsigned>(p.kv.num_kv_heads);
  shape.grid = dim3(args.heads_fastest ? heads : splits, args.heads_fastest ? splits : heads,
                    static_cast<unsigned>(p.num_seqs * args.row_groups));
  return shape;
}

// Where a launch's split partials are merged (DecodeKernelArgs::merge_counters).
enum class MergePlace { kKernelAfterGrid, kKernelOnArrival, kLastSplitCta };

// Default (kDefault, QUENCH_DECODE_MERGE unset): the merge kernel after the main grid, as
// before the counters existed. The other places are opt-in until measured again: on the H200
// every one of them ran ~7 us slower per launch (B1 x 1k: 7.3 -> 14.9 us) while all of them
// merged with a multi-row merge whose ~100 KB of straight-line SASS each merging CTA fetched
// cold. The merge kernel now runs RowMerge's compact code (decode_row_merge.cuh); the last split
// CTA ran it once per row (~12 us slower than the default at B1 x 32k: rows one after another,
// a 36-register spill) and now merges all its rows at once (ItemMerge, decode_item_merge.cuh: no
// spill, ~2 L2 rounds at 32 splits); measured in the sixth session it is still 0.8-5 us slower
// than the merge kernel at every shape (B1 x 1k 8.7 vs 7.9 us, B1 x 32k 26.8 vs 25.0), and so is
// kAuto.
// kAuto: the last split CTA where a work item's rows x splits are few (4 rows x 16 splits at
// hd128: B4 x 32k and larger batches), the merge kernel elsewhere. The merge kernel's CTAs start
// on their rows' arrival counts where a (token, KV head) counter fits the counter block and a
// token's rows lie in one CTA, else after the main grid completes.
MergePlace merge_place(const LaunchShape& shape, DecodeSplitMerge merge) {
  const AttentionParams& p = shape.args.p;
  const bool item_counters = shape.work_items <= decode::kMaxMergeWorkItems;
  const bool token_counters =
      static_cast<int64_t>(p.num_tokens) * p.kv.num_kv_heads <= decode::kMaxMergeWorkItems &&
      (shape.args.row_groups == 1 || decode::kRowsPerCta % shape.args.group == 0);
  const MergePlace kernel =
      token_counters ? MergePlace::kKernelOnArrival : MergePlace::kKernelAfterGrid;
  if (merge == DecodeSplitMerge::kDefault) merge = merge_from_env();
  switch (merge) {
    case DecodeSplitMerge::kLastSplitCta:
      return item_counters ? MergePlace::kLastSplitCta : kernel;
    case DecodeSplitMerge::kMergeKernel:
      return kernel;
    case DecodeSplitMerge::kMergeKernelAfterGrid:
    case DecodeSplitMerge::kDefault:
      return MergePlace::kKernelAfterGrid;
    case DecodeSplitMerge::kAuto:
    default: {
      const int64_t few_floats = int64_t{decode::kThreads} * 16 * 4;  // 16 float4 per thread
      const bool few =
          int64_t{shape.rows_per_item} * shape.args.num_splits * p.kv.head_dim <= few_floats;
      return item_counters && few ? MergePlace::kLastSplitCta : kernel;
    }
  }
}

// Workspace layout (num_splits > 1): the merge counters [kMaxMergeWorkItems] uint32 at offset 0
// (a fixed block, so that calls of any shape sharing one workspace keep it zeroed), then
// partial_o and partial_lse (DecodeKernelArgs).
static_assert(kDecodeWorkspaceCounterBytes == decode::kMaxMergeWorkItems * sizeof(uint32_t));
size_t workspace_bytes_for(const AttentionParams& p, int32_t num_splits) {
  if (num_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(num_splits) * static_cast<size_t>(p.num_tokens) *
                      static_cast<size_t>(p.num_q_heads);
  return kDecodeWorkspaceCounterBytes +
         rows * (static_cast<size_t>(p.kv.head_dim) + 1) * sizeof(float);
}

}  // namespace

void validate_decode_attention_params(const AttentionParams& p) {
  p.kv.validate();
  QUENCH_REQUIRE(p.q_dtype == DType::kBF16 || p.q_dtype == DType::kF16,
                 "decode attention: query dtype ", dtype_name(p.q_dtype),
                 " is not supported; allowed: bf16, f16 (decode never takes an FP8 query)");
  QUENCH_REQUIRE(p.num_q_heads >= 1 && p.num_q_heads % p.kv.num_kv_heads == 0,
                 "decode attention: num_q_heads ", p.num_q_heads,
                 " must be a positive multiple of num_kv_heads ", p.kv.num_kv_heads);
  QUENCH_REQUIRE(p.out_dtype == DType::kBF16 || p.out_dtype == DType::kFP8E4M3 ||
                     p.out_dtype == DType::kFP8E5M2 || p.out_dtype == DType::kNVFP4,
                 "decode attention: output dtype ", dtype_name(p.out_dtype),
                 " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4");
  // Sizes, scales, soft-cap, window and output fields as the reference checks them, and the
  // arrays present.
  validate_attention_launch(p, "decode attention");
  if (p.num_seqs == 0) return;
  require_aligned_device_array(p.q, "decode attention", "q");
  require_aligned_device_array(p.k_cache, "decode attention", "k_cache");
  require_aligned_device_array(p.v_cache, "decode attention", "v_cache");
  // The outputs are buffers of their own: the split merge may write them (its warm-up pass, see
  // decode_merge.cu) while the main kernel still reads q.
  const size_t row_elems = static_cast<size_t>(p.num_tokens) * static_cast<size_t>(p.num_q_heads) *
                           static_cast<size_t>(p.kv.head_dim);
  const auto* q_begin = static_cast<const uint8_t*>(p.q);
  const size_t q_bytes = dtype_bytes(p.q_dtype, row_elems);
  const auto apart_from_q = [&](const void* begin, size_t bytes) {
    const auto* b = static_cast<const uint8_t*>(begin);
    return b + bytes <= q_begin || q_begin + q_bytes <= b;
  };
  if (p.out != nullptr) {
    require_aligned_device_array(p.out, "decode attention", "out");
    QUENCH_REQUIRE(apart_from_q(p.out, dtype_bytes(p.out_dtype, row_elems)),
                   "decode attention: out overlaps q; allowed: an output buffer apart from the "
                   "query (no in-place attention)");
  }
  if (p.out_fp8.requested()) {
    // The epilogue quantizes a row's quads in one warp: a 128-column group is one q head's row.
    QUENCH_REQUIRE(p.kv.head_dim == 128 && p.out_fp8.group == 128, "decode attention: out_fp8 ",
                   "with group ", p.out_fp8.group, " at head_dim ", p.kv.head_dim,
                   " is not supported; allowed: group 128 at head_dim 128 (one group per q head)");
    const size_t groups = row_elems / 128;
    QUENCH_REQUIRE(apart_from_q(p.out_fp8.data, row_elems) &&
                       apart_from_q(p.out_fp8.scales, groups * sizeof(float)),
                   "decode attention: out_fp8 overlaps q; allowed: buffers apart from the query");
  }
  const int64_t row_groups =
      (static_cast<int64_t>(p.max_q_len) * (p.num_q_heads / p.kv.num_kv_heads) +
       decode::kRowsPerCta - 1) /
      decode::kRowsPerCta;
  QUENCH_REQUIRE(p.num_seqs * std::max<int64_t>(row_groups, 1) <= 65535,
                 "decode attention: num_seqs ", p.num_seqs, " x query-row groups ", row_groups,
                 " exceeds the grid limit 65535");
}

int decode_attention_num_splits(const AttentionParams& params) {
  validate_decode_attention_params(params);
  if (params.num_seqs == 0) return 1;
  return launch_shape(params).args.num_splits;
}

size_t decode_attention_workspace_bytes(const AttentionParams& params) {
  return workspace_bytes_for(params, decode_attention_num_splits(params));
}

void decode_attention(const AttentionParams& params, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  decode_attention(params, workspace, workspace_bytes, stream, DecodeSplitMerge::kDefault);
}

void decode_attention(const AttentionParams& params, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream, DecodeSplitMerge merge) {
  validate_decode_attention_params(params);
  if (params.num_seqs == 0 || params.num_tokens == 0) return;
  LaunchShape shape = launch_shape(params);
  DecodeKernelArgs& args = shape.args;
  if (workspace == nullptr) {
    args.num_splits = 1;
    (args.heads_fastest ? shape.grid.y : shape.grid.x) = 1;
  } else if (args.num_splits > 1) {
    const size_t needed = workspace_bytes_for(params, args.num_splits);
    QUENCH_REQUIRE(workspace_bytes >= needed, "decode attention: workspace of ", workspace_bytes,
                   " bytes is too small; ", needed, " needed for ", args.num_splits,
                   " KV splits (see decode_attention_workspace_bytes)");
    QUENCH_REQUIRE(aligned16(workspace), "decode attention: workspace must be 16-byte aligned");
    auto* base = static_cast<uint8_t*>(workspace);
    const MergePlace place = merge_place(shape, merge);
    if (place != MergePlace::kKernelAfterGrid) {
      args.merge_counters = reinterpret_cast<uint32_t*>(base);
      args.last_split_merges = place == MergePlace::kLastSplitCta;
    }
    // The merge launched early where its warm-up can overlap the main grid (see
    // early_merge_launch_pays).
    args.early_merge_launch =
        shape.dependent_launch && args.merge_counters == nullptr &&
        early_merge_launch_pays(
            static_cast<int64_t>(shape.grid.x) * shape.grid.y * shape.grid.z, shape.slots,
            static_cast<int64_t>(params.num_tokens) * params.num_q_heads, shape.sm_count) &&
        early_merge_launch_enabled();
    args.partial_o = reinterpret_cast<float*>(base + kDecodeWorkspaceCounterBytes);
    args.partial_lse = args.partial_o + static_cast<size_t>(args.num_splits) *
                                            static_cast<size_t>(params.num_tokens) *
                                            static_cast<size_t>(params.num_q_heads) *
                                            static_cast<size_t>(params.kv.head_dim);
  }
  // The TMA kernel's maps travel by value in the kernel parameters (CUDA graphs capture them);
  // the cp.async kernel takes a zeroed, unused pair.
  KvTensorMaps maps{};
  if (shape.info.tma) maps = cached_kv_tensor_maps(params.k_cache, params.v_cache, params.kv);
  void* kernel_args[] = {&args, &maps};
  // sm_90+ with QUENCH_DECODE_PDL=1: a programmatic dependent launch, so that the launch and the
  // prologue before wait_for_primary_grid (barrier init, tensor-map prefetch) overlap the previous
  // kernel's end.
  cudaLaunchConfig_t config = {};
  config.gridDim = shape.grid;
  config.blockDim = dim3(static_cast<unsigned>(shape.info.threads));
  config.dynamicSmemBytes = static_cast<size_t>(shape.smem_bytes);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = shape.dependent_launch && main_kernel_pdl_enabled() ? 1 : 0;
  check_cuda(cudaLaunchKernelExC(&config, shape.info.fn, kernel_args), "decode kernel launch");
  if (args.num_splits > 1 && !args.last_split_merges) {
    decode::launch_decode_merge(args, shape.dependent_launch, stream);
  }
}

}  // namespace quench
