// cached_kv_tensor_maps: the maps it returns are byte for byte the ones make_kv_tensor_maps
// encodes, for a first call, a repeated call and a call that differs in one key field only
// (pointer, page count, layout); a layout it cannot serve throws every time (nothing cached).
// Needs a CUDA driver (the encoder is a driver entry point): skipped without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "quench/kv_cache/kv_tensor_map_cache.h"

namespace quench::testing_support {
namespace {

bool has_device() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

bool same_bytes(const KvTensorMaps& a, const KvTensorMaps& b) {
  return std::memcmp(&a, &b, sizeof(KvTensorMaps)) == 0;
}

KvCacheLayout fp8_layout() {
  KvCacheLayout kv;
  kv.num_pages = 9;
  kv.page_size = 16;
  kv.num_kv_heads = 4;
  kv.head_dim = 128;
  kv.dtype = DType::kFP8E4M3;
  kv.layout = KvLayout::kNHD;
  return kv;
}

TEST(KvTensorMapCacheGpu, ReturnsTheMapsMakeWouldEncode) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  KvCacheLayout kv = fp8_layout();
  DeviceBuffer k(static_cast<size_t>(kv.tensor_bytes()) * 2);
  DeviceBuffer v(static_cast<size_t>(kv.tensor_bytes()) * 2);
  const auto* k_base = k.as<uint8_t>();
  const auto* v_base = v.as<uint8_t>();
  EXPECT_TRUE(same_bytes(cached_kv_tensor_maps(k_base, v_base, kv),
                         make_kv_tensor_maps(k_base, v_base, kv)));
  EXPECT_TRUE(same_bytes(cached_kv_tensor_maps(k_base, v_base, kv),
                         make_kv_tensor_maps(k_base, v_base, kv)))
      << "second (cached) call";
  // One key field changed at a time: each must give its own map, not the cached one.
  const uint8_t* k_moved = k_base + 1024;
  EXPECT_TRUE(same_bytes(cached_kv_tensor_maps(k_moved, v_base, kv),
                         make_kv_tensor_maps(k_moved, v_base, kv)))
      << "K pointer moved";
  kv.num_pages = 18;
  EXPECT_TRUE(same_bytes(cached_kv_tensor_maps(k_base, v_base, kv),
                         make_kv_tensor_maps(k_base, v_base, kv)))
      << "num_pages changed";
  kv.layout = KvLayout::kHND;
  EXPECT_TRUE(same_bytes(cached_kv_tensor_maps(k_base, v_base, kv),
                         make_kv_tensor_maps(k_base, v_base, kv)))
      << "layout changed";
  EXPECT_FALSE(same_bytes(cached_kv_tensor_maps(k_base, v_base, kv),
                          cached_kv_tensor_maps(k_base, v_base, fp8_layout())))
      << "NHD and HND maps must differ";
}

TEST(KvTensorMapCacheGpu, UnservedLayoutThrowsEveryTime) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  KvCacheLayout kv = fp8_layout();
  kv.page_size = 8;
  DeviceBuffer k(4096), v(4096);
  for (int call = 0; call < 2; ++call) {
    EXPECT_QUENCH_ERROR(cached_kv_tensor_maps(k.get(), v.get(), kv), {"page_size=8", "16"});
  }
}

}  // namespace
}  // namespace quench::testing_support
