#include <algorithm>
#include <climits>

#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/sampling/sample_rows.h"

namespace quench {
namespace {

constexpr int kThreads = 1024;
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

// The block's sum of one value per thread, on every thread.
__device__ unsigned long long block_sum(unsigned long long v, Shared& sh) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_down_sync(kFullMask, v, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) sh.warp_values[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long total = 0;
    for (int w = 0; w < kWarps; ++w)
      total += sh.warp_values[w];
    sh.remaining = total;
  }
  __syncthreads();
  const unsigned long long total = sh.remaining;
  __syncthreads();
  return total;
}

// The block's exclusive prefix sum of one count per thread (in thread order).
__device__ uint32_t block_exclusive_scan(uint32_t v, Shared& sh) {
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
__device__ int32_t block_best(float value, int32_t id, Shared& sh) {
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

// The largest key K such that the tokens inside `limit` with keys >= K weigh at least `target`
// (weight_of(logit) per token; target >= 1 and at most the total). Returns K; leaves in
// sh.remaining the weight still needed from the tokens whose key is K (target minus the weight
// above K) and in sh.bin_total what those tokens weigh together.
// warp_hists: shared [kWarps, 256], one histogram per warp.
template <typename WeightOf>
__device__ uint32_t radix_select(const float* row, int32_t vocab, Cut limit,
                                 unsigned long long target, WeightOf weight_of, Shared& sh,
                                 unsigned long long* warp_hists) {
  uint32_t prefix = 0, mask = 0;
  unsigned long long remaining = target;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  unsigned long long* hist = warp_hists + (threadIdx.x / 32) * 256;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = lane; b < 256; b += 32)
      hist[b] = 0;
    __syncwarp();
    // Logits crowd into a few bins of the leading digits. So that no two adds meet on a word,
    // each warp has its histogram, and the lanes of a warp that fall into one bin sum their
    // weights first, one of them adding the sum (the bins of one step's adders differ). The loop
    // runs whole warps (lanes past the row take no bin), as the warp intrinsics need.
    const int32_t warp_base = static_cast<int32_t>(threadIdx.x) - lane;
    for (int32_t base = warp_base; base < vocab; base += kThreads) {
      const int32_t i = base + lane;
      uint32_t bin = 256;  // none
      unsigned long long w = 0;
      if (i < vocab) {
        const float x = row[i];
        const uint32_t key = sampling_order_key(x);
        if ((key & mask) == prefix && inside(key, i, limit)) {
          w = weight_of(x);
          bin = (key >> shift) & 0xffu;
        }
      }
      const unsigned peers = __match_any_sync(kFullMask, bin);
      // The 64-bit sum as two 32-bit ones that cannot overflow: a weight is at most 2^40, so 32
      // high parts (w >> 14) stay within 2^31 and 32 low 14-bit parts within 2^19.
      const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(w >> 14));
      const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(w & 0x3fffu));
      if (bin < 256 && lane == __ffs(static_cast<int>(peers)) - 1)
        hist[bin] += (static_cast<unsigned long long>(high) << 14) + low;
      __syncwarp();
    }
    __syncthreads();
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += kThreads) {
      unsigned long long total = 0;
      for (int w = 0; w < kWarps; ++w)
        total += warp_hists[w * 256 + b];
      sh.hist[b] = total;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l holds digits 255 - 8l down to 248 - 8l: the lanes scan from the largest digit.
      unsigned long long bins[8];
      unsigned long long lane_total = 0;
      for (int j = 0; j < 8; ++j) {
        bins[j] = sh.hist[255 - 8 * lane - j];
        lane_total += bins[j];
      }
      unsigned long long inclusive = lane_total;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const unsigned long long n = __shfl_up_sync(kFullMask, inclusive, offset);
        if (lane >= offset) inclusive += n;
      }
      const unsigned long long exclusive = inclusive - lane_total;
      const unsigned owners =
          __ballot_sync(kFullMask, exclusive < remaining && remaining <= inclusive);
      if (lane == __ffs(static_cast<int>(owners)) - 1) {
        unsigned long long above = exclusive;
        for (int j = 0; j < 8; ++j) {
          if (above + bins[j] >= remaining) {
            sh.digit = static_cast<uint32_t>(255 - 8 * lane - j);
            sh.remaining = remaining - above;
            sh.bin_total = bins[j];
            break;
          }
          above += bins[j];
        }
      }
    }
    __syncthreads();
    prefix |= sh.digit << shift;
    mask |= 0xffu << shift;
    remaining = sh.remaining;
  }
  __syncthreads();
  return prefix;
}

