// Linear layers over FP8 weights on the FP8 tensor cores (W8A8): the activations are quantized
// to e4m3 per token (quantize_fp8_dynamic.h) and cuBLASLt multiplies the two FP8 operands with
// their scales, accumulating in fp32:
//   per channel: out[t][n] = sx[t] * sw[n] * sum_k xq[t][k] * wq[n][k]
//   128 x 128 blocks: out[t][n] = sum_b sx[t][b] * sw[n / 128][b] * sum_{k in b} xq[t][k] wq[n][k]
// A per-tensor weight scale repeated per row is a per-channel one (cuBLASLt pairs no scalar
// weight scale with per-token activation scales, H100 with CUDA 13.0). Block weights take their
// scales in the checkpoint's layout ([ceil(out / 128), in / 128] row-major) and the activation
// scales 128 columns each, group-major ([in / 128, tokens]); cuBLASLt has no algorithm unless the
// token count is a multiple of 8 and in / 128 a multiple of 4, and another layout of either
// scale tensor gives wrong sums (a probe over all four on the H100: bench/LOG.md,
// thirty-second session). The layers of batched decode steps and prefill whose weights an FP8
// checkpoint stores as FP8; steps of a few tokens stream them instead (linear_skinny.h), where
// bytes, not FLOPs, bound the layer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "quench/core/dtype.h"
#include "quench/ops/linear/linear_weight.h"

namespace quench {

// Block-scaled weights: tokens a multiple of kBlockGemmTokenMultiple (callers pad the rows), inputs
// of kBlockGemmInputMultiple.
inline constexpr int32_t kBlockGemmTokenMultiple = 8;
inline constexpr int32_t kBlockGemmInputMultiple = 512;

// Columns per activation scale that the GEMM pairs with `w`: 128 for block weights (scales
// group-major: quantize_fp8_dynamic's scales_by_group), else the whole row (one per token).
int32_t fp8_activation_group(const LinearWeight& w, int32_t in_features);

// Whether the GEMM takes `w` over in_features inputs: per channel, or 128 x 128 blocks with
// in_features a multiple of kBlockGemmInputMultiple.
bool fp8_gemm_takes_weight(const LinearWeight& w, int32_t in_features);

// A cuBLASLt handle with its own workspace (nothing allocated under graph capture) and the
// algorithm chosen once per shape: cuBLASLt's heuristic, or for block-scaled batched-decode
// shapes the fastest K split timed on the first call outside graph capture
// (QUENCH_FP8_GEMM_TUNE=0: the heuristic's always).
class Fp8Gemm {
 public:
  Fp8Gemm();  // throws quench::Error naming cuBLASLt's status when it cannot start
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Whether the shape is taken: fp8_gemm_takes_weight, a token count the weight's scaling allows,
  // and a cuBLASLt algorithm for it on this GPU (FP8 tensor cores: sm_89+). Asked of cuBLASLt once
  // per shape; never throws for an unsupported one.
  bool supports(int32_t tokens, int32_t in_features, int32_t out_features, const LinearWeight& w,
                DType out_dtype) const;

  //   xq: e4m3 [tokens, in]; x_scales: fp32, one per token (per channel) or [in / 128, tokens]
  //   (blocks);
  //   w: FP8 [out, in] with scales; out: [tokens, out] in out_dtype (bf16 or f32).
  // in a multiple of 16; 16-byte aligned pointers. Throws quench::Error naming what is not
  // supported (dtypes, sizes, or no cuBLASLt algorithm for the shape).
  void run(int32_t tokens, int32_t in_features, int32_t out_features, const uint8_t* xq,
           const float* x_scales, const LinearWeight& w, void* out, DType out_dtype,
           cudaStream_t stream) const;

 private:
  struct Plan;
  using Key = std::tuple<int32_t, int32_t, int32_t, int, DType>;
  // The plan of a shape, made on first use; null where cuBLASLt has no algorithm for it.
  Plan* plan(int32_t tokens, int32_t in_features, int32_t out_features, WeightScaling scaling,
             DType out_dtype) const;
  // One cublasLtMatmul of the plan's problem with `algo` (a cublasLtMatmulAlgo_t).
  void matmul(const Plan& p, const void* algo, const void* weight, const uint8_t* xq, void* out,
              cudaStream_t stream) const;
  // Picks the plan's K split by timing (linear_fp8_cublaslt.cc says when and why).
  void tune(Plan& p, const void* weight, const uint8_t* xq, void* out, cudaStream_t stream) const;

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  mutable std::mutex mutex_;
  mutable std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace quench
