#include "quench/ops/linear/linear_cublas.h"

#include <cublas_v2.h>

#include <string>

#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/ops/linear/linear_skinny.h"

namespace quench {
namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  QUENCH_REQUIRE(status == CUBLAS_STATUS_SUCCESS, "cuBLAS call failed: ", what, ": ",
                 cublasGetStatusString(status));
}

}  // namespace

// cuBLAS's guidance for Hopper: 32 MiB lets every GEMM algorithm run.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

CublasHandle::CublasHandle() {
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  handle_ = handle;
  const cudaError_t status = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (status != cudaSuccess) {
    cublasDestroy(handle);
    throw Error(str_cat("cuBLAS workspace: cudaMalloc of ", kWorkspaceBytes,
                        " bytes failed: ", cudaGetErrorString(status)));
  }
  workspace_bytes_ = kWorkspaceBytes;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
  cudaFree(workspace_);
}

void CublasHandle::bind(cudaStream_t stream) const {
  auto handle = static_cast<cublasHandle_t>(handle_);
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  check_cublas(cublasSetWorkspace(handle, workspace_, workspace_bytes_), "cublasSetWorkspace");
}

void cublas_gemm(const CublasHandle& cublas, int32_t tokens, int32_t in_features,
                 int32_t out_features, const uint16_t* x, const uint16_t* weight, void* out,
                 DType out_dtype, cudaStream_t stream) {
  QUENCH_REQUIRE(tokens >= 0 && in_features >= 1 && out_features >= 1, "linear sizes ", tokens,
                 " x ", in_features, " -> ", out_features, " out of range");
  QUENCH_REQUIRE(out_dtype == DType::kBF16 || out_dtype == DType::kF32, "linear output dtype ",
                 dtype_name(out_dtype), " is not supported; allowed: bf16, f32");
  if (tokens == 0) return;
  auto handle = static_cast<cublasHandle_t>(cublas.get());
  cublas.bind(stream);
  const float alpha = 1.0f, beta = 0.0f;
  check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out_features, tokens, in_features,
                            &alpha, weight, CUDA_R_16BF, in_features, x, CUDA_R_16BF, in_features,
                            &beta, out, out_dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F,
                            out_features, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

bool linear_prefers_skinny(int32_t tokens) {
  // One-token layers (a decode step of one sequence) take the weight-streaming kernel
  // (linear_skinny.h). In the model it makes the 1B decode step faster than cuBLAS does on both
  // cards: H100 1.583 -> 1.422 ms, H200 1.320 -> 1.241 ms; giving it only the layers of up to
  // 8192 outputs, where the H200's per-layer benchmark has it ahead, was slower (H100 1.531 ms).
  // At 4 and 8 tokens cuBLAS stays ahead (bench/LOG.md, twenty-fourth session). QUENCH_LINEAR
  // forces one path: cublas, or skinny up to kSkinnyLinearMaxTokens tokens.
  static const std::string mode = env_switch("QUENCH_LINEAR", {"auto", "cublas", "skinny"});
  return tokens >= 1 && tokens <= kSkinnyLinearMaxTokens &&
         (mode == "skinny" || (mode == "auto" && tokens == 1));
}

void linear_cuda(const CublasHandle& cublas, int32_t tokens, int32_t in_features,
                 int32_t out_features, const uint16_t* x, const uint16_t* weight, void* out,
                 DType out_dtype, cudaStream_t stream) {
  if (linear_prefers_skinny(tokens) && out_features >= 1 &&
      (out_dtype == DType::kBF16 || out_dtype == DType::kF32) &&
      linear_skinny_supported(tokens, in_features, x, weight)) {
    linear_skinny_cuda(tokens, in_features, out_features, x, weight, out, out_dtype, stream);
    return;
  }
  cublas_gemm(cublas, tokens, in_features, out_features, x, weight, out, out_dtype, stream);
}

}  // namespace quench