// The id of the n-th (from 1) lowest-id token inside `limit` whose key is `key`. Each thread
// counts a contiguous stretch of ids, so that a scan of the counts orders them by id.
__device__ int32_t nth_equal(const float* row, int32_t vocab, uint32_t key, Cut limit, uint32_t n,
                             Shared& sh) {
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

// One CTA per draw: the row's max and finiteness, then its top-k and nucleus cutoffs.
__global__ void __launch_bounds__(kThreads)
    draw_cutoffs_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                        const RowSampler* samplers, DrawState* states) {
  __shared__ Shared sh;
  extern __shared__ unsigned long long warp_hists[];  // [kWarps, 256]
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  const RowSampler s = samplers[blockIdx.x];
  DrawState& state = states[blockIdx.x];
  const auto tid = static_cast<int32_t>(threadIdx.x);

  // The row's largest logit (the lowest id among equals) and whether every logit is finite.
  float max_logit = -INFINITY;
  int32_t max_id = INT_MAX;
  bool finite = true;
  for (int32_t i = tid; i < vocab; i += kThreads) {
    const float x = row[i];
    finite = finite && isfinite(x);
    if (x > max_logit || max_id == INT_MAX) {
      max_logit = x;
      max_id = i;
    }
  }
  if (tid == 0) sh.finite = 1;
  __syncthreads();
  if (!finite) sh.finite = 0;
  max_id = block_best(max_logit, max_id, sh);  // syncs, so sh.finite is settled
  if (sh.finite == 0 || sampling_is_greedy(s.temperature)) {
    if (tid == 0) state.decided = sh.finite == 0 ? -1 : max_id;
    return;
  }
  max_logit = row[max_id];
  const float inv_t = 1.0f / s.temperature;
  const float min_p = s.min_p;
  const auto weight = [=](float x) { return sampling_weight(x, max_logit, inv_t, min_p); };

  Cut keep = kEverything;
  if (s.top_k > 0 && s.top_k < vocab) {
    const uint32_t key = radix_select(
        row, vocab, kEverything, static_cast<unsigned long long>(s.top_k),
        [](float) { return 1ull; }, sh, warp_hists);
    const unsigned long long needed = sh.remaining, equal = sh.bin_total;
    __syncthreads();
    keep = Cut{key, needed == equal ? INT_MAX
                                    : nth_equal(row, vocab, key, kEverything,
                                                static_cast<uint32_t>(needed), sh)};
  }
  Cut nucleus = kEverything;
  if (s.top_p < 1.0f) {
    unsigned long long total = 0;
    for (int32_t i = tid; i < vocab; i += kThreads) {
      const float x = row[i];
      if (inside(sampling_order_key(x), i, keep)) total += sampling_fixed_weight(weight(x));
    }
    total = block_sum(total, sh);
    const auto fixed_weight = [=](float x) {
      return static_cast<unsigned long long>(sampling_fixed_weight(weight(x)));
    };
    const uint32_t key = radix_select(row, vocab, keep, sampling_nucleus_target(s.top_p, total),
                                      fixed_weight, sh, warp_hists);
    const unsigned long long needed = sh.remaining, equal = sh.bin_total;
    __syncthreads();
    // Tokens of one key weigh the same: the nucleus takes as many as reach the target.
    const unsigned long long each = fixed_weight(sampling_key_value(key));
    const unsigned long long take = (needed + each - 1) / each;
    nucleus = Cut{key, take == equal / each
                           ? INT_MAX
                           : nth_equal(row, vocab, key, keep, static_cast<uint32_t>(take), sh)};
  }
  if (tid == 0) {
    state.max_logit = max_logit;
    state.keep = keep;
    state.nucleus = nucleus;
    state.decided = kRace;
    state.winner = 0;
  }
}

