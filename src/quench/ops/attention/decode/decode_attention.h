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
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Throws quench::Error naming the first field the decode kernel does not support.
void validate_decode_attention_params(const AttentionParams& params);

// How many CTAs split each request's KV sequence (1 = no split; > 1 when num_seqs x num_kv_heads
// does not fill the GPU). Depends only on shapes and the current device.
int decode_attention_num_splits(const AttentionParams& params);

// Device scratch decode_attention needs for its split-KV partials (0 when it does not split).
size_t decode_attention_workspace_bytes(const AttentionParams& params);

// Runs decode attention on `stream`. All pointers in params are device memory.
// workspace: device memory of at least decode_attention_workspace_bytes(params) bytes, or
// nullptr to run without split-KV (slower for small batches, never wrong).
void decode_attention(const AttentionParams& params, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace quench
