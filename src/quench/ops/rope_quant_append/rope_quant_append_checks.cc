#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"

#include <cstdint>
#include <limits>

#include "quench/core/error.h"
#include "quench/ops/rope/rope_angles.h"
#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"

namespace quench {
namespace {

void require_aligned16(const void* ptr, const char* name) {
  QUENCH_REQUIRE(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, name, " (", ptr,
                 ") must be 16-byte aligned for the GPU kernels");
}

void require_stride_multiple_of_8(int64_t stride, const char* name) {
  QUENCH_REQUIRE(stride % 8 == 0, name, " ", stride,
                 " must be a multiple of 8 elements (16-byte rows) for the GPU kernels");
}

}  // namespace

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
    require_aligned16(p.q_norm_weight, "q_norm_weight");
    require_aligned16(p.k_norm_weight, "k_norm_weight");
  }
  if (p.cos_sin_cache != nullptr) require_aligned16(p.cos_sin_cache, "cos_sin_cache");
  if (p.num_tokens == 0) return;
  require_aligned16(p.q, "q");
  require_aligned16(p.k, "k");
  require_aligned16(p.v, "v");
  require_aligned16(p.k_cache, "k_cache");
  require_aligned16(p.v_cache, "v_cache");
  require_stride_multiple_of_8(p.q_row_stride, "q_row_stride");
  require_stride_multiple_of_8(p.k_row_stride, "k_row_stride");
  require_stride_multiple_of_8(p.v_row_stride, "v_row_stride");
  if (p.q_bf16_rows > 0) require_aligned16(p.q_out_bf16, "q_out_bf16");
  if (p.q_bf16_rows < p.num_tokens) require_aligned16(p.q_out_fp8, "q_out_fp8");
}

}  // namespace quench
