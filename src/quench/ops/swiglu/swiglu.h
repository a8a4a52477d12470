// GPU SwiGLU over the fused gate/up projection: gate_up is bf16 [rows, 2 * features] with the gate
// in the first half of each row and up in the second (the model concatenates the two weights),
// out[r][i] = bf16(silu(gate) * up), fp32 math as swiglu_reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace quench {

// Launches on `stream`; throws quench::Error for bad sizes. Graph-capturable.
void swiglu_cuda(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                 cudaStream_t stream);

}  // namespace quench
