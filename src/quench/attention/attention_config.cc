#include "quench/attention/attention_config.h"

#include "quench/core/error.h"

namespace quench {

const char* attention_phase_name(AttentionPhase phase) {
  return phase == AttentionPhase::kPrefill ? "prefill" : "decode";
}

std::string gpu_arch_name(int32_t compute_capability) {
  if (compute_capability == 0) return "cpu";
  return str_cat("sm_", compute_capability);
}

int32_t parse_gpu_arch(std::string_view name) {
  if (name == "cpu") return 0;
  if (name == "sm_90" || name == "sm_90a") return 90;
  if (name == "sm_89") return 89;
  if (name == "sm_80") return 80;
  fail(str_cat("unknown GPU arch '", name, "'; allowed: sm_90, sm_89, sm_80, cpu"));
}

std::string AttentionConfig::describe() const {
  std::string text = str_cat(gpu_arch_name(compute_capability), ", ", num_q_heads, " q heads, ",
                             num_kv_heads, " KV heads, head_dim ", head_dim_qk);
  if (head_dim_vo != head_dim_qk) text += str_cat("/", head_dim_vo);
  text += str_cat(", KV ", dtype_name(kv_dtype), " page ", page_size, " ", kv_layout_name(layout),
                  ", model ", dtype_name(model_dtype), ", out ", dtype_name(out_dtype));
  if (sliding_window > 0) text += str_cat(", sliding window ", sliding_window);
  if (logit_soft_cap > 0.0f) text += str_cat(", soft-cap ", logit_soft_cap);
  if (has_sinks) text += ", sinks";
  if (!allow_fp8_query) text += ", query quantization disabled";
  return text;
}

}  // namespace quench
