// The set of attention kernels the engine can choose from. builtin() holds every kernel compiled
// into quench: builtin_attention_kernels.cc calls one registration function per kernel file
// (e.g. register_reference_attention_kernel), and a new kernel adds its own line there. Tests
// build their own registries with stand-in kernels.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "quench/attention/attention_kernel.h"

namespace quench {

class AttentionKernelRegistry {
 public:
  // Adds a kernel; throws quench::Error when its name is empty or already registered.
  void add(std::unique_ptr<AttentionKernel> kernel);

  // nullptr when no kernel has that name.
  const AttentionKernel* find(std::string_view name) const;
  // Registered kernels, in registration order.
  std::vector<const AttentionKernel*> kernels() const;
  // "reference, decode_gqa, ..." (for error messages).
  std::string names() const;

  // Every kernel built into quench (built once, on first use; never changes afterwards).
  static const AttentionKernelRegistry& builtin();

 private:
  std::vector<std::unique_ptr<AttentionKernel>> kernels_;
};

// Registers every kernel compiled into quench (builtin_attention_kernels.cc).
void register_builtin_attention_kernels(AttentionKernelRegistry& registry);

}  // namespace quench
