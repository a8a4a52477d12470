// Decode kernel instantiations for a bf16 KV cache (one file per KV dtype: parallel builds).
#include "quench/ops/attention/decode/decode_kernel_select.cuh"

namespace quench::decode {

DecodeKernelInfo decode_kernel_info_kv_bf16(int32_t head_dim, DType q_dtype, bool tma, bool swapped,
                                            bool wgmma_qk) {
  return decode_kernel_info_for<DType::kBF16>(head_dim, q_dtype, tma, swapped, wgmma_qk);
}

}  // namespace quench::decode
