// The pieces both logprobs kernels (row_logprobs.cu) build on: one CTA's scan of a range of a
// row's columns (a running max and exp-sum per thread, a top list per warp), the warp and CTA
// reductions of those, and the merge of sorted top lists. Internal to row_logprobs.cu.
#pragma once

#include <climits>
#include <cmath>

#include "quench/ops/logprobs/row_logprobs.h"
#include "quench/ops/logprobs/token_logprobs.h"

namespace quench::row_logprobs_detail {

constexpr int kThreads = 1024;  // 32 warps: one row is the whole c = 1 step's work
constexpr int kWarps = kThreads / 32;
static_assert(kWarps <= 32, "warp 0 merges the warps' lists, one per lane");
constexpr int kTop = kMaxTopLogprobs;
constexpr int kBatch = 8;  // columns per lane loaded before any is used

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

// One thread's share of a CTA's scan of columns [begin, end) of `row`. Each warp reads its
// columns 32 at a time (coalesced), kBatch loads in flight per lane: a running max and exp-sum
// per lane (the max raised once per batch, the sum rescaled then), and the warp's top list of
// `top` entries spread over its lanes (lane k holds the k-th best), which a column enters only
// when it beats the list's last. The warp votes on a batch's candidates and inserts them one at a
// time by shuffles, so the common column costs a compare and a vote. (A top list per thread, 20
// slots in registers, made some lane of every warp insert on almost every column, and the warp
// with it: 164 us for one 128256-column row on the H100, bench/LOG.md thirtieth session.)
struct ColumnScan {
  const float* row;
  int32_t begin, end;
  int top, tid, lane;
  float m = -INFINITY, s = 0.0f;
  bool finite = true;
  // The warp's list: lane k < top holds entry k; (tv, ti) is entry top - 1 in every lane.
  float list_v = -INFINITY, tv = -INFINITY;
  int32_t list_i = INT_MAX, ti = INT_MAX;

  __device__ ColumnScan(const float* row_, int32_t begin_, int32_t end_, int top_)
      : row(row_),
        begin(begin_),
        end(end_),
        top(top_),
        tid(static_cast<int>(threadIdx.x)),
        lane(static_cast<int>(threadIdx.x) % 32) {}

  // A column offered to the warp's list by each lane (a lane without one offers (-inf, INT_MAX),
  // which is never before anything).
  __device__ __forceinline__ void offer(float v, int32_t c) {
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
  }

  // A batch of kBatch columns per lane (past the range's end where `tail`): with `sums`, the max
  // once, then the sum; with `offers`, the offers of the columns at or above `bar`.
  __device__ __forceinline__ void take(const float (&v)[kBatch], int32_t c0, bool tail, bool sums,
                                       bool offers, float bar) {
    if (sums) {
      float bm = -INFINITY;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (!tail || c0 + j * kThreads < end) {
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
          if (!tail || c0 + j * kThreads < end) s += expf(v[j] - m);
      }
    }
    if (offers) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int32_t c = c0 + j * kThreads;
        const bool valid = (!tail || c < end) && v[j] >= bar;
        offer(valid ? v[j] : -INFINITY, valid ? c : INT_MAX);
      }
    }
  }

  // One pass over the range: whole batches while the warp's last lane has one (the loop stays
  // warp-uniform: the offers vote across the warp), then at most one batch, partly past the end.
  __device__ __forceinline__ void pass(bool sums, bool offers, float bar) {
    int32_t c0 = begin + tid;
    for (; c0 - lane + 31 + (kBatch - 1) * kThreads < end; c0 += kBatch * kThreads) {
      float v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        v[j] = row[c0 + j * kThreads];
      take(v, c0, false, sums, offers, bar);
    }
    if (c0 - lane < end) {
      float v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int32_t c = c0 + j * kThreads;
        v[j] = c < end ? row[c] : -INFINITY;
      }
      take(v, c0, true, sums, offers, bar);
    }
  }

  // The sums first, then a second pass over the range (from L2) that offers only columns at or
  // above a bar no top entry of the range is under: the top-th largest of the CTA's warp maxima
  // (each is a column, so at least `top` columns reach it; top <= kWarps; a warp without columns
  // has -inf, which only lowers the bar). For launches of few rows, whose time is their latency:
  // a single pass spends most of a lone row's time in its first batches, where every column
  // beats a list not yet full, one warp-serial insert each. The warps' maxima leave a few dozen
  // candidates in a cluster part's 16k normal columns; the bar before (the top-th of the lanes'
  // maxima in the best warp) let hundreds in, and their inserts and ranking took a third of the
  // part's instructions (1 row top 20: 26.1 -> 17.2 us on the H100, bench/LOG.md thirty-first
  // session). Every thread of the CTA calls it (a barrier).
  __device__ void two_passes() {
    static_assert(kTop <= kWarps, "the bar is the top-th of the warps' maxima");
    pass(true, false, 0.0f);
    if (top == 0) return;
    __shared__ float warp_max[kWarps];
    float x = m;
    for (int offset = 16; offset > 0; offset >>= 1)
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    if (lane == 0) warp_max[tid / 32] = x;
    __syncthreads();
    const float bar = warp_kth_largest(warp_max[lane], lane, top);
    pass(false, true, bar);
  }
};

// A CTA's scan results per warp in shared memory: each warp's max, sum and finiteness.
struct WarpSums {
  float m[kWarps], s[kWarps];
  int finite[kWarps];
};

