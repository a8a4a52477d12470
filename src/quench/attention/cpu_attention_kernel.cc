#include "quench/attention/cpu_attention_kernel.h"

#include <memory>

#include "quench/attention/attention_contract_check.h"
#include "quench/ops/attention/attention_cpu.h"

namespace quench {
namespace {

class CpuAttentionKernel final : public AttentionKernel {
 public:
  std::string name() const override { return kCpuKernelName; }
  bool serves(AttentionPhase) const override { return true; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  // Above the reference (0): same contract, many times faster.
  int32_t priority() const override { return 1; }

  // The kernel computes in fp32; quantizing its query would only lose accuracy.
  DType query_dtype(const AttentionConfig& config, AttentionPhase) const override {
    return config.model_dtype;
  }

  bool writes_fp8_rows(const AttentionConfig&) const override { return true; }
  SupportCheck check(const AttentionConfig& config, AttentionPhase) const override {
    return check_host_attention_kernel(config, "The CPU kernel",
                                       "CPU backend: any configuration, fp32 vector math.");
  }

  void run(const AttentionParams& params, const KernelWorkspace&, void*) const override {
    attention_cpu(params);
  }
};

}  // namespace

void register_cpu_attention_kernel(AttentionKernelRegistry& registry) {
  registry.add(std::make_unique<CpuAttentionKernel>());
}

}  // namespace quench
