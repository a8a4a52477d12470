// A linear layer's weight as the GPU kernels read it: [out, in] row-major (HF's nn.Linear layout),
// bf16, or FP8 e4m3 with fp32 scales that multiply (value = fp8 x scale), as FP8 checkpoints
// store it (docs/checkpoints.md): one scale per tensor, per output channel, or per block of
// block_out x block_in elements. Keeping FP8 weights as FP8 on the device halves the bytes a
// decode step streams; the kernels apply the scales (linear_skinny.h, linear_fp8_cublaslt.h).
#pragma once

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/core/host_device.h"

namespace quench {

enum class WeightScaling : uint8_t {
  kTensor,   // scales[0]
  kChannel,  // scales[row]
  kBlock,    // scales[(row / block_out) * ceil(in / block_in) + col / block_in]
};

const char* weight_scaling_name(WeightScaling scaling);

struct LinearWeight {
  DType dtype = DType::kBF16;  // kBF16 or kFP8E4M3
  const void* data = nullptr;  // device, [out, in]
  // FP8 only (device, fp32): the count weight_scale_count gives.
  const float* scales = nullptr;
  WeightScaling scaling = WeightScaling::kTensor;
  // kBlock: block_out >= 1 rows, block_in a power of two >= 16 columns (checkpoints: 128 x 128).
  int32_t block_out = 0, block_in = 0;
  // kChannel, optional (device, fp32): the channel scales repeated over every 128 input columns,
  // as channel_scales_by_group (linear_fp8_cublaslt.h) lays them out. With them the FP8 GEMM runs
  // cuBLASLt's 128-column block-scaled kernels, which split K for batched-decode sizes; without
  // them its outer-vector kernels, which do not (bench/LOG.md, thirty-fourth session).
  const float* group_scales = nullptr;

  bool fp8() const { return dtype == DType::kFP8E4M3; }
  static LinearWeight bf16(const uint16_t* data) {
    LinearWeight w;
    w.data = data;
    return w;
  }
};

// The scale of element (row, col) of an FP8 weight of `in` columns (the kernels' and the
// reference's one definition).
QUENCH_HD int64_t weight_scale_index(WeightScaling scaling, int64_t row, int64_t col, int64_t in,
                                     int32_t block_out, int32_t block_in) {
  if (scaling == WeightScaling::kTensor) return 0;
  if (scaling == WeightScaling::kChannel) return row;
  return (row / block_out) * ((in + block_in - 1) / block_in) + col / block_in;
}

// Scales an FP8 weight of out x in takes under `scaling` (block sizes from `w`).
int64_t weight_scale_count(const LinearWeight& w, int64_t out_features, int64_t in_features);

// Throws quench::Error naming what is wrong with `w` as the weight of out x in inputs for `who`:
// a dtype other than bf16 / FP8 e4m3, a null pointer, FP8 without scales, block sizes outside the
// above.
void check_linear_weight(const char* who, const LinearWeight& w, int64_t out_features,
                         int64_t in_features);

}  // namespace quench
