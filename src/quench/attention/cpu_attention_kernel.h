// The CPU backend's attention kernel (ops/attention/attention_cpu.h) as an attention kernel:
// both phases, every configuration the reference serves, on host memory, chosen over the
// reference (which stays registered as the oracle and for `--prefill-kernel reference`).
// On a GPU arch it answers kMustNot: it reads host pointers.
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kCpuKernelName = "cpu";

void register_cpu_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
