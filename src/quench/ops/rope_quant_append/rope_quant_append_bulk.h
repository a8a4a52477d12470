// Large-batch path of the fused RoPE + quantize + paged KV append on sm_90 and later: token rows
// travel through a shared-memory ring filled by bulk asynchronous copies (internal to the fused
// op; rope_quant_append.cu picks it).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

struct FusedArgs;

// Whether this binary holds the bulk kernel for the current device: its code was compiled for
// sm_90 or later (a device below sm_90, or one that would JIT the kernel from the compute_80 PTX,
// where the kernel body is empty, gets false).
bool rope_quant_append_bulk_kernel_available();

// Tokens per ring stage for p (1 .. 8), or 0 when the bulk path cannot serve p: the kernel is not
// available (argument above), or one token's q, k, v rows plus its cos/sin row do not fit one
// stage (Hq + 2*Hkv heads x head_dim x 2 bytes above ~26 KB, e.g. 64 heads at head_dim 256).
// Alignment never excludes it: the GPU checks already require 16-byte aligned q/k/v, row strides
// and cos/sin cache, and every copied run (a token's q, k or v row, a cos/sin row) is a multiple
// of 16 bytes. sm_count: streaming multiprocessors (stages shrink so small batches still spread
// over all of them).
int32_t rope_quant_append_bulk_chunk_tokens(const RopeQuantAppendParams& p, bool kernel_available,
                                            int64_t sm_count);

// Launches the bulk kernel over args.p (validated; chunk_tokens from the function above).
void launch_rope_quant_append_bulk(const FusedArgs& args, int32_t chunk_tokens, int64_t sm_count,
                                   cudaStream_t stream);

}  // namespace quench
