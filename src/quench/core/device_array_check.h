// The host-side check every GPU launcher makes of the device arrays it passes to a kernel: a null
// or misaligned pointer faults on the device, which poisons the CUDA context for every later
// call, so it is refused before the launch with the array's name and address.
#pragma once

#include <cstdint>

#include "quench/core/error.h"

namespace quench {

// Throws quench::Error unless `array` is non-null and 16-byte aligned (what the kernels' 16-byte
// loads and stores need): "<op>: <name> (<address>) must be a non-null, 16-byte aligned device
// pointer".
inline void require_aligned_device_array(const void* array, const char* op, const char* name) {
  QUENCH_REQUIRE(array != nullptr && reinterpret_cast<uintptr_t>(array) % 16 == 0, op, ": ", name,
                 " (", array, ") must be a non-null, 16-byte aligned device pointer");
}

}  // namespace quench
