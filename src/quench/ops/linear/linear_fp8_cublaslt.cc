#include "quench/ops/linear/linear_fp8_cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/core/env_switch.h"
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

// Block-scaled GEMMs of up to this many tokens time K splits on their first call (Fp8Gemm::tune).
constexpr int32_t kTuneMaxTokens = 64;
// The splits tried beside the heuristic's choice, and the gain a split needs to replace it (so
// that near ties keep the heuristic's algorithm from run to run).
constexpr int32_t kSplitCandidates[] = {1, 2, 3, 4, 6, 8};
constexpr double kTuneMinGain = 0.05;

// The time of kTimedCalls calls of `call` replayed from a CUDA graph (eager calls of a ~10 us
// GEMM are bound by the host's launches, which hid the splits' differences: bench/LOG.md,
// thirty-third session), after one replay to warm up.
template <class Call>
float graph_milliseconds(cudaStream_t stream, const Call& call) {
  constexpr int kTimedCalls = 10;
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
             "fp8 gemm tuning: begin capture");
  try {
    for (int r = 0; r < kTimedCalls; ++r)
      call();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream, &graph), "fp8 gemm tuning: end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(instantiated, "fp8 gemm tuning: instantiate");
  cudaEvent_t start = nullptr, stop = nullptr;
  float ms = 0.0f;
  check_cuda(cudaEventCreate(&start), "fp8 gemm tuning: event");
  check_cuda(cudaEventCreate(&stop), "fp8 gemm tuning: event");
  check_cuda(cudaGraphLaunch(exec, stream), "fp8 gemm tuning: launch");
  check_cuda(cudaEventRecord(start, stream), "fp8 gemm tuning: record");
  check_cuda(cudaGraphLaunch(exec, stream), "fp8 gemm tuning: launch");
  check_cuda(cudaEventRecord(stop, stream), "fp8 gemm tuning: record");
  check_cuda(cudaEventSynchronize(stop), "fp8 gemm tuning: synchronize");
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "fp8 gemm tuning: elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  return ms;
}

// QUENCH_FP8_GEMM_TUNE=1|0 (read once; default 1): whether block-scaled batched-decode GEMMs time
// their K splits on first use (an A/B switch).
bool tuning_enabled() {
  static const bool enabled = env_switch("QUENCH_FP8_GEMM_TUNE", {"1", "0"}) != "0";
  return enabled;
}

// QUENCH_FP8_CHANNEL_GEMM=auto|groups|outer (read once; default auto): whether per-channel
// weights with group_scales run the 128-column block-scaled kernels up to
// channel_groups_max_tokens, always, or never (an A/B switch).
const std::string& channel_gemm_switch() {
  static const std::string value =
      env_switch("QUENCH_FP8_CHANNEL_GEMM", {"auto", "groups", "outer"});
  return value;
}

constexpr int32_t kChannelGroupsMaxTokens = 128;
constexpr int32_t kChannelGroupsMaxTokensNarrow = 256;  // out <= in
static_assert(kChannelGroupsMaxTokens % kBlockGemmTokenMultiple == 0 &&
              kChannelGroupsMaxTokensNarrow % kBlockGemmTokenMultiple == 0);

// Whether a per-channel weight runs `tokens` rows on the 128-column block-scaled kernels.
bool channel_by_groups(const LinearWeight& w, int32_t tokens, int32_t in_features,
                       int32_t out_features) {
  if (w.scaling != WeightScaling::kChannel || w.group_scales == nullptr ||
      in_features % kBlockGemmInputMultiple != 0)
    return false;
  const std::string& mode = channel_gemm_switch();
  return mode == "groups" ||
         (mode != "outer" && tokens <= channel_groups_max_tokens(in_features, out_features));
}

}  // namespace

int32_t channel_groups_max_tokens(int32_t in_features, int32_t out_features) {
  return out_features <= in_features ? kChannelGroupsMaxTokensNarrow : kChannelGroupsMaxTokens;
}

