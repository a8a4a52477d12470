#include "quench/ops/linear/linear_fp8_cublaslt.h"

#include <cublasLt.h>

#include "quench/core/error.h"

namespace quench {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  QUENCH_REQUIRE(status == CUBLAS_STATUS_SUCCESS, "cuBLASLt call failed: ", what, ": ",
                 cublasGetStatusString(status));
}

// cuBLAS's guidance for Hopper: 32 MiB lets every GEMM algorithm run.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

template <typename T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                   const T& value, const char* what) {
  check_lt(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), what);
}

}  // namespace

int32_t fp8_activation_group(const LinearWeight& w, int32_t in_features) {
  return w.scaling == WeightScaling::kBlock ? 128 : in_features;
}

bool fp8_gemm_takes_weight(const LinearWeight& w, int32_t in_features) {
  if (!w.fp8() || in_features < 16 || in_features % 16 != 0) return false;
  if (w.scaling == WeightScaling::kChannel) return true;
  return w.scaling == WeightScaling::kBlock && w.block_out == 128 && w.block_in == 128 &&
         in_features % kBlockGemmInputMultiple == 0;
}

// The problem as cuBLASLt's column-major D (m x n) = op(A) (m x k) * B (k x n): A is the weight
// (row-major [out, in] = column-major in x out, transposed), B the activations (row-major
// [tokens, in] = column-major in x tokens), D the output (row-major [tokens, out]): m = out,
// n = tokens, k = in. FP8 GEMMs take exactly this "TN" form.
struct Fp8Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

Fp8Gemm::Fp8Gemm() {
  cublasLtHandle_t handle = nullptr;
  check_lt(cublasLtCreate(&handle), "cublasLtCreate");
  handle_ = handle;
  const cudaError_t status = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (status != cudaSuccess) {
    cublasLtDestroy(handle);
    throw Error(str_cat("cuBLASLt workspace: cudaMalloc of ", kWorkspaceBytes,
                        " bytes failed: ", cudaGetErrorString(status)));
  }
  workspace_bytes_ = kWorkspaceBytes;
}

Fp8Gemm::~Fp8Gemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
  cudaFree(workspace_);
}

const Fp8Gemm::Plan* Fp8Gemm::plan(int32_t tokens, int32_t in_features, int32_t out_features,
                                   WeightScaling scaling, DType out_dtype) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const Key key{tokens, in_features, out_features, static_cast<int>(scaling), out_dtype};
  if (const auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  const cudaDataType_t d_type = out_dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, transpose, "transa");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, keep, "transb");
  // Per-channel weight scales and per-token activation scales: an outer vector each; 128 x 128
  // weight blocks with per-token 128-column activation scales.
  const bool blocks = scaling == WeightScaling::kBlock;
  const int32_t a_mode = blocks ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const int32_t b_mode =
      blocks ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_mode, "a scale mode");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_mode, "b scale mode");
  // The heuristic sees the pointer kinds; the values are set per call.
  const void* placeholder = workspace_;
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, placeholder, "a scale");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, placeholder, "b scale");
  check_lt(
      cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, in_features, out_features, in_features),
      "layout a");
  check_lt(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, in_features, tokens, in_features),
           "layout b");
  check_lt(cublasLtMatrixLayoutCreate(&p->d, d_type, out_features, tokens, out_features),
           "layout d");
  cublasLtMatmulPreference_t preference = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&preference), "preference");
  check_lt(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes_, sizeof(workspace_bytes_)),
      "preference workspace");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b,
                                     p->d, p->d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    plans_[key] = nullptr;
    return nullptr;
  }
  p->algo = result.algo;
  const Plan* made = p.get();
  plans_[key] = std::move(p);
  return made;
}

bool Fp8Gemm::supports(int32_t tokens, int32_t in_features, int32_t out_features,
                       const LinearWeight& w, DType out_dtype) const {
  if (!fp8_gemm_takes_weight(w, in_features) || tokens < 1 || out_features < 1 ||
      (out_dtype != DType::kBF16 && out_dtype != DType::kF32) ||
      (w.scaling == WeightScaling::kBlock && tokens % kBlockGemmTokenMultiple != 0))
    return false;
  return plan(tokens, in_features, out_features, w.scaling, out_dtype) != nullptr;
}

void Fp8Gemm::run(int32_t tokens, int32_t in_features, int32_t out_features, const uint8_t* xq,
                  const float* x_scales, const LinearWeight& w, void* out, DType out_dtype,
                  cudaStream_t stream) const {
  check_linear_weight("fp8 gemm", w, out_features, in_features);
  QUENCH_REQUIRE(w.fp8(), "fp8 gemm: the weight is ", dtype_name(w.dtype), "; allowed: fp8_e4m3");
  QUENCH_REQUIRE(tokens >= 0 && in_features % 16 == 0, "fp8 gemm: ", tokens, " tokens x ",
                 in_features, " inputs are not supported; allowed: tokens >= 0, inputs a ",
                 "multiple of 16");
  QUENCH_REQUIRE(out_dtype == DType::kBF16 || out_dtype == DType::kF32, "fp8 gemm: output dtype ",
                 dtype_name(out_dtype), " is not supported; allowed: bf16, f32");
  QUENCH_REQUIRE(fp8_gemm_takes_weight(w, in_features),
                 "fp8 gemm: ", weight_scaling_name(w.scaling), " weight scales (blocks ",
                 w.block_out, " x ", w.block_in, ") over ", in_features,
                 " inputs are not supported; allowed: per channel (a per-tensor scale repeated "
                 "per row is one), or 128 x 128 blocks with inputs a multiple of ",
                 kBlockGemmInputMultiple);
  QUENCH_REQUIRE(w.scaling != WeightScaling::kBlock || tokens % kBlockGemmTokenMultiple == 0,
                 "fp8 gemm: ", tokens, " tokens over block-scaled weights are not supported; ",
                 "allowed: a multiple of ", kBlockGemmTokenMultiple, " (pad the rows)");
  if (tokens == 0) return;
  const Plan* p = plan(tokens, in_features, out_features, w.scaling, out_dtype);
  QUENCH_REQUIRE(p != nullptr, "fp8 gemm: cuBLASLt has no algorithm for ", tokens, " tokens x ",
                 in_features, " -> ", out_features, " with ", weight_scaling_name(w.scaling),
                 " weight scales on this GPU (FP8 GEMMs need sm_89+ and cuBLAS 12.9+)");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w.scales, "a scale");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scales, "b scale");
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p->desc, &alpha, w.data, p->a, xq,
                          p->b, &beta, out, p->d, out, p->d, &p->algo, workspace_, workspace_bytes_,
                          stream),
           "cublasLtMatmul");
}

}  // namespace quench
