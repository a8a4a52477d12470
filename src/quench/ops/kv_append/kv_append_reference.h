// CPU reference of appending new k/v rows into one layer's paged KV cache (SPEC §1.4).
//
// Token t goes to slot = slot_mapping[t] = page * page_size + offset_in_page; for every KV head
// h its k row is stored at layout.offset(page, offset_in_page, h, 0) of k_cache (v likewise):
//   fp8 cache:  stored = fp8(x / k_scale.at(h))   (scales divide, true fp32 division)
//   bf16 cache: stored = bf16(x); scales must be exactly 1.
// slot -1 marks a padding token: nothing of it is written. Nothing else in the cache changes.
#pragma once

#include <cstdint>

#include "quench/core/head_scales.h"
#include "quench/kv_cache/kv_cache_layout.h"

namespace quench {

// Throws naming the token index, the slot and the allowed range when a slot is < -1 or
// >= num_pages * page_size, or when two tokens share a slot. slot_mapping: host int64 [num_tokens].
// This is the op's contract, looser on purpose than the block manager's validate_slot_mapping
// (quench/kv_cache/slot_mapping.h), which also rejects page 0: SPEC §1.4 only says page 0 *can*
// be reserved as the null page, so the op writes any slot of the cache and leaves that policy to
// whoever builds the slots.
void validate_kv_slot_mapping(const KvCacheLayout& layout, const int64_t* slot_mapping,
                              int32_t num_tokens);

// Throws unless the scale fits the cache dtype: finite and > 0 for fp8, exactly 1 for bf16.
// per_head, when set, is read as a host array of layout.num_kv_heads floats. `what` names it.
void validate_kv_scale(const KvCacheLayout& layout, const HeadScales& scale, const char* what);

// Appends num_tokens rows.
//   k, v:          fp32 [num_tokens, num_kv_heads, head_dim], dense row-major.
//   slot_mapping:  int64 [num_tokens], -1 = padding (skipped).
//   k_cache, v_cache: layout.tensor_bytes() bytes each, element type layout.dtype, NHD or HND.
//   k_scale, v_scale: divide (see above); per_head arrays on the host.
// Validates the layout, the arrays (none null unless num_tokens is 0), the scales and the slots
// before writing anything.
void kv_append_reference(const KvCacheLayout& layout, int32_t num_tokens, const float* k,
                         const float* v, const int64_t* slot_mapping, const HeadScales& k_scale,
                         const HeadScales& v_scale, void* k_cache, void* v_cache);

}  // namespace quench