Fp8Gemm::ScaleMode Fp8Gemm::scale_mode(const LinearWeight& w, int32_t tokens, int32_t in_features,
                                       int32_t out_features) {
  if (w.scaling == WeightScaling::kBlock) return ScaleMode::kBlocks;
  return channel_by_groups(w, tokens, in_features, out_features) ? ScaleMode::kChannelGroups
                                                                 : ScaleMode::kOuterVectors;
}

bool fp8_gemm_blockwise(const LinearWeight& w, int32_t tokens, int32_t in_features,
                        int32_t out_features) {
  return fp8_gemm_takes_weight(w, in_features) &&
         (w.scaling == WeightScaling::kBlock ||
          channel_by_groups(w, tokens, in_features, out_features));
}

int32_t fp8_activation_group(const LinearWeight& w, int32_t tokens, int32_t in_features,
                             int32_t out_features) {
  return fp8_gemm_blockwise(w, tokens, in_features, out_features) ? kFp8GemmScaleGroup
                                                                  : in_features;
}

std::vector<float> channel_scales_by_group(std::span<const float> channel_scales,
                                           int32_t in_features) {
  QUENCH_REQUIRE(in_features > 0 && in_features % kFp8GemmScaleGroup == 0,
                 "channel_scales_by_group: ", in_features, " inputs are not supported; allowed: a ",
                 "positive multiple of ", kFp8GemmScaleGroup);
  const size_t out = channel_scales.size(),
               groups = static_cast<size_t>(in_features / kFp8GemmScaleGroup);
  std::vector<float> by_group(out * groups);
  for (size_t g = 0; g < groups; ++g)
    std::copy(channel_scales.begin(), channel_scales.end(), by_group.begin() + g * out);
  return by_group;
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
  // Whether algo is final: the heuristic's, or the fastest K split that tune() timed.
  bool tuned = false;
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

Fp8Gemm::Plan* Fp8Gemm::plan(int32_t tokens, int32_t in_features, int32_t out_features,
                             ScaleMode mode, DType out_dtype) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const Key key{tokens, in_features, out_features, mode, out_dtype};
  if (const auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  const cudaDataType_t d_type = out_dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, transpose, "transa");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, keep, "transb");
  // Per-channel weight scales and per-token activation scales: an outer vector each; 128 x 128
  // weight blocks or per-channel scales per 128 columns with per-token 128-column activation
  // scales.
  const int32_t a_mode = mode == ScaleMode::kBlocks ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                         : mode == ScaleMode::kChannelGroups
                             ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                             : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const int32_t b_mode = mode == ScaleMode::kOuterVectors
                             ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                             : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
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
  // Outer-vector kernels do not split K (bench/LOG.md, thirty-third session): nothing to tune.
  p->tuned = mode == ScaleMode::kOuterVectors || tokens > kTuneMaxTokens || !tuning_enabled();
  Plan* made = p.get();
  plans_[key] = std::move(p);
  return made;
}

