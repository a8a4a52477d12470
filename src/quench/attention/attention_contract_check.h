// The limits of the AttentionParams contract itself (ops/attention/attention_params.h), checked
// on an AttentionConfig: head dims, head counts, dtypes, page size. Every kernel's support check
// starts here, then adds its own limits (arch, memory space, speed).
#pragma once

#include "quench/attention/attention_kernel.h"

namespace quench {

// kMustNot with the reason for the first limit `config` breaks; otherwise kMay with an empty
// reason.
SupportCheck check_attention_contract(const AttentionConfig& config);

// The support check of a kernel that reads host memory and serves the whole contract (the CPU
// kernels): kMustNot on a GPU arch ("<who> reads host memory; it cannot serve sm_90."), the
// contract's kMustNot, else kMay with may_reason.
SupportCheck check_host_attention_kernel(const AttentionConfig& config, const char* who,
                                         const char* may_reason);

}  // namespace quench
