// RAII device memory for GPU tests and benchmarks, and QUENCH_CUDA_CHECK, which turns a failed
// CUDA runtime call into a quench::Error naming the call and the CUDA error. Header-only and
// plain C++ (only the CUDA runtime API), so CPU-only builds compile it without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "quench/core/error.h"

// Throws quench::Error("CUDA call <call> failed: <name>: <description> at file:line").
#define QUENCH_CUDA_CHECK(call)                                                          \
  do {                                                                                   \
    const cudaError_t quench_cuda_status_ = (call);                                      \
    if (quench_cuda_status_ != cudaSuccess) {                                            \
      ::quench::fail(::quench::str_cat(                                                  \
          "CUDA call ", #call, " failed: ", cudaGetErrorName(quench_cuda_status_), ": ", \
          cudaGetErrorString(quench_cuda_status_), " at ", __FILE__, ":", __LINE__));    \
    }                                                                                    \
  } while (false)

namespace quench::testing_support {

// One cudaMalloc allocation, freed on destruction. Move-only. A zero-byte buffer holds nullptr.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) QUENCH_CUDA_CHECK(cudaMalloc(&data_, bytes_));
  }
  // A device copy of a host vector.
  template <typename T>
  static DeviceBuffer from_host(const std::vector<T>& host) {
    DeviceBuffer buffer(host.size() * sizeof(T));
    buffer.upload(host.data(), buffer.bytes());
    return buffer;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);  // no throw from a destructor
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) cudaFree(data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

  // Host -> device copy of `bytes` bytes (at most bytes()).
  void upload(const void* host, size_t bytes) {
    QUENCH_REQUIRE(bytes <= bytes_, "DeviceBuffer upload of ", bytes, " bytes exceeds its ", bytes_,
                   " bytes");
    if (bytes > 0) QUENCH_CUDA_CHECK(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice));
  }
  // Device -> host copy of `bytes` bytes (at most bytes()).
  void download(void* host, size_t bytes) const {
    QUENCH_REQUIRE(bytes <= bytes_, "DeviceBuffer download of ", bytes, " bytes exceeds its ",
                   bytes_, " bytes");
    if (bytes > 0) QUENCH_CUDA_CHECK(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost));
  }
  // The whole buffer as a host vector of T (bytes() must be a multiple of sizeof(T)).
  template <typename T>
  std::vector<T> to_host() const {
    QUENCH_REQUIRE(bytes_ % sizeof(T) == 0, "DeviceBuffer of ", bytes_,
                   " bytes is not a whole number of ", sizeof(T), "-byte elements");
    std::vector<T> host(bytes_ / sizeof(T));
    download(host.data(), bytes_);
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace quench::testing_support
