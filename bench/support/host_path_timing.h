// The host path a device-side pick replaces, timed: a step's logit rows copied to pageable host
// memory, then a CPU reference run on each row on one core. Benchmarks put it beside the kernel
// as their peer.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "quench/core/device_buffer.h"
#include "support/graph_timing.h"

namespace quench::bench {

// Median microseconds of `runs` wall-clock runs of: copy rows x vocab fp32 from `logits` to the
// host, then on_row(r, row) for each row (which checks its own result).
template <typename OnRow>
double host_path_us(const DeviceBuffer& logits, int32_t rows, int32_t vocab, int runs,
                    OnRow&& on_row) {
  std::vector<double> us;
  std::vector<float> host(static_cast<size_t>(rows) * vocab);
  for (int run = 0; run < runs; ++run) {
    const auto start = std::chrono::steady_clock::now();
    cuda_check(cudaMemcpy(host.data(), logits.as<void>(), host.size() * sizeof(float),
                          cudaMemcpyDeviceToHost),
               "logits to host");
    for (int32_t r = 0; r < rows; ++r)
      on_row(r, std::span<const float>(host.data() + static_cast<size_t>(r) * vocab,
                                       static_cast<size_t>(vocab)));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return median(us);
}

}  // namespace quench::bench
