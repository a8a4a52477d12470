// A scale that is either one value for the whole tensor or one value per KV head (k_scale,
// v_scale). Each user documents whether the scale multiplies or divides; for the KV cache
// (SPEC §1.2) stored = fp8(x / scale) and dequantized = stored * scale.
#pragma once

#include <cstdint>

#include "quench/core/host_device.h"

namespace quench {

struct HeadScales {
  float per_tensor = 1.0f;
  // When non-null: [num_kv_heads] floats (host pointer for CPU code, device pointer for kernels)
  // that replace per_tensor.
  const float* per_head = nullptr;

  QUENCH_HD float at(int32_t head) const { return per_head ? per_head[head] : per_tensor; }
};

}  // namespace quench
