#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"

#include <cstring>
#include <vector>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/kv_append/kv_append_reference.h"
#include "quench/ops/qk_norm/qk_norm_reference.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"
#include "quench/ops/rope/rope_reference.h"

namespace quench {

void validate_rope_quant_append_params(const RopeQuantAppendParams& p) {
  QUENCH_REQUIRE(p.num_tokens >= 0, "num_tokens ", p.num_tokens, " must be >= 0");
  QUENCH_REQUIRE(p.num_q_heads >= 1, "num_q_heads ", p.num_q_heads, " must be >= 1");
  p.kv.validate();
  QUENCH_REQUIRE(p.num_kv_heads == p.kv.num_kv_heads, "num_kv_heads ", p.num_kv_heads,
                 " differs from the KV cache's ", p.kv.num_kv_heads);
  QUENCH_REQUIRE(p.head_dim == p.kv.head_dim, "head_dim ", p.head_dim,
                 " differs from the KV cache's ", p.kv.head_dim);
  p.rope.validate(p.head_dim);
  const int64_t q_row = static_cast<int64_t>(p.num_q_heads) * p.head_dim;
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  QUENCH_REQUIRE(p.q_row_stride >= q_row, "q_row_stride ", p.q_row_stride, " must be >= ", q_row,
                 " (num_q_heads * head_dim)");
  QUENCH_REQUIRE(p.k_row_stride >= kv_row, "k_row_stride ", p.k_row_stride, " must be >= ", kv_row,
                 " (num_kv_heads * head_dim)");
  QUENCH_REQUIRE(p.v_row_stride >= kv_row, "v_row_stride ", p.v_row_stride, " must be >= ", kv_row,
                 " (num_kv_heads * head_dim)");
  QUENCH_REQUIRE(p.q_bf16_rows >= 0 && p.q_bf16_rows <= p.num_tokens, "q_bf16_rows ", p.q_bf16_rows,
                 " is out of range; allowed: [0, num_tokens=", p.num_tokens, "]");
  if (p.num_tokens > 0) {
    QUENCH_REQUIRE(p.q && p.k && p.v, "q, k and v inputs must all be set");
    QUENCH_REQUIRE(p.positions != nullptr, "positions must be set");
    QUENCH_REQUIRE(p.slot_mapping != nullptr, "slot_mapping must be set");
    QUENCH_REQUIRE(p.k_cache && p.v_cache, "k_cache and v_cache must both be set");
  }
  QUENCH_REQUIRE(p.cos_sin_cache == nullptr || p.cos_sin_cache_positions >= 1,
                 "cos_sin_cache_positions ", p.cos_sin_cache_positions,
                 " must be >= 1 when a cos/sin cache is given");
  QUENCH_REQUIRE((p.q_norm_weight == nullptr) == (p.k_norm_weight == nullptr),
                 "q_norm_weight and k_norm_weight must be both set or both null");
  QUENCH_REQUIRE(p.q_norm_weight == nullptr || p.norm_eps > 0.0f, "norm_eps ", p.norm_eps,
                 " must be > 0");
  QUENCH_REQUIRE(p.q_bf16_rows == 0 || p.q_out_bf16 != nullptr, "q_out_bf16 must be set when ",
                 "q_bf16_rows=", p.q_bf16_rows, " > 0");
  if (p.q_bf16_rows < p.num_tokens) {
    QUENCH_REQUIRE(p.q_out_fp8 != nullptr, "q_out_fp8 must be set when q_bf16_rows=", p.q_bf16_rows,
                   " < num_tokens=", p.num_tokens);
    QUENCH_REQUIRE(is_fp8(p.q_fp8_dtype), "q_fp8_dtype ", dtype_name(p.q_fp8_dtype),
                   " is invalid; allowed: fp8_e4m3, fp8_e5m2");
    validate_fp8_scale(p.q_scale, "q_scale");
  }
  if (p.k_scale.per_head == nullptr) validate_kv_scale(p.kv, p.k_scale, "k_scale");
  if (p.v_scale.per_head == nullptr) validate_kv_scale(p.kv, p.v_scale, "v_scale");
}

void validate_rope_quant_append_host_arrays(const RopeQuantAppendParams& p) {
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    QUENCH_REQUIRE(p.positions[t] >= 0, "positions[", t, "]=", p.positions[t], " must be >= 0");
    QUENCH_REQUIRE(p.cos_sin_cache == nullptr || p.positions[t] < p.cos_sin_cache_positions,
                   "positions[", t, "]=", p.positions[t],
                   " is outside the cos/sin cache; allowed: [0, ", p.cos_sin_cache_positions, ")");
  }
  validate_kv_slot_mapping(p.kv, p.slot_mapping, p.num_tokens);
  validate_kv_scale(p.kv, p.k_scale, "k_scale");
  validate_kv_scale(p.kv, p.v_scale, "v_scale");
}

