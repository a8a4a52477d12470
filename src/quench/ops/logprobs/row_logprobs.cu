#include "quench/ops/logprobs/row_logprobs.h"

#include <climits>
#include <cmath>

#include "quench/core/error.h"
#include "quench/ops/logprobs/token_logprobs.h"

namespace quench {
namespace {

constexpr int kThreads = 1024;  // 32 warps: one row is the whole c = 1 step's work
constexpr int kWarps = kThreads / 32;
static_assert(kWarps <= 32, "warp 0 merges the warps' lists, one per lane");
constexpr int kTop = kMaxTopLogprobs;
// Launches of at most this many rows take the two-pass kernel (kThreshold): with fewer rows than
// SMs a row's latency is the launch's; with many, its second read of the row would come from
// DRAM again (hundreds of rows of 0.5 MB do not stay in L2), and the one pass is as fast as the
// argmax over the same rows (512 rows x 128256 top 5: 123 us against 124, H100).
constexpr int32_t kThresholdMaxRows = 128;

// (value, id) order of the top list: the larger value first, equal values by the lower id. An
// empty slot is (-inf, INT_MAX); a NaN is never before anything, so it never enters a list.
__device__ __forceinline__ bool before(float av, int32_t ai, float bv, int32_t bi) {
  return av > bv || (av == bv && ai < bi);
}

// exp-sum s relative to max m, joined with another: a part with no columns (m = -inf) adds 0.
__device__ __forceinline__ float rescaled(float s, float m, float to) {
  return m == -INFINITY ? 0.0f : s * expf(m - to);
}

// The best (value, id) over the warp's lanes, in every lane (a butterfly).
__device__ __forceinline__ void warp_best(float& v, int32_t& id) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, offset);
    if (before(ov, oi, v, id)) {
      v = ov;
      id = oi;
    }
  }
}

// The top-th largest of the warp's values (top in [1, 32]), in every lane: a bitonic sort of the
// 32 lanes' values, largest first.
__device__ __forceinline__ float warp_kth_largest(float x, int lane, int top) {
  for (int k = 2; k <= 32; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, x, j);
      const bool keep_larger = ((lane & k) == 0) == ((lane & j) == 0);
      x = keep_larger ? fmaxf(x, other) : fminf(x, other);
    }
  }
  return __shfl_sync(0xffffffffu, x, top - 1);
}

