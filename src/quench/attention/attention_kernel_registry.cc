#include "quench/attention/attention_kernel_registry.h"

#include <utility>

#include "quench/core/error.h"

namespace quench {

void AttentionKernelRegistry::add(std::unique_ptr<AttentionKernel> kernel) {
  QUENCH_REQUIRE(kernel != nullptr, "cannot register a null attention kernel");
  const std::string name = kernel->name();
  QUENCH_REQUIRE(!name.empty() && name.front() != '!' && name != "auto", "attention kernel name '",
                 name, "' is not allowed (empty, 'auto' or '!...')");
  QUENCH_REQUIRE(find(name) == nullptr, "attention kernel '", name,
                 "' is registered twice; registered: ", names());
  kernels_.push_back(std::move(kernel));
}

const AttentionKernel* AttentionKernelRegistry::find(std::string_view name) const {
  for (const auto& kernel : kernels_) {
    if (kernel->name() == name) return kernel.get();
  }
  return nullptr;
}

std::vector<const AttentionKernel*> AttentionKernelRegistry::kernels() const {
  std::vector<const AttentionKernel*> result;
  result.reserve(kernels_.size());
  for (const auto& kernel : kernels_)
    result.push_back(kernel.get());
  return result;
}

std::string AttentionKernelRegistry::names() const {
  std::string text;
  for (const auto& kernel : kernels_) {
    if (!text.empty()) text += ", ";
    text += kernel->name();
  }
  return text;
}

const AttentionKernelRegistry& AttentionKernelRegistry::builtin() {
  static const AttentionKernelRegistry registry = [] {
    AttentionKernelRegistry r;
    register_builtin_attention_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace quench
