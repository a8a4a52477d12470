// CPU reference of the SwiGLU activation of Llama/Qwen MLPs:
//   out[t][i] = silu(gate[t][i]) * up[t][i],   silu(g) = g / (1 + exp(-g))
// in fp32, evaluated literally in that order.
#pragma once

#include <cstdint>

namespace quench {

//   gate, up: fp32 [num_tokens, features]; out: fp32 [num_tokens, features] (may alias gate).
void swiglu_reference(int64_t num_tokens, int32_t features, const float* gate, const float* up,
                      float* out);

}  // namespace quench
