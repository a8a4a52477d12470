#include "quench/core/dependent_launch.h"

#include <string>

#include "quench/core/cuda_device.h"
#include "quench/core/env_switch.h"

namespace quench {

bool step_dependent_launch_enabled() {
  static const bool enabled = [] {
    if (env_switch("QUENCH_PDL", {"0", "1"}) == "0") return false;
    const std::optional<CudaDeviceProperties> device = current_cuda_device_properties();
    return device.has_value() && device->compute_capability_major >= 9;
  }();
  return enabled;
}

}  // namespace quench
