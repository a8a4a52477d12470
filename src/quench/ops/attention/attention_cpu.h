// The CPU backend's attention: attention_reference's contract (attention_params.h, every
// configuration the reference accepts, host memory) computed fast enough to serve a model on the
// CPU. It is tested against attention_reference; the two differ in the order and width of their
// sums only: fp32 throughout here (the reference keeps the softmax sums in double), keys in chunks
// with an online softmax, dot products in interleaved vector lanes.
//
// Why not the reference: it converts every K/V element of every key once per query head through
// a dtype switch, keeps every score of a row, and sums in double. On 2 cores a 1000-token prefill
// of a 1B model spent ~40 s in it. Here one work item is a KV head and a block of a sequence's
// query rows: each chunk of keys is widened to fp32 once for all of the block's query heads, and
// scores and the weighted sum of V run as vector tiles (ops/cpu/fp32_dot_tile.h).
#pragma once

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Validates params (validate_attention_params) and computes every query row's attention.
void attention_cpu(const AttentionParams& params);

}  // namespace quench
