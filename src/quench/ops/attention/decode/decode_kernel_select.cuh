// Picks the decode kernel instantiation for a KV dtype (compile-time) from the head dim, query
// dtype and variant (cp.async, or sm_90 TMA producer warp; run time). Included only by the
// decode_attention_kv_*.cu files.
#pragma once

#include "quench/ops/attention/decode/decode_attention_kernel.cuh"

namespace quench::decode {

template <int kHeadDim, DType kKvDtype, DType kQDtype, bool kTma, bool kSwapped = false>
DecodeKernelInfo decode_kernel_info() {
  using T = DecodeTraits<kHeadDim, kKvDtype, kQDtype, kTma>;
  DecodeKernelInfo info;
  info.fn = reinterpret_cast<const void*>(
      &decode_attention_kernel<kHeadDim, kKvDtype, kQDtype, kTma, kSwapped>);
  info.threads = T::kCtaThreads;
  info.stage_bytes = T::kStageBytes;
  info.fixed_bytes = T::kFixedBytes;
  info.combine_bytes = T::kCombineBytes;
  info.tma = kTma;
  info.swapped = kSwapped;
  return info;
}

// hd256 keeps the cp.async kernel: at ~212 registers a 160-thread CTA fits once per SM, where
// the 128-thread one (254 registers) fits twice.
// The swapped-operand loop exists only in the TMA kernel.
template <int kHeadDim, DType kKvDtype, DType kQDtype>
DecodeKernelInfo decode_kernel_info_for_variant(bool tma, bool swapped) {
  if constexpr (kHeadDim <= 128) {
    if (tma && swapped) return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, true, true>();
    if (tma) return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, true>();
  }
  return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, false>();
}

template <int kHeadDim, DType kKvDtype>
DecodeKernelInfo decode_kernel_info_for_q(DType q_dtype, bool tma, bool swapped) {
  return q_dtype == DType::kF16
             ? decode_kernel_info_for_variant<kHeadDim, kKvDtype, DType::kF16>(tma, swapped)
             : decode_kernel_info_for_variant<kHeadDim, kKvDtype, DType::kBF16>(tma, swapped);
}

template <DType kKvDtype>
DecodeKernelInfo decode_kernel_info_for(int32_t head_dim, DType q_dtype, bool tma, bool swapped) {
  switch (head_dim) {
    case 64:
      return decode_kernel_info_for_q<64, kKvDtype>(q_dtype, tma, swapped);
    case 128:
      return decode_kernel_info_for_q<128, kKvDtype>(q_dtype, tma, swapped);
    default:
      return decode_kernel_info_for_q<256, kKvDtype>(q_dtype, tma, swapped);
  }
}

}  // namespace quench::decode
