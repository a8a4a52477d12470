// Device memory owned by a host object, and the one CUDA error check the host code around the
// kernels uses. Header-only: host files that include it compile with the CUDA runtime headers.
#pragma once

#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "quench/core/error.h"

namespace quench {

inline void check_cuda(cudaError_t status, const char* what) {
  QUENCH_REQUIRE(status == cudaSuccess, "CUDA call failed: ", what, ": ",
                 cudaGetErrorString(status));
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() { cudaFree(data_); }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of `count` elements at `host`.
template <typename T>
DeviceBuffer upload(const T* host, size_t count) {
  DeviceBuffer buffer(count * sizeof(T));
  if (count > 0) {
    check_cuda(cudaMemcpy(buffer.as<void>(), host, buffer.bytes(), cudaMemcpyHostToDevice),
               "cudaMemcpy to device");
  }
  return buffer;
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  return upload(host.data(), host.size());
}

}  // namespace quench
