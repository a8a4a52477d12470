#include "quench/attention/decode_gqa_attention_kernel.h"

#include <memory>

#include "quench/attention/attention_contract_check.h"
#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench {
namespace {

class DecodeGqaAttentionKernel final : public AttentionKernel {
 public:
  std::string name() const override { return kDecodeGqaKernelName; }
  bool serves(AttentionPhase phase) const override { return phase == AttentionPhase::kDecode; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  int32_t priority() const override { return 20; }

  // Decode is memory-bound: quantizing the query saves nothing and costs accuracy, so the
  // query stays in the model dtype (SPEC §1.1: "xqa does not support FP8-Q").
  DType query_dtype(const AttentionConfig& config, AttentionPhase) const override {
    return config.model_dtype;
  }

  // The epilogue quantizes one q head's row per warp: 128-column groups at head_dim 128.
  bool writes_fp8_rows(const AttentionConfig& config) const override {
    return config.head_dim_vo == 128;
  }
  SupportCheck check(const AttentionConfig& config, AttentionPhase) const override {
    if (config.compute_capability < 80) {
      return SupportCheck::must_not(str_cat("mma.sync bf16 needs sm_80 or newer; got ",
                                            gpu_arch_name(config.compute_capability), "."));
    }
    if (is_fp8(config.q_dtype)) return SupportCheck::must_not("decode_gqa does not support FP8-Q.");
    const SupportCheck contract = check_attention_contract(config);
    if (contract.level == SupportLevel::kMustNot) return contract;
    return SupportCheck::may("Grouped-query decode: one read of K/V per KV head, split-KV.");
  }

  size_t workspace_bytes(const AttentionParams& params) const override {
    return decode_attention_workspace_bytes(params);
  }

  void run(const AttentionParams& params, const KernelWorkspace& workspace,
           void* stream) const override {
    decode_attention(params, workspace.data, workspace.bytes, static_cast<cudaStream_t>(stream));
  }
};

}  // namespace

void register_decode_gqa_attention_kernel(AttentionKernelRegistry& registry) {
  registry.add(std::make_unique<DecodeGqaAttentionKernel>());
}

}  // namespace quench
