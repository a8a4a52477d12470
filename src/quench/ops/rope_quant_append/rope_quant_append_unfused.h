// The unfused GPU chain for RopeQuantAppendParams: rope kernel -> quantize kernels -> KV append
// kernel, through intermediate buffers in a caller-provided workspace. It is the baseline the
// fused kernel is measured against and the path when the fusion is switched off. The bf16
// intermediate rounds once more than the reference: bf16 outputs are bit-exact, FP8 outputs are
// within one FP8 ulp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Device memory for the intermediates; at least rope_quant_append_workspace_bytes(p), 256-byte
// aligned. Unused by the fused path.
struct RopeAppendWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// Workspace the unfused chain needs for p: rotated q and k in bf16, and for an FP8 cache the
// quantized k and v rows.
size_t rope_quant_append_workspace_bytes(const RopeQuantAppendParams& p);

// Launches the chain on `stream` (up to 6 kernels; no host sync; graph-capturable). Throws
// quench::Error for invalid params or a workspace that is too small.
void rope_quant_append_unfused_cuda(const RopeQuantAppendParams& p,
                                    const RopeAppendWorkspace& workspace, cudaStream_t stream);

}  // namespace quench
