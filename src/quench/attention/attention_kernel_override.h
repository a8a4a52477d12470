// The user's per-phase kernel override: "auto" (the default policy decides), a kernel name
// ("use this kernel"), or "!name" ("any kernel but this one").
#pragma once

#include <string>
#include <string_view>

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

struct AttentionKernelOverride {
  enum class Kind : uint8_t { kAuto, kUse, kAvoid };
  Kind kind = Kind::kAuto;
  std::string kernel;  // the named kernel for kUse and kAvoid

  // Parses "auto", "name" or "!name"; throws quench::Error when the name is not in `registry`,
  // listing the registered names.
  static AttentionKernelOverride parse(std::string_view text,
                                       const AttentionKernelRegistry& registry);
  // "auto", "name" or "!name" (what parse accepts).
  std::string text() const;
};

}  // namespace quench
