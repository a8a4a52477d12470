#include "quench/kv_cache/kv_tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "quench/core/env_switch.h"
#include "quench/core/error.h"

namespace quench {
namespace {

constexpr uint32_t kBoxRowBytes = 128;  // the 128-byte swizzle span

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_entry() {
  static const PFN_cuTensorMapEncodeTiled_v12000 entry = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t status = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn,
                                                                12000, cudaEnableDefault, &found);
    if (status != cudaSuccess) cudaGetLastError();  // do not leave it to later calls
    QUENCH_REQUIRE(status == cudaSuccess && found == cudaDriverEntryPointSuccess && fn != nullptr,
                   "make_kv_tensor_map: the CUDA driver has no cuTensorMapEncodeTiled (",
                   cudaGetErrorString(status), "); TMA needs a CUDA 12.0 or later driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return entry;
}

// L2 promotion of the maps' loads: 256 bytes unless QUENCH_KV_TMA_L2_PROMOTION=none|64|128|256
// says otherwise (a benchmark A/B switch, read once). An NHD box row is one head's 128 bytes of
// a token row whose next 128 bytes are the next head's: 256-byte promotion brings those into L2
// for the CTA of that head (a hit if it reads them soon, a wasted DRAM read if not).
CUtensorMapL2promotion l2_promotion() {
  static const CUtensorMapL2promotion promotion = [] {
    const std::string name = env_switch("QUENCH_KV_TMA_L2_PROMOTION", {"256", "none", "64", "128"});
    if (name == "none") return CU_TENSOR_MAP_L2_PROMOTION_NONE;
    if (name == "64") return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    if (name == "128") return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  }();
  return promotion;
}

}  // namespace

KvTensorMapShape kv_tensor_map_shape(const KvCacheLayout& kv) {
  QUENCH_REQUIRE(kv.page_size == 16 || kv.page_size == 32 || kv.page_size == 64,
                 "kv_tensor_map: page_size=", kv.page_size,
                 " is not supported; allowed: 16, 32, 64");
  QUENCH_REQUIRE(kv.head_dim == 64 || kv.head_dim == 128 || kv.head_dim == 256,
                 "kv_tensor_map: head_dim=", kv.head_dim,
                 " is not supported; allowed: 64, 128, 256");
  QUENCH_REQUIRE(kv.dtype == DType::kBF16 || is_fp8(kv.dtype), "kv_tensor_map: dtype ",
                 dtype_name(kv.dtype), " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2");
  QUENCH_REQUIRE(kv.num_kv_heads > 0 && kv.num_pages > 0,
                 "kv_tensor_map: num_kv_heads=", kv.num_kv_heads, " and num_pages=", kv.num_pages,
                 " must be positive");
  const cuuint64_t elem_bytes = dtype_bytes(kv.dtype, 1);
  const cuuint64_t token_stride = static_cast<cuuint64_t>(kv.token_stride()) * elem_bytes;
  const cuuint64_t head_stride = static_cast<cuuint64_t>(kv.head_stride()) * elem_bytes;
  const cuuint64_t page_stride = static_cast<cuuint64_t>(kv.page_elems()) * elem_bytes;
  const auto page_size = static_cast<cuuint64_t>(kv.page_size);
  const auto heads = static_cast<cuuint64_t>(kv.num_kv_heads);
  KvTensorMapShape shape;
  const auto box_row = static_cast<cuuint32_t>(kBoxRowBytes / elem_bytes);
  const auto box_tokens = static_cast<cuuint32_t>(kv.page_size);
  if (kv.layout == KvLayout::kNHD) {
    shape.dims = {static_cast<cuuint64_t>(kv.head_dim), heads, page_size,
                  static_cast<cuuint64_t>(kv.num_pages)};
    shape.strides_bytes = {head_stride, token_stride, page_stride};
    shape.box = {box_row, 1, box_tokens, 1};
  } else {
    shape.dims = {static_cast<cuuint64_t>(kv.head_dim), page_size, heads,
                  static_cast<cuuint64_t>(kv.num_pages)};
    shape.strides_bytes = {token_stride, head_stride, page_stride};
    shape.box = {box_row, box_tokens, 1, 1};
  }
  shape.box_bytes = kBoxRowBytes * box_tokens;
  return shape;
}

CUtensorMap make_kv_tensor_map(const void* cache, const KvCacheLayout& kv) {
  const KvTensorMapShape shape = kv_tensor_map_shape(kv);
  QUENCH_REQUIRE(cache != nullptr && reinterpret_cast<uintptr_t>(cache) % 16 == 0,
                 "make_kv_tensor_map: the cache address must be non-null and 16-byte aligned");
  const CUtensorMapDataType type =
      kv.dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const std::array<cuuint32_t, 4> element_strides = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult status = encode_tiled_entry()(
      &map, type, 4, const_cast<void*>(cache), shape.dims.data(), shape.strides_bytes.data(),
      shape.box.data(), element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, l2_promotion(), CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  QUENCH_REQUIRE(status == CUDA_SUCCESS,
                 "make_kv_tensor_map: cuTensorMapEncodeTiled failed (CUresult ",
                 static_cast<int>(status), ") for ", kv.describe());
  return map;
}

KvTensorMaps make_kv_tensor_maps(const void* k_cache, const void* v_cache,
                                 const KvCacheLayout& kv) {
  return KvTensorMaps{make_kv_tensor_map(k_cache, kv), make_kv_tensor_map(v_cache, kv)};
}

}  // namespace quench
