// Decode kernel instantiations for a e4m3 KV cache (one file per KV dtype: parallel builds).
#include "quench/ops/attention/decode/decode_kernel_select.cuh"

namespace quench::decode {

DecodeKernelInfo decode_kernel_info_kv_e4m3(int32_t head_dim, DType q_dtype, bool tma, bool swapped,
                                            bool wgmma_qk) {
  return decode_kernel_info_for<DType::kFP8E4M3>(head_dim, q_dtype, tma, swapped, wgmma_qk);
}

}  // namespace quench::decode
