#include "quench/numerics/fp8.h"

#include "quench/core/error.h"

namespace quench {

Fp8Format fp8_format_of(DType dtype) {
  if (dtype == DType::kFP8E4M3) return Fp8Format::kE4M3;
  if (dtype == DType::kFP8E5M2) return Fp8Format::kE5M2;
  fail(str_cat("dtype ", dtype_name(dtype), " is not an FP8 type; allowed: fp8_e4m3, fp8_e5m2"));
}

}  // namespace quench