bool Fp8Gemm::supports(int32_t tokens, int32_t in_features, int32_t out_features,
                       const LinearWeight& w, DType out_dtype) const {
  if (!fp8_gemm_takes_weight(w, in_features) || tokens < 1 || out_features < 1 ||
      (out_dtype != DType::kBF16 && out_dtype != DType::kF32) ||
      (fp8_gemm_blockwise(w, tokens, in_features, out_features) &&
       tokens % kBlockGemmTokenMultiple != 0))
    return false;
  return plan(tokens, in_features, out_features, scale_mode(w, tokens, in_features, out_features),
              out_dtype) != nullptr;
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
  const ScaleMode mode = scale_mode(w, tokens, in_features, out_features);
  QUENCH_REQUIRE(mode == ScaleMode::kOuterVectors || tokens % kBlockGemmTokenMultiple == 0,
                 "fp8 gemm: ", tokens, " tokens are not supported over ",
                 weight_scaling_name(w.scaling), " weights on the 128-column block-scaled ",
                 "kernels; allowed: a multiple of ", kBlockGemmTokenMultiple, " (pad the rows)");
  if (tokens == 0) return;
  Plan* p = plan(tokens, in_features, out_features, mode, out_dtype);
  QUENCH_REQUIRE(p != nullptr, "fp8 gemm: cuBLASLt has no algorithm for ", tokens, " tokens x ",
                 in_features, " -> ", out_features, " with ", weight_scaling_name(w.scaling),
                 " weight scales on this GPU (FP8 GEMMs need sm_89+ and cuBLAS 12.9+)");
  const float* w_scales = mode == ScaleMode::kChannelGroups ? w.group_scales : w.scales;
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scales, "a scale");
  set_attribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scales, "b scale");
  if (!p->tuned) tune(*p, w.data, xq, out, stream);
  matmul(*p, &p->algo, w.data, xq, out, stream);
}

void Fp8Gemm::matmul(const Plan& p, const void* algo, const void* weight, const uint8_t* xq,
                     void* out, cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(
      cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, weight, p.a, xq, p.b,
                     &beta, out, p.d, out, p.d, static_cast<const cublasLtMatmulAlgo_t*>(algo),
                     workspace_, workspace_bytes_, stream),
      "cublasLtMatmul");
}

// cuBLASLt's heuristic splits K for few CTAs only sometimes, and not by the best factor: on the
// H100 (bench/LOG.md, thirty-third session) Llama-3.2-1B's block-scaled down projection at 32
// tokens took 14.1 us with its 3 splits and 11.7 with 4, o 8.6 (no split) and 7.4, while 8B's
// down was fastest with the heuristic's own choice and the gate_up layers unsplit. So each
// batched-decode shape times the heuristic's algorithm against the same algorithm with K split
// kSplitCandidates ways, on the call's own operands (the output is written by every candidate
// and by the call after), each from a CUDA graph of its own, and keeps the fastest if it gains
// kTuneMinGain. Not under graph capture (nothing can be timed there): the runner's eager warm-up
// steps tune first.
void Fp8Gemm::tune(Plan& p, const void* weight, const uint8_t* xq, void* out,
                   cudaStream_t stream) const {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "fp8 gemm tuning: capture status");
  if (capture != cudaStreamCaptureStatusNone) return;
  std::vector<cublasLtMatmulAlgo_t> candidates = {p.algo};
  for (const int32_t split : kSplitCandidates) {
    cublasLtMatmulAlgo_t algo = p.algo;
    const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                             sizeof(split)) != CUBLAS_STATUS_SUCCESS ||
        (split > 1 &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                              sizeof(scheme)) != CUBLAS_STATUS_SUCCESS)) {
      continue;
    }
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(static_cast<cublasLtHandle_t>(handle_), p.desc, p.a, p.b, p.d, p.d,
                                &algo, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace_bytes_) {
      candidates.push_back(algo);
    }
  }
  // The legacy default stream cannot be captured: a blocking stream of its own is ordered with
  // it both ways.
  cudaStream_t timing = stream;
  if (stream == nullptr) check_cuda(cudaStreamCreate(&timing), "fp8 gemm tuning: stream");
  std::vector<float> ms(candidates.size());
  try {
    for (size_t i = 0; i < candidates.size(); ++i) {
      ms[i] =
          graph_milliseconds(timing, [&] { matmul(p, &candidates[i], weight, xq, out, timing); });
    }
  } catch (...) {
    if (timing != stream) cudaStreamDestroy(timing);
    throw;
  }
  if (timing != stream) cudaStreamDestroy(timing);
  const size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
  if (ms[best] < (1.0 - kTuneMinGain) * ms[0]) p.algo = candidates[best];
  p.tuned = true;
}

}  // namespace quench
