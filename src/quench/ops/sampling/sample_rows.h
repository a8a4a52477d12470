// GPU random draws per row of logits, as sample_row_reference (row_sampling.h defines the draw):
// a sampled row sends one int to the host instead of a vocabulary of floats, and the host sorts
// nothing. First the max and the cutoffs: radix selections of the top-k and nucleus ends (8-bit
// digits of the logits' order keys; counts for top-k, fixed-point weights for the nucleus), each
// row's passes spread over several CTAs (sample_rows_split.h; QUENCH_SAMPLING_CUTOFFS=block runs
// them in one CTA per row instead). Then the exponential race among the kept tokens, each row
// spread over several CTAs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "quench/ops/sampling/row_sampling.h"

namespace quench {

// The device workspace sample_rows_cuda needs for n draws.
size_t sample_rows_workspace_bytes(int32_t n);

// Which cutoffs any of a launch's draws asks for, from the host's copy of their samplers: the
// split cutoffs (the default) launch only those passes. The default, both, is
// always correct.
struct SampleRowsCutoffs {
  bool top_k = true;
  bool top_p = true;
};
SampleRowsCutoffs sample_rows_cutoffs(std::span<const RowSampler> samplers, int32_t vocab);

// logits: device fp32 [*, vocab]; rows: device int32 [n], the logits row of each draw; samplers:
// device [n], each checked by check_row_sampler; workspace: device, sample_rows_workspace_bytes(n)
// (16-byte aligned); out: device int32 [n], the drawn ids (-1 where the row holds a NaN or an
// infinity). Launches on `stream`; throws quench::Error for bad sizes or a failed launch.
void sample_rows_cuda(const float* logits, int32_t vocab, const int32_t* rows,
                      const RowSampler* samplers, int32_t n, void* workspace, int32_t* out,
                      cudaStream_t stream, SampleRowsCutoffs cutoffs = {});

}  // namespace quench
