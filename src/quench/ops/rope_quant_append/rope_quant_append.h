// The fused GPU kernel of RoPE + quantize + paged KV append (SPEC §1, contract in
// rope_quant_append_params.h): one pass over q, k and v.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Empty when the fused kernel handles p (after check_rope_quant_append_gpu_params); otherwise why
// not. The unfused chain has the same coverage; the reason is for the backend's decision log.
std::string rope_quant_append_fused_unsupported_reason(const RopeQuantAppendParams& p);

// How the fused kernel schedules a token's row loads for batches past the decode-sized row-item
// kernel (T > 64). Both give bit-identical outputs (the same arithmetic per row).
enum class FusedRowSchedule : uint8_t {
  // One ring of 5-6 row loads per lane over the token's q, k and v rows, its token setup loads
  // issued before or after the first row loads (FusedSetupOrder).
  kRing,
  // q rows, then k rows, then v rows, each its own 3-deep stream started after the token's setup
  // (the kernel before the ring, kept for A/B measurements).
  kPerKind,
};

const char* fused_row_schedule_name(FusedRowSchedule schedule);  // "ring" | "per_kind"

// When the ring schedule issues a token's setup loads (slot, position, then cos/sin and norm
// weights) against its row loads. All give bit-identical outputs.
enum class FusedSetupOrder : uint8_t {
  // kSetupFirst when the grid fits in one wave of resident warps and splits each token over
  // several warps (T below ~4k tokens: every warp issues its few rows at the same moment, see
  // kSetupFirst), else kRowsFirst (one warp per token has rows enough to cover its setup loads;
  // warps of later waves start staggered). Measured on the H200 in one run (bench/LOG.md, fifth
  // session; Llama-3-8B / Qwen3-32B): setup-first 2.34 / 2.47 TB/s against 1.94 / 2.32 at
  // T = 1024 (4 warps per token), 1.06 / 1.24 against 0.98 / 1.15 at T = 256; rows-first 3.35
  // against 3.18 on Llama at T = 4096 (1 warp per token), where Qwen3 lost 2.5% (3.58 / 3.67).
  kAuto,
  // Slot and position first (waited for: a padding token then loads nothing), then the cos/sin
  // loads, then the row loads. In a one-wave batch every warp issues its rows at once, and the
  // memory queues they fill delay any load issued after them by most of the batch's read time:
  // the setup loads then returned only after nearly every row had, so the rows' processing and
  // their stores could not overlap the reads.
  kSetupFirst,
  // Rows first, then slot and position, then cos/sin (the ring before kSetupFirst, for A/B).
  kRowsFirst,
};

const char* fused_setup_order_name(FusedSetupOrder order);  // "auto" | "first" | "rows"

struct FusedRopeAppendOptions {
  FusedRowSchedule schedule = FusedRowSchedule::kRing;
  // Tokens split over several warps (batches below one wave of warps) ask L2 for their k/v rows,
  // and from 4 warps per token their q rows, before the token setup. Off: on the H200 the ring
  // schedule was as fast or faster without it at every T (Qwen3 T=1024: 13.7 vs 16.0 us).
  bool prefetch_split_tokens = false;
  FusedSetupOrder setup_order = FusedSetupOrder::kAuto;  // ring schedule only
};

// The options of rope_quant_append_cuda(p, stream): the defaults above, except that the
// environment may set QUENCH_ROPE_APPEND_SCHEDULE=per_kind, QUENCH_ROPE_APPEND_PREFETCH=1 and
// QUENCH_ROPE_APPEND_SETUP=first|rows (A/B switches for benchmarks). Read once per process.
FusedRopeAppendOptions fused_rope_append_options_from_env();

// Launches the fused kernel on `stream` (device pointers in p; per-head scales, if any, are
// device arrays). Throws quench::Error for invalid or unsupported params. No host sync; safe to
// capture in a CUDA graph. Tokens whose slot is -1 (or outside the cache), or whose position is
// outside the cos/sin cache, write nothing: no q row, no K/V.
void rope_quant_append_cuda(const RopeQuantAppendParams& p, cudaStream_t stream);
// The same with explicit options (tests and benchmarks compare the schedules in one process).
void rope_quant_append_cuda(const RopeQuantAppendParams& p, const FusedRopeAppendOptions& options,
                            cudaStream_t stream);

}  // namespace quench
