#include "quench/core/dtype.h"

#include "quench/core/error.h"

namespace quench {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kFP8E4M3:
      return "fp8_e4m3";
    case DType::kFP8E5M2:
      return "fp8_e5m2";
    case DType::kNVFP4:
      return "nvfp4";
    case DType::kI32:
      return "i32";
    case DType::kU8:
      return "u8";
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::kF16;
  if (name == "fp8" || name == "fp8_e4m3") return DType::kFP8E4M3;
  if (name == "fp8_e5m2") return DType::kFP8E5M2;
  if (name == "nvfp4") return DType::kNVFP4;
  if (name == "i32") return DType::kI32;
  if (name == "u8") return DType::kU8;
  fail(str_cat("unknown dtype '", name,
               "'; allowed: f32, bf16, f16, fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2, nvfp4, i32, u8"));
}

int dtype_bits(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 32;
    case DType::kI32:
      return 32;
    case DType::kBF16:
      return 16;
    case DType::kF16:
      return 16;
    case DType::kFP8E4M3:
      return 8;
    case DType::kFP8E5M2:
      return 8;
    case DType::kU8:
      return 8;
    case DType::kNVFP4:
      return 4;
  }
  return 0;
}

}  // namespace quench
