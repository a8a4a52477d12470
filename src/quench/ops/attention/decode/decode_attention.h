// GPU decode attention over the paged KV cache (SPEC §1; contract: attention_params.h).
//
// Query bf16 or f16 [num_tokens, num_q_heads, head_dim] (never cast to FP8); K/V bf16, fp8_e4m3
// or fp8_e5m2, NHD or HND, pages of 16/32/64 tokens, head_dim 64/128/256; any GQA group (all q
// heads of a KV head share one read of K/V for up to 16 query rows = group x query tokens per
// request, e.g. group 16 x 1 token or group 4 x 4 speculative tokens); 1..n query tokens per
// request, causal among themselves; per-tensor or per-KV-head k/v scales; sliding window,
// logit soft-cap, sinks; output bf16, FP8 (o / o_scale) or NVFP4 written by the epilogue;
// optional lse. Requests with seq_len 0 and no query tokens (graph padding) cost one early exit.
//
// Everything per request is read on the device (q_offsets, seq_lens, block_table), so a launch
// can be captured in a CUDA graph; the host only derives the grid (and the KV split count) from
// num_seqs, num_kv_heads, max_q_len, max_seq_len and the device's SM count. To capture one graph
// for many steps, pass the largest max_seq_len (and max_q_len) the graph will see.
//
// Split-KV partials are merged by a separate merge kernel after the main grid (the default), or
// (opt-in) by the last split CTA of each (request, KV head, row group) inside the main kernel,
// or by the merge kernel whose CTAs start on their rows' split arrival counts; decode_attention.cu
// says why and when.
//
// Benchmark A/B switches (environment, read once per process; a bad value throws):
//   QUENCH_DECODE_SWAPPED=0          the row-major tile loop where the swapped one would run
//   QUENCH_DECODE_MERGE=grid|kernel|cta|auto  where split partials are merged (default: grid)
//   QUENCH_DECODE_SPLITS=1..64       the split count of every launch with KV tiles
//   QUENCH_DECODE_SPLIT_CTAS=auto|1|2|3|4|fill  CTAs per SM that small batches split up to
//                                    (default auto: 2, or every slot where that leaves splits
//                                    of 32 tiles or more; fill: every CTA slot)
//   QUENCH_DECODE_DEEP_RING=auto|0|1 the ring depth where the grid leaves room for a deeper
//                                    one (default auto: 2 stages for 16 KB tiles, the deepest
//                                    ring for larger; 0: full-occupancy depth; 1: deepest)
//   QUENCH_DECODE_STAGES=2..8        at most that many ring stages in every launch
//   QUENCH_DECODE_GRID=splits        blockIdx.x = split instead of KV head
//   QUENCH_DECODE_PDL=1              the main kernel as a programmatic dependent launch
//   QUENCH_DECODE_QK=mma|wgmma       the swapped loop's Q K^T over FP8 KV (bf16 q): mma.sync
//                                    on K widened to f16 (default), or FP8 wgmma on K as cached
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Throws quench::Error naming the first field the decode kernel does not support.
void validate_decode_attention_params(const AttentionParams& params);

// How many CTAs split each request's KV sequence (1 = no split; > 1 when num_seqs x num_kv_heads
// does not fill the GPU). Depends only on shapes and the current device.
int decode_attention_num_splits(const AttentionParams& params);

// Device scratch decode_attention needs for its split-KV partials (0 when it does not split).
// Its first kDecodeWorkspaceCounterBytes hold the in-kernel merge's arrival counters, which
// must be zero before the first call: zero the workspace once when it is allocated
// (cudaMemset(workspace, 0, bytes)). Every call returns them to zero, so one workspace serves
// any number of calls and CUDA graph replays, of any shapes, one stream at a time.
size_t decode_attention_workspace_bytes(const AttentionParams& params);

// The zeroed counter block at the start of a workspace (when its size is not 0).
inline constexpr size_t kDecodeWorkspaceCounterBytes = 16384;

// Where split-KV partials are merged. kDefault: as QUENCH_DECODE_MERGE says (unset: like
// kMergeKernelAfterGrid); tests force each place. kMergeKernelAfterGrid: the merge kernel, after
// the main grid completes. kMergeKernel: the merge kernel, each row as soon as its splits have
// counted in (where the counters fit, else after the main grid). kLastSplitCta: the last split
// CTA of each work item (launches with more work items than the counter block holds use the
// merge kernel). kAuto: per launch, the last split CTA where a work item has few rows x splits,
// else the merge kernel.
enum class DecodeSplitMerge { kDefault, kMergeKernelAfterGrid, kMergeKernel, kLastSplitCta, kAuto };

// Runs decode attention on `stream`. All pointers in params are device memory.
// workspace: device memory of at least decode_attention_workspace_bytes(params) bytes whose
// counter block is zero (see above), or nullptr to run without split-KV (slower for small
// batches, never wrong).
void decode_attention(const AttentionParams& params, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);
void decode_attention(const AttentionParams& params, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream, DecodeSplitMerge merge);

}  // namespace quench