// One CTA per row. Each warp reads its columns 32 at a time (coalesced), eight loads in flight
// per lane: a running max and exp-sum per lane (the max raised once per batch of eight, the sum
// rescaled then), and the warp's top list of `top` entries spread over its lanes (lane k holds
// the k-th best), which a column enters only when it beats the list's last. The warp votes on
// the batch's candidates and inserts them one at a time by shuffles, so the common column costs
// a compare and a vote. (A top list per thread, 20 slots in registers, made some lane of every
// warp insert on almost every column, and the warp with it: 164 us for one 128256-column row on
// the H100, bench/LOG.md thirtieth session.) The CTA then joins the sums (warps, then thread 0)
// and warp 0 merges the warps' lists by rounds of a warp argmax over their heads.
// kThreshold (launches of few rows, where a row's time is its latency): the sums first, then a
// second pass over the row (from L2) that offers only columns at or above a bar no top entry is
// under: the largest, over warps, of the top-th largest of a warp's lane maxima (each is a
// column, so at least `top` columns reach it). A single pass spends most of a lone row's time in
// its first batches, where every column beats a list not yet full, one warp-serial insert each
// (1 row x 128256 top 20: 54 us against 6 for the argmax, H100).
// Launch bounds: the one-pass kernel keeps two CTAs per SM (32 registers; ptxas spills 16-76
// bytes), which many rows need to stream at the argmax's speed (512 rows x 128256 top 5: 123 us
// with two CTAs per SM, 160 us with one, H100); the two-pass kernel, for few rows, takes the
// registers it wants instead (41-44, no spills).
template <bool kThreshold>
__global__ void __launch_bounds__(kThreads, kThreshold ? 1 : 2)
    row_logprobs_kernel(RowLogprobsArgs a) {
  const int r = blockIdx.x;
  const float* row = a.row_logits != nullptr ? a.row_logits[r]
                                             : a.logits + static_cast<int64_t>(a.rows[r]) * a.vocab;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int top = a.top;
  float m = -INFINITY, s = 0.0f;
  bool finite = true;
  // The warp's list: lane k < top holds entry k; (tv, ti) is entry top - 1 in every lane.
  float list_v = -INFINITY, tv = -INFINITY;
  int32_t list_i = INT_MAX, ti = INT_MAX;
  // A column offered to the warp's list by each lane (a lane without one offers (-inf, INT_MAX),
  // which is never before anything).
  const auto offer = [&](float v, int32_t c) {
    unsigned want = __ballot_sync(0xffffffffu, before(v, c, tv, ti));
    while (want != 0u) {
      const int src = __ffs(static_cast<int>(want)) - 1;
      want &= want - 1u;
      const float nv = __shfl_sync(0xffffffffu, v, src);
      const int32_t nc = __shfl_sync(0xffffffffu, c, src);
      if (!before(nv, nc, tv, ti)) continue;  // an earlier insert raised the bar
      const int pos =
          __popc(__ballot_sync(0xffffffffu, lane < top && before(list_v, list_i, nv, nc)));
      const float up_v = __shfl_up_sync(0xffffffffu, list_v, 1);
      const int32_t up_i = __shfl_up_sync(0xffffffffu, list_i, 1);
      if (lane == pos) {
        list_v = nv;
        list_i = nc;
      } else if (lane > pos && lane < top) {
        list_v = up_v;
        list_i = up_i;
      }
      tv = __shfl_sync(0xffffffffu, list_v, top - 1);
      ti = __shfl_sync(0xffffffffu, list_i, top - 1);
    }
  };
  // A batch of kBatch columns per lane (past the row's end where `tail`): with `sums`, the max
  // once, then the sum; with `offers`, the offers of the columns at or above `bar`.
  constexpr int kBatch = 8;
  const auto take = [&](const float(&v)[kBatch], int32_t c0, bool tail, bool sums, bool offers,
                        float bar) {
    if (sums) {
      float bm = -INFINITY;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (!tail || c0 + j * kThreads < a.vocab) {
          finite = finite && isfinite(v[j]);
          bm = fmaxf(bm, v[j]);
        }
      }
      if (bm > m) {
        s = rescaled(s, m, bm);
        m = bm;
      }
      if (m != -INFINITY) {
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          if (!tail || c0 + j * kThreads < a.vocab) s += expf(v[j] - m);
      }
    }
    if (offers) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int32_t c = c0 + j * kThreads;
        const bool valid = (!tail || c < a.vocab) && v[j] >= bar;
        offer(valid ? v[j] : -INFINITY, valid ? c : INT_MAX);
      }
    }
  };
  // One pass over the row: whole batches while the warp's last lane has one (the loop stays
  // warp-uniform: the offers vote across the warp), then at most one batch, partly past the end.
  const auto scan = [&](bool sums, bool offers, float bar) {
    int32_t c0 = tid;
    for (; c0 - lane + 31 + (kBatch - 1) * kThreads < a.vocab; c0 += kBatch * kThreads) {
      float v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        v[j] = row[c0 + j * kThreads];
      take(v, c0, false, sums, offers, bar);
    }
    if (c0 - lane < a.vocab) {
      float v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int32_t c = c0 + j * kThreads;
        v[j] = c < a.vocab ? row[c] : -INFINITY;
      }
      take(v, c0, true, sums, offers, bar);
    }
  };
  if constexpr (kThreshold) {
    scan(true, false, 0.0f);
    if (top > 0) {
      __shared__ float warp_bar[kWarps];
      // m is this lane's max (-inf for a lane without columns, which only lowers the bar).
      const float bar = warp_kth_largest(m, lane, top);
      if (lane == 0) warp_bar[warp] = bar;
      __syncthreads();
      float row_bar = warp_bar[0];
      for (int w = 1; w < kWarps; ++w)
        row_bar = fmaxf(row_bar, warp_bar[w]);
      scan(false, true, row_bar);
    }
  } else {
    scan(true, top > 0, -INFINITY);
  }
  // The softmax's normaliser.
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, offset);
    const float os = __shfl_xor_sync(0xffffffffu, s, offset);
    const float to = fmaxf(m, om);
    s = rescaled(s, m, to) + rescaled(os, om, to);
    m = to;
  }
  finite = __all_sync(0xffffffffu, finite);
  __shared__ float warp_m[kWarps], warp_s[kWarps];
  __shared__ int warp_finite[kWarps];
  __shared__ double log_z;
  __shared__ int row_finite;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
    warp_finite[warp] = finite ? 1 : 0;
  }
  // Each warp's top `top`, in order.
  __shared__ float top_v[kWarps][kTop];
  __shared__ int32_t top_i[kWarps][kTop];
  if (lane < top) {
    top_v[warp][lane] = list_v;
    top_i[warp][lane] = list_i;
  }
  __syncthreads();
  if (tid == 0) {
    float bm = warp_m[0], bs = warp_s[0];
    int all_finite = warp_finite[0];
    for (int w = 1; w < kWarps; ++w) {
      const float to = fmaxf(bm, warp_m[w]);
      bs = rescaled(bs, bm, to) + rescaled(warp_s[w], warp_m[w], to);
      bm = to;
      all_finite &= warp_finite[w];
    }
    row_finite = all_finite;
    log_z = static_cast<double>(bm) + log(static_cast<double>(bs));
    const int32_t token = a.tokens[a.token_index != nullptr ? a.token_index[r] : r];
    a.logprob[r] =
        all_finite && token >= 0 && token < a.vocab ? static_cast<float>(row[token] - log_z) : NAN;
  }
  __syncthreads();
  if (warp != 0) return;
  // The warps' lists merged: lane w < kWarps holds list w's next entry.
  int next = 0;
  for (int k = 0; k < a.top; ++k) {
    const bool has = lane < kWarps && next < a.top;
    float v = has ? top_v[lane][next] : -INFINITY;
    int32_t id = has ? top_i[lane][next] : INT_MAX;
    warp_best(v, id);
    if (has && top_i[lane][next] == id && top_v[lane][next] == v) ++next;
    if (lane == 0) {
      const int64_t o = static_cast<int64_t>(r) * a.top + k;
      a.top_ids[o] = row_finite ? id : -1;
      a.top_logprobs[o] = row_finite ? static_cast<float>(v - log_z) : NAN;
    }
  }
}

}  // namespace

void row_logprobs_cuda(const RowLogprobsArgs& a, cudaStream_t stream) {
  QUENCH_REQUIRE(a.n >= 0 && a.vocab >= 1, "row logprobs: n ", a.n, " and vocab ", a.vocab,
                 " must be >= 0 and >= 1");
  QUENCH_REQUIRE(a.top >= 0 && a.top <= kMaxTopLogprobs && a.top <= a.vocab, "row logprobs: top ",
                 a.top, " must be in [0, min(", kMaxTopLogprobs, ", vocab ", a.vocab, ")]");
  if (a.n == 0) return;
  QUENCH_REQUIRE((a.row_logits != nullptr || (a.logits != nullptr && a.rows != nullptr)) &&
                     a.tokens != nullptr && a.logprob != nullptr &&
                     (a.top == 0 || (a.top_ids != nullptr && a.top_logprobs != nullptr)),
                 "row logprobs: a device array is null");
  if (a.top > 0 && a.n <= kThresholdMaxRows) {
    row_logprobs_kernel<true><<<static_cast<unsigned>(a.n), kThreads, 0, stream>>>(a);
  } else {
    row_logprobs_kernel<false><<<static_cast<unsigned>(a.n), kThreads, 0, stream>>>(a);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "row logprobs launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
