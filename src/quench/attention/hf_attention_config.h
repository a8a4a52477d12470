// The attention fields of a HuggingFace config.json (Llama, Qwen3, Mistral, Gemma-2 style):
//   num_attention_heads, num_key_value_heads (default: num_attention_heads),
//   head_dim (default: hidden_size / num_attention_heads), sliding_window (null, or ignored
//   when use_sliding_window is false), torch_dtype (or dtype), attn_logit_softcapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "quench/attention/attention_config.h"

namespace quench {

struct HfAttentionFields {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t sliding_window = 0;   // tokens; 0 = none
  float logit_soft_cap = 0.0f;  // 0 = none
  DType model_dtype = DType::kBF16;
};

// Parses config.json text; `source` names it in errors. Throws quench::Error naming the missing
// or bad field.
HfAttentionFields parse_hf_attention_fields(std::string_view json_text, const std::string& source);
// Reads and parses the file at `path`.
HfAttentionFields read_hf_attention_fields(const std::string& path);

// Fills the model-derived fields of `config` (heads, head dims, window, soft-cap, model dtype).
void apply_hf_attention_fields(const HfAttentionFields& fields, AttentionConfig& config);

}  // namespace quench
