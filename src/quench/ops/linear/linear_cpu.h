// The CPU backend's linear layer: linear_reference's contract (HF's [out, in] bf16 weight, fp32
// x and out, fp32 sums) computed fast enough to serve a model on the CPU. It is tested against
// linear_reference and differs from it only in the order of the fp32 additions: each sum is kept
// in kLanes interleaved partial sums (element k joins partial k % kLanes), added up at the end.
//
// Why not the reference: its one dependent addition per element runs at one multiply-add per
// floating-point add latency, and it widens each weight row once per token block rather than once
// per tile of tokens. On 2 cores the reference prefilled 64 tokens of a 1B model in 15.5 s
// (~5 G multiply-adds/s); here independent partial sums vectorise, and a tile of kRowTile weight
// rows is multiplied with kTokenTile tokens at once, so that each value loaded serves several
// multiply-adds.
#pragma once

#include <cstdint>

namespace quench {

// Same arguments, checks and errors as linear_reference.
void linear_cpu(int32_t num_tokens, int32_t in_features, int32_t out_features, const float* x,
                const uint16_t* weight, float* out);

}  // namespace quench
