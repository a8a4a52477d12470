// What the attention backend must serve, as one plain description: the hardware, the model's
// attention shape and the KV cache format. Kernel support checks and the per-phase selection read
// it; nothing in it changes while the engine runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "quench/core/dtype.h"
#include "quench/kv_cache/kv_cache_layout.h"

namespace quench {

// The two phases of a batch; each gets its own kernel (SPEC §1.1).
enum class AttentionPhase : uint8_t { kPrefill, kDecode };

const char* attention_phase_name(AttentionPhase phase);  // "prefill", "decode"

struct AttentionConfig {
  // GPU compute capability as major*10 + minor (90 = sm_90, 89, 80, ...); 0 = the CPU backend.
  int32_t compute_capability = 0;

  int32_t head_dim_qk = 128;  // head dim of q and k
  int32_t head_dim_vo = 128;  // head dim of v and the output
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;

  DType kv_dtype = DType::kBF16;  // bf16, fp8_e4m3 or fp8_e5m2
  int32_t page_size = 16;
  KvLayout layout = KvLayout::kNHD;

  int32_t sliding_window = 0;   // tokens a query sees, itself included (HF convention); 0 = none
  float logit_soft_cap = 0.0f;  // 0 = none
  bool has_sinks = false;       // per-head attention-sink logits

  // The query dtype a kernel would receive. Selection fills it per kernel from
  // AttentionKernel::query_dtype before asking the kernel's support check.
  DType q_dtype = DType::kBF16;
  DType out_dtype = DType::kBF16;    // bf16, fp8_e4m3, fp8_e5m2 or nvfp4
  DType model_dtype = DType::kBF16;  // dtype of activations around attention (bf16 or f16)

  // False when the user disabled query quantization: every kernel must then take a query in
  // model_dtype, also over an FP8 KV cache (SPEC §1.1, last row of the dtype matrix).
  bool allow_fp8_query = true;

  // One line for logs and `quench explain`.
  std::string describe() const;
};

// "sm_90" (compute capability 90) ... ; "cpu" for 0.
std::string gpu_arch_name(int32_t compute_capability);
// Parses "sm_90", "sm_89", "sm_80" or "cpu"; throws quench::Error listing the allowed names.
int32_t parse_gpu_arch(std::string_view name);

}  // namespace quench
