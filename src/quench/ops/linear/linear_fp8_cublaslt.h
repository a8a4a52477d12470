// Linear layers over FP8 weights on the FP8 tensor cores (W8A8): the activations are quantized
// to e4m3 per token (quantize_fp8_dynamic.h) and cuBLASLt multiplies the two FP8 operands with
// their scales as outer vectors, accumulating in fp32:
//   out[t][n] = sx[t] * sw[n] * sum_k xq[t][k] * wq[n][k]
// sw per output channel (a per-tensor scale repeated per row is one: cuBLASLt pairs no scalar
// weight scale with per-token activation scales, H100 with CUDA 13.0). The layers of batched
// decode steps and prefill whose weights an FP8 checkpoint stores as FP8; steps of a few tokens
// stream them instead (linear_skinny.h), where bytes, not FLOPs, bound the layer.
// Not taken: 128 x 128 block weights (cuBLASLt's BLK128x128 / VEC128 modes gave wrong sums with
// the checkpoint's row-major scale layout, bench/LOG.md thirty-second session); the runner
// dequantizes those at load.
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

// Columns per activation scale that the GEMM pairs with `w`: the whole row (one scale per token).
int32_t fp8_activation_group(const LinearWeight& w, int32_t in_features);

// A cuBLASLt handle with its own workspace (nothing allocated under graph capture) and the
// algorithm chosen once per shape.
class Fp8Gemm {
 public:
  Fp8Gemm();  // throws quench::Error naming cuBLASLt's status when it cannot start
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // Whether the shape is taken: a per-channel FP8 weight, inputs a multiple of 16, and a cuBLASLt
  // algorithm for it on this GPU (FP8 tensor cores: sm_89+). Asked of cuBLASLt once per shape;
  // never throws for an unsupported one.
  bool supports(int32_t tokens, int32_t in_features, int32_t out_features, const LinearWeight& w,
                DType out_dtype) const;

  //   xq: e4m3 [tokens, in]; x_scales: fp32 [tokens, in / fp8_activation_group(w, in)];
  //   w: FP8 [out, in] with scales; out: [tokens, out] in out_dtype (bf16 or f32).
  // in a multiple of 16; 16-byte aligned pointers. Throws quench::Error naming what is not
  // supported (dtypes, sizes, or no cuBLASLt algorithm for the shape).
  void run(int32_t tokens, int32_t in_features, int32_t out_features, const uint8_t* xq,
           const float* x_scales, const LinearWeight& w, void* out, DType out_dtype,
           cudaStream_t stream) const;

 private:
  struct Plan;
  using Key = std::tuple<int32_t, int32_t, int32_t, DType>;
  // The plan of a shape, made on first use; null where cuBLASLt has no algorithm for it.
  const Plan* plan(int32_t tokens, int32_t in_features, int32_t out_features,
                   DType out_dtype) const;

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  mutable std::mutex mutex_;
  mutable std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace quench
