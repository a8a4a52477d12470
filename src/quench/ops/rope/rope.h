// Standalone GPU RoPE of q and k (with Qwen3's optional per-head RMSNorm first): the first kernel
// of the unfused rope -> quantize -> append chain. Same arithmetic as the fused kernel
// (rope_head_row.cuh), but the result is rounded to bf16 once more on the way out.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/rope/rope_config.h"

namespace quench {

struct RopeParams {
  int32_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 128;  // 64, 128 or 256
  // Inputs, bf16 bits, row t of q at q + t * q_row_stride (elements; multiple of 8, at least
  // num_q_heads * head_dim), head h at + h * head_dim; same for k. 16-byte aligned; with tokens,
  // q, k, positions, q_out and k_out must be set.
  const uint16_t* q = nullptr;  // [T, Hq, D]
  const uint16_t* k = nullptr;  // [T, Hkv, D]
  int64_t q_row_stride = 0;
  int64_t k_row_stride = 0;
  const int32_t* positions = nullptr;    // [T] device; tokens outside the cos/sin cache are skipped
  RopeConfig rope;                       // rotary_dim % 16 == 0
  const float* cos_sin_cache = nullptr;  // optional [cache_positions, rotary_dim] fp32
  int32_t cos_sin_cache_positions = 0;
  const uint16_t* q_norm_weight = nullptr;  // optional bf16 [D]; both or neither
  const uint16_t* k_norm_weight = nullptr;
  float norm_eps = 1e-6f;
  // Outputs, bf16 bits, dense and 16-byte aligned.
  uint16_t* q_out = nullptr;  // [T, Hq, D]
  uint16_t* k_out = nullptr;  // [T, Hkv, D]
};

// Launches on `stream`; throws quench::Error for invalid params. Graph-capturable.
void rope_cuda(const RopeParams& p, cudaStream_t stream);

}  // namespace quench
