#include "quench/attention/prefill_mma_attention_kernel.h"

#include <memory>

#include "quench/attention/attention_contract_check.h"
#include "quench/core/error.h"
#include "quench/ops/attention/prefill/generic/prefill_attention_generic.h"

namespace quench {
namespace {

class PrefillMmaAttentionKernel final : public AttentionKernel {
 public:
  std::string name() const override { return kPrefillMmaKernelName; }
  bool serves(AttentionPhase) const override { return true; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  int32_t priority() const override { return 10; }

  // FP8 operands are widened to bf16 inside the kernel, so an FP8 query would only add a
  // rounding step without any speed-up: it always takes the model dtype.
  DType query_dtype(const AttentionConfig& config, AttentionPhase) const override {
    return config.model_dtype;
  }

  SupportCheck check(const AttentionConfig& config, AttentionPhase phase) const override {
    if (config.compute_capability < 80) {
      return SupportCheck::must_not(str_cat("mma.sync bf16 needs sm_80 or newer; got ",
                                            gpu_arch_name(config.compute_capability), "."));
    }
    const SupportCheck contract = check_attention_contract(config);
    if (contract.level == SupportLevel::kMustNot) return contract;
    if (phase == AttentionPhase::kDecode) {
      return SupportCheck::may("Generic tensor-core kernel; serves decode rows as 1-row prefills.");
    }
    return SupportCheck::may("Generic tensor-core prefill (mma.sync, sm_80+).");
  }

  void run(const AttentionParams& params, const KernelWorkspace&, void* stream) const override {
    prefill_attention_generic(params, static_cast<cudaStream_t>(stream));
  }
};

}  // namespace

void register_prefill_mma_attention_kernel(AttentionKernelRegistry& registry) {
  registry.add(std::make_unique<PrefillMmaAttentionKernel>());
}

}  // namespace quench