namespace {

// bf16 rows with a row stride -> dense fp32 [num_tokens, row_elems].
std::vector<float> load_rows(const uint16_t* x, int64_t row_stride, int32_t num_tokens,
                             int64_t row_elems) {
  std::vector<float> out(static_cast<size_t>(num_tokens * row_elems));
  parallel_for(num_tokens, [&](int64_t t) {
    for (int64_t e = 0; e < row_elems; ++e) {
      out[static_cast<size_t>(t * row_elems + e)] = bf16_bits_to_float(x[t * row_stride + e]);
    }
  });
  return out;
}

}  // namespace

void rope_quant_append_reference(const RopeQuantAppendParams& p) {
  validate_rope_quant_append_params(p);
  validate_rope_quant_append_host_arrays(p);
  const int32_t T = p.num_tokens;
  const int64_t q_row = static_cast<int64_t>(p.num_q_heads) * p.head_dim;
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  std::vector<float> q = load_rows(p.q, p.q_row_stride, T, q_row);
  std::vector<float> k = load_rows(p.k, p.k_row_stride, T, kv_row);
  const std::vector<float> v = load_rows(p.v, p.v_row_stride, T, kv_row);

  if (p.q_norm_weight != nullptr) {
    qk_rms_norm_reference(T, p.num_q_heads, p.head_dim, p.q_norm_weight, p.norm_eps, q.data());
    qk_rms_norm_reference(T, p.num_kv_heads, p.head_dim, p.k_norm_weight, p.norm_eps, k.data());
  }
  apply_rope_reference(p.rope, T, p.num_q_heads, p.head_dim, p.positions, p.cos_sin_cache,
                       p.cos_sin_cache_positions, q.data());
  apply_rope_reference(p.rope, T, p.num_kv_heads, p.head_dim, p.positions, p.cos_sin_cache,
                       p.cos_sin_cache_positions, k.data());

  // Query: rows [0, q_bf16_rows) to bf16, the rest to fp8(q / q_scale); padding rows untouched.
  const int64_t fp8_rows = T - p.q_bf16_rows;
  std::vector<uint8_t> q_fp8(static_cast<size_t>(fp8_rows * q_row));
  if (fp8_rows > 0) {
    quantize_fp8_per_tensor_reference(q.data() + p.q_bf16_rows * q_row, fp8_rows * q_row, p.q_scale,
                                      p.q_fp8_dtype, q_fp8.data());
  }
  parallel_for(T, [&](int64_t t) {
    if (p.slot_mapping[t] < 0) return;
    if (t < p.q_bf16_rows) {
      for (int64_t e = 0; e < q_row; ++e) {
        p.q_out_bf16[t * q_row + e] = float_to_bf16_bits(q[static_cast<size_t>(t * q_row + e)]);
      }
    } else {
      std::memcpy(p.q_out_fp8 + t * q_row, q_fp8.data() + (t - p.q_bf16_rows) * q_row,
                  static_cast<size_t>(q_row));
    }
  });

  kv_append_reference(p.kv, T, k.data(), v.data(), p.slot_mapping, p.k_scale, p.v_scale, p.k_cache,
                      p.v_cache);
}

}  // namespace quench
