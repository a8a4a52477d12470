#include "quench/ops/linear/linear_weight.h"

#include "quench/core/error.h"

namespace quench {

const char* weight_scaling_name(WeightScaling scaling) {
  switch (scaling) {
    case WeightScaling::kTensor:
      return "per tensor";
    case WeightScaling::kChannel:
      return "per channel";
    case WeightScaling::kBlock:
      return "per block";
  }
  return "unknown";
}

int64_t weight_scale_count(const LinearWeight& w, int64_t out_features, int64_t in_features) {
  switch (w.scaling) {
    case WeightScaling::kTensor:
      return 1;
    case WeightScaling::kChannel:
      return out_features;
    case WeightScaling::kBlock:
      return ((out_features + w.block_out - 1) / w.block_out) *
             ((in_features + w.block_in - 1) / w.block_in);
  }
  return 0;
}

void check_linear_weight(const char* who, const LinearWeight& w, int64_t out_features,
                         int64_t in_features) {
  QUENCH_REQUIRE(w.dtype == DType::kBF16 || w.dtype == DType::kFP8E4M3, who, ": weight dtype ",
                 dtype_name(w.dtype), " is not supported; allowed: bf16, fp8_e4m3");
  QUENCH_REQUIRE(w.data != nullptr, who, ": the weight's data pointer is null");
  QUENCH_REQUIRE(out_features >= 1 && in_features >= 1, who, ": weight shape [", out_features, ", ",
                 in_features, "] is invalid; allowed: both >= 1");
  if (!w.fp8()) return;
  QUENCH_REQUIRE(w.scales != nullptr, who, ": an FP8 weight needs its scales (",
                 weight_scaling_name(w.scaling), "); the pointer is null");
  if (w.scaling == WeightScaling::kBlock) {
    const bool power_of_two_in = w.block_in >= 16 && (w.block_in & (w.block_in - 1)) == 0;
    QUENCH_REQUIRE(
        w.block_out >= 1 && power_of_two_in, who, ": FP8 weight blocks of ", w.block_out, " x ",
        w.block_in,
        " are not supported; allowed: block_out >= 1 rows, block_in a power of two >= 16 "
        "columns (checkpoints use 128 x 128)");
  }
}

}  // namespace quench
