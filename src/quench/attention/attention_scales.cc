#include "quench/attention/attention_scales.h"

#include <algorithm>
#include <cmath>

#include "quench/core/error.h"
#include "quench/core/log.h"

namespace quench {
namespace {

void require_valid(const std::vector<float>& values, const char* what, bool per_head_allowed,
                   int32_t num_kv_heads, const std::string& layer) {
  const size_t count = values.size();
  const bool count_ok =
      count == 1 || (per_head_allowed && count == static_cast<size_t>(num_kv_heads));
  QUENCH_REQUIRE(count_ok, layer, ": ", what, " has ", count, " values; allowed: 1",
                 per_head_allowed ? str_cat(" or num_kv_heads = ", num_kv_heads) : std::string());
  for (size_t i = 0; i < count; ++i) {
    QUENCH_REQUIRE(std::isfinite(values[i]) && values[i] > 0.0f, layer, ": ", what, "[", i,
                   "] = ", values[i], " is not a finite positive scale");
  }
}

}  // namespace

AttentionScales AttentionScales::from_checkpoint(const CheckpointAttentionScales& checkpoint,
                                                 int32_t num_kv_heads, DType out_dtype,
                                                 const std::string& layer) {
  AttentionScales scales;
  if (checkpoint.k_scale) {
    require_valid(*checkpoint.k_scale, "k_scale", true, num_kv_heads, layer);
    scales.k_scale_ = *checkpoint.k_scale;
  } else {
    log_warning(str_cat(layer, ": checkpoint has no k_scale; using 1.0."));
  }
  if (checkpoint.v_scale) {
    require_valid(*checkpoint.v_scale, "v_scale", true, num_kv_heads, layer);
    scales.v_scale_ = *checkpoint.v_scale;
  } else {
    log_warning(str_cat(layer, ": checkpoint has no v_scale; using 1.0."));
  }
  if (checkpoint.q_scale) {
    require_valid(*checkpoint.q_scale, "q_scale", false, num_kv_heads, layer);
    scales.q_scale_ = checkpoint.q_scale->front();
  } else {
    // vLLM's default. With per-head k scales the largest one keeps q / q_scale in range.
    scales.q_scale_ = *std::max_element(scales.k_scale_.begin(), scales.k_scale_.end());
    log_warning(str_cat(
        layer, ": checkpoint has no q_scale; using q_scale = k_scale = ", scales.q_scale_, "."));
  }
  if (checkpoint.o_scale) {
    require_valid(*checkpoint.o_scale, "o_scale", false, num_kv_heads, layer);
    scales.o_scale_ = checkpoint.o_scale->front();
  } else if (is_fp8(out_dtype)) {
    log_warning(str_cat(layer, ": checkpoint has no o_scale for the ", dtype_name(out_dtype),
                        " output; using 1.0."));
  }
  return scales;
}

HeadScales AttentionScales::view(const std::vector<float>& values) {
  HeadScales scales;
  if (values.size() == 1) {
    scales.per_tensor = values.front();
  } else {
    scales.per_head = values.data();
  }
  return scales;
}

}  // namespace quench
