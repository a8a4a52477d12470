#include "quench/core/cuda_device.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "quench/core/error.h"

namespace quench {
namespace {

// Queries `device`; empty string on success, else the failing call and the runtime's reason.
std::string query(int32_t device, CudaDeviceProperties& out) {
  out.device = device;
  const struct {
    cudaDeviceAttr attribute;
    int32_t* value;
    const char* name;
  } queries[] = {
      {cudaDevAttrComputeCapabilityMajor, &out.compute_capability_major, "compute capability"},
      {cudaDevAttrComputeCapabilityMinor, &out.compute_capability_minor, "compute capability"},
      {cudaDevAttrMultiProcessorCount, &out.sm_count, "SM count"},
  };
  for (const auto& q : queries) {
    int value = 0;
    const cudaError_t status = cudaDeviceGetAttribute(&value, q.attribute, device);
    if (status != cudaSuccess) {
      cudaGetLastError();
      return str_cat("cudaDeviceGetAttribute(", q.name, ") failed: ", cudaGetErrorString(status));
    }
    *q.value = value;
  }
  return {};
}

}  // namespace

std::optional<CudaDeviceProperties> current_cuda_device_properties(std::string* error) {
  int device = 0;
  const cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (error != nullptr) *error = str_cat("no CUDA device: ", cudaGetErrorString(status));
    return std::nullopt;
  }
  static std::mutex mutex;
  static std::map<int32_t, CudaDeviceProperties> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(device); it != cache.end()) return it->second;
  CudaDeviceProperties properties;
  const std::string failure = query(device, properties);
  if (!failure.empty()) {
    if (error != nullptr) *error = failure;
    return std::nullopt;
  }
  cache.emplace(device, properties);
  return properties;
}

CudaDeviceProperties require_current_cuda_device_properties(const char* who) {
  std::string error;
  const std::optional<CudaDeviceProperties> properties = current_cuda_device_properties(&error);
  QUENCH_REQUIRE(properties.has_value(), who, ": ", error);
  return *properties;
}

CudaMemoryInfo current_cuda_memory_info(const char* who) {
  require_current_cuda_device_properties(who);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  const cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(str_cat(who, ": cudaMemGetInfo failed: ", cudaGetErrorString(status)));
  }
  return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

}  // namespace quench
