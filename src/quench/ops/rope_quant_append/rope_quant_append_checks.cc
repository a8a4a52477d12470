#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"

#include <cstdint>
#include <limits>

#include "quench/core/device_array_check.h"
#include "quench/core/error.h"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"

namespace quench {

void check_rope_quant_append_gpu_params(const RopeQuantAppendParams& p) {
  validate_rope_quant_append_params(p);
  QUENCH_REQUIRE(p.rope.rotary_dim <= 2 * kMaxRopePairs, "rotary_dim ", p.rope.rotary_dim,
                 " exceeds the GPU limit ", 2 * kMaxRopePairs);
  const int64_t rows = static_cast<int64_t>(p.num_tokens) *
                       (p.num_q_heads + 2 * static_cast<int64_t>(p.num_kv_heads));
  QUENCH_REQUIRE(rows < std::numeric_limits<int32_t>::max(), "num_tokens ", p.num_tokens,
                 " times heads ", p.num_q_heads + 2 * p.num_kv_heads,
                 " exceeds the GPU limit of 2^31 head rows");
  if (p.kv.dtype == DType::kBF16) {
    QUENCH_REQUIRE(p.k_scale.per_head == nullptr && p.v_scale.per_head == nullptr,
                   "a bf16 KV cache takes no per-head k/v scale arrays (its scales must be 1)");
  }
  if (p.q_norm_weight != nullptr) {
    require_aligned_device_array(p.q_norm_weight, "rope_quant_append", "q_norm_weight");
    require_aligned_device_array(p.k_norm_weight, "rope_quant_append", "k_norm_weight");
  }
  if (p.cos_sin_cache != nullptr)
    require_aligned_device_array(p.cos_sin_cache, "rope_quant_append", "cos_sin_cache");
  if (p.num_tokens == 0) return;
  require_aligned_device_array(p.q, "rope_quant_append", "q");
  require_aligned_device_array(p.k, "rope_quant_append", "k");
  require_aligned_device_array(p.v, "rope_quant_append", "v");
  require_aligned_device_array(p.k_cache, "rope_quant_append", "k_cache");
  require_aligned_device_array(p.v_cache, "rope_quant_append", "v_cache");
  // (validate_rope_quant_append_params checked the lengths; the GPU needs 16-byte rows too.)
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  require_row_stride(p.q_row_stride, static_cast<int64_t>(p.num_q_heads) * p.head_dim,
                     "num_q_heads * head_dim", 2, "rope_quant_append", "q_row_stride");
  require_row_stride(p.k_row_stride, kv_row, "num_kv_heads * head_dim", 2, "rope_quant_append",
                     "k_row_stride");
  require_row_stride(p.v_row_stride, kv_row, "num_kv_heads * head_dim", 2, "rope_quant_append",
                     "v_row_stride");
  if (p.q_bf16_rows > 0)
    require_aligned_device_array(p.q_out_bf16, "rope_quant_append", "q_out_bf16");
  if (p.q_bf16_rows < p.num_tokens)
    require_aligned_device_array(p.q_out_fp8, "rope_quant_append", "q_out_fp8");
}

}  // namespace quench
