// The CPU reference (ops/attention/attention_reference.h) as an attention kernel: serves both
// phases and every configuration the reference implements, on host memory, slowest of all.
// On a GPU arch it answers kMustNot: it reads host pointers, and a GPU engine's query, cache
// and metadata live in device memory.
#pragma once

#include "quench/attention/attention_kernel_registry.h"

namespace quench {

inline constexpr const char* kReferenceKernelName = "reference";

void register_reference_attention_kernel(AttentionKernelRegistry& registry);

}  // namespace quench
