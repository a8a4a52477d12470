// Parameters of the fused "RoPE + quantize + paged KV append" step of one layer (SPEC §1), shared
// by the CPU reference, the fused CUDA kernel and the unfused CUDA chain.
//
// Per token t (0 <= t < num_tokens) at position positions[t]:
//   [q_norm/k_norm]  optional Qwen3 per-head RMSNorm of q and k (before RoPE):
//                    y = x / sqrt(mean(x^2) + norm_eps) * weight     (fp32 math, weight bf16 [D])
//   rope             q and k rotated (rope_config.h), v untouched
//   q output         rows t <  q_bf16_rows: bf16 into q_out_bf16
//                    rows t >= q_bf16_rows: fp8(q / q_scale) into q_out_fp8   (q_scale divides)
//   k, v             stored into the paged cache at slot_mapping[t] (slot = page * page_size +
//                    offset) as fp8(x / k_scale(h)) and fp8(v / v_scale(h)) (scales divide), or as
//                    bf16 for a bf16 cache (scales must then be 1). slot -1 = padding token:
//                    nothing of it is written anywhere (no q row either).
// Rounding is pinned so the GPU can match the reference bit for bit where the math is the same:
// inputs bf16 -> float, rotation with rope_rotate_pair (fmaf), then one rounding to the output
// type. With the cos/sin cache the RoPE path is bit-exact; with in-kernel sincos and with RMSNorm
// (reduction order) it matches within a few bf16/fp8 ulps.
#pragma once

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/core/head_scales.h"
#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/ops/rope/rope_config.h"

namespace quench {

struct RopeQuantAppendParams {
  int32_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 128;  // q, k and v share it

  // Inputs, bf16 (raw uint16 bits). Row t of q is at q + t * q_row_stride, head h of that row at
  // + h * head_dim; same for k and v. Row strides are in elements, so q/k/v may be strided views
  // into one fused qkv tensor [T, (Hq + 2*Hkv) * D].
  const uint16_t* q = nullptr;  // [T, Hq, D]
  const uint16_t* k = nullptr;  // [T, Hkv, D]
  const uint16_t* v = nullptr;  // [T, Hkv, D]
  int64_t q_row_stride = 0;
  int64_t k_row_stride = 0;
  int64_t v_row_stride = 0;

  const int32_t* positions = nullptr;  // [T] absolute positions (>= 0)
  RopeConfig rope;
  // Optional [max_position, rotary_dim] fp32: cos of pair i at [p][i], sin at
  // [p][rotary_dim/2 + i]. nullptr: cos/sin computed from rope_inv_freq in the op (sincos of
  // p * inv_freq in fp32).
  const float* cos_sin_cache = nullptr;
  int32_t cos_sin_cache_positions = 0;  // rows of cos_sin_cache; positions must be below it

  // Optional Qwen3 per-head RMSNorm weights, bf16 [head_dim] each; both or neither.
  const uint16_t* q_norm_weight = nullptr;
  const uint16_t* k_norm_weight = nullptr;
  float norm_eps = 1e-6f;

  // Query outputs. Both buffers are indexed by absolute token row ([T, Hq, D] geometry, row t at
  // t * Hq * D): rows [0, q_bf16_rows) are written to q_out_bf16 only, rows [q_bf16_rows, T) to
  // q_out_fp8 only, so the prefill kernel reads q_out_fp8 + q_bf16_rows * Hq * D.
  int32_t q_bf16_rows = 0;
  uint16_t* q_out_bf16 = nullptr;  // needed when q_bf16_rows > 0
  uint8_t* q_out_fp8 = nullptr;    // needed when q_bf16_rows < T
  DType q_fp8_dtype = DType::kFP8E4M3;
  float q_scale = 1.0f;  // divides: stored = fp8(q / q_scale)

  // Paged cache (layout in kv, K and V separate tensors of kv.tensor_elems() elements).
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  KvCacheLayout kv;
  HeadScales k_scale;                     // divides when storing
  HeadScales v_scale;                     // divides when storing
  const int64_t* slot_mapping = nullptr;  // [T]; -1 = padding token
};

}  // namespace quench