constexpr int kRaceThreads = 256;

// The race among the kept tokens of a stretch of the row, one CTA per (draw, stretch): the
// largest w / E wins, the lowest id among equals. Scores are positive floats, whose bits order
// like them, so one 64-bit atomicMax of (score bits, ~id) merges the stretches.
__global__ void __launch_bounds__(kRaceThreads)
    draw_race_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                     const RowSampler* samplers, DrawState* states, int32_t stretch) {
  DrawState& state = states[blockIdx.x];
  if (state.decided != kRace) return;
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  const RowSampler s = samplers[blockIdx.x];
  const float max_logit = state.max_logit, inv_t = 1.0f / s.temperature, min_p = s.min_p;
  const Cut keep = state.keep, nucleus = state.nucleus;
  const int32_t begin = static_cast<int32_t>(blockIdx.y) * stretch;
  const int32_t end = min(vocab, begin + stretch);
  unsigned long long best = 0;
  for (int32_t i = begin + static_cast<int32_t>(threadIdx.x); i < end; i += kRaceThreads) {
    const float x = row[i];
    const uint32_t key = sampling_order_key(x);
    if (!inside(key, i, keep) || !inside(key, i, nucleus)) continue;
    const float w = sampling_weight(x, max_logit, inv_t, min_p);
    if (w == 0.0f) continue;
    const unsigned long long packed =
        static_cast<unsigned long long>(__float_as_uint(sampling_score(w, s.key, i))) << 32 |
        (0xffffffffu - static_cast<uint32_t>(i));
    best = packed > best ? packed : best;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_down_sync(kFullMask, best, offset);
    best = other > best ? other : best;
  }
  __shared__ unsigned long long warps[kRaceThreads / 32];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warps[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kRaceThreads / 32; ++w)
      best = warps[w] > best ? warps[w] : best;
    if (best != 0) atomicMax(&state.winner, best);
  }
}

__global__ void draw_result_kernel(const DrawState* states, int32_t n, int32_t* out) {
  const int32_t r = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= n) return;
  const DrawState& state = states[r];
  out[r] = state.decided != kRace
               ? state.decided
               : static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(state.winner));
}

}  // namespace

size_t sample_rows_workspace_bytes(int32_t n) {
  return static_cast<size_t>(n > 0 ? n : 0) * sizeof(DrawState);
}

void sample_rows_cuda(const float* logits, int32_t vocab, const int32_t* rows,
                      const RowSampler* samplers, int32_t n, void* workspace, int32_t* out,
                      cudaStream_t stream) {
  QUENCH_REQUIRE(vocab >= 1 && n >= 0, "sample_rows: vocab ", vocab, " and rows ", n,
                 " must be >= 1 and >= 0");
  if (n == 0) return;
  QUENCH_REQUIRE(logits != nullptr && rows != nullptr && samplers != nullptr &&
                     workspace != nullptr && out != nullptr,
                 "sample_rows: logits, rows, samplers, workspace and out must not be null");
  auto* states = static_cast<DrawState*>(workspace);
  constexpr int kHistBytes = kWarps * 256 * sizeof(unsigned long long);
  check_cuda(cudaFuncSetAttribute(draw_cutoffs_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kHistBytes),
             "sample_rows: shared memory size");
  draw_cutoffs_kernel<<<static_cast<unsigned>(n), kThreads, kHistBytes, stream>>>(
      logits, vocab, rows, samplers, states);
  // The race spreads each row over enough CTAs to fill the GPU about twice, in stretches of at
  // least 2048 tokens.
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  const int32_t most = (vocab + 2047) / 2048;
  const int32_t stretches = std::max(1, std::min(most, (2 * sms + n - 1) / n));
  const int32_t stretch = (vocab + stretches - 1) / stretches;
  draw_race_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(stretches)), kRaceThreads,
                     0, stream>>>(logits, vocab, rows, samplers, states, stretch);
  draw_result_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, stream>>>(states, n, out);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "sample_rows launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
