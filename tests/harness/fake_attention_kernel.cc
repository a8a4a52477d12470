#include "harness/fake_attention_kernel.h"

#include <utility>

#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench::testing_support {
namespace {

class FakeKernel final : public AttentionKernel {
 public:
  explicit FakeKernel(FakeKernelSpec spec) : spec_(std::move(spec)) {}
  std::string name() const override { return spec_.name; }
  bool serves(AttentionPhase phase) const override {
    return phase == AttentionPhase::kPrefill ? spec_.prefill : spec_.decode;
  }
  MemorySpace memory_space() const override { return spec_.memory_space; }
  int32_t priority() const override { return spec_.priority; }
  DType query_dtype(const AttentionConfig& config, AttentionPhase phase) const override {
    return spec_.query_dtype ? spec_.query_dtype(config, phase) : config.model_dtype;
  }
  SupportCheck check(const AttentionConfig& config, AttentionPhase phase) const override {
    return spec_.check ? spec_.check(config, phase) : SupportCheck::may("fake");
  }
  void run(const AttentionParams& params, const KernelWorkspace&, void*) const override {
    spec_.runs->push_back(params);
    if (spec_.run_reference) {
      validate_attention_params(params);
      attention_reference(params);
    }
  }

 private:
  FakeKernelSpec spec_;
};

}  // namespace

std::unique_ptr<AttentionKernel> make_fake_kernel(FakeKernelSpec spec) {
  return std::make_unique<FakeKernel>(std::move(spec));
}

DType fp8_query_over_fp8_kv(const AttentionConfig& config, AttentionPhase) {
  return config.allow_fp8_query && is_fp8(config.kv_dtype) ? config.kv_dtype : config.model_dtype;
}

void register_gpu_standin_kernels(AttentionKernelRegistry& registry) {
  FakeKernelSpec hopper;
  hopper.name = "prefill_hopper";
  hopper.decode = false;
  hopper.priority = 30;
  hopper.memory_space = MemorySpace::kDevice;
  hopper.run_reference = false;
  hopper.query_dtype = fp8_query_over_fp8_kv;
  hopper.check = [](const AttentionConfig& c, AttentionPhase) {
    if (c.compute_capability != 90) {
      return SupportCheck::must_not(str_cat("Requires SM90; ", gpu_arch_name(c.compute_capability),
                                            " is not supported for prefill."));
    }
    if (c.num_kv_heads <= 0 || c.num_q_heads % c.num_kv_heads != 0) {
      return SupportCheck::must_not("num_qo_heads must be a multiple of num_kv_heads.");
    }
    return SupportCheck::may("Hopper TMA/wgmma prefill.");
  };
  registry.add(make_fake_kernel(hopper));

  FakeKernelSpec mma;
  mma.name = "prefill_mma";
  mma.decode = false;
  mma.priority = 20;
  mma.memory_space = MemorySpace::kDevice;
  mma.run_reference = false;
  mma.check = [](const AttentionConfig& c, AttentionPhase) {
    if (c.compute_capability < 80) return SupportCheck::must_not("Requires SM80 or newer.");
    return SupportCheck::may("mma.sync prefill (SM80+).");
  };
  registry.add(make_fake_kernel(mma));

  FakeKernelSpec gqa;
  gqa.name = "decode_gqa";
  gqa.prefill = false;
  gqa.priority = 20;
  gqa.memory_space = MemorySpace::kDevice;
  gqa.run_reference = false;
  gqa.check = [](const AttentionConfig& c, AttentionPhase) {
    if (c.compute_capability < 80) return SupportCheck::must_not("Requires SM80 or newer.");
    if (c.has_sinks) return SupportCheck::must("Has attention sinks.");
    return SupportCheck::may("Grouped-query decode.");
  };
  registry.add(make_fake_kernel(gqa));
}

}  // namespace quench::testing_support
