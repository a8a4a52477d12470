// The limits of the AttentionParams contract itself (ops/attention/attention_params.h), checked
// on an AttentionConfig: head dims, head counts, dtypes, page size. Every kernel's support check
// starts here, then adds its own limits (arch, memory space, speed).
#pragma once

#include "quench/attention/attention_kernel.h"

namespace quench {

// kMustNot with the reason for the first limit `config` breaks; otherwise kMay with an empty
// reason.
SupportCheck check_attention_contract(const AttentionConfig& config);

}  // namespace quench
