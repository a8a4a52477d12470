// Device helpers of the sampling kernels (sample_rows.cu, sample_rows_split.cu): ranked-prefix
// cuts, the per-draw state the race reads, block reductions and the radix selection's warp steps.
#pragma once

#include <climits>
#include <cstdint>

#include "quench/ops/sampling/row_sampling.h"

namespace quench::sampling_device {

constexpr int kThreads = 1024;  // the whole-row kernels' CTA
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

// The end of a ranked prefix: a token is inside when its key is larger, or equal with an id no
// larger (the ranking puts the lower id first among equal logits).
struct Cut {
  uint32_t key;
  int32_t id;
};
constexpr Cut kEverything{0u, INT_MAX};

__device__ __forceinline__ bool inside(uint32_t key, int32_t id, Cut cut) {
  return key > cut.key || (key == cut.key && id <= cut.id);
}

struct Shared {
  unsigned long long hist[256];
  unsigned long long warp_values[kWarps];
  int32_t warp_ids[kWarps];
  unsigned long long remaining;
  unsigned long long bin_total;
  uint32_t digit;
  int32_t id;
  float value;
  int finite;
};

// The largest and the sum of 64-bit values, for block_reduce.
struct Larger {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a > b ? a : b;
  }
};
struct Plus {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a + b;
  }
};

// The reduction by `op` of one value per thread of a kBlockThreads-thread block, on thread 0.
template <int kBlockThreads, typename Op>
__device__ unsigned long long block_reduce(unsigned long long v, Op op) {
  __shared__ unsigned long long warps[kBlockThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_down_sync(kFullMask, v, offset));
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();  // an earlier call's reads of `warps` are done
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kBlockThreads / 32; ++w)
      v = op(v, warps[w]);
  return v;
}

// The block's sum of one value per thread (kThreads threads), on every thread.
__device__ inline unsigned long long block_sum(unsigned long long v, Shared& sh) {
  v = block_reduce<kThreads>(v, Plus{});
  if (threadIdx.x == 0) sh.remaining = v;
  __syncthreads();
  const unsigned long long total = sh.remaining;
  __syncthreads();
  return total;
}

// The block's exclusive prefix sum of one count per thread (in thread order).
__device__ inline uint32_t block_exclusive_scan(uint32_t v, Shared& sh) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  uint32_t inclusive = v;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const uint32_t n = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += n;
  }
  if (lane == 31) sh.warp_values[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    unsigned long long w = sh.warp_values[lane];  // kWarps == 32
    unsigned long long warp_inclusive = w;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const unsigned long long n = __shfl_up_sync(kFullMask, warp_inclusive, offset);
      if (lane >= offset) warp_inclusive += n;
    }
    sh.warp_values[lane] = warp_inclusive - w;
  }
  __syncthreads();
  const auto before = static_cast<uint32_t>(sh.warp_values[warp]);
  __syncthreads();
  return before + inclusive - v;
}

// The best (value, id) of the block by `larger` (value descending, id ascending), on every thread.
__device__ inline int32_t block_best(float value, int32_t id, Shared& sh) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_down_sync(kFullMask, value, offset);
    const int32_t i = __shfl_down_sync(kFullMask, id, offset);
    if (v > value || (v == value && i < id)) {
      value = v;
      id = i;
    }
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) {
    sh.warp_values[warp] = __float_as_uint(value);
    sh.warp_ids[warp] = id;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float best = __uint_as_float(static_cast<uint32_t>(sh.warp_values[0]));
    int32_t best_id = sh.warp_ids[0];
    for (int w = 1; w < kWarps; ++w) {
      const float v = __uint_as_float(static_cast<uint32_t>(sh.warp_values[w]));
      if (v > best || (v == best && sh.warp_ids[w] < best_id)) {
        best = v;
        best_id = sh.warp_ids[w];
      }
    }
    sh.id = best_id;
    sh.value = best;
  }
  __syncthreads();
  const int32_t result = sh.id;
  __syncthreads();
  return result;
}

