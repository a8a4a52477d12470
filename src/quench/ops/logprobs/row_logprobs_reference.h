// The log-softmax of one logit row at a token, and the row's `top` largest logits as
// log-probabilities: the CPU reference that the engine uses on the CPU and that row_logprobs_cuda
// is tested against. The sum of exponentials runs in double with the row's largest logit taken
// out first; top entries come larger first, equal logits by lower id. A row holding a NaN or an
// infinity has no softmax: its log-probability is NaN and its top list empty.
#pragma once

#include <cstdint>
#include <span>

#include "quench/ops/logprobs/token_logprobs.h"

namespace quench {

// token in [0, row.size()), top in [0, kMaxTopLogprobs] (at most row.size() entries come back).
// Throws quench::Error naming the bad argument.
TokenLogprobs row_logprobs_reference(std::span<const float> row, int32_t token, int32_t top);

}  // namespace quench
