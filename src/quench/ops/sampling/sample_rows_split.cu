#include "quench/core/device_buffer.h"
#include "quench/ops/sampling/sample_rows_split.h"

namespace quench {
namespace {

using namespace sampling_device;

constexpr int kSplitThreads = 256;
constexpr int kSplitWarps = kSplitThreads / 32;

enum class Phase : int { kTopK, kNucleus };

__device__ __forceinline__ bool applies(const RowSampler& s, int32_t vocab, Phase phase) {
  return phase == Phase::kTopK ? s.top_k > 0 && s.top_k < vocab : s.top_p < 1.0f;
}

__device__ __forceinline__ float draw_weight(float x, const DrawState& state, const RowSampler& s) {
  return sampling_weight(x, state.max_logit, 1.0f / s.temperature, s.min_p);
}

// Each CTA: the largest logit of its stretch (the lowest id among equals) and whether the stretch
// is finite, merged into the draw's scratch.
__global__ void __launch_bounds__(kSplitThreads)
    split_max_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                     SplitCutoffScratch* scratch, int32_t stretch) {
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  const int32_t begin = static_cast<int32_t>(blockIdx.y) * stretch;
  const int32_t end = min(vocab, begin + stretch);
  unsigned long long best = 0;
  bool finite = true;
  for (int32_t i = begin + static_cast<int32_t>(threadIdx.x); i < end; i += kSplitThreads) {
    const float x = row[i];
    finite = finite && isfinite(x);
    const unsigned long long packed = static_cast<unsigned long long>(sampling_order_key(x)) << 32 |
                                      (0xffffffffu - static_cast<uint32_t>(i));
    best = packed > best ? packed : best;
  }
  const bool all_finite = __syncthreads_and(finite) != 0;
  best = block_reduce<kSplitThreads>(best, Larger{});
  if (threadIdx.x == 0) {
    SplitCutoffScratch& sc = scratch[blockIdx.x];
    atomicMax(&sc.max_packed, best);
    if (!all_finite) atomicOr(&sc.non_finite, 1);
  }
}

// One thread per draw: its decision or its race set up, and the top-k selection started.
__global__ void split_start_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                                   const RowSampler* samplers, int32_t n, DrawState* states,
                                   SplitCutoffScratch* scratch) {
  const int32_t r = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= n) return;
  const RowSampler s = samplers[r];
  SplitCutoffScratch& sc = scratch[r];
  DrawState& state = states[r];
  const auto max_id = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(sc.max_packed));
  if (sc.non_finite != 0 || sampling_is_greedy(s.temperature)) {
    state.decided = sc.non_finite != 0 ? -1 : max_id;
    return;
  }
  state.max_logit = logits[static_cast<int64_t>(rows[r]) * vocab + max_id];
  state.keep = kEverything;
  state.nucleus = kEverything;
  state.decided = kRace;
  state.winner = 0;
  sc.prefix = 0;
  sc.mask = 0;
  sc.remaining = applies(s, vocab, Phase::kTopK) ? static_cast<unsigned long long>(s.top_k) : 0;
}

