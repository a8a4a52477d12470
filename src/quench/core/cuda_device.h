// The properties of the current CUDA device that kernel launchers read on every call (compute
// capability for kernel choices, SM count for grid shapes), queried from the runtime once per
// device and then served from a cache: a launch on the decode or prefill path should not pay for
// attribute queries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace quench {

struct CudaDeviceProperties {
  int32_t device = 0;  // the CUDA device index
  int32_t compute_capability_major = 0;
  int32_t compute_capability_minor = 0;
  int32_t sm_count = 0;
};

// Properties of the calling thread's current device (cudaGetDevice). Without a usable device:
// nullopt, with the runtime's reason in *error when error is given (the runtime's sticky error
// state is cleared, so later calls are not blamed for it).
std::optional<CudaDeviceProperties> current_cuda_device_properties(std::string* error = nullptr);

// The same, throwing quench::Error (naming `who`) where there is no usable device.
CudaDeviceProperties require_current_cuda_device_properties(const char* who);

struct CudaMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};

// Free and total memory of the current device now (cudaMemGetInfo; not cached: it changes).
// Throws quench::Error naming `who` where there is no usable device.
CudaMemoryInfo current_cuda_memory_info(const char* who);

}  // namespace quench
