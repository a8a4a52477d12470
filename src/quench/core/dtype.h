// Element types that cross quench's APIs, with their names as users type them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace quench {

enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kFP8E4M3,  // e4m3fn: max 448, no inf, NaN = 0x7f/0xff
  kFP8E5M2,  // e5m2: max 57344, inf and NaN as IEEE
  kNVFP4,    // e2m1 pairs, low nibble = even element, plus e4m3 block scales (SPEC §1.3)
  kI32,
  kU8,
};

// "f32", "bf16", "f16", "fp8_e4m3", "fp8_e5m2", "nvfp4", "i32", "u8".
const char* dtype_name(DType dtype);

// Parses the names above (and the aliases "fp8" = fp8_e4m3, "bfloat16", "float16", "float32").
// Throws quench::Error naming the bad string and the allowed names.
DType parse_dtype(std::string_view name);

// Storage size of one element in bits (4 for nvfp4's e2m1 data).
int dtype_bits(DType dtype);

inline bool is_fp8(DType dtype) {
  return dtype == DType::kFP8E4M3 || dtype == DType::kFP8E5M2;
}

// Bytes needed for n elements (rounded up for sub-byte types).
inline size_t dtype_bytes(DType dtype, size_t n) {
  return (n * static_cast<size_t>(dtype_bits(dtype)) + 7) / 8;
}

}  // namespace quench
