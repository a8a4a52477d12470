// Linear layers over FP8 weights on the FP8 tensor cores (W8A8): the activations are quantized
// to e4m3 per token (quantize_fp8_dynamic.h) and cuBLASLt multiplies the two FP8 operands with
// their scales, accumulating in fp32:
//   per channel: out[t][n] = sx[t] * sw[n] * sum_k xq[t][k] * wq[n][k]
//   128 x 128 blocks: out[t][n] = sum_b sx[t][b] * sw[n / 128][b] * sum_{k in b} xq[t][k] wq[n][k]
//   per channel over 128-column groups (LinearWeight::group_scales): the blocks' sum with
//   sw[n][b] = sw[n] for every group b, which is the per-channel product exactly; activation
//   scales per 128 columns as for blocks.
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
#include <span>
#include <tuple>
#include <vector>

#include "quench/core/dtype.h"
#include "quench/ops/linear/linear_weight.h"

namespace quench {

// Block-scaled weights: tokens a multiple of kBlockGemmTokenMultiple (callers pad the rows), inputs
// of kBlockGemmInputMultiple.
inline constexpr int32_t kBlockGemmTokenMultiple = 8;
inline constexpr int32_t kBlockGemmInputMultiple = 512;
// Columns per activation scale (and per repeated channel scale) on the block-scaled kernels.
inline constexpr int32_t kFp8GemmScaleGroup = 128;

// Per-channel weights with group_scales run the block-scaled kernels up to this many tokens (a
// multiple of kBlockGemmTokenMultiple); past it the outer-vector kernels, which are faster at
// prefill sizes. Layers no wider than deep (o, down) keep the block-scaled kernels to 256 tokens.
// H100 (bench/LOG.md, thirty-fourth session): per 8B layer the block-scaled kernels gain 11.7 us
// at 128 tokens and lose 11.4 at 256, where o and down alone still gain (1B 11.4 us, 8B 3.3).
int32_t channel_groups_max_tokens(int32_t in_features, int32_t out_features);

// Whether the GEMM multiplies `tokens` rows by `w` (in_features -> out_features) on the
// 128-column block-scaled kernels: 128 x 128 block weights, or per-channel ones with group_scales
// up to channel_groups_max_tokens (QUENCH_FP8_CHANNEL_GEMM=auto|groups|outer: that rule, always,
// never), with in_features a multiple of kBlockGemmInputMultiple. Those take activation scales
// per 128 columns and token counts a multiple of kBlockGemmTokenMultiple (callers pad the rows:
// padding never crosses the threshold).
bool fp8_gemm_blockwise(const LinearWeight& w, int32_t tokens, int32_t in_features,
                        int32_t out_features);

// Columns per activation scale that the GEMM pairs with `w` for `tokens` rows: 128 where
// fp8_gemm_blockwise (scales group-major: quantize_fp8_dynamic's scales_by_group), else the whole
// row (one per token).
int32_t fp8_activation_group(const LinearWeight& w, int32_t tokens, int32_t in_features,
                             int32_t out_features);

// A per-channel weight's scales (one per output row) as LinearWeight::group_scales: each repeated
// for the in_features / 128 column groups, group-major ([in / 128, out], out fastest; cuBLASLt's
// layout of 128-column weight scales for this transposed operand). Throws quench::Error unless
// in_features is a positive multiple of 128.
std::vector<float> channel_scales_by_group(std::span<const float> channel_scales,
                                           int32_t in_features);

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

  // Whether the shape is taken: fp8_gemm_takes_weight, a token count the weight's scaling allows
  // (fp8_gemm_blockwise: a multiple of kBlockGemmTokenMultiple),
  // and a cuBLASLt algorithm for it on this GPU (FP8 tensor cores: sm_89+). Asked of cuBLASLt once
  // per shape; never throws for an unsupported one.
  bool supports(int32_t tokens, int32_t in_features, int32_t out_features, const LinearWeight& w,
                DType out_dtype) const;

  //   xq: e4m3 [tokens, in]; x_scales: fp32, [in / 128, tokens] where fp8_gemm_blockwise, else
  //   one per token;
  //   w: FP8 [out, in] with scales; out: [tokens, out] in out_dtype (bf16 or f32).
  // in a multiple of 16; 16-byte aligned pointers. Throws quench::Error naming what is not
  // supported (dtypes, sizes, or no cuBLASLt algorithm for the shape).
  void run(int32_t tokens, int32_t in_features, int32_t out_features, const uint8_t* xq,
           const float* x_scales, const LinearWeight& w, void* out, DType out_dtype,
           cudaStream_t stream) const;

 private:
  struct Plan;
  // How the weight's scales meet cuBLASLt.
  enum class ScaleMode : uint8_t {
    kOuterVectors,   // per-channel x per-token outer vectors
    kChannelGroups,  // per-channel scales repeated per 128 columns x 128-column activation scales
    kBlocks,         // 128 x 128 weight blocks x 128-column activation scales
  };
  static ScaleMode scale_mode(const LinearWeight& w, int32_t tokens, int32_t in_features,
                              int32_t out_features);
  using Key = std::tuple<int32_t, int32_t, int32_t, ScaleMode, DType>;
  // The plan of a shape, made on first use; null where cuBLASLt has no algorithm for it.
  Plan* plan(int32_t tokens, int32_t in_features, int32_t out_features, ScaleMode mode,
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
