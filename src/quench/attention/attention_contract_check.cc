#include "quench/attention/attention_contract_check.h"

#include <cmath>

#include "quench/core/error.h"

namespace quench {

SupportCheck check_attention_contract(const AttentionConfig& config) {
  const int32_t d = config.head_dim_qk;
  if (config.head_dim_qk != config.head_dim_vo) {
    return SupportCheck::must_not("Different q/k and v/o head dims are not supported.");
  }
  if (d != 64 && d != 128 && d != 256) {
    return SupportCheck::must_not(str_cat("head_dim ", d, " is not supported (64, 128, 256)."));
  }
  if (config.num_kv_heads <= 0 || config.num_q_heads <= 0 ||
      config.num_q_heads % config.num_kv_heads != 0) {
    return SupportCheck::must_not(
        str_cat("num_q_heads ", config.num_q_heads, " is not supported with num_kv_heads ",
                config.num_kv_heads, " (a positive multiple of num_kv_heads >= 1)."));
  }
  // Kernels would read a negative window or soft-cap as "off", and an infinite soft-cap turns
  // every score into NaN (inf * tanh(s / inf)): reject them rather than run something else.
  if (config.sliding_window < 0) {
    return SupportCheck::must_not(str_cat("sliding_window ", config.sliding_window,
                                          " is not supported (0 = none, or >= 1 tokens)."));
  }
  if (!std::isfinite(config.logit_soft_cap) || config.logit_soft_cap < 0.0f) {
    return SupportCheck::must_not(str_cat("logit_soft_cap ", config.logit_soft_cap,
                                          " is not supported (0 = none, or finite and > 0)."));
  }
  if (config.kv_dtype != DType::kBF16 && !is_fp8(config.kv_dtype)) {
    return SupportCheck::must_not(str_cat("KV dtype ", dtype_name(config.kv_dtype),
                                          " is not supported (bf16, fp8_e4m3, fp8_e5m2)."));
  }
  if (config.page_size != 16 && config.page_size != 32 && config.page_size != 64) {
    return SupportCheck::must_not(
        str_cat("page_size ", config.page_size, " is not supported (16, 32, 64)."));
  }
  const DType q = config.q_dtype;
  if (q != DType::kBF16 && q != DType::kF16 && !is_fp8(q)) {
    return SupportCheck::must_not(str_cat("q dtype ", dtype_name(q), " is not supported."));
  }
  if (is_fp8(q) && !is_fp8(config.kv_dtype)) {
    return SupportCheck::must_not("An FP8 query needs an FP8 KV cache.");
  }
  if (q == DType::kF16 && !is_fp8(config.kv_dtype)) {
    return SupportCheck::must_not("An f16 query needs an FP8 KV cache (no f16 x bf16 math).");
  }
  const DType out = config.out_dtype;
  if (out != DType::kBF16 && !is_fp8(out) && out != DType::kNVFP4) {
    return SupportCheck::must_not(str_cat("Output dtype ", dtype_name(out),
                                          " is not supported (bf16, fp8_e4m3, fp8_e5m2, nvfp4)."));
  }
  return SupportCheck::may("");
}

SupportCheck check_host_attention_kernel(const AttentionConfig& config, const char* who,
                                         const char* may_reason) {
  if (config.compute_capability != 0) {
    return SupportCheck::must_not(str_cat(who, " reads host memory; it cannot serve ",
                                          gpu_arch_name(config.compute_capability), "."));
  }
  const SupportCheck contract = check_attention_contract(config);
  if (contract.level == SupportLevel::kMustNot) return contract;
  return SupportCheck::may(may_reason);
}

}  // namespace quench
