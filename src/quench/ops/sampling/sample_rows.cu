#include <algorithm>
#include <climits>

#include "quench/core/cuda_device.h"
#include "quench/core/device_buffer.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/ops/sampling/sample_rows.h"
#include "quench/ops/sampling/sample_rows_split.h"
#include "quench/ops/sampling/sampling_device.cuh"

namespace quench {
namespace {

using namespace sampling_device;

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
      warp_bin_add(hist, bin, w);
    }
    __syncthreads();
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += kThreads) {
      unsigned long long total = 0;
      for (int w = 0; w < kWarps; ++w)
        total += warp_hists[w * 256 + b];
      sh.hist[b] = total;
    }
    __syncthreads();
    if (threadIdx.x < 32) pick_digit(sh.hist, remaining, &sh.digit, &sh.remaining, &sh.bin_total);
    __syncthreads();
    prefix |= sh.digit << shift;
    mask |= 0xffu << shift;
    remaining = sh.remaining;
  }
  __syncthreads();
  return prefix;
}

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
  best = block_reduce<kRaceThreads>(best, Larger{});
  if (threadIdx.x == 0 && best != 0) atomicMax(&state.winner, best);
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

// The workspace: the split path's scratch [n], then the draws' states [n].
size_t sample_rows_workspace_bytes(int32_t n) {
  static_assert(sizeof(SplitCutoffScratch) % alignof(DrawState) == 0);
  return static_cast<size_t>(n > 0 ? n : 0) * (sizeof(SplitCutoffScratch) + sizeof(DrawState));
}

SampleRowsCutoffs sample_rows_cutoffs(std::span<const RowSampler> samplers, int32_t vocab) {
  SampleRowsCutoffs cutoffs{false, false};
  for (const RowSampler& s : samplers) {
    cutoffs.top_k = cutoffs.top_k || (s.top_k > 0 && s.top_k < vocab);
    cutoffs.top_p = cutoffs.top_p || s.top_p < 1.0f;
  }
  return cutoffs;
}

void sample_rows_cuda(const float* logits, int32_t vocab, const int32_t* rows,
                      const RowSampler* samplers, int32_t n, void* workspace, int32_t* out,
                      cudaStream_t stream, SampleRowsCutoffs cutoffs) {
  QUENCH_REQUIRE(vocab >= 1 && n >= 0, "sample_rows: vocab ", vocab, " and rows ", n,
                 " must be >= 1 and >= 0");
  if (n == 0) return;
  QUENCH_REQUIRE(logits != nullptr && rows != nullptr && samplers != nullptr &&
                     workspace != nullptr && out != nullptr,
                 "sample_rows: logits, rows, samplers, workspace and out must not be null");
  auto* scratch = static_cast<SplitCutoffScratch*>(workspace);
  auto* states = reinterpret_cast<DrawState*>(scratch + n);
  // The race (and the split cutoffs) spread each row over enough CTAs to fill the GPU about
  // twice, in stretches of at least 2048 tokens.
  const int32_t sms = require_current_cuda_device_properties("sample_rows").sm_count;
  const int32_t most = (vocab + 2047) / 2048;
  const int32_t stretches = std::max(1, std::min(most, (2 * sms + n - 1) / n));
  const int32_t stretch = (vocab + stretches - 1) / stretches;
  // The cutoffs' radix passes spread over the row's CTAs too (the default: 2-9x faster than one
  // CTA per row on the H100, bench/LOG.md twenty-fifth session); QUENCH_SAMPLING_CUTOFFS=block
  // keeps them in one CTA per row, for comparison.
  static const bool split = env_switch("QUENCH_SAMPLING_CUTOFFS", {"split", "block"}) != "block";
  if (split) {
    enqueue_split_cutoffs(logits, vocab, rows, samplers, n, states, scratch, stretches, stretch,
                          cutoffs.top_k, cutoffs.top_p, stream);
  } else {
    constexpr int kHistBytes = kWarps * 256 * sizeof(unsigned long long);
    static const bool hist_bytes_allowed = [] {  // once, not on every decode step
      check_cuda(cudaFuncSetAttribute(draw_cutoffs_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, kHistBytes),
                 "sample_rows: shared memory size");
      return true;
    }();
    (void)hist_bytes_allowed;
    draw_cutoffs_kernel<<<static_cast<unsigned>(n), kThreads, kHistBytes, stream>>>(
        logits, vocab, rows, samplers, states);
  }
  draw_race_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(stretches)), kRaceThreads,
                     0, stream>>>(logits, vocab, rows, samplers, states, stretch);
  draw_result_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, stream>>>(states, n, out);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "sample_rows launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
