// Host launcher of the Hopper prefill kernels: support check (device architecture, dtypes,
// head_dim, page size, GQA), dispatch on the operand kind, head_dim, soft-capping on / off and
// kernel (the persistent warp-specialized kernel, or the per-tile one, by schedule; at head_dim
// 256 the synchronous one where HopperHeadDim256Kernel or QUENCH_PREFILL_HD256=sync asks) and
// grid (persistent: one CTA per SM; per tile: query tiles of 128 packed rows, KV heads,
// sequences).
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

#include <algorithm>
#include <optional>
#include <string>

#include "quench/core/cuda_device.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/kv_cache/kv_tensor_map_cache.h"
#include "quench/ops/attention/attention_launch_checks.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper_kernel.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_persistent_kernel.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_kernel.cuh"
#include "quench/ops/attention/prefill/prefill_launch.h"

namespace quench {
namespace {

// Empty when the current device is an sm_90 (Hopper) GPU, else why not.
std::string device_unsupported_reason() {
  std::string error;
  const std::optional<CudaDeviceProperties> gpu = current_cuda_device_properties(&error);
  if (!gpu) return str_cat(error, "; the Hopper kernel needs an sm_90 GPU");
  if (gpu->compute_capability_major != 9 || gpu->compute_capability_minor != 0) {
    return str_cat("device compute capability ", gpu->compute_capability_major, ".",
                   gpu->compute_capability_minor,
                   " is not supported; allowed: 9.0 (sm_90a, Hopper)");
  }
  return {};
}

using prefill_hopper::HopperKind;

// The schedule QUENCH_PREFILL_PERSISTENT forces (an A/B switch for benchmarks and tests, read
// once, not on every launch): 0 kPerTile, 1 kPersistent, items kOneItemPerCta; auto (or unset)
// kDefault.
HopperSchedule schedule_from_env() {
  static const HopperSchedule forced = [] {
    const std::string value = env_switch("QUENCH_PREFILL_PERSISTENT", {"auto", "0", "1", "items"});
    if (value == "0") return HopperSchedule::kPerTile;
    if (value == "1") return HopperSchedule::kPersistent;
    if (value == "items") return HopperSchedule::kOneItemPerCta;
    return HopperSchedule::kDefault;
  }();
  return forced;
}

// Whether the persistent schedule cuts its (sequence, KV head) pairs into L2-sized groups
// (prefill_hopper_schedule.h; read once): QUENCH_PREFILL_ITEM_GROUPS=l2 (the default) or all (one
// group, the heaviest items of the whole batch first). Measured on the H200 (bench/LOG.md, fifth
// session): l2 gains 10-11% on bf16 at 1k tokens and 2-6% at 2k-8k, and is even elsewhere.
bool l2_groups_from_env() {
  static const bool l2_groups = env_switch("QUENCH_PREFILL_ITEM_GROUPS", {"l2", "all"}) != "all";
  return l2_groups;
}

// How the persistent schedule deals a group's items to the CTAs over a bf16 cache
// (prefill_hopper_schedule.h; the FP8-KV kernels always take round robin, see ws_next_item):
// QUENCH_PREFILL_ITEM_ORDER=snake (alternating directions) or round_robin (CTA b takes items b,
// b + ctas, ...) for every launch, the A/B switch (read once); auto (or unset), default_item_order
// by chunk length. H200, bf16 hd128 (bench/LOG.md, eleventh session), snake / round robin TFLOP/s:
// page 16 4k 530 / 521, 8k 591 / 577, 16k page 64 626 / 617, 2k page 64 456 / 449, 1k 340 / 343.
prefill_hopper::WsItemOrder item_order(int max_q_len) {
  static const std::string forced =
      env_switch("QUENCH_PREFILL_ITEM_ORDER", {"auto", "snake", "round_robin"});
  if (forced == "snake") return prefill_hopper::WsItemOrder::kSnake;
  if (forced == "round_robin") return prefill_hopper::WsItemOrder::kRoundRobin;
  return prefill_hopper::default_item_order(max_q_len);
}

// The head_dim 256 kernel QUENCH_PREFILL_HD256 asks for (an A/B switch, read once): ws (or
// unset) the warp-specialized ones, sync the synchronous kernel. Measured on the H200 (sixth
// session, b2 x 8k causal page 16): bf16 382 TFLOP/s per tile against 211 synchronous, bf16 q
// over FP8 KV 335 against 230.
HopperHeadDim256Kernel hd256_kernel_from_env() {
  static const HopperHeadDim256Kernel kernel =
      env_switch("QUENCH_PREFILL_HD256", {"ws", "sync"}) == "sync"
          ? HopperHeadDim256Kernel::kSynchronous
          : HopperHeadDim256Kernel::kWarpSpecialized;
  return kernel;
}

// kDefault resolved: the caller's choice, else the environment's, else the warp-specialized
// kernels.
bool hd256_synchronous(HopperHeadDim256Kernel kernel) {
  if (kernel == HopperHeadDim256Kernel::kDefault) kernel = hd256_kernel_from_env();
  return kernel == HopperHeadDim256Kernel::kSynchronous;
}

// kDefault resolved: the environment's choice, else persistent_by_default
// (prefill_hopper_schedule.h).
HopperSchedule resolve_schedule(HopperSchedule schedule, const AttentionParams& params) {
  if (schedule != HopperSchedule::kDefault) return schedule;
  if (const HopperSchedule forced = schedule_from_env(); forced != HopperSchedule::kDefault) {
    return forced;
  }
  const bool bf16_over_bf16 = params.q_dtype == DType::kBF16 && params.kv.dtype == DType::kBF16;
  return prefill_hopper::persistent_by_default(bf16_over_bf16, params.kv.head_dim,
                                               params.kv.page_size, params.max_q_len,
                                               params.logit_soft_cap > 0.0f)
             ? HopperSchedule::kPersistent
             : HopperSchedule::kPerTile;
}

// Whether FP8 P·V takes two-term P on each work item's second-to-last KV tile as well as its
// last (ws_two_term_tail, prefill_hopper_ws_consumer.cuh). Two-term P on the last tile alone keeps
// every row over at most 128 - 128 / group keys from its sequence's start all two-term (its item
// then fits one tile): enough where group >= 2 (rows over a handful of keys are what one-term P
// fails on) and no sliding window cuts rows short, and it keeps the tile loop's code as it is
// (H200: the held second term cost 3.5% at 8k-16k, 7% at 1k; bench/LOG.md, 2026-12-04). MHA
// (an item spans 128 positions, so a row after a short prefix can have a handful of keys in the
// second-to-last tile) and sliding windows take both tiles.
bool two_term_prev_tile(const AttentionParams& params) {
  return params.num_q_heads == params.kv.num_kv_heads || params.window_left >= 0;
}

// The persistent kernel (prefill_hopper_persistent_kernel.cuh) on a 1-D grid: one CTA per SM
// (kPersistent) or per work item (kOneItemPerCta), never more CTAs than items.
template <HopperKind kKind, int kHeadDim, bool kSoftCap, bool kTwoTermPrev>
void launch_persistent(const AttentionParams& params, HopperSchedule schedule,
                       cudaStream_t stream) {
  using Cfg = prefill_hopper::WsConfig<kKind, kHeadDim>;
  const auto kernel = reinterpret_cast<const void*>(
      prefill_hopper::prefill_attention_hopper_persistent_kernel<kKind, kHeadDim, kSoftCap,
                                                                 kTwoTermPrev>);
  static const cudaError_t reserve_status =
      prefill_common::reserve_shared_memory(kernel, Cfg::kSmemBytes, /*max_carveout=*/false);
  QUENCH_REQUIRE(reserve_status == cudaSuccess, "prefill_attention_hopper: cannot reserve ",
                 Cfg::kSmemBytes, " bytes of shared memory: ", cudaGetErrorString(reserve_status));
  const int count = prefill_hopper::ws_schedule_size(
      params.max_q_len, params.num_q_heads, params.kv.num_kv_heads, params.num_seqs, Cfg::kBlockM);
  const int sm_count = require_current_cuda_device_properties("prefill_attention_hopper").sm_count;
  const int ctas = schedule == HopperSchedule::kPersistent ? std::min(count, sm_count) : count;
  prefill_hopper::WsItems items = prefill_hopper::ws_items(
      params.max_q_len, params.max_seq_len, params.num_q_heads, params.kv.num_kv_heads,
      params.num_seqs, params.kv.head_dim, Cfg::Tile::kKvBytes, Cfg::kBlockM, ctas,
      l2_groups_from_env(), item_order(params.max_q_len));
  AttentionParams args = params;
  KvTensorMaps maps = cached_kv_tensor_maps(params.k_cache, params.v_cache, params.kv);
  void* kernel_args[] = {&args, &maps, &items};
  const cudaError_t status = cudaLaunchKernel(
      kernel, dim3(static_cast<unsigned>(ctas)), dim3(static_cast<unsigned>(Cfg::kThreads)),
      kernel_args, static_cast<size_t>(Cfg::kSmemBytes), stream);
  QUENCH_REQUIRE(status == cudaSuccess,
                 "prefill_attention_hopper: launch failed: ", cudaGetErrorString(status));
}

// The synchronous kernel (head_dim 256 only): the baseline of the QUENCH_PREFILL_HD256 A/B
// against the warp-specialized kernels.
template <HopperKind kKind, int kHeadDim, bool kSoftCap>
void launch_synchronous(const AttentionParams& params, cudaStream_t stream) {
  using Cfg = prefill_hopper::HopperConfig<kKind, kHeadDim>;
  const auto kernel = prefill_hopper::prefill_attention_hopper_kernel<kKind, kHeadDim, kSoftCap>;
  static const cudaError_t reserve_status =
      prefill_common::reserve_shared_memory(kernel, Cfg::kSmemBytes, /*max_carveout=*/false);
  prefill_common::launch_on_query_tiles(kernel, "prefill_attention_hopper", reserve_status,
                                        Cfg::kBlockM, Cfg::kThreads, Cfg::kSmemBytes, params,
                                        stream);
}

// The warp-specialized kernels (persistent, or prefill_hopper_ws_kernel.cuh per tile), which
// load K and V through TMA maps (encoded once per cache tensor pair and layout, then looked up;
// they travel by value in the kernel parameters, so CUDA graphs capture them). At head_dim 256
// (64-key tiles, 64 KB of Q) their ring has two slots (prefill_hopper_ws_config.cuh); they serve
// it unless hd256_kernel (or QUENCH_PREFILL_HD256=sync) asks for the synchronous kernel.
template <HopperKind kKind, int kHeadDim, bool kSoftCap, bool kTwoTermPrev>
void launch_warp_specialized(const AttentionParams& params, HopperSchedule schedule,
                             cudaStream_t stream) {
  if (schedule != HopperSchedule::kPerTile) {
    return launch_persistent<kKind, kHeadDim, kSoftCap, kTwoTermPrev>(params, schedule, stream);
  }
  using Cfg = prefill_hopper::WsConfig<kKind, kHeadDim>;
  const auto kernel = reinterpret_cast<const void*>(
      prefill_hopper::prefill_attention_hopper_ws_kernel<kKind, kHeadDim, kSoftCap, kTwoTermPrev>);
  static const cudaError_t reserve_status =
      prefill_common::reserve_shared_memory(kernel, Cfg::kSmemBytes, /*max_carveout=*/false);
  AttentionParams args = params;
  KvTensorMaps maps = cached_kv_tensor_maps(params.k_cache, params.v_cache, params.kv);
  // KV heads first where a sequence's K/V is small (per_tile_heads_first; ws_work says why) and
  // the query tiles fit the grid's y dimension.
  const bool small_kv = prefill_hopper::per_tile_heads_first(
      params.max_seq_len, params.kv.head_dim, Cfg::Tile::kKvBytes, params.kv.num_kv_heads);
  int heads_first =
      small_kv && prefill_common::query_tile_count(params, Cfg::kBlockM) <= 65535 ? 1 : 0;
  void* kernel_args[] = {&args, &maps, &heads_first};
  prefill_common::launch_on_query_tiles(kernel, kernel_args, "prefill_attention_hopper",
                                        reserve_status, Cfg::kBlockM, Cfg::kThreads,
                                        Cfg::kSmemBytes, params, stream,
                                        heads_first ? prefill_common::QueryTileGrid::kHeadsFirst
                                                    : prefill_common::QueryTileGrid::kTilesFirst);
}

// The synchronous kernel at head_dim 256 where asked, else the warp-specialized ones, for FP8
// P·V with two-term P on one or two tiles (two_term_prev_tile).
template <HopperKind kKind, int kHeadDim, bool kSoftCap>
void launch_kernel(const AttentionParams& params, HopperSchedule schedule,
                   HopperHeadDim256Kernel hd256_kernel, cudaStream_t stream) {
  if constexpr (kHeadDim == 256) {
    if (hd256_synchronous(hd256_kernel)) {
      return launch_synchronous<kKind, kHeadDim, kSoftCap>(params, stream);
    }
  }
  if constexpr (kKind == HopperKind::kFp8) {
    if (!two_term_prev_tile(params)) {
      return launch_warp_specialized<kKind, kHeadDim, kSoftCap, false>(params, schedule, stream);
    }
  }
  return launch_warp_specialized<kKind, kHeadDim, kSoftCap, true>(params, schedule, stream);
}

// Soft-capping is a kernel template parameter: a runtime switch inside the unrolled softmax
// made the compiler keep a copy of the body per combination with masking (instruction-cache
// stalls).
template <HopperKind kKind, int kHeadDim>
void launch(const AttentionParams& params, HopperSchedule schedule,
            HopperHeadDim256Kernel hd256_kernel, cudaStream_t stream) {
  if (params.logit_soft_cap > 0.0f) {
    return launch_kernel<kKind, kHeadDim, true>(params, schedule, hd256_kernel, stream);
  }
  return launch_kernel<kKind, kHeadDim, false>(params, schedule, hd256_kernel, stream);
}

template <HopperKind kKind>
void dispatch_head_dim(const AttentionParams& params, HopperSchedule schedule,
                       HopperHeadDim256Kernel hd256_kernel, cudaStream_t stream) {
  switch (params.kv.head_dim) {
    case 64:
      return launch<kKind, 64>(params, schedule, hd256_kernel, stream);
    case 128:
      return launch<kKind, 128>(params, schedule, hd256_kernel, stream);
    default:
      return launch<kKind, 256>(params, schedule, hd256_kernel, stream);
  }
}

}  // namespace

std::string prefill_attention_hopper_unsupported_reason(const AttentionParams& params) {
  const DType q = params.q_dtype;
  const DType kv = params.kv.dtype;
  const bool served = (q == DType::kFP8E4M3 && kv == DType::kFP8E4M3) ||
                      (q == DType::kBF16 && (kv == DType::kBF16 || kv == DType::kFP8E4M3));
  if (!served) {
    return str_cat("q dtype ", dtype_name(q), " over kv dtype ", dtype_name(kv),
                   " is not supported; allowed (q over kv): fp8_e4m3 over fp8_e4m3, bf16 over "
                   "bf16, bf16 over fp8_e4m3");
  }
  const int head_dim = params.kv.head_dim;
  if (q == DType::kFP8E4M3 && head_dim != 128) {
    return str_cat("head_dim=", head_dim, " is not supported with an fp8_e4m3 query; allowed: 128");
  }
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    return str_cat("head_dim=", head_dim, " is not supported; allowed: 64, 128, 256");
  }
  const int page = params.kv.page_size;
  if (page != 16 && page != 32 && page != 64) {
    return str_cat("page_size=", page, " is not supported; allowed: 16, 32, 64");
  }
  if (params.out_fp8.requested()) {
    return "out_fp8 (the o projection's e4m3 rows) is not written by prefill kernels; allowed: "
           "none (quantize the bf16 output), or a decode batch";
  }
  const DType out = params.out_dtype;
  if (out != DType::kBF16 && !is_fp8(out) && out != DType::kNVFP4) {
    return str_cat("out dtype ", dtype_name(out),
                   " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4");
  }
  if (params.kv.num_kv_heads <= 0 || params.num_q_heads <= 0 ||
      params.num_q_heads % params.kv.num_kv_heads != 0) {
    return str_cat("num_q_heads=", params.num_q_heads,
                   " must be a positive multiple of num_kv_heads=", params.kv.num_kv_heads);
  }
  if (out == DType::kNVFP4 && params.out_block_scales == nullptr) {
    return "nvfp4 output needs out_block_scales";
  }
  return device_unsupported_reason();
}

void prefill_attention_hopper(const AttentionParams& params, cudaStream_t stream,
                              HopperPvPrecision pv_precision, HopperSchedule schedule,
                              HopperHeadDim256Kernel hd256_kernel) {
  validate_attention_launch(params, "prefill_attention_hopper");
  const std::string reason = prefill_attention_hopper_unsupported_reason(params);
  QUENCH_REQUIRE(reason.empty(), "prefill_attention_hopper: ", reason);
  if (params.num_seqs == 0 || params.max_q_len == 0) return;
  const HopperSchedule resolved = resolve_schedule(schedule, params);
  if (params.q_dtype == DType::kFP8E4M3) {
    if (pv_precision == HopperPvPrecision::kFp8) {
      return launch<HopperKind::kFp8, 128>(params, resolved, hd256_kernel, stream);
    }
    return launch<HopperKind::kFp8QkF16Pv, 128>(params, resolved, hd256_kernel, stream);
  }
  if (params.kv.dtype == DType::kBF16) {
    return dispatch_head_dim<HopperKind::kBf16>(params, resolved, hd256_kernel, stream);
  }
  return dispatch_head_dim<HopperKind::kBf16QFp8Kv>(params, resolved, hd256_kernel, stream);
}

}  // namespace quench