// Each CTA: the histogram of its stretch's tokens under the selection's prefix (inside the top-k
// cut for the nucleus), by the digit at `shift`, added into the draw's global histogram.
template <Phase kPhase>
__global__ void __launch_bounds__(kSplitThreads)
    split_hist_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                      const RowSampler* samplers, const DrawState* states,
                      SplitCutoffScratch* scratch, int32_t stretch, int shift) {
  const DrawState& state = states[blockIdx.x];
  const RowSampler s = samplers[blockIdx.x];
  if (state.decided != kRace || !applies(s, vocab, kPhase)) return;
  SplitCutoffScratch& sc = scratch[blockIdx.x];
  const uint32_t prefix = sc.prefix, mask = sc.mask;
  const Cut limit = kPhase == Phase::kTopK ? kEverything : state.keep;
  __shared__ unsigned long long warp_hists[kSplitWarps * 256];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  unsigned long long* hist = warp_hists + (threadIdx.x / 32) * 256;
  for (int b = lane; b < 256; b += 32)
    hist[b] = 0;
  __syncwarp();
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  const int32_t begin = static_cast<int32_t>(blockIdx.y) * stretch;
  const int32_t end = min(vocab, begin + stretch);
  // Whole warps run the loop (lanes past the stretch take no bin), as warp_bin_add needs.
  for (int32_t base = begin + static_cast<int32_t>(threadIdx.x) - lane; base < end;
       base += kSplitThreads) {
    const int32_t i = base + lane;
    uint32_t bin = 256;
    unsigned long long w = 0;
    if (i < end) {
      const float x = row[i];
      const uint32_t key = sampling_order_key(x);
      if ((key & mask) == prefix && inside(key, i, limit)) {
        w = kPhase == Phase::kTopK ? 1ull : sampling_fixed_weight(draw_weight(x, state, s));
        bin = (key >> shift) & 0xffu;
      }
    }
    warp_bin_add(hist, bin, w);
  }
  __syncthreads();
  for (int b = static_cast<int>(threadIdx.x); b < 256; b += kSplitThreads) {
    unsigned long long total = 0;
    for (int w = 0; w < kSplitWarps; ++w)
      total += warp_hists[w * 256 + b];
    if (total != 0) atomicAdd(&sc.hist[b], total);
  }
}

// One warp per draw: the digit at `shift` from the summed histogram, which it clears for the next
// digit; after the last digit, the cut (its last id pending where only some of the tokens of the
// cut's logit are in).
template <Phase kPhase>
__global__ void split_select_kernel(int32_t vocab, const RowSampler* samplers, DrawState* states,
                                    SplitCutoffScratch* scratch, int shift) {
  DrawState& state = states[blockIdx.x];
  const RowSampler s = samplers[blockIdx.x];
  if (state.decided != kRace || !applies(s, vocab, kPhase)) return;
  SplitCutoffScratch& sc = scratch[blockIdx.x];
  __shared__ uint32_t digit;
  __shared__ unsigned long long still_needed, bin_total;
  pick_digit(sc.hist, sc.remaining, &digit, &still_needed, &bin_total);
  __syncwarp();
  for (int b = static_cast<int>(threadIdx.x); b < 256; b += 32)
    sc.hist[b] = 0;
  if (threadIdx.x != 0) return;
  const uint32_t prefix = sc.prefix | digit << shift;
  sc.prefix = prefix;
  sc.mask |= 0xffu << shift;
  sc.remaining = still_needed;
  sc.bin_total = bin_total;
  if (shift != 0) return;
  if (kPhase == Phase::kTopK) {
    state.keep = Cut{prefix, still_needed == bin_total ? INT_MAX : kPendingId};
  } else {
    // Tokens of one key weigh the same: the nucleus takes as many as reach the target.
    const unsigned long long each =
        sampling_fixed_weight(draw_weight(sampling_key_value(prefix), state, s));
    const unsigned long long take = (still_needed + each - 1) / each;
    sc.remaining = take;
    state.nucleus = Cut{prefix, take == bin_total / each ? INT_MAX : kPendingId};
  }
}

// One CTA per draw whose cut is pending: its last id, the remaining-th lowest id of its logit.
template <Phase kPhase>
__global__ void __launch_bounds__(kThreads)
    split_nth_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                     const RowSampler* samplers, DrawState* states,
                     const SplitCutoffScratch* scratch) {
  __shared__ Shared sh;
  DrawState& state = states[blockIdx.x];
  const RowSampler s = samplers[blockIdx.x];
  if (state.decided != kRace || !applies(s, vocab, kPhase)) return;
  Cut& cut = kPhase == Phase::kTopK ? state.keep : state.nucleus;
  if (cut.id != kPendingId) return;
  const Cut limit = kPhase == Phase::kTopK ? kEverything : state.keep;
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  const int32_t id = nth_equal(row, vocab, cut.key, limit,
                               static_cast<uint32_t>(scratch[blockIdx.x].remaining), sh);
  if (threadIdx.x == 0) cut.id = id;
}

