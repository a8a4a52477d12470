#include "quench/attention/reference_attention_kernel.h"

#include <memory>

#include "quench/attention/attention_contract_check.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench {
namespace {

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

  bool writes_fp8_rows(const AttentionConfig&) const override { return true; }
  SupportCheck check(const AttentionConfig& config, AttentionPhase) const override {
    return check_host_attention_kernel(config, "The CPU reference",
                                       "CPU reference: any configuration, fp32 math, slowest.");
  }

  void run(const AttentionParams& params, const KernelWorkspace&, void*) const override {
    attention_reference(params);  // validates params first
  }
};

}  // namespace

void register_reference_attention_kernel(AttentionKernelRegistry& registry) {
  registry.add(std::make_unique<ReferenceAttentionKernel>());
}

}  // namespace quench
