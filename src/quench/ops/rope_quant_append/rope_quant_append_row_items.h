// The small-batch fused RoPE + quantize + paged KV append kernel (one (token, head) row per lane
// group); rope_quant_append_cuda picks it for decode-sized batches.
#pragma once

#include <cuda_runtime.h>

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Launches the row-item kernel on `stream` for params that rope_quant_append_cuda has checked
// (and found supported) and with num_tokens > 0. Same results and contract as
// rope_quant_append_cuda.
void launch_rope_quant_append_row_items(const RopeQuantAppendParams& p, cudaStream_t stream);

}  // namespace quench
