#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "quench/core/error.h"
#include "quench/ops/rope/rope_angles.h"

namespace quench {
namespace {

void require_aligned16(const void* ptr, const char* name) {
  QUENCH_REQUIRE(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, name, " (", ptr,
                 ") must be 16-byte aligned for the GPU kernels");
}

void require_row_stride(int64_t stride, int32_t heads, int32_t head_dim, const char* name) {
  QUENCH_REQUIRE(stride >= static_cast<int64_t>(heads) * head_dim && stride % 8 == 0, name, " ",
                 stride, " must be >= heads*head_dim=", static_cast<int64_t>(heads) * head_dim,
                 " and a multiple of 8 elements");
}

void require_scale(const HeadScales& s, DType cache, const char* name) {
  QUENCH_REQUIRE(std::isfinite(s.per_tensor) && s.per_tensor > 0.0f, name, " ", s.per_tensor,
                 " must be finite and > 0");
  if (cache == DType::kBF16) {
    QUENCH_REQUIRE(s.per_tensor == 1.0f && s.per_head == nullptr, name,
                   " must be 1 (per tensor, no per-head array) for a bf16 KV cache; got ",
                   s.per_tensor, s.per_head ? " with a per-head array" : "");
  }
}

}  // namespace

void check_rope_quant_append_gpu_params(const RopeQuantAppendParams& p) {
  QUENCH_REQUIRE(p.num_tokens >= 0, "num_tokens ", p.num_tokens, " must be >= 0");
  QUENCH_REQUIRE(p.num_q_heads >= 1, "num_q_heads ", p.num_q_heads, " must be >= 1");
  p.kv.validate();
  QUENCH_REQUIRE(p.num_kv_heads == p.kv.num_kv_heads, "num_kv_heads ", p.num_kv_heads,
                 " must equal the cache's num_kv_heads ", p.kv.num_kv_heads);
  QUENCH_REQUIRE(p.head_dim == p.kv.head_dim, "head_dim ", p.head_dim,
                 " must equal the cache's head_dim ", p.kv.head_dim);
  p.rope.validate(p.head_dim);
  QUENCH_REQUIRE(p.rope.rotary_dim <= 2 * kMaxRopePairs, "rotary_dim ", p.rope.rotary_dim,
                 " exceeds the GPU limit ", 2 * kMaxRopePairs);
  const int64_t items = static_cast<int64_t>(p.num_tokens) *
                        (p.num_q_heads + 2 * static_cast<int64_t>(p.num_kv_heads));
  QUENCH_REQUIRE(items < std::numeric_limits<int32_t>::max(), "num_tokens ", p.num_tokens,
                 " times heads ", p.num_q_heads + 2 * p.num_kv_heads, " exceeds 2^31 head rows");
  QUENCH_REQUIRE(p.q_bf16_rows >= 0 && p.q_bf16_rows <= p.num_tokens, "q_bf16_rows ", p.q_bf16_rows,
                 " must be in [0, num_tokens=", p.num_tokens, "]");
  QUENCH_REQUIRE(is_fp8(p.q_fp8_dtype), "q_fp8_dtype ", dtype_name(p.q_fp8_dtype),
                 " is not allowed; allowed: fp8_e4m3, fp8_e5m2");
  QUENCH_REQUIRE(std::isfinite(p.q_scale) && p.q_scale > 0.0f, "q_scale ", p.q_scale,
                 " must be finite and > 0");
  require_scale(p.k_scale, p.kv.dtype, "k_scale");
  require_scale(p.v_scale, p.kv.dtype, "v_scale");
  QUENCH_REQUIRE((p.q_norm_weight == nullptr) == (p.k_norm_weight == nullptr),
                 "q_norm_weight and k_norm_weight must be both set or both null");
  if (p.q_norm_weight != nullptr) {
    QUENCH_REQUIRE(p.norm_eps > 0.0f, "norm_eps ", p.norm_eps, " must be > 0");
    require_aligned16(p.q_norm_weight, "q_norm_weight");
    require_aligned16(p.k_norm_weight, "k_norm_weight");
  }
  if (p.cos_sin_cache != nullptr) {
    QUENCH_REQUIRE(p.cos_sin_cache_positions > 0, "cos_sin_cache_positions ",
                   p.cos_sin_cache_positions, " must be > 0 with a cos/sin cache");
    require_aligned16(p.cos_sin_cache, "cos_sin_cache");
  }
  if (p.num_tokens == 0) return;
  QUENCH_REQUIRE(p.q && p.k && p.v && p.positions && p.slot_mapping && p.k_cache && p.v_cache,
                 "q, k, v, positions, slot_mapping, k_cache and v_cache must all be non-null");
  require_aligned16(p.q, "q");
  require_aligned16(p.k, "k");
  require_aligned16(p.v, "v");
  require_aligned16(p.k_cache, "k_cache");
  require_aligned16(p.v_cache, "v_cache");
  require_row_stride(p.q_row_stride, p.num_q_heads, p.head_dim, "q_row_stride");
  require_row_stride(p.k_row_stride, p.num_kv_heads, p.head_dim, "k_row_stride");
  require_row_stride(p.v_row_stride, p.num_kv_heads, p.head_dim, "v_row_stride");
  if (p.q_bf16_rows > 0) {
    QUENCH_REQUIRE(p.q_out_bf16 != nullptr, "q_out_bf16 is null but q_bf16_rows=", p.q_bf16_rows);
    require_aligned16(p.q_out_bf16, "q_out_bf16");
  }
  if (p.q_bf16_rows < p.num_tokens) {
    QUENCH_REQUIRE(p.q_out_fp8 != nullptr, "q_out_fp8 is null but rows [", p.q_bf16_rows, ", ",
                   p.num_tokens, ") are FP8");
    require_aligned16(p.q_out_fp8, "q_out_fp8");
  }
}

}  // namespace quench
