// The TMA tensor maps of kv_tensor_map.h on the device: one CTA loads boxes of (page, head)
// through cp.async.bulk.tensor into 1024-byte-aligned shared memory, exactly as the Hopper
// prefill producer does, and the test compares every byte with where the host says it belongs:
// row r of a box at r * 128, its 16-byte chunk c at chunk c ^ (r % 8) (the 128-byte swizzle
// of core/sm90_wgmma.cuh's swizzle128_offset), elements past head_dim zero. Every page size,
// layout, dtype and head_dim the prefill kernel uses. When the attention tests fail with TMA, this
// says whether the map (dims, strides, box, swizzle, out-of-bounds fill) is at fault. Skipped
// unless the device is sm_90.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/core/sm90_async.cuh"
#include "quench/kv_cache/kv_tensor_map.h"

namespace quench::testing_support {
namespace {

// Two boxes (a 256-byte row: bf16 head_dim 128) of 64 rows (pages of 64).
constexpr int kProbeBytes = 2 * 64 * 128;

// Loads the `boxes` column blocks of (page, head) of `map` (one box each, `box_bytes` bytes,
// element columns 0, box_elems, ...) into shared memory, 1024-byte aligned and box after box,
// then copies the shared bytes to out [boxes * box_bytes].
__global__ void tma_box_probe_kernel(const __grid_constant__ CUtensorMap map, int page, int head,
                                     int nhd, int boxes, int box_elems, int box_bytes,
                                     uint8_t* out) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  __shared__ __align__(1024) unsigned char tile[kProbeBytes];
  __shared__ __align__(8) uint64_t landed;
  if (threadIdx.x == 0) {
    sm90_async::mbarrier_init(&landed, 1);
    sm90_async::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sm90_async::mbarrier_arrive_expect_bytes(&landed, static_cast<uint32_t>(boxes * box_bytes));
    for (int b = 0; b < boxes; ++b) {
      sm90_async::tma_load_4d(tile + b * box_bytes, &map, b * box_elems, nhd ? head : 0,
                              nhd ? 0 : head, page, &landed);
    }
  }
  sm90_async::mbarrier_wait(&landed, 0);
  for (int i = static_cast<int>(threadIdx.x); i < boxes * box_bytes; i += blockDim.x) {
    out[i] = tile[i];
  }
#endif
}

bool device_is_sm90() {
  int device = 0;
  int major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  return major == 9;
}

// A cache byte that names its place: distinct across pages, heads, rows and dims (never 0, so
// a zero where data belongs shows).
uint8_t cache_byte(int64_t byte_offset) {
  const uint64_t x = static_cast<uint64_t>(byte_offset) * 0x9E3779B97F4A7C15ull;
  return static_cast<uint8_t>((x >> 56) | 1u);
}

void expect_boxes_match(const KvCacheLayout& kv) {
  SCOPED_TRACE(kv.describe());
  const int64_t elem_bytes = static_cast<int64_t>(dtype_bytes(kv.dtype, 1));
  std::vector<uint8_t> cache(static_cast<size_t>(kv.tensor_bytes()));
  for (size_t i = 0; i < cache.size(); ++i)
    cache[i] = cache_byte(static_cast<int64_t>(i));
  DeviceBuffer device_cache = DeviceBuffer::from_host(cache);
  const CUtensorMap map = make_kv_tensor_map(device_cache.get(), kv);
  const KvTensorMapShape shape = kv_tensor_map_shape(kv);
  const int row_bytes = static_cast<int>(kv.head_dim * elem_bytes);
  const int boxes = row_bytes > 128 ? row_bytes / 128 : 1;
  const int box_bytes = static_cast<int>(shape.box_bytes);
  ASSERT_LE(boxes * box_bytes, kProbeBytes);
  DeviceBuffer out(static_cast<size_t>(boxes * box_bytes));
  // The last page and head, and one in the middle (a stride error shows at either).
  const int pages[] = {kv.num_pages - 1, kv.num_pages / 2};
  const int heads[] = {kv.num_kv_heads - 1, kv.num_kv_heads / 2};
  for (int which = 0; which < 2; ++which) {
    const int page = pages[which];
    const int head = heads[which];
    QUENCH_CUDA_CHECK(cudaMemset(out.get(), 0xee, out.bytes()));
    tma_box_probe_kernel<<<1, 128>>>(map, page, head, kv.layout == KvLayout::kNHD ? 1 : 0, boxes,
                                     static_cast<int>(shape.box[0]), box_bytes, out.as<uint8_t>());
    QUENCH_CUDA_CHECK(cudaGetLastError());
    QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> actual = out.to_host<uint8_t>();
    int mismatches = 0;
    std::string first;
    for (int b = 0; b < boxes; ++b) {
      for (int r = 0; r < kv.page_size; ++r) {
        for (int j = 0; j < 128; ++j) {
          const int64_t dim = b * 128 / elem_bytes + j / elem_bytes;
          const uint8_t expected =
              dim < kv.head_dim ? cache[static_cast<size_t>(
                                      kv.offset(page, r, head, dim) * elem_bytes + j % elem_bytes)]
                                : uint8_t{0};
          const int chunk = j / 16;
          const size_t at =
              static_cast<size_t>(b * box_bytes + r * 128 + ((chunk ^ (r % 8)) * 16) + j % 16);
          if (actual[at] == expected) continue;
          if (++mismatches <= 6) {
            first += str_cat("  page ", page, " head ", head, " box ", b, " row ", r, " byte ", j,
                             " (shared offset ", at, "): expected ", int{expected}, ", got ",
                             int{actual[at]}, "\n");
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << mismatches << " of " << boxes * box_bytes
                             << " bytes misplaced; first:\n"
                             << first;
  }
}

TEST(KvTensorMapGpu, BoxesLandSwizzledForEveryLayout) {
  if (!device_is_sm90()) GTEST_SKIP() << "TMA needs an sm_90 device";
  for (const DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
    for (const int head_dim : {64, 128}) {
      for (const int page_size : {16, 32, 64}) {
        for (const KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
          KvCacheLayout kv;
          kv.num_pages = 7;
          kv.page_size = page_size;
          kv.num_kv_heads = 3;
          kv.head_dim = head_dim;
          kv.dtype = dtype;
          kv.layout = layout;
          expect_boxes_match(kv);
        }
      }
    }
  }
}

}  // namespace
}  // namespace quench::testing_support
