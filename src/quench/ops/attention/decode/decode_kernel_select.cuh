// Picks the decode kernel instantiation for a KV dtype (compile-time) from the head dim, query
// dtype and variant (cp.async, or sm_90 TMA producer warp; run time). Included only by the
// decode_attention_kv_*.cu files.
#pragma once

#include "quench/ops/attention/decode/decode_attention_kernel.cuh"

namespace quench::decode {

template <int kHeadDim, DType kKvDtype, DType kQDtype, bool kTma, bool kSwapped = false,
          bool kWgmmaQk = false>
DecodeKernelInfo decode_kernel_info() {
  using T = DecodeTraits<kHeadDim, kKvDtype, kQDtype, kTma>;
  DecodeKernelInfo info;
  info.fn = reinterpret_cast<const void*>(
      &decode_attention_kernel<kHeadDim, kKvDtype, kQDtype, kTma, kSwapped, kWgmmaQk>);
  info.threads = T::kCtaThreads;
  info.stage_bytes = T::kStageBytes;
  info.fixed_bytes = T::kFixedBytes + (kWgmmaQk ? kQTermsBytes : 0);
  info.combine_bytes = T::kCombineBytes;
  info.tma = kTma;
  info.swapped = kSwapped;
  info.wgmma_qk = kWgmmaQk;
  return info;
}

// hd256 keeps the cp.async kernel: at ~212 registers a 160-thread CTA fits once per SM, where
// the 128-thread one (254 registers) fits twice.
// The swapped-operand loop exists only in the TMA kernel, its FP8 wgmma Q K^T only for a bf16
// query over an FP8 cache (decode_kernel_info_kv_* says so through info.wgmma_qk).
template <int kHeadDim, DType kKvDtype, DType kQDtype>
DecodeKernelInfo decode_kernel_info_for_variant(bool tma, bool swapped, bool wgmma_qk) {
  if constexpr (kHeadDim <= 128) {
    if constexpr (kKvDtype != DType::kBF16 && kQDtype == DType::kBF16) {
      if (tma && swapped && wgmma_qk) {
        return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, true, true, true>();
      }
    }
    if (tma && swapped) return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, true, true>();
    if (tma) return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, true>();
  }
  return decode_kernel_info<kHeadDim, kKvDtype, kQDtype, false>();
}

template <int kHeadDim, DType kKvDtype>
DecodeKernelInfo decode_kernel_info_for_q(DType q_dtype, bool tma, bool swapped, bool wgmma_qk) {
  return q_dtype == DType::kF16 ? decode_kernel_info_for_variant<kHeadDim, kKvDtype, DType::kF16>(
                                      tma, swapped, wgmma_qk)
                                : decode_kernel_info_for_variant<kHeadDim, kKvDtype, DType::kBF16>(
                                      tma, swapped, wgmma_qk);
}

template <DType kKvDtype>
DecodeKernelInfo decode_kernel_info_for(int32_t head_dim, DType q_dtype, bool tma, bool swapped,
                                        bool wgmma_qk) {
  switch (head_dim) {
    case 64:
      return decode_kernel_info_for_q<64, kKvDtype>(q_dtype, tma, swapped, wgmma_qk);
    case 128:
      return decode_kernel_info_for_q<128, kKvDtype>(q_dtype, tma, swapped, wgmma_qk);
    default:
      return decode_kernel_info_for_q<256, kKvDtype>(q_dtype, tma, swapped, wgmma_qk);
  }
}

}  // namespace quench::decode
