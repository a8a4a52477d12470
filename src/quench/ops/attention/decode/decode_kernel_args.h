// What the decode kernels receive (by value): the attention contract plus the launch shape the
// host chose. Plain data, shared by the launcher, the main kernel and the merge kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/attention/attention_params.h"

namespace quench::decode {

// Query rows one CTA serves: the m16 dimension of the tensor-core tiles. A CTA of KV head h
// serves rows r = q_token * group + (q_head - h * group) of one request, 16 at a time.
inline constexpr int kRowsPerCta = 16;
// Query rows up to which the sm_90 kernel runs with swapped operands (decode_swapped_tile_loop.cuh:
// query rows are the MMA's n8 side, KV tokens its m16 side). The host picks that kernel when
// max_q_len x group <= kSwappedMaxRows (one row group per request and KV head).
inline constexpr int kSwappedMaxRows = 8;
// KV tokens per pipeline stage (one 16-token MMA step for each of the four warps). Every page
// size (16/32/64) divides it, so a tile never straddles part of a page.
inline constexpr int kTileTokens = 64;
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
// Deepest pipeline (tiles in shared memory) the launcher may choose.
inline constexpr int kMaxStages = 8;
// Most KV splits per (request, KV head, row group): the merge holds one weight per split.
inline constexpr int kMaxSplits = 64;
// Work items (request, KV head, row group) up to which the last split CTA of each item merges
// its splits in the main kernel: one uint32 arrival counter per item, at the start of the
// workspace (kDecodeWorkspaceCounterBytes, decode_attention.h).
inline constexpr int kMaxMergeWorkItems = 4096;

struct DecodeKernelArgs {
  AttentionParams p;       // device pointers
  int32_t group = 1;       // num_q_heads / num_kv_heads
  int32_t row_groups = 1;  // ceil(max_q_len * group / kRowsPerCta): CTAs per (request, KV head)
  int32_t num_splits = 1;  // CTAs per (request, KV head, row group) along the KV sequence
  int32_t num_stages = 2;  // pipeline depth (tiles in shared memory)
  // Split-KV partials (num_splits > 1 only), indexed by query token t and q head:
  //   partial_o   [num_splits, num_tokens, num_q_heads, head_dim] fp32, normalised, v-scaled
  //   partial_lse [num_splits, num_tokens, num_q_heads] fp32, log2 of the split's softmax
  //               denominator plus its max (scores in log2 units); -inf when it saw no token.
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  // Split arrival counters (num_splits > 1), [kMaxMergeWorkItems] uint32, zero before the launch
  // and after it; null: decode_merge_kernel waits for the main grid's completion instead.
  // - last_split_merges: one per work item (blockIdx.z * num_kv_heads + KV head). Every split
  //   CTA counts itself in after writing its partials; the one that arrives last merges the
  //   item's rows, and its arrival wraps the counter back to 0.
  // - else: one per (query token, KV head) (token * num_kv_heads + KV head): every split CTA
  //   counts in once per token of its rows; decode_merge_kernel's CTA of a row waits until its
  //   counter reaches num_splits, merges, and counts in too: the group-th such arrival wraps
  //   the counter back to 0. (The host picks this only where a token's rows lie in one CTA.)
  uint32_t* merge_counters = nullptr;
  bool last_split_merges = false;
  // The merge kernel after the grid (no counters) may launch as soon as every CTA of this grid
  // is resident (true: from the start, after the grid-dependency wait) instead of from the end
  // of each CTA's tile loop (false): its CTAs then run their warm-up pass (decode_merge.cu)
  // while this grid works and wait for its completion where they will merge.
  bool early_merge_launch = false;
  // Grid order: true: blockIdx.x = KV head, y = split (the KV heads of one split, which read
  // the same NHD pages, are dispatched together); false: x = split, y = KV head.
  bool heads_fastest = true;
};

// One compiled decode kernel (head dim x KV dtype x query dtype x variant) and its shared-memory
// needs: fixed_bytes (Q tile, softmax stats, barriers, alignment slack) + max(num_stages *
// stage_bytes, combine_bytes).
struct DecodeKernelInfo {
  const void* fn = nullptr;  // __global__ void(DecodeKernelArgs, KvTensorMaps)
  int32_t threads = 0;       // per CTA: kThreads compute threads (+ 32: the TMA producer warp)
  int32_t stage_bytes = 0;
  int32_t fixed_bytes = 0;
  int32_t combine_bytes = 0;
  bool tma = false;       // loads through the KvTensorMaps parameter (else it ignores it)
  bool swapped = false;   // swapped operands: at most kSwappedMaxRows query rows per CTA
  bool wgmma_qk = false;  // the swapped loop's Q K^T on FP8 wgmma (FP8 KV, bf16 q)
};

// Defined one per KV dtype (decode_attention_kv_*.cu) so the instantiations compile in
// parallel. head_dim: 64/128/256; q_dtype: bf16/f16 (validated by the caller); tma: the sm_90
// variant with a producer warp feeding the stages by tensor TMA (sm_90 devices only; head_dim
// 256 ignores it and runs the cp.async kernel); swapped: the TMA variant's swapped-operand loop,
// for launches of at most kSwappedMaxRows query rows per request and KV head (ignored without
// tma or at head_dim 256); wgmma_qk: that loop's Q K^T on FP8 wgmma (sm_90 devices only; taken
// by FP8 caches with a bf16 query, ignored elsewhere: info.wgmma_qk says which).
DecodeKernelInfo decode_kernel_info_kv_bf16(int32_t head_dim, DType q_dtype, bool tma, bool swapped,
                                            bool wgmma_qk);
DecodeKernelInfo decode_kernel_info_kv_e4m3(int32_t head_dim, DType q_dtype, bool tma, bool swapped,
                                            bool wgmma_qk);
DecodeKernelInfo decode_kernel_info_kv_e5m2(int32_t head_dim, DType q_dtype, bool tma, bool swapped,
                                            bool wgmma_qk);

// The split-KV merge (decode_merge.cu): combines args.partial_* and runs the output epilogue.
// With `dependent` (the GPU is sm_90+) it is a programmatic dependent launch of the main kernel:
// scheduled while the main kernel finishes, it waits for it before reading.
void launch_decode_merge(const DecodeKernelArgs& args, bool dependent, cudaStream_t stream);

}  // namespace quench::decode