// Each CTA: the fixed-point weight of its stretch's tokens inside the top-k cut, into the total.
__global__ void __launch_bounds__(kSplitThreads)
    split_total_kernel(const float* logits, int32_t vocab, const int32_t* rows,
                       const RowSampler* samplers, const DrawState* states,
                       SplitCutoffScratch* scratch, int32_t stretch) {
  const DrawState& state = states[blockIdx.x];
  const RowSampler s = samplers[blockIdx.x];
  if (state.decided != kRace || !applies(s, vocab, Phase::kNucleus)) return;
  const float* row = logits + static_cast<int64_t>(rows[blockIdx.x]) * vocab;
  const int32_t begin = static_cast<int32_t>(blockIdx.y) * stretch;
  const int32_t end = min(vocab, begin + stretch);
  unsigned long long total = 0;
  for (int32_t i = begin + static_cast<int32_t>(threadIdx.x); i < end; i += kSplitThreads) {
    const float x = row[i];
    if (inside(sampling_order_key(x), i, state.keep))
      total += sampling_fixed_weight(draw_weight(x, state, s));
  }
  total = block_reduce<kSplitThreads>(total, Plus{});
  if (threadIdx.x == 0 && total != 0) atomicAdd(&scratch[blockIdx.x].total, total);
}

// One thread per draw: the nucleus selection started at its target.
__global__ void split_nucleus_start_kernel(int32_t vocab, const RowSampler* samplers, int32_t n,
                                           const DrawState* states, SplitCutoffScratch* scratch) {
  const int32_t r = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= n || states[r].decided != kRace || !applies(samplers[r], vocab, Phase::kNucleus)) return;
  SplitCutoffScratch& sc = scratch[r];
  sc.prefix = 0;
  sc.mask = 0;
  sc.remaining = sampling_nucleus_target(samplers[r].top_p, sc.total);
}

template <Phase kPhase>
void enqueue_selection(const float* logits, int32_t vocab, const int32_t* rows,
                       const RowSampler* samplers, int32_t n, DrawState* states,
                       SplitCutoffScratch* scratch, int32_t stretches, int32_t stretch,
                       cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(stretches));
  for (int shift = 24; shift >= 0; shift -= 8) {
    split_hist_kernel<kPhase><<<grid, kSplitThreads, 0, stream>>>(logits, vocab, rows, samplers,
                                                                  states, scratch, stretch, shift);
    split_select_kernel<kPhase>
        <<<static_cast<unsigned>(n), 32, 0, stream>>>(vocab, samplers, states, scratch, shift);
  }
  split_nth_kernel<kPhase><<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      logits, vocab, rows, samplers, states, scratch);
}

}  // namespace

void enqueue_split_cutoffs(const float* logits, int32_t vocab, const int32_t* rows,
                           const RowSampler* samplers, int32_t n, DrawState* states,
                           SplitCutoffScratch* scratch, int32_t stretches, int32_t stretch,
                           bool top_k, bool top_p, cudaStream_t stream) {
  check_cuda(
      cudaMemsetAsync(scratch, 0, static_cast<size_t>(n) * sizeof(SplitCutoffScratch), stream),
      "sample_rows: clear the cutoffs' scratch");
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(stretches));
  const auto per_draw = static_cast<unsigned>((n + 127) / 128);
  split_max_kernel<<<grid, kSplitThreads, 0, stream>>>(logits, vocab, rows, scratch, stretch);
  split_start_kernel<<<per_draw, 128, 0, stream>>>(logits, vocab, rows, samplers, n, states,
                                                   scratch);
  if (top_k) {
    enqueue_selection<Phase::kTopK>(logits, vocab, rows, samplers, n, states, scratch, stretches,
                                    stretch, stream);
  }
  if (top_p) {
    split_total_kernel<<<grid, kSplitThreads, 0, stream>>>(logits, vocab, rows, samplers, states,
                                                           scratch, stretch);
    split_nucleus_start_kernel<<<per_draw, 128, 0, stream>>>(vocab, samplers, n, states, scratch);
    enqueue_selection<Phase::kNucleus>(logits, vocab, rows, samplers, n, states, scratch, stretches,
                                       stretch, stream);
  }
}

}  // namespace quench
