// The CPU reference of a random draw per row of logits (row_sampling.h defines the draw). It
// orders what it must with std::nth_element and std::sort, an algorithm of its own beside the GPU
// kernel's radix selection, and gives the same token for the same row and key.
#pragma once

#include <cstdint>
#include <span>

#include "quench/ops/sampling/row_sampling.h"

namespace quench {

// logits: fp32 [vocab], vocab >= 1. Returns the drawn token id, or -1 when the row holds a NaN or
// an infinity (the caller names that as the model's fault). Throws quench::Error for parameters
// outside their ranges (temperature >= 0, top_k >= 0, top_p in (0, 1], min_p in [0, 1]).
int32_t sample_row_reference(std::span<const float> logits, const RowSampler& sampler);

// Throws quench::Error naming the field when a sampler's parameters are out of range.
void check_row_sampler(const RowSampler& sampler);

}  // namespace quench
