// TMA tensor maps (CUtensorMap) over one paged K or V cache tensor (kv_cache_layout.h), for
// kernels that load a page's rows of one KV head with cp.async.bulk.tensor.
//
// The map is a 4-D view, innermost dimension first, whose strides grow outward:
//   NHD [num_pages, page_size, num_kv_heads, head_dim]: {head_dim, num_kv_heads, page_size,
//   num_pages} HND [num_pages, num_kv_heads, page_size, head_dim]: {head_dim, page_size,
//   num_kv_heads, num_pages}
// Its box is one page's rows of one head, 128 bytes of each row (64 bf16 or 128 FP8 elements),
// 128-byte swizzled: in shared memory, row r of the box is 128 bytes at r * 128 with its 16-byte
// chunk c at chunk c ^ (r % 8) (the K-major wgmma tile, when the destination is 1024-byte
// aligned). A row of 256 bytes (bf16 head_dim 128) takes two boxes, at element 0 and 64; a row
// shorter than 128 bytes (FP8 head_dim 64) is zero-filled past head_dim (out of bounds).
// Kernel coordinates: {dim0, head, 0, page} for NHD, {dim0, 0, head, page} for HND.
//
// The driver's cuTensorMapEncodeTiled is found at run time (cudaGetDriverEntryPoint): quench
// never links libcuda, so binaries load on machines without a driver.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums only

#include <array>
#include <cstdint>

#include "quench/kv_cache/kv_cache_layout.h"

namespace quench {

// The view and box of make_kv_tensor_map, computed without the driver.
struct KvTensorMapShape {
  std::array<cuuint64_t, 4> dims{};           // elements, innermost first
  std::array<cuuint64_t, 3> strides_bytes{};  // of dims 1, 2, 3
  std::array<cuuint32_t, 4> box{};            // elements: {128 bytes, 1 or page_size, ..., 1}
  uint32_t box_bytes = 0;                     // bytes one box lands in shared memory
};

// Throws quench::Error for a layout TMA cannot describe this way (page_size not 16/32/64,
// head_dim not 64/128/256, dtype not bf16 or FP8), naming the bad value and the allowed ones.
KvTensorMapShape kv_tensor_map_shape(const KvCacheLayout& kv);

// A tensor map over the K or V tensor at device address `cache` (laid out as `kv`, 16-byte
// aligned). Throws quench::Error when the layout is not served (see above), the driver has no
// cuTensorMapEncodeTiled, or the driver rejects the map (with its status). Loads promote to 256
// bytes in L2 unless the benchmark switch QUENCH_KV_TMA_L2_PROMOTION=none|64|128 says otherwise
// (decode and prefill alike; read once per process).
CUtensorMap make_kv_tensor_map(const void* cache, const KvCacheLayout& kv);

// The maps of one layer's K and V tensors, as a kernel takes them (a __grid_constant__
// parameter: the descriptors must stay in parameter or global memory).
struct KvTensorMaps {
  CUtensorMap k;
  CUtensorMap v;
};

// make_kv_tensor_map of both tensors (same layout `kv`).
KvTensorMaps make_kv_tensor_maps(const void* k_cache, const void* v_cache, const KvCacheLayout& kv);

}  // namespace quench
