// Host launcher of the generic prefill kernel: support check, dispatch on head_dim and KV dtype
// (9 instantiations), grid (query tiles of PrefillConfig::kBlockM packed rows, KV heads,
// sequences).
#include "quench/ops/attention/prefill/generic/prefill_attention_generic.h"

#include "quench/core/error.h"
#include "quench/ops/attention/attention_launch_checks.h"
#include "quench/ops/attention/prefill/generic/prefill_attention_generic_kernel.cuh"
#include "quench/ops/attention/prefill/prefill_launch.h"

namespace quench {
namespace {

using prefill_generic::KvKind;

template <int kHeadDim, KvKind kKv>
void launch(const AttentionParams& params, cudaStream_t stream) {
  using Cfg = prefill_generic::PrefillConfig<kHeadDim, kKv>;
  const auto kernel = prefill_generic::prefill_attention_generic_kernel<kHeadDim, kKv>;
  // The whole L1/shared carveout goes to shared memory so that kMinBlocksPerSm CTAs fit.
  static const cudaError_t reserve_status =
      prefill_common::reserve_shared_memory(kernel, Cfg::kSmemBytes, /*max_carveout=*/true);
  prefill_common::launch_on_query_tiles(kernel, "prefill_attention_generic", reserve_status,
                                        Cfg::kBlockM, Cfg::kThreads, Cfg::kSmemBytes, params,
                                        stream);
}

template <int kHeadDim>
void dispatch_kv(const AttentionParams& params, cudaStream_t stream) {
  switch (params.kv.dtype) {
    case DType::kBF16:
      return launch<kHeadDim, KvKind::kBF16>(params, stream);
    case DType::kFP8E4M3:
      return launch<kHeadDim, KvKind::kE4M3>(params, stream);
    default:
      return launch<kHeadDim, KvKind::kE5M2>(params, stream);
  }
}

}  // namespace

std::string prefill_attention_generic_unsupported_reason(const AttentionParams& params) {
  const int head_dim = params.kv.head_dim;
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    return str_cat("head_dim=", head_dim, " is not supported; allowed: 64, 128, 256");
  }
  const int page = params.kv.page_size;
  if (page != 16 && page != 32 && page != 64) {
    return str_cat("page_size=", page, " is not supported; allowed: 16, 32, 64");
  }
  const DType kv = params.kv.dtype;
  if (kv != DType::kBF16 && !is_fp8(kv)) {
    return str_cat("kv dtype ", dtype_name(kv),
                   " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2");
  }
  const DType q = params.q_dtype;
  if (q != DType::kBF16 && q != DType::kF16 && !is_fp8(q)) {
    return str_cat("q dtype ", dtype_name(q),
                   " is not supported; allowed: bf16, f16, fp8_e4m3, fp8_e5m2");
  }
  if (params.out_fp8.requested()) {
    return "out_fp8 (the o projection's e4m3 rows) is not written by prefill kernels; allowed: "
           "none (quantize the bf16 output), or a decode batch";
  }
  const DType out = params.out_dtype;
  if (out != DType::kBF16 && !is_fp8(out) && out != DType::kNVFP4) {
    return str_cat("out dtype ", dtype_name(out),
                   " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4");
  }
  if (params.kv.num_kv_heads <= 0 || params.num_q_heads <= 0 ||
      params.num_q_heads % params.kv.num_kv_heads != 0) {
    return str_cat("num_q_heads=", params.num_q_heads,
                   " must be a positive multiple of num_kv_heads=", params.kv.num_kv_heads);
  }
  if (out == DType::kNVFP4 && params.out_block_scales == nullptr) {
    return "nvfp4 output needs out_block_scales";
  }
  return {};
}

void prefill_attention_generic(const AttentionParams& params, cudaStream_t stream) {
  validate_attention_launch(params, "prefill_attention_generic");
  const std::string reason = prefill_attention_generic_unsupported_reason(params);
  QUENCH_REQUIRE(reason.empty(), "prefill_attention_generic: ", reason);
  if (params.num_seqs == 0 || params.max_q_len == 0) return;
  switch (params.kv.head_dim) {
    case 64:
      return dispatch_kv<64>(params, stream);
    case 128:
      return dispatch_kv<128>(params, stream);
    default:
      return dispatch_kv<256>(params, stream);
  }
}

}  // namespace quench
