#include "quench/attention/attention_kernel_selection.h"

#include <utility>

#include "quench/core/error.h"
#include "quench/core/log.h"

namespace quench {
namespace {

std::vector<AttentionKernelCandidate> ask_candidates(const AttentionConfig& config,
                                                     AttentionPhase phase,
                                                     const AttentionKernelRegistry& registry) {
  std::vector<AttentionKernelCandidate> candidates;
  for (const AttentionKernel* kernel : registry.kernels()) {
    if (!kernel->serves(phase)) continue;
    AttentionConfig asked = config;
    asked.q_dtype = kernel->query_dtype(config, phase);
    SupportCheck check;
    if (!config.allow_fp8_query && asked.q_dtype != config.model_dtype) {
      check = SupportCheck::must_not(str_cat("Needs a ", dtype_name(asked.q_dtype),
                                             " query, but query quantization is disabled."));
    } else {
      check = kernel->check(asked, phase);
    }
    candidates.push_back({kernel, asked.q_dtype, std::move(check)});
  }
  return candidates;
}

const AttentionKernelCandidate* find_candidate(const std::vector<AttentionKernelCandidate>& all,
                                               const std::string& name) {
  for (const auto& c : all) {
    if (c.kernel->name() == name) return &c;
  }
  return nullptr;
}

// The highest-priority candidate answering `level`, skipping `excluded` (may be null).
const AttentionKernelCandidate* best_with(const std::vector<AttentionKernelCandidate>& all,
                                          SupportLevel level,
                                          const AttentionKernelCandidate* excluded) {
  const AttentionKernelCandidate* best = nullptr;
  for (const auto& c : all) {
    if (&c == excluded || c.check.level != level) continue;
    if (best == nullptr || c.kernel->priority() > best->kernel->priority()) best = &c;
  }
  return best;
}

// The default policy: a kMust kernel, else the highest-priority kMay kernel.
const AttentionKernelCandidate* auto_pick(const std::vector<AttentionKernelCandidate>& all,
                                          const AttentionKernelCandidate* excluded) {
  if (const auto* must = best_with(all, SupportLevel::kMust, excluded)) return must;
  return best_with(all, SupportLevel::kMay, excluded);
}

// Why the default policy picked `chosen`: its own reason, plus the kernels it beat on priority
// (`excluded`, which the user ruled out, is not one of them).
std::string auto_reason(const std::vector<AttentionKernelCandidate>& all,
                        const AttentionKernelCandidate& chosen,
                        const AttentionKernelCandidate* excluded) {
  std::string reason = chosen.check.reason;
  if (chosen.check.level != SupportLevel::kMay) return reason;
  std::string others;
  for (const auto& c : all) {
    if (&c == &chosen || &c == excluded || c.check.level != SupportLevel::kMay) continue;
    others += others.empty() ? c.kernel->name() : ", " + c.kernel->name();
  }
  if (!others.empty()) reason += " Preferred over " + others + ".";
  return reason;
}

[[noreturn]] void fail_no_kernel(const AttentionConfig& config, AttentionPhase phase,
                                 const std::vector<AttentionKernelCandidate>& all,
                                 const AttentionKernelRegistry& registry) {
  std::string text = str_cat("No attention kernel can serve ", attention_phase_name(phase), " for ",
                             config.describe(), ".");
  for (const auto& c : all) {
    text += str_cat(" ", c.kernel->name(), " (q ", dtype_name(c.q_dtype),
                    "): ", support_level_name(c.check.level), ": ", c.check.reason);
  }
  if (all.empty()) text += str_cat(" No registered kernel serves this phase.");
  text += str_cat(" Registered kernels: ", registry.names(), ".");
  fail(text);
}

AttentionPhaseDecision decide_phase(const AttentionConfig& config, AttentionPhase phase,
                                    const AttentionKernelOverride& override_choice,
                                    const AttentionKernelRegistry& registry) {
  using Kind = AttentionKernelOverride::Kind;
  const std::vector<AttentionKernelCandidate> all = ask_candidates(config, phase, registry);
  const char* phase_name = attention_phase_name(phase);

  const AttentionKernelCandidate* chosen = nullptr;
  std::string reason;
  std::string conflict;  // non-empty when the override cannot be honoured

  const AttentionKernelCandidate* named =
      override_choice.kind == Kind::kAuto ? nullptr : find_candidate(all, override_choice.kernel);
  const std::string quoted = "'" + override_choice.kernel + "'";

  if (override_choice.kind == Kind::kUse) {
    const AttentionKernelCandidate* required = best_with(all, SupportLevel::kMust, named);
    if (named == nullptr) {
      conflict = str_cat("Cannot use attention kernel ", quoted, " for ", phase_name,
                         ": it does not serve ", phase_name, ".");
    } else if (named->check.level == SupportLevel::kMustNot) {
      conflict = str_cat("Cannot use attention kernel ", quoted, " for ", phase_name, ": ",
                         named->check.reason);
    } else if (named->check.level != SupportLevel::kMust && required != nullptr) {
      conflict = str_cat("Cannot use attention kernel ", quoted, " for ", phase_name, ": '",
                         required->kernel->name(), "' is required: ", required->check.reason);
    } else {
      chosen = named;
      reason = "Forced by override. " + named->check.reason;
    }
    if (chosen == nullptr) chosen = auto_pick(all, nullptr);
  } else if (override_choice.kind == Kind::kAvoid) {
    const AttentionKernelCandidate* other = auto_pick(all, named);
    const bool named_required = named != nullptr && named->check.level == SupportLevel::kMust;
    const bool other_required = other != nullptr && other->check.level == SupportLevel::kMust;
    if (named_required && !other_required) {
      conflict = str_cat("Cannot avoid attention kernel ", quoted, " for ", phase_name, ": ",
                         named->check.reason);
      chosen = named;
    } else if (other == nullptr && named != nullptr &&
               named->check.level != SupportLevel::kMustNot) {
      conflict = str_cat("Cannot avoid attention kernel ", quoted, " for ", phase_name,
                         ": no other kernel can serve it.");
      chosen = named;
    } else if (other != nullptr) {
      chosen = other;
      reason = str_cat("Override excludes ", quoted, ". ", auto_reason(all, *other, named));
    }
  } else {
    chosen = auto_pick(all, nullptr);
    if (chosen != nullptr) reason = auto_reason(all, *chosen, nullptr);
  }

  if (chosen == nullptr) fail_no_kernel(config, phase, all, registry);
  if (!conflict.empty()) {
    reason = str_cat(conflict, " Using '", chosen->kernel->name(), "': ", chosen->check.reason);
  }

  AttentionPhaseDecision decision;
  decision.phase = phase;
  decision.kernel = chosen->kernel;
  decision.q_dtype = chosen->q_dtype;
  decision.kv_dtype = config.kv_dtype;
  decision.out_dtype = config.out_dtype;
  decision.reason = reason;
  decision.override_honoured = conflict.empty();
  decision.candidates = all;

  const std::string line =
      str_cat("Attention ", phase_name, " kernel: ", chosen->kernel->name(), " (q ",
              dtype_name(decision.q_dtype), ", KV ", dtype_name(decision.kv_dtype), ", out ",
              dtype_name(decision.out_dtype), "). ", reason);
  if (conflict.empty()) {
    log_info(line);
  } else {
    log_warning(line);
  }
  return decision;
}

}  // namespace

AttentionBackendSelection::AttentionBackendSelection(AttentionConfig config,
                                                     AttentionPhaseDecision prefill,
                                                     AttentionPhaseDecision decode)
    : config_(std::move(config)), prefill_(std::move(prefill)), decode_(std::move(decode)) {}

AttentionBackendSelection AttentionBackendSelection::decide(
    const AttentionConfig& config, const AttentionKernelOverride& prefill_override,
    const AttentionKernelOverride& decode_override, const AttentionKernelRegistry& registry) {
  // Both phases are decided even when the first fails, so that one error names every problem.
  std::string errors;
  auto decide_or_note = [&](AttentionPhase phase, const AttentionKernelOverride& choice) {
    try {
      return decide_phase(config, phase, choice, registry);
    } catch (const Error& e) {
      errors += errors.empty() ? e.what() : std::string("\n") + e.what();
      return AttentionPhaseDecision{};
    }
  };
  AttentionPhaseDecision prefill = decide_or_note(AttentionPhase::kPrefill, prefill_override);
  AttentionPhaseDecision decode = decide_or_note(AttentionPhase::kDecode, decode_override);
  if (!errors.empty()) fail(errors);
  return AttentionBackendSelection(config, std::move(prefill), std::move(decode));
}

}  // namespace quench
