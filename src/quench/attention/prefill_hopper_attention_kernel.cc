#include "quench/attention/prefill_hopper_attention_kernel.h"

#include <memory>

#include "quench/attention/attention_contract_check.h"
#include "quench/core/error.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench {
namespace {

// pv_precision picks the P·V operands for an FP8 query (see the header).
class PrefillHopperAttentionKernel final : public AttentionKernel {
 public:
  explicit PrefillHopperAttentionKernel(HopperPvPrecision pv_precision)
      : pv_precision_(pv_precision) {}

  std::string name() const override {
    return fp8_pv() ? kPrefillHopperFp8PvKernelName : kPrefillHopperKernelName;
  }
  bool serves(AttentionPhase phase) const override { return phase == AttentionPhase::kPrefill; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  // Above prefill_mma (10), since on the H200 it is 1.2-2.9x faster at hd64/128 for every
  // operand kind (bench/LOG.md, 2026-12-03 third session; at hd256 the warp-specialized kernels
  // 1.5-1.8x the synchronous one, sixth session). FP8 P·V above bf16 P·V: where it serves (an
  // FP8 query) it is 1.3x faster at 8k-16k tokens and within the SPEC FP8 tolerance on the
  // whole test grid (short rows included, by the two-term P of the last tiles; bench/LOG.md,
  // 2026-12-04).
  int32_t priority() const override { return fp8_pv() ? 16 : 15; }

  // FP8 Q·Kᵀ on the tensor cores needs an FP8 query over an e4m3 cache (head_dim 128 only).
  DType query_dtype(const AttentionConfig& config, AttentionPhase) const override {
    const bool fp8_path =
        config.allow_fp8_query && config.kv_dtype == DType::kFP8E4M3 && config.head_dim_qk == 128;
    return fp8_path ? DType::kFP8E4M3 : config.model_dtype;
  }

  SupportCheck check(const AttentionConfig& config, AttentionPhase) const override {
    if (config.compute_capability != 90) {
      return SupportCheck::must_not(
          str_cat("wgmma needs sm_90; got ", gpu_arch_name(config.compute_capability), "."));
    }
    const SupportCheck contract = check_attention_contract(config);
    if (contract.level == SupportLevel::kMustNot) return contract;
    if (config.kv_dtype == DType::kFP8E5M2) {
      return SupportCheck::must_not("prefill_hopper does not support an fp8_e5m2 cache.");
    }
    if (config.q_dtype == DType::kF16) {
      return SupportCheck::must_not("prefill_hopper does not support an f16 query.");
    }
    if (is_fp8(config.q_dtype) && config.head_dim_qk != 128) {
      return SupportCheck::must_not("prefill_hopper takes an FP8 query only at head_dim 128.");
    }
    if (fp8_pv()) {
      if (!is_fp8(config.q_dtype)) {
        return SupportCheck::must_not(
            "prefill_hopper_fp8pv needs an FP8 query: an fp8_e4m3 cache at head_dim 128 with "
            "query quantization enabled.");
      }
      return SupportCheck::may(
          "Hopper TMA/wgmma prefill with FP8 P·V (P in e4m3, two e4m3 terms on each row's "
          "last two KV tiles; fp32 accumulation per tile).");
    }
    if (is_fp8(config.q_dtype)) {
      return SupportCheck::may(
          "Hopper TMA/wgmma prefill, warp-specialized; FP8 Q·Kᵀ, bf16 P·V (P in bf16, FP8 V "
          "widened).");
    }
    return SupportCheck::may("Hopper TMA/wgmma prefill, warp-specialized.");
  }

  void run(const AttentionParams& params, const KernelWorkspace&, void* stream) const override {
    prefill_attention_hopper(params, static_cast<cudaStream_t>(stream), pv_precision_);
  }

 private:
  bool fp8_pv() const { return pv_precision_ == HopperPvPrecision::kFp8; }

  HopperPvPrecision pv_precision_;
};

}  // namespace

void register_prefill_hopper_attention_kernel(AttentionKernelRegistry& registry) {
  registry.add(std::make_unique<PrefillHopperAttentionKernel>(HopperPvPrecision::kBf16));
  registry.add(std::make_unique<PrefillHopperAttentionKernel>(HopperPvPrecision::kFp8));
}

}  // namespace quench
