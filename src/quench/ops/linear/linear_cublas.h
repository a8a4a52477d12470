// GPU linear layers: out = x · weightᵀ with HF's [out, in] bf16 weight, fp32 accumulation, output
// bf16 (activations) or fp32 (logits), through cuBLAS (CUBLAS_COMPUTE_32F): row-major x [tokens,
// in] is column-major xᵀ, so the product is computed as outᵀ = W · xᵀ with W transposed. One-token
// layers take the weight-streaming kernel (linear_skinny.h) instead, which was measured faster
// there; QUENCH_LINEAR forces either (docs/kernel_switches.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/core/dtype.h"

namespace quench {

// A cuBLAS handle with a workspace of its own: cuBLAS then allocates nothing while a CUDA graph
// is captured (its default pool would), and every GEMM sees the same workspace eagerly and in a
// graph.
class CublasHandle {
 public:
  CublasHandle();  // throws quench::Error naming cuBLAS's status when it cannot start
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  void* get() const { return handle_; }  // cublasHandle_t
  // Makes `stream` the handle's stream with the handle's workspace (cublasSetStream alone resets
  // the workspace to cuBLAS's pool).
  void bind(cudaStream_t stream) const;

 private:
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

//   x: bf16 [tokens, in]; weight: bf16 [out, in]; out: [tokens, out] in out_dtype (bf16 or f32).
// Throws quench::Error naming a size or dtype out of range.
void linear_cuda(const CublasHandle& cublas, int32_t tokens, int32_t in_features,
                 int32_t out_features, const uint16_t* x, const uint16_t* weight, void* out,
                 DType out_dtype, cudaStream_t stream);

// Whether linear_cuda streams the weights (linear_skinny.h) for a layer of `tokens` rows, where
// the kernel takes the shape: one token by default; up to kSkinnyLinearMaxTokens under
// QUENCH_LINEAR=skinny; never under QUENCH_LINEAR=cublas.
bool linear_prefers_skinny(int32_t tokens);

// The same product through cuBLAS whatever the shape (the benchmark's peer, and linear_cuda's
// path for more tokens).
void cublas_gemm(const CublasHandle& cublas, int32_t tokens, int32_t in_features,
                 int32_t out_features, const uint16_t* x, const uint16_t* weight, void* out,
                 DType out_dtype, cudaStream_t stream);

}  // namespace quench
