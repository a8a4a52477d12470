// Pointer alignment checks for the kernels' vector paths (16-byte loads and stores), one
// definition for every launcher that picks a vector kernel or refuses an unaligned buffer.
#pragma once

#include <cstdint>

namespace quench {

// Whether `p` is 16-byte aligned (null is: launchers check nullness apart).
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace quench
