// Device side of RopeAngles: cos/sin of consecutive pairs at one position.
#pragma once

#include <cstdint>

#include "quench/ops/rope/rope_angles.h"

namespace quench {

// Copies the inverse-frequency table into shared memory (the in-kernel sincos path indexes it per
// lane; kernel-parameter space indexed per lane would be serialised). Every thread of the block
// must call it before any early exit.
__device__ __forceinline__ void stage_inv_freq(const RopeAngles& angles, float* smem_inv_freq) {
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < angles.rotary_dim / 2;
       i += static_cast<int32_t>(blockDim.x)) {
    smem_inv_freq[i] = angles.inv_freq[i];
  }
  __syncthreads();
}

// cos/sin of pairs [first_pair, first_pair + 4) at position pos, from the cache (kFromCache) or
// by sincos. The cache path uses two 16-byte loads and needs first_pair % 4 == 0 and
// rotary_dim % 8 == 0 (16-byte aligned rows). A template argument rather than a branch: the
// sincos range reduction would otherwise cost the cache path ~8 registers.
template <bool kFromCache>
__device__ __forceinline__ void rope_cos_sin4(const RopeAngles& angles, const float* smem_inv_freq,
                                              int32_t pos, int32_t first_pair, float c[4],
                                              float s[4]) {
  if constexpr (kFromCache) {
    const float* row = angles.cos_sin_cache + static_cast<int64_t>(pos) * angles.rotary_dim;
    const float4 cv = __ldg(reinterpret_cast<const float4*>(row + first_pair));
    const float4 sv =
        __ldg(reinterpret_cast<const float4*>(row + angles.rotary_dim / 2 + first_pair));
    c[0] = cv.x, c[1] = cv.y, c[2] = cv.z, c[3] = cv.w;
    s[0] = sv.x, s[1] = sv.y, s[2] = sv.z, s[3] = sv.w;
  } else {
#pragma unroll
    for (int32_t j = 0; j < 4; ++j) {
      sincosf(static_cast<float>(pos) * smem_inv_freq[first_pair + j], &s[j], &c[j]);
    }
  }
}

}  // namespace quench
