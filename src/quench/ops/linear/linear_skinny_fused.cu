#include "quench/ops/linear/linear_skinny_fused.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "quench/core/alignment.h"
#include "quench/core/cuda_device.h"
#include "quench/core/device_buffer.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_skinny.h"
#include "quench/ops/linear/linear_skinny_kernel.cuh"

namespace quench {
namespace {

// Larger CTAs than the plain kernel's 256 threads: every CTA computes the norm of the whole rows,
// so fewer CTAs read them fewer times from L2 for the same warps streaming weights.
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// CTAs of `kernel` an SM holds with `smem` bytes of shared memory each (at least 1), queried (and
// the kernel's shared-memory limit raised) once per device, kernel and size: launches
// inside a graph capture then make no runtime call.
int ctas_per_sm(int32_t device, const void* kernel, size_t smem) {
  static std::mutex mutex;
  static std::map<std::tuple<int32_t, const void*, size_t>, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, kernel, smem);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  // Past 48 KB of shared memory in all a kernel must opt in (the staged rows beside the
  // reduction's static words can cross it): the most any launch stages, so that the limit only
  // ever grows to the same value.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kSkinnyNormMaxStagedBytes)),
             "linear_skinny_norm shared memory");
  int per_sm = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem),
             "linear_skinny_norm occupancy");
  return known[key] = std::max(per_sm, 1);
}

template <int kTokens, skinny::Output kOutput, bool kFp8>
void launch(int32_t in, int32_t out_features, const SkinnyResidualNorm& norm,
            const LinearWeight& weight, uint16_t* out, cudaStream_t stream) {
  const auto kernel = skinny::linear_skinny_kernel<kTokens, false, skinny::Input::kResidualNorm,
                                                   kOutput, kThreads, kFp8>;
  const size_t smem = static_cast<size_t>(kTokens) * static_cast<size_t>(in) * 2;
  const CudaDeviceProperties device = require_current_cuda_device_properties("linear_skinny_norm");
  const int per_sm = ctas_per_sm(device.device, reinterpret_cast<const void*>(kernel), smem);
  // One feature per warp where the features are few; else one wave of CTAs, each warp striding.
  const int64_t needed = (static_cast<int64_t>(out_features) + kWarps - 1) / kWarps;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>(needed, int64_t{device.sm_count} * per_sm));
  skinny::KernelArgs args;
  args.in_features = in;
  args.out_features = out_features;
  args.residual = norm.residual;
  args.delta = norm.delta;
  args.residual_out = norm.residual_out;
  args.norm_weight = norm.weight;
  args.eps = norm.eps;
  skinny::set_weight(args, weight);
  args.out = out;
  const int64_t first_rows = std::min<int64_t>(out_features, int64_t{blocks} * kWarps);
  args.prefetch_bytes = skinny::first_rows_prefetch_bytes(
      kOutput == skinny::Output::kSwiglu ? 2 * first_rows : first_rows, in, kFp8 ? 1 : 2);
  kernel<<<blocks, kThreads, smem, stream>>>(args);
  check_cuda(cudaGetLastError(), "linear_skinny_norm launch");
}

template <int kTokens>
void launch_output(int32_t in, int32_t out_features, const SkinnyResidualNorm& norm,
                   const LinearWeight& weight, bool swiglu, uint16_t* out, cudaStream_t stream) {
  using skinny::Output;
  if (weight.fp8()) {
    if (swiglu) {
      launch<kTokens, Output::kSwiglu, true>(in, out_features, norm, weight, out, stream);
    } else {
      launch<kTokens, Output::kPlain, true>(in, out_features, norm, weight, out, stream);
    }
  } else if (swiglu) {
    launch<kTokens, Output::kSwiglu, false>(in, out_features, norm, weight, out, stream);
  } else {
    launch<kTokens, Output::kPlain, false>(in, out_features, norm, weight, out, stream);
  }
}

}  // namespace

bool linear_skinny_norm_supported(int32_t tokens, int32_t in_features) {
  return tokens >= 1 && tokens <= kSkinnyLinearMaxTokens && in_features >= 8 &&
         in_features % 8 == 0 && int64_t{tokens} * in_features * 2 <= kSkinnyNormMaxStagedBytes;
}

bool linear_norm_fusion_applies(int32_t tokens, int32_t hidden) {
  static const bool fusion = env_switch("QUENCH_LINEAR_FUSION", {"1", "0"}) != "0";
  return fusion && linear_prefers_skinny(tokens) && linear_skinny_norm_supported(tokens, hidden);
}

void linear_skinny_norm_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                             const SkinnyResidualNorm& norm, const uint16_t* weight, bool swiglu,
                             uint16_t* out, cudaStream_t stream) {
  linear_skinny_norm_cuda(tokens, in_features, out_features, norm, LinearWeight::bf16(weight),
                          swiglu, out, stream);
}

void linear_skinny_norm_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                             const SkinnyResidualNorm& norm, const LinearWeight& weight,
                             bool swiglu, uint16_t* out, cudaStream_t stream) {
  QUENCH_REQUIRE(linear_skinny_norm_supported(tokens, in_features), "linear_skinny_norm: ", tokens,
                 " tokens x ", in_features, " inputs is not supported; allowed: 1 to ",
                 kSkinnyLinearMaxTokens, " tokens, inputs a positive multiple of 8, tokens x ",
                 "inputs x 2 bytes <= ", kSkinnyNormMaxStagedBytes);
  QUENCH_REQUIRE(out_features >= 1, "linear_skinny_norm: out_features ", out_features,
                 " is invalid; allowed: >= 1");
  QUENCH_REQUIRE(norm.residual != nullptr && norm.weight != nullptr && out != nullptr,
                 "linear_skinny_norm: residual, norm weight and out must not be null");
  check_linear_weight("linear_skinny_norm", weight,
                      swiglu ? 2 * int64_t{out_features} : out_features, in_features);
  QUENCH_REQUIRE(!weight.fp8() || in_features % 16 == 0, "linear_skinny_norm: ", in_features,
                 " inputs over an FP8 weight are not supported; allowed: a multiple of 16");
  QUENCH_REQUIRE(
      norm.delta == nullptr || norm.residual_out != nullptr,
      "linear_skinny_norm: a delta needs residual_out (the sum is written out of place)");
  QUENCH_REQUIRE(norm.residual_out == nullptr ||
                     (norm.residual_out != norm.residual && norm.residual_out != norm.delta),
                 "linear_skinny_norm: residual_out must alias neither residual nor delta (other "
                 "CTAs still read them while CTA 0 writes it)");
  QUENCH_REQUIRE(aligned16(norm.residual) && aligned16(norm.delta) &&
                     aligned16(norm.residual_out) && aligned16(norm.weight) &&
                     aligned16(weight.data),
                 "linear_skinny_norm: residual, delta, residual_out, norm weight and weight must "
                 "be 16-byte aligned");
  QUENCH_REQUIRE(norm.eps > 0.0f, "linear_skinny_norm: eps ", norm.eps,
                 " is invalid; allowed: > 0");
  using Launch = void (*)(int32_t, int32_t, const SkinnyResidualNorm&, const LinearWeight&, bool,
                          uint16_t*, cudaStream_t);
  static constexpr Launch kLaunch[kSkinnyLinearMaxTokens] = {
      launch_output<1>, launch_output<2>, launch_output<3>, launch_output<4>,
      launch_output<5>, launch_output<6>, launch_output<7>, launch_output<8>};
  kLaunch[tokens - 1](in_features, out_features, norm, weight, swiglu, out, stream);
}

}  // namespace quench
