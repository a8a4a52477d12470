#include "quench/ops/logprobs/row_logprobs.h"

#include <climits>
#include <cmath>

#include "quench/core/error.h"
#include "quench/ops/logprobs/token_logprobs.h"

namespace quench {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kTop = kMaxTopLogprobs;

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

// One CTA per row. Each thread reads its strided columns once: a running max and exp-sum (the
// sum rescaled when the max rises) and its own top list of kTop in registers (a column enters
// only when it beats the list's last, rare after the first few). The CTA then joins the sums
// (warps, then thread 0), takes each warp's top by `top` rounds of a warp argmax over the lists'
// heads, and warp 0 merges the warps' lists the same way.
__global__ void __launch_bounds__(kThreads) row_logprobs_kernel(RowLogprobsArgs a) {
  const int r = blockIdx.x;
  const float* row = a.row_logits != nullptr ? a.row_logits[r]
                                             : a.logits + static_cast<int64_t>(a.rows[r]) * a.vocab;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  float m = -INFINITY, s = 0.0f;
  bool finite = true;
  float list_v[kTop];
  int32_t list_i[kTop];
#pragma unroll
  for (int k = 0; k < kTop; ++k) {
    list_v[k] = -INFINITY;
    list_i[k] = INT_MAX;
  }
  const bool keep_top = a.top > 0;
  // A column's share: the running max and exp-sum, and the top list where it beats the last.
  const auto take = [&](float v, int32_t c) {
    finite = finite && isfinite(v);
    if (v > m) {
      s = rescaled(s, m, v) + 1.0f;
      m = v;
    } else {
      s += expf(v - m);
    }
    if (keep_top && before(v, c, list_v[kTop - 1], list_i[kTop - 1])) {
      float cv = v;
      int32_t ci = c;
#pragma unroll
      for (int k = 0; k < kTop; ++k) {
        if (before(cv, ci, list_v[k], list_i[k])) {
          const float tv = list_v[k];
          const int32_t ti = list_i[k];
          list_v[k] = cv;
          list_i[k] = ci;
          cv = tv;
          ci = ti;
        }
      }
    }
  };
  // kBatch loads in flight per thread before any of them is used: the work per column is a
  // dependent chain with branches, behind which the compiler would not hoist the next loads
  // (one load in flight per thread took 170 us for one 128256-column row on the H200).
  constexpr int kBatch = 8;
  int32_t c0 = tid;
  for (; c0 + (kBatch - 1) * kThreads < a.vocab; c0 += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      v[j] = row[c0 + j * kThreads];
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      take(v[j], c0 + j * kThreads);
  }
  for (int32_t c = c0; c < a.vocab; c += kThreads)
    take(row[c], c);
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
  // Each warp's top `top`, in order (lane 0 writes them).
  __shared__ float top_v[kWarps][kTop];
  __shared__ int32_t top_i[kWarps][kTop];
  for (int k = 0; k < a.top; ++k) {
    float v = list_v[0];
    int32_t id = list_i[0];
    warp_best(v, id);
    if (lane == 0) {
      top_v[warp][k] = v;
      top_i[warp][k] = id;
    }
    // The winner's list moves up one (every lane's, where only empty slots are left: harmless).
    const bool pop = list_i[0] == id && list_v[0] == v;
#pragma unroll
    for (int j = 0; j + 1 < kTop; ++j) {
      list_v[j] = pop ? list_v[j + 1] : list_v[j];
      list_i[j] = pop ? list_i[j + 1] : list_i[j];
    }
    if (pop) {
      list_v[kTop - 1] = -INFINITY;
      list_i[kTop - 1] = INT_MAX;
    }
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
  row_logprobs_kernel<<<static_cast<unsigned>(a.n), kThreads, 0, stream>>>(a);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "row logprobs launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
