#include "quench/attention/reference_attention_kernel.h"

#include <memory>

#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench {
namespace {

bool is_supported_head_dim(int32_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

class ReferenceAttentionKernel final : public AttentionKernel {
 public:
  std::string name() const override { return kReferenceKernelName; }
  bool serves(AttentionPhase) const override { return true; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  int32_t priority() const override { return 0; }

  // The reference computes in fp32; quantizing its query would only lose accuracy.
  DType query_dtype(const AttentionConfig& config, AttentionPhase) const override {
    return config.model_dtype;
  }

  SupportCheck check(const AttentionConfig& config, AttentionPhase) const override {
    if (config.compute_capability != 0) {
      return SupportCheck::must_not(str_cat("The CPU reference reads host memory; it cannot serve ",
                                            gpu_arch_name(config.compute_capability), "."));
    }
    if (config.head_dim_qk != config.head_dim_vo) {
      return SupportCheck::must_not("Different q/k and v/o head dims are not supported.");
    }
    if (!is_supported_head_dim(config.head_dim_qk)) {
      return SupportCheck::must_not(
          str_cat("head_dim ", config.head_dim_qk, " is not supported (64, 128, 256)."));
    }
    if (config.num_kv_heads <= 0 || config.num_q_heads % config.num_kv_heads != 0) {
      return SupportCheck::must_not("num_qo_heads must be a multiple of num_kv_heads.");
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
      return SupportCheck::must_not(
          str_cat("Output dtype ", dtype_name(out),
                  " is not supported (bf16, fp8_e4m3, fp8_e5m2, nvfp4)."));
    }
    return SupportCheck::may("CPU reference: any configuration, fp32 math, slowest.");
  }

  void run(const AttentionParams& params, void*) const override {
    validate_attention_params(params);
    attention_reference(params);
  }
};

}  // namespace

void register_reference_attention_kernel(AttentionKernelRegistry& registry) {
  registry.add(std::make_unique<ReferenceAttentionKernel>());
}

}  // namespace quench
