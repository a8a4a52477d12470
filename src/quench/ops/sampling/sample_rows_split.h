// The draws' top-k and nucleus cutoffs with each row spread over several CTAs (sample_rows.cu's
// default; QUENCH_SAMPLING_CUTOFFS=block keeps one CTA per row): the same radix selections as the
// one-CTA-per-row kernel, one launch per digit, each histogram summed across the row's CTAs in
// global memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/sampling/row_sampling.h"
#include "quench/ops/sampling/sampling_device.cuh"

namespace quench {

// The global scratch of one draw: the current digit's histogram, the row max and the selection's
// progress.
struct SplitCutoffScratch {
  unsigned long long hist[256];
  unsigned long long max_packed;  // (order key << 32) | ~id of the row's largest logit
  unsigned long long total;       // the nucleus' total weight inside the top-k cut
  unsigned long long remaining;   // what the selection still needs, from the prefix's tokens
  unsigned long long bin_total;   // what the last picked digit's bin held
  uint32_t prefix, mask;
  int32_t non_finite;
  int32_t pad;
};

// Leaves in states [n] what draw_cutoffs_kernel would: each draw's decision (greedy, non-finite)
// or its max logit and top-k and nucleus cuts, with the race's winner reset. scratch: device [n],
// overwritten. top_k / top_p: whether any draw asks for that cutoff (its passes are skipped
// otherwise). stretches x stretch covers the row.
void enqueue_split_cutoffs(const float* logits, int32_t vocab, const int32_t* rows,
                           const RowSampler* samplers, int32_t n,
                           sampling_device::DrawState* states, SplitCutoffScratch* scratch,
                           int32_t stretches, int32_t stretch, bool top_k, bool top_p,
                           cudaStream_t stream);

}  // namespace quench
