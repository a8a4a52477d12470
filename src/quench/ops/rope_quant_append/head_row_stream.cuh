// Streams head rows of one token through a lane group with loads kept in flight: the rows
// first, first + step, ... below count of a [count, kHeadDim] bf16 block, 16 bytes per lane.
// Each lane keeps kAhead row loads outstanding (64 bytes), issuing the load of row i + kAhead
// before processing row i, so an HBM round trip overlaps the arithmetic of the rows before it.
#pragma once

#include <cstdint>

#include "quench/ops/quantize/vec8_convert.cuh"

namespace quench {

inline constexpr int32_t kHeadRowsAhead = 3;

// src: this lane's first element of row 0 (row r at src + r * kHeadDim). process(x, r) gets the
// eight elements as floats; the group's lanes call it together (it may shuffle inside the group).
template <int32_t kHeadDim, typename Process>
__device__ __forceinline__ void stream_head_rows(const uint16_t* src, int32_t first, int32_t count,
                                                 int32_t step, Process&& process) {
  uint4 ahead[kHeadRowsAhead];
#pragma unroll
  for (int32_t u = 0; u < kHeadRowsAhead; ++u) {
    const int32_t r = first + u * step;
    ahead[u] = r < count ? __ldg(reinterpret_cast<const uint4*>(src + r * kHeadDim))
                         : make_uint4(0u, 0u, 0u, 0u);
  }
  for (int32_t r0 = first; r0 < count; r0 += kHeadRowsAhead * step) {
#pragma unroll
    for (int32_t u = 0; u < kHeadRowsAhead; ++u) {
      const int32_t r = r0 + u * step;
      if (r >= count) break;
      float x[8];
      unpack_bf16x8(ahead[u], x);
      const int32_t next = r + kHeadRowsAhead * step;
      if (next < count) ahead[u] = __ldg(reinterpret_cast<const uint4*>(src + next * kHeadDim));
      process(x, r);
    }
  }
}

// Asks L2 for the same rows as stream_head_rows(src, first, count, step) without waiting and
// without holding registers, so that rows processed later are loaded while earlier ones are.
template <int32_t kHeadDim>
__device__ __forceinline__ void prefetch_head_rows(const uint16_t* src, int32_t first,
                                                   int32_t count, int32_t step) {
  for (int32_t r = first; r < count; r += step)
    asm volatile("prefetch.global.L2 [%0];" : : "l"(src + r * kHeadDim));
}

}  // namespace quench
