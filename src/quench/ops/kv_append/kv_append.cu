// One thread per 16 bytes of a (token, KV head) row, k and v rows in one launch: a 16-byte load
// and a 16-byte store into the slot's row, which is contiguous in both layouts.
#include "quench/ops/kv_append/kv_append.h"

#include <cstdint>

#include "quench/core/device_array_check.h"
#include "quench/core/error.h"

namespace quench {

namespace {

constexpr int32_t kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    kv_append_kernel(const KvAppendParams p, int32_t elem_bytes) {
  const int32_t chunks_per_head = p.kv.head_dim * elem_bytes / 16;
  const int64_t chunks_per_token = static_cast<int64_t>(2) * p.kv.num_kv_heads * chunks_per_head;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= chunks_per_token * p.num_tokens) return;
  const int64_t t = i / chunks_per_token;
  const int64_t rest = i - t * chunks_per_token;
  const bool is_v = rest >= chunks_per_token / 2;
  const int64_t in_tensor = is_v ? rest - chunks_per_token / 2 : rest;
  const int32_t head = static_cast<int32_t>(in_tensor / chunks_per_head);
  const int32_t chunk =
      static_cast<int32_t>(in_tensor - static_cast<int64_t>(head) * chunks_per_head);
  const int64_t slot = __ldg(p.slot_mapping + t);
  if (slot < 0 || slot >= static_cast<int64_t>(p.kv.num_pages) * p.kv.page_size) return;
  const auto* src =
      static_cast<const uint8_t*>(is_v ? p.v : p.k) +
      (t * (is_v ? p.v_row_stride : p.k_row_stride) + static_cast<int64_t>(head) * p.kv.head_dim) *
          elem_bytes;
  const int64_t at =
      p.kv.offset(slot / p.kv.page_size, slot % p.kv.page_size, head, 0) * elem_bytes;
  auto* dst = static_cast<uint8_t*>(is_v ? p.v_cache : p.k_cache) + at;
  reinterpret_cast<uint4*>(dst)[chunk] = __ldg(reinterpret_cast<const uint4*>(src) + chunk);
}

}  // namespace

void kv_append_cuda(const KvAppendParams& p, cudaStream_t stream) {
  p.kv.validate();
  QUENCH_REQUIRE(p.num_tokens >= 0, "kv_append: num_tokens ", p.num_tokens, " must be >= 0");
  const int32_t elem_bytes = p.kv.dtype == DType::kBF16 ? 2 : 1;
  if (p.num_tokens == 0) return;
  const int64_t row_elems = static_cast<int64_t>(p.kv.num_kv_heads) * p.kv.head_dim;
  require_row_stride(p.k_row_stride, row_elems, "num_kv_heads * head_dim", elem_bytes, "kv_append",
                     "k_row_stride");
  require_row_stride(p.v_row_stride, row_elems, "num_kv_heads * head_dim", elem_bytes, "kv_append",
                     "v_row_stride");
  QUENCH_REQUIRE(p.slot_mapping != nullptr, "kv_append: slot_mapping is null; ", p.num_tokens,
                 " tokens need one");
  require_aligned_device_array(p.k, "kv_append", "k");
  require_aligned_device_array(p.v, "kv_append", "v");
  require_aligned_device_array(p.k_cache, "kv_append", "k_cache");
  require_aligned_device_array(p.v_cache, "kv_append", "v_cache");
  const int64_t chunks = static_cast<int64_t>(p.num_tokens) * 2 * p.kv.num_kv_heads *
                         (p.kv.head_dim * elem_bytes / 16);
  const auto blocks = static_cast<unsigned>((chunks + kThreads - 1) / kThreads);
  kv_append_kernel<<<blocks, kThreads, 0, stream>>>(p, elem_bytes);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess,
                 "kv_append kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
