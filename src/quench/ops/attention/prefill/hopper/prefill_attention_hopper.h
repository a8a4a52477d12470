// The Hopper (sm_90a) prefill attention kernel on warpgroup MMA: FP8 e4m3 Q over an FP8 e4m3
// paged cache with FP8 Q·Kᵀ and 16-bit P·V (default) or FP8 P·V with two-level (per 128-key
// tile) fp32 accumulation; bf16 Q over a bf16 cache (bf16 operands), and bf16 Q over an FP8
// e4m3 cache (K and V widened to f16, Q converted to f16: f16 operands). Every head_dim runs the
// warp-specialized kernels (prefill_hopper_ws_kernel.cuh, prefill_hopper_persistent_kernel.cuh);
// head_dim 256 runs the synchronous one (prefill_attention_hopper_kernel.cuh) where
// HopperHeadDim256Kernel::kSynchronous or QUENCH_PREFILL_HD256=sync asks (the A/B baseline: 211
// against 382 TFLOP/s bf16 at b2 x 8k on the H200).
//
// Serves: an sm_90 device; q/KV fp8_e4m3/fp8_e4m3, bf16/bf16 or bf16/fp8_e4m3 (f16 and e5m2
// are not served); head_dim 128 (FP8 q) or 64/128/256 (bf16 q), NHD or HND, pages of
// 16/32/64; any GQA group; causal with a cached prefix, sliding window, soft-cap, sinks; output
// bf16 / fp8_e4m3 / fp8_e5m2 / nvfp4; optional LSE. Everything else gets a reason, and the
// caller falls back to the generic kernel (prefill_attention_generic.h).
// Numerics: FP8 Q·Kᵀ accumulates in fp32 on the tensor cores. 16-bit P·V: over a bf16 cache P
// rounded to bf16; over an FP8 cache P rounded to f16 and V widened exactly to f16; fp32
// accumulation. bf16 Q over FP8 KV: Q·Kᵀ on f16 (bf16 q -> f16 is exact, scaled per warp by a
// power of two where |q| >= 2^15), fp32 accumulation. FP8 P·V: P rounded to e4m3 (as
// P * 256, 3 mantissa bits), except on each work item's last two KV tiles, where P is two e4m3
// terms (within 2^-8): a row over at most 128 keys from its sequence's start has all of them
// there (one term missed the SPEC FP8 prefill tolerance on such rows by ~10%), a longer row at
// least a whole tile of one-term keys besides; GQA groups >= 2 without a sliding window take the
// last tile alone (rows over at most 128 - 128 / group keys stay all two-term); each tile's P·V
// accumulated on the tensor core, tiles joined in fp32 registers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Empty when the Hopper kernel serves `params` on the current CUDA device (host-side fields
// and the device's compute capability only); otherwise the reason, naming the bad value and
// the allowed ones.
std::string prefill_attention_hopper_unsupported_reason(const AttentionParams& params);

// Operand precision of P·V for an FP8 query (ignored for a bf16 query, whose P·V is bf16).
enum class HopperPvPrecision : uint8_t {
  kBf16,  // bf16 P and V: the accuracy of the generic kernel
  kFp8,   // e4m3 P and V, two-level accumulation: fewer tensor-core cycles, coarser P
};

// How the warp-specialized kernel covers the work items (tile of 128 packed query rows, KV head,
// sequence); the synchronous kernel (head_dim 256, see HopperHeadDim256Kernel) always runs one
// CTA per item. Results are bit-identical across schedules.
enum class HopperSchedule : uint8_t {
  kDefault,        // persistent_by_default (prefill_hopper_schedule.h: kPersistent for a bf16
                   // cache, kPerTile for an FP8 one); the environment may force
                   // QUENCH_PREFILL_PERSISTENT=0 (kPerTile), 1 or items
  kPersistent,     // one CTA per SM, each walking its share of the items, heaviest first
  kOneItemPerCta,  // the persistent kernel on one CTA per item (isolates the persistence)
  kPerTile,        // the non-persistent kernel (prefill_hopper_ws_kernel.cuh), one CTA per item
};

// Which kernel serves head_dim 256 (bf16 q; ignored at 64 and 128). The warp-specialized
// kernels serve it with 64-key tiles and a ring of two slots (1.5-1.8x the synchronous kernel
// on the H200). Results of the two agree within the SPEC tolerance, not bit for bit.
enum class HopperHeadDim256Kernel : uint8_t {
  kDefault,          // QUENCH_PREFILL_HD256=sync (kSynchronous) or =ws / unset (kWarpSpecialized)
  kSynchronous,      // prefill_attention_hopper_kernel.cuh, one CTA per item (schedule ignored)
  kWarpSpecialized,  // the schedule's warp-specialized kernel, as at head_dim 64 and 128
};

// Runs the prefill attention of params (device pointers) on `stream`. Throws quench::Error for
// an unsupported configuration (see above), a bad QUENCH_PREFILL_* value or a failed launch. No
// host synchronization.
void prefill_attention_hopper(
    const AttentionParams& params, cudaStream_t stream,
    HopperPvPrecision pv_precision = HopperPvPrecision::kBf16,
    HopperSchedule schedule = HopperSchedule::kDefault,
    HopperHeadDim256Kernel hd256_kernel = HopperHeadDim256Kernel::kDefault);

}  // namespace quench
