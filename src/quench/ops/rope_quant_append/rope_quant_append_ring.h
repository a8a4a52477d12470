// Launcher of the fused RoPE/append kernel's ring schedule (rope_quant_append_ring.cu), for the
// host dispatch in rope_quant_append.cu.
#pragma once

#include <cuda_runtime.h>

namespace quench::fused_rope_append {

struct FusedArgs;

// `blocks` blocks of kThreads threads, args.warps_per_token warps per token.
void launch_ring_schedule(const FusedArgs& args, unsigned blocks, cudaStream_t stream);

}  // namespace quench::fused_rope_append
