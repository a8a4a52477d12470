#include "quench/ops/linear/linear_skinny.h"

#include <algorithm>

#include "quench/core/cuda_device.h"
#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/linear/linear_skinny_kernel.cuh"

namespace quench {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <int kTokens>
void launch(int32_t in, int32_t out_features, const uint16_t* x, const LinearWeight& w, void* out,
            DType out_dtype, cudaStream_t stream) {
  const int32_t sms = require_current_cuda_device_properties("linear_skinny").sm_count;
  // One feature per warp where the features are few; at most 8 CTAs per SM (2048 threads), each
  // warp striding over the rest.
  const int64_t needed = (static_cast<int64_t>(out_features) + kWarps - 1) / kWarps;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(needed, int64_t{sms} * 8));
  const int64_t first_rows = std::min<int64_t>(out_features, int64_t{blocks} * kWarps);
  skinny::KernelArgs args;
  args.in_features = in;
  args.out_features = out_features;
  args.x = x;
  args.out = out;
  skinny::set_weight(args, w);
  args.prefetch_bytes = skinny::first_rows_prefetch_bytes(first_rows, in, w.fp8() ? 1 : 2);
  using skinny::Input, skinny::Output;
  const bool f32 = out_dtype == DType::kF32;
  const auto kernel = w.fp8() ? (f32 ? skinny::linear_skinny_kernel<kTokens, true, Input::kGlobal,
                                                                    Output::kPlain, kThreads, true>
                                     : skinny::linear_skinny_kernel<kTokens, false, Input::kGlobal,
                                                                    Output::kPlain, kThreads, true>)
                              : (f32 ? skinny::linear_skinny_kernel<kTokens, true, Input::kGlobal,
                                                                    Output::kPlain, kThreads>
                                     : skinny::linear_skinny_kernel<kTokens, false, Input::kGlobal,
                                                                    Output::kPlain, kThreads>);
  kernel<<<blocks, kThreads, 0, stream>>>(args);
  check_cuda(cudaGetLastError(), "linear_skinny launch");
}

}  // namespace

bool linear_skinny_supported(int32_t tokens, int32_t in_features, const void* x,
                             const void* weight) {
  return tokens >= 1 && tokens <= kSkinnyLinearMaxTokens && in_features >= 8 &&
         in_features % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(weight) % 16 == 0;
}

bool linear_skinny_supported(int32_t tokens, int32_t in_features, const void* x,
                             const LinearWeight& weight) {
  return linear_skinny_supported(tokens, in_features, x, weight.data) &&
         (!weight.fp8() || in_features % 16 == 0);
}

void linear_skinny_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                        const uint16_t* x, const uint16_t* weight, void* out, DType out_dtype,
                        cudaStream_t stream) {
  linear_skinny_cuda(tokens, in_features, out_features, x, LinearWeight::bf16(weight), out,
                     out_dtype, stream);
}

void linear_skinny_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                        const uint16_t* x, const LinearWeight& weight, void* out, DType out_dtype,
                        cudaStream_t stream) {
  QUENCH_REQUIRE(out_features >= 1, "linear_skinny: out_features ", out_features,
                 " is invalid; allowed: >= 1");
  check_linear_weight("linear_skinny", weight, out_features, in_features);
  QUENCH_REQUIRE(linear_skinny_supported(tokens, in_features, x, weight), "linear_skinny: ", tokens,
                 " tokens x ", in_features, " inputs is not supported; allowed: 1 to ",
                 kSkinnyLinearMaxTokens, " tokens, inputs a multiple of 8 (16 for FP8 weights), ",
                 "x and weight 16-byte aligned");
  QUENCH_REQUIRE(out_dtype == DType::kBF16 || out_dtype == DType::kF32,
                 "linear_skinny output dtype ", dtype_name(out_dtype),
                 " is not supported; allowed: bf16, f32");
  using Launch =
      void (*)(int32_t, int32_t, const uint16_t*, const LinearWeight&, void*, DType, cudaStream_t);
  static constexpr Launch kLaunch[kSkinnyLinearMaxTokens] = {
      launch<1>, launch<2>, launch<3>, launch<4>, launch<5>, launch<6>, launch<7>, launch<8>};
  kLaunch[tokens - 1](in_features, out_features, x, weight, out, out_dtype, stream);
}

}  // namespace quench
