// The one switch between the fused RoPE + quantize + KV append kernel and the unfused chain, for
// the attention backend (fusion switch) and the benchmark.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "quench/ops/rope_quant_append/rope_quant_append_params.h"
#include "quench/ops/rope_quant_append/rope_quant_append_unfused.h"

namespace quench {

enum class RopeAppendPath : uint8_t { kFused, kUnfused };

const char* rope_append_path_name(RopeAppendPath path);  // "fused" | "unfused"
RopeAppendPath parse_rope_append_path(const std::string& name);

// Runs p on the chosen path; `workspace` is only used (and only needed) by kUnfused.
void run_rope_quant_append(const RopeQuantAppendParams& p, RopeAppendPath path, cudaStream_t stream,
                           const RopeAppendWorkspace& workspace = {});

}  // namespace quench