// One step of a warp's histogram: each lane's weight w goes to bin `bin` (256 = none) of `hist`
// (this warp's own, shared or not). Logits crowd into a few bins of the leading digits, so the
// lanes that fall into one bin sum their weights first and one of them adds the sum: no two adds
// of a step meet on a word. All 32 lanes must call it.
__device__ __forceinline__ void warp_bin_add(unsigned long long* hist, uint32_t bin,
                                             unsigned long long w) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const unsigned peers = __match_any_sync(kFullMask, bin);
  // The 64-bit sum as two 32-bit ones that cannot overflow: a weight is at most 2^40, so 32
  // high parts (w >> 14) stay within 2^31 and 32 low 14-bit parts within 2^19.
  const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(w >> 14));
  const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(w & 0x3fffu));
  if (bin < 256 && lane == __ffs(static_cast<int>(peers)) - 1)
    hist[bin] += (static_cast<unsigned long long>(high) << 14) + low;
  __syncwarp();
}

// One warp (all 32 lanes): the digit whose bin of `hist` [256] holds the remaining-th unit of
// weight, counting from the largest digit (remaining >= 1 and at most the histogram's total).
// Writes the digit, what is still needed from inside its bin, and the bin's total.
__device__ __forceinline__ void pick_digit(const unsigned long long* hist,
                                           unsigned long long remaining, uint32_t* digit,
                                           unsigned long long* still_needed,
                                           unsigned long long* bin_total) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // Lane l holds digits 255 - 8l down to 248 - 8l: the lanes scan from the largest digit.
  unsigned long long bins[8];
  unsigned long long lane_total = 0;
  for (int j = 0; j < 8; ++j) {
    bins[j] = hist[255 - 8 * lane - j];
    lane_total += bins[j];
  }
  unsigned long long inclusive = lane_total;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long n = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += n;
  }
  const unsigned long long exclusive = inclusive - lane_total;
  const unsigned owners = __ballot_sync(kFullMask, exclusive < remaining && remaining <= inclusive);
  if (lane == __ffs(static_cast<int>(owners)) - 1) {
    unsigned long long above = exclusive;
    for (int j = 0; j < 8; ++j) {
      if (above + bins[j] >= remaining) {
        *digit = static_cast<uint32_t>(255 - 8 * lane - j);
        *still_needed = remaining - above;
        *bin_total = bins[j];
        break;
      }
      above += bins[j];
    }
  }
}

// The id of the n-th (from 1) lowest-id token inside `limit` whose key is `key`. Each thread
// counts a contiguous stretch of ids, so that a scan of the counts orders them by id.
__device__ inline int32_t nth_equal(const float* row, int32_t vocab, uint32_t key, Cut limit,
                                    uint32_t n, Shared& sh) {
  const int32_t stretch = (vocab + kThreads - 1) / kThreads;
  const int32_t begin = static_cast<int32_t>(threadIdx.x) * stretch;
  const int32_t end = min(vocab, begin + stretch);
  uint32_t count = 0;
  for (int32_t i = begin; i < end; ++i) {
    const uint32_t k = sampling_order_key(row[i]);
    count += k == key && inside(k, i, limit) ? 1u : 0u;
  }
  const uint32_t before = block_exclusive_scan(count, sh);
  if (before < n && n <= before + count) {
    uint32_t seen = before;
    for (int32_t i = begin; i < end; ++i) {
      const uint32_t k = sampling_order_key(row[i]);
      if (k == key && inside(k, i, limit) && ++seen == n) {
        sh.id = i;
        break;
      }
    }
  }
  __syncthreads();
  const int32_t id = sh.id;
  __syncthreads();
  return id;
}

// What the race of one draw needs from its whole row, and the race's running winner.
struct DrawState {
  float max_logit;
  Cut keep, nucleus;
  int32_t decided;  // the token when no race is needed (greedy; -1 non-finite), else kRace
  unsigned long long winner;  // the race's best (score bits << 32 | ~id); 0 = none yet
};
constexpr int32_t kRace = INT_MIN;
constexpr int32_t kPendingId = -1;  // a cut whose last id nth_equal has still to find

}  // namespace quench::sampling_device
