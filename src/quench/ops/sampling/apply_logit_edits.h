// The logit edits (logit_edits.h) of several rows on the GPU, in place, as
// apply_logit_edits_reference applies them: one CTA per row, its edits first (tokens are unique
// within a row, so no two threads touch one logit), then the allowed mask over the whole row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/sampling/logit_edits.h"

namespace quench {

// Device arrays of one launch over n rows: logits fp32 [*, vocab]; rows int32 [n], each row's
// logits row; edit_offsets int32 [n + 1] into edits (row i's are [offsets[i], offsets[i + 1]),
// tokens in [0, vocab), not checked on the device); allowed_offsets int32 [n]: row i's first
// word in allowed_bits, or -1 for a row without a mask; allowed_words: the words of each mask.
struct LogitEditsArgs {
  float* logits = nullptr;
  int32_t vocab = 0;
  const int32_t* rows = nullptr;
  int32_t n = 0;
  const int32_t* edit_offsets = nullptr;
  const LogitEdit* edits = nullptr;
  const int32_t* allowed_offsets = nullptr;
  const uint32_t* allowed_bits = nullptr;
  int32_t allowed_words = 0;
};

// Launches on `stream`; throws quench::Error for bad sizes or a failed launch.
void apply_logit_edits_cuda(const LogitEditsArgs& args, cudaStream_t stream);

}  // namespace quench
