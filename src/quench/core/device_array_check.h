// The host-side checks every GPU launcher makes of the device arrays it passes to a kernel: a
// null or misaligned pointer, or a row stride that reads outside the rows, faults on the device,
// which poisons the CUDA context for every later call, so it is refused before the launch with
// the array's name and the offending value.
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

// Throws quench::Error unless `stride`, the distance in elements of `elem_bytes` bytes between
// the rows of a row-major array, spans at least one row of `row_elems` elements (shorter rows
// overlap; a negative stride reads before the array) and keeps every row 16-byte aligned:
// "<op>: <name> <stride> must be >= <row_elems> (<row_what>) and a multiple of <16 /
// elem_bytes> elements (16-byte rows)".
inline void require_row_stride(int64_t stride, int64_t row_elems, const char* row_what,
                               int elem_bytes, const char* op, const char* name) {
  const int64_t unit = 16 / elem_bytes;
  QUENCH_REQUIRE(stride >= row_elems && stride % unit == 0, op, ": ", name, " ", stride,
                 " must be >= ", row_elems, " (", row_what, ") and a multiple of ", unit,
                 " elements (16-byte rows)");
}

}  // namespace quench
