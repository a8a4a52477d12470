// Description of one layer's paged KV cache: where element (page, token, head, dim) lives.
//
// K and V are separate tensors of the same shape:
//   NHD: [num_pages, page_size, num_kv_heads, head_dim]
//   HND: [num_pages, num_kv_heads, page_size, head_dim]
// Each (token, head) row of head_dim elements is contiguous in both layouts. Elements are
// bf16 (2 bytes) or FP8 (1 byte, e4m3 or e5m2). Page 0 is the null page, reserved for padding.
// The struct is plain data so that CUDA kernels take it by value.
#pragma once

#include <cstdint>
#include <string>

#include "quench/core/dtype.h"
#include "quench/core/host_device.h"

namespace quench {

// The page that padding entries of block tables point at; never handed out by PageAllocator.
inline constexpr int32_t kNullPage = 0;

enum class KvLayout : uint8_t { kNHD, kHND };

const char* kv_layout_name(KvLayout layout);
// "NHD" or "HND" (case-insensitive); throws naming the allowed values.
KvLayout parse_kv_layout(const std::string& name);

struct KvCacheLayout {
  int32_t num_pages = 0;
  int32_t page_size = 16;  // tokens per page: 16, 32 or 64
  int32_t num_kv_heads = 0;
  int32_t head_dim = 128;      // 64, 128 or 256 (K and V share it)
  DType dtype = DType::kBF16;  // bf16, fp8_e4m3 or fp8_e5m2
  KvLayout layout = KvLayout::kNHD;

  // Element offset of (page, token_in_page, head, dim) within the K (or V) tensor.
  QUENCH_HD int64_t offset(int64_t page, int64_t token, int64_t head, int64_t dim) const {
    const int64_t page_elems = static_cast<int64_t>(page_size) * num_kv_heads * head_dim;
    if (layout == KvLayout::kNHD) {
      return page * page_elems + (token * num_kv_heads + head) * head_dim + dim;
    }
    return page * page_elems + (head * page_size + token) * head_dim + dim;
  }

  // Stride in elements between consecutive tokens of one head inside a page.
  QUENCH_HD int64_t token_stride() const {
    return layout == KvLayout::kNHD ? static_cast<int64_t>(num_kv_heads) * head_dim : head_dim;
  }
  // Stride in elements between heads of one token.
  QUENCH_HD int64_t head_stride() const {
    return layout == KvLayout::kNHD ? head_dim : static_cast<int64_t>(page_size) * head_dim;
  }
  QUENCH_HD int64_t page_elems() const {
    return static_cast<int64_t>(page_size) * num_kv_heads * head_dim;
  }
  int64_t tensor_elems() const { return page_elems() * num_pages; }
  int64_t tensor_bytes() const {
    return static_cast<int64_t>(dtype_bytes(dtype, static_cast<size_t>(tensor_elems())));
  }

  // Throws quench::Error naming the first bad field and its allowed values.
  void validate() const;
  std::string describe() const;
};

}  // namespace quench
