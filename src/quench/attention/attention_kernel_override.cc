#include "quench/attention/attention_kernel_override.h"

#include "quench/core/error.h"

namespace quench {

AttentionKernelOverride AttentionKernelOverride::parse(std::string_view text,
                                                       const AttentionKernelRegistry& registry) {
  if (text == "auto") return {};
  const bool avoid = !text.empty() && text.front() == '!';
  const std::string_view name = avoid ? text.substr(1) : text;
  QUENCH_REQUIRE(
      registry.find(name) != nullptr, "unknown attention kernel override '", text,
      "'; allowed: auto, a kernel name, or !name to exclude one; kernels: ", registry.names());
  return {avoid ? Kind::kAvoid : Kind::kUse, std::string(name)};
}

std::string AttentionKernelOverride::text() const {
  switch (kind) {
    case Kind::kAuto:
      return "auto";
    case Kind::kUse:
      return kernel;
    case Kind::kAvoid:
      return "!" + kernel;
  }
  return "auto";
}

}  // namespace quench
