// The per-phase kernel decision, made once at initialisation (SPEC §1.1) and never changed while
// the engine runs, so that CUDA graphs captured with it stay valid.
//
// For each phase, every registered kernel that serves it is asked for its query dtype and then
// for its support check with that query dtype. Then:
//   auto      a kernel that answers kMust wins; else the highest-priority kernel that answers kMay.
//   use X     X, unless X answers kMustNot (fall back to auto) or another kernel answers kMust
//             (use that one): both log a warning with the reason.
//   !X        auto without X, unless X answers kMust or nothing else can serve (then X, with a
//             warning).
// An honoured decision logs one info line with its reason. When no kernel can serve, decide()
// throws quench::Error listing every candidate and its reason.
#pragma once

#include <vector>

#include "quench/attention/attention_kernel_override.h"

namespace quench {

struct AttentionKernelCandidate {
  const AttentionKernel* kernel = nullptr;
  DType q_dtype = DType::kBF16;  // what the kernel asked for
  SupportCheck check;            // its answer for that query dtype
};

struct AttentionPhaseDecision {
  AttentionPhase phase = AttentionPhase::kPrefill;
  const AttentionKernel* kernel = nullptr;  // owned by the registry decide() was given
  DType q_dtype = DType::kBF16;             // the op hands this kernel its query in this dtype
  DType kv_dtype = DType::kBF16;
  DType out_dtype = DType::kBF16;
  std::string reason;             // why this kernel (and why not the override, if not honoured)
  bool override_honoured = true;  // false when a warning was logged
  std::vector<AttentionKernelCandidate> candidates;  // every kernel that serves the phase
};

class AttentionBackendSelection {
 public:
  // `registry` must outlive the result (builtin() lives for the whole program).
  static AttentionBackendSelection decide(
      const AttentionConfig& config, const AttentionKernelOverride& prefill_override,
      const AttentionKernelOverride& decode_override,
      const AttentionKernelRegistry& registry = AttentionKernelRegistry::builtin());

  const AttentionConfig& config() const { return config_; }
  const AttentionPhaseDecision& prefill() const { return prefill_; }
  const AttentionPhaseDecision& decode() const { return decode_; }
  const AttentionPhaseDecision& at(AttentionPhase phase) const {
    return phase == AttentionPhase::kPrefill ? prefill_ : decode_;
  }

 private:
  AttentionBackendSelection(AttentionConfig config, AttentionPhaseDecision prefill,
                            AttentionPhaseDecision decode);

  AttentionConfig config_;
  AttentionPhaseDecision prefill_;
  AttentionPhaseDecision decode_;
};

}  // namespace quench
