// The fused GPU kernel of RoPE + quantize + paged KV append (SPEC §1, contract in
// rope_quant_append_params.h): one pass over q, k and v.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Empty when the fused kernel handles p (after check_rope_quant_append_gpu_params); otherwise why
// not. The unfused chain has the same coverage; the reason is for the backend's decision log.
std::string rope_quant_append_fused_unsupported_reason(const RopeQuantAppendParams& p);

// Launches the fused kernel on `stream` (device pointers in p; per-head scales, if any, are
// device arrays). Throws quench::Error for invalid or unsupported params. No host sync; safe to
// capture in a CUDA graph. Tokens whose slot is -1 (or outside the cache), or whose position is
// outside the cos/sin cache, write nothing: no q row, no K/V.
void rope_quant_append_cuda(const RopeQuantAppendParams& p, cudaStream_t stream);

}  // namespace quench
