#include "quench/ops/kv_append/kv_append_reference.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"

namespace quench {

void validate_kv_slot_mapping(const KvCacheLayout& layout, const int64_t* slot_mapping,
                              int32_t num_tokens) {
  const int64_t num_slots = static_cast<int64_t>(layout.num_pages) * layout.page_size;
  std::vector<std::pair<int64_t, int32_t>> used;  // (slot, token), to find duplicates
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    QUENCH_REQUIRE(slot >= -1 && slot < num_slots, "slot_mapping[", t, "]=", slot,
                   " is out of range; allowed: -1 (padding) or [0, ", num_slots, ") for ",
                   layout.num_pages, " pages of ", layout.page_size, " tokens");
    if (slot >= 0) used.emplace_back(slot, t);
  }
  std::sort(used.begin(), used.end());
  for (size_t i = 1; i < used.size(); ++i) {
    QUENCH_REQUIRE(used[i].first != used[i - 1].first, "slot_mapping[", used[i - 1].second,
                   "] and slot_mapping[", used[i].second, "] both are slot ", used[i].first,
                   "; each slot may be written by one token only");
  }
}

void validate_kv_scale(const KvCacheLayout& layout, const HeadScales& scale, const char* what) {
  if (is_fp8(layout.dtype)) {
    validate_fp8_head_scales(scale, layout.num_kv_heads, what);
    return;
  }
  for (int32_t h = 0; h < layout.num_kv_heads; ++h) {
    QUENCH_REQUIRE(scale.at(h) == 1.0f, what, "[head ", h, "] ", scale.at(h), " is invalid for a ",
                   dtype_name(layout.dtype), " KV cache; allowed: 1");
  }
}

namespace {

void require_array(const void* array, const char* name, int32_t num_tokens) {
  QUENCH_REQUIRE(array != nullptr, "KV append ", name, " is null; ", num_tokens,
                 " tokens need it (only num_tokens 0 takes null arrays)");
}

// Stores one head row of head_dim values at element offset `at` of `cache`.
void store_row(const KvCacheLayout& layout, const float* row, float scale, int64_t at,
               void* cache) {
  if (layout.dtype == DType::kBF16) {
    uint16_t* out = static_cast<uint16_t*>(cache) + at;
    for (int32_t d = 0; d < layout.head_dim; ++d)
      out[d] = float_to_bf16_bits(row[d]);
    return;
  }
  const Fp8Format format = fp8_format_of(layout.dtype);
  uint8_t* out = static_cast<uint8_t*>(cache) + at;
  for (int32_t d = 0; d < layout.head_dim; ++d)
    out[d] = float_to_fp8(row[d] / scale, format);
}

}  // namespace

void kv_append_reference(const KvCacheLayout& layout, int32_t num_tokens, const float* k,
                         const float* v, const int64_t* slot_mapping, const HeadScales& k_scale,
                         const HeadScales& v_scale, void* k_cache, void* v_cache) {
  layout.validate();
  QUENCH_REQUIRE(num_tokens >= 0, "KV append num_tokens ", num_tokens, " must be >= 0");
  if (num_tokens > 0) {
    require_array(k, "k", num_tokens);
    require_array(v, "v", num_tokens);
    require_array(slot_mapping, "slot_mapping", num_tokens);
    require_array(k_cache, "k_cache", num_tokens);
    require_array(v_cache, "v_cache", num_tokens);
  }
  validate_kv_scale(layout, k_scale, "k_scale");
  validate_kv_scale(layout, v_scale, "v_scale");
  validate_kv_slot_mapping(layout, slot_mapping, num_tokens);
  const int64_t row_elems = static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim;
  parallel_for(num_tokens, [&](int64_t t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;
    const int64_t page = slot / layout.page_size;
    const int64_t offset_in_page = slot % layout.page_size;
    for (int32_t h = 0; h < layout.num_kv_heads; ++h) {
      const int64_t at = layout.offset(page, offset_in_page, h, 0);
      const int64_t src = t * row_elems + static_cast<int64_t>(h) * layout.head_dim;
      store_row(layout, k + src, k_scale.at(h), at, k_cache);
      store_row(layout, v + src, v_scale.at(h), at, v_cache);
    }
  });
}

}  // namespace quench