// Each warp's max, sum and finiteness (a butterfly over its lanes) into `sums`. The caller
// synchronizes the CTA before reading them.
__device__ __forceinline__ void write_warp_sums(const ColumnScan& scan, WarpSums& sums) {
  float m = scan.m, s = scan.s;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, offset);
    const float os = __shfl_xor_sync(0xffffffffu, s, offset);
    const float to = fmaxf(m, om);
    s = rescaled(s, m, to) + rescaled(os, om, to);
    m = to;
  }
  const bool finite = __all_sync(0xffffffffu, scan.finite);
  if (scan.lane == 0) {
    const int warp = scan.tid / 32;
    sums.m[warp] = m;
    sums.s[warp] = s;
    sums.finite[warp] = finite ? 1 : 0;
  }
}

// (max, exp-sum, finite) of `count` parts joined, by one thread.
struct SoftmaxSum {
  float m = -INFINITY, s = 0.0f;
  int finite = 1;
};
__device__ __forceinline__ SoftmaxSum join_sums(const float* m, const float* s, const int* finite,
                                                int count) {
  SoftmaxSum r{m[0], s[0], finite[0]};
  for (int p = 1; p < count; ++p) {
    const float to = fmaxf(r.m, m[p]);
    r.s = rescaled(r.s, r.m, to) + rescaled(s[p], m[p], to);
    r.m = to;
    r.finite &= finite[p];
  }
  return r;
}

// The real entries of a CTA's warp lists, in no order (a slot each, taken by an atomic add).
struct Candidates {
  float v[kWarps * kTop];
  int32_t id[kWarps * kTop];
  int count;  // zeroed by the caller before the scan's barrier
};

__device__ __forceinline__ void gather_warp_list(const ColumnScan& scan, Candidates& c) {
  if (scan.lane < scan.top && scan.list_i != INT_MAX) {
    const int k = atomicAdd(&c.count, 1);
    c.v[k] = scan.list_v;
    c.id[k] = scan.list_i;
  }
}

// A CTA's two-pass scan (ColumnScan::two_passes) up to what it ranks: every thread calls it; on
// return (after a barrier) `sums` holds the warps' sums, `candidates` the warps' real list
// entries, and best_v / best_i [kTop] empty slots for rank_select to fill.
__device__ __forceinline__ void two_pass_scan(ColumnScan& scan, WarpSums& sums,
                                              Candidates& candidates, float* best_v,
                                              int32_t* best_i) {
  const int tid = scan.tid;
  if (tid == 0) candidates.count = 0;
  if (tid < kTop) {
    best_v[tid] = -INFINITY;
    best_i[tid] = INT_MAX;
  }
  scan.two_passes();                   // its barrier orders the initialisation above before any use
  if (scan.top == 0) __syncthreads();  // (two_passes returns before its barrier then)
  write_warp_sums(scan, sums);
  gather_warp_list(scan, candidates);
  __syncthreads();
}

// The best `top` of `count` entries (distinct ids, so every entry has its own rank: the entries
// before it) into out_v / out_i [top], which the caller filled with empty slots beforehand (a
// shortfall stays empty) and synchronizes the CTA after. Thread e takes entry e and counts until
// its rank reaches top: after two passes a CTA holds a few dozen candidates, so this is a few
// dozen reads of shared memory (a row of equal values fills every warp's list: 640).
__device__ __forceinline__ void rank_select(const float* v, const int32_t* id, int count, int top,
                                            float* out_v, int32_t* out_i) {
  for (int e = static_cast<int>(threadIdx.x); e < count; e += static_cast<int>(blockDim.x)) {
    const float ev = v[e];
    const int32_t ei = id[e];
    int rank = 0;
    for (int f = 0; f < count && rank < top; ++f)
      rank += before(v[f], id[f], ev, ei) ? 1 : 0;
    if (rank < top) {
      out_v[rank] = ev;
      out_i[rank] = ei;
    }
  }
}

// The best `top` of `lists` sorted lists (list w at v[w * kTop ...], its end at the first empty
// slot, id INT_MAX, or at `top` entries) into out_v / out_i [top], which the caller filled with
// empty slots beforehand and synchronizes the CTA after. Ids are distinct across lists, so every
// entry has its own rank: the entries before it in its list plus those before it in the others
// (each a prefix of its list), counted until the rank reaches top. All threads of the CTA call
// it; thread t takes entry t % top of list t / top: at most top + lists reads each.
__device__ __forceinline__ void merge_sorted_lists(const float* v, const int32_t* id, int lists,
                                                   int top, float* out_v, int32_t* out_i) {
  for (int t = static_cast<int>(threadIdx.x); t < lists * top; t += static_cast<int>(blockDim.x)) {
    const int w = t / top, p = t % top;
    const float ev = v[w * kTop + p];
    const int32_t ei = id[w * kTop + p];
    if (ei == INT_MAX) continue;  // past its list's end
    int rank = p;
    for (int u = 0; u < lists && rank < top; ++u) {
      if (u == w) continue;
      for (int j = 0; j < top && rank < top && before(v[u * kTop + j], id[u * kTop + j], ev, ei);
           ++j)
        ++rank;
    }
    if (rank < top) {
      out_v[rank] = ev;
      out_i[rank] = ei;
    }
  }
}

}  // namespace quench::row_logprobs_detail
