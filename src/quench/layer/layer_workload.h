// The inputs of one `quench layer` step, made once on the host and shared by every run of it
// (FP8 path, bf16 baseline, host reference), so that all runs see the same numbers.
//
// The step holds decode sequences first, then prefill chunks (attention_metadata.h). Each
// sequence's cached prefix is not given as cache bytes: it is bf16 k/v of positions
// [0, num_cached_tokens), which every run writes into its own cache with the same RoPE +
// quantize + append step as the new tokens, so FP8 and bf16 caches hold the same tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "quench/attention/attention_metadata.h"
#include "quench/attention/attention_scales.h"
#include "quench/layer/layer_demo_options.h"

namespace quench {

struct LayerWorkload {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;
  KvLayout layout = KvLayout::kNHD;
  RopeConfig rope;
  int32_t num_pages = 0;  // page 0 (null) included

  std::vector<ScheduledSequence> decode_steps;  // pages from a PageAllocator
  std::vector<ScheduledSequence> prefill_chunks;
  AttentionMetadata metadata;  // of this step, decode rows first

  // Cached prefix tokens of every sequence, in sequence order.
  std::vector<int32_t> prefix_positions;  // [P]
  std::vector<int64_t> prefix_slots;      // [P] page * page_size + offset
  std::vector<uint16_t> prefix_k;         // bf16 [P, Hkv, D], before RoPE
  std::vector<uint16_t> prefix_v;         // bf16 [P, Hkv, D]

  // New tokens of the step, rows in metadata order (positions and slots are in metadata).
  std::vector<uint16_t> q;  // bf16 [T, Hq, D], before RoPE
  std::vector<uint16_t> k;  // bf16 [T, Hkv, D], before RoPE
  std::vector<uint16_t> v;  // bf16 [T, Hkv, D]

  std::vector<float> cos_sin_cache;  // [cache_positions, D] fp32 (rope_reference.h)
  int32_t cache_positions = 0;

  // Per-tensor scales from the data's amax (SPEC §1.2: they divide when storing FP8). RoPE
  // rotates pairs, so a rotated element is at most sqrt(2) times the largest input element:
  // q/k scales use that bound, v_scale = amax(v) / fp8_max (q: e4m3's max, whatever the cache).
  CheckpointAttentionScales scales;

  int32_t num_prefix_tokens() const { return static_cast<int32_t>(prefix_positions.size()); }
  int32_t num_tokens() const { return metadata.num_tokens; }
};

// Builds the workload of `options`: decode sequence i caches context + i * context / (2 *
// decode_seqs) tokens and adds 1; prefill chunk j adds `chunk` tokens after 0 (even j) or
// context / 2 (odd j) cached ones. Inputs are uniform random bf16 from options.seed (q, k in
// [-2, 2), v in [-1, 1)); scales are computed for options.kv_dtype's FP8 format (e4m3 when the
// cache is bf16).
LayerWorkload make_layer_workload(const LayerDemoOptions& options);

}  // namespace quench
